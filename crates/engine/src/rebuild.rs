//! Rebuild: profile state re-derived from the events table, the way to
//! repair it (a lost or restored `profiles.<app>`, events loaded into the
//! events table without state).
//!
//! The scan is the batch pipeline's (`batch.rs`: ranges at user
//! boundaries, threads, shards, named restartable jobs) over every event
//! in the reads' window, all facets. Events are taken in batches; for each
//! batch one read of `profiles.<app>` fetches, per user, the rollup row and
//! the id cells of the batch's days. Then:
//! - an event whose id is in its day row is left alone: its state is
//!   there;
//! - the others get their state written exactly as ingestion writes it
//!   (`Engine::write_state`: a late event's marker first, adds stamped
//!   with today's arrival day);
//! - a late add (arrived on day `A`, after its event's day `D`) not folded
//!   into the rollup yet, but without the marker `m:D @A` ingestion wrote
//!   for it (as after a lost rollup row), gets its marker again.
//!
//! So a rebuild restores state that is missing and never double counts: an
//! event added by an ingestion racing with the rebuild has two adds, which
//! reads count once (see `ingest.rs`), and a second rebuild writes nothing.
//! It cannot take state out: state of events no longer in the events table,
//! or a rollup whose day rows were lost (their events are added again). To
//! start over, delete `profiles.<app>` while nothing ingests, then rebuild.
//! Users being deleted, or deleted after the rebuild started, are skipped
//! (their rollup row holds the tombstone); a deletion racing with the
//! moment a user's state is written may leave that state, as a racing
//! ingestion may ([`Engine::user_row_count`] shows it). Regional trends
//! are not rebuilt.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use affinity_model::{Bytes, Mutation, ReadRowsRequest, RowFilter, RowMutations, RowRange, RowSet};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::arena::Arena;
use crate::batch::{event_ranges, event_user, run_ranges, visit_rows, Progress};
use crate::engine::{App, Engine, DAY_MILLIS};
use crate::error::{Error, Result};
use crate::ingest::Prepared;
use crate::rollup::{
    arrival_day, day_qualifier, deletion_started, rollup_key, row_day, Rollup, DELETING,
    MARKS_FAMILY, TOMBSTONE_FAMILY, WATERMARK_FAMILY,
};
use crate::schema::{decode_row_ref, since};
use crate::state::{day_micros, state_row_key, IDS_FAMILY};

/// Events restored together: one read of their users' state, then one
/// write of what is missing.
const BATCH: usize = 1000;

/// How to run a rebuild.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RebuildOptions {
    /// Parallel threads (default 2).
    pub threads: usize,
    /// `(i, n)`: take only shard `i` of `n`.
    pub shard: Option<(usize, usize)>,
}

impl Default for RebuildOptions {
    fn default() -> RebuildOptions {
        RebuildOptions {
            threads: 2,
            shard: None,
        }
    }
}

/// What a rebuild did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RebuildReport {
    /// Events read (those within the window).
    pub events: u64,
    /// Users read.
    pub users: u64,
    /// Events whose state was missing, and written.
    pub restored: u64,
    /// Late markers written again for late adds that had lost theirs.
    pub markers: u64,
    /// Key ranges run (a named job skips those it finished before).
    pub ranges: usize,
}

/// What one range (or all of them) did.
#[derive(Default)]
struct Done {
    events: u64,
    users: u64,
    restored: u64,
    markers: u64,
}

impl Done {
    fn add(&mut self, other: &Done) {
        self.events += other.events;
        self.users += other.users;
        self.restored += other.restored;
        self.markers += other.markers;
    }
}

/// What the state holds of one user's days in a batch.
#[derive(Default)]
struct Held {
    rollup: Rollup,
    /// The ids with an add.
    ids: FxHashSet<[u8; 16]>,
    /// `(event day, arrival day)` of the late adds (arrived after the
    /// event's day).
    late: BTreeSet<(i64, i64)>,
}

impl Held {
    /// Late adds that arrived after the watermark `h` without their
    /// marker `m:D @A` (as after a lost rollup row), as `(D, A)`.
    /// Ingestion marks every late add (see `ingest.rs`): without it a read
    /// counts an event added on two arrival days twice, and a fold passing
    /// `A` skips the add.
    fn unmarked(&self, h: i64) -> Vec<(i64, i64)> {
        let marked: BTreeSet<&(i64, i64)> = self.rollup.marks.iter().collect();
        self.late
            .iter()
            .filter(|late| late.1 > h && !marked.contains(late))
            .copied()
            .collect()
    }
}

