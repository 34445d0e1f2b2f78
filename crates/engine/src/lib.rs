//! The personalization engine: Insights events, the catalog of objects and
//! their facets, the strategy, profile scoring, the narrow and wide events
//! schemas, and the streaming and batch pipelines that turn events into
//! per-user affinity profiles (`brand:Apple -> 12`).
//!
//! Everything is written against the `affinity_model` [`Store`] and
//! [`Table`] traits only, so it runs unchanged on the embedded store, the
//! in-memory reference store and Cloud Bigtable. It is not an HTTP server
//! and not a CLI: those call the functions here (they map
//! [`Error::InvalidEvent`] to 422 and the rest through the model's
//! `ErrorCode`).
//!
//! Where to start reading:
//! - [`event`], [`catalog`], [`strategy`]: the domain and its validation;
//! - [`scoring`]: the formula (written out there), its one implementation
//!   ([`scoring::Accumulator`]) and the naive reference used by tests;
//! - [`engine`]: the handle, its tables and per-application configuration;
//! - [`schema`]: the narrow and wide events layouts and the batch filters;
//! - [`ingest`]: the streaming path and its exactly-once guarantee;
//!   [`profile`]: reading profiles, GDPR deletion;
//! - [`batch`]: the parallel recompute, its progress and shards;
//!   [`job`]: persistent, restartable recompute jobs;
//! - [`migrate`]: narrow -> wide migration (dual-write, backfill, verify,
//!   cut over);
//! - [`trends`]: regional trends, top facet values around a place.
//! - [`workload`]: seeded benchmark workloads (application profiles, a
//!   20-facet catalog, events and strategies).
//!
//! ```
//! use std::sync::Arc;
//! use affinity_engine::{Engine, Event, Limits, Progress, RecomputeOptions, Strategy};
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
//! engine.recompute("app1", RecomputeOptions::default(), &Progress::default())?;
//! assert_eq!(engine.batch_profile("app1", "u1")?.map(|(p, _)| p), Some(profile));
//! # Ok::<(), affinity_engine::Error>(())
//! ```
//!
//! [`Store`]: affinity_model::Store
//! [`Table`]: affinity_model::Table

pub mod arena;
pub mod batch;
pub mod catalog;
pub mod csv;
pub mod engine;
pub mod error;
pub mod event;
pub mod ingest;
pub mod job;
pub mod maintain;
pub mod migrate;
pub mod profile;
pub mod rollup;
pub mod salting;
pub mod schema;
pub mod scoring;
pub mod strategy;
pub mod trends;
pub mod workload;

pub use batch::{Progress, ProgressSnapshot, RecomputeOptions, RecomputeReport};
pub use engine::{App, AppConfig, AppSettings, Clock, Engine};
pub use error::{Error, Result};
pub use event::{Event, EventType, Limits};
pub use ingest::IngestReport;
pub use maintain::{MaintainOptions, MaintainReport};
pub use schema::Schema;
pub use scoring::Profile;
pub use strategy::Strategy;
pub use trends::{Area, Trends, TrendsQuery, ValueScore};
