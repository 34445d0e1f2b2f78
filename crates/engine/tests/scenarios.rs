//! End-to-end scenarios on the in-memory store with a fake clock.

mod common;

use std::sync::Arc;

use affinity_engine::{AppConfig, Engine, ExportOptions, Progress, RebuildOptions, Schema};
use common::*;
use serde_json::json;

fn setup(schema: Schema, retention_days: u32, now: i64) -> (FakeClock, Engine) {
    let clock = FakeClock::new(now);
    let engine = Engine::with_clock(clock.memory_store(), clock.engine_clock()).unwrap();
    engine
        .configure_app(
            "app1",
            AppConfig {
                schema,
                retention_days,
            },
        )
        .unwrap();
    engine
        .put_objects("app1", "products", &catalog_objects())
        .unwrap();
    engine.set_strategy("app1", &strategy()).unwrap();
    (clock, engine)
}

#[test]
fn same_millisecond_events_both_count_and_retries_do_not() {
    let now = 1_700_000_000_000;
    for schema in [Schema::Narrow, Schema::Wide] {
        let (_clock, engine) = setup(schema, 90, now);
        let values = vec![
            event_json(0, 1, now - 10, &[0], false),
            event_json(0, 1, now - 10, &[2], false),
            event_json(0, 1, now - 10, &[0], false), // identical: counts once
        ];
        let events = parse_all(&values, now);
        let report = engine.ingest("app1", &events).unwrap();
        assert_eq!((report.stored, report.duplicates), (2, 1));
        // The retry stores the two events again (blind writes); reads
        // count each once.
        let retry = engine.ingest("app1", &events).unwrap();
        assert_eq!((retry.stored, retry.duplicates), (2, 1));
        let expected = reference_profiles("app1", &events, now, 90 * DAY);
        assert_eq!(streaming_profiles(&engine, "app1", &users()), expected);
        let p = &expected["user-1"];
        assert_eq!(p.scores["brand"]["Apple"], 20);
        assert_eq!(p.scores["color"]["Black"], 1);
        assert_eq!(exported_profiles(&engine, "app1"), json_texts(&expected));
    }
}

#[test]
fn objects_resolve_through_the_catalog_and_unknown_ones_are_counted() {
    let now = 1_700_000_000_000;
    let (_clock, engine) = setup(Schema::Wide, 90, now);
    let events = parse_all(&[event_json(2, 0, now - 5, &[1, 3, 5], true)], now);
    let report = engine.ingest("app1", &events).unwrap();
    assert_eq!(report.unknown_objects, 1);
    let p = engine.profile("app1", "user-0").unwrap().unwrap();
    assert_eq!(p.scores["brand"]["Apple"], 20);
    assert_eq!(p.scores["brand"]["Apple, Inc"], 20);
    assert_eq!(p.scores["color"]["\"Red\""], 1);
    assert_eq!(p.to_json()["userToken"], "user-0");
}

#[test]
fn expired_events_stop_counting_to_the_millisecond() {
    let now = 1_700_000_000_000;
    for schema in [Schema::Narrow, Schema::Wide] {
        let (clock, engine) = setup(schema, 3, now);
        let values: Vec<_> = (0..40)
            .map(|i| event_json(i as u8, 1, now - i * 6_400_000 - 13, &[i as u8, 2], false))
            .collect();
        let events = parse_all(&values, now);
        engine.ingest("app1", &events).unwrap();
        for advance in [
            0,
            3_600_000,
            DAY / 2 + 17,
            DAY + 1,
            2 * DAY + 5,
            3 * DAY,
            4 * DAY,
        ] {
            clock.set(now + advance);
            let expected = reference_profiles("app1", &events, now + advance, 3 * DAY);
            assert_eq!(
                streaming_profiles(&engine, "app1", &users()),
                expected,
                "{schema:?} +{advance}"
            );
            assert_eq!(
                exported_profiles(&engine, "app1"),
                json_texts(&expected),
                "{schema:?} +{advance}"
            );
        }
        clock.set(now);
    }
}

#[test]
fn old_events_are_refused_and_change_nothing() {
    let now = 1_700_000_000_000;
    let (_clock, engine) = setup(Schema::Narrow, 3, now);
    let events = parse_all(
        &[
            event_json(0, 1, now - 1, &[0], false),
            event_json(0, 1, now - 4 * DAY, &[0], false),
        ],
        now,
    );
    let err = engine.ingest("app1", &events).unwrap_err();
    assert_eq!(err.field(), Some("timestamp"));
    assert_eq!(engine.user_row_count("app1", "user-1").unwrap(), 0);
}