/// The state rows of a batch's users: each user's rollup row (watermark,
/// markers, tombstone) and the id cells of the days the batch holds.
fn held_state(app: &App, events: &[Prepared]) -> Result<FxHashMap<Vec<u8>, Held>> {
    let mut rows = RowSet::default();
    for run in events.chunk_by(|a, b| a.user() == b.user()) {
        let user = run[0].user();
        let (first, last) = (run[0].id().day(), run[run.len() - 1].id().day());
        rows.keys.push(Bytes::from(rollup_key(user)));
        rows.ranges.push(RowRange::closed_open(
            state_row_key(user, first),
            state_row_key(user, last + 1),
        ));
    }
    let newest = |family: &str| {
        RowFilter::Chain(vec![
            RowFilter::exact_family(family),
            RowFilter::CellsPerColumnLimit(1),
        ])
    };
    let filter = RowFilter::interleave(vec![
        RowFilter::Chain(vec![
            RowFilter::exact_family(IDS_FAMILY),
            RowFilter::StripValue,
        ]),
        RowFilter::exact_family(MARKS_FAMILY),
        newest(WATERMARK_FAMILY),
        newest(TOMBSTONE_FAMILY),
    ]);
    // Rows come in key order: each user's together.
    let mut out: Vec<(Vec<u8>, Held)> = Vec::new();
    visit_rows(
        app.profiles.as_ref(),
        &ReadRowsRequest::new(rows).with_filter(filter),
        |row| {
            let (user, rest) = row.key.split_at(
                row.key
                    .iter()
                    .position(|b| *b == b',')
                    .unwrap_or(row.key.len()),
            );
            if out.last().is_none_or(|(u, _)| u.as_slice() != user) {
                out.push((user.to_vec(), Held::default()));
            }
            let Some((_, held)) = out.last_mut() else {
                return Ok(());
            };
            if rest == b",!" {
                held.rollup = Rollup::decode(&row)?;
                return Ok(());
            }
            let user = std::str::from_utf8(user)
                .map_err(|_| Error::corrupt("state row key", format!("{:?}", row.key)))?;
            let day = row_day(row.key, user)?;
            for cell in row.cells.iter().filter(|c| c.family == IDS_FAMILY) {
                let id: [u8; 16] = cell.qualifier.try_into().map_err(|_| {
                    Error::corrupt("event id qualifier", format!("{:?}", cell.qualifier))
                })?;
                held.ids.insert(id);
                let arrival = arrival_day(cell.timestamp_micros);
                if arrival > day {
                    held.late.insert((day, arrival));
                }
            }
            Ok(())
        },
    )?;
    Ok(out.into_iter().collect())
}

impl Engine {
    /// Rebuild the profile state of the application (or of one shard) from
    /// its events (see the module docs). [`Progress`] counts events and
    /// users read.
    pub fn rebuild(
        &self,
        app: &str,
        options: RebuildOptions,
        progress: &Progress,
    ) -> Result<RebuildReport> {
        self.run_rebuild(app, options, None, progress)
    }

    /// [`Engine::rebuild`] as the persistent job `job` (see `job.rs`):
    /// every process given the name (the N shards of an indexed job)
    /// shares one split, and a rerun skips finished ranges.
    pub fn rebuild_job(
        &self,
        app: &str,
        options: RebuildOptions,
        job: &str,
        progress: &Progress,
    ) -> Result<RebuildReport> {
        self.run_rebuild(app, options, Some(job), progress)
    }

    fn run_rebuild(
        &self,
        app: &str,
        options: RebuildOptions,
        job: Option<&str>,
        progress: &Progress,
    ) -> Result<RebuildReport> {
        let app = self.app(app)?;
        let started = self.now_millis();
        let rebuild = Rebuild {
            engine: self,
            app: &app,
            window: app.config.window_start_day(started),
            started,
            progress,
        };
        let total = Mutex::new(Done::default());
        let ranges = run_ranges(
            &app,
            event_ranges(&app)?,
            options.threads,
            options.shard,
            job,
            progress,
            |range| {
                let done = rebuild.range(range)?;
                total.lock().unwrap_or_else(|p| p.into_inner()).add(&done);
                Ok(())
            },
        )?;
        let total = total.into_inner().unwrap_or_else(|p| p.into_inner());
        Ok(RebuildReport {
            events: total.events,
            users: total.users,
            restored: total.restored,
            markers: total.markers,
            ranges: ranges.run,
        })
    }
}

