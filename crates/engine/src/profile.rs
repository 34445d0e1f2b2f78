//! Reading profiles: the streaming profile from the profile state (see
//! [`crate::ingest`]), stored batch profiles, and GDPR deletion.
//!
//! The streaming read, for cutoff `C = now - retention`:
//! - days entirely within retention: their counters, plus a correction for
//!   each event added other than once (its id cell is not 1: that one
//!   event row is read and its counts added `1 - times` times);
//! - the day containing `C`: counters ignored; its events at or after `C`
//!   are read from the events table (retention is exact to the
//!   millisecond);
//! - older days: ignored (and expired by GC);
//! - `lastEventAt`: the newest day holding state is read from the events
//!   table, then older ones until a scoring event is found.
//!
//! Deletion removes the user's event rows (found by a scan of the user's
//! key prefix), the batch profile row and every state row. It deletes what
//! is stored under that identity (events of an authenticated user are
//! keyed by the authenticated token); an ingestion of the same user racing
//! with the deletion may leave that ingestion's events, and the caller
//! verifies with [`Engine::user_row_count`].

use std::collections::BTreeSet;

use affinity_model::{
    prefix_successor, Mutation, ReadRowsRequest, RowFilter, RowMutations, RowRange, RowSet, Table,
};
use affinity_rowkey::composite::{user_prefix, user_time_range};

use crate::batch::visit_rows;
use crate::engine::{App, Engine, DAY_MILLIS};
use crate::error::{Error, Result};
use crate::ingest::{parse_counter_qualifier, state_row_key, EventId, COUNTERS_FAMILY, IDS_FAMILY};
use crate::schema::{decode_row, since};
use crate::scoring::{Accumulator, Profile, ScoredEvent};
use crate::strategy::Strategy;

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
        let app = self.app(app)?;
        let weights = strategy.weights();
        let mut acc = Accumulator::new(&weights);
        let cutoff = self.now_millis() - app.config.retention_millis();
        let boundary = cutoff.div_euclid(DAY_MILLIS);
        let filter = RowFilter::FamilyNameRegex(format!("[{COUNTERS_FAMILY}{IDS_FAMILY}]"));
        let mut days = BTreeSet::new();
        let first = state_row_key(user, boundary);
        let end = prefix_successor(format!("{user},").as_bytes()).unwrap_or_default();
        let request = ReadRowsRequest::new(RowSet::from_range(RowRange::closed_open(first, end)))
            .with_filter(filter);
        let mut corrections: Vec<(EventId, i64)> = Vec::new();
        visit_rows(app.profiles.as_ref(), &request, |row| {
            let day = row
                .key
                .get(user.len() + 1..)
                .and_then(|d| std::str::from_utf8(d).ok())
                .and_then(|d| d.parse::<i64>().ok())
                .ok_or_else(|| Error::corrupt("state row key", format!("{:?}", row.key)))?;
            days.insert(day);
            if day <= boundary {
                // Counted from the events table, to the millisecond.
                return Ok(());
            }
            for cell in row.cells {
                let n = affinity_model::apply::decode_i64(cell.value).ok_or_else(|| {
                    Error::corrupt("state cell", format!("{} bytes", cell.value.len()))
                })?;
                if cell.family == COUNTERS_FAMILY {
                    let (ty, name, facet, value) = parse_counter_qualifier(cell.qualifier)?;
                    acc.add_count(ty, &name, &facet, &value, n);
                } else if n != 1 {
                    corrections.push((EventId::from_qualifier(cell.qualifier)?, n));
                }
            }
            Ok(())
        })?;
        for (id, times) in corrections {
            if let Some(e) = self.event_by_id(&app, user, &id)? {
                acc.add_event(&e, 1 - times);
            }
        }
        if days.is_empty() {
            return Ok(None);
        }
        days.insert(boundary);
        for e in self.user_events(&app, user, cutoff, (boundary + 1) * DAY_MILLIS)? {
            acc.add_event(&e, 1);
        }
        for day in days.iter().rev() {
            let last =
                self.last_scoring_time(&app, user, &acc, day * DAY_MILLIS, (day + 1) * DAY_MILLIS)?;
            if let Some(t) = last {
                acc.note_event_time(t);
                break;
            }
        }
        Ok(acc.finish(user))
    }

    /// The time of the user's latest scoring event with `from <= timestamp
    /// < to` (within retention): each physical range read newest first,
    /// stopping at its first scoring event, so a busy day costs a row or
    /// two, not the whole day.
    fn last_scoring_time(
        &self,
        app: &App,
        user: &str,
        acc: &Accumulator<'_>,
        from_millis: i64,
        to_millis: i64,
    ) -> Result<Option<i64>> {
        let cutoff = self.now_millis() - app.config.retention_millis();
        let from = from_millis.max(cutoff);
        if from >= to_millis {
            return Ok(None);
        }
        let range = user_time_range(&app.id, user, from, to_millis)?;
        let mut last: Option<i64> = None;
        for (_, physical) in app.physical_ranges(&range) {
            let mut request =
                ReadRowsRequest::new(RowSet::from_range(physical)).with_filter(since(cutoff));
            request.reversed = true;
            for row in app.events.read_rows(&request)? {
                let Some(e) = decode_row(&row?)? else {
                    continue;
                };
                if acc.is_scoring(e.event_type, &e.event_name, &e.counts) {
                    last = last.max(Some(e.timestamp_millis));
                    break;
                }
            }
        }
        Ok(last)
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
