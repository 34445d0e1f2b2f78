//! Maintenance: fold every user's closed days into their rollup and take
//! expired days out of it (see [`crate::rollup`]), and digest the closed
//! hours of their row of today (see [`crate::digest`]), so profile reads
//! touch the rollup, the few days since and today's last hours.
//!
//! Users are found in `profiles.<app>` itself: its key range is split at
//! the table's `sample_row_keys`, each cut moved back to the start of its
//! user, and each range walked user by user: one read finds the next
//! user and the key of its first row; when that row is the rollup, a
//! second reads its watermark, late markers and deletion state (not its
//! counters). That tells a user with nothing to fold, as almost every
//! user is at almost every run; the fold of any other user reads its
//! rollup and the rows it needs. Ranges go to parallel threads; with `shard = (i, n)` a process
//! takes ranges `i, i + n, ...`, so `n` processes (an indexed job) cover
//! the application once. A fold commits per user, so a maintenance cut
//! short and run again only redoes users it had not reached.

use std::sync::atomic::Ordering;
use std::sync::Mutex;

use affinity_model::{prefix_successor, Bytes, ReadRowsRequest, RowFilter, RowRange, RowSet};

use crate::batch::{run_ranges, visit_rows, Progress};
use crate::digest::DigestOutcome;
use crate::engine::{App, Engine};
use crate::error::{Error, Result};
use crate::rollup::{closed_through, read_rollup_head, rollup_key, row_day, FoldOutcome, Rollup};

/// How to run a maintenance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaintainOptions {
    /// Parallel threads (default 2).
    pub threads: usize,
    /// `(i, n)`: take only shard `i` of `n`.
    pub shard: Option<(usize, usize)>,
}

impl Default for MaintainOptions {
    fn default() -> MaintainOptions {
        MaintainOptions {
            threads: 2,
            shard: None,
        }
    }
}

/// What a maintenance did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MaintainReport {
    /// Users visited.
    pub users: u64,
    /// Users whose rollup was rewritten.
    pub folded: u64,
    /// Day rows read by the folds.
    pub rows_read: u64,
    /// Users whose rows of today had closed hours digested
    /// ([`Engine::digest_user`]).
    pub digested: u64,
    /// Users another fold, digest or deletion got to first (nothing
    /// written; the next maintenance folds or digests them).
    pub conflicts: u64,
    /// Key ranges run (a named job skips those it finished before).
    pub ranges: usize,
}

/// The user of a `profiles.<app>` key (`None` for the `~` rows of jobs).
fn user_of(key: &[u8]) -> Option<&[u8]> {
    let user = key.split(|b| *b == b',').next()?;
    (!user.is_empty() && !key.starts_with(b"~")).then_some(user)
}

/// The key range of `profiles.<app>` that holds users, cut at the table's
/// sample keys moved back to the start of their user.
fn user_ranges(app: &App) -> Result<Vec<RowRange>> {
    let mut cuts: Vec<Bytes> = Vec::new();
    for sample in app.profiles.sample_row_keys()? {
        if let Some(user) = user_of(&sample.row_key) {
            let mut cut = user.to_vec();
            cut.push(b',');
            if cuts.last().is_none_or(|c| c.as_ref() < cut.as_slice()) {
                cuts.push(Bytes::from(cut));
            }
        }
    }
    let mut out = Vec::with_capacity(cuts.len() + 1);
    let mut lo = std::ops::Bound::Unbounded;
    for cut in cuts {
        out.push(RowRange {
            start: lo,
            end: std::ops::Bound::Excluded(cut.clone()),
        });
        lo = std::ops::Bound::Included(cut);
    }
    // Job rows (`~...`) sort after every user token.
    out.push(RowRange {
        start: lo,
        end: std::ops::Bound::Excluded(Bytes::from_static(b"~")),
    });
    Ok(out)
}

/// The first user whose rows start at or after `cursor` within `range`.
pub(crate) fn next_user(
    app: &App,
    range: &RowRange,
    cursor: &std::ops::Bound<Bytes>,
) -> Result<Option<String>> {
    Ok(next_user_row(app, range, cursor)?.map(|(user, _)| user))
}

/// [`next_user`] and the key of its first row.
fn next_user_row(
    app: &App,
    range: &RowRange,
    cursor: &std::ops::Bound<Bytes>,
) -> Result<Option<(String, Vec<u8>)>> {
    let request = ReadRowsRequest::new(RowSet::from_range(RowRange {
        start: cursor.clone(),
        end: range.end.clone(),
    }))
    .with_filter(RowFilter::Chain(vec![
        RowFilter::CellsPerRowLimit(1),
        RowFilter::StripValue,
    ]))
    .with_limit(1);
    let mut found = None;
    visit_rows(app.profiles.as_ref(), &request, |row| {
        found = user_of(row.key)
            .map(|u| {
                String::from_utf8(u.to_vec())
                    .map(|u| (u, row.key.to_vec()))
                    .map_err(|_| Error::corrupt("profile row key", format!("{:?}", row.key)))
            })
            .transpose()?;
        Ok(())
    })?;
    Ok(found)
}

