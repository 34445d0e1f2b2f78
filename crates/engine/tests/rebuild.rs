//! Rebuild: profile state re-derived from the events table equals the
//! reference, whatever was missing (events stored without state, a user's
//! rows, a rollup row, the whole table), around maintenance, as a named
//! job cut short and resumed; and writes nothing where nothing is missing.

mod common;

use affinity_engine::{
    AppConfig, Engine, MaintainOptions, Progress, RebuildOptions, RebuildReport, Schema,
};
use common::*;
use serde_json::json;

fn setup(clock: &FakeClock, app: &str, schema: Schema, salt_buckets: Option<u32>) -> Engine {
    let engine = Engine::with_clock(clock.memory_store(), clock.engine_clock()).unwrap();
    let config = AppConfig {
        schema,
        retention_days: 90,
    };
    match salt_buckets {
        Some(b) => engine.configure_salted_app(app, config, b).unwrap(),
        None => engine.configure_app(app, config).unwrap(),
    };
    engine
        .put_objects(app, "products", &catalog_objects())
        .unwrap();
    engine.set_strategy(app, &strategy()).unwrap();
    engine
}

fn rebuild(engine: &Engine, app: &str) -> RebuildReport {
    engine
        .rebuild(app, RebuildOptions::default(), &Progress::default())
        .unwrap()
}

fn maintain(engine: &Engine, app: &str) {
    let report = engine
        .maintain(app, MaintainOptions::default(), &Progress::default())
        .unwrap();
    assert_eq!(report.conflicts, 0);
}

/// `n` events of the four test users over the last `days` days.
fn spread(n: i64, days: i64, now: i64) -> Vec<affinity_engine::Event> {
    let values: Vec<_> = (0..n)
        .map(|i| {
            let ts = now - 60_000 - i * days * DAY / n;
            event_json(
                i as u8,
                (i % 4) as u8,
                ts,
                &[i as u8, (i / 3) as u8],
                i % 3 == 0,
            )
        })
        .collect();
    parse_all(&values, now)
}

#[test]
fn events_stored_without_state_are_restored_once() {
    let now = 1_700_000_000_000;
    for (schema, salt) in [
        (Schema::Narrow, None),
        (Schema::Wide, None),
        (Schema::Wide, Some(3)),
    ] {
        let clock = FakeClock::new(now);
        let engine = setup(&clock, "app1", schema, salt);
        let events = spread(120, 10, now);
        let (ingested, loaded) = events.split_at(50);
        engine.ingest("app1", ingested).unwrap();
        // A retried batch: its events have two adds, and stay counted once.
        engine.ingest("app1", &ingested[..7]).unwrap();
        store_without_state(&engine, "app1", loaded);
        let expected = reference_profiles("app1", &events, now, 90 * DAY);
        assert_ne!(streaming_profiles(&engine, "app1", &users()), expected);

        let report = rebuild(&engine, "app1");
        assert_eq!(report.events, 120, "{schema:?} {salt:?}");
        assert_eq!((report.restored, report.markers), (70, 0));
        assert_eq!(report.users, 4);
        assert_eq!(streaming_profiles(&engine, "app1", &users()), expected);
        assert_eq!(exported_profiles(&engine, "app1"), json_texts(&expected));
        let again = rebuild(&engine, "app1");
        assert_eq!((again.events, again.restored, again.markers), (120, 0, 0));
        assert_eq!(streaming_profiles(&engine, "app1", &users()), expected);
    }
}

#[test]
fn lost_state_is_rebuilt_around_maintenance() {
    // Mid-morning, so yesterday is closed and maintenance folds it.
    let start = 1_700_000_000_000 - 1_700_000_000_000 % DAY + 10 * 3_600_000;
    let clock = FakeClock::new(start);
    let engine = setup(&clock, "app1", Schema::Wide, None);
    let events = spread(80, 6, start);
    engine.ingest("app1", &events).unwrap();
    // The next day: a client retries a batch (adds on a second arrival
    // day, announced by markers) and late events arrive.
    clock.set(start + DAY);
    engine.ingest("app1", &events[10..20]).unwrap();
    let late = spread(12, 3, start);
    engine.ingest("app1", &late).unwrap();
    let all: Vec<_> = events.iter().chain(&late).cloned().collect();
    let check = |what: &str| {
        let expected = reference_profiles("app1", &all, clock.now(), 90 * DAY);
        assert_eq!(
            streaming_profiles(&engine, "app1", &users()),
            expected,
            "{what}"
        );
    };
    check("ingested");
    maintain(&engine, "app1");
    check("maintained");

    // A user's rows all lost, another's rollup row alone.
    lose_state(&engine, "app1", "user-1", Loss::User);
    lose_state(&engine, "app1", "user-2", Loss::Rollup);
    let report = rebuild(&engine, "app1");
    assert!(report.restored > 0, "{report:?}");
    check("rebuilt");
    let again = rebuild(&engine, "app1");
    assert_eq!((again.restored, again.markers), (0, 0));
    maintain(&engine, "app1");
    check("rebuilt, maintained");
    clock.set(start + 3 * DAY);
    check("two days later");
    maintain(&engine, "app1");
    check("two days later, maintained");
    let again = rebuild(&engine, "app1");
    assert_eq!((again.restored, again.markers), (0, 0));
}

