//! A score explained, and a strategy tried before it ships.
//!
//! - `GET /1/profiles/personalization/{userToken}/explain?facet=F&value=V`:
//!   the events, day by day, that make one score (the engine's
//!   `Engine::explain`, read from the events table: not a hot path).
//!   ACL `profiles`, not `search`: it shows when a user did what, which a
//!   browser's search key should not, while the profile read shows only
//!   scores.
//! - `POST /1/strategies/personalization/preview`: profiles under a
//!   candidate strategy next to the current ones, storing nothing. ACL
//!   `profiles`: it reads other users' profiles (and with `sample`, names
//!   users), which a search key may not; setting the strategy stays
//!   `admin`.

use std::sync::Arc;

use affinity_engine::{Strategy, MAX_PREVIEW_USERS};
use axum::extract::{Path, Query, State as Shared};
use axum::response::IntoResponse;
use axum::Json;
use serde_json::{json, Value};

use crate::auth::{Acl, Caller};
use crate::body::Body;
use crate::error::{blocking, Error, Result};
use crate::insights::check_user_token;
use crate::state::State;
use crate::variants;

/// The parameter named `name` of a query, if given; given twice is a 422
/// naming it.
pub(crate) fn optional_param<'a>(
    params: &'a [(String, String)],
    name: &'static str,
) -> Result<Option<&'a str>> {
    let mut found = params.iter().filter(|(k, _)| k == name);
    match (found.next(), found.next()) {
        (Some(_), Some(_)) => Err(Error::unprocessable(
            name,
            format!("{name} must be given once"),
        )),
        (found, _) => Ok(found.map(|(_, v)| v.as_str())),
    }
}

/// The one parameter named `name` of a query, required and not empty.
fn param<'a>(params: &'a [(String, String)], name: &'static str) -> Result<&'a str> {
    match optional_param(params, name)? {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(Error::unprocessable(name, format!("{name} is required"))),
    }
}

