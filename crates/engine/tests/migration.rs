//! Narrow -> wide migration: dual-write, resumable backfill, verify, cut over.

mod common;

use affinity_engine::{AppConfig, Engine, Progress, RecomputeOptions, Schema};
use common::*;

#[test]
fn narrow_to_wide_keeps_every_profile() {
    migrate(None);
}

#[test]
fn narrow_to_wide_on_a_salted_app_keeps_every_profile() {
    migrate(Some(5));
}

fn migrate(salt_buckets: Option<u32>) {
    let now = 1_700_000_000_000;
    let clock = FakeClock::new(now);
    let engine = Engine::with_clock(clock.memory_store(), clock.engine_clock()).unwrap();
    let config = AppConfig {
        schema: Schema::Narrow,
        retention_days: 30,
    };
    match salt_buckets {
        Some(b) => engine.configure_salted_app("app1", config, b).unwrap(),
        None => engine.configure_app("app1", config).unwrap(),
    };
    engine
        .put_objects("app1", "products", &catalog_objects())
        .unwrap();
    engine.set_strategy("app1", &strategy()).unwrap();
    let values: Vec<_> = (0..300)
        .map(|i| {
            event_json(
                i as u8,
                (i % 4) as u8,
                now - i * 3_000_000,
                &[i as u8, (i / 3) as u8],
                i % 3 == 0,
            )
        })
        .collect();
    let events = parse_all(&values, now);
    engine.ingest("app1", &events[..200]).unwrap();
    assert!(engine.cut_over("app1").is_err());
    engine.start_migration("app1", Schema::Wide).unwrap();
    // Dual-written while the backfill runs.
    engine.ingest("app1", &events[200..]).unwrap();
    let progress = Progress::default();
    // Interrupted after 120 rows, then resumed.
    assert!(!engine.backfill("app1", &progress, Some(120)).unwrap());
    assert!(engine.cut_over("app1").is_err());
    let before = engine.verify_migration("app1").unwrap();
    assert!(!before.mismatched.is_empty(), "a half backfill must show");
    assert!(engine.backfill("app1", &progress, None).unwrap());
    assert_eq!(progress.snapshot().events, 300);
    let check = engine.verify_migration("app1").unwrap();
    assert_eq!(check.users, 4);
    assert!(check.mismatched.is_empty(), "{:?}", check.mismatched);
    let settings = engine.cut_over("app1").unwrap();
    assert_eq!(
        (settings.config.schema, settings.dual_write),
        (Schema::Wide, None)
    );
    assert_eq!(settings.salt_buckets, salt_buckets);
    // After the cut-over every path reads the wide layout and agrees.
    let expected = reference_profiles("app1", &events, now, 30 * DAY);
    assert_eq!(
        engine
            .layout_profiles("app1", Schema::Wide, &strategy())
            .unwrap(),
        expected
    );
    engine
        .recompute("app1", RecomputeOptions::default(), &Progress::default())
        .unwrap();
    assert_eq!(batch_profiles(&engine, "app1", &users()), expected);
    assert_eq!(streaming_profiles(&engine, "app1", &users()), expected);
    // A fresh engine reads the stored configuration.
    let reopened = Engine::with_clock(engine.store().clone(), clock.engine_clock()).unwrap();
    assert_eq!(reopened.app("app1").unwrap().config.schema, Schema::Wide);
}
