//! Streaming ingestion: a batch of events -> the events table + each user's
//! profile state, updated with blind aggregate adds (`AddToCell`), never by
//! reading the user's events nor the state itself.
//!
//! # Profile state (table `profiles.<app>`, one row per user and event
//! day, key `user,DDDDDDDD`, see [`state_row_key`])
//!
//! The families are aggregate families summing 64-bit integers (Cloud
//! Bigtable's `Int64` sum type; the embedded store adds them with a RocksDB
//! merge operand, without reading the row). Every add of one batch is
//! stamped with the first microsecond of the day it *arrives* (today), so
//! a column holds one cell per arrival day: nearly always one, since most
//! events arrive on their own day.
//!
//! - family `n`: one counter per `(type, name, facet, value)`, qualifier
//!   CSV(type, name, facet, value), the sum of the counts of the day's
//!   events that arrived that day;
//! - family `i`: one cell per event, qualifier = the event's id (16 bytes:
//!   timestamp i64 BE | key suffix u64 BE), the number of times the event
//!   was added that arrival day;
//! - family `t`: one column per `(type, name, facet)`, qualifier CSV(type,
//!   name, facet), each add stamped with the event's own time; the family
//!   keeps one version, so the column's timestamp is the latest time of an
//!   event of that type and name with that facet (a maximum kept by
//!   Bigtable's version GC, without a read).
//!
//! Closed days are folded into each user's rollup row (see
//! [`crate::rollup`] and `docs/design/profiles.md`); an event of an earlier
//! day than today (a late event) is first announced by a marker on the
//! rollup row, so readers know to look at its day again.
//!
//! # Protocol and guarantee
//!
//! For a batch: (1) every event row is written (idempotent: a retry writes
//! the same cells at the same key); (2) for late events, one marker add
//! per user and event day on the user's rollup row; (3) one `mutate_rows`
//! adds, per user-day row, the batch's counts of that day to `n` and 1 per
//! event to its `i` cell: each row's adds are one atomic entry.
//!
//! Invariant, at every instant, because a row's counters and ids change
//! in the same atomic mutation: for each arrival day, a row's counters
//! equal the sum over its `i` cells of `times * counts(event)`. A reader
//! takes an event added other than once and corrects it by reading that
//! one event row and adding its counts as many times as needed, so a
//! profile read is exact whatever crashed where, and nothing is ever read
//! before a write:
//! - crash before (3): nothing counted; the batch was not acknowledged and
//!   its retry applies it (the event rows are already there);
//! - crash after (3), or a retry of an acknowledged batch: the events count
//!   twice in `n`, their `i` cells say 2 (or, for a retry on a later day,
//!   there are two cells and a marker), and readers count them once;
//! - concurrent ingesters of different events lose nothing: adds are
//!   atomic and commutative.
//!
//! A profile read reflects an event as soon as its ingestion returns.

use std::borrow::Cow;
use std::io::BufRead;

use affinity_model::{limits, Mutation, RowMutations};
use affinity_rowkey::composite::{event_hash, event_key_text};

use crate::arena::Arena;
use crate::engine::{App, Engine, DAY_MILLIS};
use crate::error::{Error, Result};
use crate::event::{Event, Limits, MAX_SKEW_MILLIS};
use crate::rollup::{day_qualifier, rollup_key, MARKS_FAMILY};
use crate::scoring::{FacetCounts, ScoredEvent};
use crate::{csv, event::EventType};

/// Events per batch of [`Engine::ingest_json_lines`] (the API's limit).
pub const BATCH_EVENTS: usize = 1000;
/// The state family of counters.
pub const COUNTERS_FAMILY: &str = "n";
/// The state family of event ids.
pub const IDS_FAMILY: &str = "i";
/// The state family of latest event times.
pub const LAST_FAMILY: &str = "t";

/// An event id within a user: its timestamp and key suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventId {
    pub timestamp_millis: i64,
    pub suffix: u64,
}

