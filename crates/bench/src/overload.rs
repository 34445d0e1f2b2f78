//! `affinity bench overload`: the server's limits under twice the ingest
//! it can sustain. On a server in this process (embedded store, the
//! server's `[limits]` from the flags):
//!
//! 1. **calibrate**: `--clients` closed-loop clients send `--batch`-event
//!    requests for `--seconds`; the acknowledged batches a second are the
//!    sustainable rate;
//! 2. **reads alone**: `--readers` clients read profiles for `--seconds`,
//!    the p99 without ingest;
//! 3. **overload**: `--factor` times the sustainable rate offered by
//!    paced senders (open loop: a refused request does not slow the next),
//!    while the same readers read. Printed: batches offered, acknowledged
//!    and shed (503, 429), and the reads' p50/p99 next to the goal.
//!
//! The server, the senders and the readers share this machine's cores, as
//! in `bench http`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use affinity_engine::Engine;
use affinity_http::{Acl, Keys, Limiter, ServerLimits};
use anyhow::Context;

use crate::http::events_body;
use crate::wire::Endpoint;
use crate::{quantile, BenchBackend};

const APP: &str = "bench";
const KEY: &str = "bench-key";
const GOAL_READ_P99_MS: f64 = 5.0;

#[derive(clap::Args, Clone)]
pub struct OverloadBenchArgs {
    /// Closed-loop ingest clients of the calibration.
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Profile readers, alone and under the overload.
    #[arg(long, default_value_t = 50)]
    readers: usize,
    /// Seconds of each phase.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// The offered ingest, as a multiple of the calibrated rate.
    #[arg(long, default_value_t = 2.0)]
    factor: f64,
    /// Events per request.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u16).range(1..=1000))]
    batch: u16,
    /// Users whose profiles are read (the events go to them and to the
    /// visitors).
    #[arg(long, default_value_t = 2000)]
    users: usize,
    /// Further users the events go to, never read, as in `bench soak`:
    /// with the defaults the read users get a hundredth of the events
    /// instead of all of them. `0` sends every event to the read users,
    /// whose cached profiles the ingest then keeps invalidating.
    #[arg(long, default_value_t = 200_000)]
    visitors: usize,
    /// Paced senders of the overload: enough that the offered rate does
    /// not wait for answers.
    #[arg(long, default_value_t = 256)]
    senders: usize,
    /// The server's `max_writes_in_flight` (see docs/api.md, Limits).
    #[arg(long, default_value_t = ServerLimits::default().max_writes_in_flight)]
    max_writes_in_flight: usize,
    /// The server's `max_in_flight`.
    #[arg(long, default_value_t = ServerLimits::default().max_in_flight)]
    max_in_flight: usize,
    /// The server's `ingest_nice`.
    #[arg(long, default_value_t = ServerLimits::default().ingest_nice)]
    ingest_nice: i32,
    /// The server's `ingest_threads` (default: twice the cores, at most
    /// `--max-writes-in-flight`).
    #[arg(long)]
    ingest_threads: Option<usize>,
    /// MiB of profile cache, as `affinity serve --profile-cache-mib` (0: none).
    #[arg(long, default_value_t = affinity_engine::cache::DEFAULT_BUDGET_MIB)]
    profile_cache_mib: usize,
    /// How the server's connections share the cores, as `affinity serve
    /// --scheduler`: `per-core` (its clients run on the same threads) or
    /// `shared`.
    #[arg(long, default_value = "shared")]
    scheduler: affinity_http::Scheduler,
}

/// What the requests of a phase got.
#[derive(Default)]
pub(crate) struct Counts {
    pub latencies: Vec<Duration>,
    pub ok: u64,
    pub shed: u64,
    pub limited: u64,
    /// Requests whose connection the server closed before answering
    /// (a shed request's body still being sent when the refusal came).
    pub closed: u64,
    pub errors: u64,
    pub first_error: Option<String>,
}

impl Counts {
    fn merge(&mut self, other: Counts) {
        self.latencies.extend(other.latencies);
        self.ok += other.ok;
        self.shed += other.shed;
        self.limited += other.limited;
        self.closed += other.closed;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }

    /// Count an answer (or a failure) of `what`, sent at `sent`.
    pub(crate) fn answer(
        &mut self,
        what: &str,
        sent: Instant,
        answer: &anyhow::Result<crate::wire::Answer>,
    ) {
        match answer {
            Ok(a) if a.status == 200 || a.status == 404 => {
                self.latencies.push(sent.elapsed());
                self.ok += 1;
            }
            Ok(a) if a.status == 503 => self.shed += 1,
            Ok(a) if a.status == 429 => self.limited += 1,
            Ok(a) => {
                self.errors += 1;
                self.first_error.get_or_insert_with(|| {
                    let body = String::from_utf8_lossy(&a.body);
                    format!(
                        "{what} answered {}: {}",
                        a.status,
                        &body[..body.len().min(300)]
                    )
                });
            }
            Err(e) => {
                self.errors += 1;
                self.first_error
                    .get_or_insert_with(|| format!("{what} failed: {e:#}"));
            }
        }
    }

