//! Streaming ingestion: a batch of events -> the events table + each user's
//! profile state (see [`crate::state`] for its rows), updated with blind
//! aggregate adds (`AddToCell`), never by reading the user's events nor the
//! state itself.
//!
//! Every add of a batch is stamped with the day it *arrives* (today), and
//! an event of an earlier day than today (a late event) is first announced
//! by a marker on the user's rollup row, so readers know to look at its day
//! again (see [`crate::rollup`] and `docs/design/profiles.md`).
//!
//! # Protocol and guarantee
//!
//! For a batch: (1) every event row is written (idempotent: a retry writes
//! the same cells at the same key); (2) for late events, one marker add
//! per user and event day on the user's rollup row; (3) one `mutate_rows`
//! adds, per user-day row, the batch's counts of that day to `n` (stamped
//! with the arrival hour, which digests need: `crate::digest`), 1 per
//! event to its `i` cell (stamped with the arrival day) and the events'
//! times to `t`: each row's adds are one atomic entry. Only (3) waits for
//! a durable write; (1), (2) and the trends rows are written unsynced
//! before it (`mutate_rows_unsynced`), so on the embedded store, whose
//! one log holds every write in order, a batch costs one log sync, and a
//! crash keeps a prefix of its writes.
//!
//! Invariant, at every instant, because a row's counters and ids change
//! in the same atomic mutation: for each arrival day, a row's counters (its
//! `n` cells and its digest, which a digest moves between in one atomic
//! mutation) equal the sum over its `i` cells of `times * counts(event)`.
//! A reader takes an event added other than once and corrects it by
//! reading that one event row and adding its counts as many times as
//! needed, so a profile read is exact whatever crashed where, and nothing
//! is ever read before a write:
//! - crash before (3): nothing counted; the batch was not acknowledged and
//!   its retry applies it (the event rows are already there);
//! - crash after (3), or a retry of an acknowledged batch: the events count
//!   twice in `n`, their `i` cells say 2 (or, for a retry on a later day,
//!   there are two cells and a marker), and readers count them once;
//! - concurrent ingesters of different events lose nothing: adds are
//!   atomic and commutative.
//!
//! A profile read reflects an event as soon as its ingestion returns.
//!
//! Steps (2) and (3) are `Engine::write_state`, which a rebuild
//! (`rebuild.rs`) also calls, for stored events whose state is missing.

use std::borrow::Borrow;
use std::io::BufRead;

use affinity_model::{limits, Mutation, RowMutations};
use affinity_rowkey::composite::{event_hash, EventKey};

use crate::arena::Arena;
use crate::csv;
use crate::engine::{App, Engine, DAY_MILLIS};
use crate::error::{Error, Result};
use crate::event::{Event, EventType, Limits, MAX_SKEW_MILLIS};
use crate::hot::{push_sub_row_key, sub_row, BatchLists};
use crate::rollup::{day_qualifier, rollup_key, LINKS_FAMILY, MARKS_FAMILY, MEMBERS_FAMILY};
use crate::scoring::{FacetCounts, ScoredEvent};
use crate::state::{
    day_micros, hour_micros, push_state_row_key, EventId, COUNTERS_FAMILY, IDS_FAMILY, LAST_FAMILY,
};

/// Events per batch of [`Engine::ingest_json_lines`] (the API's limit).
pub const BATCH_EVENTS: usize = 1000;
/// An event ready to store (or, for a rebuild, stored already).
#[derive(Debug)]
pub(crate) struct Prepared {
    /// The logical key of its event row, `app,user,time,suffix` (the
    /// time with a bucket on a listed user's day).
    key: String,
    /// Where the user token is in `key`.
    user: std::ops::Range<usize>,
    id: EventId,
    event: ScoredEvent,
}

