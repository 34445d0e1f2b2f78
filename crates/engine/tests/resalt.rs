//! `migrate salt`: an application's salt buckets changed while it holds
//! events and while another engine (a server) ingests, reads and exports:
//! profiles and exports equal the naive reference at every step.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use affinity_engine::{AppConfig, Engine, Error, Event, Progress, SaltPhase, Schema, SALT_SETTLE};
use affinity_model::{ReadRowsRequest, Store};
use affinity_rowkey::salt::{SaltScope, Salter};
use common::*;

const APP: &str = "app1";
const USERS: usize = 20;

fn user_list() -> Vec<String> {
    (0..USERS).map(|u| format!("user-{u}")).collect()
}

/// Events `from..to` of one fixed sequence (20 users, 50 minutes apart).
fn events(now: i64, from: usize, to: usize) -> Vec<Event> {
    let values: Vec<_> = (from..to)
        .map(|i| {
            let mut v = event_json(
                i as u8,
                0,
                now - (i as i64 % 500) * 3_000_000 - i as i64,
                &[i as u8, (i / 3) as u8],
                i % 3 == 0,
            );
            v["userToken"] = format!("user-{}", (i * 7) % USERS).into();
            v
        })
        .collect();
    parse_all(&values, now)
}

/// Profiles read and exported by `engine` equal the reference of `stored`.
fn check(engine: &Engine, stored: &[Event], now: i64) {
    let expected = reference_profiles(APP, stored, now, 30 * DAY);
    assert_eq!(streaming_profiles(engine, APP, &user_list()), expected);
    assert_eq!(exported_profiles(engine, APP), json_texts(&expected));
}

/// Every events row of the application is at its key under `buckets`
/// buckets, one row per distinct event.
fn check_layout(engine: &Engine, buckets: u32, stored: &[Event]) {
    let salter = Salter::new(buckets)
        .unwrap()
        .with_scope(SaltScope::Components {
            separator: b',',
            count: 2,
        });
    let app = engine.app(APP).unwrap();
    let mut keys = Vec::new();
    for row in app.events.read_rows(&ReadRowsRequest::all()).unwrap() {
        let row = row.unwrap();
        let logical = salter
            .unsalt(&row.key)
            .unwrap_or_else(|e| panic!("{:?} left in another layout: {e}", row.key));
        keys.push(logical.to_vec());
    }
    let mut distinct: Vec<String> = listed(APP, stored).into_iter().map(|l| l.id).collect();
    distinct.sort();
    distinct.dedup();
    assert_eq!(keys.len(), distinct.len());
}

