//! The dashboard at `/dashboard/`: its files, built into the binary (no
//! CDN, no fonts or tiles fetched: it works without internet access), and
//! the two endpoints only it needs (ACL `admin`, as its login):
//!
//! - `GET /1/dashboard/stats`: this server's counters as JSON (events
//!   accepted and rejected by reason, profile reads and their latency),
//!   the size of the application's tables, its running jobs and the
//!   answers each A/B test variant served; the page keeps successive
//!   samples and draws rates from them;
//! - `GET /1/dashboard/keyvis`: reads and writes per key range and time
//!   slot of the application's tables (see
//!   [`affinity_model::keyvis`]), when the server counts them; asking
//!   starts the counting, which goes on for [`KEY_VIS_WATCH`] after the
//!   last ask.
//!
//! Everything else the pages show comes from the API itself. The login (an
//! application ID and its admin key) stays in the page's
//! `sessionStorage` and is sent in headers: a key never appears in a URL.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use affinity_model::keyvis::KeyVis;
use axum::extract::{Path, Query, State as Shared};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, LOCATION};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::auth::{Acl, Caller};
use crate::error::{blocking, Error, Result};
use crate::state::State;
use crate::time::iso;
use affinity_engine::Engine;

/// The dashboard's files: name, content type, bytes.
const FILES: &[(&str, &str, &str)] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("../dashboard/index.html"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../dashboard/style.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../dashboard/app.js"),
    ),
    (
        "api.js",
        "text/javascript; charset=utf-8",
        include_str!("../dashboard/api.js"),
    ),
    (
        "charts.js",
        "text/javascript; charset=utf-8",
        include_str!("../dashboard/charts.js"),
    ),
    (
        "overview.js",
        "text/javascript; charset=utf-8",
        include_str!("../dashboard/overview.js"),
    ),
    (
        "explorer.js",
        "text/javascript; charset=utf-8",
        include_str!("../dashboard/explorer.js"),
    ),
    (
        "strategy.js",
        "text/javascript; charset=utf-8",
        include_str!("../dashboard/strategy.js"),
    ),
    (
        "variants.js",
        "text/javascript; charset=utf-8",
        include_str!("../dashboard/variants.js"),
    ),
    (
        "debugger.js",
        "text/javascript; charset=utf-8",
        include_str!("../dashboard/debugger.js"),
    ),
    (
        "keyvis.js",
        "text/javascript; charset=utf-8",
        include_str!("../dashboard/keyvis.js"),
    ),
    (
        "trends.js",
        "text/javascript; charset=utf-8",
        include_str!("../dashboard/trends.js"),
    ),
];

/// How long a table's size is reused: reading it asks the store for split
/// points, which may flush a memtable.
const SIZE_TTL: Duration = Duration::from_secs(30);

/// Slots the key visualizer answers unless asked otherwise.
const DEFAULT_SLOTS: usize = 60;

/// How long an application's tables are counted after its key visualizer
/// was last asked for.
pub const KEY_VIS_WATCH: Duration = Duration::from_secs(24 * 3600);

/// The dashboard's share of the server's state.
#[derive(Default)]
pub struct Dashboard {
    /// The store's per-range counters and their slot length, when on.
    key_vis: Option<(Arc<KeyVis>, Duration)>,
    /// Table sizes per application, with when they were read.
    sizes: Mutex<HashMap<String, (Instant, Value)>>,
}

impl Dashboard {
    /// Counting with `key_vis`, whose slots [`crate::serve`] ends every
    /// `slot`.
    pub fn with_key_vis(key_vis: Arc<KeyVis>, slot: Duration) -> Dashboard {
        Dashboard {
            key_vis: Some((key_vis, slot)),
            sizes: Mutex::default(),
        }
    }

    /// The counters and their slot length, when on.
    pub fn key_vis(&self) -> Option<(Arc<KeyVis>, Duration)> {
        self.key_vis.clone()
    }
}

/// `GET /dashboard`: to the page, whose relative links need the slash.
pub async fn redirect() -> Response {
    (StatusCode::PERMANENT_REDIRECT, [(LOCATION, "/dashboard/")]).into_response()
}

/// `GET /dashboard/`.
pub async fn index() -> Response {
    file("index.html")
}

/// `GET /dashboard/{file}`.
pub async fn asset(Path(name): Path<String>) -> Response {
    file(&name)
}

fn file(name: &str) -> Response {
    match FILES.iter().find(|(n, _, _)| *n == name) {
        Some((_, kind, body)) => {
            ([(CONTENT_TYPE, *kind), (CACHE_CONTROL, "no-cache")], *body).into_response()
        }
        None => Error::not_found(format!("Dashboard file {name:?} not found")).into_response(),
    }
}

/// The routes whose requests read a profile.
const PROFILE_READS: [(&str, &str); 3] = [
    ("GET", "/1/profiles/personalization/{userToken}"),
    (
        "GET",
        "/1/profiles/personalization/{userToken}/optionalFilters",
    ),
    ("POST", "/1/indexes/{indexName}/rerank"),
];

/// The most recent jobs the overview looks through for running ones.
const RECENT_JOBS: usize = 100;

