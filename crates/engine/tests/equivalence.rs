//! Property tests: for random event sets, in the narrow, wide and wide
//! salted (3 buckets) schemas, the profile a read answers, the exported
//! profile and the naive reference are equal, and so are the reads after
//! profile state was lost and rebuilt from the events table; on the
//! in-memory store, the embedded store and the Bigtable emulator, with the
//! applications on tables of their own and on shared tables.

mod common;

use std::sync::Arc;

use affinity_engine::{AppConfig, Engine, ExportOptions, Progress, RebuildOptions, Schema, Tables};
use affinity_model::Store;
use common::*;
use proptest::prelude::*;
use serde_json::Value;

const RETENTION_DAYS: u32 = 3;

#[derive(Debug, Clone)]
struct Case {
    events: Vec<(u8, u8, i64, Vec<u8>, bool)>,
    chunk: usize,
    retry: usize,
    advance: i64,
}

fn case() -> impl Strategy<Value = Case> {
    (
        proptest::collection::vec(
            (
                any::<u8>(),
                any::<u8>(),
                0i64..24,
                proptest::collection::vec(any::<u8>(), 1..4),
                any::<bool>(),
            ),
            1..40,
        ),
        1usize..12,
        any::<usize>(),
        prop_oneof![Just(0i64), 0i64..(2 * DAY)],
    )
        .prop_map(|(events, chunk, retry, advance)| Case {
            events,
            chunk,
            retry,
            advance,
        })
}

fn values(case: &Case, now: i64) -> Vec<Value> {
    let span = i64::from(RETENTION_DAYS) * DAY - 120_000;
    case.events
        .iter()
        .map(|(kind, user, slot, items, objects)| {
            event_json(
                *kind,
                *user,
                now - 60_000 - slot * span / 23,
                items,
                *objects,
            )
        })
        .collect()
}

/// Ingest the case into a narrow and a wide app, on shared or dedicated
/// tables; check every path.
fn check(
    store: Arc<dyn Store>,
    clock: &FakeClock,
    case: &Case,
    tables: Tables,
) -> Result<(), TestCaseError> {
    let now = clock.now();
    let mut engine = Engine::with_clock(store, clock.engine_clock()).unwrap();
    if tables == Tables::Shared {
        engine = engine.with_shared_retention(RETENTION_DAYS);
    }
    let events = parse_all(&values(case, now), now);
    for (app, schema, salt_buckets) in [
        ("narrow", Schema::Narrow, None),
        ("wide", Schema::Wide, None),
        ("salted", Schema::Wide, Some(3)),
    ] {
        let config = AppConfig {
            schema,
            retention_days: RETENTION_DAYS,
        };
        let handle = match salt_buckets {
            Some(b) => engine.configure_salted_app(app, config, b).unwrap(),
            None => engine.configure_app(app, config).unwrap(),
        };
        prop_assert_eq!(handle.tables, tables);
        engine
            .put_objects(app, "products", &catalog_objects())
            .unwrap();
        engine.set_strategy(app, &strategy()).unwrap();
        let chunks: Vec<_> = events.chunks(case.chunk).collect();
        for chunk in &chunks {
            engine.ingest(app, chunk).unwrap();
        }
        // A retried batch (its events count once, checked below).
        engine
            .ingest(app, chunks[case.retry % chunks.len()])
            .unwrap();
    }
    // GDPR: one user is deleted everywhere, checked by a scan.
    let deleted = format!("user-{}", case.retry % 4);
    for app in ["narrow", "wide", "salted"] {
        engine.delete_user(app, &deleted).unwrap();
        prop_assert_eq!(engine.user_row_count(app, &deleted).unwrap(), 0);
    }
    let kept: Vec<_> = events
        .iter()
        .filter(|e| e.identity() != deleted)
        .cloned()
        .collect();
    clock.set(now + case.advance);
    let expected = reference_profiles(
        "x",
        &kept,
        now + case.advance,
        i64::from(RETENTION_DAYS) * DAY,
    );
    for app in ["narrow", "wide", "salted"] {
        prop_assert_eq!(
            &streaming_profiles(&engine, app, &users()),
            &expected,
            "streaming {}",
            app
        );
        let options = ExportOptions {
            threads: 2,
            shard: None,
        };
        let (export, _) = exported(&engine, app, options, None);
        prop_assert!(!export.contains_key(&deleted));
        prop_assert_eq!(&export, &json_texts(&expected), "export {}", app);
        prop_assert_eq!(&read_texts(&engine, app, &users()), &export, "read {}", app);

        // Profile state lost, then rebuilt from the events table.
        let lost = format!("user-{}", (case.retry + 1) % 4);
        match case.retry % 3 {
            0 => lose_state(&engine, app, &lost, Loss::User),
            1 => lose_state(&engine, app, &lost, Loss::Rollup),
            _ => lose_profiles_table(&engine, app),
        }
        let options = RebuildOptions {
            threads: 2,
            shard: None,
        };
        engine.rebuild(app, options, &Progress::default()).unwrap();
        prop_assert_eq!(
            &streaming_profiles(&engine, app, &users()),
            &expected,
            "rebuilt {}",
            app
        );
        // What is there stays: a second rebuild writes nothing.
        let again = engine.rebuild(app, options, &Progress::default()).unwrap();
        prop_assert_eq!(
            (again.restored, again.markers),
            (0, 0),
            "rebuilt again {}",
            app
        );
        prop_assert_eq!(
            &streaming_profiles(&engine, app, &users()),
            &expected,
            "rebuilt again {}",
            app
        );
    }
    clock.set(now);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn memory_store_paths_equal_the_reference(case in case()) {
        let clock = FakeClock::new(1_700_000_000_000);
        check(clock.memory_store(), &clock, &case, Tables::Dedicated)?;
    }

    #[test]
    fn memory_store_paths_equal_the_reference_on_shared_tables(case in case()) {
        let clock = FakeClock::new(1_700_000_000_000);
        check(clock.memory_store(), &clock, &case, Tables::Shared)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn embedded_store_paths_equal_the_reference(case in case()) {
        // The embedded store collects garbage on the real clock: no advance.
        let case = Case { advance: 0, ..case };
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(affinity_embedded::EmbeddedStore::open(dir.path()).unwrap());
        check(store, &FakeClock::new(real_now()), &case, Tables::Dedicated)?;
    }

    #[test]
    fn embedded_store_paths_equal_the_reference_on_shared_tables(case in case()) {
        let case = Case { advance: 0, ..case };
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(affinity_embedded::EmbeddedStore::open(dir.path()).unwrap());
        check(store, &FakeClock::new(real_now()), &case, Tables::Shared)?;
    }

    #[ignore = "needs the Cloud Bigtable emulator (scripts/test runs it)"]
    #[test]
    fn emulator_paths_equal_the_reference(case in case()) {
        let store = affinity_bigtable::emulator::test_store();
        let case = Case { advance: 0, ..case };
        let tables = [Tables::Dedicated, Tables::Shared][case.retry % 2];
        check(store, &FakeClock::new(real_now()), &case, tables)?;
    }
}