    /// The latency quantile `q` in milliseconds.
    pub(crate) fn ms(&mut self, q: f64) -> f64 {
        self.latencies.sort_unstable();
        quantile(&self.latencies, q).map_or(0.0, |d| d.as_secs_f64() * 1e3)
    }
}

/// The in-process server of a run.
pub(crate) struct Running {
    pub endpoint: Endpoint,
    pub store: Arc<affinity_embedded::EmbeddedStore>,
    pub engine: Arc<Engine>,
    /// The server's `[limits]`.
    pub limits: ServerLimits,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Running {
    /// A server on the embedded store in `dir` with `limits`, maintaining
    /// every `maintain_every`, with a profile cache of `profile_cache_mib`
    /// (as `affinity serve --profile-cache-mib`) and rollup rows kept as
    /// `affinity serve` keeps them by default, its strategy set.
    pub(crate) async fn start(
        dir: &std::path::Path,
        limits: ServerLimits,
        maintain_every: Option<Duration>,
        profile_cache_mib: usize,
        scheduler: affinity_http::Scheduler,
    ) -> anyhow::Result<Running> {
        let store = affinity_embedded::EmbeddedStore::open(dir)
            .with_context(|| format!("opening the embedded store in {}", dir.display()))?;
        let store = Arc::new(store);
        let engine = Arc::new(
            Engine::open(Arc::clone(&store) as _)?
                .with_profile_cache(profile_cache_mib << 20)
                .with_rollup_cache(affinity_engine::cache::DEFAULT_BUDGET_MIB << 20),
        );
        let mut keys = Keys::default();
        keys.add(APP, KEY, [Acl::Admin])?;
        limits.check()?;
        let workers = scheduler
            .workers(None)
            .context("starting the connection threads")?;
        let state = affinity_http::State::with_inline_reads(Arc::clone(&engine), keys, true)
            .with_limits(Limiter::new(limits))
            .with_maintenance(maintain_every)
            .with_workers(workers.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding a loopback port")?;
        let base = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(affinity_http::serve(listener, state, async {
            let _ = stopped.await;
        }));
        let endpoint = Endpoint::parse(&base)?
            .with_header("x-algolia-application-id", APP)
            .with_header("x-algolia-api-key", KEY)
            .with_workers(workers);
        let mut conn = endpoint.connect().await?;
        let strategy = serde_json::json!({
            "eventsScoring": [
                {"eventName": "Viewed", "eventType": "view", "score": 5},
                {"eventName": "Clicked", "eventType": "click", "score": 10},
                {"eventName": "Bought", "eventType": "conversion", "score": 50}],
            "facetsScoring": [
                {"facetName": "brand", "score": 100}, {"facetName": "category", "score": 80},
                {"facetName": "color", "score": 40}, {"facetName": "size", "score": 20}],
            "personalizationImpact": 50});
        let set = conn
            .send(
                "POST",
                "/1/strategies/personalization",
                strategy.to_string().as_bytes(),
            )
            .await?;
        anyhow::ensure!(
            set.status == 200,
            "setting the strategy answered {}",
            set.status
        );
        Ok(Running {
            endpoint,
            store,
            engine,
            limits,
            stop,
            server,
        })
    }

    pub(crate) async fn stop(self) -> anyhow::Result<()> {
        let _ = self.stop.send(());
        self.server.await.context("the server task")??;
        Ok(())
    }
}

fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `clients` closed-loop clients sending batches until `deadline`.
async fn closed_loop(
    endpoint: &Endpoint,
    clients: usize,
    batch: usize,
    users: usize,
    deadline: Instant,
) -> Counts {
    let now = now_millis();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let endpoint = endpoint.clone();
            endpoint.clone().spawn(c, async move {
                let mut counts = Counts::default();
                let mut conn = match endpoint.connect().await {
                    Ok(conn) => conn,
                    Err(e) => {
                        counts.answer("POST /1/events", Instant::now(), &Err(e));
                        return counts;
                    }
                };
                let mut n = 0;
                while Instant::now() < deadline {
                    let body = events_body(c, n, batch, users, now);
                    n += 1;
                    let sent = Instant::now();
                    let answer = conn.send("POST", "/1/events", body.as_bytes()).await;
                    if answer.is_err() {
                        // Refused before its body was read (more clients
                        // than writes in flight), the request's connection
                        // was closed: the client reconnects.
                        counts.closed += 1;
                        match endpoint.connect().await {
                            Ok(fresh) => conn = fresh,
                            Err(e) => {
                                counts.answer("POST /1/events", Instant::now(), &Err(e));
                                break;
                            }
                        }
                        continue;
                    }
                    // Shed: wait as Retry-After says (1 s), as clients do,
                    // instead of spinning on refusals.
                    let shed = answer
                        .as_ref()
                        .is_ok_and(|r| r.status == 503 || r.status == 429);
                    counts.answer("POST /1/events", sent, &answer);
                    if shed {
                        let wake = (Instant::now() + Duration::from_secs(1)).min(deadline);
                        tokio::time::sleep_until(wake.into()).await;
                    }
                }
                counts
            })
        })
        .collect();
    join(tasks).await
}

