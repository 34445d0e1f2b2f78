//! Reading profiles from the profile state (see [`crate::ingest`] and
//! [`crate::rollup`]; the design is `docs/design/profiles.md`), and GDPR
//! deletion.
//!
//! A read, with window start day `W` and the rollup's watermark `h`:
//! - the rollup row: folded counters and latest times;
//! - the day rows after `h` (everything in them arrived after the fold):
//!   counters, latest times, and a correction for each event added other
//!   than once (its id cell is not 1: that event row is read and its
//!   counts added `1 - times` times);
//! - only when the rollup says so: the days with late adds since the fold
//!   (their adds after `h`, each event counted only if the rollup did not
//!   count it) and the days that left the window since the fold (what the
//!   rollup holds of them is taken out).
//!
//! Deletion replaces the rollup row with a tombstone (so a fold that read
//! the user before cannot write them back), then removes the user's event
//! rows and day rows. It deletes what is stored under that identity
//! (events of an authenticated user are keyed by the authenticated token);
//! an ingestion of the same user racing with the deletion may leave that
//! ingestion's events, and the caller verifies with
//! [`Engine::user_row_count`].

use std::cell::{OnceCell, RefCell};
use std::ops::Bound;
use std::rc::Rc;
use std::sync::Arc;

use affinity_model::recent::Recent;
use affinity_model::{
    prefix_successor, Bytes, Mutation, ReadRowsRequest, RowFilter, RowMutations, RowRange, RowSet,
    Table, ValueRange,
};
use affinity_rowkey::composite::{user_prefix, user_time_range};

use crate::batch::visit_rows;
use crate::cache::{KeptRollup, ProfileCache};
use crate::engine::{App, Engine, DAY_MILLIS, SLACK_DAYS};
use crate::error::{Error, Result};
use crate::event::{EventType, MAX_SKEW_MILLIS};
use crate::rollup::{
    arrival_day, deletion_value, packed, read_rollup, read_rollups, rollup_key, row_day, Arrivals,
    Rollup, Watermark, CLOSE_MARGIN_MILLIS, DELETED, DELETING, FACET_TOTALS_FAMILY, LATEST_FAMILY,
    LINKS_FAMILY, MARKS_FAMILY, MEMBERS_FAMILY, TOMBSTONE_FAMILY, TOTALS_FAMILY, WATERMARK_FAMILY,
};
use crate::schema::{decode_row, since};
use crate::scoring::{Accumulator, Profile, ScoredEvent, SortedRuns, SortedScores};
use crate::state::{
    decode_sum, parse_counter_qualifier, parse_last_qualifier, state_row_key, EventId,
    COUNTERS_FAMILY, DIGEST_FAMILY, IDS_FAMILY, LAST_FAMILY,
};
use crate::strategy::{Strategy, Weights};

const DAY_MICROS: i64 = DAY_MILLIS * 1000;

/// The profile reader's filter over state rows: counters and latest
/// times whole, and of the event ids only the cells whose sum is not 1
/// (the events to correct). An id cell is one per event of the day and
/// nearly all say 1, so without it a read would hand over, and walk, one
/// cell per event; with it the embedded store drops them on their value
/// alone, and Cloud Bigtable does not send them. The value range is
/// bytewise over the sum's 8 big-endian bytes: above 1 are the sums of 2
/// and more, and negative ones (sign bit set); below it only 0, which
/// adds of 1 never leave.
pub(crate) fn state_read_filter() -> RowFilter {
    RowFilter::interleave(vec![
        RowFilter::exact_family(COUNTERS_FAMILY),
        RowFilter::exact_family(DIGEST_FAMILY),
        RowFilter::exact_family(LAST_FAMILY),
        RowFilter::Chain(vec![
            RowFilter::exact_family(IDS_FAMILY),
            RowFilter::ValueRange(ValueRange {
                start: Bound::Excluded(Bytes::copy_from_slice(&1i64.to_be_bytes())),
                end: Bound::Unbounded,
            }),
        ]),
    ])
}

/// The newest event day a day row can have at `now_millis`: timestamps
/// are accepted up to [`MAX_SKEW_MILLIS`] ahead of the ingesting clock, and
/// clocks agree within half of [`CLOSE_MARGIN_MILLIS`]
/// (`docs/design/profiles.md`); a full margin is allowed.
pub(crate) fn newest_day(now_millis: i64) -> i64 {
    (now_millis + MAX_SKEW_MILLIS + CLOSE_MARGIN_MILLIS).div_euclid(DAY_MILLIS)
}

/// [`Strategy::weights`] of `strategy`, kept by each thread for the few
/// strategies it read under last: every profile read needs them, and a
/// server reads under its application's strategy and its variants.
fn weights_of(strategy: &Strategy) -> Rc<Weights> {
    thread_local! {
        static LAST: RefCell<Recent<Strategy, Rc<Weights>>> = const { RefCell::new(Recent::new(4)) };
    }
    LAST.with_borrow_mut(|last| last.get_or_make(strategy, |s| Rc::new(s.weights())))
}

/// A profile read takes up to this many live days as point reads, more as
/// one range.
const LIVE_POINT_READS: i64 = 3;

/// What a user deletion removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deleted {
    pub event_rows: usize,
    pub profile_rows: usize,
}

impl Engine {
    /// The user's events with `from <= timestamp < to` (cells older than the
    /// retention excluded).
    pub fn user_events(
        &self,
        app: &App,
        user: &str,
        from_millis: i64,
        to_millis: i64,
    ) -> Result<Vec<ScoredEvent>> {
        let cutoff = app.config.window_start_millis(self.now_millis());
        let from = from_millis.max(cutoff);
        if from >= to_millis {
            return Ok(Vec::new());
        }
        // The range may hold more of its end days (a listed user's
        // bucketed keys sort by date alone): kept by time.
        let range = user_time_range(&app.id, user, from, to_millis)?;
        let request = ReadRowsRequest::new(physical(app, &range)).with_filter(since(cutoff));
        let mut out = Vec::new();
        for row in app.events.read_rows(&request)? {
            if let Some(e) = decode_row(&row?)? {
                if (from..to_millis).contains(&e.timestamp_millis) {
                    out.push(e);
                }
            }
        }
        Ok(out)
    }

