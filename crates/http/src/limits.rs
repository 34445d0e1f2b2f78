//! The limits a public endpoint needs: request rates per application and
//! per key (token buckets: 429), requests and writes in flight (503 rather
//! than an unbounded queue), and how long a client may take to send its
//! headers and body (see [`crate::serve`] and [`crate::body`]).
//!
//! Shedding keeps reads first: writes (events, catalog changes, deletions)
//! have their own cap, below the cap of all requests, so a flood of
//! ingest is refused while reads still get in. Every refusal carries
//! `Retry-After` and is counted in `/metrics`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::clients::{self, Client, ClientBuckets, Proxies};
use crate::error::{Error, Result};

/// A token bucket's configuration: `per_second` requests on average,
/// `burst` at once (default: one second's worth).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    pub per_second: f64,
    pub burst: Option<f64>,
}

impl RateLimit {
    /// The bucket's size: `burst`, else one second's requests (at least 1).
    pub fn burst(&self) -> f64 {
        self.burst.unwrap_or(self.per_second).max(1.0)
    }

    /// Refuse a rate that is not a positive number, naming `whose`.
    pub fn check(&self, whose: &str) -> Result<()> {
        let positive = |x: f64| x.is_finite() && x > 0.0;
        if !positive(self.per_second) || !self.burst.is_none_or(|b| positive(b) && b >= 1.0) {
            return Err(Error::Config {
                reason: format!(
                    "{whose}: rate_limit needs per_second > 0 and burst >= 1, got per_second = {}{}",
                    self.per_second,
                    self.burst.map_or(String::new(), |b| format!(", burst = {b}"))
                ),
            });
        }
        Ok(())
    }
}

/// The server's own limits (`[limits]` in the configuration file).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerLimits {
    /// Requests being served at once; more are refused with 503.
    pub max_in_flight: usize,
    /// Writes (events, catalog changes, deletions, strategy changes) being
    /// served at once, each holding a blocking thread; more are refused
    /// with 503 while reads still get in.
    pub max_writes_in_flight: usize,
    /// Seconds a client may take to send a request's headers (also how
    /// long an idle keep-alive connection stays open); the connection is
    /// closed after.
    pub header_timeout_secs: f64,
    /// Seconds a client may take to send a request's body; 408 after.
    pub body_timeout_secs: f64,
    /// Nice value (0 to 19) of the threads that store event batches. Above
    /// 0, when reads and batches together want more CPU than there is,
    /// the threads answering reads go first and the batches wait (and
    /// past `max_writes_in_flight` are refused with 503); with CPU to
    /// spare it changes nothing. 0: batches run at the reads' priority.
    pub ingest_nice: i32,
    /// Threads that store event batches at once (default, `None`: twice
    /// the cores, at most `max_writes_in_flight`; a server whose store is
    /// across a network (Cloud Bigtable: no `State::inline_reads`), where
    /// a batch's thread mostly waits for it, makes it
    /// `max_writes_in_flight`); admitted batches beyond
    /// them wait for one. On a saturated CPU the batches' share of it
    /// grows with the threads running them (each weighs as much as its
    /// nice value says): fewer threads leave more to the reads, and
    /// acknowledge fewer batches.
    pub ingest_threads: Option<usize>,
}

impl Default for ServerLimits {
    fn default() -> ServerLimits {
        ServerLimits {
            max_in_flight: 1024,
            max_writes_in_flight: 16,
            header_timeout_secs: 30.0,
            body_timeout_secs: 60.0,
            ingest_nice: DEFAULT_INGEST_NICE,
            ingest_threads: None,
        }
    }
}

/// [`ServerLimits::ingest_nice`]'s default.
pub const DEFAULT_INGEST_NICE: i32 = 5;

