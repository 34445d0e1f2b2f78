//! The history of a run with `--history-days N` > 0, before the live
//! phase: the users' events of the N days before today ingested in this
//! process on each day's clock (see [`crate::days`]), the store settled,
//! then one maintenance with the real clock, as the server's schedule
//! would run it overnight. Maintenance is not run again after the live
//! ingest: today's arrivals stay live, as they would in production.

use std::sync::Arc;
use std::time::Instant;

use affinity_engine::rollup::closed_through;
use affinity_engine::{Engine, MaintainOptions, MaintainReport, Progress, DAY_MILLIS};
use affinity_model::Store;
use anyhow::Context;
use serde_json::{json, Value};

use super::mix::{Class, Mix};
use super::phases::system_millis;
use super::{Settle, APP};
use crate::days::{folded, DayClock, Folded};

/// What the preload wrote.
pub struct Preload {
    pub days: u64,
    /// `(day, events stored)`, oldest first.
    pub per_day: Vec<(i64, usize)>,
    pub seconds: f64,
    /// Today's events that arrived in hours maintenance has digested
    /// (`--today-live-hours`), and the seconds to ingest and digest them.
    pub today_digested: usize,
    pub digest_seconds: f64,
    pub settle_seconds: Option<f64>,
    threads: usize,
}

impl Preload {
    pub fn events(&self) -> usize {
        self.per_day.iter().map(|(_, n)| n).sum()
    }
}

/// Ingest the users' events of the `days` days before today, each day on
/// its own clock, from `threads` threads; then settle the store.
pub fn preload(
    store: Arc<dyn Store>,
    mix: &Mix,
    days: u64,
    threads: usize,
    settle: Option<&Settle>,
) -> anyhow::Result<Preload> {
    let clock = DayClock::open(store)?;
    let today = system_millis().div_euclid(DAY_MILLIS);
    let started = Instant::now();
    let mut per_day = Vec::with_capacity(days as usize);
    for day in today - days as i64..today {
        clock.set_day(day);
        let sums = mix.day_sums(day);
        let total = sums.last().copied().unwrap_or(0);
        let span = DAY_MILLIS - 60_000;
        let stored = crate::days::ingest_all(&clock.engine, APP, total, threads, |i| {
            mix.day_event(&sums, day, i, span)
        })
        .with_context(|| format!("preloading day {day}"))?;
        per_day.push((day, stored));
    }
    let seconds = started.elapsed().as_secs_f64();
    // Today's events of the hours no longer live: arrived at noon, then
    // digested at the day's end, as maintenance keeps today's row.
    let started = Instant::now();
    let sums = mix.digested_sums(today);
    let today_digested = sums.last().copied().unwrap_or(0);
    if today_digested > 0 {
        clock.set_at(today * DAY_MILLIS + DAY_MILLIS / 2);
        crate::days::ingest_all(&clock.engine, APP, today_digested, threads, |i| {
            mix.digested_event(&sums, today, i, DAY_MILLIS / 2)
        })
        .context("preloading today's digested events")?;
        clock.set_day(today);
        let app = clock.engine.app(APP)?;
        for u in 0..mix.users() {
            clock.engine.digest_user(&app, &format!("user{u}"))?;
        }
    }
    let digest_seconds = started.elapsed().as_secs_f64();
    let settle_seconds = match settle {
        Some(settle) => {
            let t = Instant::now();
            settle().context("settling the store after the preload")?;
            Some(t.elapsed().as_secs_f64())
        }
        None => None,
    };
    Ok(Preload {
        days,
        per_day,
        seconds,
        today_digested,
        digest_seconds,
        settle_seconds,
        threads,
    })
}

/// Both phases done: the maintenance's figures, and the printed lines and
/// JSON of both (see [`report`]).
pub struct Done {
    pub maintained: Maintained,
    pub report: (String, Value, Value),
}

/// What the maintenance did, and what the rollups hold after it.
pub struct Maintained {
    pub report: MaintainReport,
    pub seconds: f64,
    /// The last arrival day folded.
    pub closed_through: i64,
    pub folded: Folded,
    /// Events of the preloaded days the fold had to cover: within the
    /// window and closed.
    pub expected_events: usize,
    /// Users with such events.
    pub expected_users: usize,
}