/// `senders` senders offering `per_second` batches a second in all until
/// `deadline`, each on its own schedule (a sender behind it sends at once).
pub(crate) async fn paced(
    endpoint: &Endpoint,
    senders: usize,
    per_second: f64,
    batch: usize,
    users: usize,
    deadline: Instant,
) -> Counts {
    let now = now_millis();
    let every = Duration::from_secs_f64(senders as f64 / per_second.max(1e-3));
    let tasks: Vec<_> = (0..senders)
        .map(|s| {
            let endpoint = endpoint.clone();
            endpoint.clone().spawn(s, async move {
                let mut counts = Counts::default();
                // Spread the senders' first requests over one period.
                let mut next = Instant::now() + every.mul_f64(s as f64 / senders as f64);
                let mut conn = None;
                let mut n = 0;
                loop {
                    tokio::time::sleep_until(next.into()).await;
                    if Instant::now() >= deadline {
                        break;
                    }
                    next += every;
                    if conn.is_none() {
                        conn = endpoint.connect().await.ok();
                    }
                    let Some(c) = conn.as_mut() else {
                        counts.answer(
                            "POST /1/events",
                            Instant::now(),
                            &Err(anyhow::anyhow!("cannot connect")),
                        );
                        continue;
                    };
                    let body = events_body(1000 + s, n, batch, users, now);
                    n += 1;
                    let sent = Instant::now();
                    let answer = c.send("POST", "/1/events", body.as_bytes()).await;
                    if answer.is_err() {
                        // Refused before its body was read, the request's
                        // connection is closed: the sender reconnects.
                        conn = None;
                        counts.closed += 1;
                        continue;
                    }
                    counts.answer("POST /1/events", sent, &answer);
                }
                counts
            })
        })
        .collect();
    join(tasks).await
}

/// `readers` clients reading profiles of `users` until `deadline`.
pub(crate) async fn readers(
    endpoint: &Endpoint,
    readers: usize,
    users: usize,
    deadline: Instant,
) -> Counts {
    let tasks: Vec<_> = (0..readers)
        .map(|r| {
            let endpoint = endpoint.clone();
            endpoint.clone().spawn(r, async move {
                let mut counts = Counts::default();
                let mut conn = match endpoint.connect().await {
                    Ok(conn) => conn,
                    Err(e) => {
                        counts.answer("GET a profile", Instant::now(), &Err(e));
                        return counts;
                    }
                };
                let mut n = r;
                while Instant::now() < deadline {
                    let path = format!("/1/profiles/personalization/user{}", (n * 31) % users);
                    n += readers;
                    let sent = Instant::now();
                    let answer = conn.send("GET", &path, b"").await;
                    let failed = answer.is_err();
                    counts.answer("GET a profile", sent, &answer);
                    if failed {
                        break;
                    }
                }
                counts
            })
        })
        .collect();
    join(tasks).await
}

async fn join(tasks: Vec<tokio::task::JoinHandle<Counts>>) -> Counts {
    let mut counts = Counts::default();
    for task in tasks {
        match task.await {
            Ok(c) => counts.merge(c),
            Err(e) => counts.answer("a client task", Instant::now(), &Err(e.into())),
        }
    }
    counts
}

