//! The batch pipeline's machinery, shared by its jobs (`export.rs`,
//! `rebuild.rs`, `maintain.rs`): key ranges cut at user boundaries,
//! shards, threads, named restartable jobs (`job.rs`) and live
//! [`Progress`].
//!
//! A job's key range is split at the table's `sample_row_keys`, each cut
//! moved back to the start of its user, so no user spans two ranges.
//! Ranges go to parallel threads. Shards: with `shard = (i, n)`, a process
//! takes ranges `i, i + n, ...` of the split, so `n` processes cover the
//! application once; a named job stores its split, so they agree on it,
//! and a rerun skips the ranges it finished.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use affinity_model::{Bytes, ReadRowsRequest, RowRange, Table};
use affinity_rowkey::composite::app_prefix;

use crate::engine::App;
use crate::error::{Error, Result};
use crate::job;

/// Live counters of a batch job, shared with whoever watches it: what
/// `events` and `users` count is the job's to say.
#[derive(Debug)]
pub struct Progress {
    pub events: AtomicU64,
    pub users: AtomicU64,
    pub ranges_done: AtomicUsize,
    pub ranges_total: AtomicUsize,
    /// Set to stop the job before its next range (or user): a shared job
    /// whose lease was lost (`jobs.rs`) stops this way.
    pub stop: AtomicBool,
    /// Set to hand a shared job back (a server shutting down): its worker
    /// stops before the next range (or user), gives its lease up at once,
    /// so another worker resumes the shard without waiting for the lease
    /// to expire, and returns [`Error::Stopped`].
    pub release: AtomicBool,
    started: Instant,
}

impl Default for Progress {
    fn default() -> Progress {
        Progress {
            events: AtomicU64::new(0),
            users: AtomicU64::new(0),
            ranges_done: AtomicUsize::new(0),
            ranges_total: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            release: AtomicBool::new(false),
            started: Instant::now(),
        }
    }
}

/// A consistent-enough reading of [`Progress`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProgressSnapshot {
    pub events: u64,
    pub users: u64,
    pub ranges_done: usize,
    pub ranges_total: usize,
    pub elapsed: Duration,
    /// Events per second so far.
    pub rate: f64,
    /// Estimated time left, from the share of ranges done.
    pub eta: Option<Duration>,
}

impl Progress {
    /// Whether the job is to stop before its next range (or user):
    /// [`Progress::stop`] or [`Progress::release`].
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.release.load(Ordering::Relaxed)
    }

    pub fn snapshot(&self) -> ProgressSnapshot {
        let elapsed = self.started.elapsed();
        let events = self.events.load(Ordering::Relaxed);
        let done = self.ranges_done.load(Ordering::Relaxed);
        let total = self.ranges_total.load(Ordering::Relaxed);
        let secs = elapsed.as_secs_f64();
        let eta = (done > 0 && total >= done)
            .then(|| Duration::from_secs_f64(secs * (total - done) as f64 / done as f64));
        ProgressSnapshot {
            events,
            users: self.users.load(Ordering::Relaxed),
            ranges_done: done,
            ranges_total: total,
            elapsed,
            rate: if secs > 0.0 {
                events as f64 / secs
            } else {
                0.0
            },
            eta,
        }
    }
}

/// The user token of an events key `app,user,...`.
pub(crate) fn event_user(key: &[u8]) -> Option<&[u8]> {
    let mut parts = key.splitn(3, |b| *b == b',');
    parts.next()?;
    parts.next()
}

