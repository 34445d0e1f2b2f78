//! `affinity bench http`: the HTTP API under load. Concurrent clients send
//! `--batch`-event requests to `POST /1/events` for `--seconds`, then
//! concurrent readers fetch profiles for `--seconds`; one line per phase
//! (events/s and batch p50/p99; reads/s and p50/p99), next to the goals.
//!
//! Between the phases the in-process embedded store is settled: its
//! memtables flushed and its compactions waited for, timed, and the ingest
//! rate is given again counting that time, so each phase pays for its own
//! work (the flushes and compactions a burst leaves behind are the
//! ingest's, not the reads'), as `bench store` and `bench schemas` do.
//! `--no-settle` starts the reads at once instead: they then compete with
//! that work and merge the rows' pending adds themselves (the worst case
//! for reads).
//!
//! The server is the real [`affinity_http::serve`] in this process, on the
//! embedded store in `--data` (default a temporary directory) or on Cloud
//! Bigtable with `--bigtable`; or, with `--url`, an `affinity serve`
//! running elsewhere (then no store is opened here). Non-200 answers are
//! counted, not fatal; a run with any makes the command fail afterwards,
//! naming the first.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use affinity_engine::Engine;
use affinity_http::auth::{Acl, Keys};
use anyhow::{bail, Context};
use serde_json::{json, Value};

use super::quantile;
use super::wire::{Answer, Endpoint};

/// The goals of issue 5, printed next to the figures.
const GOAL_EVENTS_PER_S: f64 = 100_000.0;
const GOAL_READ_P99_MS: f64 = 5.0;
const GOAL_READERS: usize = 50;
/// The application and admin key of the in-process server.
const APP: &str = "bench";
const KEY: &str = "bench-key";
const DAY_MS: u64 = 86_400_000;
/// Characters of an error body kept for the message.
const BODY_CHARS: usize = 300;

#[derive(clap::Args)]
pub struct HttpBenchArgs {
    /// Concurrent ingest clients.
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Seconds of each phase (ingest, then profile reads).
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Concurrent profile-read clients.
    #[arg(long, default_value_t = 50)]
    readers: usize,
    /// Distinct users the events are spread over (and profiles read from).
    #[arg(long, default_value_t = 10_000)]
    users: usize,
    /// Events per request (the API takes at most 1000).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u16).range(1..=1000))]
    batch: u16,
    /// Directory of the in-process server's embedded store (default: a
    /// temporary directory, removed afterwards).
    #[arg(long, conflicts_with_all = ["url", "bigtable"])]
    data: Option<PathBuf>,
    /// Run the in-process server on Cloud Bigtable: PROJECT/INSTANCE (the
    /// emulator through BIGTABLE_EMULATOR_HOST).
    #[arg(long, value_name = "PROJECT/INSTANCE", conflicts_with = "url")]
    bigtable: Option<String>,
    /// Drive an `affinity serve` already running at this base URL
    /// (http://host:port) instead of a server in this process.
    #[arg(long, requires_all = ["app_id", "api_key"])]
    url: Option<String>,
    /// The application to send events to with `--url`.
    #[arg(long = "app-id", requires = "url")]
    app_id: Option<String>,
    /// A key of that application with the admin ACL (or events + profiles,
    /// when the application already has a strategy).
    #[arg(long = "api-key", requires = "url")]
    api_key: Option<String>,
    /// Start the reads the moment the ingest ends, while the store still
    /// flushes and compacts what it wrote (the default waits for that, on
    /// the in-process embedded store, and counts the wait in the ingest
    /// rate).
    #[arg(long)]
    no_settle: bool,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Where the requests go: the server, with the application's credentials
/// on every request.
#[derive(Clone)]
struct Target {
    base: String,
    endpoint: Endpoint,
}

impl Target {
    fn new(base: &str, app: &str, key: &str) -> anyhow::Result<Target> {
        let endpoint = Endpoint::parse(base)?
            .with_header("x-algolia-application-id", app)
            .with_header("x-algolia-api-key", key);
        Ok(Target {
            base: base.trim_end_matches('/').to_string(),
            endpoint,
        })
    }
}

/// What the clients of one phase saw.
#[derive(Default)]
struct Tally {
    /// Latencies of the answered requests (200, and 404 for profiles).
    latencies: Vec<Duration>,
    /// When each of those answers came, in ms since the phase started (in
    /// the order of `latencies` until [`Tally::ms`] sorts them).
    stamps: Vec<u32>,
    ok: u64,
    not_found: u64,
    errors: u64,
    first_error: Option<String>,
}

impl Tally {
    fn error(&mut self, message: String) {
        self.errors += 1;
        self.first_error.get_or_insert(message);
    }