    /// An event as stored, whatever its age (the events table keeps
    /// events past the window as long as the state may need to correct
    /// them).
    pub(crate) fn stored_event(
        &self,
        app: &App,
        user: &str,
        id: &EventId,
    ) -> Result<Option<ScoredEvent>> {
        let rows = self.hot_list(app, id.day())?.rows(user);
        let key = id.row_key(&app.id, user, rows)?;
        match app.events.read_row(&app.event_key(key.as_bytes()), None)? {
            Some(row) => decode_row(&row),
            None => Ok(None),
        }
    }

    /// The user's profile scored with the application's current strategy,
    /// from the streaming state; `None` without a strategy or without a
    /// scoring event.
    pub fn profile(&self, app: &str, user: &str) -> Result<Option<Profile>> {
        match self.strategy(app)? {
            Some(strategy) => self.profile_with(app, user, &strategy),
            None => Ok(None),
        }
    }

    /// The user's streaming profile under `strategy`.
    pub fn profile_with(
        &self,
        app: &str,
        user: &str,
        strategy: &Strategy,
    ) -> Result<Option<Profile>> {
        Ok(self
            .scores_with(app, user, strategy)?
            .map(|(last_event_millis, scores)| scores.into_profile(user, last_event_millis)))
    }

    /// The user's streaming profile under `strategy` as the API's JSON
    /// (the bytes `serde_json` writes for [`Engine::profile_with`]'s
    /// profile), written straight from the sorted scores.
    pub fn profile_json_with(
        &self,
        app: &str,
        user: &str,
        strategy: &Strategy,
    ) -> Result<Option<Vec<u8>>> {
        let Some((last_event_millis, scores)) = self.scores_with(app, user, strategy)? else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(scores.json_size_hint());
        scores.write_profile_json(&mut out, user, last_event_millis)?;
        Ok(Some(out))
    }

    /// The time of the latest scoring event and the sorted scores under
    /// `strategy` of `user`'s identity (the user, or the identity an
    /// anonymous token belongs to, with every member: see
    /// `docs/design/identity.md`), from the profile state: the scores of
    /// [`Engine::profile_with`], without building its maps (query time
    /// looks values up in them).
    pub fn scores_with(
        &self,
        app: &str,
        user: &str,
        strategy: &Strategy,
    ) -> Result<Option<(i64, SortedScores)>> {
        let handle = self.app(app)?;
        let now = self.now_millis();
        let (window, newest) = (handle.config.window_start_day(now), newest_day(now));
        let Some(cache) = self.profile_cache.as_ref().filter(|c| c.keeps_answers()) else {
            return self.compute_scores(&handle, user, strategy, window, newest, None);
        };
        let key = crate::cache::Key {
            app: app.to_string(),
            handle: handle.handle,
            user: user.to_string(),
            strategy: crate::cache::fingerprint(strategy),
            window,
            newest,
        };
        if let Some(scores) = cache.get(&key) {
            return Ok(scores);
        }
        // Before anything is read (see `cache.rs`).
        let since = cache.now();
        let mut read = Vec::new();
        let scores =
            self.compute_scores(&handle, user, strategy, window, newest, Some(&mut read))?;
        let users: Vec<&str> = read.iter().map(String::as_str).collect();
        cache.put(key, since, &users, &scores);
        Ok(scores)
    }

    /// [`Engine::scores_with`] from the store, for the window starting on
    /// day `window` through day `newest`; `read` (when given) receives
    /// every user whose rows it read.
    fn compute_scores(
        &self,
        app: &App,
        user: &str,
        strategy: &Strategy,
        window: i64,
        newest: i64,
        read: Option<&mut Vec<String>>,
    ) -> Result<Option<(i64, SortedScores)>> {
        let weights = weights_of(strategy);
        // Read first: the accumulator borrows the rollups' values.
        let rollups = self.profile_cache.as_deref().filter(|c| c.keeps_rollups());
        let members = self.identity(app, user, window, rollups)?;
        if let Some(read) = read {
            // The token, its identity's owner and every candidate member
            // the owner's rollup lists (members or not: a link written
            // to one can make it a member).
            read.push(user.to_string());
            if let Some((owner, rollup)) = members.first() {
                read.push(owner.clone());
                read.extend(
                    rollup
                        .candidates(window * DAY_MICROS)
                        .into_iter()
                        .map(str::to_string),
                );
            }
        }
        // Each member's rollup weighed, kept beside it (also read first).
        let kept = rollups.map(|cache| (cache, crate::cache::fingerprint(strategy)));
        let runs = match kept {
            Some((cache, strategy)) => members
                .iter()
                .map(|(member, rollup)| {
                    weighed_rollup(app, cache, member, rollup, (strategy, window), &weights)
                })
                .collect::<Result<Vec<_>>>()?,
            None => Vec::new(),
        };
        // Where each member's runs merged with a digest are held while
        // the accumulator borrows them.
        let held: Vec<OnceCell<Arc<SortedRuns>>> =
            members.iter().map(|_| OnceCell::new()).collect();
        let mut acc = Accumulator::new(&weights);
        let mut any_state = false;
        for (i, (member, rollup)) in members.iter().enumerate() {
            let folded = match (runs.get(i).and_then(Option::as_deref), kept) {
                (Some(runs), Some((cache, strategy))) => Folded::Weighed {
                    runs,
                    digests: DigestRuns {
                        cache,
                        strategy,
                        rollup,
                        held: &held[i],
                    },
                },
                _ => Folded::Counters,
            };
            any_state |= self.add_member(
                app, member, rollup, folded, window, newest, &weights, &mut acc,
            )?;
        }
        if !any_state {
            return Ok(None);
        }
        Ok(acc.take_sorted())
    }

