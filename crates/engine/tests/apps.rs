//! Many applications on one store: 10,000 applications created on the
//! shared tables, events ingested into a sample, profiles read, one
//! application deleted with every other's rows untouched (row counts by
//! prefix); which applications get tables of their own; settings stored
//! before tables were shared still open their own tables.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use affinity_engine::{AppConfig, Engine, Error, Tables, SHARED_TABLES};
use affinity_model::{Mutation, ReadRowsRequest, RowFilter, Store};
use common::*;

/// Rows per application id in each shared table (the id is the physical
/// key up to the first `#`).
fn rows_by_app(store: &dyn Store) -> BTreeMap<(String, String), usize> {
    let mut counts = BTreeMap::new();
    for table in SHARED_TABLES {
        let t = store.open_table(table).unwrap();
        let request = ReadRowsRequest::all().with_filter(RowFilter::StripValue);
        for row in t.read_rows(&request).unwrap() {
            let row = row.unwrap();
            let end = row
                .key
                .iter()
                .position(|&b| b == b'#')
                .expect("prefixed key");
            let app = String::from_utf8(row.key[..end].to_vec()).unwrap();
            *counts.entry((table.to_string(), app)).or_insert(0) += 1;
        }
    }
    counts
}

fn many_apps(store: Arc<dyn Store>, count: usize, clock: &FakeClock) {
    let engine = Engine::with_clock(Arc::clone(&store), clock.engine_clock()).unwrap();
    // Ids that are prefixes of one another sit next to each other.
    let mut ids: Vec<String> = (0..count - 3).map(|i| format!("app{i}")).collect();
    ids.extend(["shop", "shop2", "shop-"].map(String::from));
    let started = Instant::now();
    for id in &ids {
        assert_eq!(engine.app(id).unwrap().tables, Tables::Shared);
    }
    eprintln!("{count} applications created in {:?}", started.elapsed());
    assert_eq!(
        store.list_tables().unwrap(),
        ["apps", "catalog", "events", "jobs", "keys", "profiles", "trends"]
    );

    let now = clock.now();
    let events = parse_all(
        &(0..12)
            .map(|i| {
                event_json(
                    i,
                    i % 3,
                    now - 60_000 - i64::from(i) * 1000,
                    &[i, i + 1],
                    i % 2 == 0,
                )
            })
            .collect::<Vec<_>>(),
        now,
    );
    let sample: Vec<&String> = ids
        .iter()
        .step_by(count / 20)
        .chain(&ids[count - 3..])
        .collect();
    for app in &sample {
        engine
            .put_objects(app, "products", &catalog_objects())
            .unwrap();
        engine.set_strategy(app, &strategy()).unwrap();
        engine.ingest(app, &events).unwrap();
    }
    let expected = reference_profiles("x", &events, now, 90 * DAY);
    for app in &sample {
        assert_eq!(
            streaming_profiles(&engine, app, &users()),
            expected,
            "{app}"
        );
    }
    let before = rows_by_app(store.as_ref());
    for app in &sample {
        for table in ["events", "profiles"] {
            assert!(
                before.contains_key(&(table.to_string(), app.to_string())),
                "{app} {table}"
            );
        }
    }

    // Delete `shop`: its rows go, `shop2`'s and `shop-`'s (and every
    // other's) stay, row for row, and so do their catalogs and profiles.
    engine.delete_app("shop").unwrap();
    let after = rows_by_app(store.as_ref());
    let mut expected_rows = before.clone();
    expected_rows.retain(|(_, app), _| app != "shop");
    assert_eq!(after, expected_rows);
    assert!(engine.stored_settings("shop").unwrap().is_none());
    assert!(engine.strategy("shop").unwrap().is_none());
    for app in ["shop2", "shop-"] {
        assert_eq!(
            streaming_profiles(&engine, app, &users()),
            expected,
            "{app}"
        );
        assert_eq!(
            engine.catalog(app, "products").unwrap().len(),
            catalog_objects().len()
        );
    }
    assert!(matches!(
        engine.delete_app("shop"),
        Err(Error::UnknownApp { .. })
    ));
    // Used again, `shop` starts empty.
    assert!(streaming_profiles(&engine, "shop", &users()).is_empty());
    assert_eq!(engine.catalog("shop", "products").unwrap().len(), 0);
}

#[test]
fn ten_thousand_apps_on_the_memory_store() {
    let clock = FakeClock::new(1_700_000_000_000);
    many_apps(clock.memory_store(), 10_000, &clock);
}

#[test]
fn ten_thousand_apps_on_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(affinity_embedded::EmbeddedStore::open(dir.path()).unwrap());
    many_apps(store, 10_000, &FakeClock::new(real_now()));
}

