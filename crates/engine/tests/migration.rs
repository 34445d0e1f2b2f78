//! Narrow -> wide migration: dual-write, resumable backfill, verify, cut over.

mod common;

use affinity_engine::{AppConfig, Engine, Error, Progress, Schema};
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
    assert_eq!(exported_profiles(&engine, "app1"), json_texts(&expected));
    assert_eq!(streaming_profiles(&engine, "app1", &users()), expected);
    // A fresh engine reads the stored configuration.
    let reopened = Engine::with_clock(engine.store().clone(), clock.engine_clock()).unwrap();
    assert_eq!(reopened.app("app1").unwrap().config.schema, Schema::Wide);
}

#[test]
fn outside_a_migration_the_schema_cannot_change_once_events_are_stored() {
    let now = 1_700_000_000_000;
    let clock = FakeClock::new(now);
    let engine = Engine::with_clock(clock.memory_store(), clock.engine_clock()).unwrap();
    let config = |schema, retention_days| AppConfig {
        schema,
        retention_days,
    };
    // Without events the schema may change, back and forth.
    engine
        .configure_app("app1", config(Schema::Wide, 30))
        .unwrap();
    engine
        .configure_app("app1", config(Schema::Narrow, 30))
        .unwrap();
    let event = event_json(0, 0, now - 1000, &[0], false);
    engine.ingest("app1", &parse_all(&[event], now)).unwrap();
    let refused = Error::SchemaChange {
        app: "app1".into(),
        stored: Schema::Narrow,
        requested: Schema::Wide,
    };
    assert_eq!(
        refused.to_string(),
        "application \"app1\" already holds narrow events; moving it to wide is a migration \
         (`affinity migrate`)"
    );
    let wide = config(Schema::Wide, 30);
    assert_eq!(engine.check_config("app1", wide), Err(refused.clone()));
    assert_eq!(
        engine.configure_app("app1", wide).err(),
        Some(refused.clone())
    );
    assert_eq!(
        engine.configure_salted_app("app1", wide, 4).err(),
        Some(refused)
    );
    let reopened = Engine::with_clock(engine.store().clone(), clock.engine_clock()).unwrap();
    assert_eq!(
        reopened.app("app1").unwrap().settings().config,
        config(Schema::Narrow, 30)
    );
    // The rest of the configuration still changes.
    engine
        .configure_app("app1", config(Schema::Narrow, 60))
        .unwrap();
    assert_eq!(engine.app("app1").unwrap().config.retention_days, 60);
}
