//! One case of the benchmark on one backend: load a generated workload into
//! a narrow and a wide application, settle the store, then per strategy
//! time each schema's export of every profile `repeat` times in a row (into
//! a sink that only counts), and check the exported profiles of the sampled
//! users against the scoring reference.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use affinity_engine::scoring::reference::{self, ListedEvent};
use affinity_engine::{
    App, AppConfig, Engine, ExportOptions, Progress, Schema, Strategy, DAY_MILLIS,
};
use affinity_model::counting::CountingStore;
use affinity_model::{RowMutations, Store};
use affinity_rowkey::composite::EventKey;
use anyhow::Context;

use super::report::{Record, Run};
use super::workload::{self, AppProfile, GeneratedEvent, Workload, FACETS};
use crate::engine::CountingSink;

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
    /// Check at most this many users' exported profiles (0: all).
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
        if engine.stored_settings(&id)?.is_some() {
            engine.delete_app(&id)?;
        }
        // Tables of its own: reads are counted per table.
        engine.isolate_app(&id)?;
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
            let (mut events_read, mut counts, mut exported) = (0, Default::default(), None);
            for _ in 0..settings.repeat.max(1) {
                // Runs do not disturb each other: the last one's background
                // work (flushes, compactions) is done before the next starts.
                (backend.settle)()?;
                let before = backend.store.counts(&table);
                // The sink counts and drops: the time is the export's scan
                // and scoring, not writing its output.
                let sink = CountingSink::default();
                let started = Instant::now();
                let options = ExportOptions {
                    threads: settings.threads,
                    shard: None,
                };
                let report = engine.export(&app.id, options, None, &sink, &Progress::default())?;
                seconds.push(started.elapsed().as_secs_f64());
                events_read = report.events;
                counts = backend.store.counts(&table).since(before);
                let totals = sink.totals();
                anyhow::ensure!(
                    exported.is_none_or(|e| e == totals) && totals.0 == report.profiles,
                    "{}: exports of the same events differ: {exported:?} then {totals:?} \
                     (profiles, bytes), the report says {} profiles",
                    app.id,
                    report.profiles
                );
                exported = Some(totals);
            }
            let (profiles_exported, bytes_exported) = exported.unwrap_or_default();
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
                profiles_exported,
                bytes_exported,
                peak_rss_bytes: rss_reset.then(peak_rss_bytes).flatten(),
                profiles_match: false,
                users_checked: 0,
                load_seconds: load_seconds[k],
            };
            log(format!(
                "  {} facets {}: median {:.3} s, {:.0} events/s, {} cells, {} profiles",
                facets,
                record.schema,
                record.seconds_median(),
                record.events_per_s(),
                record.cells_read,
                record.profiles_exported
            ));
            pair.push(record);
        }
        // Both schemas exported the same number of profiles and JSON bytes,
        // and every sampled user's exported profile is the reference's.
        let same_totals = pair.windows(2).all(|w| {
            (w[0].profiles_exported, w[0].bytes_exported)
                == (w[1].profiles_exported, w[1].bytes_exported)
        });
        if !same_totals {
            log(format!(
                "  EXPORTS DIFFER between narrow and wide ({facets} facets): {:?}",
                pair.iter()
                    .map(|r| (r.schema.as_str(), r.profiles_exported, r.bytes_exported))
                    .collect::<Vec<_>>()
            ));
        }
        let mut matching = same_totals;
        let mut checked = 0;
        for app in &apps {
            let check = check(&engine, app, &strategy, &workload, settings)?;
            for mismatch in check.mismatches.iter().take(5) {
                log(format!(
                    "  PROFILE DIFFERS from the scoring reference ({}, {facets} facets): {mismatch}",
                    app.id
                ));
            }
            if !check.mismatches.is_empty() {
                log(format!(
                    "  {} of {} checked users differ ({}, {facets} facets)",
                    check.mismatches.len(),
                    check.users,
                    app.id
                ));
            }
            matching &= check.mismatches.is_empty() && check.profiles > 0;
            checked = check.users;
        }
        for mut r in pair {
            r.profiles_match = matching;
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

/// What [`check`] found.
struct Check {
    /// Users checked.
    users: usize,
    /// Of those, the users with a profile (in the reference).
    profiles: usize,
    /// One line per user whose exported profile is not the reference's.
    mismatches: Vec<String>,
}

/// Export `app` once more (untimed), keeping the profiles of the checked
/// users (all users, or `check_users` spread evenly over them when there
/// are more), and compare each with the profile the scoring reference
/// (`affinity_engine::scoring::reference`) computes from the user's
/// generated events, byte for byte as the API's JSON: a user must be
/// exported exactly when the reference gives them a profile.
///
/// The reference is used rather than `Engine::profile`: the benchmark
/// loads events straight into the events table, without the streaming
/// state reads are answered from.
fn check(
    engine: &Engine,
    app: &App,
    strategy: &Strategy,
    workload: &Workload,
    settings: &Settings,
) -> anyhow::Result<Check> {
    let (users, limit) = (workload.users(), settings.check_users);
    let checked = if limit == 0 { users } else { users.min(limit) };
    let sampled: BTreeMap<String, usize> = (0..checked)
        .map(|i| {
            let user = i * users / checked.max(1);
            (workload.user_token(user), user)
        })
        .collect();
    let kept: Mutex<BTreeMap<String, Vec<u8>>> = Mutex::default();
    let sink = |user: &str, json: &[u8]| -> std::io::Result<()> {
        if sampled.contains_key(user) {
            let mut kept = kept.lock().unwrap_or_else(|p| p.into_inner());
            kept.insert(user.to_string(), json.to_vec());
        }
        Ok(())
    };
    // The reference at the export's instant: the window is the same.
    let now = engine.now_millis();
    let options = ExportOptions {
        threads: settings.threads,
        shard: None,
    };
    engine.export(&app.id, options, None, &sink, &Progress::default())?;
    let kept = kept.into_inner().unwrap_or_else(|p| p.into_inner());
    let retention = i64::from(app.config.retention_days) * DAY_MILLIS;
    let (mut profiles, mut mismatches) = (0, Vec::new());
    for (token, &user) in &sampled {
        let events: Vec<ListedEvent> = workload
            .user_events(user)
            .into_iter()
            .map(|e| ListedEvent {
                user: token.clone(),
                id: format!("{:?}", workload.key_content(e.seq)),
                event: e.event,
            })
            .collect();
        let expected = reference::profiles(&events, strategy, now, retention)
            .remove(token)
            .map(|p| serde_json::to_vec(&p))
            .transpose()?;
        profiles += usize::from(expected.is_some());
        let got = kept.get(token);
        if got != expected.as_ref() {
            let text = |json: Option<&Vec<u8>>| {
                json.map_or("no profile".to_string(), |j| {
                    String::from_utf8_lossy(j).into_owned()
                })
            };
            mismatches.push(format!(
                "{token}: exported {}, reference {}",
                text(got),
                text(expected.as_ref())
            ));
        }
    }
    Ok(Check {
        users: checked,
        profiles,
        mismatches,
    })
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