impl Prepared {
    /// The event stored at logical key `key`, decoded as `event`.
    pub(crate) fn stored(key: &[u8], event: ScoredEvent) -> Result<Prepared> {
        let bad = |reason: &str| {
            Error::corrupt(
                "event key",
                format!("{}: {reason}", String::from_utf8_lossy(key)),
            )
        };
        let text = std::str::from_utf8(key).map_err(|_| bad("not utf-8"))?;
        let parsed = EventKey::parse(text)?;
        let suffix = parsed.suffix.as_deref().ok_or_else(|| bad("no suffix"))?;
        let suffix = u64::from_str_radix(suffix, 16).map_err(|_| bad("suffix not hex"))?;
        let start = parsed.app_id.len() + 1;
        Ok(Prepared {
            key: text.to_string(),
            user: start..start + parsed.user_token.len(),
            id: EventId {
                timestamp_millis: parsed.timestamp_millis,
                suffix,
            },
            event,
        })
    }

    pub(crate) fn user(&self) -> &str {
        &self.key[self.user.clone()]
    }

    pub(crate) fn id(&self) -> &EventId {
        &self.id
    }
}

/// What an ingestion did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngestReport {
    /// Events received.
    pub events: usize,
    /// Distinct events stored and added to their users' profile state. An
    /// event stored before (a retried batch) is stored and added again,
    /// and profile reads count it once.
    pub stored: usize,
    /// Events repeating an earlier event of the same request (counted
    /// once).
    pub duplicates: usize,
    /// Object ids not found in the catalog.
    pub unknown_objects: usize,
}

impl IngestReport {
    fn merge(&mut self, other: &IngestReport) {
        self.events += other.events;
        self.stored += other.stored;
        self.duplicates += other.duplicates;
        self.unknown_objects += other.unknown_objects;
    }
}

/// A counter's `(type, name, facet, value)`.
type CounterKey<'e> = (EventType, &'e str, &'e str, &'e str);

/// The adds of one state row for `events` (one user, one day; each event
/// once) arriving at `now_millis`: its counters, stamped with the arrival
/// hour, and one id add per event, stamped with the arrival day; their
/// qualifiers cut from `arena`.
fn state_mutations<E: Borrow<Prepared>>(
    events: &[E],
    now_millis: i64,
    arena: &mut Arena,
) -> Vec<Mutation> {
    if events.is_empty() {
        return Vec::new();
    }
    let ts = day_micros(now_millis.div_euclid(DAY_MILLIS));
    let hour = hour_micros(now_millis);
    // Sorted, so equal batches write equal rows in the same order (one
    // event's lists are sorted already: its counts come sorted).
    let pairs: usize = events.iter().map(|e| e.borrow().event.counts.len()).sum();
    let mut counts: Vec<(CounterKey, i64)> = Vec::with_capacity(pairs);
    let mut latest: Vec<((EventType, &str, &str), i64)> = Vec::with_capacity(pairs);
    for e in events {
        let e = e.borrow();
        let (ty, name) = (e.event.event_type, e.event.event_name.as_str());
        for (f, v, n) in e.event.counts.iter() {
            counts.push(((ty, name, f, v), i64::from(n)));
            match latest.last_mut() {
                Some((column, t)) if *column == (ty, name, f) => {
                    *t = (*t).max(e.id.timestamp_millis)
                }
                _ => latest.push(((ty, name, f), e.id.timestamp_millis)),
            }
        }
    }
    if events.len() > 1 {
        counts.sort_by(|a, b| a.0.cmp(&b.0));
        counts.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                kept.1 += later.1;
            }
            same
        });
        latest.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        latest.dedup_by(|later, kept| later.0 == kept.0);
    }
    let mut out: Vec<Mutation> = Vec::with_capacity(counts.len() + latest.len() + events.len());
    // Counters come in runs of one column prefix CSV(type, name, facet):
    // each run's prefix is quoted once.
    let mut prefix = String::with_capacity(64);
    let mut run: Option<(EventType, &str, &str)> = None;
    for ((ty, name, f, v), n) in counts {
        if n == 0 {
            continue;
        }
        if run != Some((ty, name, f)) {
            prefix.clear();
            csv::push_record(&mut prefix, &[ty.as_str(), name, f]);
            prefix.push(',');
            run = Some((ty, name, f));
        }
        let q = arena.take(|out| {
            out.extend_from_slice(prefix.as_bytes());
            csv::push_record(out, &[v]);
        });
        out.push(Mutation::add_to_cell(COUNTERS_FAMILY, q, hour, n));
    }
    for ((ty, name, f), millis) in latest {
        let q = arena.csv(&[ty.as_str(), name, f]);
        out.push(Mutation::add_to_cell(LAST_FAMILY, q, millis * 1000, 1));
    }
    for e in events {
        let q = arena.take(|out| out.extend_from_slice(&e.borrow().id.qualifier()));
        out.push(Mutation::add_to_cell(IDS_FAMILY, q, ts, 1));
    }
    out
}

