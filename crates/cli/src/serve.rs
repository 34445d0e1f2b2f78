//! `affinity serve`: the HTTP API (Algolia Insights- and
//! Personalization-compatible) on the embedded store or Cloud Bigtable.
//! Glue only: flags and the config file become an [`affinity_http::State`]
//! served by [`affinity_http::serve`] until SIGTERM or ctrl-c.

use std::path::PathBuf;
use std::sync::Arc;

use affinity_engine::Engine;
use affinity_http::{Config, State};
use anyhow::{bail, Context};

/// Serve the HTTP API.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on (port 0: any free port, printed at start).
    #[arg(long, env = "AFFINITY_LISTEN", default_value = "127.0.0.1:8080")]
    listen: String,
    /// TOML file with applications, their keys and ACLs, schema,
    /// retention and rate limits, and the server's limits (see the
    /// affinity-http `config` module).
    #[arg(long, env = "AFFINITY_CONFIG")]
    config: Option<PathBuf>,
    /// An application with an admin key: repeat `--app-id ID --api-key KEY`
    /// pairs (environment: comma-separated lists).
    #[arg(long = "app-id", env = "AFFINITY_APP_ID", value_delimiter = ',')]
    app_id: Vec<String>,
    /// The admin key of the `--app-id` at the same position.
    #[arg(long = "api-key", env = "AFFINITY_API_KEY", value_delimiter = ',')]
    api_key: Vec<String>,
    /// Threads for blocking engine work (default: tokio's), per runtime
    /// (each connection thread has its own with `--scheduler per-core`).
    #[arg(long, env = "AFFINITY_WORKERS")]
    workers: Option<usize>,
    /// How connections share the cores: `shared`, tokio's work-stealing
    /// runtime, where any worker runs any connection; `per-core`, a
    /// thread per core that serves the connections dealt to it in turn,
    /// each request in the order it became ready (latencies spread less
    /// under a steady load of short requests, but a long request holds up
    /// the other connections of its thread).
    #[arg(long, env = "AFFINITY_SCHEDULER", default_value = "shared")]
    scheduler: affinity_http::Scheduler,
    /// Maintain every application's profile rollups this often (at start,
    /// then on this period: `30s`, `15m`, `1h`), on half the cores at a
    /// lower CPU priority than requests (nice 10); `off` for deployments
    /// that run `affinity maintain` as a separate job.
    #[arg(long, env = "AFFINITY_MAINTAIN_EVERY", default_value = "15m", value_parser = parse_every)]
    maintain_every: Every,
    /// MiB of profile answers kept between reads, exact (the first write
    /// to a user's rows drops theirs); 0 for none. On the embedded store
    /// only: on Cloud Bigtable other processes write too, so there is none.
    #[arg(long, env = "AFFINITY_PROFILE_CACHE_MIB", default_value_t = affinity_engine::cache::DEFAULT_BUDGET_MIB)]
    profile_cache_mib: usize,
    /// MiB of users' rollup rows (their folded history) kept between
    /// profile reads, until the row is written (a fold, a late event, a
    /// link or a deletion); 0 for none. A read the profile cache misses
    /// (the user's day rows were written since) then reads today's rows
    /// only. On the embedded store only, as the profile cache.
    #[arg(long, env = "AFFINITY_ROLLUP_CACHE_MIB", default_value_t = affinity_engine::cache::DEFAULT_BUDGET_MIB)]
    rollup_cache_mib: usize,
    /// Events kept per application for the events debugger
    /// (`GET /1/events/debug`, `affinity events tail`); 0 keeps none.
    #[arg(long, env = "AFFINITY_DEBUG_EVENTS", default_value_t = affinity_http::DEFAULT_DEBUG_EVENTS)]
    debug_events: usize,
    /// Count reads and writes per key range for the dashboard's key
    /// visualizer, in slots of this length (the last 360 kept), for a day
    /// after an application's key visualizer was last asked for; `off`
    /// counts nothing.
    #[arg(long, env = "AFFINITY_KEY_VISUALIZER_SLOT", default_value = "10s", value_parser = parse_every)]
    key_visualizer_slot: Every,
}

/// Slots of the key visualizer kept per table.
const KEY_VISUALIZER_SLOTS: usize = 360;

/// `--maintain-every`: a period, or never.
#[derive(Debug, Clone, Copy)]
struct Every(Option<std::time::Duration>);

fn parse_every(text: &str) -> Result<Every, String> {
    if text == "off" {
        return Ok(Every(None));
    }
    let (number, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a period such as 30s, 15m or 1h, or off"))?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => {
            return Err(format!(
                "{text:?} is not a period such as 30s, 15m or 1h, or off"
            ))
        }
    };
    if secs == 0 {
        return Err("the period must be more than 0 (or off)".into());
    }
    Ok(Every(Some(std::time::Duration::from_secs(secs))))
}

/// Run the server until SIGTERM or ctrl-c; requests in flight finish.
pub fn run(args: ServeArgs, backend: &crate::backend::BackendArgs) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    if args.app_id.len() != args.api_key.len() {
        bail!(
            "--app-id and --api-key come in pairs: got {} ids and {} keys",
            args.app_id.len(),
            args.api_key.len()
        );
    }
    let mut config = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            Config::parse(&text).with_context(|| format!("in {}", path.display()))?
        }
        None => Config::default(),
    };
    for (app, key) in args.app_id.iter().zip(&args.api_key) {
        config.add_admin(app, key);
    }
    let keys = config.keys()?;
    let limiter = config.limiter()?;
    let hot_policy = config.hot_users.policy()?;
    let store = backend.open()?;
    let mut engine = Engine::open(store)?.with_hot_policy(hot_policy);
    if backend.is_local() {
        engine = engine
            .with_profile_cache(args.profile_cache_mib << 20)
            .with_rollup_cache(args.rollup_cache_mib << 20);
    }
    if args.key_visualizer_slot.0.is_some() {
        let vis = affinity_model::keyvis::KeyVis::new(KEY_VISUALIZER_SLOTS);
        engine = engine.with_key_vis(Arc::new(vis));
    }
    let engine = Arc::new(engine);
    config.apply(&engine)?;

    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if let Some(n) = args.workers {
        runtime.max_blocking_threads(n.max(1));
    }
    let workers = args
        .scheduler
        .workers(args.workers)
        .context("starting the connection threads")?;
    if workers.is_some() {
        // Accepting and the background jobs only.
        runtime.worker_threads(1);
    }
    let runtime = runtime.build().context("starting the async runtime")?;
    let inline_reads = backend.is_local();
    let backend = backend.describe();
    let served = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&args.listen)
            .await
            .with_context(|| format!("listening on {}", args.listen))?;
        let addr = listener.local_addr()?;
        // One line: a reader that takes the first line and closes the
        // pipe must not make a second print fail.
        println!(
            "affinity serve: http://{addr} on the {backend}; dashboard: http://{addr}/dashboard/"
        );
        let mut state = State::with_inline_reads(engine, keys, inline_reads)
            .with_maintenance(args.maintain_every.0)
            .with_debug_events(args.debug_events)
            .with_limits(limiter)
            .with_workers(workers);
        if let Some(slot) = args.key_visualizer_slot.0 {
            state = state.with_key_vis(slot);
        }
        affinity_http::serve(listener, state, affinity_http::shutdown_signal())
            .await
            .context("serving")
    });
    // A maintenance still running is abandoned (each user's fold commits
    // alone, so the next run picks up where it stopped); requests in
    // flight have finished.
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    served
}