    fn merge(&mut self, other: Tally) {
        self.latencies.extend(other.latencies);
        self.stamps.extend(other.stamps);
        self.ok += other.ok;
        self.not_found += other.not_found;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }

    fn answered(&mut self, started: Instant, sent: Instant) {
        self.latencies.push(sent.elapsed());
        self.stamps
            .push(u32::try_from(started.elapsed().as_millis()).unwrap_or(u32::MAX));
    }

    /// Answers, p99 (ms) and answers slower than the read goal of each
    /// whole second of the phase, before [`Tally::ms`] sorts the latencies.
    fn by_second(&self) -> Vec<(usize, f64, usize)> {
        let mut seconds: Vec<Vec<Duration>> = Vec::new();
        for (latency, stamp) in self.latencies.iter().zip(&self.stamps) {
            let s = *stamp as usize / 1000;
            if seconds.len() <= s {
                seconds.resize_with(s + 1, Vec::new);
            }
            seconds[s].push(*latency);
        }
        seconds
            .into_iter()
            .map(|mut l| {
                l.sort_unstable();
                let p99 = quantile(&l, 0.99).map_or(0.0, |d| d.as_secs_f64() * 1e3);
                let goal = Duration::from_secs_f64(GOAL_READ_P99_MS / 1e3);
                let slow = l.len() - l.partition_point(|d| *d <= goal);
                (l.len(), p99, slow)
            })
            .collect()
    }

    fn ms(&mut self, q: f64) -> f64 {
        self.latencies.sort_unstable();
        quantile(&self.latencies, q).map_or(0.0, |d| d.as_secs_f64() * 1e3)
    }
}

/// Flush the store and wait for its compactions.
type Settle = Arc<dyn Fn() -> anyhow::Result<()> + Send + Sync>;

/// How the store came out of the ingest phase.
enum Settled {
    /// Flushed and compacted in this many seconds before the reads.
    After(f64),
    /// Not waited for, and why.
    Not(&'static str),
}

/// A phase's tally and its wall time.
struct Phase {
    tally: Tally,
    seconds: f64,
}

pub fn run(args: HttpBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.clients > 0, "--clients must be positive");
    anyhow::ensure!(args.readers > 0, "--readers must be positive");
    anyhow::ensure!(args.users > 0, "--users must be positive");
    anyhow::ensure!(args.seconds > 0, "--seconds must be positive");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    match (&args.url, &args.app_id, &args.api_key) {
        (Some(url), Some(app), Some(key)) => {
            let target = Target::new(url, app, key)?;
            let described = format!("the server at {}", target.base);
            runtime.block_on(bench(&args, target, &described, "remote", None))
        }
        _ => in_process(&args, runtime),
    }
}

/// Run the benchmark against the real server in this process, on the
/// embedded store or `--bigtable`.
fn in_process(args: &HttpBenchArgs, runtime: tokio::runtime::Runtime) -> anyhow::Result<()> {
    // Opened outside the runtime: the Bigtable backend owns one.
    let (data, _tmp) = match &args.bigtable {
        Some(_) => (PathBuf::new(), None),
        None => super::data_dir(args.data.as_deref())?,
    };
    let backend = crate::backend::BackendArgs {
        data,
        bigtable: args.bigtable.clone(),
    };
    let (store, settle): (Arc<dyn affinity_model::Store>, Option<Settle>) = match &args.bigtable {
        Some(_) => (backend.open()?, None),
        None => {
            let embedded = backend.open_embedded()?;
            let flush = Arc::clone(&embedded);
            let settle: Settle = Arc::new(move || flush.flush().map_err(anyhow::Error::from));
            (embedded, Some(settle))
        }
    };
    let engine = Arc::new(Engine::open(store)?);
    let mut keys = Keys::default();
    keys.add(APP, KEY, [Acl::Admin])?;
    let kind = match args.bigtable {
        Some(_) => "bigtable",
        None => "embedded",
    };
    let described = format!("an in-process server on the {}", backend.describe());
    let result = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding a loopback port")?;
        let base = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = affinity_http::State::with_inline_reads(engine, keys, backend.is_local());
        let server = tokio::spawn(affinity_http::serve(listener, state, async {
            let _ = stopped.await;
        }));
        let result = match Target::new(&base, APP, KEY) {
            Ok(target) => bench(args, target, &described, kind, settle).await,
            Err(e) => Err(e),
        };
        let _ = stop.send(());
        server.await.context("the server task")??;
        result
    });
    // The engine's last holders (a recompute job the strategy started)
    // finish before the temporary store directory is removed.
    runtime.shutdown_timeout(Duration::from_secs(10));
    result
}

