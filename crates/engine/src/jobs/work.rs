//! Working on a job: leases, shards taken over, progress and outcome
//! written under the lease (see the parent module's docs).

use std::sync::atomic::Ordering;
use std::time::Duration;

use affinity_model::{Bytes, Mutation, RowFilter, ValueRange};
use serde_json::{json, Value};

use super::{column, row_key, JobKind, JobStatus, ShardState, ShardStatus, FAMILY};
use crate::batch::Progress;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::{MaintainOptions, RebuildOptions};

/// How a worker runs a job's shards.
#[derive(Debug, Clone)]
pub struct WorkOptions {
    /// This worker's name, unique among the workers of the store.
    pub worker: String,
    /// How long a lease lasts without renewal: a dead worker's shard is
    /// taken over this long after its last renewal.
    pub lease: Duration,
    /// Parallel threads per shard.
    pub threads: usize,
    /// The waits before a shard's work is run again after a store error
    /// a retry may cure (default [`RETRY_BACKOFF`]); past the last, the
    /// shard fails.
    pub retries: Vec<Duration>,
}

/// The default lease length.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(15);

/// The default waits before a shard's work is run again after a store
/// error a retry may cure: about a minute of outage is ridden out.
pub const RETRY_BACKOFF: [Duration; 5] = [
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(5),
    Duration::from_secs(15),
    Duration::from_secs(40),
];

impl WorkOptions {
    /// A worker named after this process (`host-pid-random`).
    pub fn this_process(threads: usize) -> WorkOptions {
        let host = std::env::var("HOSTNAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "worker".into());
        WorkOptions {
            worker: format!(
                "{host}-{}-{:04x}",
                std::process::id(),
                rand::random::<u16>()
            ),
            lease: DEFAULT_LEASE,
            threads,
            retries: RETRY_BACKOFF.to_vec(),
        }
    }
}

fn lease_value(expiry_millis: i64, worker: &str) -> Vec<u8> {
    format!("{:016},{worker}", expiry_millis.max(0)).into_bytes()
}

/// Cells of column `qualifier` whose value is exactly `value`.
fn exact_value(qualifier: &str, value: &[u8]) -> RowFilter {
    let v = Bytes::copy_from_slice(value);
    RowFilter::Chain(vec![
        RowFilter::exact_family(FAMILY),
        RowFilter::exact_qualifier(qualifier.as_bytes()),
        RowFilter::ValueRange(ValueRange {
            start: std::ops::Bound::Included(v.clone()),
            end: std::ops::Bound::Included(v),
        }),
    ])
}

/// Matches when shard `index` is done or leased until `now` or later.
fn taken(index: usize, now: i64) -> RowFilter {
    RowFilter::Interleave(vec![
        RowFilter::Chain(vec![
            RowFilter::exact_family(FAMILY),
            RowFilter::exact_qualifier(column("lease", index).as_bytes()),
            RowFilter::ValueRange(ValueRange {
                start: std::ops::Bound::Included(Bytes::from(format!("{:016}", now.max(0)))),
                end: std::ops::Bound::Unbounded,
            }),
        ]),
        RowFilter::Chain(vec![
            RowFilter::exact_family(FAMILY),
            RowFilter::exact_qualifier(column("done", index).as_bytes()),
        ]),
    ])
}

/// A shard's stored detail: its progress, its report or error.
fn detail(worker: &str, now: i64, progress: &Progress, outcome: Option<&Result<Value>>) -> Value {
    let p = progress.snapshot();
    let mut out = json!({
        "worker": worker,
        "updatedAt": now,
        "progress": {"users": p.users, "rowsRead": p.events,
                     "rangesDone": p.ranges_done, "rangesTotal": p.ranges_total},
    });
    match outcome {
        Some(Ok(report)) => {
            out["status"] = "succeeded".into();
            out["report"] = report.clone();
        }
        Some(Err(e)) => {
            out["status"] = "failed".into();
            out["error"] = e.to_string().into();
        }
        None => out["status"] = "running".into(),
    }
    out
}

impl Engine {
    /// Work on job `id` until every shard is done: shard `prefer` first
    /// (an indexed job's own index), then any shard free to take (see the
    /// module docs); waits while other live workers hold the rest.
    /// `progress` shows the shard being run.
    pub fn work_on_job(
        &self,
        app: &str,
        id: &str,
        prefer: Option<usize>,
        options: &WorkOptions,
        progress: &Progress,
    ) -> Result<JobStatus> {
        let poll = (options.lease / 4).clamp(Duration::from_millis(50), Duration::from_secs(2));
        loop {
            let job = self.job(app, id)?.ok_or_else(|| Error::InvalidArgument {
                name: "job",
                reason: format!("no job {id:?} in application {app:?}"),
            })?;
            if job.finished() {
                return Ok(job);
            }
            if progress.release.load(Ordering::Relaxed) {
                return Err(Error::Stopped);
            }
            let now = self.now_millis();
            let grace = now - job.created_at < options.lease.as_millis() as i64;
            let mut order: Vec<&ShardStatus> = job.shards.iter().collect();
            if let Some(p) = prefer {
                order.sort_by_key(|s| s.index != p);
            }
            let mut ran = false;
            for shard in order {
                let free = match shard.state {
                    ShardState::Pending => Some(shard.index) == prefer || !grace,
                    ShardState::Stalled => true,
                    _ => false,
                };
                if free && self.take_shard(&job, shard.index, options)? {
                    self.run_shard(&job, shard.index, options, progress)?;
                    ran = true;
                    break;
                }
            }
            if !ran && !progress.release.load(Ordering::Relaxed) {
                std::thread::sleep(poll);
            }
        }
    }