impl EventId {
    pub fn day(&self) -> i64 {
        self.timestamp_millis.div_euclid(DAY_MILLIS)
    }

    /// The qualifier of this event's cell in family `i`.
    pub fn qualifier(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.timestamp_millis.to_be_bytes());
        out[8..].copy_from_slice(&self.suffix.to_be_bytes());
        out
    }

    /// The id a family-`i` qualifier names.
    pub fn from_qualifier(q: &[u8]) -> Result<EventId> {
        let bad = || Error::corrupt("event id qualifier", format!("{q:?}"));
        let (ts, suffix) = q
            .split_first_chunk::<8>()
            .filter(|(_, rest)| rest.len() == 8)
            .ok_or_else(bad)?;
        let suffix: [u8; 8] = suffix.try_into().map_err(|_| bad())?;
        Ok(EventId {
            timestamp_millis: i64::from_be_bytes(*ts),
            suffix: u64::from_be_bytes(suffix),
        })
    }

    /// The event's row key in the events table.
    pub fn row_key(&self, app: &str, user: &str) -> Result<String> {
        Ok(event_key_text(
            app,
            user,
            self.timestamp_millis,
            self.suffix,
        )?)
    }
}

/// The counter qualifier of `(type, name, facet, value)`.
pub fn counter_qualifier(ty: EventType, name: &str, facet: &str, value: &str) -> String {
    csv::encode(&[ty.as_str(), name, facet, value])
}

/// A counter qualifier's fields: type, name, facet, value (borrowed when
/// unquoted).
pub type CounterColumn<'q> = (EventType, Cow<'q, str>, Cow<'q, str>, Cow<'q, str>);

/// Parse a counter qualifier.
pub fn parse_counter_qualifier(q: &[u8]) -> Result<CounterColumn<'_>> {
    let bad = || Error::corrupt("counter qualifier", String::from_utf8_lossy(q).into_owned());
    let text = std::str::from_utf8(q).map_err(|_| bad())?;
    let ([ty, name, facet, value], 4) = csv::decode_n::<4>(text).ok_or_else(bad)? else {
        return Err(bad());
    };
    let ty = EventType::parse(&ty).ok_or_else(bad)?;
    Ok((ty, name, facet, value))
}

/// The qualifier of a `t` column: CSV(type, name, facet).
pub fn last_qualifier(ty: EventType, name: &str, facet: &str) -> String {
    csv::encode(&[ty.as_str(), name, facet])
}

/// Parse a `t` qualifier.
pub fn parse_last_qualifier(q: &[u8]) -> Result<(EventType, Cow<'_, str>, Cow<'_, str>)> {
    let bad = || {
        Error::corrupt(
            "latest-time qualifier",
            String::from_utf8_lossy(q).into_owned(),
        )
    };
    let text = std::str::from_utf8(q).map_err(|_| bad())?;
    let ([ty, name, facet], 3) = csv::decode_n::<3>(text).ok_or_else(bad)? else {
        return Err(bad());
    };
    let ty = EventType::parse(&ty).ok_or_else(bad)?;
    Ok((ty, name, facet))
}

/// The timestamp of every state cell of `day`: the day's first microsecond.
pub fn day_micros(day: i64) -> i64 {
    day * DAY_MILLIS * 1000
}

/// An event ready to store.
#[derive(Debug)]
struct Prepared<'e> {
    user: &'e str,
    /// The logical key of its event row.
    key: String,
    id: EventId,
    event: ScoredEvent,
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

/// The state row of a user's day: `user,DDDDDDDD` (the day number,
/// zero-padded, so a user's days sort in order after the user's
/// batch-profile row `user`).
pub fn state_row_key(user: &str, day: i64) -> String {
    let mut key = String::with_capacity(user.len() + 9);
    push_state_row_key(&mut key, user, day);
    key
}

