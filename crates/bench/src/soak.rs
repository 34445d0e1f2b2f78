//! `affinity bench soak`: the server over minutes. On a server in this
//! process (embedded store, maintaining every application every
//! `--maintain-every` seconds): the sustainable ingest calibrated as in
//! `bench overload`, then for `--minutes`, `--share` of it offered by
//! paced senders while `--readers` clients read profiles. One line a
//! minute: the process's resident memory and, of it, what the store holds
//! by RocksDB's account (memtables, block cache, index and filter blocks
//! outside it), the C allocator's heap (RocksDB allocates through it; the
//! Rust code through mimalloc): in use and held free, open file
//! descriptors and, of them, the store's table files (RocksDB keeps each
//! open, up to its `max_open_files`) with their size on disk, the batches
//! acknowledged, the reads and their p99, shed requests and errors.
//!
//! The process holds the server and its clients, so memory and file
//! descriptors are those of both; the clients' are constant from minute
//! to minute (their connections are opened anew each minute and closed).

use std::time::{Duration, Instant};

use anyhow::Context;

use crate::overload::{paced, readers, Running};
use crate::BenchBackend;

const GOAL_READ_P99_MS: f64 = 5.0;

#[derive(clap::Args, Clone)]
pub struct SoakBenchArgs {
    /// Minutes of load after the calibration.
    #[arg(long, default_value_t = 5)]
    minutes: u64,
    /// The share of the calibrated ingest to offer.
    #[arg(long, default_value_t = 0.5)]
    share: f64,
    /// Profile readers.
    #[arg(long, default_value_t = 50)]
    readers: usize,
    /// Seconds between the server's maintenance runs.
    #[arg(long, default_value_t = 60)]
    maintain_every: u64,
    /// Events per request.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u16).range(1..=1000))]
    batch: u16,
    /// Users whose profiles are read (the events go to them and to the
    /// visitors).
    #[arg(long, default_value_t = 2000)]
    users: usize,
    /// Further users the events go to, never read: with the defaults a
    /// read user gets about 4 events a minute, a busy user's day in half an
    /// hour, rather than all the ingest piling on `--users` users.
    #[arg(long, default_value_t = 200_000)]
    visitors: usize,
    /// Seconds of the calibration (closed-loop ingest by 4 clients).
    #[arg(long, default_value_t = 10)]
    calibrate_seconds: u64,
    /// Offer this many batches a second instead of calibrating.
    #[arg(long)]
    rate: Option<f64>,
    /// MiB of profile cache, as `affinity serve --profile-cache-mib` (0: none).
    #[arg(long, default_value_t = affinity_engine::cache::DEFAULT_BUDGET_MIB)]
    profile_cache_mib: usize,
    /// How the server's connections share the cores, as `affinity serve
    /// --scheduler`: `per-core` (its clients run on the same threads) or
    /// `shared`.
    #[arg(long, default_value = "shared")]
    scheduler: affinity_http::Scheduler,
    /// The server's `ingest_nice` (see docs/api.md, Limits).
    #[arg(long, default_value_t = affinity_http::ServerLimits::default().ingest_nice)]
    ingest_nice: i32,
    /// The server's `ingest_threads` (default: twice the cores, at most
    /// `max_writes_in_flight`).
    #[arg(long)]
    ingest_threads: Option<usize>,
}

/// The C allocator's heap (glibc): bytes in use and bytes it holds free
/// (in its arenas and mapped chunks).
fn c_heap() -> (u64, u64) {
    // SAFETY: mallinfo2 only reads the allocator's counters.
    let info = unsafe { libc::mallinfo2() };
    ((info.uordblks + info.hblkhd) as u64, info.fordblks as u64)
}

/// This process's resident memory (MiB) and open file descriptors, from
/// `/proc` (Linux).
fn process_figures() -> (f64, usize) {
    let rss_kib = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        })
        .unwrap_or(0.0);
    let fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
    (rss_kib / 1024.0, fds)
}

pub fn run(args: SoakBenchArgs, backend: &BenchBackend) -> anyhow::Result<()> {
    anyhow::ensure!(args.minutes > 0, "--minutes must be positive");
    anyhow::ensure!(args.readers > 0, "--readers must be positive");
    anyhow::ensure!(args.users > 0, "--users must be positive");
    anyhow::ensure!(args.maintain_every > 0, "--maintain-every must be positive");
    anyhow::ensure!(
        args.share.is_finite() && args.share > 0.0,
        "--share must be positive"
    );
    anyhow::ensure!(
        args.rate.is_none_or(|r| r.is_finite() && r > 0.0),
        "--rate must be positive"
    );
    let (dir, _tmp) = crate::data_dir(backend.data.as_deref())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(async {
        let server = Running::start(
            &dir,
            affinity_http::ServerLimits {
                ingest_nice: args.ingest_nice,
                ingest_threads: args.ingest_threads,
                ..affinity_http::ServerLimits::default()
            },
            Some(Duration::from_secs(args.maintain_every)),
            args.profile_cache_mib,
            args.scheduler,
        )
        .await?;
        let result = minutes(&args, &server).await;
        server.stop().await?;
        result
    });
    runtime.shutdown_timeout(Duration::from_secs(10));
    result
}

