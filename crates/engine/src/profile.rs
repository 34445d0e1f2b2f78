//! Reading profiles: the streaming profile from the profile state (see
//! [`crate::state`]; [`crate::ingest`] writes it), stored batch profiles,
//! and GDPR deletion.
//!
//! The streaming read, for cutoff `C = now - retention`:
//! - days entirely within retention: their counters, plus a correction for
//!   each event added other than once (its id cell is not 1: that one
//!   event row is read and its counts added `1 - times` times);
//! - the day containing `C`: counters ignored; its events at or after `C`
//!   are read from the events table (retention is exact to the
//!   millisecond);
//! - older days: ignored (and expired by GC);
//! - `lastEventAt`: the latest timestamp of the `t` cells of the days
//!   within retention whose `(type, name, facet)` the strategy scores, and
//!   the scoring events read for the day containing `C`.
//!
//! So a read is one scan of the user's state rows, plus the events of the
//! day containing `C` when the user has any that day, plus one event row
//! per correction.
//!
//! Deletion removes the user's event rows (found by a scan of the user's
//! key prefix), the batch profile row and every state row. It deletes what
//! is stored under that identity (events of an authenticated user are
//! keyed by the authenticated token); an ingestion of the same user racing
//! with the deletion may leave that ingestion's events, and the caller
//! verifies with [`Engine::user_row_count`].

use std::ops::Bound;

use affinity_model::{
    prefix_successor, Bytes, Mutation, ReadRowsRequest, RowFilter, RowMutations, RowRange, RowSet,
    Table, ValueRange,
};
use affinity_rowkey::composite::{user_prefix, user_time_range};

use crate::batch::visit_rows;
use crate::engine::{App, Engine, DAY_MILLIS};
use crate::error::{Error, Result};
use crate::event::EventType;
use crate::schema::{decode_row, since};
use crate::scoring::{Accumulator, Profile, ScoredEvent, SortedScores};
use crate::state::{
    parse_counter_qualifier, parse_last_qualifier, state_row_key, EventId, COUNTERS_FAMILY,
    IDS_FAMILY, LAST_FAMILY,
};
use crate::strategy::{Strategy, Weights};

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
        let cutoff = self.now_millis() - app.config.retention_millis();
        let from = from_millis.max(cutoff);
        if from >= to_millis {
            return Ok(Vec::new());
        }
        let range = user_time_range(&app.id, user, from, to_millis)?;
        let request = ReadRowsRequest::new(physical(app, &range)).with_filter(since(cutoff));
        let mut out = Vec::new();
        for row in app.events.read_rows(&request)? {
            if let Some(e) = decode_row(&row?)? {
                out.push(e);
            }
        }
        Ok(out)
    }

    fn event_by_id(&self, app: &App, user: &str, id: &EventId) -> Result<Option<ScoredEvent>> {
        let cutoff = self.now_millis() - app.config.retention_millis();
        let key = id.row_key(&app.id, user)?;
        match app
            .events
            .read_row(&app.event_key(key.as_bytes()), Some(&since(cutoff)))?
        {
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
        let mut out =
            Vec::with_capacity(64 + scores.0.iter().map(|(_, v)| 16 * v.len()).sum::<usize>());
        scores.write_profile_json(&mut out, user, last_event_millis, None)?;
        Ok(Some(out))
    }

    /// The time of the user's latest scoring event and their sorted
    /// scores under `strategy`, from the streaming state.
    fn scores_with(
        &self,
        app: &str,
        user: &str,
        strategy: &Strategy,
    ) -> Result<Option<(i64, SortedScores)>> {
        let app = self.app(app)?;
        let weights = strategy.weights();
        let mut acc = Accumulator::new(&weights);
        let cutoff = self.now_millis() - app.config.retention_millis();
        let boundary = cutoff.div_euclid(DAY_MILLIS);
        let first = state_row_key(user, boundary);
        let end = prefix_successor(format!("{user},").as_bytes()).unwrap_or_default();
        let request = ReadRowsRequest::new(RowSet::from_range(RowRange::closed_open(first, end)))
            .with_filter(state_read_filter());
        let mut corrections: Vec<(EventId, i64)> = Vec::new();
        let (mut any_state, mut boundary_state) = (false, false);
        let mut counters = CounterColumns::new(&weights);
        visit_rows(app.profiles.as_ref(), &request, |row| {
            let day = row
                .key
                .get(user.len() + 1..)
                .and_then(|d| std::str::from_utf8(d).ok())
                .and_then(|d| d.parse::<i64>().ok())
                .ok_or_else(|| Error::corrupt("state row key", format!("{:?}", row.key)))?;
            any_state = true;
            if day <= boundary {
                // Counted from the events table, to the millisecond.
                boundary_state |= day == boundary;
                return Ok(());
            }
            for cell in row.cells {
                if cell.family == LAST_FAMILY {
                    // Its timestamp is the column's latest event time.
                    let (ty, name, facet) = parse_last_qualifier(cell.qualifier)?;
                    if weights.event(ty, &name).is_some() && weights.facet(&facet).is_some() {
                        acc.note_event_time(cell.timestamp_micros.div_euclid(1000));
                    }
                    continue;
                }
                let n = affinity_model::apply::decode_i64(cell.value).ok_or_else(|| {
                    Error::corrupt("state cell", format!("{} bytes", cell.value.len()))
                })?;
                if cell.family == COUNTERS_FAMILY {
                    counters.add(cell.qualifier, n, &mut acc)?;
                } else if cell.family == IDS_FAMILY && n != 1 {
                    // The filter leaves only these (see `state_read_filter`).
                    corrections.push((EventId::from_qualifier(cell.qualifier)?, n));
                }
            }
            Ok(())
        })?;
        if !any_state {
            return Ok(None);
        }
        for (id, times) in corrections {
            if let Some(e) = self.event_by_id(&app, user, &id)? {
                acc.add_counts(&e, 1 - times);
            }
        }
        if boundary_state {
            for e in self.user_events(&app, user, cutoff, (boundary + 1) * DAY_MILLIS)? {
                acc.add_event(&e);
            }
        }
        Ok(acc.take_sorted())
    }

    /// Delete every event and the profile of a user (GDPR).
    pub fn delete_user(&self, app: &str, user: &str) -> Result<Deleted> {
        let app = self.app(app)?;
        let range = user_prefix(&app.id, user)?;
        let request =
            ReadRowsRequest::new(physical(&app, &range)).with_filter(RowFilter::Chain(vec![
                RowFilter::CellsPerRowLimit(1),
                RowFilter::StripValue,
            ]));
        let keys: Vec<_> = app
            .events
            .read_rows(&request)?
            .map(|r| r.map(|r| r.key))
            .collect::<Result<_, _>>()?;
        delete_rows(app.events.as_ref(), &keys)?;
        let profile_keys = profile_row_keys(app.profiles.as_ref(), user)?;
        delete_rows(app.profiles.as_ref(), &profile_keys)?;
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
        Ok(events + profile_row_keys(app.profiles.as_ref(), user)?.len())
    }
}