/// The app's key range (one per salt bucket when salted) cut at the
/// table's sample keys, each cut moved back to the start of its user.
pub(crate) fn event_ranges(app: &App) -> Result<Vec<RowRange>> {
    let samples = app.events.sample_row_keys()?;
    let mut out = Vec::new();
    for (salt, whole) in app.physical_ranges(&app_prefix(&app.id)?) {
        let (std::ops::Bound::Included(start), end) = (&whole.start, &whole.end) else {
            out.push(whole);
            continue;
        };
        let mut cuts: Vec<Bytes> = Vec::new();
        for sample in &samples {
            let key = &sample.row_key;
            if !whole.contains(key) || key.len() < salt.len() {
                continue;
            }
            let Some(user) = event_user(&key[salt.len()..]) else {
                continue;
            };
            let mut cut = salt.clone();
            cut.extend_from_slice(format!("{},", app.id).as_bytes());
            cut.extend_from_slice(user);
            cut.push(b',');
            if cut.as_slice() > start.as_ref()
                && cuts.last().is_none_or(|c| c.as_ref() < cut.as_slice())
            {
                cuts.push(Bytes::from(cut));
            }
        }
        let mut lo = std::ops::Bound::Included(start.clone());
        for cut in cuts {
            out.push(RowRange {
                start: lo,
                end: std::ops::Bound::Excluded(cut.clone()),
            });
            lo = std::ops::Bound::Included(cut);
        }
        out.push(RowRange {
            start: lo,
            end: end.clone(),
        });
    }
    Ok(out)
}

/// [`Table::visit_rows`] with a visitor that may fail with an engine
/// error, which ends the read and is returned.
pub(crate) fn visit_rows(
    table: &dyn Table,
    request: &ReadRowsRequest,
    mut visit: impl FnMut(affinity_model::RowRef<'_>) -> Result<()>,
) -> Result<()> {
    let mut failure = None;
    table.visit_rows(request, &mut |row| match visit(row) {
        Ok(()) => Ok(true),
        Err(e) => {
            failure = Some(e);
            Ok(false)
        }
    })?;
    failure.map_or(Ok(()), Err)
}

/// Check a shard `(i, n)`.
fn check_shard(shard: Option<(usize, usize)>) -> Result<(usize, usize)> {
    let (i, n) = shard.unwrap_or((0, 1));
    if n == 0 || i >= n {
        return Err(Error::InvalidArgument {
            name: "shard",
            reason: format!("{i}/{n}: need 0 <= I < N"),
        });
    }
    Ok((i, n))
}

/// The ranges [`run_ranges`] was given and ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RangesRun {
    /// The shard's ranges.
    pub shard: usize,
    /// Those run now (the others a named job had finished before).
    pub run: usize,
}

/// Run `work` on each range of `split` that `shard` takes, on up to
/// `threads` threads. With `job`, the split is the job's stored one
/// (`split`, stored by the first process to get there), ranges the job
/// finished are skipped, and a range is marked finished once `work`
/// returns for it. `progress` counts the shard's ranges.
pub(crate) fn run_ranges(
    app: &App,
    split: Vec<RowRange>,
    threads: usize,
    shard: Option<(usize, usize)>,
    job: Option<&str>,
    progress: &Progress,
    work: impl Fn(RowRange) -> Result<()> + Sync,
) -> Result<RangesRun> {
    let (i, n) = check_shard(shard)?;
    let (split, finished) = match job {
        Some(name) => (job::plan(app, name, split)?, job::done(app, name)?),
        None => (split, Default::default()),
    };
    let mine: Vec<(usize, RowRange)> = split.into_iter().enumerate().skip(i).step_by(n).collect();
    let shard_ranges = mine.len();
    let todo: Vec<(usize, RowRange)> = mine
        .into_iter()
        .filter(|(k, _)| !finished.contains(k))
        .collect();
    let run = todo.len();
    progress.ranges_total.store(shard_ranges, Ordering::Relaxed);
    progress
        .ranges_done
        .store(shard_ranges - run, Ordering::Relaxed);
    let queue = Mutex::new(todo.into_iter());
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.clamp(1, run.max(1)))
            .map(|_| {
                s.spawn(|| -> Result<()> {
                    loop {
                        let next = queue.lock().unwrap_or_else(|p| p.into_inner()).next();
                        let Some((index, range)) = next else {
                            return Ok(());
                        };
                        if progress.stopping() {
                            return Err(Error::Stopped);
                        }
                        work(range)?;
                        if let Some(name) = job {
                            job::mark_done(app, name, index)?;
                        }
                        progress.ranges_done.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(Error::Worker("a batch thread panicked".into())))
            })
            .collect()
    });
    for r in results {
        r?;
    }
    Ok(RangesRun {
        shard: shard_ranges,
        run,
    })
}