/// [`state_row_key`] written into `out`.
fn push_state_row_key(out: &mut impl std::fmt::Write, user: &str, day: i64) {
    // Writing to memory cannot fail.
    let _ = write!(out, "{user},{day:08}");
}

/// A counter's `(type, name, facet, value)`.
type CounterKey<'e> = (EventType, &'e str, &'e str, &'e str);

/// The adds of one state row for `events` (one user, one day; each event
/// once): its counters and one id add per event, their qualifiers cut
/// from `arena`.
fn state_mutations(events: &[Prepared], arrival: i64, arena: &mut Arena) -> Vec<Mutation> {
    if events.is_empty() {
        return Vec::new();
    }
    let ts = day_micros(arrival);
    // Sorted, so equal batches write equal rows in the same order (one
    // event's lists are sorted already: its counts come sorted).
    let pairs: usize = events.iter().map(|e| e.event.counts.len()).sum();
    let mut counts: Vec<(CounterKey, i64)> = Vec::with_capacity(pairs);
    let mut latest: Vec<((EventType, &str, &str), i64)> = Vec::with_capacity(pairs);
    for e in events {
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
        out.push(Mutation::add_to_cell(COUNTERS_FAMILY, q, ts, n));
    }
    for ((ty, name, f), millis) in latest {
        let q = arena.csv(&[ty.as_str(), name, f]);
        out.push(Mutation::add_to_cell(LAST_FAMILY, q, millis * 1000, 1));
    }
    for e in events {
        let q = arena.take(|out| out.extend_from_slice(&e.id.qualifier()));
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

    fn prepare<'e>(
        &self,
        app: &App,
        events: &'e [Event],
        report: &mut IngestReport,
    ) -> Result<Vec<Prepared<'e>>> {
        let now = self.now_millis();
        // Back to the retention; the part of the oldest day that already
        // left the window is stored but never counts.
        let oldest = now - app.config.retention_millis();
        let mut out = Vec::with_capacity(events.len());
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
            let hash = event_hash(&e.content());
            out.push(Prepared {
                user: e.identity(),
                key: event_key_text(&app.id, e.identity(), e.timestamp_millis, hash)?,
                id: EventId {
                    timestamp_millis: e.timestamp_millis,
                    suffix: hash,
                },
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
        let entries: Vec<RowMutations> = unique
            .iter()
            .map(|p| {
                let mut cells = Vec::with_capacity(p.event.counts.facet_count().max(1));
                app.push_event_mutations(&p.event, &mut arena, &mut cells);
                RowMutations::new(app.event_key(p.key.as_bytes()), cells)
            })
            .collect();
        for status in app.events.mutate_rows(&entries)? {
            status?;
        }
        drop(entries);
        self.write_trends(&app, events)?;
        // Every state add of this batch is stamped with today: the day it
        // arrived (see `docs/design/profiles.md`).
        let arrival = self.now_millis().div_euclid(DAY_MILLIS);
        let days = || unique.chunk_by(|a, b| a.user == b.user && a.id.day() == b.id.day());
        // Late events (of a day before today) are announced on the user's
        // rollup row before their state is written, so a reader that sees
        // the state also sees the marker.
        let mut marks: Vec<RowMutations> = Vec::new();
        for day in days().filter(|d| d[0].id.day() < arrival) {
            let user = day[0].user;
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
        for chunk in requests(&marks) {
            for status in app.profiles.mutate_rows(chunk)? {
                status?;
            }
        }
        let state: Vec<RowMutations> = days()
            .map(|day| {
                let key = arena.take(|out| push_state_row_key(out, day[0].user, day[0].id.day()));
                RowMutations::new(key, state_mutations(day, arrival, &mut arena))
            })
            .collect();
        for chunk in requests(&state) {
            for status in app.profiles.mutate_rows(chunk)? {
                status?;
            }
        }
        report.stored = unique.len();
        Ok(report)
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
