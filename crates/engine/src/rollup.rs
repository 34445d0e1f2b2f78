//! Rollups: each user's folded counters, so a profile read touches one
//! rollup row and the few day rows that arrived since, however long the
//! history (the whole design, with its invariants, is
//! `docs/design/profiles.md`).
//!
//! Row `user,!` of `profiles.<app>`:
//! - `f`: one cell per facet, its value every folded value of the facet,
//!   sorted, with its exact sum over the folded events (each event once)
//!   per counter prefix CSV(type, name, facet) (the packing is
//!   [`packed`]'s);
//! - `r`: the same sums one cell per counter prefix, as folds wrote them
//!   before `f`; read as well, and replaced by `f` at the next fold;
//! - `s`: CSV(type, name, facet), the newest folded event's time as the
//!   cell's timestamp;
//! - `w`: `h` (the arrival day folded through) and `lo` (the first event
//!   day included), i64 BE;
//! - `m`: late markers, one column per event day (`DDDDDDDD`), one cell per
//!   arrival day: ingestion adds to it before it writes a late event's
//!   state, so readers know which folded days changed;
//! - `x`: `deletion`, the state of the user's last deletion: `d` while it
//!   runs, `x` once done, then the time it started (i64 BE ms) and a
//!   random u64 (two deletions never look alike). A fold
//!   skips a user being deleted, and commits only if this cell is as it
//!   read it.
//!
//! A fold ([`Engine::prepare_fold`], [`Engine::commit_fold`]) computes the
//! new rollup from the old one and immutable day-row cells, and commits it
//! with one check-and-mutate that fails if another fold or a deletion came
//! first.

use std::collections::BTreeMap;
use std::ops::Bound;

use affinity_model::{
    Bytes, Mutation, ReadRowsRequest, RowFilter, RowRange, RowRef, RowSet, TimestampRange,
    ValueRange,
};

use crate::batch::visit_rows;
use crate::engine::{App, Engine, DAY_MILLIS, SLACK_DAYS};
use crate::error::{Error, Result};
use crate::state::{
    decode_sum, last_qualifier, parse_last_qualifier, split_counter_qualifier, state_row_key,
    EventId, COUNTERS_FAMILY, DIGEST_FAMILY, IDS_FAMILY, LAST_FAMILY,
};

pub(crate) mod packed;

/// Folded counters, one cell per facet.
pub const FACET_TOTALS_FAMILY: &str = "f";
/// Folded counters, one cell per counter prefix (written before
/// [`FACET_TOTALS_FAMILY`]; still read).
pub const TOTALS_FAMILY: &str = "r";
/// Folded latest times.
pub const LATEST_FAMILY: &str = "s";
/// The fold's watermarks.
pub const WATERMARK_FAMILY: &str = "w";
/// Late markers.
pub const MARKS_FAMILY: &str = "m";
/// The deletion tombstone.
pub const TOMBSTONE_FAMILY: &str = "x";
/// Links of an anonymous token to authenticated identities (see
/// `docs/design/identity.md`): qualifier the identity, timestamp the
/// linking event's time.
pub const LINKS_FAMILY: &str = "L";
/// Anonymous tokens linked to this identity: qualifier the token,
/// timestamp the linking event's time.
pub const MEMBERS_FAMILY: &str = "M";

/// An arrival day is closed (no state add of it is written any more) this
/// long after it ends: clocks agree within half of it, and a state write
/// takes less than half of it.
pub const CLOSE_MARGIN_MILLIS: i64 = 3_600_000;

const DAY_MICROS: i64 = DAY_MILLIS * 1000;

/// The rollup row of a user: `user,!` (sorts just before the user's day
/// rows; no user token contains `,` or `!`).
pub fn rollup_key(user: &str) -> String {
    format!("{user},!")
}

/// The arrival day of a state cell: the day its timestamp starts.
pub(crate) fn arrival_day(timestamp_micros: i64) -> i64 {
    timestamp_micros.div_euclid(DAY_MICROS)
}

/// The last closed arrival day at `now_millis`.
pub fn closed_through(now_millis: i64) -> i64 {
    (now_millis - CLOSE_MARGIN_MILLIS).div_euclid(DAY_MILLIS) - 1
}

/// `DDDDDDDD`, the qualifier of a day's marker column.
pub(crate) fn day_qualifier(day: i64) -> String {
    format!("{day:08}")
}