    /// Add one member's profile state to `acc`; `false` when it has none.
    /// `folded_runs` says how `rollup`'s by-facet counters go in. `newest` is
    /// the newest day a day row can have ([`newest_day`]).
    #[allow(clippy::too_many_arguments)]
    fn add_member<'a>(
        &self,
        app: &App,
        user: &str,
        rollup: &'a Rollup,
        folded_runs: Folded<'a>,
        window: i64,
        newest: i64,
        weights: &Weights,
        acc: &mut Accumulator<'a>,
    ) -> Result<bool> {
        let folded = match rollup.watermark {
            Some(w) if !correctable(w, window) => {
                self.add_from_events(app, user, window, acc)?;
                return Ok(true);
            }
            w => w,
        };
        let h = folded.map_or(window - 1, |w| w.h);
        let mut any_state = folded.is_some();
        let mut counters = CounterColumns::new(weights);
        let note_latest = |acc: &mut Accumulator<'_>, q: &[u8], micros: i64| -> Result<()> {
            if micros >= window * DAY_MICROS && acc.later_than_noted(micros.div_euclid(1000)) {
                let (ty, name, facet) = parse_last_qualifier(q)?;
                if weights.event(ty, &name).is_some() && weights.facet(&facet).is_some() {
                    acc.note_event_time(micros.div_euclid(1000));
                }
            }
            Ok(())
        };
        // The rollup's counters, before any day row's: its by-facet runs
        // go in whole (borrowed) into an accumulator that holds nothing
        // yet. With the runs weighed, they wait for the first day row
        // read, whose digest they may be kept merged with.
        let add_folded = |acc: &mut Accumulator<'a>,
                          counters: &mut CounterColumns,
                          runs: Option<&'a SortedRuns>|
         -> Result<()> {
            match runs {
                Some(runs) => acc.add_runs(runs),
                None => weigh_by_facet(rollup, weights, |slot, weighted, damaged| {
                    acc.add_borrowed_sorted_at(slot, 1, weighted, |_| damaged())
                })?,
            }
            for (prefix, cell) in &rollup.totals {
                let (ty, name, facet) = parse_last_qualifier(prefix)?;
                let Some((slot, weight)) = counters.resolve(ty, &name, &facet) else {
                    continue;
                };
                acc.add_borrowed_sorted_at(slot, weight, packed::unpack(cell, prefix), |_| {
                    Error::corrupt(
                        "rollup totals",
                        String::from_utf8_lossy(prefix).into_owned(),
                    )
                })?;
            }
            for (q, t) in &rollup.latest {
                note_latest(acc, q, *t)?;
            }
            Ok(())
        };
        let mut pending = match (folded.is_some(), folded_runs) {
            (false, _) => None,
            (true, Folded::Counters) => {
                add_folded(acc, &mut counters, None)?;
                None
            }
            (true, Folded::Weighed { runs, digests }) => Some((runs, digests)),
        };
        let marked: Vec<i64> = rollup
            .marked_after(h)
            .into_iter()
            .filter(|d| *d >= window)
            .collect();
        let mut corrections: Vec<(EventId, i64)> = Vec::new();

        // The days after the watermark: all of it arrived after the fold.
        // Right after maintenance they are today and the hour around
        // midnight: point reads (bloom filters, no iterator); more days
        // (maintenance behind) in one range.
        let first = (h + 1).max(window);
        let rows = if newest - first < LIVE_POINT_READS {
            let mut rows = RowSet::default();
            self.push_day_rows(app, user, first..=newest, &mut rows)?;
            rows
        } else {
            let end = prefix_successor(format!("{user},").as_bytes()).unwrap_or_default();
            RowSet::from_range(RowRange::closed_open(state_row_key(user, first), end))
        };
        let request = ReadRowsRequest::new(rows).with_filter(state_read_filter());
        visit_rows(app.profiles.as_ref(), &request, |row| {
            let day = row_day(row.key, user)?;
            any_state = true;
            // The rollup's runs, merged with this row's digest when it
            // has one (kept beside the rollup for the next read).
            let mut digest_added = false;
            if let Some((runs, digests)) = pending.take() {
                let merged = digests.merged(app, user, runs, weights, row)?;
                digest_added = merged.is_some();
                add_folded(acc, &mut counters, Some(merged.unwrap_or(runs)))?;
            }
            let whole_ids = marked.binary_search(&day).is_ok();
            let mut run = Run::default();
            for cell in row.cells {
                if cell.family == LAST_FAMILY {
                    note_latest(acc, cell.qualifier, cell.timestamp_micros)?;
                    continue;
                }
                if cell.family == DIGEST_FAMILY {
                    if !digest_added {
                        add_digest(acc, weights, (cell.qualifier, cell.value), 1)?;
                    }
                    continue;
                }
                let n = decode_sum(cell.value)?;
                if cell.family == COUNTERS_FAMILY {
                    counters.add_to_run(cell.qualifier, n, &mut run, acc)?;
                } else if cell.family == IDS_FAMILY && n != 1 && !whole_ids {
                    // The filter leaves only these (see `state_read_filter`).
                    corrections.push((EventId::from_qualifier(cell.qualifier)?, 1 - n));
                }
            }
            run.flush(acc)?;
            Ok(())
        })?;
        if let Some((runs, _)) = pending {
            // No day row.
            add_folded(acc, &mut counters, Some(runs))?;
        }

        // Late adds to folded days, and days that left the window since the
        // fold: read with every id version.
        let mut rows = RowSet::default();
        self.push_day_rows(app, user, marked.iter().copied(), &mut rows)?;
        if let Some(w) = folded {
            self.push_day_rows(app, user, w.lo..window, &mut rows)?;
        }
        if !rows.keys.is_empty() || !rows.ranges.is_empty() {
            let request = ReadRowsRequest::new(rows).with_filter(RowFilter::interleave(vec![
                RowFilter::exact_family(COUNTERS_FAMILY),
                RowFilter::exact_family(DIGEST_FAMILY),
                RowFilter::exact_family(IDS_FAMILY),
                RowFilter::exact_family(LAST_FAMILY),
            ]));
            let mut ids: std::collections::BTreeMap<[u8; 16], Arrivals> = Default::default();
            visit_rows(app.profiles.as_ref(), &request, |row| {
                let day = row_day(row.key, user)?;
                ids.clear();
                for cell in row.cells {
                    let arrival = arrival_day(cell.timestamp_micros);
                    // What the cell's counters (or digest: counters of its
                    // arrival day) do: taken out of an expired day the
                    // rollup holds them for, added to a folded day they
                    // arrived at after the fold.
                    let sign = if day < window && arrival <= h {
                        -1
                    } else if day >= window && day <= h && arrival > h {
                        1
                    } else {
                        0
                    };
                    match cell.family {
                        COUNTERS_FAMILY if sign != 0 => {
                            counters.add(cell.qualifier, sign * decode_sum(cell.value)?, acc)?;
                        }
                        DIGEST_FAMILY if sign != 0 => {
                            add_digest(acc, weights, (cell.qualifier, cell.value), sign)?;
                        }
                        IDS_FAMILY => {
                            let id: [u8; 16] = cell.qualifier.try_into().map_err(|_| {
                                Error::corrupt(
                                    "event id qualifier",
                                    format!("{:?}", cell.qualifier),
                                )
                            })?;
                            ids.entry(id).or_default().add(
                                arrival,
                                decode_sum(cell.value)?,
                                h,
                                i64::MAX,
                            );
                        }
                        LAST_FAMILY if day >= window && day <= h => {
                            note_latest(acc, cell.qualifier, cell.timestamp_micros)?;
                        }
                        _ => {}
                    }
                }
                for (id, a) in &ids {
                    // `through_old`: adds the rollup saw; `through_new`: adds since.
                    let mult = if day < window {
                        // Taken out raw `through_old` times; the rollup
                        // counted the event once.
                        if a.through_old >= 1 {
                            a.through_old - 1
                        } else {
                            0
                        }
                    } else {
                        let target = i64::from(a.through_old == 0 && a.through_new >= 1);
                        target - a.through_new
                    };
                    if mult != 0 {
                        corrections.push((EventId::from_qualifier(id)?, mult));
                    }
                }
                Ok(())
            })?;
        }
        for (id, times) in corrections {
            if let Some(e) = self.stored_event(app, user, &id)? {
                acc.add_counts(&e, times);
            }
        }
        Ok(any_state || !marked.is_empty())
    }

    /// A member's events from the events table alone: for a user whose
    /// rollup is too old to correct (maintenance has not run for days),
    /// exact and slow.
    fn add_from_events(
        &self,
        app: &App,
        user: &str,
        window: i64,
        acc: &mut Accumulator<'_>,
    ) -> Result<()> {
        // Events are at most an hour ahead of the clock.
        let end = self.now_millis() + DAY_MILLIS;
        for e in self.user_events(app, user, window * DAY_MILLIS, end)? {
            acc.add_event(&e);
        }
        Ok(())
    }

    /// The members of `token`'s identity with their rollup rows: the
    /// identity first (`token` itself, or the identity its first link in
    /// the window names), then every anonymous token whose first link names
    /// it (`docs/design/identity.md`). A token with no link costs nothing
    /// beyond its own rollup row, which the read needs anyway. Rollup rows
    /// `cache` keeps are taken from it (profile reads); the others, and all
    /// of them without it, are read from the store.
    pub(crate) fn identity(
        &self,
        app: &App,
        token: &str,
        window: i64,
        cache: Option<&ProfileCache>,
    ) -> Result<Vec<(String, Arc<Rollup>)>> {
        let window_micros = window * DAY_MICROS;
        let own = rollups_of(app, &[token], cache)?.remove(0);
        let (owner, owner_rollup, mut found) = match own.owner(window_micros) {
            Some(owner) if owner != token => {
                let owner = owner.to_string();
                let rollup = rollups_of(app, &[&owner], cache)?.remove(0);
                // Its member cell may be missing (a crash between the two
                // link writes): the link alone makes `token` a member.
                (owner, rollup, vec![(token.to_string(), own)])
            }
            _ => (token.to_string(), own, Vec::new()),
        };
        let candidates: Vec<&str> = owner_rollup
            .candidates(window_micros)
            .into_iter()
            .filter(|c| *c != owner && found.iter().all(|(f, _)| f != c))
            .collect();
        let rollups = rollups_of(app, &candidates, cache)?;
        for (candidate, rollup) in candidates.iter().zip(rollups) {
            if rollup.owner(window_micros) == Some(owner.as_str()) {
                found.push((candidate.to_string(), rollup));
            }
        }
        let mut out = Vec::with_capacity(found.len() + 1);
        out.push((owner, owner_rollup));
        out.extend(found);
        Ok(out)
    }

    /// Delete every event and the profile of a user (GDPR). For an
    /// identity, also every anonymous token that belongs to it and the
    /// links; for an anonymous token, its own data and links (see
    /// `docs/design/identity.md`).
    pub fn delete_user(&self, app: &str, user: &str) -> Result<Deleted> {
        let app = self.app(app)?;
        let window = app.config.window_start_day(self.now_millis());
        let identity = self.identity(&app, user, window, None)?;
        let doomed: Vec<String> = if identity.first().is_some_and(|(owner, _)| owner == user) {
            identity.into_iter().map(|(member, _)| member).collect()
        } else {
            vec![user.to_string()]
        };
        // Links from the other side: anonymous tokens that named a deleted
        // identity (and are not deleted with it) and identities that list a
        // deleted anonymous token stop doing so.
        let mut unlink: Vec<RowMutations> = Vec::new();
        for member in &doomed {
            let rollup = read_rollup(&app, member)?;
            for (other, _) in &rollup.members {
                if !doomed.contains(other) {
                    unlink.push(RowMutations::new(
                        rollup_key(other),
                        vec![Mutation::delete_column(LINKS_FAMILY, member.clone())],
                    ));
                }
            }
            for (other, _) in &rollup.links {
                if !doomed.contains(other) {
                    unlink.push(RowMutations::new(
                        rollup_key(other),
                        vec![Mutation::delete_column(MEMBERS_FAMILY, member.clone())],
                    ));
                }
            }
        }
        for chunk in unlink.chunks(1000) {
            for status in app.profiles.mutate_rows(chunk)? {
                status?;
            }
        }
        let mut deleted = Deleted::default();
        for member in doomed {
            let one = self.delete_one(&app, &member)?;
            deleted.event_rows += one.event_rows;
            deleted.profile_rows += one.profile_rows;
        }
        Ok(deleted)
    }

    /// Delete one token's events, profile state and links.
    fn delete_one(&self, app: &App, user: &str) -> Result<Deleted> {
        // First the tombstone: a fold that read the user before this point
        // finds it changed and writes nothing back, and folds skip the user
        // until the deletion is done. The late markers stay until the day
        // rows are gone, so reads in between stay exact.
        let rollup = rollup_key(user);
        let started = self.now_millis();
        let nonce: u64 = rand::random();
        let mut tombstone: Vec<Mutation> = [
            FACET_TOTALS_FAMILY,
            TOTALS_FAMILY,
            LATEST_FAMILY,
            WATERMARK_FAMILY,
        ]
        .into_iter()
        .map(|family| Mutation::DeleteFromFamily {
            family: family.into(),
        })
        .collect();
        tombstone.push(Mutation::set_cell(
            TOMBSTONE_FAMILY,
            "deletion",
            started.max(0) * 1000,
            deletion_value(DELETING, started, nonce),
        ));
        app.profiles.mutate_row(rollup.as_bytes(), &tombstone)?;
        let range = user_prefix(&app.id, user)?;
        // Both layouts during a salt migration: neither may keep the user.
        let every = RowSet::from_ranges(app.every_physical_range(&range));
        let request = ReadRowsRequest::new(every).with_filter(RowFilter::Chain(vec![
            RowFilter::CellsPerRowLimit(1),
            RowFilter::StripValue,
        ]));
        let keys: Vec<_> = app
            .events
            .read_rows(&request)?
            .map(|r| r.map(|r| r.key))
            .collect::<Result<_, _>>()?;
        delete_rows(app.events.as_ref(), &app.deletion_keys(&keys))?;
        let profile_keys = profile_row_keys(app.profiles.as_ref(), user)?;
        delete_rows(app.profiles.as_ref(), &profile_keys)?;
        app.profiles.mutate_row(
            rollup.as_bytes(),
            &[
                Mutation::DeleteFromFamily {
                    family: MARKS_FAMILY.into(),
                },
                Mutation::DeleteFromFamily {
                    family: LINKS_FAMILY.into(),
                },
                Mutation::DeleteFromFamily {
                    family: MEMBERS_FAMILY.into(),
                },
                Mutation::set_cell(
                    TOMBSTONE_FAMILY,
                    "deletion",
                    self.now_millis().max(started).max(0) * 1000,
                    deletion_value(DELETED, started, nonce),
                ),
            ],
        )?;
        Ok(Deleted {
            event_rows: keys.len(),
            profile_rows: profile_keys.len(),
        })
    }

    /// Rows a scan still finds for a user (events and profile), to verify a
    /// deletion.
    pub fn user_row_count(&self, app: &str, user: &str) -> Result<usize> {
        let app = self.app(app)?;
        let range = user_prefix(&app.id, user)?;
        let events = app
            .events
            .read_rows(&ReadRowsRequest::new(physical(&app, &range)))?
            .count();
        let rollup = app.profiles.read_row(
            rollup_key(user).as_bytes(),
            Some(&RowFilter::FamilyNameRegex(format!(
                "[^{TOMBSTONE_FAMILY}]"
            ))),
        )?;
        Ok(events
            + profile_row_keys(app.profiles.as_ref(), user)?.len()
            + usize::from(rollup.is_some()))
    }
}

