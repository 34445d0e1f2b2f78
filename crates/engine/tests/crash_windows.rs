//! The ingest protocol's crash windows and races, on the embedded store.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use affinity_embedded::EmbeddedStore;
use affinity_engine::ingest::{counter_qualifier, state_row_key, EventId};
use affinity_engine::{AppConfig, Engine, Schema};
use affinity_model::{ReadModifyWriteRule, Store};
use common::*;

fn engine(store: Arc<dyn Store>, now: i64, schema: Schema) -> Engine {
    let clock = FakeClock::new(now);
    let engine = Engine::with_clock(store, clock.engine_clock()).unwrap();
    engine
        .configure_app(
            "app1",
            AppConfig {
                schema,
                retention_days: 90,
            },
        )
        .unwrap();
    engine
        .put_objects("app1", "products", &catalog_objects())
        .unwrap();
    engine.set_strategy("app1", &strategy()).unwrap();
    engine
}

fn event_id(key: &str) -> EventId {
    let parts: Vec<&str> = key.split(',').collect();
    EventId {
        timestamp_millis: affinity_rowkey::time::parse_millis(parts[2]).unwrap(),
        suffix: u64::from_str_radix(parts[3], 16).unwrap(),
    }
}

#[test]
fn a_racer_that_crashed_before_compensating_is_corrected_at_read_time() {
    let now = real_now();
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
    for schema in [Schema::Narrow, Schema::Wide] {
        let engine = engine(store.clone(), now, schema);
        let values: Vec<_> = (0..6)
            .map(|i| {
                event_json(
                    i as u8,
                    1,
                    now - 1000 - i * 3_000_000,
                    &[0, 2, i as u8],
                    false,
                )
            })
            .collect();
        let events = parse_all(&values, now);
        engine.ingest("app1", &events).unwrap();
        // A second ingester passed the "already applied?" check before the
        // first one's increments landed, applied event 0 again, and died
        // before taking the surplus back: step (3) twice, no step (4).
        let listed = listed("app1", &events);
        for times in 0..2 {
            let e = &listed[times * 3];
            let id = event_id(&e.id);
            let mut counts: BTreeMap<String, i64> = BTreeMap::new();
            for (f, v, n) in e.event.counts.iter() {
                *counts
                    .entry(counter_qualifier(
                        id.day(),
                        e.event.event_type,
                        &e.event.event_name,
                        f,
                        v,
                    ))
                    .or_default() += i64::from(n);
            }
            let mut rules: Vec<_> = counts
                .into_iter()
                .map(|(q, n)| ReadModifyWriteRule::increment("c", q, n))
                .collect();
            rules.push(ReadModifyWriteRule::append(
                "l",
                id.day().to_string(),
                id.record(b'+').to_vec(),
            ));
            let profiles = store.open_table("profiles.app1").unwrap();
            profiles
                .read_modify_write_row(state_row_key("user-1", id.day()).as_bytes(), &rules)
                .unwrap();
        }
        let expected = reference_profiles("app1", &events, now, 90 * DAY);
        assert_eq!(
            streaming_profiles(&engine, "app1", &users()),
            expected,
            "{schema:?}"
        );
        // A retry of the whole batch still changes nothing.
        let again = engine.ingest("app1", &events).unwrap();
        assert_eq!(again.applied, 0);
        assert_eq!(
            streaming_profiles(&engine, "app1", &users()),
            expected,
            "{schema:?}"
        );
        engine.delete_user("app1", "user-1").unwrap();
    }
}