/// `GET /1/dashboard/stats`.
pub async fn stats(Shared(state): Shared<Arc<State>>, caller: Caller) -> Result<Json<Value>> {
    caller.require(Acl::Admin)?;
    let (mut reads, mut seconds) = (0, 0.0);
    for (method, route) in PROFILE_READS {
        let (n, s) = state.metrics.route_totals(method, route);
        reads += n;
        seconds += s;
    }
    let shared = Arc::clone(&state);
    let app = caller.app.clone();
    let (tables, jobs) = blocking(move || {
        // The jobs in the store (any server's or job process's), running.
        let now = shared.engine.now_millis();
        let jobs: Vec<Value> = shared
            .engine
            .jobs(&app, RECENT_JOBS)?
            .iter()
            .filter(|j| j.state() == "running")
            .map(|j| j.to_json(now))
            .collect();
        Ok((table_sizes(&shared, &app)?, jobs))
    })
    .await?;
    Ok(Json(json!({
        "at": state.engine.now_millis(),
        "eventsAccepted": state.metrics.events_ingested.load(std::sync::atomic::Ordering::Relaxed),
        "eventsRejected": state.metrics.rejected(),
        "profileReads": {"count": reads, "seconds": seconds},
        "tables": tables,
        "jobs": jobs,
        "variantsServed": state.metrics.served_by(&caller.app),
        "keyVisualizer": state.dashboard.key_vis.is_some(),
    })))
}

/// `[{"table", "bytes"}]` of the application's tables, as the store's
/// split points estimate them (reused for [`SIZE_TTL`]).
fn table_sizes(state: &State, app: &str) -> Result<Value> {
    let cache = || {
        state
            .dashboard
            .sizes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    };
    if let Some((read, sizes)) = cache().get(app) {
        if read.elapsed() < SIZE_TTL {
            return Ok(sizes.clone());
        }
    }
    let handle = state.engine.app(app)?;
    let mut sizes = Vec::new();
    for table in [&handle.events, &handle.profiles, &handle.trends] {
        let samples = table
            .sample_row_keys()
            .map_err(|e| Error::Engine(affinity_engine::Error::Store(e)))?;
        let bytes = samples.last().map_or(0, |s| s.offset_bytes.max(0));
        sizes.push(json!({"table": table.name(), "bytes": bytes}));
    }
    let sizes = Value::from(sizes);
    cache().insert(app.to_string(), (Instant::now(), sizes.clone()));
    Ok(sizes)
}

/// A row key as text: printable ASCII as is, other bytes as `\xNN`.
fn key_text(key: &[u8]) -> String {
    let mut out = String::with_capacity(key.len());
    for &b in key {
        if (0x20..0x7f).contains(&b) && b != b'\\' {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// `GET /1/dashboard/keyvis?slots=N`: the newest `N` slots (1 to 1000,
/// default 60) of each of the application's tables.
pub async fn key_vis(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Json<Value>> {
    caller.require(Acl::Admin)?;
    let mut slots = DEFAULT_SLOTS;
    for (k, v) in &params {
        if k == "slots" {
            slots = v
                .parse()
                .ok()
                .filter(|n| (1..=1000).contains(n))
                .ok_or_else(|| {
                    Error::unprocessable("slots", "slots must be an integer from 1 to 1000")
                })?;
        }
    }
    let Some((vis, slot)) = state.dashboard.key_vis() else {
        return Err(Error::not_found(
            "The key visualizer is off on this server (affinity serve --key-visualizer-slot)",
        ));
    };
    // Asking is watching: the application's tables count from the first
    // ask until a day after the last.
    let names = Engine::table_names(&caller.app);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let now = state.engine.now_millis();
    let until = now + KEY_VIS_WATCH.as_millis() as i64;
    vis.watch(&names, now, until);
    let tables: Vec<Value> = vis
        .history(|t| names.contains(&t))
        .into_iter()
        .map(|h| {
            let skip = h.slots.len().saturating_sub(slots);
            let slots: Vec<Value> = h.slots[skip..]
                .iter()
                .map(|s| {
                    let bounds: Vec<String> = s.bounds.iter().map(|b| key_text(b)).collect();
                    json!({"end": iso(s.end_millis), "endMillis": s.end_millis,
                           "reads": s.reads, "writes": s.writes, "bounds": bounds})
                })
                .collect();
            json!({"table": h.table, "since": iso(h.since_millis),
                   "sinceMillis": h.since_millis, "slots": slots})
        })
        .collect();
    Ok(Json(json!({
        "slotSeconds": slot.as_secs_f64(),
        "until": iso(until),
        "untilMillis": until,
        "tables": tables,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_as_text() {
        assert_eq!(key_text(b"user1\x00\\\xff"), "user1\\x00\\x5c\\xff");
    }

    #[test]
    fn every_file_is_served_and_unknown_ones_are_not() {
        for (name, _, body) in FILES {
            assert!(!body.is_empty(), "{name}");
            assert_eq!(file(name).status(), StatusCode::OK);
        }
        assert_eq!(file("../Cargo.toml").status(), StatusCode::NOT_FOUND);
    }
}
