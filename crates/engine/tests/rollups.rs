//! Exactness of profile reads with rollups, at every moment: random
//! sequences of ingestion (late events, retries on the same and on later
//! days), clock moves (days leaving the window), maintenance (whole, cut
//! short, two maintainers racing), digests of today's closed hours,
//! deletions and rebuilds (after state was
//! lost, or not), rollups rewritten as older folds wrote them (by counter
//! prefix, not by facet), with every user's profile compared with the naive
//! reference after every step. Some users' days are spread over sub-rows
//! (hot lists published by hand, and by ingestion under a policy that
//! lists any busy user), and retries go through a second engine (another
//! process: its own caches) as well. On the in-memory
//! store (GC on the test's clock), the embedded store and the Bigtable
//! emulator (both collect garbage on the real clock: lazily, as far as the
//! test's clock is concerned).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use affinity_engine::cache::ProfileCache;
use affinity_engine::digest::DigestOutcome;
use affinity_engine::hot::{list_cutoff_millis, HotPolicy};
use affinity_engine::rollup::{rollup_key, FACET_TOTALS_FAMILY, TOTALS_FAMILY};
use affinity_engine::scoring::{reference, Profile};
use affinity_engine::{
    AppConfig, Engine, Event, MaintainOptions, Progress, RebuildOptions, Schema,
};
use affinity_model::{Mutation, ReadRowsRequest, RowFilter, RowSet, Store};
use common::*;
use proptest::prelude::*;

const APP: &str = "roll";
const RETENTION_DAYS: u32 = 3;

#[derive(Debug, Clone)]
enum Op {
    /// Ingest events `(kind, user, hours before now, items, by objects)`.
    Ingest(Vec<(u8, u8, u32, Vec<u8>, bool)>),
    /// Ingest an earlier batch again (a client retry, maybe days later),
    /// through this engine or the other one.
    Retry(usize, bool),
    /// List the users in the mask, over `rows` sub-rows, on the hot list
    /// of the day `ahead` days from today (refused past its cut-off).
    Hot { mask: u8, rows: u32, ahead: i64 },
    /// Move the clock forward.
    Advance(u32),
    /// Maintain every user.
    Maintain,
    /// Fold only the users in the mask (a maintenance cut short).
    FoldSome(u8),
    /// Digest the closed hours of today of the users in the mask, through
    /// this engine or the other one.
    DigestSome(u8, bool),
    /// Two maintainers prepare folds of one user, the clock moving
    /// `hours` in between, and commit in either order.
    Race {
        user: u8,
        hours: u32,
        second_first: bool,
    },
    /// Two digests of one user prepared, the clock moving `hours` in
    /// between, committed in either order; or a digest prepared, the user
    /// folded, then the digest committed.
    DigestRace {
        user: u8,
        hours: u32,
        second_first: bool,
        fold_between: bool,
    },
    /// A digest prepared, then the user deleted, then the digest committed.
    DeleteDuringDigest(u8),
    /// A fold prepared, then the user deleted, then the fold committed.
    DeleteDuringFold(u8),
    /// Delete a user.
    Delete(u8),
    /// Lose the profile rows of the users in the mask (all of them, or
    /// the rollup row alone), then rebuild; a second rebuild writes
    /// nothing.
    LoseAndRebuild { mask: u8, rollup_only: bool },
    /// Rewrite the rollups of the users in the mask as folds wrote them
    /// before the by-facet cells: one `r` cell per counter prefix.
    OlderRollups(u8),
}

