//! Hot users (`hot.rs`): a listed user's day rows are spread over
//! sub-rows, every read, fold, rebuild and deletion finds them, and the
//! lists follow their rules (fixed at the cut-off, refused after it,
//! published by ingestion for a busy user).

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use affinity_engine::hot::{self, list_cutoff_millis, HotPolicy, MAX_SUB_ROWS};
use affinity_engine::state::EventId;
use affinity_engine::{AppConfig, Engine, MaintainOptions, Progress, RebuildOptions, Schema};
use affinity_model::{ReadRowsRequest, RowRange, RowSet, Store};
use affinity_rowkey::composite::{user_prefix, EventKey};
use common::*;

const APP: &str = "hot";

fn engine(store: Arc<dyn Store>, clock: &FakeClock, policy: HotPolicy) -> Engine {
    let engine = Engine::with_clock(store, clock.engine_clock())
        .unwrap()
        .with_hot_policy(policy);
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
    engine
}

/// The keys of a user's day rows (sub-rows included).
fn day_row_keys(engine: &Engine, user: &str) -> Vec<String> {
    let app = engine.app(APP).unwrap();
    app.profiles
        .read_rows(&ReadRowsRequest::new(RowSet::from_range(RowRange::prefix(
            format!("{user},0"),
        ))))
        .unwrap()
        .map(|r| String::from_utf8(r.unwrap().key.to_vec()).unwrap())
        .collect()
}

/// Every event of `user` in the events table: its id and its key's bucket.
fn event_buckets(engine: &Engine, user: &str) -> Vec<(EventId, Option<u32>)> {
    let app = engine.app(APP).unwrap();
    app.events
        .read_rows(&ReadRowsRequest::new(RowSet::from_range(
            user_prefix(APP, user).unwrap(),
        )))
        .unwrap()
        .map(|row| {
            let key = String::from_utf8(row.unwrap().key.to_vec()).unwrap();
            let parsed = EventKey::parse(&key).unwrap();
            let suffix = u64::from_str_radix(parsed.suffix.as_deref().unwrap(), 16).unwrap();
            let id = EventId {
                timestamp_millis: parsed.timestamp_millis,
                suffix,
            };
            (id, parsed.bucket)
        })
        .collect()
}

/// `n` events of `user` (0 to 3) at `ts`, spaced a second apart.
fn events(user: u8, ts: i64, n: usize) -> Vec<affinity_engine::Event> {
    let values: Vec<_> = (0..n)
        .map(|i| {
            event_json(
                i as u8,
                user,
                ts - i as i64 * 1000,
                &[i as u8, 2],
                i % 3 == 0,
            )
        })
        .collect();
    parse_all(&values, ts)
}