/// A facet's slot in the weights and `eventScore * facetScore`.
type SlotWeight = (usize, i64);

/// An unquoted counter located by [`CounterColumns::locate`]: its value,
/// its prefix's slot and weight, and whether the prefix is new.
type Located<'q> = (&'q [u8], Option<SlotWeight>, bool);

/// Counter qualifiers `type,name,facet,value` resolved during one read:
/// counters sort by their `type,name,facet,` prefix, so a counter nearly
/// always shares the last one's prefix (one comparison, then its value is
/// the rest of the qualifier), and the prefixes met are resolved to their
/// facet slot and weight once per read (a user's day rows repeat them).
struct CounterColumns<'w> {
    weights: &'w Weights,
    /// Every unquoted prefix met (without its comma) with its facet's slot
    /// and weight (`None`: the strategy does not score it); the last one
    /// is the current prefix.
    prefixes: Vec<(Vec<u8>, Option<SlotWeight>)>,
    current: usize,
}

impl<'w> CounterColumns<'w> {
    fn new(weights: &'w Weights) -> CounterColumns<'w> {
        CounterColumns {
            weights,
            prefixes: Vec::new(),
            current: usize::MAX,
        }
    }

    /// Add counter `q` with count `n` to `acc`.
    fn add(&mut self, q: &[u8], n: i64, acc: &mut Accumulator<'_>) -> Result<()> {
        match self.locate(q)? {
            Some((value, target, _)) => match target {
                Some((slot, weight)) => add_value(acc, slot, q, value, weight * n),
                None => Ok(()),
            },
            None => self.add_parsed(q, n, acc),
        }
    }

    /// [`CounterColumns::add`] for the counters of one row, in order: the
    /// unquoted values of one prefix come sorted (their qualifiers' order),
    /// so they go to `acc` as one sorted run; quoted ones are added alone.
    fn add_to_run<'r>(
        &mut self,
        q: &'r [u8],
        n: i64,
        run: &mut Run<'r>,
        acc: &mut Accumulator<'_>,
    ) -> Result<()> {
        let Some((value, target, new_prefix)) = self.locate(q)? else {
            return self.add_parsed(q, n, acc);
        };
        if new_prefix {
            run.flush(acc)?;
        }
        // (A row's first counter may continue the last row's prefix: its
        // run starts here.)
        run.target = target;
        if target.is_some() {
            run.push(value, n);
        }
        Ok(())
    }