/// One rebuild's fixed inputs, shared by its threads.
struct Rebuild<'a> {
    engine: &'a Engine,
    app: &'a App,
    /// The first day of the window.
    window: i64,
    /// When the rebuild started (ms): users deleted since are skipped.
    started: i64,
    progress: &'a Progress,
}

impl Rebuild<'_> {
    fn range(&self, range: RowRange) -> Result<Done> {
        let app = self.app;
        let request = ReadRowsRequest::new(RowSet::from_range(range))
            .with_filter(since(self.window * DAY_MILLIS));
        let mut done = Done::default();
        let mut batch: Vec<Prepared> = Vec::with_capacity(BATCH);
        let mut arena = Arena::new();
        let mut user: Vec<u8> = Vec::new();
        visit_rows(app.events.as_ref(), &request, |row| {
            let Some(key) = app.logical_key(row.key)? else {
                return Ok(());
            };
            let this = event_user(key)
                .ok_or_else(|| Error::corrupt("event key", format!("{:?}", row.key)))?;
            if done.users == 0 || this != user.as_slice() {
                user.clear();
                user.extend_from_slice(this);
                done.users += 1;
                self.progress.users.fetch_add(1, Ordering::Relaxed);
            }
            if let Some(event) = decode_row_ref(&row)? {
                batch.push(Prepared::stored(key, event)?);
            }
            if batch.len() >= BATCH {
                self.restore(&mut batch, &mut arena, &mut done)?;
            }
            Ok(())
        })?;
        self.restore(&mut batch, &mut arena, &mut done)?;
        Ok(done)
    }

    /// Write the state `batch` misses (see the module docs), and empty it.
    fn restore(&self, batch: &mut Vec<Prepared>, arena: &mut Arena, done: &mut Done) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let held = held_state(self.app, batch)?;
        let none = Held::default();
        let arrival = self.engine.now_millis().div_euclid(DAY_MILLIS);
        let mut marks: Vec<RowMutations> = Vec::new();
        let mut keep = Vec::with_capacity(batch.len());
        for run in batch.chunk_by(|a, b| a.user() == b.user()) {
            let user = run[0].user();
            let h = held.get(user.as_bytes()).unwrap_or(&none);
            if let Some(value) = &h.rollup.deletion {
                if value.first() == Some(&DELETING) || deletion_started(value)? > self.started {
                    // Being deleted, or deleted since the rebuild started:
                    // keeps nothing of it.
                    keep.extend(run.iter().map(|_| false));
                    continue;
                }
            }
            let missing: Vec<bool> = run
                .iter()
                .map(|e| !h.ids.contains(&e.id().qualifier()))
                .collect();
            // The days `write_state` marks today anyway (late missing
            // events).
            let marked_by_write: BTreeSet<(i64, i64)> = run
                .iter()
                .zip(&missing)
                .filter(|(e, m)| **m && e.id().day() < arrival)
                .map(|(e, _)| (e.id().day(), arrival))
                .collect();
            let watermark = h.rollup.watermark.map_or(self.window - 1, |w| w.h);
            let unmarked: Vec<Mutation> = h
                .unmarked(watermark)
                .into_iter()
                .filter(|late| !marked_by_write.contains(late))
                .map(|(day, at)| {
                    Mutation::add_to_cell(MARKS_FAMILY, day_qualifier(day), day_micros(at), 1)
                })
                .collect();
            if !unmarked.is_empty() {
                done.markers += unmarked.len() as u64;
                marks.push(RowMutations::new(rollup_key(user), unmarked));
            }
            keep.extend(missing);
        }
        if !marks.is_empty() {
            for status in self.app.profiles.mutate_rows(&marks)? {
                status?;
            }
        }
        let read = batch.len() as u64;
        let mut keep = keep.into_iter();
        batch.retain(|_| keep.next().unwrap_or(false));
        if !batch.is_empty() {
            self.engine
                .write_state(self.app, batch, Vec::new(), arena)?;
        }
        done.events += read;
        done.restored += batch.len() as u64;
        self.progress.events.fetch_add(read, Ordering::Relaxed);
        batch.clear();
        Ok(())
    }
}
