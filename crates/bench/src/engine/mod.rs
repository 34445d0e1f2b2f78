//! `affinity bench engine`: the engine's two hot paths on the embedded
//! store, without HTTP.
//!
//! - `batch`: bulk-loads N events (100 per user, 6 facets of 30 values
//!   each, spread over 89 days) straight into the events table (unsynced),
//!   then times `Engine::export` of every profile with a strategy scoring
//!   3 event kinds and 2 of the 6 facets, for each `--threads` count. The
//!   export's sink counts the profiles and their JSON bytes and writes
//!   nothing, so the time is the export's scan and scoring, not output.
//! - `ingest`: times `Engine::ingest` of N events (6 filters each) spread
//!   over `--users` users and the last `--days` days, in API-sized batches
//!   of 1000 from `--clients` concurrent clients, with synced writes (the
//!   streaming path: events table, trends, profile state).
//!
//! - `maintain`: bulk-loads a closed day of events (1M over 100k users, 4
//!   filters), on top of `--days` earlier days already folded, then times
//!   `Engine::maintain` folding that day into the rollups (`maintain.rs`).
//!
//! With `--data DIR`, `batch --loaded` reruns the export on events an
//! earlier run with the same `--events` left there.

mod maintain;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use affinity_embedded::{EmbeddedOptions, EmbeddedStore};
use affinity_engine::scoring::{FacetCounts, ScoredEvent};
use affinity_engine::{
    AppConfig, Engine, Event, EventType, ExportOptions, Limits, ProfileSink, Progress, Schema,
    Strategy,
};
use affinity_model::{RowMutations, Store};
use affinity_rowkey::composite::EventKey;
use anyhow::Context;
use serde_json::json;

/// The goals of issue 4, printed next to the figures.
const GOAL_BATCH: f64 = 1_500_000.0;
const GOAL_INGEST: f64 = 100_000.0;
const DAY: i64 = 86_400_000;
const APP: &str = "bench";
const FACETS: [&str; 6] = [
    "brand",
    "category",
    "color",
    "size",
    "material",
    "price_range",
];
const NAMES: [(EventType, &str); 3] = [
    (EventType::View, "Product Viewed"),
    (EventType::Click, "Product Clicked"),
    (EventType::Conversion, "Purchase"),
];

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Batch export of every profile from bulk-loaded events.
    Batch,
    /// Streaming ingest from concurrent clients.
    Ingest,
    /// Maintenance folding a closed day into the rollups.
    Maintain,
}

#[derive(clap::Args)]
pub struct EngineBenchArgs {
    /// Which path to time.
    #[arg(value_enum)]
    mode: Mode,
    /// The events layout: narrow or wide.
    #[arg(long, default_value = "wide", value_parser = parse_schema)]
    schema: Schema,
    /// Events to load (batch, default 10M), ingest (default 10M) or load
    /// on the day maintained (maintain, default 1M).
    #[arg(long)]
    events: Option<usize>,
    /// batch: the store in --data already holds the events of an earlier
    /// run with the same --events (time the export alone).
    #[arg(long)]
    loaded: bool,
    /// batch: export thread counts to run, one export each;
    /// maintain: the maintenance's threads (one count).
    #[arg(long, value_delimiter = ',', default_value = "2")]
    threads: Vec<usize>,
    /// ingest, maintain: users the events are spread over (default 10000
    /// for ingest, 100000 for maintain).
    #[arg(long)]
    users: Option<u64>,
    /// ingest: days back event times spread over (1..=80, default 1: live
    /// traffic; 80: a backfill, about one event per user and day);
    /// maintain: earlier days loaded and folded before the day maintained
    /// (0..=88, default 0).
    #[arg(long)]
    days: Option<u64>,
    /// ingest: concurrent clients, each sending its share in batches of
    /// 1000; maintain: threads loading the events.
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// ingest, maintain: do not sync the log before a write returns (not
    /// durable; to see what syncing costs).
    #[arg(long)]
    no_sync: bool,
    /// ingest: the share of users who log in (0..=1): half of such a
    /// user's events carry `authenticatedUserToken` beside their anonymous
    /// `userToken` (identity stitching: each links the two), the other half
    /// are anonymous; then profile reads of each class are timed.
    #[arg(long, default_value_t = 0.0)]
    logged_in: f64,
    /// Count every read and write per key range, as `affinity serve` does
    /// for an application whose key visualizer is watched (to see what the
    /// counters cost).
    #[arg(long)]
    key_visualizer: bool,
}

