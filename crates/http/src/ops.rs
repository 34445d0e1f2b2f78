//! Operations: jobs, health, metrics and the OpenAPI document.

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Path, State as Shared};
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::Json;
use serde_json::{json, Value};

use crate::auth::{Acl, Caller};
use crate::error::{Error, Result};
use crate::state::State;

/// The OpenAPI 3 document of the whole API.
pub const OPENAPI: &str = include_str!("openapi.json");

/// `GET /1/jobs`: the application's jobs, whoever runs them, newest
/// first (the records in the store).
pub async fn list_jobs(Shared(state): Shared<Arc<State>>, caller: Caller) -> Result<Json<Value>> {
    caller.require(Acl::Profiles)?;
    crate::error::blocking(move || {
        let now = state.engine.now_millis();
        let jobs: Vec<Value> = state
            .engine
            .jobs(&caller.app, JOBS_LISTED)?
            .iter()
            .map(|j| j.to_json(now))
            .collect();
        Ok(Json(json!({ "jobs": jobs })))
    })
    .await
}

/// Most jobs `GET /1/jobs` lists.
const JOBS_LISTED: usize = 100;

/// `GET /1/jobs/{jobID}`.
pub async fn get_job(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    caller.require(Acl::Profiles)?;
    crate::error::blocking(move || {
        let job = state
            .engine
            .job(&caller.app, &id)?
            .ok_or_else(|| Error::not_found(format!("Job {id:?} not found")))?;
        Ok(Json(job.to_json(state.engine.now_millis())))
    })
    .await
}

/// `GET /health`: the process is up and the store answers.
pub async fn health(Shared(state): Shared<Arc<State>>) -> Result<Json<Value>> {
    crate::error::blocking(move || {
        state
            .engine
            .store()
            .list_tables()
            .map_err(|e| Error::Engine(affinity_engine::Error::Store(e)))?;
        Ok(Json(json!({"status": "ok"})))
    })
    .await
}

/// The figures of the `kind` cache (`profile`, `rollup`) in `text`; `lookups`
/// says what its lookups are.
fn cache_metrics(
    text: &mut String,
    kind: &str,
    lookups: &str,
    c: affinity_engine::cache::CacheStats,
) {
    let name = format!("affinity_{kind}_cache_lookups_total");
    let _ = writeln!(
        text,
        "# HELP {name} {lookups}\n# TYPE {name} counter\n\
         {name}{{result=\"hit\"}} {}\n{name}{{result=\"miss\"}} {}",
        c.hits, c.misses
    );
    let name = format!("affinity_{kind}_cache_evictions_total");
    let _ = writeln!(
        text,
        "# HELP {name} Entries of the {kind} cache dropped to stay within its budget.\n\
         # TYPE {name} counter\n{name} {}",
        c.evictions
    );
    let name = format!("affinity_{kind}_cache_bytes");
    let _ = writeln!(
        text,
        "# HELP {name} Bytes the {kind} cache holds, and its budget.\n\
         # TYPE {name} gauge\n{name}{{of=\"entries\"}} {}\n{name}{{of=\"budget\"}} {}",
        c.bytes, c.budget
    );
}

/// `GET /metrics`: Prometheus text format.
pub async fn metrics(Shared(state): Shared<Arc<State>>) -> impl IntoResponse {
    let mut text = state.metrics.render(&state.jobs);
    state.limiter.render_metrics(&mut text);
    let (listed, failed) = state.engine.hot_listed();
    let name = "affinity_hot_users_listed_total";
    let _ = writeln!(
        text,
        "# HELP {name} Users ingestion put on a day's hot list (their day rows spread over \
         sub-rows), and users it failed to (tried again).\n# TYPE {name} counter\n\
         {name}{{result=\"listed\"}} {listed}\n{name}{{result=\"failed\"}} {failed}"
    );
    if let Some(c) = state.engine.profile_cache_stats() {
        cache_metrics(
            &mut text,
            "profile",
            "Profile reads answered from the profile cache (hit) and computed from the store (miss).",
            c,
        );
    }
    if let Some(c) = state.engine.rollup_cache_stats() {
        cache_metrics(
            &mut text,
            "rollup",
            "Rollup rows profile reads took from the rollup cache (hit) and read from the store (miss).",
            c,
        );
    }
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        text,
    )
}

/// `GET /openapi.json`.
pub async fn openapi() -> impl IntoResponse {
    ([(CONTENT_TYPE, "application/json")], OPENAPI)
}

/// Unknown routes.
pub async fn not_found() -> Error {
    Error::not_found("Path not found")
}

/// Known routes, wrong method.
pub async fn method_not_allowed() -> impl IntoResponse {
    (
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        Json(json!({"status": 405, "message": "Method not allowed"})),
    )
}