fn parse_day(text: &[u8]) -> Option<i64> {
    std::str::from_utf8(text).ok()?.parse().ok()
}

fn be_i64(value: &[u8], what: &'static str) -> Result<i64> {
    value
        .try_into()
        .map(i64::from_be_bytes)
        .map_err(|_| Error::corrupt(what, format!("{} bytes", value.len())))
}

/// What was folded: arrival days through `h`, event days from `lo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watermark {
    pub h: i64,
    pub lo: i64,
}

/// A rollup row as read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rollup {
    /// `None` when nothing was ever folded (or a deletion cleared it).
    pub watermark: Option<Watermark>,
    /// Facet -> its packed counters per prefix (`f`, see [`packed`]).
    pub by_facet: Vec<(Vec<u8>, Vec<u8>)>,
    /// Counter prefix `type,name,facet` -> its packed counters (`r`, an
    /// older fold's; see [`packed`]).
    pub totals: Vec<(Vec<u8>, Vec<u8>)>,
    /// Latest-time qualifier -> the newest folded event's time (µs).
    pub latest: Vec<(Vec<u8>, i64)>,
    /// `(event day, arrival day)` of every late marker cell.
    pub marks: Vec<(i64, i64)>,
    /// The deletion cell as read (see the module docs).
    pub deletion: Option<Vec<u8>>,
    /// `(identity, linking event's time in µs)` of every link cell.
    pub links: Vec<(String, i64)>,
    /// `(anonymous token, linking event's time in µs)` of every member
    /// cell.
    pub members: Vec<(String, i64)>,
}

/// The deletion cell's first byte while a deletion runs.
pub(crate) const DELETING: u8 = b'd';
/// The deletion cell's first byte once it is done.
pub(crate) const DELETED: u8 = b'x';

/// The deletion cell's value: the state, when the deletion started and a
/// random number, so two deletions in one millisecond still differ.
pub(crate) fn deletion_value(state: u8, millis: i64, nonce: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(17);
    out.push(state);
    out.extend_from_slice(&millis.to_be_bytes());
    out.extend_from_slice(&nonce.to_be_bytes());
    out
}

/// When the deletion whose cell holds `value` started (ms).
pub(crate) fn deletion_started(value: &[u8]) -> Result<i64> {
    be_i64(value.get(1..9).unwrap_or_default(), "deletion cell")
}

/// A filter keeping `column`'s newest cell unless its value is exactly
/// `value`.
fn other_than(column: RowFilter, value: &[u8]) -> RowFilter {
    let value = Bytes::copy_from_slice(value);
    RowFilter::Chain(vec![
        column,
        RowFilter::CellsPerColumnLimit(1),
        RowFilter::interleave(vec![
            RowFilter::ValueRange(ValueRange {
                start: Bound::Unbounded,
                end: Bound::Excluded(value.clone()),
            }),
            RowFilter::ValueRange(ValueRange {
                start: Bound::Excluded(value),
                end: Bound::Unbounded,
            }),
        ]),
    ])
}

impl Rollup {
    /// About what the row holds on the heap (the profile cache's budget).
    pub(crate) fn heap_bytes(&self) -> usize {
        let pairs = |v: &[(Vec<u8>, Vec<u8>)]| -> usize {
            v.iter().map(|(q, c)| q.len() + c.len() + 48).sum()
        };
        let named = |v: &[(String, i64)]| -> usize { v.iter().map(|(n, _)| n.len() + 32).sum() };
        pairs(&self.by_facet)
            + pairs(&self.totals)
            + self.latest.iter().map(|(q, _)| q.len() + 32).sum::<usize>()
            + self.marks.len() * 16
            + self.deletion.as_ref().map_or(0, Vec::len)
            + named(&self.links)
            + named(&self.members)
    }

