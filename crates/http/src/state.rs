//! What every handler shares.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use affinity_engine::{Engine, Strategy, Variants};

use crate::auth::Keys;
use crate::dashboard::Dashboard;
use crate::debug::EventLog;
use crate::error::{Error, Result};
use crate::jobs::Jobs;
use crate::keystore::StoredKeys;
use crate::limits::Limiter;
use crate::metrics::Metrics;
use crate::workers::Workers;

/// The server's state: the engine, the keys, metrics and jobs. Servers
/// are stateless otherwise: many may share one store.
pub struct State {
    pub engine: Arc<Engine>,
    /// The configured keys (the TOML's): the bootstrap keys.
    pub keys: Keys,
    /// This server's snapshot of the keys kept in the store (see
    /// [`crate::keystore`]).
    pub stored_keys: StoredKeys,
    pub metrics: Metrics,
    pub jobs: Arc<Jobs>,
    /// Rate limits, caps on requests in flight and read timeouts (see
    /// [`crate::limits`]); none but the default caps unless configured.
    pub limiter: Limiter,
    /// The events debugger's recent events (see [`crate::debug`]).
    pub debug: EventLog,
    /// The dashboard's key visualizer and cached table sizes.
    pub dashboard: Dashboard,
    /// Set when [`crate::serve`] was asked to stop: long polls end.
    stopping: tokio::sync::watch::Sender<bool>,
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
    /// Threads the connections are served on (none: the runtime `serve`
    /// runs on).
    pub workers: Option<Arc<Workers>>,
}

/// `limiter` for a store on this machine (`local`, as
/// [`State::inline_reads`]) or across a network: there a batch's thread
/// mostly waits for the store, so unless the limits say otherwise as
/// many threads store batches as writes are admitted (see
/// [`crate::ServerLimits::ingest_threads`]).
fn for_store(mut limiter: Limiter, local: bool) -> Limiter {
    if !local {
        let writes = limiter.server.max_writes_in_flight;
        limiter.server.ingest_threads.get_or_insert(writes);
    }
    limiter
}

/// A strategy and A/B test (or their absence) and when they were read.
type CachedStrategy = (Instant, Settings);

/// An application's strategy and A/B test, as requests use them.
type Settings = (Option<Arc<Strategy>>, Option<Arc<Test>>);

/// An A/B test as requests use it: each variant's own strategy shared.
#[derive(Debug)]
struct Test {
    variants: Variants,
    /// By variant, in the test's order.
    strategies: Vec<Option<Arc<Strategy>>>,
}