impl ServerLimits {
    /// Refuse limits that would refuse everything or never time out.
    pub fn check(&self) -> Result<()> {
        let bad = |reason: String| Err(Error::Config { reason });
        if self.max_in_flight == 0 || self.max_writes_in_flight == 0 {
            return bad(format!(
                "limits: max_in_flight and max_writes_in_flight must be at least 1, got {} and {}",
                self.max_in_flight, self.max_writes_in_flight
            ));
        }
        if self.ingest_threads == Some(0) {
            return bad("limits: ingest_threads must be at least 1, got 0".to_string());
        }
        if !(0..=19).contains(&self.ingest_nice) {
            return bad(format!(
                "limits: ingest_nice must be from 0 to 19, got {}",
                self.ingest_nice
            ));
        }
        for (name, secs) in [
            ("header_timeout_secs", self.header_timeout_secs),
            ("body_timeout_secs", self.body_timeout_secs),
        ] {
            check_within("limits", name, secs, 86_400.0)?;
        }
        Ok(())
    }

    /// [`ServerLimits::ingest_threads`], its default filled in.
    pub fn ingest_threads(&self) -> usize {
        self.ingest_threads.unwrap_or_else(|| {
            let cores = std::thread::available_parallelism().map_or(1, usize::from);
            self.max_writes_in_flight.min(2 * cores)
        })
    }

    pub fn header_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.header_timeout_secs)
    }

    pub fn body_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.body_timeout_secs)
    }
}

/// A token bucket.
#[derive(Debug)]
struct Bucket {
    limit: RateLimit,
    /// Tokens left, and when they were counted.
    state: Mutex<(f64, Instant)>,
}

impl Bucket {
    fn new(limit: RateLimit) -> Bucket {
        Bucket {
            limit,
            state: Mutex::new((limit.burst(), Instant::now())),
        }
    }

    /// Take a token, or say how long until one is there.
    fn take(&self) -> std::result::Result<(), Duration> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (tokens, counted) = &mut *state;
        take_token(
            tokens,
            counted,
            Instant::now(),
            self.limit.per_second,
            self.limit.burst(),
        )
    }
}

/// A token bucket's step at `now`: `tokens`, counted at `counted`, refill
/// at `per_second` up to `burst`; then one is taken, or the wait until
/// one is there is returned.
pub(crate) fn take_token(
    tokens: &mut f64,
    counted: &mut Instant,
    now: Instant,
    per_second: f64,
    burst: f64,
) -> std::result::Result<(), Duration> {
    let refill = now.saturating_duration_since(*counted).as_secs_f64() * per_second;
    *tokens = (*tokens + refill).min(burst);
    *counted = now;
    if *tokens >= 1.0 {
        *tokens -= 1.0;
        Ok(())
    } else {
        Err(Duration::from_secs_f64((1.0 - *tokens) / per_second))
    }
}

/// Which limit refused a request, as `/metrics` labels it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Shed {
    /// [`ServerLimits::max_in_flight`].
    InFlight,
    /// [`ServerLimits::max_writes_in_flight`].
    WritesInFlight,
    /// A body not sent within [`ServerLimits::body_timeout_secs`].
    BodyTimeout,
}

impl Shed {
    pub fn as_str(self) -> &'static str {
        match self {
            Shed::InFlight => "in_flight",
            Shed::WritesInFlight => "writes_in_flight",
            Shed::BodyTimeout => "body_timeout",
        }
    }
}