/// Check the server, set a strategy if the application has none, run both
/// phases, print and write the figures; fail if any request failed.
async fn bench(
    args: &HttpBenchArgs,
    target: Target,
    described: &str,
    kind: &str,
    settle: Option<Settle>,
) -> anyhow::Result<()> {
    prepare(&target).await?;
    let settling = if settle.is_some() && !args.no_settle {
        ", the store settled,"
    } else {
        ""
    };
    eprintln!(
        "affinity bench http: {described}; {} s of ingest{settling} then {} s of profile reads",
        args.seconds, args.seconds
    );
    let ingest = ingest(args, &target).await;
    let settled = match settle {
        _ if args.no_settle => Settled::Not("--no-settle"),
        None if kind == "remote" => Settled::Not("the server is elsewhere"),
        None => Settled::Not("Cloud Bigtable compacts on its own"),
        Some(settle) => {
            let started = Instant::now();
            tokio::task::spawn_blocking(move || settle())
                .await
                .context("the settle task")?
                .context("flushing and compacting the store after the ingest")?;
            Settled::After(started.elapsed().as_secs_f64())
        }
    };
    let reads = read_profiles(args, &target).await;
    let (ingest_errors, read_errors) = (ingest.tally.errors, reads.tally.errors);
    let first_error = ingest
        .tally
        .first_error
        .clone()
        .or_else(|| reads.tally.first_error.clone());
    let (lines, json) = report(args, ingest, &settled, reads, described, kind);
    println!("{lines}");
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&json)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if ingest_errors + read_errors > 0 {
        bail!(
            "{} requests failed (ingest {ingest_errors}, profile reads {read_errors}); the first: {}",
            ingest_errors + read_errors,
            first_error.unwrap_or_default()
        );
    }
    Ok(())
}

/// The server answers `/health`, and the application has a strategy (ours
/// is set when it has none, so an existing one is never replaced).
async fn prepare(target: &Target) -> anyhow::Result<()> {
    let mut conn = target
        .endpoint
        .connect()
        .await
        .with_context(|| format!("cannot reach an affinity server at {}", target.base))?;
    let health = conn.send("GET", "/health", b"").await?;
    expect(&health, 200, "GET /health")?;
    let path = "/1/strategies/personalization";
    let current = conn
        .send("GET", path, b"")
        .await
        .with_context(|| format!("GET {path}"))?;
    if current.status == 404 {
        let strategy = json!({
            "eventsScoring": [
                {"eventName": "Viewed", "eventType": "view", "score": 5},
                {"eventName": "Clicked", "eventType": "click", "score": 10},
                {"eventName": "Bought", "eventType": "conversion", "score": 50}],
            "facetsScoring": [
                {"facetName": "brand", "score": 100}, {"facetName": "category", "score": 80},
                {"facetName": "color", "score": 40}, {"facetName": "size", "score": 20}],
            "personalizationImpact": 50});
        let set = conn
            .send("POST", path, strategy.to_string().as_bytes())
            .await
            .with_context(|| format!("POST {path}"))?;
        expect(&set, 200, "POST /1/strategies/personalization")
    } else {
        expect(&current, 200, "GET /1/strategies/personalization")
    }
}

/// Fail naming the status and body unless the answer is `want`.
fn expect(answer: &Answer, want: u16, what: &str) -> anyhow::Result<()> {
    if answer.status != want {
        bail!(
            "{what} answered {}: {}",
            answer.status,
            clip(&String::from_utf8_lossy(&answer.body))
        );
    }
    Ok(())
}

fn clip(body: &str) -> String {
    body.chars().take(BODY_CHARS).collect()
}

/// The ingest phase: `--clients` tasks sending batches until the deadline.
async fn ingest(args: &HttpBenchArgs, target: &Target) -> Phase {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let started = Instant::now();
    let (batch, users) = (usize::from(args.batch), args.users);
    let tasks: Vec<_> = (0..args.clients)
        .map(|c| {
            let target = target.clone();
            tokio::spawn(async move {
                let mut tally = Tally::default();
                let mut conn = match target.endpoint.connect().await {
                    Ok(conn) => conn,
                    Err(err) => {
                        tally.error(format!("POST /1/events failed: {err:#}"));
                        return tally;
                    }
                };
                let mut n = 0;
                while Instant::now() < deadline {
                    let body = events_body(c, n, batch, users, now);
                    n += 1;
                    let t = Instant::now();
                    match conn.send("POST", "/1/events", body.as_bytes()).await {
                        Ok(answer) if answer.status == 200 => {
                            tally.answered(started, t);
                            tally.ok += 1;
                        }
                        Ok(answer) => tally.error(format!(
                            "POST /1/events answered {}: {}",
                            answer.status,
                            clip(&String::from_utf8_lossy(&answer.body))
                        )),
                        Err(err) => {
                            // The connection failed: this client stops.
                            tally.error(format!("POST /1/events failed: {err:#}"));
                            break;
                        }
                    }
                }
                tally
            })
        })
        .collect();
    join(tasks, started).await
}