#[test]
fn concurrent_ingesters_lose_nothing_and_double_count_nothing() {
    let now = 1_700_000_000_000;
    for schema in [Schema::Narrow, Schema::Wide] {
        let (_clock, engine) = setup(schema, 90, now);
        let engine = Arc::new(engine);
        let values: Vec<_> = (0..200)
            .map(|i| {
                event_json(
                    (i % 3) as u8,
                    (i % 4) as u8,
                    now - i * 1000,
                    &[(i % 5) as u8, (i % 7) as u8],
                    false,
                )
            })
            .collect();
        let events = parse_all(&values, now);
        std::thread::scope(|s| {
            for t in 0..4 {
                let (engine, events) = (&engine, &events);
                s.spawn(move || {
                    // Every thread sends every event, in its own batches.
                    for chunk in events.chunks(7 + t * 3) {
                        engine.ingest("app1", chunk).unwrap();
                    }
                });
            }
        });
        let expected = reference_profiles("app1", &events, now, 90 * DAY);
        assert_eq!(
            streaming_profiles(&engine, "app1", &users()),
            expected,
            "{schema:?}"
        );
    }
}

#[test]
fn deleting_a_user_removes_events_and_profile() {
    let now = 1_700_000_000_000;
    let (_clock, engine) = setup(Schema::Wide, 90, now);
    let values: Vec<_> = (0..30)
        .map(|i| event_json(i as u8, (i % 2) as u8, now - i * 1000, &[0, 2], false))
        .collect();
    let events = parse_all(&values, now);
    engine.ingest("app1", &events).unwrap();
    assert!(exported_profiles(&engine, "app1").contains_key("user-1"));
    assert!(engine.user_row_count("app1", "user-1").unwrap() > 0);
    let deleted = engine.delete_user("app1", "user-1").unwrap();
    assert_eq!(deleted.event_rows, 15);
    assert_eq!(engine.user_row_count("app1", "user-1").unwrap(), 0);
    assert_eq!(engine.profile("app1", "user-1").unwrap(), None);
    let exported = exported_profiles(&engine, "app1");
    assert!(!exported.contains_key("user-1"));
    assert!(exported.contains_key("user-0"));
    assert!(engine.profile("app1", "user-0").unwrap().is_some());
}

#[test]
fn strategies_are_versioned() {
    let now = 1_700_000_000_000;
    let (_clock, engine) = setup(Schema::Narrow, 90, now);
    let mut second = strategy();
    second.personalization_impact = 10;
    let v2 = engine.set_strategy("app1", &second).unwrap();
    let history = engine.strategy_history("app1", 10).unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0], (second, v2));
    assert_eq!(history[1].0, strategy());
    assert!(history[1].1 < v2);
    assert!(engine.set_strategy("bad app", &strategy()).is_err());
}

#[test]
fn ingest_json_lines_names_the_bad_line() {
    let now = 1_700_000_000_000;
    let (_clock, engine) = setup(Schema::Narrow, 90, now);
    let good = event_json(0, 0, now - 1, &[0], false).to_string();
    let bad = json!({"eventType":"buy"}).to_string();
    let input = format!("{good}\n\n{bad}\n");
    let limits = engine.retention_limits("app1").unwrap();
    let err = engine
        .ingest_json_lines("app1", input.as_bytes(), &limits)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "line 3: EventType must be one of view, click, conversion"
    );
    assert_eq!(err.field(), Some("eventType"));
    let report = engine
        .ingest_json_lines("app1", good.as_bytes(), &limits)
        .unwrap();
    assert_eq!(report.stored, 1);
}

