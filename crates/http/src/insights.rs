//! Insights: `POST /1/events` and `DELETE /1/usertokens/{userToken}`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use affinity_engine::{Event, Limits};
use axum::extract::{Path, State as Shared};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use crate::auth::{Acl, Caller};
use crate::error::{blocking, Error, Result, MAX_BATCH_EVENTS};
use crate::body::Body;
use crate::state::State;

/// Check a user token of a path: `[a-zA-Z0-9_=/+-]{1,129}`.
pub fn check_user_token(token: &str) -> Result<()> {
    let ok = (1..=129).contains(&token.len())
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_=/+-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(Error::unprocessable(
            "userToken",
            "UserToken must match [a-zA-Z0-9_=/+-]{1,129}",
        ))
    }
}

/// The events of a body, checked for shape and count before any of them
/// is validated.
fn event_list(body: &Value) -> Result<&Vec<Value>> {
    let events = body
        .get("events")
        .and_then(Value::as_array)
        .ok_or_else(|| Error::unprocessable("events", "Events must be an array of events"))?;
    if events.len() > MAX_BATCH_EVENTS {
        return Err(Error::unprocessable(
            "events",
            "Cannot process more than 1000 events in a batch",
        ));
    }
    if events.is_empty() {
        return Err(Error::unprocessable(
            "events",
            "Events must contain at least one event",
        ));
    }
    Ok(events)
}

/// `POST /1/events`: all or nothing; 200 only once the engine has stored
/// the batch durably.
pub async fn post_events(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    body: Body,
) -> Result<Json<Value>> {
    caller.require(Acl::Events)?;
    let shared = Arc::clone(&state);
    // (outcome, events of the request) so rejected events can be counted.
    let (outcome, count) = blocking(move || {
        let value = match body.json() {
            Ok(v) => v,
            Err(e) => return Ok((Err(e), 0)),
        };
        let count = value
            .get("events")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        Ok((ingest(&shared, &caller.app, &value), count))
    })
    .await?;
    match outcome {
        Ok(()) => {
            state
                .metrics
                .events_ingested
                .fetch_add(count as u64, Ordering::Relaxed);
            Ok(Json(json!({"status": 200, "message": "OK"})))
        }
        Err(e) => {
            if e.status().is_client_error() {
                state
                    .metrics
                    .events_rejected
                    .fetch_add(count as u64, Ordering::Relaxed);
            }
            Err(e)
        }
    }
}

/// Validate every event, then store them all (blocking).
fn ingest(state: &State, app: &str, body: &Value) -> Result<()> {
    let list = event_list(body)?;
    let limits = Limits::api(state.engine.now_millis());
    let events = list
        .iter()
        .map(|v| Event::from_json(v, &limits))
        .collect::<Result<Vec<_>, _>>()?;
    state.engine.ingest(app, &events)?;
    Ok(())
}

/// `DELETE /1/usertokens/{userToken}`: every event and the profile of the
/// user; 204 once deleted.
pub async fn delete_user_token(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    Path(user): Path<String>,
) -> Result<StatusCode> {
    caller.require(Acl::Admin)?;
    check_user_token(&user)?;
    blocking(move || Ok(state.engine.delete_user(&caller.app, &user)?)).await?;
    Ok(StatusCode::NO_CONTENT)
}