/// One request's events: users spread over `users` (each client starts at
/// its own offset), timestamps within the last day, a view/click/conversion
/// mix and four filters per event. Written by hand: the clients share the
/// server's cores, so the body should cost little to build.
fn events_body(client: usize, n: usize, batch: usize, users: usize, now: i64) -> String {
    let mut body = String::with_capacity(batch * 220 + 16);
    body.push_str(r#"{"events":["#);
    for i in 0..batch {
        let seq = n * batch + i;
        let user = (client * 7919 + seq) % users;
        let age = (client * 1_000_003 + seq) as u64 % DAY_MS;
        let mix = splitmix(((client as u64) << 40) ^ seq as u64);
        let (kind, name) = match mix % 10 {
            0 => ("conversion", "Bought"),
            1..=3 => ("click", "Clicked"),
            _ => ("view", "Viewed"),
        };
        if i > 0 {
            body.push(',');
        }
        let _ = write!(
            body,
            r#"{{"eventType":"{kind}","eventName":"{name}","index":"products","userToken":"user{user}","timestamp":{},"filters":["brand:b{}","category:k{}","color:c{}","size:s{}"]}}"#,
            now - age as i64,
            (mix >> 8) % 40,
            (mix >> 16) % 25,
            (mix >> 24) % 12,
            (mix >> 32) % 6,
        );
    }
    body.push_str("]}");
    body
}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The read phase: `--readers` tasks reading profiles until the deadline;
/// 404 (a user without a profile) is an answer, not an error.
async fn read_profiles(args: &HttpBenchArgs, target: &Target) -> Phase {
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let started = Instant::now();
    let (readers, users) = (args.readers, args.users);
    let tasks: Vec<_> = (0..readers)
        .map(|r| {
            let target = target.clone();
            tokio::spawn(async move {
                let mut tally = Tally::default();
                let mut conn = match target.endpoint.connect().await {
                    Ok(conn) => conn,
                    Err(err) => {
                        tally.error(format!("GET a profile failed: {err:#}"));
                        return tally;
                    }
                };
                let mut n = r;
                while Instant::now() < deadline {
                    let path = format!("/1/profiles/personalization/user{}", (n * 31) % users);
                    n += readers;
                    let t = Instant::now();
                    match conn.send("GET", &path, b"").await {
                        Ok(answer) => match answer.status {
                            200 | 404 => {
                                tally.answered(started, t);
                                tally.ok += u64::from(answer.status == 200);
                                tally.not_found += u64::from(answer.status == 404);
                            }
                            status => tally.error(format!(
                                "GET {path} answered {status}: {}",
                                clip(&String::from_utf8_lossy(&answer.body))
                            )),
                        },
                        Err(err) => {
                            tally.error(format!("GET {path} failed: {err:#}"));
                            break;
                        }
                    }
                }
                tally
            })
        })
        .collect();
    join(tasks, started).await
}

async fn join(tasks: Vec<tokio::task::JoinHandle<Tally>>, started: Instant) -> Phase {
    let mut tally = Tally::default();
    for task in tasks {
        match task.await {
            Ok(t) => tally.merge(t),
            Err(err) => tally.error(format!("a client task failed: {err}")),
        }
    }
    Phase {
        tally,
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// The printed lines (one per phase) and the JSON document.
fn report(
    args: &HttpBenchArgs,
    mut ingest: Phase,
    settled: &Settled,
    mut reads: Phase,
    described: &str,
    kind: &str,
) -> (String, Value) {
    let batch = u64::from(args.batch);
    let events = ingest.tally.ok * batch;
    let events_per_s = events as f64 / ingest.seconds;
    // The rate the goal is held to: with the flushes and compactions the
    // burst left behind, when the bench waited for them.
    let (settle_line, settle_seconds, events_per_s_settled) = match settled {
        Settled::After(s) => {
            let rate = events as f64 / (ingest.seconds + s);
            (
                format!("settle: the store flushed and compacted what the ingest wrote in {s:.2} s before the reads; counting it, ingest = {rate:.0} events/s"),
                Some(*s),
                rate,
            )
        }
        Settled::Not(why) => (
            format!("settle: none ({why}): the reads start as the ingest ends"),
            None,
            events_per_s,
        ),
    };
    let (batch_p50, batch_p99) = (ingest.tally.ms(0.5), ingest.tally.ms(0.99));
    let answered = reads.tally.ok + reads.tally.not_found;
    let seconds = reads.tally.by_second();
    let reads_per_s = answered as f64 / reads.seconds;
    let (read_p50, read_p99) = (reads.tally.ms(0.5), reads.tally.ms(0.99));
    let ingest_line = format!(
        "ingest: {} clients x {batch}-event batches, {events} events in {:.1} s = {events_per_s:.0} events/s; batch latency p50 {batch_p50:.1} ms, p99 {batch_p99:.1} ms; {} errors (goal: >= 100k events/s)",
        args.clients, ingest.seconds, ingest.tally.errors,
    );
    let read_line = format!(
        "profiles: {} clients, {answered} reads ({} 404) in {:.1} s = {reads_per_s:.0} reads/s; p50 {read_p50:.2} ms, p99 {read_p99:.2} ms; {} errors (goal: profile read p99 <= 5 ms at 50 clients)",
        args.readers, reads.tally.not_found, reads.seconds, reads.tally.errors,
    );
    let slow: usize = seconds.iter().map(|s| s.2).sum();
    let mut by_second = format!(
        "profiles by second (reads, p99 ms, reads over {GOAL_READ_P99_MS} ms; {slow} in all, {:.2}%):",
        100.0 * slow as f64 / answered.max(1) as f64
    );
    for (n, p99, over) in &seconds {
        let _ = write!(by_second, " {n} {p99:.1} {over} |");
    }
    by_second.pop();
    let json = json!({
        "target": described,
        "backend": kind,
        "settings": {"clients": args.clients, "readers": args.readers, "users": args.users,
                     "batch": batch, "seconds": args.seconds},
        "ingest": {"events": events, "events_per_s": events_per_s, "requests": ingest.tally.ok + ingest.tally.errors,
                   "batch_p50_ms": batch_p50, "batch_p99_ms": batch_p99, "errors": ingest.tally.errors,
                   "seconds": ingest.seconds, "settle_seconds": settle_seconds,
                   "events_per_s_with_settle": events_per_s_settled},
        "profiles": {"reads": answered, "reads_per_s": reads_per_s, "p50_ms": read_p50, "p99_ms": read_p99,
                     "not_found": reads.tally.not_found, "errors": reads.tally.errors, "seconds": reads.seconds,
                     "over_goal": slow,
                     "by_second": seconds.iter().map(|(n, p99, over)| json!({"reads": n, "p99_ms": p99, "over_goal": over})).collect::<Vec<_>>()},
        "goals": {"events_per_s": GOAL_EVENTS_PER_S, "profile_p99_ms": GOAL_READ_P99_MS,
                  "profile_readers": GOAL_READERS,
                  "ingest_met": events_per_s_settled >= GOAL_EVENTS_PER_S,
                  "profiles_met": args.readers >= GOAL_READERS && read_p99 <= GOAL_READ_P99_MS},
    });
    (
        format!("{ingest_line}\n{settle_line}\n{read_line}\n{by_second}"),
        json,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_live_varied_traffic_over_the_users() {
        let now = 1_700_000_000_000;
        let body: Value = serde_json::from_str(&events_body(3, 7, 1000, 100, now)).unwrap();
        let events = body["events"].as_array().unwrap();
        assert_eq!(events.len(), 1000);
        let mut users = std::collections::BTreeSet::new();
        let mut kinds = std::collections::BTreeSet::new();
        for e in events {
            let ts = e["timestamp"].as_i64().unwrap();
            assert!(ts <= now && now - ts < DAY_MS as i64, "{e}");
            let filters: Vec<&str> = e["filters"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_str().unwrap())
                .collect();
            let facets: Vec<&str> = filters.iter().filter_map(|f| f.split(':').next()).collect();
            assert_eq!(facets, ["brand", "category", "color", "size"], "{e}");
            users.insert(e["userToken"].as_str().unwrap().to_string());
            kinds.insert(e["eventType"].as_str().unwrap().to_string());
        }
        assert_eq!(users.len(), 100, "every user gets events");
        assert_eq!(kinds.len(), 3, "views, clicks and conversions");
        // Another request of the same client sends other events.
        assert_ne!(
            events_body(3, 7, 10, 100, now),
            events_body(3, 8, 10, 100, now)
        );
    }
}