    /// Take shard `index` under a lease if it is free; true if taken.
    fn take_shard(&self, job: &JobStatus, index: usize, options: &WorkOptions) -> Result<bool> {
        let now = self.now_millis();
        let value = lease_value(now + options.lease.as_millis() as i64, &options.worker);
        let held = self.jobs_table.check_and_mutate_row(
            &row_key(&job.app, &job.id),
            Some(&taken(index, now)),
            &[],
            &[Mutation::set_cell(FAMILY, column("lease", index), 0, value)],
        )?;
        Ok(!held)
    }

    /// Run shard `index`, which this worker leased, renewing the lease
    /// and writing progress on a second thread; the outcome is written
    /// only while the lease is still this worker's.
    fn run_shard(
        &self,
        job: &JobStatus,
        index: usize,
        options: &WorkOptions,
        progress: &Progress,
    ) -> Result<()> {
        let key = row_key(&job.app, &job.id);
        let lease_ms = options.lease.as_millis() as i64;
        let Some(first) = self.current_lease(&key, index)? else {
            return Ok(());
        };
        if !first.ends_with(format!(",{}", options.worker).as_bytes()) {
            return Ok(());
        }
        let mine = std::sync::Mutex::new(first);
        progress.stop.store(false, Ordering::Relaxed);
        progress.ranges_done.store(0, Ordering::Relaxed);
        progress.ranges_total.store(0, Ordering::Relaxed);
        let base = (
            progress.users.load(Ordering::Relaxed),
            progress.events.load(Ordering::Relaxed),
        );
        let shard_progress = Progress::default();
        let lease_col = column("lease", index);
        let shard_col = column("shard", index);
        // Swap the lease for one expiring at `expiry` and write `extra`, if
        // it is still this worker's.
        let swap = |expiry: i64, extra: Vec<Mutation>| -> Result<bool> {
            let mut guard = mine.lock().unwrap_or_else(|p| p.into_inner());
            let next = lease_value(expiry, &options.worker);
            let mut mutations = vec![Mutation::set_cell(
                FAMILY,
                lease_col.clone(),
                0,
                next.clone(),
            )];
            mutations.extend(extra);
            let ok = self.jobs_table.check_and_mutate_row(
                &key,
                Some(&exact_value(&lease_col, &guard)),
                &mutations,
                &[],
            )?;
            if ok {
                *guard = next;
            }
            Ok(ok)
        };
        let renew = |extra: Vec<Mutation>| swap(self.now_millis() + lease_ms, extra);
        let snapshot = |outcome: Option<&Result<Value>>| {
            shard_progress.users.store(
                progress.users.load(Ordering::Relaxed) - base.0,
                Ordering::Relaxed,
            );
            shard_progress.events.store(
                progress.events.load(Ordering::Relaxed) - base.1,
                Ordering::Relaxed,
            );
            for (to, from) in [
                (&shard_progress.ranges_done, &progress.ranges_done),
                (&shard_progress.ranges_total, &progress.ranges_total),
            ] {
                to.store(from.load(Ordering::Relaxed), Ordering::Relaxed);
            }
            detail(&options.worker, self.now_millis(), &shard_progress, outcome)
        };
        let write_detail = |value: &Value| -> Result<Mutation> {
            Ok(Mutation::set_cell(
                FAMILY,
                shard_col.clone(),
                0,
                serde_json::to_vec(value)?,
            ))
        };
        if !renew(vec![write_detail(&snapshot(None))?])? {
            return Ok(());
        }
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let outcome = std::thread::scope(|s| {
            let (renew, snapshot, write_detail) = (&renew, &snapshot, &write_detail);
            let renewer = s.spawn(move || -> Result<()> {
                let every = options.lease / 3;
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stop_rx.recv_timeout(every)
                {
                    let still = match write_detail(&snapshot(None)) {
                        Ok(m) => renew(vec![m]),
                        Err(e) => Err(e),
                    };
                    match still {
                        Ok(true) => {}
                        Ok(false) => {
                            warn(&job.id, index, "the lease went to another worker");
                            progress.stop.store(true, Ordering::Relaxed);
                            return Ok(());
                        }
                        // The store is unreachable: keep trying until the
                        // lease would have expired anyway.
                        Err(e) => warn(&job.id, index, &e.to_string()),
                    }
                }
                Ok(())
            });
            let outcome = self.run_kind_retrying(job, index, options, progress);
            let _ = stop_tx.send(());
            let _ = renewer.join();
            outcome
        });
        if matches!(outcome, Err(Error::Stopped)) {
            if progress.release.load(Ordering::Relaxed) {
                // Handed back: the lease, if still this worker's, expired
                // a millisecond ago, so the next worker to look takes the
                // shard over; the ranges it finished stay finished.
                let mut released = snapshot(None);
                released["status"] = "released".into();
                swap(self.now_millis() - 1, vec![write_detail(&released)?])?;
            }
            return Ok(());
        }
        let done = Mutation::set_cell(FAMILY, column("done", index), 0, Vec::new());
        let finished = vec![
            write_detail(&snapshot(Some(&outcome)))?,
            done,
            Mutation::delete_column(FAMILY, lease_col.clone().into_bytes()),
        ];
        renew(finished)?;
        Ok(())
    }