/// A facet's slot in the weights and `eventScore * facetScore`.
type SlotWeight = (usize, i64);

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
        if let Some((prefix, resolved)) = self.prefixes.get(self.current) {
            if let Some(value) = plain_value_after(q, prefix) {
                if let Some((slot, weight)) = *resolved {
                    add_value(acc, slot, q, value, weight * n)?;
                }
                return Ok(());
            }
        }
        // A new prefix: split at the commas of an unquoted qualifier.
        if q.contains(&b'"') {
            return self.add_parsed(q, n, acc);
        }
        let mut commas = comma_positions(q);
        let (Some(_), Some(_), Some(third), None) =
            (commas.next(), commas.next(), commas.next(), commas.next())
        else {
            return self.add_parsed(q, n, acc);
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
        if let Some((slot, weight)) = self.prefixes[self.current].1 {
            add_value(acc, slot, q, value, weight * n)?;
        }
        Ok(())
    }

    /// The facet slot and weight of the counters of `(ty, name, facet)`,
    /// `None` when the strategy does not score them.
    fn resolve(&self, ty: EventType, name: &str, facet: &str) -> Option<SlotWeight> {
        match (self.weights.event(ty, name), self.weights.facet_slot(facet)) {
            (Some(es), Some((slot, fs))) => Some((slot, i64::from(es) * i64::from(fs))),
            _ => None,
        }
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

/// The physical rows of a logical events range.
fn physical(app: &App, range: &RowRange) -> RowSet {
    RowSet::from_ranges(
        app.physical_ranges(range)
            .into_iter()
            .map(|(_, r)| r)
            .collect(),
    )
}

/// Keys of a user's rows in `profiles.<app>`: the batch profile `user` and
/// the state rows `user,DAY`.
fn profile_row_keys(table: &dyn Table, user: &str) -> Result<Vec<affinity_model::Bytes>> {
    let mut rows = RowSet::from_keys([user.as_bytes().to_vec()]);
    rows.ranges.push(RowRange::prefix(format!("{user},")));
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
