//! One case of the benchmark on one backend: load a generated workload into
//! a narrow and a wide application, settle the store, then per strategy
//! recompute each schema `repeat` times in a row and compare the profiles.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Instant;

use affinity_engine::{App, AppConfig, Engine, Progress, RecomputeOptions, Schema};
use affinity_model::counting::CountingStore;
use affinity_model::{RowMutations, Store};
use affinity_rowkey::composite::EventKey;
use anyhow::Context;

use super::report::{Record, Run};
use super::workload::{self, AppProfile, GeneratedEvent, Workload, FACETS};

/// A backend under test.
pub struct Backend {
    pub name: String,
    pub store: Arc<CountingStore>,
    /// Let the store settle after a bulk load (embedded: flush and wait
    /// for compactions).
    pub settle: Box<dyn Fn() -> anyhow::Result<()>>,
}

/// Settings shared by every case.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub repeat: usize,
    pub threads: usize,
    /// Compare at most this many users' profiles (0: all).
    pub check_users: usize,
    pub seed: u64,
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct Case {
    pub run: Run,
    pub profile: AppProfile,
    pub events: u64,
    pub facets: Vec<usize>,
}

const SCHEMAS: [Schema; 2] = [Schema::Narrow, Schema::Wide];
const BATCH: usize = 1000;

/// Run one case; the applications' tables are dropped afterwards.
pub fn measure(
    backend: &Backend,
    case: &Case,
    settings: &Settings,
    log: &dyn Fn(String),
) -> anyhow::Result<Vec<Record>> {
    let store: Arc<dyn Store> = backend.store.clone();
    let engine = Engine::open(Arc::clone(&store))?;
    let workload = Workload::new(
        case.profile,
        case.events,
        settings.seed,
        engine.now_millis(),
    );
    let prefix = match case.run {
        Run::Profiles => case.profile.as_str().to_string(),
        Run::Scaling => format!("scale{}", case.events),
    };
    let mut apps = Vec::new();
    for schema in SCHEMAS {
        let id = format!("{prefix}-{}", schema.as_str());
        drop_tables(store.as_ref(), &id)?;
        let config = AppConfig {
            schema,
            retention_days: 90,
        };
        apps.push(engine.configure_app(&id, config)?);
    }
    log(format!(
        "{}: {} {}: loading {} events of {} users into narrow and wide",
        backend.name,
        case.run.as_str(),
        case.profile.as_str(),
        workload.events(),
        workload.users()
    ));
    let load_seconds = load(&workload, &apps)?;
    let started = Instant::now();
    (backend.settle)()?;
    log(format!(
        "  loaded in {:.1} s (narrow) / {:.1} s (wide), settled in {:.1} s",
        load_seconds[0],
        load_seconds[1],
        started.elapsed().as_secs_f64()
    ));
    let mut records = Vec::new();
    for &facets in &case.facets {
        let strategy = workload::strategy(facets)?;
        let mut pair = Vec::new();
        for (k, app) in apps.iter().enumerate() {
            engine.set_strategy(&app.id, &strategy)?;
            let table = format!("events.{}", app.id);
            let rss_reset = reset_peak_rss();
            let mut seconds = Vec::new();
            let (mut events_read, mut counts) = (0, Default::default());
            for _ in 0..settings.repeat.max(1) {
                // Runs do not disturb each other: the last one's background
                // work (flushes, compactions of the profiles it replaced)
                // is done before the next starts.
                (backend.settle)()?;
                let before = backend.store.counts(&table);
                let started = Instant::now();
                let options = RecomputeOptions {
                    threads: settings.threads,
                    shard: None,
                };
                let report = engine.recompute(&app.id, options, &Progress::default())?;
                seconds.push(started.elapsed().as_secs_f64());
                events_read = report.events;
                counts = backend.store.counts(&table).since(before);
            }
            let record = Record {
                backend: backend.name.clone(),
                run: case.run,
                schema: app.config.schema.as_str().to_string(),
                app_profile: case.profile.as_str().to_string(),
                users: workload.users(),
                facets_used: facets,
                facets_total: FACETS.len(),
                events: workload.events(),
                events_read,
                threads: settings.threads,
                seconds,
                bytes_read: counts.bytes,
                cells_read: counts.cells,
                peak_rss_bytes: rss_reset.then(peak_rss_bytes).flatten(),
                profiles_equal: false,
                users_checked: 0,
                load_seconds: load_seconds[k],
            };
            log(format!(
                "  {} facets {}: median {:.3} s, {:.0} events/s, {} cells",
                facets,
                record.schema,
                record.seconds_median(),
                record.events_per_s(),
                record.cells_read
            ));
            pair.push(record);
        }
        let (equal, checked) = compare(&engine, &apps, &workload, settings.check_users)?;
        if !equal {
            log(format!(
                "  PROFILES DIFFER between narrow and wide ({facets} facets)"
            ));
        }
        for mut r in pair {
            r.profiles_equal = equal;
            r.users_checked = checked;
            records.push(r);
        }
    }
    for app in &apps {
        drop_tables(store.as_ref(), &app.id)?;
    }
    Ok(records)
}