fn parse_schema(text: &str) -> Result<Schema, String> {
    Schema::parse(text).map_err(|e| e.to_string())
}

fn strategy() -> anyhow::Result<Strategy> {
    Ok(Strategy::from_json(&json!({
        "eventsScoring":[{"eventName":"Product Viewed","eventType":"view","score":1},
                         {"eventName":"Product Clicked","eventType":"click","score":10},
                         {"eventName":"Purchase","eventType":"conversion","score":50}],
        "facetsScoring":[{"facetName":"brand","score":100},{"facetName":"category","score":50}],
        "personalizationImpact":75}))?)
}

/// Deterministic pseudo-random numbers (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// One value of each facet, as `(facet, value)`.
    fn filters(&mut self) -> Vec<(String, String)> {
        FACETS
            .iter()
            .map(|f| (f.to_string(), format!("{f}{}", self.next() % 30)))
            .collect()
    }
}

/// Run the benchmark on the embedded store in `data` (default: a temporary
/// directory, removed afterwards).
pub fn run(args: EngineBenchArgs, data: Option<&Path>) -> anyhow::Result<()> {
    anyhow::ensure!(args.events() > 0, "--events must be positive");
    anyhow::ensure!(
        !args.loaded || data.is_some(),
        "--loaded needs --data: the directory an earlier run loaded"
    );
    anyhow::ensure!(
        !args.loaded || args.mode == Mode::Batch,
        "--loaded is an option of batch only"
    );
    let (dir, _tmp) = crate::data_dir(data)?;
    let mut options = EmbeddedOptions::default();
    // Writes synced as `affinity serve` makes them (a fold's commit is
    // unsynced by its own choice, see `rollup.rs`).
    options.sync_writes = matches!(args.mode, Mode::Ingest | Mode::Maintain) && !args.no_sync;
    let store = Arc::new(
        EmbeddedStore::open_with(&dir, options)
            .with_context(|| format!("opening the embedded store in {}", dir.display()))?,
    );
    let mut engine = Engine::open(Arc::clone(&store) as Arc<dyn Store>)?;
    if args.key_visualizer {
        // Watched from the start, as when the dashboard's page is open.
        let vis = Arc::new(affinity_model::keyvis::KeyVis::new(360));
        let names = Engine::table_names(APP);
        vis.watch(&names.each_ref().map(String::as_str), 0, i64::MAX);
        engine = engine.with_key_vis(vis);
    }
    engine.configure_app(
        APP,
        AppConfig {
            schema: args.schema,
            retention_days: 90,
        },
    )?;
    engine.set_strategy(APP, &strategy()?)?;
    match args.mode {
        Mode::Batch => batch(&engine, &args),
        Mode::Ingest => ingest(&engine, &args),
        Mode::Maintain => maintain::run(&engine, &store, &args),
    }
}

impl EngineBenchArgs {
    fn events(&self) -> usize {
        let default = match self.mode {
            Mode::Maintain => 1_000_000,
            Mode::Batch | Mode::Ingest => 10_000_000,
        };
        self.events.unwrap_or(default)
    }

    fn users(&self) -> u64 {
        let default = match self.mode {
            Mode::Maintain => 100_000,
            Mode::Batch | Mode::Ingest => 10_000,
        };
        self.users.unwrap_or(default)
    }