fn op() -> impl Strategy<Value = Op> {
    let event = (
        any::<u8>(),
        0u8..4,
        // Half within the last hours: today's row, which digests take.
        prop_oneof![0u32..6, 0u32..(24 * (RETENTION_DAYS + 1))],
        proptest::collection::vec(any::<u8>(), 1..4),
        any::<bool>(),
    );
    prop_oneof![
        4 => proptest::collection::vec(event, 1..8).prop_map(Op::Ingest),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(i, other)| Op::Retry(i, other)),
        1 => (any::<u8>(), 2u32..9, 0i64..3).prop_map(|(mask, rows, ahead)| Op::Hot { mask, rows, ahead }),
        3 => prop_oneof![1u32..6, 6u32..30, 30u32..80].prop_map(Op::Advance),
        2 => Just(Op::Maintain),
        1 => any::<u8>().prop_map(Op::FoldSome),
        2 => (any::<u8>(), any::<bool>()).prop_map(|(mask, other)| Op::DigestSome(mask, other)),
        1 => (0u8..4, 0u32..30, any::<bool>())
            .prop_map(|(user, hours, second_first)| Op::Race { user, hours, second_first }),
        1 => (0u8..4, 0u32..4, any::<bool>(), any::<bool>()).prop_map(
            |(user, hours, second_first, fold_between)| Op::DigestRace { user, hours, second_first, fold_between }
        ),
        1 => (0u8..4).prop_map(Op::DeleteDuringDigest),
        1 => (0u8..4).prop_map(Op::DeleteDuringFold),
        1 => (0u8..4).prop_map(Op::Delete),
        1 => (any::<u8>(), any::<bool>())
            .prop_map(|(mask, rollup_only)| Op::LoseAndRebuild { mask, rollup_only }),
        1 => any::<u8>().prop_map(Op::OlderRollups),
    ]
}

/// The rollup of `u` rewritten by prefix, as folds wrote it before the
/// by-facet cells, read and written as `docs/design/profiles.md` lays
/// the two out (so this also pins both layouts): each `f` cell (`k`
/// prefixes, then per value its count per prefix) becomes one `r` cell
/// per prefix (per value its count, zero counts left out).
fn write_older_rollup(engine: &Engine, u: &str) {
    fn varint(rest: &mut &[u8]) -> u64 {
        let mut n = 0;
        for i in 0.. {
            let b = rest[0];
            *rest = &rest[1..];
            n |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                break;
            }
        }
        n
    }
    fn put(out: &mut Vec<u8>, mut n: u64) {
        while n >= 0x80 {
            out.push(n as u8 | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    }
    fn bytes<'a>(rest: &mut &'a [u8]) -> &'a [u8] {
        let len = varint(rest) as usize;
        let (b, tail) = rest.split_at(len);
        *rest = tail;
        b
    }
    let app = engine.app(APP).unwrap();
    let key = rollup_key(u);
    let request = ReadRowsRequest::new(RowSet::from_keys([key.clone().into_bytes()]))
        .with_filter(RowFilter::exact_family(FACET_TOTALS_FAMILY));
    let mut cells: Vec<(i64, Vec<u8>)> = Vec::new();
    app.profiles
        .visit_rows(&request, &mut |row| {
            for cell in row.cells {
                cells.push((cell.timestamp_micros, cell.value.to_vec()));
            }
            Ok(true)
        })
        .unwrap();
    if cells.is_empty() {
        return;
    }
    let mut write = vec![Mutation::DeleteFromFamily {
        family: FACET_TOTALS_FAMILY.into(),
    }];
    for (stamp, cell) in cells {
        let mut rest = cell.as_slice();
        let k = varint(&mut rest) as usize;
        let prefixes: Vec<&[u8]> = (0..k).map(|_| bytes(&mut rest)).collect();
        let mut older = vec![Vec::new(); k];
        while !rest.is_empty() {
            let value = bytes(&mut rest);
            for out in older.iter_mut() {
                let z = varint(&mut rest);
                if z != 0 {
                    put(out, value.len() as u64);
                    out.extend_from_slice(value);
                    put(out, z);
                }
            }
        }
        for (prefix, value) in prefixes.iter().zip(older) {
            if !value.is_empty() {
                write.push(Mutation::set_cell(
                    TOTALS_FAMILY,
                    prefix.to_vec(),
                    stamp,
                    value,
                ));
            }
        }
    }
    app.profiles.mutate_row(key.as_bytes(), &write).unwrap();
}

fn user(n: u8) -> String {
    format!("user-{}", n % 4)
}

struct World {
    engine: Engine,
    /// Another process on the store.
    other: Engine,
    clock: FakeClock,
    /// Every batch ingested, to retry.
    batches: Vec<Vec<Event>>,
    /// The events the reference counts (deletions drop a user's).
    kept: Vec<Event>,
}

impl World {
    fn ingest(&mut self, events: Vec<Event>, other: bool) {
        let engine = if other { &self.other } else { &self.engine };
        engine.ingest(APP, &events).unwrap();
        self.kept.extend(events.iter().cloned());
        self.batches.push(events);
    }