#[test]
fn a_listed_users_days_are_spread_and_read_exactly() {
    // 10:00 on a day; user-0 listed over 8 sub-rows tomorrow.
    let start = 1_700_000_000_000 - 1_700_000_000_000 % DAY + 10 * 3_600_000;
    let clock = FakeClock::new(start);
    let store = clock.memory_store();
    let one = engine(store.clone(), &clock, HotPolicy::off());
    let two = engine(store, &clock, HotPolicy::off());
    let today = start / DAY;
    one.publish_hot_users(APP, today + 1, &[("user-0".into(), 8)])
        .unwrap();
    let list = one.hot_list(&one.app(APP).unwrap(), today + 1).unwrap();
    assert_eq!(list.users(), vec![("user-0".to_string(), 8)]);

    let mut kept = events(0, start, 20);
    one.ingest(APP, &kept).unwrap();
    clock.set(start + DAY);
    let tomorrow = events(0, start + DAY, 300);
    let light = events(1, start + DAY, 30);
    one.ingest(APP, &tomorrow).unwrap();
    one.ingest(APP, &light).unwrap();
    // A retry through another process (its own cache of the list).
    two.ingest(APP, &tomorrow[..100]).unwrap();
    kept.extend(tomorrow.iter().cloned());
    kept.extend(light.iter().cloned());

    let keys = day_row_keys(&one, "user-0");
    let subs: BTreeSet<&str> = keys
        .iter()
        .filter_map(|k| k.strip_prefix(&format!("user-0,{:08},", today + 1)))
        .collect();
    assert_eq!(subs.len(), 8, "{keys:?}");
    assert!(keys.contains(&format!("user-0,{today:08}")), "{keys:?}");
    assert_eq!(
        day_row_keys(&one, "user-1"),
        vec![format!("user-1,{:08}", today + 1)]
    );

    let check = |engine: &Engine, when: &str| {
        let now = clock.now();
        let expected = reference_profiles(APP, &kept, now, 30 * DAY);
        assert_eq!(
            streaming_profiles(engine, APP, &users()),
            expected,
            "{when}"
        );
    };
    check(&one, "live");
    check(&two, "live, other process");
    // Its events of the listed day are keyed in their sub-row's bucket,
    // once each despite the retry; its other day and the other user keep
    // plain keys.
    let buckets = event_buckets(&one, "user-0");
    let spread: Vec<_> = buckets
        .iter()
        .filter(|(id, _)| id.day() == today + 1)
        .collect();
    assert_eq!(spread.len(), tomorrow.len());
    for (id, bucket) in &spread {
        assert_eq!(*bucket, Some(hot::sub_row(id, 8)), "{id:?}");
    }
    let used: BTreeSet<_> = spread.iter().map(|(_, b)| *b).collect();
    assert_eq!(used.len(), 8, "{used:?}");
    assert!(buckets
        .iter()
        .all(|(id, b)| id.day() == today + 1 || b.is_none()));
    assert!(event_buckets(&one, "user-1")
        .iter()
        .all(|(_, b)| b.is_none()));
    // A time range inside the spread day: exactly its events (the 51st
    // to 100th before the day's last, a second apart).
    let app = one.app(APP).unwrap();
    let last = start + DAY;
    let within = one
        .user_events(&app, "user-0", last - 100_000, last - 50_000)
        .unwrap();
    assert_eq!(within.len(), 50);
    assert!(within
        .iter()
        .all(|e| (last - 100_000..last - 50_000).contains(&e.timestamp_millis)));
    assert_eq!(
        exported_profiles(&one, APP),
        json_texts(&reference_profiles(APP, &kept, clock.now(), 30 * DAY)),
        "exported"
    );
    let explained = one
        .explain(APP, "user-0", "brand", "Apple")
        .unwrap()
        .unwrap();
    let read = one.profile(APP, "user-0").unwrap().unwrap();
    assert!(explained.score.is_some());
    assert_eq!(explained.score, read.scores["brand"].get("Apple").copied());
    // Folded, with a late retry of the spread day after the fold.
    clock.set(start + 2 * DAY + 2 * 3_600_000);
    let report = one
        .maintain(APP, MaintainOptions::default(), &Progress::default())
        .unwrap();
    assert_eq!(report.conflicts, 0);
    check(&one, "folded");
    two.ingest(APP, &tomorrow[200..]).unwrap();
    check(&two, "late retry");
    one.maintain(APP, MaintainOptions::default(), &Progress::default())
        .unwrap();
    check(&one, "folded again");
    // Lost state rebuilt from the events: into the same sub-rows.
    lose_state(&one, APP, "user-0", Loss::User);
    let rebuilt = one
        .rebuild(APP, RebuildOptions::default(), &Progress::default())
        .unwrap();
    assert!(rebuilt.restored > 0);
    check(&one, "rebuilt");
    let again = day_row_keys(&one, "user-0");
    assert!(
        again.iter().all(|k| keys.contains(k)),
        "{again:?} vs {keys:?}"
    );
    // The spread day leaves the window.
    clock.set(start + 32 * DAY);
    one.maintain(APP, MaintainOptions::default(), &Progress::default())
        .unwrap();
    check(&one, "expired");
    // Deleting the user deletes the sub-rows.
    clock.set(start + 2 * DAY);
    one.delete_user(APP, "user-0").unwrap();
    assert_eq!(one.user_row_count(APP, "user-0").unwrap(), 0);
}