    /// `--days` within its mode's bounds.
    fn days(&self) -> anyhow::Result<u64> {
        let (default, bounds) = match self.mode {
            Mode::Maintain => (0, 0..=88),
            Mode::Batch | Mode::Ingest => (1, 1..=80),
        };
        let days = self.days.unwrap_or(default);
        anyhow::ensure!(
            bounds.contains(&days),
            "--days must be within {} and {}, got {days}",
            bounds.start(),
            bounds.end()
        );
        Ok(days)
    }
}

fn batch(engine: &Engine, args: &EngineBenchArgs) -> anyhow::Result<()> {
    let app = engine.app(APP)?;
    let now = engine.now_millis();
    let n = args.events();
    if !args.loaded {
        let mut rng = Rng(42);
        let users = n.div_ceil(100);
        let t = Instant::now();
        let mut entries = Vec::with_capacity(1000);
        for u in 0..users {
            for _ in 0..100.min(n - u * 100) {
                let ts = now - 60_000 - (rng.next() % (89 * DAY as u64)) as i64;
                let (ty, name) = NAMES[(rng.next() % 3) as usize];
                let event = ScoredEvent {
                    event_type: ty,
                    event_name: name.into(),
                    timestamp_millis: ts,
                    counts: FacetCounts::from_pairs(&rng.filters()),
                };
                let user = format!("user{u:08}");
                let key = EventKey::for_event(APP, &user, ts, &rng.next().to_be_bytes())?;
                let key = app.event_key(key.encode()?.as_bytes());
                entries.push(RowMutations::new(key, args.schema.mutations(&event)));
                if entries.len() == 1000 {
                    write(&app, &mut entries)?;
                }
            }
        }
        write(&app, &mut entries)?;
        eprintln!(
            "loaded {n} events of {users} users ({}) in {:.1} s",
            args.schema.as_str(),
            t.elapsed().as_secs_f64()
        );
    }
    println!(
        "export: every profile scored from the events table; the sink counts the profiles \
         and their JSON bytes and writes nothing (the time is the export's, not output I/O)"
    );
    for &threads in &args.threads {
        let progress = Progress::default();
        let sink = CountingSink::default();
        let t = Instant::now();
        let options = ExportOptions {
            threads: threads.max(1),
            shard: None,
        };
        let report = engine.export(APP, options, None, &sink, &progress)?;
        let secs = t.elapsed().as_secs_f64();
        let rate = report.events as f64 / secs;
        let (profiles, bytes) = sink.totals();
        anyhow::ensure!(
            profiles == report.profiles,
            "the sink got {profiles} profiles, the export reports {}",
            report.profiles
        );
        println!(
            "export {} ({threads} threads): {} events, {} profiles, {bytes} JSON bytes, {} ranges \
             in {secs:.2} s = {rate:.0} events/s (goal: >= {GOAL_BATCH:.0} events/s, wide)",
            args.schema.as_str(),
            report.events,
            report.profiles,
            report.ranges,
        );
    }
    Ok(())
}

/// An export's sink that counts the profiles and their JSON bytes and
/// drops them: the benchmark times the export, not writing its output.
#[derive(Default)]
pub(crate) struct CountingSink {
    profiles: AtomicU64,
    bytes: AtomicU64,
}