/// The strategy a request is served with, and the A/B test's variant that
/// chose it (`None` when the application runs no test).
#[derive(Debug, Clone)]
pub struct Serving {
    pub strategy: Arc<Strategy>,
    pub variant: Option<String>,
}

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
            stored_keys: StoredKeys::default(),
            metrics: Metrics::default(),
            jobs: Arc::default(),
            limiter: for_store(Limiter::default(), inline_reads),
            debug: EventLog::default(),
            dashboard: Dashboard::default(),
            stopping: tokio::sync::watch::channel(false).0,
            strategies: Mutex::default(),
            inline_reads,
            maintain_every: None,
            workers: None,
        })
    }

    /// This state, its connections served on `workers`' threads (see
    /// [`crate::Workers`]) instead of the runtime `serve` runs on.
    pub fn with_workers(mut self: Arc<State>, workers: Option<Arc<Workers>>) -> Arc<State> {
        if let Some(state) = Arc::get_mut(&mut self) {
            state.workers = workers;
        }
        self
    }

    /// This state, maintaining every application every `every` (see
    /// [`crate::jobs`]).
    pub fn with_maintenance(mut self: Arc<State>, every: Option<Duration>) -> Arc<State> {
        if let Some(state) = Arc::get_mut(&mut self) {
            state.maintain_every = every;
        }
        self
    }

    /// This state, with `limiter`'s limits (see [`crate::Config::limiter`]).
    pub fn with_limits(mut self: Arc<State>, limiter: Limiter) -> Arc<State> {
        if let Some(state) = Arc::get_mut(&mut self) {
            state.limiter = for_store(limiter, state.inline_reads);
        }
        self
    }

    /// This state, keeping the last `events` events per application for
    /// the debugger (0: none).
    pub fn with_debug_events(mut self: Arc<State>, events: usize) -> Arc<State> {
        if let Some(state) = Arc::get_mut(&mut self) {
            state.debug = EventLog::new(events);
        }
        self
    }

    /// This state, showing the engine's per-range counters (see
    /// [`affinity_engine::Engine::with_key_vis`]) in the dashboard's key
    /// visualizer; [`crate::serve`] ends a slot every `slot`. Without
    /// counters on the engine the visualizer stays off.
    pub fn with_key_vis(mut self: Arc<State>, slot: Duration) -> Arc<State> {
        if let Some(state) = Arc::get_mut(&mut self) {
            if let Some(key_vis) = state.engine.key_vis() {
                state.dashboard = Dashboard::with_key_vis(Arc::clone(key_vis), slot);
            }
        }
        self
    }

    /// Tell requests that wait (long polls) that the server is stopping.
    pub fn stop_waiting(&self) {
        self.stopping.send_replace(true);
    }

    /// A receiver that turns `true` when the server is stopping.
    pub fn stopping(&self) -> tokio::sync::watch::Receiver<bool> {
        self.stopping.subscribe()
    }

    /// The application's current strategy, re-read at most every
    /// [`STRATEGY_TTL`] (blocking).
    pub fn strategy(&self, app: &str) -> Result<Option<Arc<Strategy>>> {
        Ok(self.settings(app)?.0)
    }

    /// The strategy and A/B test of `app`, cached for [`STRATEGY_TTL`].
    fn settings(&self, app: &str) -> Result<Settings> {
        let cache = || self.strategies.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((read, settings)) = cache().get(app) {
            if read.elapsed() < STRATEGY_TTL {
                return Ok(settings.clone());
            }
        }
        let read = Instant::now();
        let strategy = self.engine.strategy(app)?.map(Arc::new);
        let variants = self.engine.variants(app)?.map(|variants| {
            let strategies = variants
                .list()
                .iter()
                .map(|v| v.strategy.clone().map(Arc::new))
                .collect();
            Arc::new(Test {
                variants,
                strategies,
            })
        });
        cache().insert(
            app.to_string(),
            (read, (strategy.clone(), variants.clone())),
        );
        Ok((strategy, variants))
    }

    /// The strategy that serves `user` (blocking): the variant of the
    /// application's A/B test the user's bucket falls in, or the one
    /// `forced` names (for QA); without a test, the application's
    /// strategy. `None` when the chosen variant has no strategy of its own
    /// and the application none either. A forced variant the test does
    /// not have is a 400 naming `variant`.
    pub fn serving(&self, app: &str, user: &str, forced: Option<&str>) -> Result<Option<Serving>> {
        let (strategy, test) = self.settings(app)?;
        let Some(test) = test else {
            if let Some(name) = forced {
                return Err(Error::unprocessable(
                    "variant",
                    format!("Unknown variant {name:?}: this application runs no A/B test"),
                ));
            }
            return Ok(strategy.map(|strategy| Serving {
                strategy,
                variant: None,
            }));
        };
        let list = test.variants.list();
        let chosen = match forced {
            Some(name) => list.iter().position(|v| v.name == name).ok_or_else(|| {
                let names: Vec<&str> = list.iter().map(|v| v.name.as_str()).collect();
                Error::unprocessable(
                    "variant",
                    format!(
                        "Unknown variant {name:?}: the A/B test has {}",
                        names.join(", ")
                    ),
                )
            })?,
            None => test.variants.assign(user),
        };
        let variant = &list[chosen];
        let strategy = match &test.strategies[chosen] {
            Some(own) => Arc::clone(own),
            None => match strategy {
                Some(s) => s,
                None => return Ok(None),
            },
        };
        self.metrics.served(app, &variant.name);
        Ok(Some(Serving {
            strategy,
            variant: Some(variant.name.clone()),
        }))
    }

    /// Forget the cached strategy of `app` (after changing it).
    pub fn forget_strategy(&self, app: &str) {
        self.strategies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(app);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ServerLimits;

    #[test]
    fn a_store_across_a_network_stores_as_many_batches_as_it_admits() {
        let limits = ServerLimits::default();
        let remote = for_store(Limiter::new(limits), false);
        assert_eq!(remote.server.ingest_threads(), limits.max_writes_in_flight);
        let local = for_store(Limiter::new(limits), true);
        assert_eq!(local.server.ingest_threads, None);
        let set = ServerLimits {
            ingest_threads: Some(3),
            ..limits
        };
        assert_eq!(
            for_store(Limiter::new(set), false).server.ingest_threads(),
            3
        );
    }
}
