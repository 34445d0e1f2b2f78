//! Throughput of the engine on the embedded store.
//!
//! ```text
//! cargo run --release -p affinity-engine --example throughput -- batch wide 10000000 [DIR]
//! cargo run --release -p affinity-engine --example throughput -- ingest narrow 200000 [DIR]
//! ```
//!
//! `batch`: bulk-loads N events (100 per user, 6 facets each, spread over
//! 90 days) straight into the events table, then times `recompute` with a
//! strategy scoring 2 of the 6 facets. `ingest`: times `Engine::ingest` of
//! N events of 10,000 users (`USERS`) over the last day (`DAYS`) in API-sized batches of 1000 from 4
//! concurrent clients (`CLIENTS`), synced writes (`NO_SYNC=1` to measure
//! without syncing).

use std::sync::Arc;
use std::time::Instant;

use affinity_embedded::{EmbeddedOptions, EmbeddedStore};
use affinity_engine::scoring::{FacetCounts, ScoredEvent};
use affinity_engine::{
    AppConfig, Engine, Event, EventType, Limits, Progress, RecomputeOptions, Schema, Strategy,
};
use affinity_model::{RowMutations, Store};
use affinity_rowkey::composite::EventKey;
use serde_json::json;

/// mimalloc: the allocator-heavy paths (ingest, scans) run measurably
/// faster than on the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DAY: i64 = 86_400_000;

fn strategy() -> Strategy {
    Strategy::from_json(&json!({
        "eventsScoring":[{"eventName":"Product Viewed","eventType":"view","score":1},
                         {"eventName":"Product Clicked","eventType":"click","score":10},
                         {"eventName":"Purchase","eventType":"conversion","score":50}],
        "facetsScoring":[{"facetName":"brand","score":100},{"facetName":"category","score":50}],
        "personalizationImpact":75}))
    .expect("strategy")
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
}

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