    /// The value of unquoted counter `q`, its prefix's facet slot and
    /// weight (`None`: not scored), and whether its prefix differs from
    /// the last counter's; `None` for a quoted (or malformed) qualifier,
    /// which needs the full CSV parse.
    #[inline]
    fn locate<'q>(&mut self, q: &'q [u8]) -> Result<Option<Located<'q>>> {
        if let Some((prefix, resolved)) = self.prefixes.get(self.current) {
            if let Some(value) = plain_value_after(q, prefix) {
                return Ok(Some((value, *resolved, false)));
            }
        }
        if q.contains(&b'"') {
            return Ok(None);
        }
        let mut commas = comma_positions(q);
        let (Some(_), Some(_), Some(third), None) =
            (commas.next(), commas.next(), commas.next(), commas.next())
        else {
            return Ok(None);
        };
        let (prefix, value) = (&q[..third], &q[third + 1..]);
        self.current = match self.prefixes.iter().position(|(p, _)| p == prefix) {
            Some(i) => i,
            None => {
                let (ty, name, facet) = parse_last_qualifier(prefix)?;
                let resolved = self.resolve(ty, &name, &facet);
                self.prefixes.push((prefix.to_vec(), resolved));
                self.prefixes.len() - 1
            }
        };
        Ok(Some((value, self.prefixes[self.current].1, true)))
    }

    fn resolve(&self, ty: EventType, name: &str, facet: &str) -> Option<SlotWeight> {
        resolve(self.weights, ty, name, facet)
    }

    /// A quoted (or malformed) counter qualifier: the full CSV parse.
    fn add_parsed(&self, q: &[u8], n: i64, acc: &mut Accumulator<'_>) -> Result<()> {
        let (ty, name, facet, value) = parse_counter_qualifier(q)?;
        if let Some((slot, weight)) = self.resolve(ty, &name, &facet) {
            acc.add_at(slot, &value, weight * n);
        }
        Ok(())
    }
}