#[test]
fn lists_are_fixed_at_their_cut_off_and_checked() {
    let start = 1_700_000_000_000 - 1_700_000_000_000 % DAY + 19 * 3_600_000;
    let clock = FakeClock::new(start);
    let engine = engine(clock.memory_store(), &clock, HotPolicy::off());
    let today = start / DAY;
    let app = engine.app(APP).unwrap();
    // 19:00: tomorrow's list closes at 20:00.
    assert!(list_cutoff_millis(today + 1) > start);
    engine
        .publish_hot_users(APP, today + 1, &[("u1".into(), 2)])
        .unwrap();
    let refused = |day: i64, users: &[(String, u32)], part: &str| {
        let err = engine.publish_hot_users(APP, day, users).unwrap_err();
        assert!(err.to_string().contains(part), "{err}");
    };
    refused(today, &[("u2".into(), 4)], "was fixed at");
    refused(today + 1, &[("u2".into(), 1)], "must be 2 to 256");
    refused(
        today + 1,
        &[("u2".into(), MAX_SUB_ROWS + 1)],
        "must be 2 to 256",
    );
    refused(today + 1, &[("a,b".into(), 4)], "user token");
    // Taken off before the cut-off; not after.
    engine
        .publish_hot_users(APP, today + 1, &[("u3".into(), 4)])
        .unwrap();
    engine
        .unlist_hot_users(APP, today + 1, &["u3".into()])
        .unwrap();
    clock.set(list_cutoff_millis(today + 1));
    refused(today + 1, &[("u2".into(), 4)], "was fixed at");
    let err = engine
        .unlist_hot_users(APP, today + 1, &["u1".into()])
        .unwrap_err();
    assert!(err.to_string().contains("was fixed at"), "{err}");
    // Nothing refused was written.
    let list = engine.hot_list(&app, today + 1).unwrap();
    assert_eq!(list.users(), vec![("u1".to_string(), 2)]);
    assert_eq!(engine.hot_list(&app, today).unwrap().users(), vec![]);
}

#[test]
fn ingestion_lists_a_busy_user_on_the_next_open_list() {
    let start = 1_700_000_000_000 - 1_700_000_000_000 % DAY + 10 * 3_600_000;
    let clock = FakeClock::new(start);
    let policy = HotPolicy {
        min_adds: 100,
        min_share: 0.2,
        share_per_row: 0.05,
        max_rows: 16,
        tracked: 8,
    };
    let engine = engine(clock.memory_store(), &clock, policy);
    let today = start / DAY;
    // user-0 has 300 of 400 events (75%: 15 rows, 16 as a power of
    // two); user-1 100 (25%: 5, so 8); user-2 too few.
    engine.ingest(APP, &events(0, start, 300)).unwrap();
    engine.ingest(APP, &events(1, start, 100)).unwrap();
    engine.ingest(APP, &events(2, start, 10)).unwrap();
    let app = engine.app(APP).unwrap();
    let list = engine.hot_list(&app, today + 1).unwrap();
    assert_eq!(
        list.users(),
        vec![("user-0".to_string(), 16), ("user-1".to_string(), 8)]
    );
    // After 20:00, tomorrow's list is fixed: the day after gets new names.
    clock.set(start + 11 * 3_600_000);
    engine.ingest(APP, &events(3, clock.now(), 500)).unwrap();
    assert_eq!(engine.hot_list(&app, today + 1).unwrap(), list);
    let later = engine.hot_list(&app, today + 2).unwrap();
    assert_eq!(later.rows("user-3"), 16);
}
