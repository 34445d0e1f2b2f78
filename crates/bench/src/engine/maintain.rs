//! `affinity bench engine maintain`: the nightly maintenance folding one
//! closed day into the rollups.
//!
//! The last closed arrival day `L` (yesterday, once today's first hour is
//! past) gets `--events` events over `--users` users, four filters each,
//! ingested on `L`'s clock (see [`crate::days`]) with synced writes, as
//! `affinity serve` makes them (`--no-sync`: unsynced);
//! with `--days N`, the N days before it are loaded first and folded by a
//! maintenance on the clock of `L`, so the timed one adds a day to
//! existing rollups. The store is settled, then `Engine::maintain` runs
//! with the real clock, timed. What the rollups hold is scanned before
//! and after (not timed): the events folded are the difference.

use std::time::Instant;

use affinity_embedded::EmbeddedStore;
use affinity_engine::rollup::closed_through;
use affinity_engine::{Engine, Event, MaintainOptions, Progress};
use anyhow::Context;

use super::{EngineBenchArgs, APP, DAY};
use crate::days::{draw, folded, ingest_all, DayClock, Drawn};

/// The goal: a day of 1M events over 100k users folded in 10 s.
const GOAL_SECONDS: f64 = 10.0;
const SEED: u64 = 42;

/// Event `i` of `day`: a user among `users`, a time within the day.
fn event(day: i64, i: usize, users: u64) -> Event {
    let (d, i) = (day as u64, i as u64);
    let user = draw(SEED, &[d, i, 1]) % users;
    let ts = day * DAY + (draw(SEED, &[d, i, 2]) % (DAY as u64 - 60_000)) as i64;
    Drawn::from_hash(draw(SEED, &[d, i, 3])).event(format!("user{user}"), ts, "")
}

/// Users with at least one event on `day`.
fn users_on(day: i64, events: usize, users: u64) -> usize {
    let mut seen = vec![false; users as usize];
    for i in 0..events {
        seen[(draw(SEED, &[day as u64, i as u64, 1]) % users) as usize] = true;
    }
    seen.into_iter().filter(|s| *s).count()
}

pub fn run(engine: &Engine, store: &EmbeddedStore, args: &EngineBenchArgs) -> anyhow::Result<()> {
    let (events, users, days) = (args.events(), args.users(), args.days()?);
    anyhow::ensure!(users > 0, "--users must be positive");
    let threads = match args.threads[..] {
        [t] => t.max(1),
        _ => anyhow::bail!("maintain runs one maintenance: give one --threads count"),
    };
    let clients = args.clients.max(1);
    let clock = DayClock::open(std::sync::Arc::clone(engine.store()))?;
    let now = engine.now_millis();
    let day = closed_through(now);
    let window = engine.app(APP)?.config.window_start_day(now);
    anyhow::ensure!(
        day - days as i64 >= window,
        "--days {days}: the earliest day would be out of the window, take at most {}",
        day - window
    );
    if days > 0 {
        let t = Instant::now();
        for d in day - days as i64..day {
            clock.set_day(d);
            ingest_all(&clock.engine, APP, events, clients, |i| event(d, i, users))
                .with_context(|| format!("loading day {d}"))?;
        }
        let loaded = t.elapsed().as_secs_f64();
        clock.set_after_close(day);
        let t = Instant::now();
        let report =
            clock
                .engine
                .maintain(APP, MaintainOptions::default(), &Progress::default())?;
        println!(
            "earlier days: {days} x {events} events loaded in {loaded:.1} s, folded into {} rollups by a maintenance on day {day}'s clock in {:.1} s",
            report.folded,
            t.elapsed().as_secs_f64()
        );
    }
    clock.set_day(day);
    let t = Instant::now();
    let stored = ingest_all(&clock.engine, APP, events, clients, |i| {
        event(day, i, users)
    })
    .with_context(|| format!("loading day {day}"))?;
    let loaded = t.elapsed().as_secs_f64();
    let t = Instant::now();
    store.flush().context("settling the store")?;
    let settled = t.elapsed().as_secs_f64();
    let with_events = users_on(day, events, users);
    println!(
        "loaded {stored} events of {with_events} users on day {day} (their arrival day, {}, {clients} threads) in {loaded:.1} s = {:.0} events/s; store settled in {settled:.1} s",
        if args.no_sync { "unsynced" } else { "synced" },
        stored as f64 / loaded
    );

    let app = engine.app(APP)?;
    let before = folded(&app)?;
    let t = Instant::now();
    let options = MaintainOptions {
        threads,
        shard: None,
    };
    let report = engine.maintain(APP, options, &Progress::default())?;
    let secs = t.elapsed().as_secs_f64();
    let after = folded(&app)?;
    let folded_events = after.events - before.events;
    println!(
        "maintain {} ({threads} threads, {} ranges): {} users, {} rollups written, {} day rows read, {} conflicts, {folded_events} events folded in {secs:.2} s = {:.0} users/s, {:.0} events folded/s (goal: a day of 1M events over 100k users folded in <= {GOAL_SECONDS:.0} s)",
        args.schema.as_str(),
        report.ranges,
        report.users,
        report.folded,
        report.rows_read,
        report.conflicts,
        report.users as f64 / secs,
        folded_events as f64 / secs,
    );
    println!(
        "rollups: {} hold {} events ({} before this maintenance)",
        after.rollups, after.events, before.events
    );
    Ok(())
}