/// The unquoted counters of one prefix of a row, sorted by value (each
/// once, its versions summed), with the prefix's facet slot and weight.
#[derive(Default)]
struct Run<'r> {
    target: Option<SlotWeight>,
    values: Vec<(&'r [u8], i64)>,
}

impl<'r> Run<'r> {
    /// Count `n` of `value`: a counter's versions (one per arrival day)
    /// come one after another.
    #[inline]
    fn push(&mut self, value: &'r [u8], n: i64) {
        match self.values.last_mut() {
            Some((last, sum)) if *last == value => *sum += n,
            _ => self.values.push((value, n)),
        }
    }

    /// Add the run to `acc` and empty it.
    fn flush(&mut self, acc: &mut Accumulator<'_>) -> Result<()> {
        if let Some((slot, weight)) = self.target {
            acc.add_sorted_at(slot, weight, self.values.drain(..).map(Ok), |v| {
                Error::corrupt("counter qualifier", String::from_utf8_lossy(v).into_owned())
            })?;
        }
        self.values.clear();
        Ok(())
    }
}

/// The value of counter qualifier `q` when it is `prefix,value` with an
/// unquoted value (no comma, no quote).
#[inline]
fn plain_value_after<'q>(q: &'q [u8], prefix: &[u8]) -> Option<&'q [u8]> {
    let rest = q.strip_prefix(prefix)?.strip_prefix(b",")?;
    (!rest.iter().any(|b| *b == b',' || *b == b'"')).then_some(rest)
}

fn comma_positions(q: &[u8]) -> impl Iterator<Item = usize> + '_ {
    q.iter()
        .enumerate()
        .filter(|(_, b)| **b == b',')
        .map(|(i, _)| i)
}

/// Add `add` to `value` of counter qualifier `q` (`value` checked as
/// UTF-8 when the read first meets it).
fn add_value(
    acc: &mut Accumulator<'_>,
    slot: usize,
    q: &[u8],
    value: &[u8],
    add: i64,
) -> Result<()> {
    acc.add_utf8_at(slot, value, add)
        .map_err(|_| Error::corrupt("counter qualifier", String::from_utf8_lossy(q).into_owned()))
}