impl CountingSink {
    /// `(profiles, JSON bytes)` handed over so far.
    pub(crate) fn totals(&self) -> (u64, u64) {
        (
            self.profiles.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

impl ProfileSink for CountingSink {
    fn profile(&self, _user: &str, json: &[u8]) -> std::io::Result<()> {
        self.profiles.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(json.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

fn write(app: &affinity_engine::App, entries: &mut Vec<RowMutations>) -> anyhow::Result<()> {
    if !entries.is_empty() {
        for status in app.events.mutate_rows(entries)? {
            status?;
        }
        entries.clear();
    }
    Ok(())
}

fn ingest(engine: &Engine, args: &EngineBenchArgs) -> anyhow::Result<()> {
    let (users, days) = (args.users(), args.days()?);
    anyhow::ensure!(users > 0, "--users must be positive");
    let now = engine.now_millis();
    let limits = Limits {
        now_millis: now,
        max_age_millis: 89 * DAY,
        max_skew_millis: 0,
    };
    anyhow::ensure!(
        (0.0..=1.0).contains(&args.logged_in),
        "--logged-in must be between 0 and 1"
    );
    // Users below this number log in.
    let logged_in = (users as f64 * args.logged_in).round() as u64;
    let mut rng = Rng(42);
    let mut linking = 0usize;
    let events: Vec<Event> = (0..args.events())
        .map(|_| {
            let (ty, name) = NAMES[(rng.next() % 3) as usize];
            let filters: Vec<String> = rng
                .filters()
                .into_iter()
                .map(|(f, v)| format!("{f}:{v}"))
                .collect();
            let user = rng.next() % users;
            let mut v = json!({"eventType": ty.as_str(), "eventName": name, "index": "products",
                "userToken": format!("user{user}"),
                "timestamp": now - 60_000 - (rng.next() % (days * DAY as u64)) as i64,
                "filters": filters});
            if user < logged_in && rng.next().is_multiple_of(2) {
                v["authenticatedUserToken"] = json!(format!("member{user}"));
                linking += 1;
            }
            Event::from_json(&v, &limits)
        })
        .collect::<Result<_, _>>()?;
    let clients = args.clients.max(1);
    let share = events.len().div_ceil(clients).max(1);
    let t = Instant::now();
    let stored = std::thread::scope(|s| {
        let handles: Vec<_> = events
            .chunks(share)
            .map(|part| {
                s.spawn(move || -> anyhow::Result<usize> {
                    let mut stored = 0;
                    for chunk in part.chunks(1000) {
                        stored += engine.ingest(APP, chunk)?.stored;
                    }
                    Ok(stored)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("an ingest client panicked")))
            })
            .sum::<anyhow::Result<usize>>()
    })?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "ingest {} ({clients} clients, {} users, {} days{}{}): {stored} events in {secs:.2} s \
         = {:.0} events/s (goal: >= {GOAL_INGEST:.0} events/s)",
        args.schema.as_str(),
        users,
        days,
        if args.no_sync { ", not synced" } else { "" },
        if args.key_visualizer {
            ", key visualizer counting"
        } else {
            ""
        },
        stored as f64 / secs
    );
    if logged_in > 0 {
        println!(
            "identity: {logged_in} users log in; {linking} events carry both tokens \
             (each writes two link cells, on the two tokens' rollup rows)"
        );
        let anonymous: Vec<String> = (logged_in..users)
            .take(1000)
            .map(|u| format!("user{u}"))
            .collect();
        let by_anonymous: Vec<String> = (0..logged_in)
            .take(1000)
            .map(|u| format!("user{u}"))
            .collect();
        let by_identity: Vec<String> = (0..logged_in)
            .take(1000)
            .map(|u| format!("member{u}"))
            .collect();
        for (class, tokens) in [
            ("anonymous users (no link)", &anonymous),
            ("logged-in users by their anonymous token", &by_anonymous),
            ("logged-in users by their authenticated token", &by_identity),
        ] {
            if tokens.is_empty() {
                continue;
            }
            let t = Instant::now();
            for token in tokens {
                anyhow::ensure!(
                    engine.profile(APP, token)?.is_some(),
                    "no profile for {token}"
                );
            }
            let per_read = t.elapsed().as_secs_f64() / tokens.len() as f64;
            println!(
                "profile reads, {class}: {:.0} µs per read ({} users, one thread, before maintenance)",
                per_read * 1e6,
                tokens.len()
            );
        }
    }
    Ok(())
}