/// Delete an application's events and profiles tables, if present.
fn drop_tables(store: &dyn Store, app: &str) -> anyhow::Result<()> {
    let tables = store.list_tables()?;
    for name in [format!("events.{app}"), format!("profiles.{app}")] {
        if tables.contains(&name) {
            store
                .delete_table(&name)
                .with_context(|| format!("deleting table {name}"))?;
        }
    }
    Ok(())
}

/// Bulk-load the workload into every app: one generator thread, one
/// writer per app (`mutate_rows` of 1000 rows). Returns each app's busy
/// time (building its rows and writing them).
fn load(workload: &Workload, apps: &[App]) -> anyhow::Result<Vec<f64>> {
    std::thread::scope(|s| {
        let mut senders = Vec::new();
        let mut writers = Vec::new();
        for app in apps {
            let (tx, rx) = mpsc::sync_channel::<Arc<Vec<GeneratedEvent>>>(8);
            senders.push(tx);
            writers.push(s.spawn(move || write_events(workload, app, rx)));
        }
        let mut chunk = Vec::with_capacity(BATCH);
        for event in workload.iter() {
            chunk.push(event);
            if chunk.len() == BATCH {
                let full = Arc::new(std::mem::replace(&mut chunk, Vec::with_capacity(BATCH)));
                // A writer that failed has hung up; its error is below.
                for tx in &senders {
                    let _ = tx.send(Arc::clone(&full));
                }
            }
        }
        let last = Arc::new(chunk);
        for tx in &senders {
            let _ = tx.send(Arc::clone(&last));
        }
        drop(senders);
        writers
            .into_iter()
            .map(|w| {
                w.join()
                    .map_err(|_| anyhow::anyhow!("loader thread panicked"))?
            })
            .collect()
    })
}

fn write_events(
    workload: &Workload,
    app: &App,
    chunks: mpsc::Receiver<Arc<Vec<GeneratedEvent>>>,
) -> anyhow::Result<f64> {
    let mut busy = 0.0;
    let mut token = (usize::MAX, String::new());
    for chunk in chunks {
        let started = Instant::now();
        let mut entries = Vec::with_capacity(chunk.len());
        for e in chunk.iter() {
            if token.0 != e.user {
                token = (e.user, workload.user_token(e.user));
            }
            let key = EventKey::for_event(
                &app.id,
                &token.1,
                e.event.timestamp_millis,
                &workload.key_content(e.seq),
            )?
            .encode()?;
            entries.push(RowMutations::new(
                app.event_key(key.as_bytes()),
                app.event_mutations(&e.event),
            ));
        }
        if !entries.is_empty() {
            for status in app.events.mutate_rows(&entries)? {
                status.with_context(|| format!("loading events into {}", app.id))?;
            }
        }
        busy += started.elapsed().as_secs_f64();
    }
    Ok(busy)
}

/// Whether both apps hold the same current batch profile for every
/// checked user (all users, or `limit` spread evenly over them when
/// there are more), and at least one profile exists. Returns the verdict
/// and the number of users checked.
fn compare(
    engine: &Engine,
    apps: &[App],
    workload: &Workload,
    limit: usize,
) -> anyhow::Result<(bool, usize)> {
    let users = workload.users();
    let checked = if limit == 0 { users } else { users.min(limit) };
    let versions = apps
        .iter()
        .map(|a| Ok(engine.strategy_version(&a.id)?.map(|(_, v)| v)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let (mut equal, mut found) = (true, 0usize);
    for i in 0..checked {
        let token = workload.user_token(i * users / checked.max(1));
        let mut profiles = Vec::new();
        for (app, version) in apps.iter().zip(&versions) {
            let got = engine.batch_profile(&app.id, &token)?;
            // A profile of an older strategy version is a stale one.
            equal &= got.as_ref().is_none_or(|(_, v)| Some(*v) == *version);
            profiles.push(got.map(|(p, _)| p));
        }
        found += usize::from(profiles.iter().any(Option::is_some));
        equal &= profiles.windows(2).all(|w| w[0] == w[1]);
    }
    Ok((equal && found > 0, checked))
}

/// Reset the process's peak resident set (Linux: write 5 to
/// /proc/self/clear_refs). False where that is not possible.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's peak resident set since the last reset (VmHWM), bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