/// Whether a rollup folded to watermark `w` can be read for the window
/// starting on day `window`: not when it is too old to correct (or from
/// a clock ahead of ours); the read then counts the events themselves.
fn correctable(w: Watermark, window: i64) -> bool {
    w.lo >= window - i64::from(SLACK_DAYS) && w.lo <= window
}

/// The facet slot and weight under `weights` of the counters of `(ty,
/// name, facet)`, `None` when the strategy does not score them.
fn resolve(weights: &Weights, ty: EventType, name: &str, facet: &str) -> Option<SlotWeight> {
    match (weights.event(ty, name), weights.facet_slot(facet)) {
        (Some(es), Some((slot, fs))) => Some((slot, i64::from(es) * i64::from(fs))),
        _ => None,
    }
}

/// Weigh each by-facet cell of `rollup` that `weights` scores: `each(slot,
/// run, damaged)` with the facet's slot, its values in order with
/// `sum(weight * count)` over the cell's prefixes, and the error that
/// names the cell as damaged.
fn weigh_by_facet<'r>(
    rollup: &'r Rollup,
    weights: &Weights,
    each: impl FnMut(usize, packed::Weighted<'r, '_>, &dyn Fn() -> Error) -> Result<()>,
) -> Result<()> {
    let cells = rollup
        .by_facet
        .iter()
        .map(|(f, c)| (f.as_slice(), c.as_slice()));
    weigh_facet_cells(cells, "rollup totals", weights, each)
}

/// [`weigh_by_facet`] of packed by-facet cells `(facet, cell)`: a
/// rollup's (`f`) or a day row's digest (`g`); `what` names them in the
/// damaged cell's error.
fn weigh_facet_cells<'r>(
    cells: impl IntoIterator<Item = (&'r [u8], &'r [u8])>,
    what: &'static str,
    weights: &Weights,
    mut each: impl FnMut(usize, packed::Weighted<'r, '_>, &dyn Fn() -> Error) -> Result<()>,
) -> Result<()> {
    for (facet, cell) in cells {
        let cell = packed::unpack_facet(cell, facet)?;
        let damaged = || Error::corrupt(what, format!("facet {}", String::from_utf8_lossy(facet)));
        // One weight per prefix (0 where the strategy does not score it);
        // every prefix is of the cell's facet.
        let mut slot = None;
        let mut prefix_weights = Vec::with_capacity(cell.prefixes().len());
        for prefix in cell.prefixes() {
            let (ty, name, of) = parse_last_qualifier(prefix)?;
            if of.as_bytes() != facet {
                return Err(damaged());
            }
            prefix_weights.push(match resolve(weights, ty, &name, &of) {
                Some((s, w)) => {
                    slot = Some(s);
                    w
                }
                None => 0,
            });
        }
        if let Some(slot) = slot {
            each(slot, cell.weighted(&prefix_weights), &damaged)?;
        }
    }
    Ok(())
}

/// Add a day row's digest cell (`g`: a facet's counters of the row's
/// closed hours) to `acc`, `sign` times.
fn add_digest(
    acc: &mut Accumulator<'_>,
    weights: &Weights,
    (facet, cell): (&[u8], &[u8]),
    sign: i64,
) -> Result<()> {
    weigh_facet_cells(
        [(facet, cell)],
        "day digest",
        weights,
        |slot, weighted, damaged| acc.add_sorted_at(slot, sign, weighted, |_| damaged()),
    )
}

/// How a profile read adds a member's rollup's by-facet counters.
enum Folded<'a> {
    /// Weighed from the rollup's cells.
    Counters,
    /// As `runs`, the counters weighed under the read's weights
    /// ([`weighed_rollup`]), or those merged with a day row's digest.
    Weighed {
        runs: &'a SortedRuns,
        digests: DigestRuns<'a>,
    },
}

/// Where a read finds, or keeps, a member's rollup's weighed runs merged
/// with a day row's digest: beside the rollup in `cache`, under the
/// strategy of fingerprint `strategy`, held in `held` while the read's
/// accumulator borrows them.
struct DigestRuns<'a> {
    cache: &'a ProfileCache,
    strategy: u64,
    rollup: &'a Arc<Rollup>,
    held: &'a OnceCell<Arc<SortedRuns>>,
}

impl<'a> DigestRuns<'a> {
    /// `runs` (the rollup's, weighed under `weights`) merged with the
    /// digest of `row`, one of `member`'s day rows: those kept beside the
    /// rollup for the same digest bytes, or merged now and kept; `None`
    /// when the row has no digest.
    fn merged(
        self,
        app: &App,
        member: &str,
        runs: &SortedRuns,
        weights: &Weights,
        row: affinity_model::RowRef<'_>,
    ) -> Result<Option<&'a SortedRuns>> {
        let mut cells = row
            .cells
            .iter()
            .filter(|c| c.family == DIGEST_FAMILY)
            .peekable();
        if cells.peek().is_none() {
            return Ok(None);
        }
        // The digest as read: what makes two reads' digests the same.
        let mut digest = Vec::with_capacity(256);
        let mut put = |bytes: &[u8]| {
            digest.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
            digest.extend_from_slice(bytes);
        };
        put(row.key);
        for cell in cells.clone() {
            put(cell.qualifier);
            put(&cell.timestamp_micros.to_be_bytes());
            put(cell.value);
        }
        let (cache, strategy) = (self.cache, self.strategy);
        let rollup = KeptRollup {
            app: &app.id,
            handle: app.handle,
            user: member,
            rollup: self.rollup,
        };
        let merged = match cache.digested(rollup, strategy, &digest) {
            Some(merged) => merged,
            None => {
                let merged = SortedRuns::merged(weights, runs, |acc| {
                    cells.try_for_each(|c| add_digest(acc, weights, (c.qualifier, c.value), 1))
                })?;
                let Some(merged) = merged else {
                    return Ok(None);
                };
                let merged = Arc::new(merged);
                cache.put_digested(rollup, strategy, &digest, &merged);
                merged
            }
        };
        Ok(Some(self.held.get_or_init(|| merged)))
    }
}