#[test]
fn shards_cover_the_application_once_and_progress_counts_it() {
    let now = 1_700_000_000_000;
    let (_clock, engine) = setup(Schema::Wide, 90, now);
    let values: Vec<_> = (0..400)
        .map(|i| {
            event_json(
                i as u8,
                (i % 4) as u8,
                now - i * 60_000,
                &[i as u8, 2],
                false,
            )
        })
        .collect();
    let events = parse_all(&values, now);
    // More users than the 4 of the helpers, so the split has ranges.
    let mut many = Vec::new();
    for u in 0..60 {
        let mut v = event_json(0, 0, now - u * 1000, &[0], false);
        v["userToken"] = json!(format!("bulk-{u}"));
        many.push(v);
    }
    engine.ingest("app1", &events).unwrap();
    engine.ingest("app1", &parse_all(&many, now)).unwrap();
    let mut total = 0;
    let mut ranges = 0;
    let mut all = std::collections::BTreeMap::new();
    for i in 0..3 {
        let progress = Progress::default();
        let options = ExportOptions {
            threads: 2,
            shard: Some((i, 3)),
        };
        let out = std::sync::Mutex::new(Vec::new());
        let sink = |user: &str, json: &[u8]| -> std::io::Result<()> {
            out.lock().unwrap().push((user.to_string(), json.to_vec()));
            Ok(())
        };
        let report = engine
            .export("app1", options, None, &sink, &progress)
            .unwrap();
        let snap = progress.snapshot();
        assert_eq!(snap.events, report.events);
        assert_eq!(snap.ranges_done, snap.ranges_total);
        assert_eq!(snap.eta, Some(std::time::Duration::ZERO));
        let out = out.into_inner().unwrap();
        assert_eq!(report.profiles, out.len() as u64);
        for (user, json) in out {
            // No user in two shards, nor twice in one.
            assert!(all.insert(user, String::from_utf8(json).unwrap()).is_none());
        }
        total += report.events;
        ranges += report.ranges;
    }
    // The split has more ranges than shards (each shard reports its own).
    assert!(ranges > 3, "{ranges} ranges");
    // The wide reader sees only scoring events (the store filters the rest).
    let weights = strategy().weights();
    let everything = parse_all(&many, now)
        .into_iter()
        .chain(events.iter().cloned())
        .collect::<Vec<_>>();
    let scoring = listed("app1", &everything)
        .iter()
        .filter(|e| e.event.is_scoring(&weights))
        .map(|e| e.id.clone())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    assert_eq!(total, scoring as u64);
    assert_eq!(all.len(), 64);
    assert_eq!(
        all,
        json_texts(&reference_profiles("app1", &everything, now, 90 * DAY))
    );
    let drop = |_: &str, _: &[u8]| -> std::io::Result<()> { Ok(()) };
    let options = ExportOptions {
        threads: 1,
        shard: Some((3, 3)),
    };
    assert!(engine
        .export("app1", options, None, &drop, &Progress::default())
        .is_err());
}

#[test]
fn profile_json_is_the_api_shape() {
    let now = 1_716_254_135_000; // 2024-05-21T01:15:35Z
    let (_clock, engine) = setup(Schema::Narrow, 90, now);
    let events = parse_all(&[event_json(0, 1, now, &[0, 0, 1], false)], now);
    engine.ingest("app1", &events).unwrap();
    let p = engine.profile("app1", "user-1").unwrap().unwrap();
    assert_eq!(
        p.to_json(),
        json!({"userToken":"user-1","lastEventAt":"2024-05-21T01:15:35Z",
               "scores":{"brand":{"Apple":20,"Sam,sung":10}}})
    );
    // What profile reads answer: the same profile's JSON, as serde writes it.
    let strategy = engine.strategy("app1").unwrap().unwrap();
    let written = engine
        .profile_json_with("app1", "user-1", &strategy)
        .unwrap()
        .unwrap();
    assert_eq!(written, serde_json::to_vec(&p).unwrap());
    assert!(engine
        .profile_json_with("app1", "nobody", &strategy)
        .unwrap()
        .is_none());
}

#[test]
fn a_salted_app_spreads_users_and_deletes_them_whole() {
    let now = 1_700_000_000_000;
    let clock = FakeClock::new(now);
    let engine = Engine::with_clock(clock.memory_store(), clock.engine_clock()).unwrap();
    let config = AppConfig {
        schema: Schema::Narrow,
        ..AppConfig::default()
    };
    engine.configure_salted_app("hot", config, 16).unwrap();
    engine.set_strategy("hot", &strategy()).unwrap();
    let values: Vec<_> = (0..80)
        .map(|i| event_json(i as u8, (i % 4) as u8, now - i * 1000, &[i as u8, 2], false))
        .collect();
    let events = parse_all(&values, now);
    engine.ingest("hot", &events).unwrap();
    // Physical keys carry a two-digit salt; one user's rows share it.
    let app = engine.app("hot").unwrap();
    let rows: Vec<_> = app
        .events
        .read_rows(&affinity_model::ReadRowsRequest::all())
        .unwrap()
        .map(|r| r.unwrap().key)
        .collect();
    assert_eq!(rows.len(), 80);
    let mut salts = std::collections::BTreeMap::new();
    for key in &rows {
        let text = std::str::from_utf8(key).unwrap();
        assert!(text[2..].starts_with("hot,user-"), "{text}");
        let user = text[2..].split(',').nth(1).unwrap().to_string();
        let salt = text[..2].to_string();
        assert_eq!(salts.entry(user).or_insert_with(|| salt.clone()), &salt);
    }
    assert!(
        salts
            .values()
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            > 1
    );
    let expected = reference_profiles("hot", &events, now, 90 * DAY);
    assert_eq!(streaming_profiles(&engine, "hot", &users()), expected);
    assert_eq!(exported_profiles(&engine, "hot"), json_texts(&expected));
    assert_eq!(engine.delete_user("hot", "user-2").unwrap().event_rows, 20);
    assert_eq!(engine.user_row_count("hot", "user-2").unwrap(), 0);
    assert!(engine.profile("hot", "user-1").unwrap().is_some());
    // The bucket count cannot change under existing keys.
    assert!(engine.configure_salted_app("hot", config, 8).is_err());
    // Another retention would need tables of its own: refused, it holds
    // events on the shared tables.
    let other = AppConfig {
        retention_days: 60,
        ..config
    };
    assert!(matches!(
        engine.configure_app("hot", other),
        Err(affinity_engine::Error::LayoutChange { .. })
    ));
    // A plain reconfiguration keeps the salting.
    let app = engine.configure_app("hot", config).unwrap();
    assert_eq!(app.salt_buckets, Some(16));
    assert_eq!(
        streaming_profiles(&engine, "hot", &users()).len(),
        expected.len() - 1
    );
}