/// `entries` in consecutive requests of at most the store's mutation limit
/// each (an entry above the limit goes alone, for the store to refuse).
fn requests(entries: &[RowMutations]) -> Vec<&[RowMutations]> {
    let mut out = Vec::new();
    let (mut start, mut total) = (0, 0);
    for (i, e) in entries.iter().enumerate() {
        let n = e.mutations.len();
        if i > start && total + n > limits::MAX_MUTATIONS_PER_REQUEST {
            out.push(&entries[start..i]);
            (start, total) = (i, 0);
        }
        total += n;
    }
    if start < entries.len() {
        out.push(&entries[start..]);
    }
    out
}

impl Engine {
    /// The limits of the CLI: history back to the application's retention.
    pub fn retention_limits(&self, app: &str) -> Result<Limits> {
        let config = self.app(app)?.config;
        Ok(Limits {
            now_millis: self.now_millis(),
            max_age_millis: config.retention_millis(),
            max_skew_millis: MAX_SKEW_MILLIS,
        })
    }

    fn prepare(
        &self,
        app: &App,
        events: &[Event],
        report: &mut IngestReport,
    ) -> Result<Vec<Prepared>> {
        let now = self.now_millis();
        // Back to the retention; the part of the oldest day that already
        // left the window is stored but never counts.
        let oldest = now - app.config.retention_millis();
        let mut out = Vec::with_capacity(events.len());
        let mut lists = BatchLists::default();
        for e in events {
            if e.timestamp_millis < oldest {
                return Err(Error::event(
                    "timestamp",
                    "The timestamp is too far in the past",
                ));
            }
            if e.timestamp_millis > now + MAX_SKEW_MILLIS {
                return Err(Error::event(
                    "timestamp",
                    "The timestamp is too far in the future",
                ));
            }
            let counts = if e.object_ids.is_empty() {
                FacetCounts::from_pairs(&e.filters)
            } else {
                let resolved = self.catalog(&app.id, &e.index)?.resolve(&e.object_ids);
                report.unknown_objects += resolved.unknown;
                resolved.counts
            };
            let id = EventId {
                timestamp_millis: e.timestamp_millis,
                suffix: event_hash(&e.content()),
            };
            let user = e.identity();
            // A listed user's event goes to its day's bucket (`hot.rs`).
            let rows = lists.get(self, app, id.day())?.rows(user);
            out.push(Prepared {
                user: app.id.len() + 1..app.id.len() + 1 + user.len(),
                key: id.row_key(&app.id, user, rows)?,
                id,
                event: ScoredEvent {
                    event_type: e.event_type,
                    event_name: e.event_name.clone(),
                    timestamp_millis: e.timestamp_millis,
                    counts,
                },
            });
        }
        Ok(out)
    }

