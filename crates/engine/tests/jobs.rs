//! Jobs as shared state and settings every engine sees, with two engines
//! on one store standing for two servers: job ids unique, records read the
//! same from both, a dead worker's shard taken over once its lease
//! expires, a wrong job refused; settings changed through one engine seen
//! by the other within `SETTINGS_REFRESH`. On the in-memory store (a fake
//! clock moves the leases), the embedded store and the emulator.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use affinity_engine::{
    AppConfig, Engine, JobKind, Progress, Schema, ShardState, WorkOptions, JOBS_TABLE,
    JOB_RECORD_DAYS, SETTINGS_REFRESH,
};
use std::sync::atomic::{AtomicUsize, Ordering};

use affinity_model::{
    Error as ModelError, FamilyModification, Mutation, ReadModifyWriteRule, ReadRowsRequest,
    Result as ModelResult, Row, RowFilter, RowMutations, RowRef, RowStream, SampleRowKey, Store,
    Table, TableSpec,
};
use common::*;

const APP: &str = "shop";

fn worker(name: &str) -> WorkOptions {
    WorkOptions {
        worker: name.to_string(),
        lease: Duration::from_secs(10),
        threads: 2,
        retries: vec![Duration::from_millis(20); 3],
    }
}

/// Two engines on `store` (one clock), the first holding events of every
/// test user over the last days.
fn two_engines(store: Arc<dyn Store>, clock: &FakeClock) -> (Engine, Engine) {
    let a = Engine::with_clock(Arc::clone(&store), clock.engine_clock()).unwrap();
    // Tables of its own: a test below changes its retention.
    a.isolate_app(APP).unwrap();
    a.configure_app(APP, AppConfig::default()).unwrap();
    a.put_objects(APP, "products", &catalog_objects()).unwrap();
    a.set_strategy(APP, &strategy()).unwrap();
    let now = clock.now();
    let values: Vec<_> = (0..200i64)
        .map(|i| {
            event_json(
                i as u8,
                (i % 4) as u8,
                now - 60_000 - i * DAY / 20,
                &[i as u8],
                i % 3 == 0,
            )
        })
        .collect();
    a.ingest(APP, &parse_all(&values, now)).unwrap();
    let b = Engine::with_clock(store, clock.engine_clock()).unwrap();
    (a, b)
}

fn ids_are_unique_and_every_engine_reads_every_job(store: Arc<dyn Store>, clock: &FakeClock) {
    let (a, b) = two_engines(store, clock);
    let ids: Vec<String> = (0..50)
        .map(|i| {
            if i % 2 == 0 {
                a.new_job_id()
            } else {
                b.new_job_id()
            }
        })
        .collect();
    let unique: std::collections::BTreeSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");
    a.create_job(APP, &ids[0], JobKind::Maintain, 1).unwrap();
    b.create_job(APP, &ids[1], JobKind::Rebuild, 2).unwrap();
    let listed = |e: &Engine| -> Vec<(String, &'static str, usize)> {
        e.jobs(APP, 10)
            .unwrap()
            .iter()
            .map(|j| (j.id.clone(), j.kind.as_str(), j.shards.len()))
            .collect()
    };
    assert_eq!(listed(&a), listed(&b));
    assert_eq!(listed(&a).len(), 2);
    let done = a
        .work_on_job(APP, &ids[0], Some(0), &worker("a"), &Progress::default())
        .unwrap();
    assert_eq!(done.state(), "succeeded");
    let seen = b.job(APP, &ids[0]).unwrap().expect("job seen by b");
    assert_eq!(seen.to_json(clock.now()), done.to_json(clock.now()));
    assert_eq!(seen.to_json(clock.now())["report"]["users"], 4);
    // Another application does not see it.
    assert_eq!(b.job("other", &ids[0]).unwrap(), None);
    assert!(b.jobs("other", 10).unwrap().is_empty());
}

