//! Affinity's HTTP API: Algolia Insights- and Personalization-compatible
//! JSON over HTTP (see `docs/api.md`), with Affinity's additions
//! (catalog objects, the events debugger, maintenance jobs, trends, health,
//! Prometheus metrics and the OpenAPI document at `/openapi.json`).
//!
//! This crate is the transport only: authentication (`x-algolia-*`
//! headers or query parameters in any letter case, keys with ACLs per
//! application), bodies as clients send them (any content type, gzip or
//! deflate, 2 MB as sent and decompressed), CORS for browsers, request
//! limits (checked before any work), the one mapping from errors to
//! statuses ([`Error::status`]) and the routes. It is not the engine:
//! every request calls the synchronous [`affinity_engine::Engine`] on a
//! blocking thread, and the server keeps no state of its own beyond
//! metrics, the jobs it started and the debugger's recent events (in
//! memory), so many servers can share one store. It is not the CLI either:
//! `affinity serve` parses flags and calls [`serve`].
//!
//! Where to start reading: `server.rs` (routes and middleware), `auth.rs`
//! and `secured.rs` (Algolia's secured API keys), `body.rs`, `error.rs`,
//! then one module per group of endpoints (`insights.rs`,
//! `personalization.rs`, `query.rs`, `explain.rs`, `catalog.rs`, `ops.rs`)
//! and
//! `debug.rs` (the events debugger's ring), `dashboard.rs` (the dashboard's
//! files, under `dashboard/`, and its two endpoints).
//!
//! ```
//! use std::sync::Arc;
//! use affinity_http::{serve, Acl, Keys, State};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let engine = affinity_engine::Engine::open(Arc::new(affinity_model::MemoryStore::new()))?;
//! let mut keys = Keys::default();
//! keys.add("app1", "secret", [Acl::Admin])?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let server = tokio::spawn(serve(listener, State::new(Arc::new(engine), keys), async {
//!     let _ = stopped.await;
//! }));
//! // ... point Algolia's clients at the listener's address ...
//! let _ = stop.send(());
//! server.await??;
//! # Ok(())
//! # }
//! ```

mod auth;
mod body;
mod catalog;
mod clients;
mod config;
mod dashboard;
mod debug;
mod error;
mod explain;
/// Request body decoding, for the fuzz targets in `fuzz/`.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod insights;
mod jobs;
pub mod keystore;
mod limits;
mod members;
mod metrics;
mod ops;
mod personalization;
mod priority;
mod query;
mod secured;
mod server;
mod state;
mod time;
mod trends;
mod variants;
mod workers;

pub use auth::{hash_key, Access, Acl, ApiKey, Keys, SHA256_PREFIX};
pub use config::{AppEntry, Config, KeyEntry};
pub use debug::{Entry, EventLog, Filter, Rejection, RequestOrigin, DEFAULT_DEBUG_EVENTS};
pub use error::{Error, Result, MAX_BATCH_EVENTS, MAX_BODY_BYTES};
pub use jobs::Jobs;
pub use limits::{Limiter, RateLimit, ServerLimits};
pub use metrics::Metrics;
pub use secured::{Restrictions, SecuredKey};
pub use server::{router, serve, shutdown_signal};
pub use state::{State, STRATEGY_TTL};
pub use workers::{Scheduler, Workers};