    /// Decode the cells of a rollup row.
    pub(crate) fn decode(row: &RowRef<'_>) -> Result<Rollup> {
        let mut out = Rollup::default();
        let (mut h, mut lo) = (None, None);
        for cell in row.cells {
            match cell.family {
                FACET_TOTALS_FAMILY => out
                    .by_facet
                    .push((cell.qualifier.to_vec(), cell.value.to_vec())),
                TOTALS_FAMILY => out
                    .totals
                    .push((cell.qualifier.to_vec(), cell.value.to_vec())),
                LATEST_FAMILY => out
                    .latest
                    .push((cell.qualifier.to_vec(), cell.timestamp_micros)),
                // The newest version only: Bigtable collects older ones
                // lazily (cells come newest first within a column).
                WATERMARK_FAMILY => match cell.qualifier {
                    b"h" if h.is_none() => h = Some(be_i64(cell.value, "rollup watermark")?),
                    b"lo" if lo.is_none() => lo = Some(be_i64(cell.value, "rollup watermark")?),
                    _ => {}
                },
                MARKS_FAMILY => {
                    let day = parse_day(cell.qualifier).ok_or_else(|| {
                        Error::corrupt(
                            "late marker",
                            String::from_utf8_lossy(cell.qualifier).into_owned(),
                        )
                    })?;
                    out.marks.push((day, arrival_day(cell.timestamp_micros)));
                }
                LINKS_FAMILY | MEMBERS_FAMILY => {
                    let token = String::from_utf8(cell.qualifier.to_vec()).map_err(|_| {
                        Error::corrupt("identity link", format!("{:?}", cell.qualifier))
                    })?;
                    let list = if cell.family == LINKS_FAMILY {
                        &mut out.links
                    } else {
                        &mut out.members
                    };
                    list.push((token, cell.timestamp_micros));
                }
                TOMBSTONE_FAMILY if cell.qualifier == b"deletion" && out.deletion.is_none() => {
                    out.deletion = Some(cell.value.to_vec())
                }
                _ => {}
            }
        }
        if let (Some(h), Some(lo)) = (h, lo) {
            out.watermark = Some(Watermark { h, lo });
        }
        Ok(out)
    }

    /// Whether a fold through arrival day `h_new` with the window starting
    /// on day `window` has nothing to do: the rollup is folded through
    /// `h_new` from `window` on, and no late marker of a day up to `h_new`
    /// waits (a deletion running aside).
    pub(crate) fn up_to_date(&self, h_new: i64, window: i64) -> bool {
        let stale_marks = self.marks.iter().any(|(_, a)| *a <= h_new);
        !stale_marks
            && self
                .watermark
                .is_some_and(|w| w.h >= h_new && w.lo >= window)
    }

    /// The identity this (anonymous) token belongs to at window start
    /// `window_micros`: the first link within the window wins (ties: the
    /// smaller identity).
    pub(crate) fn owner(&self, window_micros: i64) -> Option<&str> {
        self.links
            .iter()
            .filter(|(_, t)| *t >= window_micros)
            .min_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)))
            .map(|(owner, _)| owner.as_str())
    }

    /// Anonymous tokens linked to this identity within the window (each
    /// once; their own rollup says whether they belong to it).
    pub(crate) fn candidates(&self, window_micros: i64) -> Vec<&str> {
        let mut out: Vec<&str> = self
            .members
            .iter()
            .filter(|(_, t)| *t >= window_micros)
            .map(|(m, _)| m.as_str())
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Event days with a late marker that arrived after `h`.
    pub(crate) fn marked_after(&self, h: i64) -> Vec<i64> {
        let mut days: Vec<i64> = self
            .marks
            .iter()
            .filter(|(_, arrival)| *arrival > h)
            .map(|(day, _)| *day)
            .collect();
        days.sort_unstable();
        days.dedup();
        days
    }
}

/// Read a user's rollup row (`Rollup::default()` when there is none).
pub(crate) fn read_rollup(app: &App, user: &str) -> Result<Rollup> {
    read_rollup_cells(app, user, None)
}

/// What [`Rollup::up_to_date`] needs of a user's rollup row: its
/// watermark, late markers and deletion state, not its counters.
pub(crate) fn read_rollup_head(app: &App, user: &str) -> Result<Rollup> {
    let head = RowFilter::Interleave(vec![
        RowFilter::exact_family(WATERMARK_FAMILY),
        RowFilter::exact_family(MARKS_FAMILY),
        RowFilter::exact_family(TOMBSTONE_FAMILY),
    ]);
    read_rollup_cells(app, user, Some(head))
}

/// A user's rollup row, its cells passed through `filter` when given.
fn read_rollup_cells(app: &App, user: &str, filter: Option<RowFilter>) -> Result<Rollup> {
    let mut request = ReadRowsRequest::new(RowSet::from_keys([rollup_key(user).into_bytes()]));
    if let Some(filter) = filter {
        request = request.with_filter(filter);
    }
    let mut out = Rollup::default();
    visit_rows(app.profiles.as_ref(), &request, |row| {
        out = Rollup::decode(&row)?;
        Ok(())
    })?;
    Ok(out)
}