fn bad_jobs_are_refused(store: Arc<dyn Store>, clock: &FakeClock) {
    let (a, _) = two_engines(store, clock);
    for (id, shards, part) in [
        ("", 1, "job"),
        ("a/b", 1, "job"),
        ("ok", 0, "shard"),
        ("ok", 5000, "shard"),
    ] {
        let err = a
            .create_job(APP, id, JobKind::Maintain, shards)
            .unwrap_err();
        assert!(err.to_string().contains(part), "{id:?} {shards}: {err}");
    }
    assert!(a.jobs(APP, 10).unwrap().is_empty());
    a.create_job(APP, "nightly", JobKind::Maintain, 2).unwrap();
    let err = a
        .create_job(APP, "nightly", JobKind::Rebuild, 2)
        .unwrap_err();
    assert!(
        err.to_string().contains("maintain job of 2 shards"),
        "{err}"
    );
    let err = a
        .create_job(APP, "nightly", JobKind::Maintain, 3)
        .unwrap_err();
    assert!(
        err.to_string().contains("maintain job of 2 shards"),
        "{err}"
    );
    assert_eq!(a.jobs(APP, 10).unwrap().len(), 1);
    let err = a
        .work_on_job(APP, "missing", None, &worker("a"), &Progress::default())
        .unwrap_err();
    assert!(err.to_string().contains("no job \"missing\""), "{err}");
}