async fn minutes(args: &SoakBenchArgs, server: &Running) -> anyhow::Result<()> {
    let batch = usize::from(args.batch);
    let rate = match args.rate {
        Some(rate) => rate,
        None => {
            let seconds = args.calibrate_seconds.max(1);
            let started = Instant::now();
            let calibration = paced(
                &server.endpoint,
                4,
                f64::MAX,
                batch,
                args.users + args.visitors,
                Instant::now() + Duration::from_secs(seconds),
            )
            .await;
            let sustainable = calibration.ok as f64 / started.elapsed().as_secs_f64();
            println!(
                "calibration: {sustainable:.1} batches/s ({:.0} events/s) sustained",
                sustainable * batch as f64
            );
            sustainable * args.share
        }
    };
    eprintln!(
        "affinity bench soak: {} minutes of {rate:.1} batches/s of {batch} events over {} users \
         and {} readers of the first {}, maintenance every {} s, event batches at nice {} on {} threads",
        args.minutes,
        args.users + args.visitors,
        args.readers,
        args.users,
        args.maintain_every,
        server.limits.ingest_nice,
        server.limits.ingest_threads()
    );
    println!(
        "{:>6} {:>9} {:>10} {:>9} {:>8} {:>7} {:>7} {:>5} {:>6} {:>8} {:>11} {:>9} {:>12} {:>7} {:>6} {:>7}",
        "minute",
        "RSS MiB",
        "memtables",
        "cache",
        "readers",
        "C heap",
        "C free",
        "fds",
        "tables",
        "disk MiB",
        "batches ok",
        "reads",
        "read p99 ms",
        "shed",
        "errors",
        "cached"
    );
    let mut first_error = None;
    let mut worst_p99: f64 = 0.0;
    let lookups = || {
        server
            .engine
            .profile_cache_stats()
            .map_or((0, 0), |c| (c.hits, c.hits + c.misses))
    };
    let mut looked = lookups();
    for minute in 1..=args.minutes {
        let deadline = Instant::now() + Duration::from_secs(60);
        let (ingest, mut reads) = tokio::join!(
            paced(
                &server.endpoint,
                16,
                rate,
                batch,
                args.users + args.visitors,
                deadline
            ),
            readers(&server.endpoint, args.readers, args.users, deadline),
        );
        let (rss, fds) = process_figures();
        let store = server.store.memory_usage()?;
        let (tables, disk) = server.store.table_files()?;
        let (c_used, c_free) = c_heap();
        let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
        let p99 = reads.ms(0.99);
        worst_p99 = worst_p99.max(p99);
        // The share of this minute's profile reads the cache answered.
        let (hits, all) = lookups();
        let cached = match all - looked.1 {
            0 => "-".to_string(),
            n => format!("{:.0}%", 100.0 * (hits - looked.0) as f64 / n as f64),
        };
        looked = (hits, all);
        println!(
            "{minute:>6} {rss:>9.1} {:>10.1} {:>9.1} {:>8.1} {:>7.1} {:>7.1} {fds:>5} {tables:>6} {:>8.0} {:>11} {:>9} {p99:>12.2} {:>7} {:>6} {cached:>7}",
            mib(store.memtables),
            mib(store.block_cache),
            mib(store.table_readers),
            mib(c_used),
            mib(c_free),
            mib(disk),
            ingest.ok,
            reads.ok,
            ingest.shed + ingest.limited + reads.shed + reads.limited,
            ingest.errors + reads.errors
        );
        if first_error.is_none() {
            first_error = ingest.first_error.or(reads.first_error);
        }
    }
    println!(
        "worst minute's read p99 {worst_p99:.2} ms (goal <= {GOAL_READ_P99_MS} ms: {})",
        if worst_p99 <= GOAL_READ_P99_MS {
            "met"
        } else {
            "missed"
        }
    );
    match first_error {
        Some(e) => anyhow::bail!("requests failed; the first: {e}"),
        None => Ok(()),
    }
}
