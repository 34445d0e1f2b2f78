//! Insights: `POST /1/events`, the events debugger's
//! `GET /1/events/debug` and `DELETE /1/usertokens/{userToken}`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use std::time::Duration;

use affinity_engine::{Event, Limits};
use axum::extract::{Path, Query, State as Shared};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use crate::auth::{Acl, Caller};
use crate::body::Body;
use crate::debug::{Filter, Rejection, RequestOrigin};
use crate::error::{blocking, Error, Result, MAX_BATCH_EVENTS};
use crate::secured::Restrictions;
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
pub(crate) fn event_list(body: &Value) -> Result<&Vec<Value>> {
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
/// the batch durably. Every outcome is kept in the events debugger and
/// every rejection counted by reason, including those of the credentials
/// and the body, hence the fallible extractors.
pub async fn post_events(
    Shared(state): Shared<Arc<State>>,
    origin: RequestOrigin,
    caller: Result<Caller>,
    body: Result<Body>,
) -> Result<Json<Value>> {
    let received = state.engine.now_millis();
    let origin = Arc::new(origin);
    let caller = caller.inspect_err(|e| state.metrics.reject(e.code(), 1))?;
    let reject = |e: Error, at: Option<usize>, events: Vec<Value>| {
        if e.status().is_client_error() {
            state.metrics.reject(e.code(), events.len().max(1) as u64);
        }
        let message = match at {
            Some(i) => format!("events[{i}]: {e}"),
            None => e.to_string(),
        };
        let rejection = Rejection {
            status: e.status().as_u16(),
            code: e.code().to_string(),
            message,
        };
        state.debug.record(
            &caller.app,
            received,
            Some(rejection),
            events,
            Arc::clone(&origin),
        );
        Err(e)
    };
    if let Err(e) = caller.require(Acl::Events) {
        return reject(e, None, Vec::new());
    }
    let body = match body {
        Ok(body) => body,
        Err(e) => return reject(e, None, Vec::new()),
    };
    let shared = Arc::clone(&state);
    let app = caller.app.clone();
    let restrictions = caller.restrictions.clone();
    let (outcome, events) = state
        .limiter
        .ingest(move || {
            let mut value = match body.json() {
                Ok(v) => v,
                Err(e) => return Ok((Err((e, None)), vec![excerpt(body.raw())])),
            };
            let outcome = ingest(&shared, &app, restrictions.as_deref(), &value);
            let events = match value.get_mut("events").map(Value::take) {
                Some(Value::Array(events)) => events,
                _ => vec![value],
            };
            Ok((outcome, events))
        })
        .await?;
    match outcome {
        Ok(()) => {
            state
                .metrics
                .events_ingested
                .fetch_add(events.len() as u64, Ordering::Relaxed);
            state
                .debug
                .record(&caller.app, received, None, events, origin);
            Ok(Json(json!({"status": 200, "message": "OK"})))
        }
        Err((e, at)) => reject(e, at, events),
    }
}

/// The start of a body that is not JSON, as the debugger shows it.
fn excerpt(raw: &[u8]) -> Value {
    const KEEP: usize = 512;
    let text = String::from_utf8_lossy(&raw[..raw.len().min(KEEP)]);
    Value::String(text.into_owned())
}

/// Validate every event, then store them all (blocking); a failure names
/// the event at fault when there is one. A secured key's restrictions
/// hold for every event: its `index` must be one of `restrictIndices`,
/// and the user it is stored under (`authenticatedUserToken` when
/// present, else `userToken`) must be the key's `userToken`.
fn ingest(
    state: &State,
    app: &str,
    restrictions: Option<&Restrictions>,
    body: &Value,
) -> Result<(), (Error, Option<usize>)> {
    let list = event_list(body).map_err(|e| (e, None))?;
    let limits = Limits::api(state.engine.now_millis());
    let events = list
        .iter()
        .enumerate()
        .map(|(i, v)| Event::from_json(v, &limits).map_err(|e| (e.into(), Some(i))))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(r) = restrictions {
        for (i, event) in events.iter().enumerate() {
            let user = event
                .authenticated_user_token
                .as_deref()
                .unwrap_or(&event.user_token);
            // The answer names the event at fault (and so does the
            // debugger, which is given no index to add).
            r.check_index(&event.index)
                .and_then(|()| r.check_user(user))
                .map_err(|e| {
                    let message = format!("events[{i}]: {e}");
                    (Error::Restricted { message }, None)
                })?;
        }
    }
    state
        .engine
        .ingest(app, &events)
        .map_err(|e| (e.into(), None))?;
    Ok(())
}

/// `GET /1/events/debug`: the application's last events on this server
/// (see [`crate::debug`]); with `since` and `wait`, a long poll that
/// answers as soon as a matching event arrives.
pub async fn get_debug(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Json<Value>> {
    caller.require(Acl::Profiles)?;
    let (mut filter, wait) = debug_query(&params)?;
    // A key restricted to one user sees that user's events only.
    if let Some(only) = caller.only_user() {
        if let Some(asked) = &filter.user_token {
            caller.require_user(asked)?;
        }
        filter.user_token = Some(only.to_string());
    }
    let deadline = tokio::time::Instant::now() + wait;
    let mut changed = state.debug.subscribe(&caller.app);
    // A long poll ends when the server stops, so it never holds up a
    // graceful shutdown.
    let mut stopping = state.stopping();
    loop {
        let (entries, cursor) = state.debug.query(&caller.app, &filter);
        let waiting = entries.is_empty() && filter.since.is_some() && !*stopping.borrow();
        let arrived = waiting
            && tokio::select! {
                changed = tokio::time::timeout_at(deadline, changed.changed()) => {
                    matches!(changed, Ok(Ok(())))
                }
                _ = stopping.changed() => true,
            };
        if !arrived {
            let events: Vec<Value> = entries.iter().map(|e| e.to_json()).collect();
            return Ok(Json(json!({"events": events, "cursor": cursor})));
        }
    }
}

/// The most entries one debugger answer holds.
pub const MAX_DEBUG_LIMIT: usize = 1000;
/// The longest long poll.
pub const MAX_DEBUG_WAIT: Duration = Duration::from_secs(60);

/// The debugger's query parameters (others, like credentials, ignored).
fn debug_query(params: &[(String, String)]) -> Result<(Filter, Duration)> {
    let bad = |name: &'static str, reason: &str| {
        Error::Engine(affinity_engine::Error::InvalidArgument {
            name,
            reason: reason.to_string(),
        })
    };
    let mut filter = Filter {
        limit: 100,
        ..Filter::default()
    };
    let mut wait = Duration::ZERO;
    for (name, value) in params {
        match name.as_str() {
            "status" => {
                filter.accepted = match value.as_str() {
                    "accepted" => Some(true),
                    "rejected" => Some(false),
                    _ => return Err(bad("status", "must be accepted or rejected")),
                }
            }
            "userToken" => filter.user_token = Some(value.clone()),
            "eventName" => filter.event_name = Some(value.clone()),
            "limit" => {
                filter.limit = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_DEBUG_LIMIT).contains(n))
                    .ok_or_else(|| bad("limit", "must be an integer from 1 to 1000"))?
            }
            "since" => {
                filter.since = Some(
                    value
                        .parse()
                        .map_err(|_| bad("since", "must be a non-negative integer"))?,
                )
            }
            "wait" => {
                wait = value
                    .parse::<u64>()
                    .ok()
                    .map(Duration::from_secs)
                    .filter(|w| *w <= MAX_DEBUG_WAIT)
                    .ok_or_else(|| bad("wait", "must be an integer from 0 to 60 (seconds)"))?
            }
            _ => {}
        }
    }
    Ok((filter, wait))
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
    caller.require_user(&user)?;
    blocking(move || Ok(state.engine.delete_user(&caller.app, &user)?)).await?;
    Ok(StatusCode::NO_CONTENT)
}