/// Shard 1 is leased by a worker that never runs it (it died); worker b
/// runs shard 0, waits while the lease lives, then takes shard 1 over.
fn a_dead_workers_shard_is_taken_over(store: Arc<dyn Store>, clock: &FakeClock) {
    let (a, b) = two_engines(Arc::clone(&store), clock);
    let users = users();
    let before = read_texts(&a, APP, &users);
    a.create_job(APP, "nightly", JobKind::Maintain, 2).unwrap();
    let dead_until = clock.now() + 10_000;
    store
        .open_table(JOBS_TABLE)
        .unwrap()
        .mutate_row(
            format!("{APP},nightly").as_bytes(),
            &[Mutation::set_cell(
                "j",
                "lease,1",
                0,
                format!("{dead_until:016},dead-worker"),
            )],
        )
        .unwrap();
    let status = a.job(APP, "nightly").unwrap().unwrap();
    assert_eq!(status.shards[1].state, ShardState::Running);
    assert_eq!(status.shards[1].worker.as_deref(), Some("dead-worker"));
    std::thread::scope(|s| {
        let running =
            s.spawn(|| b.work_on_job(APP, "nightly", Some(0), &worker("b"), &Progress::default()));
        // Shard 0 finishes; shard 1's lease still holds, so b waits.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let job = a.job(APP, "nightly").unwrap().unwrap();
            if job.shards[0].state == ShardState::Succeeded {
                assert_eq!(job.shards[1].state, ShardState::Running);
                assert_eq!(job.state(), "running");
                break;
            }
            assert!(Instant::now() < deadline, "shard 0 never finished: {job:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!running.is_finished());
        // The dead worker's lease expires: b takes shard 1 over.
        clock.set(dead_until + 1);
        let job = running.join().unwrap().unwrap();
        assert_eq!(job.state(), "succeeded", "{job:?}");
        assert_eq!(job.shards[1].worker.as_deref(), Some("b"));
    });
    let seen = a.job(APP, "nightly").unwrap().unwrap().to_json(clock.now());
    assert_eq!(seen["status"], "succeeded");
    assert_eq!(seen["report"]["users"], 4, "{seen}");
    assert_eq!(seen["shards"][1]["worker"], "b");
    // A fold changes no profile.
    assert_eq!(read_texts(&a, APP, &users), before);
    // A finished job is done for everyone: nothing runs again.
    let again = a
        .work_on_job(APP, "nightly", Some(1), &worker("c"), &Progress::default())
        .unwrap();
    assert_eq!(again.to_json(clock.now()), seen);
}

/// The plan rows (`~job,<id>`) in the application's profiles table.
fn plan_rows(store: &Arc<dyn Store>) -> usize {
    let request = ReadRowsRequest::new(affinity_model::RowSet::from_range(
        affinity_model::RowRange::prefix(b"~job,".to_vec()),
    ));
    let table = store.open_table(&format!("profiles.{APP}")).unwrap();
    table.read_rows(&request).unwrap().count()
}

fn job_ids(engine: &Engine) -> Vec<String> {
    let mut ids: Vec<String> = engine
        .jobs(APP, 1000)
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    ids.sort();
    ids
}

/// Creating a job forgets the finished jobs older than `JOB_RECORD_DAYS`,
/// records and plans; a job whose worker died stays; past a count, the
/// oldest finished ones go first.
fn finished_jobs_are_forgotten(store: Arc<dyn Store>, clock: &FakeClock) {
    let (a, b) = two_engines(Arc::clone(&store), clock);
    for id in ["old-1", "old-2"] {
        a.create_job(APP, id, JobKind::Maintain, 1).unwrap();
        let job = a
            .work_on_job(APP, id, Some(0), &worker("a"), &Progress::default())
            .unwrap();
        assert_eq!(job.state(), "succeeded");
        clock.set(clock.now() + 1);
    }
    // Taken by a worker that died before doing anything.
    a.create_job(APP, "stalled", JobKind::Maintain, 1).unwrap();
    let lease = format!("{:016},dead-worker", clock.now() + 1_000);
    store
        .open_table(JOBS_TABLE)
        .unwrap()
        .mutate_row(
            format!("{APP},stalled").as_bytes(),
            &[Mutation::set_cell("j", "lease,0", 0, lease)],
        )
        .unwrap();
    assert_eq!(plan_rows(&store), 2);
    assert_eq!(job_ids(&b), ["old-1", "old-2", "stalled"]);
    // A month later, a new job: the finished ones go, the stalled one
    // stays (for a worker to take over).
    clock.set(clock.now() + (JOB_RECORD_DAYS + 1) * DAY);
    b.create_job(APP, "new", JobKind::Maintain, 1).unwrap();
    assert_eq!(job_ids(&a), ["new", "stalled"]);
    assert_eq!(plan_rows(&store), 0);
    assert!(a.job(APP, "old-1").unwrap().is_none());
    // Joining an existing job forgets nothing; past the count, the
    // newest finished ones stay.
    for id in ["new", "k1", "k2"] {
        a.create_job(APP, id, JobKind::Maintain, 1).unwrap();
        a.work_on_job(APP, id, Some(0), &worker("a"), &Progress::default())
            .unwrap();
        clock.set(clock.now() + 1);
    }
    assert_eq!(job_ids(&a), ["k1", "k2", "new", "stalled"]);
    assert_eq!(a.forget_finished_jobs(APP, i64::MIN, 1).unwrap(), 2);
    assert_eq!(job_ids(&b), ["k2", "stalled"]);
    assert_eq!(plan_rows(&store), 1);
}

/// A store whose scans (`visit_rows`) of every table but the jobs table
/// fail as unavailable while `failures` is above 0, each failure taking
/// one: a Bigtable outage the client's own retries gave up on.
struct Flaky {
    inner: Arc<dyn Store>,
    failures: Arc<AtomicUsize>,
}

struct FlakyTable {
    inner: Arc<dyn Table>,
    failures: Arc<AtomicUsize>,
}

impl Store for Flaky {
    fn create_table(&self, table: &str, spec: &TableSpec) -> ModelResult<()> {
        self.inner.create_table(table, spec)
    }
    fn delete_table(&self, table: &str) -> ModelResult<()> {
        self.inner.delete_table(table)
    }
    fn list_tables(&self) -> ModelResult<Vec<String>> {
        self.inner.list_tables()
    }
    fn table_spec(&self, table: &str) -> ModelResult<TableSpec> {
        self.inner.table_spec(table)
    }
    fn modify_families(
        &self,
        table: &str,
        changes: &[FamilyModification],
    ) -> ModelResult<TableSpec> {
        self.inner.modify_families(table, changes)
    }
    fn drop_row_range(&self, table: &str, prefix: &[u8]) -> ModelResult<()> {
        self.inner.drop_row_range(table, prefix)
    }
    fn open_table(&self, table: &str) -> ModelResult<Arc<dyn Table>> {
        let inner = self.inner.open_table(table)?;
        if table == JOBS_TABLE {
            return Ok(inner);
        }
        Ok(Arc::new(FlakyTable {
            inner,
            failures: Arc::clone(&self.failures),
        }))
    }
}

impl Table for FlakyTable {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn mutate_row(&self, row_key: &[u8], mutations: &[Mutation]) -> ModelResult<()> {
        self.inner.mutate_row(row_key, mutations)
    }
    fn mutate_rows(&self, entries: &[RowMutations]) -> ModelResult<Vec<ModelResult<()>>> {
        self.inner.mutate_rows(entries)
    }
    fn check_and_mutate_row(
        &self,
        row_key: &[u8],
        predicate: Option<&RowFilter>,
        true_mutations: &[Mutation],
        false_mutations: &[Mutation],
    ) -> ModelResult<bool> {
        self.inner
            .check_and_mutate_row(row_key, predicate, true_mutations, false_mutations)
    }
    fn read_modify_write_row(
        &self,
        row_key: &[u8],
        rules: &[ReadModifyWriteRule],
    ) -> ModelResult<Row> {
        self.inner.read_modify_write_row(row_key, rules)
    }
    fn sample_row_keys(&self) -> ModelResult<Vec<SampleRowKey>> {
        self.inner.sample_row_keys()
    }
    fn read_rows(&self, request: &ReadRowsRequest) -> ModelResult<RowStream<'_>> {
        self.inner.read_rows(request)
    }
    fn visit_rows(
        &self,
        request: &ReadRowsRequest,
        visit: &mut dyn FnMut(RowRef<'_>) -> ModelResult<bool>,
    ) -> ModelResult<()> {
        let failed = self
            .failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failed {
            return Err(ModelError::Unavailable("the test's outage".into()));
        }
        self.inner.visit_rows(request, visit)
    }
}

/// A shard whose scans fail as unavailable is run again after the
/// worker's waits and succeeds, with the same profiles; an outage longer
/// than the waits fails the shard, naming the error.
fn transient_store_errors_are_retried(store: Arc<dyn Store>, clock: &FakeClock) {
    let failures = Arc::new(AtomicUsize::new(0));
    let flaky: Arc<dyn Store> = Arc::new(Flaky {
        inner: store,
        failures: Arc::clone(&failures),
    });
    let (a, _) = two_engines(flaky, clock);
    let users = users();
    let before = read_texts(&a, APP, &users);
    a.create_job(APP, "short", JobKind::Maintain, 1).unwrap();
    failures.store(2, Ordering::SeqCst);
    let job = a
        .work_on_job(APP, "short", Some(0), &worker("a"), &Progress::default())
        .unwrap();
    assert_eq!(failures.load(Ordering::SeqCst), 0, "the outage was met");
    let seen = job.to_json(clock.now());
    assert_eq!(seen["status"], "succeeded", "{seen}");
    assert_eq!(seen["report"]["users"], 4, "{seen}");
    assert_eq!(read_texts(&a, APP, &users), before);

    a.create_job(APP, "long", JobKind::Rebuild, 1).unwrap();
    failures.store(1000, Ordering::SeqCst);
    let job = a
        .work_on_job(APP, "long", Some(0), &worker("a"), &Progress::default())
        .unwrap();
    // The first run and one per wait (3) each met the outage at least
    // once (a run scans its ranges on two threads), then the shard failed.
    let failed = 1000 - failures.load(Ordering::SeqCst);
    assert!((4..=4 * 64).contains(&failed), "{failed} scans failed");
    let seen = job.to_json(clock.now());
    assert_eq!(seen["status"], "failed", "{seen}");
    assert!(
        seen["error"]
            .as_str()
            .unwrap()
            .contains("the test's outage"),
        "{seen}"
    );
    failures.store(0, Ordering::SeqCst);
    assert_eq!(read_texts(&a, APP, &users), before);
}

/// A worker told to hand its job back (a server shutting down) stops at
/// its next check, gives its lease up at once and says so; another
/// worker takes the shard over without waiting for the lease to expire
/// (the fake clock never moves), with the same profiles.
fn a_handed_back_shard_is_taken_over_at_once(store: Arc<dyn Store>, clock: &FakeClock) {
    let failures = Arc::new(AtomicUsize::new(0));
    let flaky: Arc<dyn Store> = Arc::new(Flaky {
        inner: store,
        failures: Arc::clone(&failures),
    });
    let (a, b) = two_engines(flaky, clock);
    let users = users();
    let before = read_texts(&a, APP, &users);
    a.create_job(APP, "nightly", JobKind::Maintain, 1).unwrap();
    // An outage keeps a's shard waiting between its retries.
    failures.store(1_000_000, Ordering::SeqCst);
    let slow = WorkOptions {
        retries: vec![Duration::from_millis(300); 100],
        ..worker("a")
    };
    let progress = Progress::default();
    std::thread::scope(|s| {
        let running = s.spawn(|| a.work_on_job(APP, "nightly", Some(0), &slow, &progress));
        let deadline = Instant::now() + Duration::from_secs(60);
        while a.job(APP, "nightly").unwrap().unwrap().shards[0].state != ShardState::Running {
            assert!(Instant::now() < deadline, "a never took the shard");
            std::thread::sleep(Duration::from_millis(10));
        }
        progress.release.store(true, Ordering::Relaxed);
        let err = running.join().unwrap().unwrap_err();
        assert!(matches!(err, affinity_engine::Error::Stopped), "{err}");
    });
    failures.store(0, Ordering::SeqCst);
    let job = b.job(APP, "nightly").unwrap().unwrap();
    let shard = &job.shards[0];
    assert_eq!(shard.state, ShardState::Stalled, "{job:?}");
    assert_eq!(shard.worker.as_deref(), Some("a"));
    assert!(shard.lease_expires_at.unwrap() < clock.now(), "{job:?}");
    assert_eq!(shard.detail["status"], "released", "{job:?}");
    let done = b
        .work_on_job(APP, "nightly", None, &worker("b"), &Progress::default())
        .unwrap();
    let seen = done.to_json(clock.now());
    assert_eq!(seen["status"], "succeeded", "{seen}");
    assert_eq!(seen["shards"][0]["worker"], "b", "{seen}");
    assert_eq!(seen["report"]["users"], 4, "{seen}");
    assert_eq!(read_texts(&a, APP, &users), before);
}

/// Poll `check` until it holds, for at most `SETTINGS_REFRESH` and a
/// generous margin for a loaded machine (not a timing assert: the bound
/// is what the docs promise, the margin only keeps the test from hanging).
fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + SETTINGS_REFRESH * 10;
    while !check() {
        assert!(Instant::now() < deadline, "{what}: never seen");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn settings_changed_through_one_engine_reach_the_other(store: Arc<dyn Store>, clock: &FakeClock) {
    let (a, b) = two_engines(store, clock);
    assert_eq!(b.app(APP).unwrap().config.retention_days, 90);
    a.configure_app(
        APP,
        AppConfig {
            schema: Schema::Narrow,
            retention_days: 30,
        },
    )
    .unwrap();
    eventually("retention", || {
        b.app(APP).unwrap().config.retention_days == 30
    });
    a.start_migration(APP, Schema::Wide).unwrap();
    eventually("migration start", || {
        b.app(APP).unwrap().dual_write == Some(Schema::Wide)
    });
    assert!(a.backfill(APP, &Progress::default(), None).unwrap());
    a.cut_over(APP).unwrap();
    eventually("cut-over", || {
        let app = b.app(APP).unwrap();
        app.config.schema == Schema::Wide && app.dual_write.is_none()
    });
}

macro_rules! suite {
    ($module:ident, $store:expr, $ignore:meta) => {
        mod $module {
            use super::*;

            fn store(clock: &FakeClock) -> Arc<dyn Store> {
                #[allow(clippy::redundant_closure_call)]
                ($store)(clock)
            }

            #[$ignore]
            #[test]
            fn ids_are_unique_and_every_engine_reads_every_job() {
                let clock = FakeClock::new(real_now());
                super::ids_are_unique_and_every_engine_reads_every_job(store(&clock), &clock);
            }

            #[$ignore]
            #[test]
            fn bad_jobs_are_refused() {
                let clock = FakeClock::new(real_now());
                super::bad_jobs_are_refused(store(&clock), &clock);
            }

            #[$ignore]
            #[test]
            fn a_dead_workers_shard_is_taken_over() {
                let clock = FakeClock::new(real_now());
                super::a_dead_workers_shard_is_taken_over(store(&clock), &clock);
            }

            #[$ignore]
            #[test]
            fn finished_jobs_are_forgotten() {
                let clock = FakeClock::new(real_now());
                super::finished_jobs_are_forgotten(store(&clock), &clock);
            }

            #[$ignore]
            #[test]
            fn transient_store_errors_are_retried() {
                let clock = FakeClock::new(real_now());
                super::transient_store_errors_are_retried(store(&clock), &clock);
            }

            #[$ignore]
            #[test]
            fn a_handed_back_shard_is_taken_over_at_once() {
                let clock = FakeClock::new(real_now());
                super::a_handed_back_shard_is_taken_over_at_once(store(&clock), &clock);
            }

            #[$ignore]
            #[test]
            fn settings_changed_through_one_engine_reach_the_other() {
                let clock = FakeClock::new(real_now());
                super::settings_changed_through_one_engine_reach_the_other(store(&clock), &clock);
            }
        }
    };
}

suite!(memory, |c: &FakeClock| c.memory_store(), allow(unused));
suite!(
    embedded,
    |_: &FakeClock| -> Arc<dyn Store> {
        let dir = Box::leak(Box::new(tempfile::tempdir().unwrap()));
        Arc::new(affinity_embedded::EmbeddedStore::open(dir.path()).unwrap())
    },
    allow(unused)
);
suite!(
    emulator,
    |_: &FakeClock| -> Arc<dyn Store> { affinity_bigtable::emulator::test_store() },
    ignore = "needs the Cloud Bigtable emulator (scripts/test runs it)"
);