    fn delete(&mut self, u: &str) {
        self.engine.delete_user(APP, u).unwrap();
        self.kept.retain(|e| e.identity() != u);
    }

    fn check(&self, step: usize, op: &Op) -> Result<(), TestCaseError> {
        let now = self.clock.now();
        let expected = reference_profiles(APP, &self.kept, now, i64::from(RETENTION_DAYS) * DAY);
        let got = streaming_profiles(&self.engine, APP, &users());
        prop_assert_eq!(&got, &expected, "after step {} ({:?})", step, op);
        let cached = self.engine.profile_cache_stats().is_some()
            || self.engine.rollup_cache_stats().is_some();
        if cached {
            // Another strategy between two reads under the application's:
            // weighed rollups kept for one are not taken for the other.
            let other = other_strategy();
            let retention = i64::from(RETENTION_DAYS) * DAY;
            let expected_other =
                reference::profiles(&listed(APP, &self.kept), &other, now, retention);
            let got_other: BTreeMap<String, Profile> = users()
                .iter()
                .filter_map(|u| {
                    let p = self
                        .engine
                        .profile_with(APP, u, &other)
                        .expect("profile read");
                    p.map(|p| (u.clone(), p))
                })
                .collect();
            prop_assert_eq!(
                got_other,
                expected_other,
                "another strategy after step {} ({:?})",
                step,
                op
            );
            let again = streaming_profiles(&self.engine, APP, &users());
            prop_assert_eq!(again, expected, "read again after step {} ({:?})", step, op);
        }
        Ok(())
    }
}

/// A strategy weighing the same events and facets otherwise than
/// [`strategy`], and leaving out one of each.
fn other_strategy() -> affinity_engine::Strategy {
    affinity_engine::Strategy::from_json(&serde_json::json!({
        "eventsScoring":[{"eventName":"click","eventType":"click","score":3},
                         {"eventName":"buy, now","eventType":"conversion","score":20}],
        "facetsScoring":[{"facetName":"color","score":90}],
        "personalizationImpact":60}))
    .expect("valid strategy")
}

/// Lists any user with a third of a process's adds of the day (at least
/// 3), over up to 8 sub-rows.
fn busy() -> HotPolicy {
    HotPolicy {
        min_adds: 3,
        min_share: 0.3,
        share_per_row: 0.1,
        max_rows: 8,
        tracked: 4,
    }
}