fn filters(rng: &mut Rng) -> Vec<String> {
    FACETS
        .iter()
        .map(|f| format!("{f}:{f}{}", rng.next() % 30))
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map_or("batch", String::as_str);
    let schema = Schema::parse(args.get(2).map_or("wide", String::as_str))?;
    let n: usize = args.get(3).map_or(Ok(1_000_000), |s| s.parse())?;
    let tmp = tempfile::tempdir()?;
    let dir = args
        .get(4)
        .map_or(tmp.path().to_path_buf(), std::path::PathBuf::from);
    let now = affinity_model::apply::now_micros() / 1000;
    let mut rng = Rng(42);
    match mode {
        "batch" => {
            let mut options = EmbeddedOptions::default();
            options.sync_writes = false;
            let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open_with(&dir, options)?);
            let engine = Engine::open(store)?;
            let app = engine.configure_app(
                "bench",
                AppConfig {
                    schema,
                    retention_days: 90,
                },
            )?;
            engine.set_strategy("bench", &strategy())?;
            // LOADED=1: DIR already holds the events of an earlier run with
            // the same N (profile or repeat the recompute alone).
            let loaded = std::env::var_os("LOADED").is_some();
            let users = if loaded { 0 } else { n.div_ceil(100) };
            let t = Instant::now();
            let mut entries = Vec::with_capacity(1000);
            for u in 0..users {
                for _ in 0..100.min(n - u * 100) {
                    let ts = now - 60_000 - (rng.next() % (89 * DAY as u64)) as i64;
                    let (ty, name) = NAMES[(rng.next() % 3) as usize];
                    let pairs: Vec<(String, String)> = filters(&mut rng)
                        .iter()
                        .filter_map(|f| {
                            f.split_once(':')
                                .map(|(a, b)| (a.to_string(), b.to_string()))
                        })
                        .collect();
                    let event = ScoredEvent {
                        event_type: ty,
                        event_name: name.into(),
                        timestamp_millis: ts,
                        counts: FacetCounts::from_pairs(&pairs),
                    };
                    let key = EventKey::for_event(
                        "bench",
                        &format!("user{u:08}"),
                        ts,
                        &rng.next().to_be_bytes(),
                    )?
                    .encode()?;
                    entries.push(RowMutations::new(
                        key.into_bytes(),
                        schema.mutations(&event),
                    ));
                    if entries.len() == 1000 {
                        for s in app.events.mutate_rows(&entries)? {
                            s?;
                        }
                        entries.clear();
                    }
                }
            }
            if !entries.is_empty() {
                for s in app.events.mutate_rows(&entries)? {
                    s?;
                }
            }
            println!(
                "loaded {n} events ({users} users) in {:.1}s",
                t.elapsed().as_secs_f64()
            );
            if std::env::var_os("SCAN_PROBE").is_some() {
                use affinity_model::{ReadRowsRequest, RowFilter};
                let strategy = strategy();
                for (label, filter) in [
                    ("no filter", None),
                    ("family", Some(RowFilter::exact_family("e"))),
                    (
                        "strategy",
                        Some(affinity_engine::schema::wide_filter(&strategy)),
                    ),
                ] {
                    let t = Instant::now();
                    let mut request = ReadRowsRequest::all();
                    request.filter = filter;
                    let rows = app.events.read_rows(&request)?.count();
                    println!(
                        "scan {label}: {rows} rows in {:.2}s",
                        t.elapsed().as_secs_f64()
                    );
                }
            }
            // THREADS=a,b: recompute thread counts to run (default 2,4).
            let thread_counts: Vec<usize> = std::env::var("THREADS")
                .ok()
                .map(|t| t.split(',').filter_map(|x| x.parse().ok()).collect())
                .unwrap_or_else(|| vec![2, 4]);
            for threads in thread_counts {
                let progress = Progress::default();
                let t = Instant::now();
                let report = engine.recompute(
                    "bench",
                    RecomputeOptions {
                        threads,
                        shard: None,
                    },
                    &progress,
                )?;
                let secs = t.elapsed().as_secs_f64();
                println!(
                    "recompute {} threads={threads}: {} events, {} profiles, {} ranges in {secs:.2}s = {:.0} events/s",
                    schema.as_str(),
                    report.events,
                    report.profiles,
                    report.ranges,
                    report.events as f64 / secs
                );
            }
        }
        "ingest" => {
            let mut options = EmbeddedOptions::default();
            // NO_SYNC=1: measure without the WAL sync (not durable).
            options.sync_writes = std::env::var_os("NO_SYNC").is_none();
            let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open_with(&dir, options)?);
            let engine = Engine::open(store)?;
            engine.configure_app(
                "bench",
                AppConfig {
                    schema,
                    retention_days: 90,
                },
            )?;
            engine.set_strategy("bench", &strategy())?;
            // USERS=N: how many users the events spread over (default 10,000).
            let users: u64 = std::env::var("USERS")
                .ok()
                .and_then(|u| u.parse().ok())
                .unwrap_or(10_000);
            let limits = Limits {
                now_millis: now,
                max_age_millis: 89 * DAY,
                max_skew_millis: 0,
            };
            // DAYS=N: how far back event times spread (default 1: live
            // traffic; 80 is a backfill, with ~1 event per user-day row).
            let days: u64 = std::env::var("DAYS")
                .ok()
                .and_then(|d| d.parse().ok())
                .unwrap_or(1)
                .clamp(1, 80);
            let events: Vec<Event> = (0..n)
                .map(|_| {
                    let (ty, name) = NAMES[(rng.next() % 3) as usize];
                    let v = json!({"eventType": ty.as_str(), "eventName": name, "index": "products",
                        "userToken": format!("user{}", rng.next() % users),
                        "timestamp": now - 60_000 - (rng.next() % (days * DAY as u64)) as i64,
                        "filters": filters(&mut rng)});
                    Event::from_json(&v, &limits)
                })
                .collect::<Result<_, _>>()?;
            // CLIENTS=N: concurrent ingesters, as an HTTP server's clients
            // (default 4); each sends its share in batches of 1000.
            let clients: usize = std::env::var("CLIENTS")
                .ok()
                .and_then(|c| c.parse().ok())
                .unwrap_or(4)
                .max(1);
            let t = Instant::now();
            let share = events.len().div_ceil(clients).max(1);
            let applied = std::thread::scope(|s| {
                let handles: Vec<_> = events
                    .chunks(share)
                    .map(|part| {
                        let engine = &engine;
                        s.spawn(move || -> Result<usize, affinity_engine::Error> {
                            let mut applied = 0;
                            for chunk in part.chunks(1000) {
                                applied += engine.ingest("bench", chunk)?.stored;
                            }
                            Ok(applied)
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("ingester panicked"))
                    .sum::<Result<usize, _>>()
            })?;
            let secs = t.elapsed().as_secs_f64();
            println!(
                "ingest {} ({clients} clients): {applied} events in {secs:.2}s = {:.0} events/s",
                schema.as_str(),
                applied as f64 / secs
            );
        }
        other => return Err(format!("unknown mode {other:?}: batch or ingest").into()),
    }
    Ok(())
}
