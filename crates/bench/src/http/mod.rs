//! `affinity bench http`: the HTTP API under load. Concurrent clients send
//! `--batch`-event requests to `POST /1/events` for `--seconds`, then
//! concurrent readers fetch profiles for `--seconds`; one line per phase
//! (events/s and batch p50/p99; reads/s and p50/p99), next to the goals.
//!
//! With `--history-days N` (default 90; 0 is the one-day run over
//! uniform users), the users are a heavy tail ([`mix`]) with N days of
//! history before the live phase: preloaded in this process on each day's
//! clock and folded by one maintenance ([`history`]); the reads are then
//! taken per user class, plus one client alone and the rows and cells a
//! read takes ([`classes`]).
//!
//! After the reads, [`query`]: `--readers` clients asking optional
//! filters, then re-ranking 100 hits, for heavy users (all users without
//! history), `--seconds` each, next to the same p99 goal.
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
//! (the clients of both phases), [`report`] (the printed lines, JSON),
//! and for history [`mix`], [`history`] and [`classes`].

mod classes;
pub(crate) use load::events_body;
mod history;
mod load;
mod mix;
mod phases;
mod query;
mod report;
mod server;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};

use crate::wire::Endpoint;
use crate::BenchBackend;
use phases::{bench, Local};

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
    /// Users: with history, the users with history, whose profiles are
    /// read (default 2000); without, the users the events are spread over
    /// (default 10000).
    #[arg(long)]
    users: Option<usize>,
    /// Days of history before today, ingested in this process on each
    /// day's clock and folded by one maintenance before the live phase
    /// (0: the one-day run over uniform users).
    #[arg(long, default_value_t = 90, value_parser = clap::value_parser!(u64).range(0..=90))]
    history_days: u64,
    /// With history: the share of users that are heavy.
    #[arg(long, default_value_t = 0.02)]
    heavy_share: f64,
    /// With history: a heavy user's events a day (about; varied per user
    /// and day).
    #[arg(long, default_value_t = 100.0)]
    heavy_per_day: f64,
    /// With history: a light user's events a day (about).
    #[arg(long, default_value_t = 5.0)]
    light_per_day: f64,
    /// With history: the other users the live ingest sends its events to,
    /// once the users' events of today are sent.
    #[arg(long, default_value_t = 100_000)]
    visitors: usize,
    /// With history: draw the users' facet values by Zipf rank with this
    /// exponent, from each user's own favourites (0: uniform over each
    /// facet's values, the most distinct counters a user can have).
    #[arg(long, default_value_t = 0.0)]
    value_skew: f64,
    /// With history: the share of a day's events each user has had today
    /// when the reads start (1: a whole day, as at the day's end; 1/24: an
    /// hour's; 0: none yet, so each profile is its rollup alone, as at a
    /// user's first visit of the day).
    #[arg(long, default_value_t = 1.0)]
    today_share: f64,
    /// With history (in process): the hours of today whose events are
    /// still live cells of today's row when the reads start; the events
    /// of the other hours arrived earlier and maintenance digested them
    /// (2: a read at the day's end with maintenance keeping up, the most
    /// a read sees; 24: none digested, as when maintenance never ran
    /// today). With `--url` every event of today is sent live.
    #[arg(long, default_value_t = 2.0)]
    today_live_hours: f64,
    /// With history: this text before every facet value, in the events
    /// and in the hits re-ranked, as long values that share their first
    /// bytes are (`"Electronics > "`: hierarchical categories). Default
    /// none: values of 2 to 4 characters.
    #[arg(long, default_value = "", value_parser = value_prefix)]
    value_prefix: String,
    /// In process, on the embedded store: MiB of users' rollup rows the
    /// server keeps between reads, as `affinity serve --rollup-cache-mib`
    /// (0: every read reads them). Profile answers are never kept: every
    /// read is computed, as when the user's rows were written since.
    #[arg(long, default_value_t = affinity_engine::cache::DEFAULT_BUDGET_MIB)]
    rollup_cache_mib: usize,
    /// With history: the seed the users' classes and events are drawn from.
    #[arg(long, default_value_t = 42)]
    seed: u64,
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
    /// How the in-process server's connections share the cores, as
    /// `affinity serve --scheduler`: `per-core` (its clients run on the
    /// same threads) or `shared`.
    #[arg(long, default_value = "shared")]
    scheduler: affinity_http::Scheduler,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

impl HttpBenchArgs {
    /// `--users`, or its default for the run's kind.
    fn users(&self) -> usize {
        self.users
            .unwrap_or(if self.history_days > 0 { 2_000 } else { 10_000 })
    }
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
    anyhow::ensure!(args.users() > 0, "--users must be positive");
    anyhow::ensure!(
        (0.0..=1.0).contains(&args.heavy_share),
        "--heavy-share must be within 0 and 1"
    );
    anyhow::ensure!(
        args.heavy_per_day > 0.0 && args.light_per_day > 0.0,
        "--heavy-per-day and --light-per-day must be positive"
    );
    anyhow::ensure!(args.visitors > 0, "--visitors must be positive");
    anyhow::ensure!(args.value_skew >= 0.0, "--value-skew must not be negative");
    anyhow::ensure!(
        args.value_prefix.is_empty() || args.history_days > 0,
        "--value-prefix needs history (--history-days 1 or more)"
    );
    anyhow::ensure!(
        (0.0..=1.0).contains(&args.today_share),
        "--today-share must be within 0 and 1"
    );
    anyhow::ensure!(
        args.today_share == 1.0 || args.history_days > 0,
        "--today-share needs history (--history-days 1 or more)"
    );
    anyhow::ensure!(
        (0.0..=24.0).contains(&args.today_live_hours),
        "--today-live-hours must be within 0 and 24"
    );
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

/// `--value-prefix`: text the bench writes into JSON strings as it is.
fn value_prefix(text: &str) -> Result<String, String> {
    match text
        .chars()
        .find(|c| *c == '"' || *c == '\\' || c.is_control())
    {
        Some(c) => Err(format!(
            "{c:?} cannot be in a value prefix (no quotes, backslashes or control characters)"
        )),
        None => Ok(text.to_string()),
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

fn clip(body: &str) -> String {
    body.chars().take(BODY_CHARS).collect()
}