#[test]
fn a_lost_rollup_row_gets_its_late_markers_back() {
    let start = 1_700_000_000_000 - 1_700_000_000_000 % DAY + 10 * 3_600_000;
    let clock = FakeClock::new(start);
    let engine = setup(&clock, "app1", Schema::Narrow, None);
    let events = parse_all(
        &[
            event_json(0, 1, start - 1000, &[0, 2], false),
            event_json(0, 1, start - 2000, &[1], false),
        ],
        start,
    );
    engine.ingest("app1", &events).unwrap();
    // The first retried the next day: two adds on two arrival days, and a
    // marker.
    clock.set(start + DAY);
    engine.ingest("app1", &events[..1]).unwrap();
    let expected = reference_profiles("app1", &events, clock.now(), 90 * DAY);
    assert_eq!(streaming_profiles(&engine, "app1", &users()), expected);
    lose_state(&engine, "app1", "user-1", Loss::Rollup);
    // Without the marker the two adds read as two events.
    assert_ne!(streaming_profiles(&engine, "app1", &users()), expected);
    let report = rebuild(&engine, "app1");
    assert_eq!((report.restored, report.markers), (0, 1));
    assert_eq!(streaming_profiles(&engine, "app1", &users()), expected);
    maintain(&engine, "app1");
    assert_eq!(streaming_profiles(&engine, "app1", &users()), expected);
}

#[test]
fn a_named_rebuild_shares_its_split_and_resumes_where_it_stopped() {
    let now = 1_700_000_000_000;
    let clock = FakeClock::new(now);
    let engine = setup(&clock, "app1", Schema::Narrow, None);
    let mut values = Vec::new();
    for u in 0..80 {
        let mut v = event_json(0, 0, now - u * 1000, &[u as u8], false);
        v["userToken"] = json!(format!("bulk-{u:02}"));
        values.push(v);
    }
    let events = parse_all(&values, now);
    store_without_state(&engine, "app1", &events);
    let job = |shard| RebuildOptions { threads: 2, shard };
    // Shard 0 of 2 runs, then the job "crashes".
    let first = engine
        .rebuild_job("app1", job(Some((0, 2))), "r1", &Progress::default())
        .unwrap();
    assert!(first.ranges > 1);
    assert!(first.restored > 0 && first.restored < 80);
    // The restarted job (all shards) keeps the stored split and runs only
    // the ranges shard 0 did not finish.
    let progress = Progress::default();
    let rest = engine
        .rebuild_job("app1", job(None), "r1", &progress)
        .unwrap();
    let snap = progress.snapshot();
    assert_eq!(snap.ranges_done, snap.ranges_total);
    assert_eq!(first.ranges + rest.ranges, snap.ranges_total);
    // Together they restored every event once.
    assert_eq!(first.restored + rest.restored, 80);
    assert_eq!(first.users + rest.users, 80);
    let users: Vec<String> = (0..80).map(|u| format!("bulk-{u:02}")).collect();
    assert_eq!(
        streaming_profiles(&engine, "app1", &users),
        reference_profiles("app1", &events, now, 90 * DAY)
    );
    // Running it again does nothing.
    let again = engine
        .rebuild_job("app1", job(None), "r1", &Progress::default())
        .unwrap();
    assert_eq!((again.ranges, again.events, again.restored), (0, 0, 0));
    assert!(engine
        .rebuild("app1", job(Some((2, 2))), &Progress::default())
        .is_err());
}

#[test]
fn a_user_deleted_after_the_rebuild_started_keeps_nothing_of_it() {
    let now = 1_700_000_000_000;
    let clock = FakeClock::new(now);
    let engine = setup(&clock, "app1", Schema::Wide, None);
    let events = spread(40, 5, now);
    // The deletion's tombstone is stamped after the rebuild's start; the
    // user's events are still there (as when the rebuild read them first).
    clock.set(now + 10);
    engine.delete_user("app1", "user-3").unwrap();
    clock.set(now);
    store_without_state(&engine, "app1", &events);
    let report = rebuild(&engine, "app1");
    assert_eq!(report.restored, 30);
    let kept: Vec<_> = events
        .iter()
        .filter(|e| e.identity() != "user-3")
        .cloned()
        .collect();
    assert_eq!(
        streaming_profiles(&engine, "app1", &users()),
        reference_profiles("app1", &kept, now, 90 * DAY)
    );
}
