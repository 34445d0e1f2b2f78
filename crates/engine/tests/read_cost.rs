//! What a profile read costs once the history is folded: the rollup row
//! plus the day rows that arrived since (`docs/design/profiles.md`), whatever
//! the days of history, counted by a wrapper around the store; a user on a
//! day's hot list reads that day's sub-rows. On the in-memory store and
//! on the Bigtable emulator.

mod common;

use std::sync::Arc;

use affinity_engine::{AppConfig, Engine, MaintainOptions, Progress, Schema};
use affinity_model::counting::{CountingStore, Counts};
use affinity_model::Store;
use common::*;

const APP: &str = "cost";

/// Events of `user` on the day `days_ago` before the clock's day, at 10:00.
fn day_of_events(user: u8, n: usize, at: i64) -> Vec<serde_json::Value> {
    (0..n)
        .map(|i| {
            event_json(
                (i % 3) as u8,
                user,
                at + i as i64 * 1000,
                &[0, 2, i as u8],
                false,
            )
        })
        .collect()
}

/// Rows and cells of the profiles table one profile read of `user`
/// returns (the application is the only one in the shared table).
fn read_cost(engine: &Engine, counting: &CountingStore, user: &str) -> Counts {
    let table = match engine.app(APP).unwrap().tables {
        affinity_engine::Tables::Shared => "profiles".to_string(),
        affinity_engine::Tables::Dedicated => format!("profiles.{APP}"),
    };
    let before = counting.counts(&table);
    engine.profile(APP, user).unwrap();
    counting.counts(&table).since(before)
}

fn check(store: Arc<dyn Store>, start: i64) {
    let clock = FakeClock::new(start);
    let counting = Arc::new(CountingStore::new(store));
    let engine = Engine::with_clock(counting.clone(), clock.engine_clock()).unwrap();
    engine
        .configure_app(
            APP,
            AppConfig {
                schema: Schema::Wide,
                retention_days: 90,
            },
        )
        .unwrap();
    engine
        .put_objects(APP, "products", &catalog_objects())
        .unwrap();
    engine.set_strategy(APP, &strategy()).unwrap();
    let mut all = Vec::new();
    // 40 days of history, each day's events arriving on their own day.
    for days_ago in (1..=40).rev() {
        let at = start - days_ago * DAY;
        clock.set(at);
        let values: Vec<_> = day_of_events(0, 5, at)
            .into_iter()
            .chain(day_of_events(1, 60, at))
            .collect();
        let events = parse_all(&values, at);
        engine.ingest(APP, &events).unwrap();
        all.extend(events);
    }
    clock.set(start);
    let today = parse_all(&day_of_events(1, 10, start - 3_600_000), start);
    engine.ingest(APP, &today).unwrap();
    all.extend(today);
    let users = ["user-0".to_string(), "user-1".to_string()];
    let reference =
        |all: &[affinity_engine::Event]| reference_profiles(APP, all, clock.now(), 90 * DAY);

    // Before any maintenance a read walks every day of history.
    let unfolded = read_cost(&engine, &counting, "user-1");
    assert!(unfolded.rows >= 40, "{unfolded:?}");
    engine
        .maintain(APP, MaintainOptions::default(), &Progress::default())
        .unwrap();
    assert_eq!(streaming_profiles(&engine, APP, &users), reference(&all));
    // After it: the rollup, and today's row for the user active today.
    assert_eq!(read_cost(&engine, &counting, "user-0").rows, 1);
    let heavy = read_cost(&engine, &counting, "user-1");
    assert_eq!(heavy.rows, 2, "{heavy:?}");
    // Folding leaves fewer cells to read than the days it replaced.
    assert!(heavy.cells < unfolded.cells, "{heavy:?} vs {unfolded:?}");
    eprintln!("heavy user's read: {unfolded:?} unfolded, {heavy:?} folded");
    // A late event (five days old, arriving today) adds its day's row.
    let late = parse_all(&day_of_events(1, 1, start - 5 * DAY), start);
    engine.ingest(APP, &late).unwrap();
    all.extend(late);
    assert_eq!(read_cost(&engine, &counting, "user-1").rows, 3);
    assert_eq!(streaming_profiles(&engine, APP, &users), reference(&all));
    // Two days without maintenance: the live days since the watermark.
    clock.set(start + 2 * DAY);
    assert!(read_cost(&engine, &counting, "user-1").rows <= 2 + 2);
    assert_eq!(streaming_profiles(&engine, APP, &users), reference(&all));
    engine
        .maintain(APP, MaintainOptions::default(), &Progress::default())
        .unwrap();
    assert_eq!(read_cost(&engine, &counting, "user-1").rows, 1);
    assert_eq!(streaming_profiles(&engine, APP, &users), reference(&all));
    // At 23:30 an event 50 minutes ahead (within the clock skew accepted)
    // falls on tomorrow's row: the read's point reads take tomorrow too.
    let evening = start + 2 * DAY + 13 * 3_600_000 + 30 * 60_000;
    clock.set(evening);
    let ahead = parse_all(&day_of_events(1, 1, evening + 50 * 60_000), evening);
    engine.ingest(APP, &ahead).unwrap();
    all.extend(ahead);
    assert_eq!(read_cost(&engine, &counting, "user-1").rows, 2);
    assert_eq!(streaming_profiles(&engine, APP, &users), reference(&all));
    // On a day's hot list (8 sub-rows), the user's live day is read as
    // the range of its sub-rows: the rollup and at most 8 rows.
    let spread_day = evening / DAY + 2;
    engine
        .publish_hot_users(APP, spread_day, &[("user-1".into(), 8)])
        .unwrap();
    let at = spread_day * DAY + 10 * 3_600_000;
    clock.set(at);
    engine
        .maintain(APP, MaintainOptions::default(), &Progress::default())
        .unwrap();
    let spread = parse_all(&day_of_events(1, 40, at - 3_600_000), at);
    engine.ingest(APP, &spread).unwrap();
    all.extend(spread);
    let cost = read_cost(&engine, &counting, "user-1");
    assert!((3..=9).contains(&cost.rows), "{cost:?}");
    eprintln!("spread user's read: {cost:?}");
    assert_eq!(streaming_profiles(&engine, APP, &users), reference(&all));
}

#[test]
fn folded_reads_touch_the_rollup_and_the_days_since_in_memory() {
    let start = 1_700_000_000_000 - 1_700_000_000_000 % DAY + 10 * 3_600_000;
    let clock = FakeClock::new(start);
    check(clock.memory_store(), start);
}

#[ignore = "needs the Cloud Bigtable emulator (scripts/test runs it)"]
#[test]
fn folded_reads_touch_the_rollup_and_the_days_since_on_the_emulator() {
    let now = real_now();
    check(
        affinity_bigtable::emulator::test_store(),
        now - now % DAY + 10 * 3_600_000,
    );
}