/// `member`'s rollup's by-facet counters weighed under `weights` (the
/// strategy's, of fingerprint `strategy`): those `cache` keeps beside
/// the rollup, or weighed now and kept there; `None` when the rollup has
/// none, or the read for the window starting on day `window` does not
/// take them ([`correctable`]).
fn weighed_rollup(
    app: &App,
    cache: &ProfileCache,
    member: &str,
    rollup: &Arc<Rollup>,
    (strategy, window): (u64, i64),
    weights: &Weights,
) -> Result<Option<Arc<SortedRuns>>> {
    if rollup.by_facet.is_empty() || !rollup.watermark.is_some_and(|w| correctable(w, window)) {
        return Ok(None);
    }
    let kept = KeptRollup {
        app: &app.id,
        handle: app.handle,
        user: member,
        rollup,
    };
    if let Some(runs) = cache.weighed(kept, strategy) {
        return Ok(Some(runs));
    }
    let mut runs = SortedRuns::default();
    weigh_by_facet(rollup, weights, |slot, weighted, damaged| {
        runs.push_run(slot, 1, weighted, |_| damaged())
    })?;
    let runs = Arc::new(runs);
    cache.put_weighed(kept, strategy, &runs);
    Ok(Some(runs))
}

/// The rollup rows of `users` of `app`, in their order (an empty rollup
/// for a user without one): those `cache` keeps, the others read from the
/// store in one read (and kept).
fn rollups_of(app: &App, users: &[&str], cache: Option<&ProfileCache>) -> Result<Vec<Arc<Rollup>>> {
    let Some(cache) = cache else {
        return Ok(read_rollups(app, users)?
            .into_iter()
            .map(Arc::new)
            .collect());
    };
    // Before anything is read (see `cache.rs`).
    let since = cache.now();
    let mut out: Vec<Option<Arc<Rollup>>> = users
        .iter()
        .map(|u| cache.rollup(&app.id, app.handle, u))
        .collect();
    let missing: Vec<&str> = users
        .iter()
        .zip(&out)
        .filter(|(_, kept)| kept.is_none())
        .map(|(u, _)| *u)
        .collect();
    if !missing.is_empty() {
        let mut read = read_rollups(app, &missing)?.into_iter();
        for (user, slot) in users.iter().zip(&mut out) {
            if slot.is_none() {
                let rollup = Arc::new(read.next().unwrap_or_default());
                cache.put_rollup(&app.id, app.handle, user, since, &rollup);
                *slot = Some(rollup);
            }
        }
    }
    Ok(out.into_iter().map(Option::unwrap_or_default).collect())
}

/// The physical rows of a logical events range.
fn physical(app: &App, range: &RowRange) -> RowSet {
    RowSet::from_ranges(
        app.physical_ranges(range)
            .into_iter()
            .map(|(_, r)| r)
            .collect(),
    )
}

/// Keys of a user's rows in `profiles.<app>`: the day rows `user,DAY`,
/// and the row `user`, which nothing writes now but which stores written
/// by earlier versions may still hold (the profile their batch recompute
/// stored, family `b`, with no age limit: deletion is what removes it).
/// Not the rollup row `user,!`: a deletion keeps it as the tombstone,
/// which expires within a week.
fn profile_row_keys(table: &dyn Table, user: &str) -> Result<Vec<affinity_model::Bytes>> {
    let mut rows = RowSet::from_keys([user.as_bytes().to_vec()]);
    // `user,!` sorts before every day row `user,DDDDDDDD`.
    rows.ranges.push(RowRange::closed_open(
        format!("{user},0"),
        prefix_successor(format!("{user},").as_bytes()).unwrap_or_default(),
    ));
    let request = ReadRowsRequest::new(rows).with_filter(RowFilter::Chain(vec![
        RowFilter::CellsPerRowLimit(1),
        RowFilter::StripValue,
    ]));
    Ok(table
        .read_rows(&request)?
        .map(|r| r.map(|r| r.key))
        .collect::<Result<_, _>>()?)
}

fn delete_rows(table: &dyn Table, keys: &[affinity_model::Bytes]) -> Result<()> {
    for chunk in keys.chunks(1000) {
        let entries: Vec<RowMutations> = chunk
            .iter()
            .map(|k| RowMutations::new(k.clone(), vec![Mutation::DeleteFromRow]))
            .collect();
        for status in table.mutate_rows(&entries)? {
            status?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn weights_kept_per_thread_are_each_strategys_own() {
        // Six strategies, one facet's score each, read under in turns
        // (more than a thread keeps), and one edited in place.
        let strategy = |score: u32| {
            Strategy::from_json(&json!({
                "eventsScoring": [{"eventName": "click", "eventType": "click", "score": 10}],
                "facetsScoring": [{"facetName": "brand", "score": score}],
                "personalizationImpact": 50}))
            .unwrap()
        };
        let strategies: Vec<Strategy> = (1..=6).map(strategy).collect();
        for round in 0..3 {
            for (i, s) in strategies.iter().enumerate().rev().skip(round) {
                let weights = weights_of(s);
                assert_eq!(weights.facet_slot("brand"), Some((0, i as u32 + 1)));
                assert_eq!(weights.event(EventType::Click, "click"), Some(10));
            }
        }
        let mut edited = strategies[0].clone();
        assert_eq!(weights_of(&edited).facet_slot("brand"), Some((0, 1)));
        edited.facets.insert("color".to_string(), 7);
        let weights = weights_of(&edited);
        assert_eq!(weights.facet_names(), ["brand", "color"]);
        assert_eq!(weights.facet_slot("color"), Some((1, 7)));
    }
}