impl Maintained {
    /// Whole days between the last one folded and today.
    pub fn days_behind(&self) -> i64 {
        (system_millis().div_euclid(DAY_MILLIS) - 1 - self.closed_through).max(0)
    }
}

/// One maintenance of the application on `engine` (the real clock), then
/// a scan of what its rollups hold (not timed).
pub fn maintain(engine: &Engine, mix: &Mix, preload: &Preload) -> anyhow::Result<Maintained> {
    let started = Instant::now();
    let report = engine.maintain(APP, MaintainOptions::default(), &Progress::default())?;
    let seconds = started.elapsed().as_secs_f64();
    let now = engine.now_millis();
    let app = engine.app(APP)?;
    let (window, h) = (app.config.window_start_day(now), closed_through(now));
    let covered = |day: i64| day >= window && day <= h;
    let expected_events = preload
        .per_day
        .iter()
        .filter(|(d, _)| covered(*d))
        .map(|(_, n)| n)
        .sum();
    let expected_users = (0..mix.users())
        .filter(|u| {
            preload
                .per_day
                .iter()
                .any(|(d, _)| covered(*d) && mix.events_on(*u, *d) > 0)
        })
        .count();
    Ok(Maintained {
        report,
        seconds,
        closed_through: h,
        folded: folded(&app)?,
        expected_events,
        expected_users,
    })
}

/// The printed lines and the JSON of both phases.
pub fn report(mix: &Mix, preload: &Preload, done: &Maintained) -> (String, Value, Value) {
    let heavy = mix.members(Class::Heavy).len();
    let events = preload.events();
    let rate = events as f64 / preload.seconds;
    let settled = match preload.settle_seconds {
        Some(s) => format!("; store settled in {s:.2} s"),
        None => String::new(),
    };
    let today = match preload.today_digested {
        0 => String::new(),
        n => format!(
            "; today: {n} events of its closed hours, ingested and digested in {:.1} s",
            preload.digest_seconds
        ),
    };
    let history_line = format!(
        "history: {} days before today, {} users ({heavy} heavy at ~{} events/day, {} light at ~{}/day, facet values {}): {events} events in {:.1} s = {rate:.0} events/s (in process, Engine::ingest on each day's clock, {} threads){settled}{today}",
        preload.days,
        mix.users(),
        mix.heavy_per_day,
        mix.users() - heavy,
        mix.light_per_day,
        mix.values(),
        preload.seconds,
        preload.threads,
    );
    let r = &done.report;
    let users_per_s = r.users as f64 / done.seconds;
    let folded_per_s = done.folded.events as f64 / done.seconds;
    let maintenance_line = format!(
        "maintenance: {} users, {} rollups written, {} day rows read, {} conflicts in {:.2} s = {users_per_s:.0} users/s, {folded_per_s:.0} events folded/s ({} events in {} rollups, arrival days closed through day {})",
        r.users, r.folded, r.rows_read, r.conflicts, done.seconds, done.folded.events, done.folded.rollups, done.closed_through,
    );
    let history = json!({
        "days": preload.days, "users": mix.users(), "heavy_users": heavy,
        "heavy_per_day": mix.heavy_per_day, "light_per_day": mix.light_per_day,
        "events": events, "seconds": preload.seconds, "events_per_s": rate,
        "settle_seconds": preload.settle_seconds, "threads": preload.threads,
        "events_per_day": preload.per_day.iter().map(|(_, n)| n).collect::<Vec<_>>(),
        "today_digested_events": preload.today_digested,
    });
    let maintenance = json!({
        "users": r.users, "folded": r.folded, "rows_read": r.rows_read, "conflicts": r.conflicts,
        "ranges": r.ranges, "seconds": done.seconds, "users_per_s": users_per_s,
        "events_folded": done.folded.events, "events_folded_per_s": folded_per_s,
        "rollups": done.folded.rollups, "closed_through_day": done.closed_through,
        "expected_events": done.expected_events, "expected_users": done.expected_users,
    });
    (
        format!("{history_line}\n{maintenance_line}"),
        history,
        maintenance,
    )
}