    fn current_lease(&self, key: &[u8], index: usize) -> Result<Option<Vec<u8>>> {
        let filter = RowFilter::Chain(vec![
            RowFilter::exact_family(FAMILY),
            RowFilter::exact_qualifier(column("lease", index).as_bytes()),
            RowFilter::CellsPerColumnLimit(1),
        ]);
        Ok(self
            .jobs_table
            .read_row(key, Some(&filter))?
            .and_then(|r| r.cells.into_iter().next())
            .map(|c| c.value.to_vec()))
    }

    /// [`Engine::run_kind`], run again after a store error that a retry
    /// may cure (unavailable, deadline exceeded: the Bigtable client's own
    /// retries gave up, or the embedded store's disk was full), after
    /// the waits of `options.retries`, while the lease is this worker's. A rerun
    /// skips the ranges the shard already finished, so it costs only the
    /// range that failed. Any other error fails the shard at once.
    fn run_kind_retrying(
        &self,
        job: &JobStatus,
        index: usize,
        options: &WorkOptions,
        progress: &Progress,
    ) -> Result<Value> {
        let mut waits = options.retries.iter();
        loop {
            match self.run_kind(job, index, options.threads, progress) {
                // Told to stop (handed back, or the lease went elsewhere)
                // while the run failed: the shard stops, it has not failed.
                Err(Error::Store(e)) if e.is_retryable() && progress.stopping() => {
                    return Err(Error::Stopped)
                }
                Err(Error::Store(e)) if e.is_retryable() => match waits.next() {
                    Some(wait) => {
                        warn(
                            &job.id,
                            index,
                            &format!("{e}; trying again in {:.1} s", wait.as_secs_f64()),
                        );
                        std::thread::sleep(*wait);
                        // The renewer stops the shard when the lease went
                        // elsewhere meanwhile.
                        if progress.stopping() {
                            return Err(Error::Stopped);
                        }
                    }
                    None => return Err(Error::Store(e)),
                },
                outcome => return outcome,
            }
        }
    }

    /// Run the job's work for shard `index`; its report as JSON.
    fn run_kind(
        &self,
        job: &JobStatus,
        index: usize,
        threads: usize,
        progress: &Progress,
    ) -> Result<Value> {
        let shard = Some((index, job.shards.len()));
        match job.kind {
            JobKind::Maintain => {
                let options = MaintainOptions { threads, shard };
                let r = self.maintain_job(&job.app, options, &job.id, progress)?;
                Ok(
                    json!({"users": r.users, "folded": r.folded, "rowsRead": r.rows_read,
                          "digested": r.digested, "conflicts": r.conflicts, "ranges": r.ranges}),
                )
            }
            JobKind::Rebuild => {
                let options = RebuildOptions { threads, shard };
                let r = self.rebuild_job(&job.app, options, &job.id, progress)?;
                Ok(
                    json!({"users": r.users, "events": r.events, "restored": r.restored,
                          "markers": r.markers, "ranges": r.ranges}),
                )
            }
        }
    }
}

/// Say why a shard's worker stops or struggles (stderr: the engine has no
/// logger of its own).
fn warn(job: &str, shard: usize, why: &str) {
    eprintln!("job {job} shard {shard}: {why}");
}