/// `GET /1/profiles/personalization/{userToken}/explain`: 404 for a user
/// without a profile (as the profile read), 400 for a facet the strategy
/// does not score.
pub async fn get_explain(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    Path(user): Path<String>,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<axum::response::Response> {
    caller.require(Acl::Profiles)?;
    check_user_token(&user)?;
    caller.require_user(&user)?;
    let facet = param(&params, "facet")?.to_string();
    let value = param(&params, "value")?.to_string();
    let forced = variants::forced(&params)?;
    let explained = blocking(move || {
        let Some(serving) = state.serving(&caller.app, &user, forced.as_deref())? else {
            return Ok(None);
        };
        let explained =
            state
                .engine
                .explain_with(&caller.app, &user, &facet, &value, &serving.strategy)?;
        Ok(explained.map(|x| (x, serving.variant)))
    })
    .await?;
    match explained {
        Some((x, variant)) => {
            let mut json = x.to_json();
            if let Some(v) = &variant {
                json["variant"] = json!(v);
            }
            Ok(variants::tagged(
                Json(json).into_response(),
                variant.as_deref(),
            ))
        }
        None => Err(Error::not_found("User not found")),
    }
}

/// The users a preview body names: `userTokens` (1 to 100 valid tokens)
/// or `sample` (1 to 100), exactly one of the two.
enum Users {
    Named(Vec<String>),
    Sample(usize),
}

fn preview_users(body: &Value) -> Result<Users> {
    match (body.get("userTokens"), body.get("sample")) {
        (Some(_), Some(_)) => Err(Error::unprocessable(
            "userTokens",
            "Give userTokens or sample, not both",
        )),
        (Some(list), None) => {
            let list = list.as_array().ok_or_else(|| {
                Error::unprocessable("userTokens", "userTokens must be an array of strings")
            })?;
            if list.is_empty() || list.len() > MAX_PREVIEW_USERS {
                return Err(Error::unprocessable(
                    "userTokens",
                    format!(
                        "userTokens must list 1 to {MAX_PREVIEW_USERS} users, not {}",
                        list.len()
                    ),
                ));
            }
            let mut users = Vec::with_capacity(list.len());
            for item in list {
                let token = item.as_str().ok_or_else(|| {
                    Error::unprocessable("userTokens", "userTokens must be an array of strings")
                })?;
                check_user_token(token).map_err(|_| {
                    Error::unprocessable(
                        "userTokens",
                        format!("userTokens: {token:?} must match [a-zA-Z0-9_=/+-]{{1,129}}"),
                    )
                })?;
                users.push(token.to_string());
            }
            Ok(Users::Named(users))
        }
        (None, Some(n)) => match n.as_u64() {
            Some(n) if (1..=MAX_PREVIEW_USERS as u64).contains(&n) => Ok(Users::Sample(n as usize)),
            _ => Err(Error::unprocessable(
                "sample",
                format!("sample must be an integer between 1 and {MAX_PREVIEW_USERS}"),
            )),
        },
        (None, None) => Err(Error::unprocessable(
            "userTokens",
            "userTokens or sample is required",
        )),
    }
}

/// `POST /1/strategies/personalization/preview`: the candidate is
/// validated exactly as `POST /1/strategies/personalization` validates a
/// strategy (same errors), then each user's profile is scored under it
/// and under the current strategy; nothing is stored.
pub async fn post_preview(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    body: Body,
) -> Result<Json<Value>> {
    caller.require(Acl::Profiles)?;
    if caller.only_user().is_some() {
        // A preview reads other users' profiles (a sample lists them).
        return Err(Error::Restricted {
            message: "A key restricted to one userToken cannot preview a strategy".into(),
        });
    }
    let previews = blocking(move || {
        let body = body.json()?;
        if let Some(extra) = body.as_object().and_then(|o| {
            o.keys()
                .find(|k| !["strategy", "userTokens", "sample"].contains(&k.as_str()))
        }) {
            return Err(Error::unprocessable(
                "preview",
                format!("Unknown field {extra}"),
            ));
        }
        let candidate = body
            .get("strategy")
            .ok_or_else(|| Error::unprocessable("strategy", "strategy is required"))?;
        let candidate = Strategy::from_json(candidate)?;
        let users = match preview_users(&body)? {
            Users::Named(users) => users,
            Users::Sample(n) => state.engine.sample_users(&caller.app, n)?,
        };
        Ok(state.engine.preview(&caller.app, &candidate, &users)?)
    })
    .await?;
    let users: Vec<Value> = previews.iter().map(|p| p.to_json()).collect();
    Ok(Json(json!({ "users": users })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preview_bodies_name_the_field_at_fault() {
        let many: Vec<String> = (0..=MAX_PREVIEW_USERS).map(|i| format!("u{i}")).collect();
        for (body, field) in [
            (json!({}), "userTokens"),
            (json!({"userTokens": []}), "userTokens"),
            (json!({"userTokens": many}), "userTokens"),
            (json!({"userTokens": ["a b"]}), "userTokens"),
            (json!({"userTokens": [1]}), "userTokens"),
            (json!({"userTokens": ["a"], "sample": 3}), "userTokens"),
            (json!({"sample": 0}), "sample"),
            (json!({"sample": 101}), "sample"),
            (json!({"sample": "3"}), "sample"),
        ] {
            let err = preview_users(&body).err().expect("refused");
            assert_eq!(err.field(), Some(field), "{body}");
            assert_eq!(err.status(), 422, "{body}");
        }
        assert!(matches!(
            preview_users(&json!({"sample": 100})),
            Ok(Users::Sample(100))
        ));
        assert!(matches!(
            preview_users(&json!({"userTokens": ["a", "b"]})),
            Ok(Users::Named(u)) if u == ["a", "b"]
        ));
    }

    #[test]
    fn explain_parameters_are_required_once() {
        let params = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            param(&params(&[("facet", "brand")]), "facet").ok(),
            Some("brand")
        );
        for list in [
            vec![],
            vec![("facet", "")],
            vec![("facet", "a"), ("facet", "b")],
        ] {
            let err = param(&params(&list), "facet").expect_err("refused");
            assert_eq!(err.field(), Some("facet"));
        }
    }
}
