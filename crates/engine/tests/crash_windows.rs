//! The ingest protocol's crash windows and races, on the embedded store.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use affinity_embedded::EmbeddedStore;
use affinity_engine::state::{
    counter_qualifier, day_micros, state_row_key, EventId, COUNTERS_FAMILY, IDS_FAMILY,
};
use affinity_engine::{AppConfig, Engine, Schema};
use affinity_model::{Mutation, Store};
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
fn an_event_added_twice_is_corrected_at_read_time() {
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
        // A second ingester of events 0 and 3 (a racer, or a retry after
        // a crash that lost the acknowledgement) adds their state again,
        // event 3 twice more.
        let listed = listed("app1", &events);
        for (index, times) in [(0, 1), (3, 2)] {
            let e = &listed[index];
            let id = event_id(&e.id);
            let ts = day_micros(id.day());
            let mut counts: BTreeMap<String, i64> = BTreeMap::new();
            for (f, v, n) in e.event.counts.iter() {
                *counts
                    .entry(counter_qualifier(
                        e.event.event_type,
                        &e.event.event_name,
                        f,
                        v,
                    ))
                    .or_default() += i64::from(n);
            }
            let mut adds: Vec<_> = counts
                .into_iter()
                .map(|(q, n)| Mutation::add_to_cell(COUNTERS_FAMILY, q, ts, n))
                .collect();
            adds.push(Mutation::add_to_cell(
                IDS_FAMILY,
                id.qualifier().to_vec(),
                ts,
                1,
            ));
            let profiles = engine.app("app1").unwrap().profiles;
            for _ in 0..times {
                profiles
                    .mutate_row(state_row_key("user-1", id.day()).as_bytes(), &adds)
                    .unwrap();
            }
        }
        let expected = reference_profiles("app1", &events, now, 90 * DAY);
        assert_eq!(
            streaming_profiles(&engine, "app1", &users()),
            expected,
            "{schema:?}"
        );
        // A retry of the whole batch still changes nothing.
        let again = engine.ingest("app1", &events).unwrap();
        assert_eq!(again.stored, events.len());
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
    let events_table = engine.app("app1").unwrap().events;
    events_table
        .mutate_row(
            listed[0].id.as_bytes(),
            &Schema::Wide.mutations(&listed[0].event),
        )
        .unwrap();
    assert_eq!(engine.profile("app1", "user-2").unwrap(), None);
    let report = engine.ingest("app1", &events).unwrap();
    assert_eq!(report.stored, 1);
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
    // Three ingesters send the same events in differently sized batches:
    // every event is added three times, racing, and counts once.
    std::thread::scope(|s| {
        for t in 0..3 {
            let (engine, events) = (&engine, &events);
            s.spawn(move || {
                for chunk in events.chunks(5 + t * 4) {
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

#[ignore = "needs the Cloud Bigtable emulator (scripts/test runs it)"]
#[test]
fn concurrent_ingesters_on_the_emulator_are_exact() {
    let store = affinity_bigtable::emulator::test_store();
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