/// The rollup rows of `users` (in one read), `Rollup::default()` for a user
/// without one; in the order of `users`.
pub(crate) fn read_rollups(app: &App, users: &[&str]) -> Result<Vec<Rollup>> {
    let mut out = vec![Rollup::default(); users.len()];
    if users.is_empty() {
        return Ok(out);
    }
    let keys: Vec<Vec<u8>> = users.iter().map(|u| rollup_key(u).into_bytes()).collect();
    let request = ReadRowsRequest::new(RowSet::from_keys(keys));
    visit_rows(app.profiles.as_ref(), &request, |row| {
        let user = row
            .key
            .strip_suffix(b",!")
            .ok_or_else(|| Error::corrupt("rollup key", format!("{:?}", row.key)))?;
        if let Some(i) = users.iter().position(|u| u.as_bytes() == user) {
            out[i] = Rollup::decode(&row)?;
        }
        Ok(())
    })?;
    Ok(out)
}

/// The sum of every counter of a rollup's totals cell of `family`
/// ([`FACET_TOTALS_FAMILY`] or [`TOTALS_FAMILY`]; qualifier `qualifier`,
/// value `cell`), for checks and benchmarks; 0 for another family.
pub fn totals_sum(family: &str, qualifier: &[u8], cell: &[u8]) -> Result<i64> {
    match family {
        FACET_TOTALS_FAMILY => {
            let mut sum = 0;
            packed::unpack_facet(cell, qualifier)?.for_each(|_, _, n| sum += n)?;
            Ok(sum)
        }
        TOTALS_FAMILY => packed::unpack(cell, qualifier)
            .map(|c| c.map(|(_, n)| n))
            .sum(),
        _ => Ok(0),
    }
}

/// The day of a day row's key: `user,DDDDDDDD`, or a hot user's sub-row
/// `user,DDDDDDDD,kk` (see [`crate::hot`]).
pub(crate) fn row_day(key: &[u8], user: &str) -> Result<i64> {
    let day = match key.get(user.len() + 1..) {
        Some([day @ .., b',', k1, k2]) if k1.is_ascii_hexdigit() && k2.is_ascii_hexdigit() => {
            Some(day)
        }
        rest => rest,
    };
    day.and_then(parse_day)
        .ok_or_else(|| Error::corrupt("state row key", format!("{key:?}")))
}

/// How the adds of one event id are spread over arrival days, relative to
/// two watermarks `old < new`: adds arrived `<= old`, in `(old, new]`, and
/// after `new`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Arrivals {
    pub through_old: i64,
    pub through_new: i64,
    pub later: i64,
}

impl Arrivals {
    pub(crate) fn add(&mut self, arrival: i64, times: i64, old: i64, new: i64) {
        if arrival <= old {
            self.through_old += times;
        } else if arrival <= new {
            self.through_new += times;
        } else {
            self.later += times;
        }
    }
}

/// Folded sums: counter prefix `type,name,facet` -> value -> sum.
pub type Totals = BTreeMap<Vec<u8>, BTreeMap<Vec<u8>, i64>>;

/// Add `n` to the sum of `(prefix, value)`.
pub(crate) fn add_total(totals: &mut Totals, prefix: &[u8], value: &[u8], n: i64) {
    let values = match totals.get_mut(prefix) {
        Some(values) => values,
        None => totals.entry(prefix.to_vec()).or_default(),
    };
    match values.get_mut(value) {
        Some(sum) => *sum += n,
        None => {
            values.insert(value.to_vec(), n);
        }
    }
}

/// Add counter cell `qualifier` (CSV(type, name, facet, value)) with sum
/// `n` to `totals`.
pub(crate) fn add_counter(totals: &mut Totals, qualifier: &[u8], n: i64) -> Result<()> {
    let (prefix, value) = split_counter_qualifier(qualifier)?;
    add_total(totals, &prefix, &value, n);
    Ok(())
}

/// Add packed by-facet cell `cell` of `facet` (a rollup's `f`, a day
/// row's digest `g`) to `totals`, `sign` times.
pub(crate) fn add_facet_cell(
    totals: &mut Totals,
    facet: &[u8],
    cell: &[u8],
    sign: i64,
) -> Result<()> {
    let cell = packed::unpack_facet(cell, facet)?;
    let prefixes = cell.prefixes();
    cell.for_each(|value, j, n| add_total(totals, prefixes[j], value, sign * n))
}

