//! The world of the identity property tests (`identity.rs`, `explain.rs`):
//! four anonymous tokens, two authenticated ones, generated events that
//! may log in, and the identity rules of `docs/design/identity.md`
//! written naively.

use std::collections::BTreeSet;

use affinity_engine::{Engine, Event, Limits};

use super::{event_json, DAY};

/// One generated event: `(kind, anonymous token, login as, hours before
/// now, items)`.
pub type GenEvent = (u8, u8, Option<u8>, u32, Vec<u8>);

pub fn anonymous(n: u8) -> String {
    format!("user-{}", n % 4)
}

pub fn authenticated(n: u8) -> String {
    format!("member-{}", n % 2)
}

/// Every token of the world: the anonymous ones, then the identities.
pub fn tokens() -> Vec<String> {
    (0..4)
        .map(anonymous)
        .chain((0..2).map(authenticated))
        .collect()
}

/// The first millisecond of the window at `now` (whole days).
pub fn window_start(now: i64, retention_days: u32) -> i64 {
    ((now - i64::from(retention_days) * DAY).div_euclid(DAY) + 1) * DAY
}

/// The reference: events kept, links `(anonymous, identity, time)` kept.
#[derive(Default)]
pub struct Reference {
    pub events: Vec<Event>,
    pub links: Vec<(String, String, i64)>,
}

impl Reference {
    /// Ingest `list` at `now` into `engine` and the reference (events the
    /// API refuses are left out of both); `false` when none was left.
    pub fn ingest(
        &mut self,
        engine: &Engine,
        app: &str,
        list: &[GenEvent],
        now: i64,
        retention_days: u32,
    ) -> bool {
        let limits = Limits {
            now_millis: now,
            max_age_millis: i64::from(retention_days) * DAY,
            max_skew_millis: 3_600_000,
        };
        let events: Vec<Event> = list
            .iter()
            .filter_map(|(kind, anon, login, hours, items)| {
                let ts = now - i64::from(*hours) * 3_600_000 - i64::from(*kind);
                let mut v = event_json(*kind, *anon, ts, items, false);
                if let Some(a) = login {
                    v["authenticatedUserToken"] = authenticated(*a).into();
                }
                Event::from_json(&v, &limits).ok()
            })
            .collect();
        if events.is_empty() {
            return false;
        }
        engine.ingest(app, &events).unwrap();
        for e in &events {
            if let Some(a) = &e.authenticated_user_token {
                self.links
                    .push((e.user_token.clone(), a.clone(), e.timestamp_millis));
            }
        }
        self.events.extend(events);
        true
    }

    /// The identity `token` belongs to: its first link within the window
    /// (ties: the smaller identity).
    pub fn owner(&self, token: &str, window_start: i64) -> Option<&str> {
        self.links
            .iter()
            .filter(|(x, _, t)| x == token && *t >= window_start)
            .min_by(|a, b| a.2.cmp(&b.2).then_with(|| a.1.cmp(&b.1)))
            .map(|(_, a, _)| a.as_str())
    }

    /// The members of `token`'s identity, the identity among them.
    pub fn members(&self, token: &str, window_start: i64) -> BTreeSet<String> {
        let owner = self.owner(token, window_start).unwrap_or(token).to_string();
        let mut out: BTreeSet<String> = self
            .links
            .iter()
            .map(|(x, _, _)| x.clone())
            .filter(|x| self.owner(x, window_start) == Some(owner.as_str()))
            .collect();
        out.insert(owner);
        out
    }
}