    /// Ingest validated events: store them and update their users' profile
    /// state (see the module docs for the guarantee). Events older than the
    /// application's retention are refused; nothing is stored then.
    pub fn ingest(&self, app: &str, events: &[Event]) -> Result<IngestReport> {
        let app = self.app(app)?;
        let mut report = IngestReport {
            events: events.len(),
            ..IngestReport::default()
        };
        let mut unique = self.prepare(&app, events, &mut report)?;
        // In key order: a repeated event (same key, same content) lands
        // next to its first, and each user's events of a day are
        // consecutive (a user's keys share the prefix `app,user,` and
        // sort by time), as are the rows the store inserts.
        unique.sort_by(|a, b| a.key.cmp(&b.key));
        unique.dedup_by(|later, kept| later.key == kept.key);
        report.duplicates += events.len() - unique.len();
        let mut arena = Arena::new();
        let mut entries: Vec<RowMutations> = Vec::with_capacity(unique.len());
        for p in &unique {
            let mut cells = Vec::with_capacity(p.event.counts.facet_count().max(1));
            app.push_event_mutations(&p.event, &mut arena, &mut cells);
            // During a salt migration the event also goes to the other
            // layout (`resalt.rs`).
            let (key, other) = app.write_keys(p.key.as_bytes());
            if let Some(other) = other {
                entries.push(RowMutations::new(other, cells.clone()));
            }
            entries.push(RowMutations::new(key, cells));
        }
        // Unsynced, as the trends and late markers: the state write, last
        // and durable, makes them durable too before the batch is
        // acknowledged (`Table::mutate_rows_unsynced`).
        for status in app.events.mutate_rows_unsynced(&entries)? {
            status?;
        }
        drop(entries);
        self.write_trends(&app, events)?;
        self.write_state(&app, &unique, link_mutations(events), &mut arena)?;
        let arrival = self.now_millis().div_euclid(DAY_MILLIS);
        self.note_hot_adds(
            &app,
            arrival,
            unique
                .chunk_by(|a, b| a.user() == b.user())
                .map(|run| (run[0].user(), run.len() as u64)),
        );
        report.stored = unique.len();
        Ok(report)
    }
}

/// The links of `events`: each event's anonymous `userToken` to its
/// `authenticatedUserToken` (both rows blind, stamped with the event's
/// time, so a retry writes the same cells; see
/// `docs/design/identity.md`).
fn link_mutations(events: &[Event]) -> Vec<RowMutations> {
    let mut links: Vec<(&str, &str, i64)> = events
        .iter()
        .filter_map(|e| {
            let auth = e.authenticated_user_token.as_deref()?;
            (auth != e.user_token).then_some((e.user_token.as_str(), auth, e.timestamp_millis))
        })
        .collect();
    links.sort_unstable();
    links.dedup();
    links
        .iter()
        .flat_map(|(anonymous, identity, millis)| {
            let ts = millis.max(&0) * 1000;
            [
                RowMutations::new(
                    rollup_key(anonymous),
                    vec![Mutation::set_cell(
                        LINKS_FAMILY,
                        identity.to_string(),
                        ts,
                        Vec::new(),
                    )],
                ),
                RowMutations::new(
                    rollup_key(identity),
                    vec![Mutation::set_cell(
                        MEMBERS_FAMILY,
                        anonymous.to_string(),
                        ts,
                        Vec::new(),
                    )],
                ),
            ]
        })
        .collect()
}