/// The by-facet cells of `totals`: facet -> packed cell.
pub(crate) fn facet_cells(totals: &Totals) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
    // Facet -> its prefixes and their sums.
    type Sums = BTreeMap<Vec<u8>, i64>;
    let mut facets: BTreeMap<Vec<u8>, Vec<(&[u8], &Sums)>> = BTreeMap::new();
    for (prefix, values) in totals {
        let (_, _, facet) = parse_last_qualifier(prefix)?;
        facets
            .entry(facet.as_bytes().to_vec())
            .or_default()
            .push((prefix, values));
    }
    let mut out = BTreeMap::new();
    for (facet, prefixes) in facets {
        let names: Vec<&[u8]> = prefixes.iter().map(|(p, _)| *p).collect();
        let rows: usize = prefixes.iter().map(|(_, sums)| sums.len()).sum();
        let mut cell = Vec::with_capacity(16 * names.len() + rows * 8);
        let mut packer = packed::FacetPacker::new(&mut cell, &names);
        // The prefixes' sums, each sorted by value, merged: each value
        // once with its sum per prefix.
        let mut runs: Vec<_> = prefixes.iter().map(|(_, s)| s.iter().peekable()).collect();
        let mut counts = vec![0i64; runs.len()];
        loop {
            let next = runs
                .iter_mut()
                .filter_map(|run| run.peek().map(|&(value, _)| value.as_slice()))
                .min();
            let Some(value) = next else {
                break;
            };
            for (run, count) in runs.iter_mut().zip(counts.iter_mut()) {
                *count = match run.next_if(|&(v, _)| v.as_slice() == value) {
                    Some((_, n)) => *n,
                    None => 0,
                };
            }
            packer.row(value, &counts);
        }
        out.insert(facet, cell);
    }
    Ok(out)
}

/// A fold computed and ready to commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldPlan {
    pub user: String,
    /// The watermark read (`None`: no rollup yet).
    pub old: Option<Watermark>,
    pub new: Watermark,
    /// The deletion cell as the fold read it (a deletion since wins).
    pub deletion: Option<Vec<u8>>,
    /// The new sums (non-zero only).
    pub totals: Totals,
    pub latest: BTreeMap<Vec<u8>, i64>,
    /// Marker columns whose cells arrived through the new watermark.
    pub folded_marks: Vec<i64>,
    /// Day rows read.
    pub rows_read: usize,
}

/// What happened to one user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoldOutcome {
    /// Nothing arrived or expired since the last fold.
    UpToDate,
    /// A new rollup was committed.
    Folded { rows_read: usize },
    /// Another fold or a deletion committed first; nothing was written.
    Conflict,
}

