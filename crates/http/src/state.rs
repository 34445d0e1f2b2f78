//! What every handler shares, and the request body extractor.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use affinity_engine::{Engine, Strategy};
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::header::CONTENT_LENGTH;
use serde_json::Value;

use crate::auth::Keys;
use crate::error::{Error, Result, MAX_BODY_BYTES};
use crate::jobs::Jobs;
use crate::metrics::Metrics;

/// The server's state: the engine, the keys, metrics and jobs. Servers
/// are stateless otherwise: many may share one store.
pub struct State {
    pub engine: Arc<Engine>,
    pub keys: Keys,
    pub metrics: Metrics,
    pub jobs: Jobs,
    /// Strategies read for profile requests, with when they were read.
    strategies: Mutex<HashMap<String, CachedStrategy>>,
    /// Run profile reads on the async workers instead of handing them to
    /// the blocking pool: for a store on this machine, whose reads take
    /// tens of microseconds, the hand-off (two thread wake-ups) costs more
    /// than the read. Leave it off for a store across a network.
    pub inline_reads: bool,
    /// Run maintenance of every application this often (`None`: never;
    /// for deployments that run `affinity maintain` as a job of its own).
    pub maintain_every: Option<Duration>,
}

/// A strategy (or its absence) and when it was read.
type CachedStrategy = (Instant, Option<Arc<Strategy>>);

/// How long a strategy read for profile requests is reused. A change made
/// through this server is seen at once, one made through another server
/// after at most this long.
pub const STRATEGY_TTL: Duration = Duration::from_secs(1);

impl State {
    pub fn new(engine: Arc<Engine>, keys: Keys) -> Arc<State> {
        State::with_inline_reads(engine, keys, false)
    }

    /// [`State::new`], choosing [`State::inline_reads`].
    pub fn with_inline_reads(engine: Arc<Engine>, keys: Keys, inline_reads: bool) -> Arc<State> {
        Arc::new(State {
            engine,
            keys,
            metrics: Metrics::default(),
            jobs: Jobs::default(),
            strategies: Mutex::default(),
            inline_reads,
            maintain_every: None,
        })
    }

    /// This state, maintaining every application every `every` (see
    /// [`crate::jobs`]).
    pub fn with_maintenance(mut self: Arc<State>, every: Option<Duration>) -> Arc<State> {
        if let Some(state) = Arc::get_mut(&mut self) {
            state.maintain_every = every;
        }
        self
    }

    /// The application's current strategy, re-read at most every
    /// [`STRATEGY_TTL`] (blocking).
    pub fn strategy(&self, app: &str) -> Result<Option<Arc<Strategy>>> {
        let cache = || self.strategies.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((read, strategy)) = cache().get(app) {
            if read.elapsed() < STRATEGY_TTL {
                return Ok(strategy.clone());
            }
        }
        let read = Instant::now();
        let strategy = self.engine.strategy(app)?.map(Arc::new);
        cache().insert(app.to_string(), (read, strategy.clone()));
        Ok(strategy)
    }

    /// Forget the cached strategy of `app` (after changing it).
    pub fn forget_strategy(&self, app: &str) {
        self.strategies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(app);
    }
}

/// A request body of at most [`MAX_BODY_BYTES`]: a declared length over
/// the limit is refused before a byte is read, a streamed one as soon as
/// it passes the limit.
pub struct Body(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for Body {
    type Rejection = Error;

    async fn from_request(req: Request, state: &S) -> Result<Body> {
        if let Some(len) = req
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
        {
            if len > MAX_BODY_BYTES as u64 {
                return Err(Error::TooLarge {
                    len: len.to_string(),
                });
            }
        }
        match Bytes::from_request(req, state).await {
            Ok(bytes) => Ok(Body(bytes)),
            Err(rejection) if rejection.status().as_u16() == 413 => Err(Error::TooLarge {
                len: format!("over {MAX_BODY_BYTES}"),
            }),
            Err(rejection) => Err(Error::InvalidJson {
                reason: rejection.body_text(),
            }),
        }
    }
}

impl Body {
    /// The body as JSON.
    pub fn json(&self) -> Result<Value> {
        serde_json::from_slice(&self.0).map_err(|e| Error::InvalidJson {
            reason: e.to_string(),
        })
    }
}