#[ignore = "needs the Cloud Bigtable emulator (scripts/test runs it)"]
#[test]
fn many_apps_on_the_emulator() {
    // Each application is one settings write plus two point reads (2,000
    // took 4 s here).
    let store = affinity_bigtable::emulator::test_store();
    many_apps(store, 10_000, &FakeClock::new(real_now()));
}

#[test]
fn which_applications_get_tables_of_their_own() {
    let clock = FakeClock::new(1_700_000_000_000);
    let store = clock.memory_store();
    let engine = Engine::with_clock(Arc::clone(&store), clock.engine_clock()).unwrap();
    let config = |retention_days| AppConfig {
        retention_days,
        ..AppConfig::default()
    };
    // New: shared with the shared retention, dedicated with another.
    assert_eq!(
        engine.configure_app("a", config(90)).unwrap().tables,
        Tables::Shared
    );
    assert_eq!(
        engine.configure_app("b", config(30)).unwrap().tables,
        Tables::Dedicated
    );
    assert_eq!(engine.isolate_app("c").unwrap().tables, Tables::Dedicated);
    let tables = store.list_tables().unwrap();
    for t in ["events.b", "profiles.b", "trends.b", "events.c"] {
        assert!(tables.contains(&t.to_string()), "{t} in {tables:?}");
    }
    assert!(!tables.contains(&"events.a".to_string()));

    // A shared application without events moves (its rows in the shared
    // tables dropped); one holding events is refused and keeps its tables.
    let a = engine.app("a").unwrap();
    a.profiles
        .mutate_row(
            b"~job,x",
            &[Mutation::set_cell("b", "state", 0, "left over")],
        )
        .unwrap();
    assert_eq!(
        engine.configure_app("a", config(7)).unwrap().tables,
        Tables::Dedicated
    );
    assert_eq!(rows_by_app(store.as_ref()).len(), 0);
    engine.configure_app("d", config(90)).unwrap();
    engine
        .put_objects("d", "products", &catalog_objects())
        .unwrap();
    let now = clock.now();
    engine
        .ingest(
            "d",
            &parse_all(&[event_json(0, 0, now - 1000, &[1], true)], now),
        )
        .unwrap();
    for refused in [
        engine.configure_app("d", config(7)).err(),
        engine.isolate_app("d").err(),
    ] {
        assert!(
            matches!(refused, Some(Error::LayoutChange { .. })),
            "{refused:?}"
        );
    }
    assert!(engine.check_config("d", config(7)).is_err());
    let d = engine.stored_settings("d").unwrap().unwrap();
    assert_eq!((d.tables, d.config.retention_days), (Tables::Shared, 90));
    // A dedicated application stays so, whatever its retention.
    assert_eq!(
        engine.configure_app("b", config(90)).unwrap().tables,
        Tables::Dedicated
    );

    // Deleting a dedicated application deletes its tables.
    engine.delete_app("b").unwrap();
    assert!(!store
        .list_tables()
        .unwrap()
        .contains(&"events.b".to_string()));
}

#[test]
fn settings_stored_before_shared_tables_keep_their_own_tables() {
    let clock = FakeClock::new(1_700_000_000_000);
    let store = clock.memory_store();
    let engine = Engine::with_clock(Arc::clone(&store), clock.engine_clock()).unwrap();
    // The settings row as the previous release wrote it: no "tables".
    let json = r#"{"schema":"narrow","retentionDays":90,"dualWrite":null,"saltBuckets":null}"#;
    store
        .open_table("apps")
        .unwrap()
        .mutate_row(b"old", &[Mutation::set_cell("c", "config", 0, json)])
        .unwrap();
    let old = engine.app("old").unwrap();
    assert_eq!(old.tables, Tables::Dedicated);
    assert_eq!(old.events.name(), "events.old");
    assert!(store
        .list_tables()
        .unwrap()
        .contains(&"events.old".to_string()));
    let now = clock.now();
    engine
        .put_objects("old", "products", &catalog_objects())
        .unwrap();
    engine.set_strategy("old", &strategy()).unwrap();
    let events = parse_all(&[event_json(0, 0, now - 1000, &[1], true)], now);
    engine.ingest("old", &events).unwrap();
    let rows = store
        .open_table("events.old")
        .unwrap()
        .read_rows(&ReadRowsRequest::all())
        .unwrap()
        .count();
    assert_eq!(rows, 1);
    assert_eq!(
        streaming_profiles(&engine, "old", &users()),
        reference_profiles("x", &events, now, 90 * DAY)
    );
}
