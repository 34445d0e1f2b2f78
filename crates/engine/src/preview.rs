//! Trying a strategy before it ships: users' profiles under a candidate
//! strategy next to their profiles under the current one, storing nothing.
//!
//! Profiles are scored at read time from raw counters, so a candidate is
//! scored exactly as it would be once set: [`Engine::profile_with`] over
//! the same state. The users are named, or sampled from the profiles
//! table (see [`Engine::sample_users`]).

use affinity_model::{prefix_successor, Bytes, RowRange};

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::maintain::next_user;
use crate::scoring::Profile;
use crate::strategy::Strategy;

/// The most users one preview scores.
pub const MAX_PREVIEW_USERS: usize = 100;

/// One user's profile under the current strategy and under a candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preview {
    pub user_token: String,
    /// `None` without a current strategy or without a scoring event.
    pub current: Option<Profile>,
    /// `None` when no event of the user scores under the candidate.
    pub candidate: Option<Profile>,
}

impl Preview {
    /// The API's JSON: `{"userToken", "current", "candidate"}`, each
    /// profile as a profile read answers it, or `null`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"userToken": self.user_token,
            "current": self.current.as_ref().map(Profile::to_json),
            "candidate": self.candidate.as_ref().map(Profile::to_json)})
    }
}

/// The first and last byte a user token may hold (`+` and `z`: tokens are
/// `[a-zA-Z0-9_=/+-]`), the alphabet sample points are spread over.
const TOKEN_LOW: u8 = b'+';
const TOKEN_SPAN: usize = (b'z' - b'+' + 1) as usize;

impl Engine {
    /// Each of `users`' profile under the current strategy and under
    /// `candidate`, in the order given; nothing is stored. At most
    /// [`MAX_PREVIEW_USERS`] users.
    pub fn preview(
        &self,
        app: &str,
        candidate: &Strategy,
        users: &[String],
    ) -> Result<Vec<Preview>> {
        if users.len() > MAX_PREVIEW_USERS {
            return Err(Error::InvalidArgument {
                name: "userTokens",
                reason: format!(
                    "{} users, the most a preview scores is {MAX_PREVIEW_USERS}",
                    users.len()
                ),
            });
        }
        let current = self.strategy(app)?;
        users
            .iter()
            .map(|user| {
                let current = match &current {
                    Some(s) => self.profile_with(app, user, s)?,
                    None => None,
                };
                Ok(Preview {
                    user_token: user.clone(),
                    current,
                    candidate: self.profile_with(app, user, candidate)?,
                })
            })
            .collect()
    }

    /// Up to `n` user tokens of the application, a deterministic sample
    /// (the same table gives the same users) spread over the key space:
    /// for `i` in `0..n`, the first user at or after the two-character
    /// point `i / n` of the way through the token alphabet; if points land
    /// on users already taken, the rest are the first users in key order
    /// not taken. Users are those of the profiles table (anyone with
    /// profile state, a rollup or a deletion in the last week), as
    /// maintenance walks them. Costs at most `2n` one-row reads. At most
    /// [`MAX_PREVIEW_USERS`].
    pub fn sample_users(&self, app: &str, n: usize) -> Result<Vec<String>> {
        if !(1..=MAX_PREVIEW_USERS).contains(&n) {
            return Err(Error::InvalidArgument {
                name: "sample",
                reason: format!("{n} users, must be 1 to {MAX_PREVIEW_USERS}"),
            });
        }
        let app = self.app(app)?;
        // Job rows (`~...`) sort after every user token.
        let users = RowRange {
            start: std::ops::Bound::Unbounded,
            end: std::ops::Bound::Excluded(Bytes::from_static(b"~")),
        };
        let points = TOKEN_SPAN * TOKEN_SPAN;
        let mut taken: Vec<String> = Vec::with_capacity(n);
        for i in 0..n {
            let p = i * points / n;
            let key = [
                TOKEN_LOW + (p / TOKEN_SPAN) as u8,
                TOKEN_LOW + (p % TOKEN_SPAN) as u8,
            ];
            let cursor = std::ops::Bound::Included(Bytes::copy_from_slice(&key));
            match next_user(&app, &users, &cursor)? {
                Some(user) if !taken.contains(&user) => taken.push(user),
                _ => {}
            }
        }
        let mut cursor = std::ops::Bound::Unbounded;
        while taken.len() < n {
            let Some(user) = next_user(&app, &users, &cursor)? else {
                break;
            };
            if !taken.contains(&user) {
                taken.push(user.clone());
            }
            match prefix_successor(format!("{user},").as_bytes()) {
                Some(after) => cursor = std::ops::Bound::Included(Bytes::from(after)),
                None => break,
            }
        }
        taken.sort();
        Ok(taken)
    }
}
