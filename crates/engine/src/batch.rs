//! Batch recompute: every profile of an application from its events,
//! after a strategy change.
//!
//! The application's key range is split at the table's `sample_row_keys`,
//! each split moved back to the start of its user (`app,user,`), so no
//! user spans two ranges. Ranges are scanned by parallel threads; in the
//! wide schema the store returns only the strategy's qualifiers (see
//! [`crate::schema::wide_filter`]), in the narrow one only the strategy's
//! `(type, name)` columns; both with a timestamp filter at the retention
//! cutoff, so expired cells never count even where GC lags. Each user's
//! profile is written to family `b` of `profiles.<app>` with the strategy
//! version. [`Progress`] counters are readable while it runs.
//!
//! Shards: with `shard = (i, n)`, a process takes ranges `i, i + n, ...`
//! of the same split, so `n` processes cover the application once.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use affinity_model::{
    Bytes, Mutation, ReadRowsRequest, RowFilter, RowMutations, RowRange, RowRef, RowSet, Table,
};
use affinity_rowkey::composite::app_prefix;
use rustc_hash::FxHashMap;

use crate::engine::{App, Engine};
use crate::error::{Error, Result};
use crate::event::EventType;
use crate::job;
use crate::schema::{
    narrow_filter, not_utf8, parse_wide_qualifier, since, utf8, visit_narrow_value,
    visit_wide_value_bytes, wide_filter, Schema, WIDE_FAMILY,
};
use crate::scoring::{Accumulator, Profile, SortedScores};
use crate::strategy::{Strategy, Weights};

/// Live counters of a recompute, shared with whoever watches it.
#[derive(Debug)]
pub struct Progress {
    pub events: AtomicU64,
    pub users: AtomicU64,
    pub ranges_done: AtomicUsize,
    pub ranges_total: AtomicUsize,
    started: Instant,
}