/// Migrate to `buckets` on `migrator` while `server` ingests in chunks and
/// checks every profile and export after each.
fn migrate_while_serving(
    migrator: &Arc<Engine>,
    server: &Engine,
    buckets: u32,
    stored: &mut Vec<Event>,
    now: i64,
) {
    let job = {
        let migrator = Arc::clone(migrator);
        std::thread::spawn(move || {
            migrator
                .migrate_salt(APP, buckets, SALT_SETTLE, &Progress::default())
                .unwrap()
        })
    };
    let mut phases = BTreeMap::new();
    while !job.is_finished() {
        let next = events(now, stored.len(), stored.len() + 40);
        server.ingest(APP, &next).unwrap();
        stored.extend(next);
        check(server, stored, now);
        if let Some(m) = migrator.stored_settings(APP).unwrap().unwrap().salt_move {
            if phases.is_empty() {
                // A user deleted during the migration stays deleted.
                let user = format!("user-{buckets}");
                server.delete_user(APP, &user).unwrap();
                stored.retain(|e| e.identity() != user);
                check(server, stored, now);
            }
            *phases.entry(m.phase.as_str()).or_insert(0) += 1;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let report = job.join().unwrap();
    assert_eq!(report.to, buckets);
    for phase in [SaltPhase::Dual, SaltPhase::Cut, SaltPhase::Clean] {
        assert!(phases.contains_key(phase.as_str()), "{phases:?}");
    }
    let settings = server.stored_settings(APP).unwrap().unwrap();
    assert_eq!(
        (settings.salt_buckets, settings.salt_move),
        (Some(buckets), None)
    );
}

fn one_to_eight_to_three(store: Arc<dyn Store>, now: i64) {
    let clock = FakeClock::new(now);
    let migrator = Arc::new(Engine::with_clock(Arc::clone(&store), clock.engine_clock()).unwrap());
    let server = Engine::with_clock(store, clock.engine_clock()).unwrap();
    let config = AppConfig {
        schema: Schema::Narrow,
        retention_days: 30,
    };
    server.configure_salted_app(APP, config, 1).unwrap();
    server
        .put_objects(APP, "products", &catalog_objects())
        .unwrap();
    server.set_strategy(APP, &strategy()).unwrap();
    let mut stored = events(now, 0, 200);
    server.ingest(APP, &stored).unwrap();
    check(&server, &stored, now);

    migrate_while_serving(&migrator, &server, 8, &mut stored, now);
    // The server picks the end up within the settings refresh.
    std::thread::sleep(SALT_SETTLE);
    check(&server, &stored, now);
    check_layout(&server, 8, &stored);

    // Ingest between the migrations, a retry among it.
    let between = events(now, stored.len(), stored.len() + 60);
    server.ingest(APP, &between).unwrap();
    server.ingest(APP, &between[..10]).unwrap();
    stored.extend(between);
    check(&server, &stored, now);

    migrate_while_serving(&migrator, &server, 3, &mut stored, now);
    std::thread::sleep(SALT_SETTLE);
    check(&server, &stored, now);
    check(&migrator, &stored, now);
    check_layout(&server, 3, &stored);
}

#[test]
fn one_to_eight_to_three_on_the_memory_store() {
    let now = 1_700_000_000_000;
    one_to_eight_to_three(FakeClock::new(now).memory_store(), now);
}

#[test]
fn one_to_eight_to_three_on_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(affinity_embedded::EmbeddedStore::open(dir.path()).unwrap());
    one_to_eight_to_three(store, real_now());
}

#[ignore = "needs the Cloud Bigtable emulator (scripts/test runs it)"]
#[test]
fn one_to_eight_to_three_on_the_emulator() {
    one_to_eight_to_three(affinity_bigtable::emulator::test_store(), real_now());
}

#[test]
fn from_unsalted_in_one_engine() {
    // An unsalted application moved to 4 buckets with no wait (one
    // engine); a second run with the same count is refused.
    let now = 1_700_000_000_000;
    let clock = FakeClock::new(now);
    let engine = Engine::with_clock(clock.memory_store(), clock.engine_clock()).unwrap();
    engine
        .configure_app(
            APP,
            AppConfig {
                schema: Schema::Wide,
                retention_days: 30,
            },
        )
        .unwrap();
    engine
        .put_objects(APP, "products", &catalog_objects())
        .unwrap();
    engine.set_strategy(APP, &strategy()).unwrap();
    let stored = events(now, 0, 300);
    engine.ingest(APP, &stored).unwrap();
    let report = engine
        .migrate_salt(APP, 4, Duration::ZERO, &Progress::default())
        .unwrap();
    assert_eq!((report.from, report.to), (None, 4));
    assert_eq!(report.copied, report.deleted);
    assert!(report.copied > 0);
    check(&engine, &stored, now);
    check_layout(&engine, 4, &stored);
    assert!(engine
        .migrate_salt(APP, 4, Duration::ZERO, &Progress::default())
        .is_err());
}

#[test]
fn bad_input_changes_nothing() {
    let now = 1_700_000_000_000;
    let clock = FakeClock::new(now);
    let engine = Arc::new(Engine::with_clock(clock.memory_store(), clock.engine_clock()).unwrap());
    let config = AppConfig {
        schema: Schema::Narrow,
        retention_days: 30,
    };
    engine.configure_salted_app(APP, config, 2).unwrap();
    engine.set_strategy(APP, &strategy()).unwrap();
    engine.ingest(APP, &events(now, 0, 50)).unwrap();
    let before = engine.stored_settings(APP).unwrap();
    let refuse = |app: &str, buckets: u32, says: &str| {
        let err = engine
            .migrate_salt(app, buckets, Duration::ZERO, &Progress::default())
            .unwrap_err();
        assert!(err.to_string().contains(says), "{err}");
        assert_eq!(engine.stored_settings(APP).unwrap(), before);
    };
    refuse(APP, 0, "0 is not between 1 and 256");
    refuse(APP, 257, "257 is not between 1 and 256");
    refuse(APP, 2, "already salted over 2 buckets");
    refuse("nosuchapp", 4, "nosuchapp");
    assert!(engine.stored_settings("nosuchapp").unwrap().is_none());
    assert!(matches!(
        engine.migrate_salt("nosuchapp", 4, Duration::ZERO, &Progress::default()),
        Err(Error::UnknownApp { .. })
    ));
    refuse("bad app!", 4, "bad app!");

    // A schema migration under way refuses a salt migration, and the
    // other way round.
    engine.start_migration(APP, Schema::Wide).unwrap();
    let dual = engine.stored_settings(APP).unwrap();
    let err = engine
        .migrate_salt(APP, 4, Duration::ZERO, &Progress::default())
        .unwrap_err();
    assert!(
        err.to_string().contains("migrating to the wide schema"),
        "{err}"
    );
    assert_eq!(engine.stored_settings(APP).unwrap(), dual);
    engine.backfill(APP, &Progress::default(), None).unwrap();
    engine.cut_over(APP).unwrap();

    // A salt migration under way (held in its first wait) refuses another
    // bucket count and a schema migration.
    let job = {
        let engine = Arc::clone(&engine);
        std::thread::spawn(move || {
            engine
                .migrate_salt(APP, 5, Duration::from_secs(2), &Progress::default())
                .unwrap()
        })
    };
    let moving = loop {
        let s = engine.stored_settings(APP).unwrap().unwrap();
        if s.salt_move.is_some() {
            break s;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let err = engine
        .migrate_salt(APP, 6, Duration::ZERO, &Progress::default())
        .unwrap_err();
    assert!(
        err.to_string().contains("already moving to 5 salt buckets"),
        "{err}"
    );
    let err = engine.start_migration(APP, Schema::Narrow).unwrap_err();
    assert!(
        err.to_string().contains("moving to 5 salt buckets"),
        "{err}"
    );
    let now_stored = engine.stored_settings(APP).unwrap().unwrap();
    assert_eq!(now_stored.salt_move, moving.salt_move);
    assert_eq!(now_stored.dual_write, None);
    assert_eq!(job.join().unwrap().to, 5);
}