/// With cache budgets `(answers, rollups)` other than `(0, 0)`, both
/// engines share a profile cache (two engines of one process), and every
/// check reads each profile twice (the second from the cache when nothing
/// changed, or with the rollup rows it kept).
fn run(
    store: Arc<dyn Store>,
    clock: FakeClock,
    ops: &[Op],
    (answers, rollups): (usize, usize),
) -> Result<(), TestCaseError> {
    let mut engine = Engine::with_clock(store.clone(), clock.engine_clock())
        .unwrap()
        .with_hot_policy(busy());
    let mut other = Engine::with_clock(store, clock.engine_clock())
        .unwrap()
        .with_hot_policy(busy());
    if answers > 0 || rollups > 0 {
        let cache = Arc::new(ProfileCache::new(answers, rollups));
        engine = engine.with_shared_profile_cache(Arc::clone(&cache));
        other = other.with_shared_profile_cache(cache);
    }
    engine
        .configure_app(
            APP,
            AppConfig {
                schema: Schema::Wide,
                retention_days: RETENTION_DAYS,
            },
        )
        .unwrap();
    engine
        .put_objects(APP, "products", &catalog_objects())
        .unwrap();
    engine.set_strategy(APP, &strategy()).unwrap();
    let mut world = World {
        engine,
        other,
        clock,
        batches: Vec::new(),
        kept: Vec::new(),
    };
    for (step, op) in ops.iter().enumerate() {
        let now = world.clock.now();
        match op {
            Op::Ingest(events) => {
                let values: Vec<_> = events
                    .iter()
                    .map(|(kind, u, hours, items, objects)| {
                        let ts = now - i64::from(*hours) * 3_600_000 - i64::from(*kind) * 1000;
                        event_json(*kind, *u, ts, items, *objects)
                    })
                    .collect();
                let limits = affinity_engine::Limits {
                    now_millis: now,
                    max_age_millis: i64::from(RETENTION_DAYS) * DAY,
                    max_skew_millis: 3_600_000,
                };
                let events: Vec<Event> = values
                    .iter()
                    .filter_map(|v| Event::from_json(v, &limits).ok())
                    .collect();
                if !events.is_empty() {
                    world.ingest(events, false);
                }
            }
            Op::Hot { mask, rows, ahead } => {
                let day = now.div_euclid(DAY) + ahead;
                let users: Vec<(String, u32)> = (0..4u8)
                    .filter(|u| mask & (1 << u) != 0)
                    .map(|u| (user(u), *rows))
                    .collect();
                let published = world.engine.publish_hot_users(APP, day, &users);
                prop_assert_eq!(
                    published.is_ok(),
                    now < list_cutoff_millis(day),
                    "{:?}",
                    published
                );
            }
            Op::Retry(i, other) => {
                if !world.batches.is_empty() {
                    let batch = world.batches[i % world.batches.len()].clone();
                    let oldest = now - i64::from(RETENTION_DAYS) * DAY;
                    // A retry of events past the retention is refused whole.
                    if batch.iter().all(|e| e.timestamp_millis >= oldest) {
                        world.ingest(batch, *other);
                    }
                }
            }
            Op::Advance(hours) => world.clock.set(now + i64::from(*hours) * 3_600_000),
            Op::Maintain => {
                let report = world
                    .engine
                    .maintain(APP, MaintainOptions::default(), &Progress::default())
                    .unwrap();
                prop_assert_eq!(report.conflicts, 0);
                // Maintenance skips users it judges up to date from their
                // first row: none of them had anything to fold.
                let app = world.engine.app(APP).unwrap();
                for u in 0..4u8 {
                    let plan = world.engine.prepare_fold(&app, &user(u)).unwrap();
                    prop_assert!(plan.is_none(), "{} left to fold: {:?}", user(u), plan);
                    // And no closed hour of today left to digest.
                    let digest = world.engine.digest_user(&app, &user(u)).unwrap();
                    prop_assert_eq!(digest, DigestOutcome::UpToDate, "{}", user(u));
                }
            }
            Op::DigestSome(mask, other) => {
                let engine = if *other { &world.other } else { &world.engine };
                let app = engine.app(APP).unwrap();
                for u in 0..4u8 {
                    if mask & (1 << u) != 0 {
                        let outcome = engine.digest_user(&app, &user(u)).unwrap();
                        prop_assert_ne!(outcome, DigestOutcome::Conflict);
                    }
                }
            }
            Op::FoldSome(mask) => {
                let app = world.engine.app(APP).unwrap();
                for u in 0..4u8 {
                    if mask & (1 << u) != 0 {
                        world.engine.fold_user(&app, &user(u)).unwrap();
                    }
                }
            }
            Op::Race {
                user: u,
                hours,
                second_first,
            } => {
                let app = world.engine.app(APP).unwrap();
                let first = world.engine.prepare_fold(&app, &user(*u)).unwrap();
                world.clock.set(now + i64::from(*hours) * 3_600_000);
                let second = world.engine.prepare_fold(&app, &user(*u)).unwrap();
                let (a, b) = if *second_first {
                    (second, first)
                } else {
                    (first, second)
                };
                let plans: Vec<_> = [a, b].into_iter().flatten().collect();
                let committed: Vec<bool> = plans
                    .iter()
                    .map(|plan| world.engine.commit_fold(&app, plan).unwrap())
                    .collect();
                // Both read the same rollup: the second commits only if the
                // first left its watermark where both read it.
                if committed.len() == 2 && committed[0] && committed[1] {
                    prop_assert_eq!(plans[0].old.map(|w| w.h), Some(plans[0].new.h));
                }
            }
            Op::DigestRace {
                user: u,
                hours,
                second_first,
                fold_between,
            } => {
                let app = world.engine.app(APP).unwrap();
                let first = world.engine.prepare_digest(&app, &user(*u)).unwrap();
                world.clock.set(now + i64::from(*hours) * 3_600_000);
                if *fold_between {
                    world.engine.fold_user(&app, &user(*u)).unwrap();
                }
                let second = world.other.prepare_digest(&app, &user(*u)).unwrap();
                let (a, b) = if *second_first {
                    (second, first)
                } else {
                    (first, second)
                };
                // Both read each row as it was: per row, the first to commit
                // does, and the second then finds its earliest cell moved.
                let mut commits: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
                for plan in a.iter().chain(&b) {
                    let count = commits.entry(plan.key().to_vec()).or_default();
                    if world.engine.commit_digest(&app, plan).unwrap() {
                        *count += 1;
                    }
                }
                prop_assert!(commits.values().all(|n| *n == 1), "{:?}", commits);
            }
            Op::DeleteDuringDigest(u) => {
                let app = world.engine.app(APP).unwrap();
                let plans = world.engine.prepare_digest(&app, &user(*u)).unwrap();
                world.delete(&user(*u));
                for plan in &plans {
                    prop_assert!(!world.engine.commit_digest(&app, plan).unwrap());
                }
            }
            Op::DeleteDuringFold(u) => {
                let app = world.engine.app(APP).unwrap();
                let plan = world.engine.prepare_fold(&app, &user(*u)).unwrap();
                world.delete(&user(*u));
                if let Some(plan) = plan {
                    prop_assert!(!world.engine.commit_fold(&app, &plan).unwrap());
                }
            }
            Op::Delete(u) => world.delete(&user(*u)),
            Op::LoseAndRebuild { mask, rollup_only } => {
                let loss = if *rollup_only {
                    Loss::Rollup
                } else {
                    Loss::User
                };
                for u in (0..4u8).filter(|u| mask & (1 << u) != 0) {
                    lose_state(&world.engine, APP, &user(u), loss);
                }
                let options = RebuildOptions::default();
                let first = world
                    .engine
                    .rebuild(APP, options, &Progress::default())
                    .unwrap();
                if mask & 0xf == 0 {
                    prop_assert_eq!((first.restored, first.markers), (0, 0));
                }
                let again = world
                    .engine
                    .rebuild(APP, options, &Progress::default())
                    .unwrap();
                prop_assert_eq!((again.restored, again.markers), (0, 0));
            }
            Op::OlderRollups(mask) => {
                for u in (0..4u8).filter(|u| mask & (1 << u) != 0) {
                    write_older_rollup(&world.engine, &user(u));
                }
            }
        }
        world.check(step, op)?;
    }
    // A last full maintenance leaves every user's reads at most two rows
    // plus the days since the fold watermark.
    world
        .engine
        .maintain(APP, MaintainOptions::default(), &Progress::default())
        .unwrap();
    world.check(ops.len(), &Op::Maintain)?;
    let deleted: BTreeSet<String> = users()
        .into_iter()
        .filter(|u| world.kept.iter().all(|e| e.identity() != u))
        .collect();
    for u in &deleted {
        prop_assert_eq!(world.engine.user_row_count(APP, u).unwrap(), 0, "{}", u);
    }
    Ok(())
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(op(), 1..40)
}

