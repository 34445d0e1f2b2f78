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
//!
//! Submodules: [`server`] (the in-process server and its store), [`load`]
//! (the clients of both phases), [`report`] (the printed lines, JSON).

mod load;
mod report;
mod server;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};
use serde_json::json;

use crate::wire::{Answer, Endpoint};
use crate::BenchBackend;
use load::{ingest, read_profiles};
use report::{report, Settled};

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

/// Flush the store and wait for its compactions.
type Settle = Arc<dyn Fn() -> anyhow::Result<()> + Send + Sync>;

/// Run the benchmark: on a server in this process, on the embedded store in
/// `backend.data` (default: a temporary directory, removed afterwards) or on
/// Cloud Bigtable (`backend.bigtable`); or against `--url`.
pub fn run(args: HttpBenchArgs, backend: &BenchBackend) -> anyhow::Result<()> {
    check_flags(&args, backend)?;
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
        _ => server::in_process(&args, backend, runtime),
    }
}

/// The flag combinations that make no sense: a store for the in-process
/// server (`--data`, `--bigtable`) with a server elsewhere (`--url`), or
/// both stores at once.
fn check_flags(args: &HttpBenchArgs, backend: &BenchBackend) -> anyhow::Result<()> {
    let url = args.url.is_some();
    if backend.data.is_some() && url {
        bail!("--data cannot be combined with --url (the server at --url has its own store)");
    }
    if backend.bigtable.is_some() && url {
        bail!("--bigtable cannot be combined with --url (the server at --url has its own store)");
    }
    if backend.data.is_some() && backend.bigtable.is_some() {
        bail!("--data cannot be combined with --bigtable (the server uses one store)");
    }
    Ok(())
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