impl Engine {
    /// Compute user's fold at the engine's clock: `None` when the rollup is
    /// up to date. Reads only (see the module docs).
    pub fn prepare_fold(&self, app: &App, user: &str) -> Result<Option<FoldPlan>> {
        let now = self.now_millis();
        let window = app.config.window_start_day(now);
        let h_new = closed_through(now);
        let rollup = read_rollup(app, user)?;
        if rollup
            .deletion
            .as_ref()
            .is_some_and(|d| d.first() == Some(&DELETING))
        {
            // A deletion is running: its rows are going, fold later.
            return Ok(None);
        }
        let current = rollup.watermark;
        if rollup.up_to_date(h_new, window) {
            return Ok(None);
        }
        // Without a usable rollup, fold every day of the window from
        // scratch (its rows are all still there).
        let base = current.filter(|w| w.lo <= window && w.lo >= window - i64::from(SLACK_DAYS));
        let new = Watermark {
            h: h_new.max(base.map_or(i64::MIN, |w| w.h)),
            lo: window,
        };
        let mut plan = FoldPlan {
            user: user.to_string(),
            old: current,
            new,
            deletion: rollup.deletion.clone(),
            totals: Totals::new(),
            latest: BTreeMap::new(),
            folded_marks: Vec::new(),
            rows_read: 0,
        };
        let old_h = match base {
            Some(w) => {
                for (facet, cell) in &rollup.by_facet {
                    add_facet_cell(&mut plan.totals, facet, cell, 1)?;
                }
                for (prefix, cell) in &rollup.totals {
                    for counter in packed::unpack(cell, prefix) {
                        let (value, n) = counter?;
                        add_total(&mut plan.totals, prefix, value, n);
                    }
                }
                plan.latest = rollup.latest.iter().cloned().collect();
                w.h
            }
            None => window - 1,
        };
        let mut marked: Vec<i64> = rollup
            .marks
            .iter()
            .filter(|(_, a)| *a > old_h && *a <= new.h)
            .map(|(d, _)| *d)
            .collect();
        marked.sort_unstable();
        marked.dedup();
        plan.folded_marks = rollup
            .marks
            .iter()
            .filter(|(_, a)| *a <= new.h)
            .map(|(d, _)| *d)
            .collect();
        plan.folded_marks.sort_unstable();
        plan.folded_marks.dedup();

        let mut rows = RowSet::default();
        // Expired days the old rollup holds.
        if let Some(w) = base {
            self.push_day_rows(app, user, w.lo..window, &mut rows)?;
        }
        // Folded days with adds that arrived since.
        let late = marked.iter().filter(|d| **d >= window && **d <= old_h);
        self.push_day_rows(app, user, late.copied(), &mut rows)?;
        // Days after the old watermark, through the new one (later days
        // hold nothing that arrived by then).
        let first_new = (old_h + 1).max(window);
        if first_new <= new.h {
            rows.ranges.push(RowRange::closed_open(
                state_row_key(user, first_new),
                state_row_key(user, new.h + 1),
            ));
        }
        if rows.keys.is_empty() && rows.ranges.is_empty() {
            // Only markers to clear, or a watermark to move.
            return Ok((current.is_some() || !rollup.marks.is_empty()).then_some(plan));
        }
        let filter = RowFilter::interleave(vec![
            RowFilter::exact_family(COUNTERS_FAMILY),
            RowFilter::exact_family(DIGEST_FAMILY),
            RowFilter::exact_family(IDS_FAMILY),
            RowFilter::exact_family(LAST_FAMILY),
        ]);
        let request = ReadRowsRequest::new(rows).with_filter(filter);
        // (id, multiplicity) to correct with the event's own counts.
        let mut corrections: Vec<(EventId, i64)> = Vec::new();
        let mut ids: BTreeMap<[u8; 16], Arrivals> = BTreeMap::new();
        visit_rows(app.profiles.as_ref(), &request, |row| {
            let day = row_day(row.key, user)?;
            plan.rows_read += 1;
            // Which cells of this row the fold moves, and which way.
            let (from, to, sign) = if day < window {
                // Expired: take out what the old rollup holds.
                (i64::MIN, old_h, -1)
            } else if day <= old_h {
                // Folded before, with late adds since.
                (old_h + 1, new.h, 1)
            } else {
                (i64::MIN, new.h, 1)
            };
            ids.clear();
            for cell in row.cells {
                let arrival = arrival_day(cell.timestamp_micros);
                match cell.family {
                    COUNTERS_FAMILY if arrival >= from && arrival <= to => {
                        add_counter(
                            &mut plan.totals,
                            cell.qualifier,
                            sign * decode_sum(cell.value)?,
                        )?;
                    }
                    // A digest: counters as the row's, of its arrival day.
                    DIGEST_FAMILY if arrival >= from && arrival <= to => {
                        add_facet_cell(&mut plan.totals, cell.qualifier, cell.value, sign)?;
                    }
                    IDS_FAMILY => {
                        let n = decode_sum(cell.value)?;
                        let id: [u8; 16] = cell.qualifier.try_into().map_err(|_| {
                            Error::corrupt("event id qualifier", format!("{:?}", cell.qualifier))
                        })?;
                        ids.entry(id).or_default().add(arrival, n, old_h, new.h);
                    }
                    LAST_FAMILY if sign > 0 => {
                        let t = plan.latest.entry(cell.qualifier.to_vec()).or_default();
                        *t = (*t).max(cell.timestamp_micros);
                    }
                    _ => {}
                }
            }
            for (id, a) in &ids {
                let mult = if day < window {
                    // The rollup counted the event once if it arrived by
                    // `old_h`; the raw sum taken out was `through_old`.
                    if a.through_old >= 1 {
                        a.through_old - 1
                    } else {
                        0
                    }
                } else if day <= old_h {
                    // Counted now only if the old rollup did not.
                    let target = i64::from(a.through_old == 0 && a.through_new >= 1);
                    target - a.through_new
                } else {
                    let added = a.through_old + a.through_new;
                    i64::from(added >= 1) - added
                };
                if mult != 0 {
                    corrections.push((EventId::from_qualifier(id)?, mult));
                }
            }
            Ok(())
        })?;
        if current.is_none() && rollup.marks.is_empty() && plan.rows_read == 0 {
            // A user with no state at all: nothing to write.
            return Ok(None);
        }
        for (id, mult) in corrections {
            if let Some(e) = self.stored_event(app, user, &id)? {
                for (f, v, n) in e.counts.iter() {
                    let prefix = last_qualifier(e.event_type, &e.event_name, f);
                    add_total(
                        &mut plan.totals,
                        prefix.as_bytes(),
                        v.as_bytes(),
                        mult * i64::from(n),
                    );
                }
            }
        }
        plan.totals.retain(|_, values| {
            values.retain(|_, n| *n != 0);
            !values.is_empty()
        });
        Ok(Some(plan))
    }