#[test]
fn progress_is_reported_while_and_after_an_export() {
    let now = 1_700_000_000_000;
    let (_clock, engine) = setup(Schema::Wide, 90, now);
    let events = parse_all(
        &(0..50)
            .map(|i| event_json(0, (i % 4) as u8, now - i, &[0], false))
            .collect::<Vec<_>>(),
        now,
    );
    engine.ingest("app1", &events).unwrap();
    let progress = Progress::default();
    let finished = std::sync::atomic::AtomicBool::new(false);
    let slow = |_: &str, _: &[u8]| -> std::io::Result<()> {
        std::thread::sleep(std::time::Duration::from_millis(2));
        Ok(())
    };
    let (report, seen) = std::thread::scope(|s| {
        // A watcher reads the counters while the export runs.
        let watcher = s.spawn(|| {
            let mut seen = Vec::new();
            while !finished.load(std::sync::atomic::Ordering::Acquire) {
                seen.push(progress.snapshot());
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            seen
        });
        let report = engine.export("app1", ExportOptions::default(), None, &slow, &progress);
        finished.store(true, std::sync::atomic::Ordering::Release);
        (report.unwrap(), watcher.join().unwrap())
    });
    assert!(!seen.is_empty());
    assert!(seen.windows(2).all(|w| w[0].users <= w[1].users));
    let last = progress.snapshot();
    assert_eq!((last.events, last.users), (50, 4));
    assert_eq!((report.events, report.profiles), (50, 4));
    assert_eq!(last.ranges_done, last.ranges_total);
    assert!(report.strategy_version.is_some());
}

/// Users come in events-key order (`token,`), which is not the order of
/// the bare tokens: `u+1,` sorts before `u,` while `u` sorts before `u+1`.
/// Every user still gets their profile exported, and rebuilt, on both
/// stores (code walking users in order must not assume the two agree).
#[test]
fn tokens_that_sort_differently_with_the_separator_all_get_profiles() {
    // The embedded store collects garbage by the real clock.
    let now = real_now();
    let tokens = [
        "u", "u+", "u++", "u+1", "u+1+", "u-", "u-1", "u1", "u=", "u/", "v", "+", "++", "A+",
    ];
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::new(now);
    let embedded: Arc<dyn affinity_model::Store> =
        Arc::new(affinity_embedded::EmbeddedStore::open(dir.path()).unwrap());
    for (store, schema) in [
        (clock.memory_store(), Schema::Narrow),
        (clock.memory_store(), Schema::Wide),
        (embedded.clone(), Schema::Narrow),
        (embedded, Schema::Wide),
    ] {
        let engine = Engine::with_clock(store, clock.engine_clock()).unwrap();
        let app = format!("app-{}", schema.as_str());
        engine
            .configure_app(
                &app,
                AppConfig {
                    schema,
                    retention_days: 90,
                },
            )
            .unwrap();
        engine
            .put_objects(&app, "products", &catalog_objects())
            .unwrap();
        engine.set_strategy(&app, &strategy()).unwrap();
        let values: Vec<_> = tokens
            .iter()
            .enumerate()
            .map(|(i, token)| {
                let mut v = event_json(0, 0, now - i as i64 * 1000, &[i as u8, 2], false);
                v["userToken"] = json!(token);
                v
            })
            .collect();
        let events = parse_all(&values, now);
        engine.ingest(&app, &events).unwrap();
        let (export, report) = exported(&engine, &app, ExportOptions::default(), None);
        assert_eq!(report.profiles, tokens.len() as u64);
        let expected = reference_profiles(&app, &events, now, 90 * DAY);
        assert_eq!(export, json_texts(&expected), "{schema:?}");
        // A rebuild groups events by user in the same order: a lost
        // table comes back whole.
        lose_profiles_table(&engine, &app);
        let rebuilt = engine
            .rebuild(&app, RebuildOptions::default(), &Progress::default())
            .unwrap();
        assert_eq!(rebuilt.restored, tokens.len() as u64);
        let users: Vec<String> = tokens.iter().map(|t| t.to_string()).collect();
        assert_eq!(
            streaming_profiles(&engine, &app, &users),
            expected,
            "{schema:?}"
        );
    }
}