/// The rate limits' buckets and the in-flight counts, with what they
/// refused.
#[derive(Debug, Default)]
pub struct Limiter {
    pub server: ServerLimits,
    apps: HashMap<String, Bucket>,
    /// `(application, key digest)`: a secured API key counts against the
    /// key that signed it.
    keys: HashMap<(String, [u8; 32]), Bucket>,
    /// The clients of keys with a per-client limit
    /// (`maxQueriesPerIPPerHour`, see [`crate::clients`]).
    clients: ClientBuckets,
    /// Whose `X-Forwarded-For` is believed.
    pub proxies: Proxies,
    in_flight: AtomicUsize,
    writes_in_flight: AtomicUsize,
    /// `(application, "application" | "key" | "client") -> refused`.
    rate_limited: Mutex<std::collections::BTreeMap<(String, &'static str), u64>>,
    shed: [AtomicU64; 3],
    ingest: IngestPool,
}

/// The threads that store event batches: at most
/// [`ServerLimits::ingest_threads`], at [`ServerLimits::ingest_nice`]; the
/// blocking pool of a runtime of their own (never driven; made on the
/// first batch), each thread lowering its priority as it starts (at nice
/// 0 it keeps the process's).
#[derive(Debug, Default)]
struct IngestPool {
    runtime: std::sync::OnceLock<tokio::runtime::Runtime>,
}

impl IngestPool {
    /// The pool's runtime.
    fn get(&self, limits: &ServerLimits) -> Result<&tokio::runtime::Runtime> {
        if let Some(runtime) = self.runtime.get() {
            return Ok(runtime);
        }
        let nice = limits.ingest_nice;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .thread_name("affinity-ingest")
            .max_blocking_threads(limits.ingest_threads().max(1))
            .on_thread_start(move || {
                if nice != 0 {
                    crate::priority::lower_this_thread(nice);
                }
            })
            .build()
            .map_err(|e| Error::Internal(format!("starting the ingest threads: {e}")))?;
        // Two first batches at once: the runtime one of them made is
        // kept; the other's is shut down without waiting (this runs in an
        // async context, where dropping a runtime would panic).
        let mut made = Some(runtime);
        let kept = self
            .runtime
            .get_or_init(|| made.take().expect("made above"));
        if let Some(unused) = made {
            unused.shutdown_background();
        }
        Ok(kept)
    }
}

impl Drop for IngestPool {
    fn drop(&mut self) {
        // Dropping a runtime waits for its threads, which an async
        // context (a server stopping inside a runtime) must not do.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A request's place among those in flight, given back when dropped.
pub struct Admitted<'a> {
    limiter: &'a Limiter,
    write: bool,
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        self.limiter.in_flight.fetch_sub(1, Ordering::Relaxed);
        if self.write {
            self.limiter
                .writes_in_flight
                .fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A setting of TOML table `table` that must be more than 0 and at most
/// `max` (a finite number), or the error naming it.
pub(crate) fn check_within(table: &str, name: &str, value: f64, max: f64) -> Result<()> {
    if value.is_finite() && value > 0.0 && value <= max {
        return Ok(());
    }
    Err(Error::Config {
        reason: format!("{table}: {name} must be more than 0 and at most {max}, got {value}"),
    })
}

/// What a refused client is told to wait: at least a second (the header
/// counts whole seconds).
fn retry_after(wait: Duration) -> u64 {
    wait.as_secs_f64().ceil().max(1.0) as u64
}

impl Limiter {
    /// No rate limits, `server`'s caps.
    pub fn new(server: ServerLimits) -> Limiter {
        Limiter {
            server,
            ..Limiter::default()
        }
    }

    /// Limit `app` to `limit`.
    pub fn limit_app(&mut self, app: &str, limit: RateLimit) {
        self.apps.insert(app.to_string(), Bucket::new(limit));
    }

    /// Limit the key of `app` whose SHA-256 is `digest` to `limit`.
    pub fn limit_key(&mut self, app: &str, digest: [u8; 32], limit: RateLimit) {
        self.keys
            .insert((app.to_string(), digest), Bucket::new(limit));
    }

    /// Count a request of `app` made with the key `digest` against both
    /// buckets; [`Error::RateLimited`] when either is empty (the key's is
    /// taken from only when the application's had a token).
    pub fn check_rate(&self, app: &str, digest: &[u8; 32]) -> Result<()> {
        let refuse = |scope: &'static str, limit: RateLimit, wait: Duration| {
            self.count_refusal(app, scope);
            let whose = match scope {
                "key" => "this API key".to_string(),
                _ => format!("application {app:?}"),
            };
            Err(Error::RateLimited {
                message: format!(
                    "Too many requests: {whose} is limited to {} requests per second \
                     (burst {}); retry after {} s",
                    limit.per_second,
                    limit.burst(),
                    retry_after(wait)
                ),
                retry_after: retry_after(wait),
            })
        };
        if let Some(bucket) = self.apps.get(app) {
            if let Err(wait) = bucket.take() {
                return refuse("application", bucket.limit, wait);
            }
        }
        if let Some(bucket) = self.keys.get(&(app.to_string(), *digest)) {
            if let Err(wait) = bucket.take() {
                return refuse("key", bucket.limit, wait);
            }
        }
        Ok(())
    }

    /// Count a request of `client` made with the key `digest` of `app`,
    /// which allows `per_hour` requests an hour from one client;
    /// [`Error::RateLimited`] when the client spent them.
    pub fn check_client(
        &self,
        app: &str,
        digest: &[u8; 32],
        client: &Client,
        per_hour: u32,
    ) -> Result<()> {
        let wait = match self
            .clients
            .take(app, digest, client, per_hour, Instant::now())
        {
            Ok(()) => return Ok(()),
            Err(wait) => wait,
        };
        self.count_refusal(app, "client");
        Err(clients::refusal(client, per_hour, wait))
    }

    /// Count a 429 of `app` by the limit `scope`, for `/metrics`.
    fn count_refusal(&self, app: &str, scope: &'static str) {
        *self
            .rate_limited
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry((app.to_string(), scope))
            .or_default() += 1;
    }

    /// Admit a request (a write when `write`), or refuse it with
    /// [`Error::Overloaded`] when its cap is reached.
    pub fn admit(&self, write: bool) -> Result<Admitted<'_>> {
        let all = self.in_flight.fetch_add(1, Ordering::Relaxed);
        let writes = if write {
            self.writes_in_flight.fetch_add(1, Ordering::Relaxed)
        } else {
            0
        };
        // From here a refusal's drop gives the counts back.
        let admitted = Admitted {
            limiter: self,
            write,
        };
        if all >= self.server.max_in_flight {
            return Err(self.shed(
                Shed::InFlight,
                format!(
                    "Server overloaded: {} requests in flight; retry later",
                    self.server.max_in_flight
                ),
            ));
        }
        if write && writes >= self.server.max_writes_in_flight {
            return Err(self.shed(
                Shed::WritesInFlight,
                format!(
                    "Server overloaded: {} writes in flight; retry later (reads are still served)",
                    self.server.max_writes_in_flight
                ),
            ));
        }
        Ok(admitted)
    }

    /// Count a refusal of `kind` and make its error.
    pub fn shed(&self, kind: Shed, message: String) -> Error {
        self.shed[kind as usize].fetch_add(1, Ordering::Relaxed);
        match kind {
            Shed::BodyTimeout => Error::Timeout { message },
            Shed::InFlight | Shed::WritesInFlight => Error::Overloaded {
                message,
                retry_after: 1,
            },
        }
    }

    /// Run `work`, storing an event batch, on the ingest threads (see
    /// [`ServerLimits::ingest_threads`] and [`ServerLimits::ingest_nice`]).
    pub async fn ingest<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce() -> Result<T> + Send + 'static,
    {
        self.ingest
            .get(&self.server)?
            .spawn_blocking(work)
            .await
            .map_err(|e| Error::Internal(format!("ingest task failed: {e}")))?
    }

    /// Requests being served now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// The Prometheus lines of the limits.
    pub fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let name = "affinity_http_rate_limited_total";
        let _ = writeln!(
            out,
            "# HELP {name} Requests refused with 429, by application and limit (application, key, or client: a key's maxQueriesPerIPPerHour).\n# TYPE {name} counter"
        );
        for ((app, scope), n) in self
            .rate_limited
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            let app = app.replace('\\', "\\\\").replace('"', "\\\"");
            let _ = writeln!(out, "{name}{{app=\"{app}\",limit=\"{scope}\"}} {n}");
        }
        let name = "affinity_http_shed_total";
        let _ = writeln!(
            out,
            "# HELP {name} Requests refused by the server's limits: 503 over max_in_flight or max_writes_in_flight, 408 for a body not sent in time.\n# TYPE {name} counter"
        );
        for kind in [Shed::InFlight, Shed::WritesInFlight, Shed::BodyTimeout] {
            let n = self.shed[kind as usize].load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}{{reason=\"{}\"}} {n}", kind.as_str());
        }
        let name = "affinity_http_in_flight";
        let _ = writeln!(
            out,
            "# HELP {name} Requests being served.\n# TYPE {name} gauge\n{name} {}",
            self.in_flight()
        );
        let name = "affinity_http_limited_clients";
        let _ = writeln!(
            out,
            "# HELP {name} Clients of keys with maxQueriesPerIPPerHour whose requests this server counts (at most {}).\n# TYPE {name} gauge\n{name} {}",
            clients::MAX_CLIENTS,
            self.clients.len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_gives_its_burst_then_refuses_with_the_wait() {
        let mut limiter = Limiter::new(ServerLimits::default());
        let limit = RateLimit {
            per_second: 0.5,
            burst: Some(3.0),
        };
        limiter.limit_app("shop", limit);
        let digest = [7; 32];
        for _ in 0..3 {
            limiter.check_rate("shop", &digest).unwrap();
        }
        let err = limiter.check_rate("shop", &digest).unwrap_err();
        assert_eq!(err.status(), axum::http::StatusCode::TOO_MANY_REQUESTS);
        assert!(err.to_string().contains("\"shop\""), "{err}");
        // A token every 2 s: the wait is about 2 s.
        assert!(matches!(err, Error::RateLimited { retry_after: 2, .. }));
        // Another application is not limited.
        limiter.check_rate("blog", &digest).unwrap();
        let mut out = String::new();
        limiter.render_metrics(&mut out);
        assert!(
            out.contains("affinity_http_rate_limited_total{app=\"shop\",limit=\"application\"} 1"),
            "{out}"
        );
    }

    #[test]
    fn ingest_threads_default_to_twice_the_cores_within_the_writes() {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let limits = ServerLimits::default();
        assert_eq!(limits.ingest_threads(), (2 * cores).min(16));
        let few = ServerLimits {
            max_writes_in_flight: 1,
            ..ServerLimits::default()
        };
        assert_eq!(few.ingest_threads(), 1);
        let set = ServerLimits {
            ingest_threads: Some(9),
            ..ServerLimits::default()
        };
        assert_eq!(set.ingest_threads(), 9);
    }

    #[test]
    fn a_key_limit_holds_for_that_key_only() {
        let mut limiter = Limiter::new(ServerLimits::default());
        let limit = RateLimit {
            per_second: 1.0,
            burst: None,
        };
        limiter.limit_key("shop", [1; 32], limit);
        limiter.check_rate("shop", &[1; 32]).unwrap();
        let err = limiter.check_rate("shop", &[1; 32]).unwrap_err();
        assert!(err.to_string().contains("this API key"), "{err}");
        limiter.check_rate("shop", &[2; 32]).unwrap();
        limiter.check_rate("shop", &[2; 32]).unwrap();
    }

    #[test]
    fn writes_are_shed_before_reads() {
        let limiter = Limiter::new(ServerLimits {
            max_in_flight: 3,
            max_writes_in_flight: 1,
            ..ServerLimits::default()
        });
        let write = limiter.admit(true).unwrap();
        let err = limiter.admit(true).err().unwrap();
        assert_eq!(err.status(), axum::http::StatusCode::SERVICE_UNAVAILABLE);
        assert!(err.to_string().contains("writes in flight"), "{err}");
        let read = limiter.admit(false).unwrap();
        let read2 = limiter.admit(false).unwrap();
        assert_eq!(limiter.in_flight(), 3);
        let err = limiter.admit(false).err().unwrap();
        assert!(err.to_string().contains("3 requests in flight"), "{err}");
        drop((write, read, read2));
        assert_eq!(limiter.in_flight(), 0);
        limiter.admit(true).unwrap();
    }

    #[test]
    fn bad_limits_are_refused_naming_them() {
        for (bad, field) in [
            (
                ServerLimits {
                    max_writes_in_flight: 0,
                    ..ServerLimits::default()
                },
                "max_writes_in_flight",
            ),
            (
                ServerLimits {
                    ingest_threads: Some(0),
                    ..ServerLimits::default()
                },
                "ingest_threads",
            ),
            (
                ServerLimits {
                    body_timeout_secs: 0.0,
                    ..ServerLimits::default()
                },
                "body_timeout_secs",
            ),
        ] {
            let err = bad.check().unwrap_err().to_string();
            assert!(err.contains(field), "{field}: {err}");
        }
        let rate = RateLimit {
            per_second: -1.0,
            burst: None,
        };
        assert!(rate.check("shop").unwrap_err().to_string().contains("shop"));
        for nice in [-1, 20] {
            let bad = ServerLimits {
                ingest_nice: nice,
                ..ServerLimits::default()
            };
            let err = bad.check().unwrap_err().to_string();
            assert!(
                err.contains("ingest_nice") && err.contains(&nice.to_string()),
                "{err}"
            );
        }
    }

    /// Event batches run on the ingest threads at `ingest_nice`, made as
    /// batches come; at 0, at the caller's priority.
    #[cfg(target_os = "linux")]
    #[test]
    fn event_batches_run_at_the_ingest_nice_value() {
        use crate::priority::this_thread;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let before = runtime.block_on(async { this_thread() });
        for nice in [0, 7] {
            let limiter = Limiter::new(ServerLimits {
                ingest_nice: nice,
                ..ServerLimits::default()
            });
            let (on, name) = runtime.block_on(async {
                limiter
                    .ingest(|| {
                        let name = std::thread::current().name().map(str::to_string);
                        Ok((this_thread(), name))
                    })
                    .await
                    .unwrap()
            });
            // A process already nicer than 7 may not come back up to it.
            let expected = if nice == 0 { before } else { nice.max(before) };
            assert_eq!(on, expected, "a batch at ingest_nice {nice}");
            assert_eq!(
                name.as_deref(),
                Some("affinity-ingest"),
                "at ingest_nice {nice}"
            );
            // The async threads keep their priority.
            assert_eq!(runtime.block_on(async { this_thread() }), before);
            // Dropped inside the runtime, as a stopping server drops its
            // state: no wait for the pool's threads, no panic.
            runtime.block_on(async move { drop(limiter) });
        }
    }

    /// At most `ingest_threads` batches are stored at once; the others
    /// wait for a thread, and every one is stored.
    #[test]
    fn batches_beyond_the_ingest_threads_wait_for_one() {
        use std::sync::Arc;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        let limiter = Arc::new(Limiter::new(ServerLimits {
            ingest_threads: Some(2),
            ..ServerLimits::default()
        }));
        let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let done = runtime.block_on(async {
            let tasks: Vec<_> = (0..8)
                .map(|i| {
                    let (limiter, now, most) = (limiter.clone(), now.clone(), most.clone());
                    tokio::spawn(async move {
                        limiter
                            .ingest(move || {
                                let at_once = now.fetch_add(1, Ordering::SeqCst) + 1;
                                most.fetch_max(at_once, Ordering::SeqCst);
                                std::thread::sleep(Duration::from_millis(30));
                                now.fetch_sub(1, Ordering::SeqCst);
                                Ok(i)
                            })
                            .await
                            .unwrap()
                    })
                })
                .collect();
            let mut done = Vec::new();
            for task in tasks {
                done.push(task.await.unwrap());
            }
            done
        });
        assert_eq!(done, (0..8).collect::<Vec<_>>());
        assert_eq!(most.load(Ordering::SeqCst), 2, "batches stored at once");
    }

    /// The first batches of a server arrive together: each may make the
    /// pool, one is kept, and every batch is stored (the others' pools
    /// are let go without a panic in the async context).
    #[test]
    fn first_batches_at_once_share_one_pool() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .build()
            .unwrap();
        for _ in 0..20 {
            let limiter = std::sync::Arc::new(Limiter::new(ServerLimits::default()));
            let gate = std::sync::Arc::new(std::sync::Barrier::new(8));
            let results = runtime.block_on(async {
                let tasks: Vec<_> = (0..8)
                    .map(|i| {
                        let (limiter, gate) = (limiter.clone(), gate.clone());
                        tokio::task::spawn_blocking(move || {
                            gate.wait();
                            tokio::runtime::Handle::current()
                                .block_on(limiter.ingest(move || Ok(i)))
                        })
                    })
                    .collect();
                let mut results = Vec::new();
                for task in tasks {
                    results.push(task.await.unwrap().unwrap());
                }
                results
            });
            assert_eq!(results, (0..8).collect::<Vec<_>>());
        }
    }
}