    /// Commit a fold: `false` (nothing written) when the rollup's
    /// watermark changed since the fold read it, or a deletion came after
    /// it started.
    pub fn commit_fold(&self, app: &App, plan: &FoldPlan) -> Result<bool> {
        let key = rollup_key(&plan.user);
        let h_column = RowFilter::Chain(vec![
            RowFilter::exact_family(WATERMARK_FAMILY),
            RowFilter::exact_qualifier(b"h"),
        ]);
        let deletion_column = RowFilter::Chain(vec![
            RowFilter::exact_family(TOMBSTONE_FAMILY),
            RowFilter::exact_qualifier(b"deletion"),
        ]);
        // Anything other than what the fold read: another fold's watermark,
        // or a deletion.
        let predicate = RowFilter::interleave(vec![
            match plan.old {
                Some(w) => other_than(h_column, &w.h.to_be_bytes()),
                None => h_column,
            },
            match &plan.deletion {
                Some(d) => other_than(deletion_column, d),
                None => deletion_column,
            },
        ]);
        let stamp = plan.new.h.max(0) * DAY_MICROS;
        let mut write = vec![
            Mutation::DeleteFromFamily {
                family: FACET_TOTALS_FAMILY.into(),
            },
            Mutation::DeleteFromFamily {
                family: TOTALS_FAMILY.into(),
            },
            Mutation::DeleteFromFamily {
                family: LATEST_FAMILY.into(),
            },
            Mutation::DeleteFromFamily {
                family: WATERMARK_FAMILY.into(),
            },
            Mutation::set_cell(
                WATERMARK_FAMILY,
                "h",
                stamp,
                plan.new.h.to_be_bytes().to_vec(),
            ),
            Mutation::set_cell(
                WATERMARK_FAMILY,
                "lo",
                stamp,
                plan.new.lo.to_be_bytes().to_vec(),
            ),
        ];
        for (facet, cell) in facet_cells(&plan.totals)? {
            write.push(Mutation::set_cell(FACET_TOTALS_FAMILY, facet, stamp, cell));
        }
        for (q, t) in &plan.latest {
            // Timestamps have millisecond granularity.
            let t = t - t.rem_euclid(1000);
            write.push(Mutation::set_cell(LATEST_FAMILY, q.clone(), t, Vec::new()));
        }
        for day in &plan.folded_marks {
            write.push(Mutation::DeleteFromColumn {
                family: MARKS_FAMILY.into(),
                qualifier: Bytes::from(day_qualifier(*day)),
                time_range: TimestampRange::new(0, (plan.new.h + 1) * DAY_MICROS),
            });
        }
        // Unsynced: a fold lost in a crash is a fold not yet made, which
        // reads allow and the next maintenance makes.
        let matched = app.profiles.check_and_mutate_row_unsynced(
            key.as_bytes(),
            Some(&predicate),
            &[],
            &write,
        )?;
        Ok(!matched)
    }

    /// Fold one user: prepare and commit, trying again (twice) when another
    /// fold commits in between.
    pub fn fold_user(&self, app: &App, user: &str) -> Result<FoldOutcome> {
        for _ in 0..3 {
            let Some(plan) = self.prepare_fold(app, user)? else {
                return Ok(FoldOutcome::UpToDate);
            };
            if self.commit_fold(app, &plan)? {
                return Ok(FoldOutcome::Folded {
                    rows_read: plan.rows_read,
                });
            }
        }
        Ok(FoldOutcome::Conflict)
    }
}