/// The first row of a user, as maintenance reads it.
struct UserHead {
    user: String,
    key: Vec<u8>,
    /// The rollup's watermark, markers and deletion state
    /// ([`read_rollup_head`]) when the row is the user's rollup.
    rollup: Option<Rollup>,
}

impl UserHead {
    /// Whether a fold of this user at arrival day `h_new`, window start
    /// `window`, may have work: the rollup is not [`Rollup::up_to_date`],
    /// or, without one, the user's first day row (rows sort by day) is of
    /// a closed day. Unsure (a key it cannot read) is yes: the fold looks.
    fn fold_due(&self, h_new: i64, window: i64) -> bool {
        match &self.rollup {
            Some(rollup) => !rollup.up_to_date(h_new, window),
            None => row_day(&self.key, &self.user).map_or(true, |day| day <= h_new),
        }
    }
}

/// [`next_user`] with what its first row says about its fold: a user
/// with nothing to fold costs this read and, with a rollup, a read of its
/// watermark, markers and deletion state, instead of the fold's reads.
fn next_user_head(
    app: &App,
    range: &RowRange,
    cursor: &std::ops::Bound<Bytes>,
) -> Result<Option<UserHead>> {
    let Some((user, key)) = next_user_row(app, range, cursor)? else {
        return Ok(None);
    };
    let rollup = if key == rollup_key(&user).as_bytes() {
        Some(read_rollup_head(app, &user)?)
    } else {
        None
    };
    Ok(Some(UserHead { user, key, rollup }))
}

impl Engine {
    /// Fold every user of the application (or of one shard), see the
    /// module docs. [`Progress`] counts users and, as `events`, the day
    /// rows read.
    pub fn maintain(
        &self,
        app: &str,
        options: MaintainOptions,
        progress: &Progress,
    ) -> Result<MaintainReport> {
        self.run_maintain(app, options, None, progress)
    }

    /// [`Engine::maintain`] as the persistent job `job` (see `job.rs`):
    /// every process given the name (the N shards of an
    /// indexed job) shares one split, and a rerun skips finished ranges.
    pub fn maintain_job(
        &self,
        app: &str,
        options: MaintainOptions,
        job: &str,
        progress: &Progress,
    ) -> Result<MaintainReport> {
        self.run_maintain(app, options, Some(job), progress)
    }

    fn run_maintain(
        &self,
        app: &str,
        options: MaintainOptions,
        job: Option<&str>,
        progress: &Progress,
    ) -> Result<MaintainReport> {
        let app = self.app(app)?;
        let report = Mutex::new(MaintainReport::default());
        let ranges = run_ranges(
            &app,
            user_ranges(&app)?,
            options.threads,
            options.shard,
            job,
            progress,
            |range| {
                let local = self.maintain_range(&app, &range, progress)?;
                let mut total = report.lock().unwrap_or_else(|p| p.into_inner());
                total.users += local.users;
                total.folded += local.folded;
                total.rows_read += local.rows_read;
                total.digested += local.digested;
                total.conflicts += local.conflicts;
                Ok(())
            },
        )?;
        let mut report = report.into_inner().unwrap_or_else(|p| p.into_inner());
        report.ranges = ranges.run;
        Ok(report)
    }

    /// Fold the users of one range, one after the other.
    fn maintain_range(
        &self,
        app: &App,
        range: &RowRange,
        progress: &Progress,
    ) -> Result<MaintainReport> {
        let mut local = MaintainReport::default();
        let mut cursor = range.start.clone();
        while let Some(head) = next_user_head(app, range, &cursor)? {
            if progress.stopping() {
                return Err(Error::Stopped);
            }
            let user = head.user.as_str();
            let now = self.now_millis();
            let due = head.fold_due(closed_through(now), app.config.window_start_day(now));
            let outcome = if due {
                self.fold_user(app, user)?
            } else {
                FoldOutcome::UpToDate
            };
            match outcome {
                FoldOutcome::UpToDate => {}
                FoldOutcome::Folded { rows_read } => {
                    local.folded += 1;
                    local.rows_read += rows_read as u64;
                    progress
                        .events
                        .fetch_add(rows_read as u64, Ordering::Relaxed);
                }
                FoldOutcome::Conflict => local.conflicts += 1,
            }
            match self.digest_user(app, user)? {
                DigestOutcome::UpToDate => {}
                DigestOutcome::Digested => local.digested += 1,
                DigestOutcome::Conflict => local.conflicts += 1,
            }
            local.users += 1;
            progress.users.fetch_add(1, Ordering::Relaxed);
            match prefix_successor(format!("{user},").as_bytes()) {
                Some(after) => cursor = std::ops::Bound::Included(Bytes::from(after)),
                None => break,
            }
        }
        Ok(local)
    }
}