#[test]
fn a_crash_between_the_event_write_and_the_increments_is_healed_by_the_retry() {
    let now = real_now();
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
    let engine = engine(store.clone(), now, Schema::Wide);
    let events = parse_all(&[event_json(0, 2, now - 5000, &[0, 2], false)], now);
    // Step (1) only: the event row is stored, the increments are not.
    let listed = listed("app1", &events);
    let events_table = store.open_table("events.app1").unwrap();
    events_table
        .mutate_row(
            listed[0].id.as_bytes(),
            &Schema::Wide.mutations(&listed[0].event),
        )
        .unwrap();
    assert_eq!(engine.profile("app1", "user-2").unwrap(), None);
    let report = engine.ingest("app1", &events).unwrap();
    assert_eq!(report.applied, 1);
    assert_eq!(
        streaming_profiles(&engine, "app1", &users()),
        reference_profiles("app1", &events, now, 90 * DAY)
    );
}

#[test]
fn concurrent_ingesters_on_the_embedded_store_are_exact() {
    let now = real_now();
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
    let engine = engine(store, now, Schema::Narrow);
    let values: Vec<_> = (0..300)
        .map(|i| {
            event_json(
                (i % 3) as u8,
                (i % 4) as u8,
                now - 1000 - (i % 50) * 1000,
                &[(i % 5) as u8, (i % 7) as u8],
                i % 2 == 0,
            )
        })
        .collect();
    let events = parse_all(&values, now);
    let reports: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|t| {
                let (engine, events) = (&engine, &events);
                s.spawn(move || {
                    let mut applied = 0;
                    for chunk in events.chunks(5 + t * 4) {
                        applied += engine.ingest("app1", chunk).unwrap().applied;
                    }
                    applied
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let distinct: std::collections::BTreeSet<_> =
        listed("app1", &events).into_iter().map(|e| e.id).collect();
    assert_eq!(reports.iter().sum::<usize>(), distinct.len());
    assert_eq!(
        streaming_profiles(&engine, "app1", &users()),
        reference_profiles("app1", &events, now, 90 * DAY)
    );
}

#[test]
fn concurrent_ingesters_on_the_emulator_are_exact() {
    let Some(store) = affinity_bigtable::emulator::test_store() else {
        return;
    };
    let now = real_now();
    let engine = engine(store, now, Schema::Wide);
    let values: Vec<_> = (0..120)
        .map(|i| {
            event_json(
                (i % 3) as u8,
                (i % 4) as u8,
                now - 1000 - (i % 30) * 1000,
                &[(i % 5) as u8],
                false,
            )
        })
        .collect();
    let events = parse_all(&values, now);
    std::thread::scope(|s| {
        for t in 0..3 {
            let (engine, events) = (&engine, &events);
            s.spawn(move || {
                for chunk in events.chunks(9 + t * 5) {
                    engine.ingest("app1", chunk).unwrap();
                }
            });
        }
    });
    assert_eq!(
        streaming_profiles(&engine, "app1", &users()),
        reference_profiles("app1", &events, now, 90 * DAY)
    );
}

#[test]
fn catalog_loads_from_json_lines_and_names_the_bad_line() {
    let now = real_now();
    let engine = engine(
        Arc::new(affinity_model::MemoryStore::new()),
        now,
        Schema::Narrow,
    );
    let input = "{\"objectID\":\"x1\",\"brand\":\"Acme\"}\n\n{\"objectID\":\"x2\",\"brand\":[\"Acme\",\"Bolt\"]}\n";
    assert_eq!(
        engine
            .load_catalog("app1", "shop", input.as_bytes())
            .unwrap(),
        2
    );
    let catalog = engine.catalog("app1", "shop").unwrap();
    assert_eq!(
        catalog.resolve(&["x1", "x2"]).counts.get("brand", "Acme"),
        2
    );
    let err = engine
        .load_catalog(
            "app1",
            "shop",
            "{\"objectID\":\"x3\"}\n{\"brand\":1}\n".as_bytes(),
        )
        .unwrap_err();
    assert!(err.to_string().starts_with("line 2: "), "{err}");
    // Nothing of the bad file was stored.
    engine.forget_catalogs();
    assert!(engine.catalog("app1", "shop").unwrap().get("x3").is_none());
    // Another index of the app is separate.
    assert!(engine.catalog("app1", "other").unwrap().is_empty());
}