impl Engine {
    /// Write the profile state of `events` (stored already, in key order,
    /// each once): step 2 and 3 of the protocol (see the module docs).
    /// Ingestion calls it for each batch, a rebuild for the stored events
    /// whose state is missing. `links` (identity links, rollup rows) go
    /// with the late markers, in the request before the state.
    pub(crate) fn write_state(
        &self,
        app: &App,
        events: &[Prepared],
        links: Vec<RowMutations>,
        arena: &mut Arena,
    ) -> Result<()> {
        // Every state add is stamped with today: the day it arrived, and
        // the counters with the hour (see `docs/design/profiles.md`).
        let now = self.now_millis();
        let arrival = now.div_euclid(DAY_MILLIS);
        let days = || events.chunk_by(|a, b| a.user() == b.user() && a.id.day() == b.id.day());
        // Late events (of a day before today) are announced on the user's
        // rollup row before their state is written, so a reader that sees
        // the state also sees the marker.
        let mut marks: Vec<RowMutations> = Vec::new();
        for day in days().filter(|d| d[0].id.day() < arrival) {
            let user = day[0].user();
            let mark = Mutation::add_to_cell(
                MARKS_FAMILY,
                day_qualifier(day[0].id.day()),
                day_micros(arrival),
                day.len() as i64,
            );
            match marks.last_mut() {
                Some(last) if last.row_key.as_ref() == rollup_key(user).as_bytes() => {
                    last.mutations.push(mark)
                }
                _ => marks.push(RowMutations::new(rollup_key(user), vec![mark])),
            }
        }
        if !links.is_empty() {
            // One entry per row: a user's marker and links together.
            marks.extend(links);
            marks.sort_by(|a, b| a.row_key.cmp(&b.row_key));
            marks.dedup_by(|later, kept| {
                let same = later.row_key == kept.row_key;
                if same {
                    kept.mutations.append(&mut later.mutations);
                }
                same
            });
        }
        // A user on the day's hot list: each event's adds to its sub-row
        // (`hot.rs`).
        let mut lists = BatchLists::default();
        let mut state: Vec<RowMutations> = Vec::new();
        for day in days() {
            let (user, d) = (day[0].user(), day[0].id.day());
            let rows = lists.get(self, app, d)?.rows(user);
            if rows == 1 {
                let key = arena.take(|out| push_state_row_key(out, user, d));
                state.push(RowMutations::new(key, state_mutations(day, now, arena)));
                continue;
            }
            let mut spread: Vec<(u32, &Prepared)> =
                day.iter().map(|e| (sub_row(&e.id, rows), e)).collect();
            // Stable: each sub-row's events stay in key order.
            spread.sort_by_key(|(kk, _)| *kk);
            for part in spread.chunk_by(|a, b| a.0 == b.0) {
                let events: Vec<&Prepared> = part.iter().map(|(_, e)| *e).collect();
                let key = arena.take(|out| push_sub_row_key(out, user, d, part[0].0));
                state.push(RowMutations::new(key, state_mutations(&events, now, arena)));
            }
        }
        // The markers (and links) first, unsynced: the state write after
        // them is durable, and makes them durable too (one log holds both
        // in order on the embedded store). Without state, they are synced.
        for chunk in requests(&marks) {
            let written = if state.is_empty() {
                app.profiles.mutate_rows(chunk)?
            } else {
                app.profiles.mutate_rows_unsynced(chunk)?
            };
            for status in written {
                status?;
            }
        }
        for chunk in requests(&state) {
            for status in app.profiles.mutate_rows(chunk)? {
                status?;
            }
        }
        Ok(())
    }

    /// Ingest JSON lines (one Insights event per line, blank lines
    /// skipped) in batches of [`BATCH_EVENTS`]. A batch is validated whole
    /// before any of it is stored; an invalid line stops the run with its
    /// line number (earlier batches stay stored; rerunning is safe).
    pub fn ingest_json_lines(
        &self,
        app: &str,
        input: impl BufRead,
        limits: &Limits,
    ) -> Result<IngestReport> {
        let mut report = IngestReport::default();
        let mut batch = Vec::with_capacity(BATCH_EVENTS);
        for item in crate::error::json_lines(input) {
            let (line, value) = item?;
            batch.push(Event::from_json(&value, limits).map_err(|e| Error::at_line(line, e))?);
            if batch.len() == BATCH_EVENTS {
                report.merge(&self.ingest(app, &batch)?);
                batch.clear();
            }
        }
        if !batch.is_empty() {
            report.merge(&self.ingest(app, &batch)?);
        }
        Ok(report)
    }
}
