//! The personalization engine: Insights events, the catalog of objects and
//! their facets, the strategy, profile scoring, the narrow and wide events
//! schemas, and the streaming and batch pipelines that turn events into
//! per-user affinity profiles (`brand:Apple -> 12`).
//!
//! Everything is written against the `affinity_model` [`Store`] and
//! [`Table`] traits only, so it runs unchanged on the embedded store, the
//! in-memory reference store and Cloud Bigtable. It is not an HTTP server
//! and not a CLI: those call the functions here (the HTTP API maps
//! [`Error::InvalidEvent`] to 422, the other validation errors to 4xx, and
//! store errors through the model's `ErrorCode`).
//!
//! The API is the handle [`Engine`] and the types at the crate root, plus
//! five modules: [`scoring`] (the formula, written out there, and the
//! naive reference tests hold every path to), [`catalog`], [`trends`]
//! (regional trends, top facet values around a place), [`state`] (the
//! layout of the streaming profile state) and [`boost`] (profiles as
//! query-time boosts, and hits re-ranked by affinity).
//!
//! Where to start reading the source:
//! - `event.rs`, `catalog.rs`, `strategy.rs`: the domain and its
//!   validation;
//! - `scoring.rs`: the formula and its one implementation
//!   (`scoring/accumulator.rs`);
//! - `engine.rs`: the handle, its tables and per-application settings;
//! - `schema.rs`: the narrow and wide events layouts and the batch filters;
//! - `ingest.rs`: the streaming path and its exactly-once guarantee, over
//!   `state.rs`; `profile.rs`: reading profiles, GDPR deletion;
//! - `batch.rs`: the batch jobs' ranges, threads, shards and progress;
//!   `job.rs`: named, restartable jobs; `export.rs`: every profile scored
//!   from the events table; `rebuild.rs`: profile state re-derived from
//!   the events table; `maintain.rs` and `rollup.rs`: the rollups that keep
//!   reads short;
//! - `explain.rs`: one score explained day by day from the events table;
//!   `preview.rs`: profiles under a candidate strategy, storing nothing;
//! - `migrate.rs`: narrow -> wide migration (dual-write, backfill, verify,
//!   cut over);
//! - `trends.rs`: regional trends;
//! - `boost.rs`: a profile as a search engine's boosts, `boost/rerank.rs`:
//!   hits re-ranked by the blend of their order and the user's affinities.
//!
//! ```
//! use std::sync::Arc;
//! use affinity_engine::{Engine, Event, ExportOptions, Limits, Progress, Strategy};
//! use serde_json::json;
//!
//! let engine = Engine::open(Arc::new(affinity_model::MemoryStore::new()))?;
//! engine.set_strategy("app1", &Strategy::from_json(&json!({
//!     "eventsScoring": [{"eventName": "Product Clicked", "eventType": "click", "score": 10}],
//!     "facetsScoring": [{"facetName": "brand", "score": 100}],
//!     "personalizationImpact": 50}))?)?;
//! let limits = Limits::api(engine.now_millis());
//! let event = Event::from_json(&json!({"eventType": "click", "eventName": "Product Clicked",
//!     "index": "products", "userToken": "u1", "filters": ["brand:Apple"]}), &limits)?;
//! engine.ingest("app1", &[event])?;
//! let profile = engine.profile("app1", "u1")?.expect("u1 has a scoring event");
//! assert_eq!(profile.to_json()["scores"], json!({"brand": {"Apple": 20}}));
//! // Every profile scored from the events table: the same profile.
//! let exported = std::sync::Mutex::new(Vec::new());
//! let sink = |_user: &str, json: &[u8]| -> std::io::Result<()> {
//!     exported.lock().expect("not poisoned").push(json.to_vec());
//!     Ok(())
//! };
//! engine.export("app1", ExportOptions::default(), None, &sink, &Progress::default())?;
//! assert_eq!(exported.into_inner().expect("not poisoned"), [serde_json::to_vec(&profile)?]);
//! # Ok::<(), affinity_engine::Error>(())
//! ```
//!
//! [`Store`]: affinity_model::Store
//! [`Table`]: affinity_model::Table

pub mod api_keys;
mod arena;
mod batch;
pub mod boost;
pub mod cache;
pub mod catalog;
pub mod csv;
pub mod digest;
mod engine;
mod error;
mod event;
mod explain;
mod export;
pub mod hot;
mod ingest;
mod job;
mod jobs;
mod maintain;
mod migrate;
mod preview;
mod profile;
mod rebuild;
mod resalt;
pub mod rollup;
mod salting;
mod schema;
pub mod scoring;
pub mod state;
mod strategy;
pub mod trends;
pub mod variants;

pub use api_keys::StoredKey;
pub use batch::{Progress, ProgressSnapshot};
pub use engine::{
    validate_app, window_start_day, App, AppConfig, AppSettings, Clock, Engine, SaltMove,
    SaltPhase, Tables, DAY_MILLIS, DEFAULT_RETENTION_DAYS, SETTINGS_REFRESH, SHARED_RETENTION_DAYS,
    SHARED_TABLES,
};
pub use error::{Error, Result};
pub use event::{Event, EventType, Limits, API_MAX_AGE_MILLIS, MAX_SKEW_MILLIS};
pub use explain::{Contribution, Explanation, MaxRaw, NextChange, Unscored};
pub use export::{ExportOptions, ExportReport, ProfileSink};
pub use ingest::{IngestReport, BATCH_EVENTS};
pub use jobs::{
    validate_job_id, JobKind, JobStatus, ShardState, ShardStatus, WorkOptions, DEFAULT_LEASE,
    JOBS_TABLE, JOB_RECORD_DAYS, MAX_FINISHED_JOBS, MAX_SHARDS, RETRY_BACKOFF,
};
pub use maintain::{MaintainOptions, MaintainReport};
pub use migrate::Verification;
pub use preview::{Preview, MAX_PREVIEW_USERS};
pub use profile::Deleted;
pub use rebuild::{RebuildOptions, RebuildReport};
pub use resalt::{SaltReport, SALT_SETTLE};
pub use salting::events_salter;
pub use schema::Schema;
pub use scoring::Profile;
pub use strategy::{Strategy, Weights};
pub use trends::{Area, Trends, TrendsQuery, ValueScore};
pub use variants::{Variant, Variants};