/// A read keeps the rollup's runs merged with today's digest; the next
/// digest of the day changes the digest, not the rollup, and the read
/// after it must not take the runs merged with the first.
#[test]
fn a_new_digest_of_today_is_read_with_the_rollup_kept() {
    // Each batch with items of its own: the scores differ from batch to
    // batch (the same events again would scale every raw score alike).
    let events = |hours: u32, item: u8| -> Op {
        Op::Ingest(
            (0..4u8)
                .flat_map(|u| (0..3u8).map(move |k| (k, u, hours, vec![u, k, item], k == 1)))
                .collect(),
        )
    };
    // At 02:00: yesterday's events folded; then today's at 02:00 and
    // 05:00, digested at 05:00 and 08:00, read after every step.
    let ops = [
        events(20, 7),
        Op::Advance(3),
        Op::Maintain,
        events(0, 9),
        Op::Advance(3),
        Op::DigestSome(0xf, false),
        events(0, 11),
        Op::Advance(3),
        Op::DigestSome(0xf, false),
        events(0, 13),
    ];
    let start = 1_700_000_000_000 - 1_700_000_000_000 % DAY - 3_600_000;
    for rollups in [0, 1 << 20] {
        let clock = FakeClock::new(start);
        run(clock.memory_store(), clock, &ops, (0, rollups)).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn memory_store_reads_equal_the_reference(ops in ops(), hour in 0i64..24) {
        let start = 1_700_000_000_000 - 1_700_000_000_000 % DAY + hour * 3_600_000;
        let clock = FakeClock::new(start);
        run(clock.memory_store(), clock, &ops, (0, 0))?;
    }

    #[test]
    fn memory_store_cached_reads_equal_the_reference(ops in ops(), hour in 0i64..24) {
        let start = 1_700_000_000_000 - 1_700_000_000_000 % DAY + hour * 3_600_000;
        let clock = FakeClock::new(start);
        run(clock.memory_store(), clock, &ops, (1 << 20, 1 << 20))?;
    }

    #[test]
    fn memory_store_reads_with_rollups_kept_equal_the_reference(ops in ops(), hour in 0i64..24) {
        let start = 1_700_000_000_000 - 1_700_000_000_000 % DAY + hour * 3_600_000;
        let clock = FakeClock::new(start);
        run(clock.memory_store(), clock, &ops, (0, 1 << 20))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn embedded_store_reads_equal_the_reference(ops in ops(), hour in 0i64..24) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(affinity_embedded::EmbeddedStore::open(dir.path()).unwrap());
        let now = real_now();
        run(store, FakeClock::new(now - now % DAY + hour * 3_600_000), &ops, (0, 0))?;
    }

    #[test]
    fn embedded_store_cached_reads_equal_the_reference(ops in ops(), hour in 0i64..24) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(affinity_embedded::EmbeddedStore::open(dir.path()).unwrap());
        let now = real_now();
        run(store, FakeClock::new(now - now % DAY + hour * 3_600_000), &ops, (1 << 20, 1 << 20))?;
    }

    #[ignore = "needs the Cloud Bigtable emulator (scripts/test runs it)"]
    #[test]
    fn emulator_reads_equal_the_reference(ops in ops(), hour in 0i64..24) {
        let store = affinity_bigtable::emulator::test_store();
        let now = real_now();
        run(store, FakeClock::new(now - now % DAY + hour * 3_600_000), &ops, (0, 0))?;
    }
}