/// Run the benchmark on a server in this process.
pub fn run(args: OverloadBenchArgs, backend: &BenchBackend) -> anyhow::Result<()> {
    anyhow::ensure!(args.clients > 0, "--clients must be positive");
    anyhow::ensure!(args.readers > 0, "--readers must be positive");
    anyhow::ensure!(args.senders > 0, "--senders must be positive");
    anyhow::ensure!(args.users > 0, "--users must be positive");
    anyhow::ensure!(args.seconds > 0, "--seconds must be positive");
    anyhow::ensure!(
        args.factor.is_finite() && args.factor > 0.0,
        "--factor must be positive"
    );
    let (dir, _tmp) = crate::data_dir(backend.data.as_deref())?;
    let limits = ServerLimits {
        max_in_flight: args.max_in_flight,
        max_writes_in_flight: args.max_writes_in_flight,
        ingest_nice: args.ingest_nice,
        ingest_threads: args.ingest_threads,
        ..ServerLimits::default()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(async {
        let server =
            Running::start(&dir, limits, None, args.profile_cache_mib, args.scheduler).await?;
        let result = phases(&args, &server).await;
        server.stop().await?;
        result
    });
    runtime.shutdown_timeout(Duration::from_secs(10));
    result
}

async fn phases(args: &OverloadBenchArgs, server: &Running) -> anyhow::Result<()> {
    let phase = Duration::from_secs(args.seconds);
    let batch = usize::from(args.batch);
    eprintln!(
        "affinity bench overload: {} s calibration ({} clients, {batch}-event batches), \
         {} s of {} readers alone, {} s of {}x the calibrated ingest with the readers; \
         events to {} users, reads of the first {}; limits: max_writes_in_flight {}, max_in_flight {}, ingest_nice {}, ingest_threads {}",
        args.seconds,
        args.clients,
        args.seconds,
        args.readers,
        args.seconds,
        args.factor,
        args.users + args.visitors,
        args.users,
        server.limits.max_writes_in_flight,
        server.limits.max_in_flight,
        server.limits.ingest_nice,
        server.limits.ingest_threads()
    );
    let started = Instant::now();
    let mut calibration = closed_loop(
        &server.endpoint,
        args.clients,
        batch,
        args.users + args.visitors,
        Instant::now() + phase,
    )
    .await;
    let sustainable = calibration.ok as f64 / started.elapsed().as_secs_f64();
    println!(
        "calibration   {:>9.0} events/s ({sustainable:.1} batches/s), batch p99 {:.1} ms{}",
        sustainable * batch as f64,
        calibration.ms(0.99),
        match calibration.shed + calibration.closed {
            0 => String::new(),
            n => format!(
                " ({n} shed: more --clients than --max-writes-in-flight; shed clients wait 1 s)"
            ),
        }
    );
    // The reads alone start on a settled store, as in `bench http`.
    server.store.flush()?;
    let mut alone = readers(
        &server.endpoint,
        args.readers,
        args.users,
        Instant::now() + phase,
    )
    .await;
    println!(
        "reads alone   {:>9.0} reads/s, p50 {:.2} ms, p99 {:.2} ms (goal <= {GOAL_READ_P99_MS} ms)",
        alone.ok as f64 / args.seconds as f64,
        alone.ms(0.5),
        alone.ms(0.99)
    );
    let offered = sustainable * args.factor;
    let deadline = Instant::now() + phase;
    let (mut ingest, mut reads) = tokio::join!(
        paced(
            &server.endpoint,
            args.senders,
            offered,
            batch,
            args.users + args.visitors,
            deadline
        ),
        readers(&server.endpoint, args.readers, args.users, deadline),
    );
    let secs = args.seconds as f64;
    let sent = ingest.ok + ingest.shed + ingest.limited + ingest.closed + ingest.errors;
    println!(
        "overload      offered {offered:.1} batches/s ({}x), sent {:.1}/s: acknowledged {:.1}/s \
         ({:.0} events/s, p99 {:.1} ms), shed 503 {:.1}/s, 429 {:.1}/s, closed while sending {}, \
         errors {}",
        args.factor,
        sent as f64 / secs,
        ingest.ok as f64 / secs,
        ingest.ok as f64 * batch as f64 / secs,
        ingest.ms(0.99),
        ingest.shed as f64 / secs,
        ingest.limited as f64 / secs,
        ingest.closed,
        ingest.errors
    );
    let p99 = reads.ms(0.99);
    println!(
        "reads under   {:>9.0} reads/s, p50 {:.2} ms, p99 {p99:.2} ms (goal <= {GOAL_READ_P99_MS} ms: {}), \
         shed {}, errors {}",
        reads.ok as f64 / secs,
        reads.ms(0.5),
        if p99 <= GOAL_READ_P99_MS { "met" } else { "missed" },
        reads.shed,
        reads.errors
    );
    for counts in [&calibration, &alone, &ingest, &reads] {
        if let Some(e) = &counts.first_error {
            anyhow::bail!("{} requests failed; the first: {e}", counts.errors);
        }
    }
    Ok(())
}