impl Default for Progress {
    fn default() -> Progress {
        Progress {
            events: AtomicU64::new(0),
            users: AtomicU64::new(0),
            ranges_done: AtomicUsize::new(0),
            ranges_total: AtomicUsize::new(0),
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

/// How to run a recompute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecomputeOptions {
    /// Scanning threads (default 2).
    pub threads: usize,
    /// `(i, n)`: take only shard `i` of `n`.
    pub shard: Option<(usize, usize)>,
}

impl Default for RecomputeOptions {
    fn default() -> RecomputeOptions {
        RecomputeOptions {
            threads: 2,
            shard: None,
        }
    }
}

/// What a recompute did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecomputeReport {
    pub events: u64,
    /// Users scanned (each got a profile written, unless it had no
    /// scoring event).
    pub profiles: u64,
    pub ranges: usize,
    pub strategy_version: i64,
}

/// The user token of an events key `app,user,...`.
fn user_of(key: &[u8]) -> Option<&[u8]> {
    let mut parts = key.splitn(3, |b| *b == b',');
    parts.next()?;
    parts.next()
}

/// The app's key range (one per salt bucket when salted) cut at the
/// table's sample keys, each cut moved back to the start of its user.
pub fn split_ranges(app: &App) -> Result<Vec<RowRange>> {
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
            let Some(user) = user_of(&key[salt.len()..]) else {
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

struct Writer<'a> {
    table: &'a dyn Table,
    version: i64,
    pending: Vec<RowMutations>,
}

/// A batch profile as stored: the API's profile JSON plus
/// `lastEventMillis` and `strategyVersion` (see
/// [`SortedScores::write_profile_json`]).
fn write_stored_profile(
    out: &mut Vec<u8>,
    user_token: &str,
    last_event_millis: i64,
    scores: &SortedScores,
    version: i64,
) -> Result<()> {
    scores.write_profile_json(out, user_token, last_event_millis, Some(version))
}

impl Writer<'_> {
    fn push(
        &mut self,
        user_token: &str,
        last_event_millis: i64,
        scores: &SortedScores,
    ) -> Result<()> {
        // Room for a light user's profile without regrowing.
        let mut json = Vec::with_capacity(256);
        write_stored_profile(
            &mut json,
            user_token,
            last_event_millis,
            scores,
            self.version,
        )?;
        // The row is the profile alone: replaced whole, which a store can
        // write without reading what it held.
        self.pending.push(RowMutations::new(
            user_token.as_bytes().to_vec(),
            vec![
                Mutation::DeleteFromRow,
                Mutation::set_cell("b", "profile", 0, json),
            ],
        ));
        if self.pending.len() >= 500 {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.pending.is_empty() {
            for status in self.table.mutate_rows(&self.pending)? {
                status?;
            }
            self.pending.clear();
        }
        Ok(())
    }
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

/// A wide column as the batch reader scores it, resolved once per scan.
#[derive(Clone, Copy)]
struct WideColumn {
    /// The facet's slot in the weights.
    slot: usize,
    /// `eventScore * facetScore`.
    weight: i64,
}

/// Scores event rows for one scan: the strategy's weights, and each wide
/// qualifier met so far resolved to its facet and weight (`None`: the
/// strategy does not score it), so a cell costs one lookup of its
/// qualifier instead of a CSV parse and two weight lookups per count.
struct RowScorer<'w> {
    weights: &'w Weights,
    wide: FxHashMap<Box<[u8]>, Option<WideColumn>>,
    /// The facet of the narrow values being scored (reused buffer).
    last_facet: String,
}

impl<'w> RowScorer<'w> {
    fn new(weights: &'w Weights) -> RowScorer<'w> {
        RowScorer {
            weights,
            wide: FxHashMap::default(),
            last_facet: String::new(),
        }
    }

    fn wide_column(&mut self, qualifier: &[u8]) -> Result<Option<WideColumn>> {
        if let Some(column) = self.wide.get(qualifier) {
            return Ok(*column);
        }
        let column = match parse_wide_qualifier(qualifier)? {
            (ty, name, Some(facet)) => {
                match (
                    self.weights.event(ty, &name),
                    self.weights.facet_slot(&facet),
                ) {
                    (Some(es), Some((slot, fs))) => Some(WideColumn {
                        slot,
                        weight: i64::from(es) * i64::from(fs),
                    }),
                    _ => None,
                }
            }
            (_, _, None) => None,
        };
        self.wide.insert(qualifier.into(), column);
        Ok(column)
    }

    /// Add one event row to `acc`; note its time when it scores. A row
    /// holding both layouts (during a migration) is read through its
    /// narrow cell, as [`crate::schema::decode_row`] does.
    fn add_row(&mut self, row: &RowRef<'_>, acc: &mut Accumulator<'_>) -> Result<()> {
        let mut scoring = false;
        let mut ts = None;
        if let Some(cell) = row.cells.iter().find(|c| c.family != WIDE_FAMILY) {
            // One event: its weight once, each facet's once per run of its
            // values.
            let weights = self.weights;
            let Some(ty) = EventType::parse(cell.family) else {
                return Ok(());
            };
            let name = utf8(cell.qualifier, "narrow qualifier")?;
            if let Some(es) = weights.event(ty, name) {
                let (last, mut weight) = (&mut self.last_facet, None);
                last.clear();
                visit_narrow_value(cell.value, |facet, value, n| {
                    if weight.is_none() || last.as_str() != facet {
                        last.clear();
                        last.push_str(facet);
                        weight = Some(
                            weights
                                .facet_slot(facet)
                                .map(|(slot, fs)| (slot, i64::from(es) * i64::from(fs))),
                        );
                    }
                    if let Some(Some((slot, w))) = weight {
                        scoring |= n > 0;
                        acc.add_at(slot, value, w * i64::from(n));
                    }
                })?;
            }
            ts = Some(cell.timestamp_micros.div_euclid(1000));
        } else {
            for cell in row.cells {
                ts = Some(cell.timestamp_micros.div_euclid(1000));
                if let Some(column) = self.wide_column(cell.qualifier)? {
                    visit_wide_value_bytes(cell.value, |value, n| {
                        scoring |= n > 0;
                        acc.add_utf8_at(column.slot, value, column.weight * i64::from(n))
                            .map_err(|_| not_utf8("wide value"))
                    })?;
                }
            }
        }
        if let (true, Some(ts)) = (scoring, ts) {
            acc.note_event_time(ts);
        }
        Ok(())
    }
}

fn scan_range(
    app: &App,
    range: RowRange,
    filter: &RowFilter,
    weights: &Weights,
    writer: &mut Writer<'_>,
    progress: &Progress,
) -> Result<()> {
    let request = ReadRowsRequest::new(RowSet::from_range(range)).with_filter(filter.clone());
    // The user being scored and their accumulator, which then serves the
    // next user (emptied, its maps' room kept).
    let mut current: Option<(Vec<u8>, Accumulator<'_>)> = None;
    let mut scorer = RowScorer::new(weights);
    let mut events = 0u64;
    visit_rows(app.events.as_ref(), &request, |row| {
        let user = user_of(app.logical_key(row.key)?)
            .ok_or_else(|| Error::corrupt("event key", format!("{:?}", row.key)))?;
        if current.as_ref().is_none_or(|(u, _)| u.as_slice() != user) {
            let next = match current.take() {
                Some((mut u, mut acc)) => {
                    finish_user(&u, &mut acc, writer, progress)?;
                    u.clear();
                    u.extend_from_slice(user);
                    (u, acc)
                }
                None => (user.to_vec(), Accumulator::new(weights)),
            };
            current = Some(next);
        }
        if let Some((_, acc)) = current.as_mut() {
            scorer.add_row(&row, acc)?;
        }
        events += 1;
        if events.is_multiple_of(4096) {
            progress.events.fetch_add(4096, Ordering::Relaxed);
        }
        Ok(())
    })?;
    progress.events.fetch_add(events % 4096, Ordering::Relaxed);
    if let Some((u, mut acc)) = current.take() {
        finish_user(&u, &mut acc, writer, progress)?;
    }
    Ok(())
}

/// Write the profile `acc` holds for `user` (none without a scoring
/// event) and empty `acc` for the next user.
fn finish_user(
    user: &[u8],
    acc: &mut Accumulator<'_>,
    writer: &mut Writer<'_>,
    progress: &Progress,
) -> Result<()> {
    let user = std::str::from_utf8(user)
        .map_err(|_| Error::corrupt("event key", "user token not utf-8"))?;
    if let Some((last_event_millis, scores)) = acc.take_sorted() {
        writer.push(user, last_event_millis, &scores)?;
    }
    progress.users.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

impl Engine {
    /// Recompute the profiles of an application with its current strategy:
    /// a one-off run with its own split.
    pub fn recompute(
        &self,
        app: &str,
        options: RecomputeOptions,
        progress: &Progress,
    ) -> Result<RecomputeReport> {
        self.run_recompute(app, options, None, progress)
    }

    /// [`Engine::recompute`] as the persistent job `job` (kept in row
    /// `~job,<job>` of `profiles.<app>`): the split is shared by every
    /// process using the name (e.g. N shard processes) and finished ranges
    /// are skipped on a restart.
    pub fn recompute_job(
        &self,
        app: &str,
        options: RecomputeOptions,
        job: &str,
        progress: &Progress,
    ) -> Result<RecomputeReport> {
        self.run_recompute(app, options, Some(job), progress)
    }

    fn run_recompute(
        &self,
        app: &str,
        options: RecomputeOptions,
        job: Option<&str>,
        progress: &Progress,
    ) -> Result<RecomputeReport> {
        let (strategy, version) =
            self.strategy_version(app)?
                .ok_or_else(|| Error::InvalidArgument {
                    name: "strategy",
                    reason: format!("application {app:?} has no strategy"),
                })?;
        let app = self.app(app)?;
        let (i, n) = options.shard.unwrap_or((0, 1));
        if n == 0 || i >= n {
            return Err(Error::InvalidArgument {
                name: "shard",
                reason: format!("{i}/{n}: need 0 <= i < n"),
            });
        }
        let mut ranges = split_ranges(&app)?;
        let mut finished = std::collections::BTreeSet::new();
        if let Some(name) = job {
            ranges = job::plan(&app, name, ranges)?;
            finished = job::done(&app, name)?;
        }
        let mine: Vec<(usize, RowRange)> = ranges
            .into_iter()
            .enumerate()
            .filter(|(k, _)| k % n == i)
            .collect();
        let total = mine.len();
        let ranges: Vec<(usize, RowRange)> = mine
            .into_iter()
            .filter(|(k, _)| !finished.contains(k))
            .collect();
        progress.ranges_total.store(total, Ordering::Relaxed);
        progress
            .ranges_done
            .store(total - ranges.len(), Ordering::Relaxed);
        let cutoff = app.config.window_start_millis(self.now_millis());
        let filter = RowFilter::Chain(vec![
            since(cutoff),
            self.schema_filter(app.config.schema, &strategy),
        ]);
        let weights = strategy.weights();
        let queue = Mutex::new(ranges.clone().into_iter());
        let results: Vec<Result<()>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..options.threads.max(1))
                .map(|_| {
                    let (app, filter, weights, queue) = (&app, &filter, &weights, &queue);
                    s.spawn(move || -> Result<()> {
                        let mut writer = Writer {
                            table: app.profiles.as_ref(),
                            version,
                            pending: Vec::new(),
                        };
                        loop {
                            let next = queue.lock().unwrap_or_else(|p| p.into_inner()).next();
                            let Some((index, range)) = next else { break };
                            scan_range(app, range, filter, weights, &mut writer, progress)?;
                            writer.flush()?;
                            if let Some(name) = job {
                                job::mark_done(app, name, index)?;
                            }
                            progress.ranges_done.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::Worker("recompute worker panicked".into())))
                })
                .collect()
        });
        for r in results {
            r?;
        }
        let snap = progress.snapshot();
        Ok(RecomputeReport {
            events: snap.events,
            profiles: snap.users,
            ranges: total,
            strategy_version: version,
        })
    }

    /// [`Engine::recompute`], calling `report` with a progress snapshot
    /// every `every` while it runs (from a watcher thread; for a CLI
    /// progress bar) and once at the end.
    pub fn recompute_with_progress(
        &self,
        app: &str,
        options: RecomputeOptions,
        every: Duration,
        mut report: impl FnMut(ProgressSnapshot) + Send,
    ) -> Result<RecomputeReport> {
        let progress = Progress::default();
        let finished = std::sync::atomic::AtomicBool::new(false);
        let result = std::thread::scope(|s| {
            let watcher = s.spawn(|| {
                while !finished.load(Ordering::Acquire) {
                    std::thread::park_timeout(every);
                    if !finished.load(Ordering::Acquire) {
                        report(progress.snapshot());
                    }
                }
                report(progress.snapshot());
            });
            let result = self.recompute(app, options, &progress);
            finished.store(true, Ordering::Release);
            watcher.thread().unpark();
            result
        });
        result
    }

    fn schema_filter(&self, schema: Schema, strategy: &Strategy) -> RowFilter {
        match schema {
            Schema::Narrow => narrow_filter(strategy),
            Schema::Wide => wide_filter(strategy),
        }
    }

    /// The profile the last batch recompute wrote for a user, with the
    /// strategy version it used; `None` once all its scoring events have
    /// expired. A user who no longer has a scoring event under a new
    /// strategy keeps the old version's profile: callers compare the version
    /// with [`Engine::strategy_version`].
    pub fn batch_profile(&self, app: &str, user: &str) -> Result<Option<(Profile, i64)>> {
        let app = self.app(app)?;
        let filter = RowFilter::Chain(vec![
            RowFilter::exact_family("b"),
            RowFilter::CellsPerColumnLimit(1),
        ]);
        let Some(row) = app.profiles.read_row(user.as_bytes(), Some(&filter))? else {
            return Ok(None);
        };
        let Some(cell) = row.cells.first() else {
            return Ok(None);
        };
        let json: serde_json::Value = serde_json::from_slice(&cell.value)?;
        let bad = || Error::corrupt("batch profile", json.to_string());
        let scores = serde_json::from_value(json["scores"].clone()).map_err(|_| bad())?;
        let profile = Profile {
            user_token: user.to_string(),
            last_event_millis: json["lastEventMillis"].as_i64().ok_or_else(bad)?,
            scores,
        };
        if profile.last_event_millis < app.config.window_start_millis(self.now_millis()) {
            // Every scoring event has expired since the recompute.
            return Ok(None);
        }
        Ok(Some((
            profile,
            json["strategyVersion"].as_i64().ok_or_else(bad)?,
        )))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    /// What a stored profile is, through serde: the reference
    /// [`write_stored_profile`] is held to.
    fn serde_stored_profile(
        user_token: &str,
        last_event_millis: i64,
        scores: &BTreeMap<String, BTreeMap<String, u32>>,
        version: i64,
    ) -> Vec<u8> {
        let profile = Profile {
            user_token: user_token.into(),
            last_event_millis,
            scores: scores.clone(),
        };
        let mut expected = profile.to_json();
        expected["lastEventMillis"] = last_event_millis.into();
        expected["strategyVersion"] = version.into();
        serde_json::to_vec(&expected).expect("serializes")
    }

    fn sorted(scores: &BTreeMap<String, BTreeMap<String, u32>>) -> SortedScores {
        SortedScores(
            scores
                .iter()
                .map(|(f, vs)| (f.clone(), vs.iter().map(|(v, n)| (v.clone(), *n)).collect()))
                .collect(),
        )
    }

    fn written(
        user_token: &str,
        last_event_millis: i64,
        scores: &SortedScores,
        version: i64,
    ) -> Vec<u8> {
        let mut out = Vec::new();
        write_stored_profile(&mut out, user_token, last_event_millis, scores, version)
            .expect("writes");
        out
    }

    #[test]
    fn stored_profiles_are_the_api_json_with_two_fields() {
        let scores = BTreeMap::from([
            (
                "brand".to_string(),
                BTreeMap::from([("Apple".to_string(), 20), ("\"Q\"\\\n".to_string(), 3)]),
            ),
            (
                "color".to_string(),
                BTreeMap::from([("Black".to_string(), 1)]),
            ),
        ]);
        let bytes = written("u1", 1_700_000_000_123, &sorted(&scores), 7);
        assert_eq!(
            String::from_utf8(bytes.clone()).expect("utf-8"),
            r#"{"lastEventAt":"2023-11-14T22:13:20Z","lastEventMillis":1700000000123,"scores":{"brand":{"\"Q\"\\\n":3,"Apple":20},"color":{"Black":1}},"strategyVersion":7,"userToken":"u1"}"#
        );
        assert_eq!(
            bytes,
            serde_stored_profile("u1", 1_700_000_000_123, &scores, 7)
        );
        assert_eq!(sorted(&scores).into_map(), scores);
    }

    proptest! {
        /// Any text (quotes, backslashes, control characters, non-ASCII)
        /// and numbers: the bytes serde_json writes.
        #[test]
        fn stored_profiles_are_written_as_serde_json_writes_them(
            user in "\\PC{0,8}",
            scores in prop::collection::btree_map(
                "\\PC{0,6}|[\"\\\\\\x00-\\x1f\\x7f]{1,3}",
                prop::collection::btree_map("\\PC{0,6}|[\"\\\\\\x00-\\x1f]{1,3}", 1u32..=20, 1..4),
                0..4,
            ),
            millis in 0i64..253_402_300_799_999,
            version in any::<i64>(),
        ) {
            prop_assert_eq!(
                written(&user, millis, &sorted(&scores), version),
                serde_stored_profile(&user, millis, &scores, version)
            );
            // The API's form (profile reads answer with it).
            let mut api = Vec::new();
            sorted(&scores).write_profile_json(&mut api, &user, millis, None).expect("writes");
            let profile = Profile { user_token: user.clone(), last_event_millis: millis, scores };
            prop_assert_eq!(api, serde_json::to_vec(&profile).expect("serializes"));
        }
    }
}