/// Maintenance as a named job: shards cover every user once, a restarted
/// job skips the ranges it finished, and reads stay exact.
#[test]
fn a_named_maintenance_shares_its_split_and_resumes_where_it_stopped() {
    let start = 1_700_000_000_000 - 1_700_000_000_000 % DAY + 10 * 3_600_000;
    let clock = FakeClock::new(start);
    let engine = Engine::with_clock(clock.memory_store(), clock.engine_clock()).unwrap();
    engine
        .configure_app(
            APP,
            AppConfig {
                schema: Schema::Narrow,
                retention_days: RETENTION_DAYS,
            },
        )
        .unwrap();
    engine.set_strategy(APP, &strategy()).unwrap();
    let mut values = Vec::new();
    for u in 0..60 {
        let mut v = event_json(0, 0, start - u * 60_000, &[u as u8], false);
        v["userToken"] = serde_json::json!(format!("bulk-{u:02}"));
        values.push(v);
    }
    let events = parse_all(&values, start);
    engine.ingest(APP, &events).unwrap();
    // The next day, yesterday's arrivals are closed: every user folds.
    clock.set(start + DAY);
    let job = |shard| MaintainOptions { threads: 2, shard };
    let first = engine
        .maintain_job(APP, job(Some((0, 2))), "m1", &Progress::default())
        .unwrap();
    assert!(first.ranges > 1);
    assert!(first.folded > 0 && first.folded < 60);
    let progress = Progress::default();
    let rest = engine
        .maintain_job(APP, job(None), "m1", &progress)
        .unwrap();
    let snap = progress.snapshot();
    assert_eq!(snap.ranges_done, snap.ranges_total);
    assert_eq!(first.ranges + rest.ranges, snap.ranges_total);
    assert_eq!(
        (first.users + rest.users, first.folded + rest.folded),
        (60, 60)
    );
    let users: Vec<String> = (0..60).map(|u| format!("bulk-{u:02}")).collect();
    assert_eq!(
        streaming_profiles(&engine, APP, &users),
        reference_profiles(APP, &events, start + DAY, i64::from(RETENTION_DAYS) * DAY)
    );
    let again = engine
        .maintain_job(APP, job(None), "m1", &Progress::default())
        .unwrap();
    assert_eq!((again.ranges, again.users), (0, 0));
    // A fresh maintenance finds every rollup up to date.
    let fresh = engine
        .maintain(APP, MaintainOptions::default(), &Progress::default())
        .unwrap();
    assert_eq!((fresh.users, fresh.folded), (60, 0));
}
