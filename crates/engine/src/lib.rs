//! The personalization engine: Insights events, the catalog of objects and
//! their facets, the strategy, profile scoring, the narrow and wide events
//! schemas, and the streaming and batch pipelines that turn events into
//! per-user affinity profiles (`brand:Apple -> 12`).
//!
//! Everything is written against the `affinity_model` [`Store`] and
//! [`Table`] traits only, so it runs unchanged on the embedded store, the
//! in-memory reference store and Cloud Bigtable. It is not an HTTP server
//! and not a CLI: those call the functions here.
//!
//! Where to start reading:
//! - [`event`], [`catalog`], [`strategy`]: the domain and its validation;
//! - [`scoring`]: the formula (written out there) and its one
//!   implementation, plus the naive reference used by tests.
//!
//! [`Store`]: affinity_model::Store
//! [`Table`]: affinity_model::Table

pub mod batch;
pub mod catalog;
pub mod csv;
pub mod engine;
pub mod error;
pub mod event;
pub mod ingest;
pub mod profile;
pub mod schema;
pub mod scoring;
pub mod strategy;

pub use batch::{Progress, ProgressSnapshot, RecomputeOptions, RecomputeReport};
pub use engine::{App, AppConfig, Clock, Engine};
pub use error::{Error, Result};
pub use event::{Event, EventType, Limits};
pub use ingest::IngestReport;
pub use schema::Schema;
pub use scoring::Profile;
pub use strategy::Strategy;
