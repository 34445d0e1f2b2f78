//! Streaming ingestion: a batch of events -> the events table + each user's
//! profile state, updated with read-modify-write increments, never by
//! reading the user's events.
//!
//! # Profile state (table `profiles.<app>`, one row per user and day,
//! key `user,DDDDDDDD`, see [`state_row_key`])
//!
//! Per-day rows keep each read-modify-write small (a store rewrites from
//! the row it reads) and let a profile read scan only the days within
//! retention.
//!
//! - family `c`: one counter per `(day, type, name, facet, value)`,
//!   qualifier CSV(day, type, name, facet, value) where `day` is the
//!   event's UTC day number (`timestamp div 86400000`), value a 64-bit
//!   big-endian count (an increment target);
//! - family `l`: the applied log, one cell per day, qualifier = the day
//!   number; value = 17-byte records `sign (+/-) | timestamp i64 BE |
//!   suffix u64 BE` naming events by their row key.
//!
//! Both families keep one version and expire `retention + 2 days` after
//! their last write, when their day is past retention (events are at most
//! one hour in the future).
//!
//! # Protocol and guarantee
//!
//! For a batch: (1) every event row is written (idempotent: a retry writes
//! the same cells at the same key); (2) one `read_modify_write_rows` adds
//! every event's counts to its user-day row and appends a `+` record per
//! event, each row atomically (the embedded store commits the whole batch
//! in one synced write; Cloud Bigtable gets concurrent calls); (3) where
//! the returned log shows an event applied more than once (a retried
//! batch, or two ingesters racing), a second `read_modify_write_rows`
//! takes the surplus back and appends `-` records.
//!
//! No read precedes (2): checking the logs first would cost a read per row
//! on every batch to save work only on retries, which (3) handles.
//!
//! Invariant, at every instant, because counters and log change in the
//! same atomic call: each day's counters equal the sum over its log
//! records of `sign * counts(event)`. The profile reader corrects any event
//! whose net record count is not 1 by reading that one event row, so a
//! profile read is exact whatever crashed where:
//! - crash before (2): nothing counted; the batch was not acknowledged and
//!   its retry applies it (the event rows are already there);
//! - crash after (2): the retry counts the events again and (3) takes the
//!   surplus back;
//! - concurrent ingesters of the same event: the surplus is taken back by
//!   (3), or, if that crashes, corrected at read time;
//! - concurrent ingesters of different events lose nothing: increments
//!   are atomic.
//!
//! A profile read reflects an event as soon as its ingestion returns.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufRead;

use affinity_model::{Bytes, ReadModifyWriteRule, RowMutations, RowRules};
use affinity_rowkey::composite::EventKey;

use crate::engine::{App, Engine, DAY_MILLIS};
use crate::error::{Error, Result};
use crate::event::{Event, Limits, MAX_SKEW_MILLIS};
use crate::scoring::{FacetCounts, ScoredEvent};
use crate::{csv, event::EventType};

/// Size of one applied-log record.
pub const RECORD_LEN: usize = 17;
/// Events per batch of [`Engine::ingest_json_lines`] (the API's limit).
pub const BATCH_EVENTS: usize = 1000;

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

    /// The applied-log record of this event (`sign` is `b'+'` or `b'-'`).
    pub fn record(&self, sign: u8) -> [u8; RECORD_LEN] {
        let mut out = [0u8; RECORD_LEN];
        out[0] = sign;
        out[1..9].copy_from_slice(&self.timestamp_millis.to_be_bytes());
        out[9..].copy_from_slice(&self.suffix.to_be_bytes());
        out
    }

    /// The event's row key in the events table.
    pub fn row_key(&self, app: &str, user: &str) -> Result<String> {
        let mut key = EventKey::new(app, user, self.timestamp_millis)?;
        key.suffix = Some(format!("{:016x}", self.suffix));
        Ok(key.encode()?)
    }
}

/// Net record count per event of a log cell.
pub fn parse_log(value: &[u8]) -> Result<HashMap<EventId, i64>> {
    if !value.len().is_multiple_of(RECORD_LEN) {
        return Err(Error::corrupt(
            "applied log",
            format!("{} bytes", value.len()),
        ));
    }
    let mut out = HashMap::new();
    for rec in value.chunks_exact(RECORD_LEN) {
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&rec[1..9]);
        let mut sfx = [0u8; 8];
        sfx.copy_from_slice(&rec[9..]);
        let id = EventId {
            timestamp_millis: i64::from_be_bytes(ts),
            suffix: u64::from_be_bytes(sfx),
        };
        let delta = match rec[0] {
            b'+' => 1,
            b'-' => -1,
            other => {
                return Err(Error::corrupt(
                    "applied log",
                    format!("record sign {other}"),
                ))
            }
        };
        *out.entry(id).or_default() += delta;
    }
    Ok(out)
}

/// The counter qualifier of `(day, type, name, facet, value)`.
pub fn counter_qualifier(day: i64, ty: EventType, name: &str, facet: &str, value: &str) -> String {
    csv::encode(&[day.to_string().as_str(), ty.as_str(), name, facet, value])
}

/// Parse a counter qualifier.
pub fn parse_counter_qualifier(q: &[u8]) -> Result<(i64, EventType, String, String, String)> {
    let bad = || Error::corrupt("counter qualifier", String::from_utf8_lossy(q).into_owned());
    let text = std::str::from_utf8(q).map_err(|_| bad())?;
    let fields = csv::decode(text).ok_or_else(bad)?;
    let [day, ty, name, facet, value] = fields.as_slice() else {
        return Err(bad());
    };
    let day = day.parse().map_err(|_| bad())?;
    let ty = EventType::parse(ty).ok_or_else(bad)?;
    Ok((day, ty, name.clone(), facet.clone(), value.clone()))
}

/// An event ready to store.
#[derive(Debug, Clone)]
struct Prepared {
    user: String,
    key: String,
    id: EventId,
    event: ScoredEvent,
}

/// What an ingestion did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngestReport {
    /// Events received.
    pub events: usize,
    /// Events newly counted in profiles.
    pub applied: usize,
    /// Events already counted (a retry) or repeated within the batch.
    pub duplicates: usize,
    /// Object ids not found in the catalog.
    pub unknown_objects: usize,
    /// Events counted again (a retried batch, or racing ingesters) and
    /// taken back; they are also counted in `duplicates`.
    pub compensated: usize,
}

impl IngestReport {
    fn merge(&mut self, other: &IngestReport) {
        self.events += other.events;
        self.applied += other.applied;
        self.duplicates += other.duplicates;
        self.unknown_objects += other.unknown_objects;
        self.compensated += other.compensated;
    }
}

fn apply_rules(counts: &mut BTreeMap<String, i64>, e: &Prepared, multiplicity: i64) {
    for (f, v, n) in e.event.counts.iter() {
        let q = counter_qualifier(e.id.day(), e.event.event_type, &e.event.event_name, f, v);
        *counts.entry(q).or_default() += i64::from(n) * multiplicity;
    }
}

/// The rules of one state row: its counters' increments (zeros dropped)
/// and its log appends.
fn row_rules(
    row_key: Bytes,
    counts: BTreeMap<String, i64>,
    logs: BTreeMap<i64, Vec<u8>>,
) -> RowRules {
    let mut rules: Vec<ReadModifyWriteRule> = counts
        .into_iter()
        .filter(|(_, n)| *n != 0)
        .map(|(q, n)| ReadModifyWriteRule::increment("c", q, n))
        .collect();
    rules.extend(
        logs.into_iter()
            .map(|(day, recs)| ReadModifyWriteRule::append("l", day.to_string(), recs)),
    );
    RowRules::new(row_key, rules)
}

/// The row of a user's profile state for one day: `user,DDDDDDDD` (the
/// day number, zero-padded, so a user's days sort in order after the
/// user's batch-profile row `user`).
pub fn state_row_key(user: &str, day: i64) -> String {
    format!("{user},{day:08}")
}

/// Steps (2) and (3) for a batch's state rows (`rows`: row key -> its
/// events, each once): one `read_modify_write_rows` for all of them, and
/// one more for the surplus of retries and racing ingesters.
fn apply_rows(app: &App, rows: &BTreeMap<Bytes, Vec<&Prepared>>) -> Result<IngestReport> {
    let mut report = IngestReport::default();
    if rows.is_empty() {
        return Ok(report);
    }
    let mut todo: Vec<(&Bytes, &[&Prepared])> = Vec::with_capacity(rows.len());
    let mut entries = Vec::with_capacity(rows.len());
    for (key, events) in rows {
        let mut counts = BTreeMap::new();
        let mut logs: BTreeMap<i64, Vec<u8>> = BTreeMap::new();
        for e in events {
            apply_rules(&mut counts, e, 1);
            logs.entry(e.id.day())
                .or_default()
                .extend_from_slice(&e.id.record(b'+'));
        }
        entries.push(row_rules(key.clone(), counts, logs));
        todo.push((key, events));
    }
    let mut surplus_entries = Vec::new();
    for ((key, events), status) in todo
        .iter()
        .zip(app.profiles.read_modify_write_rows(&entries)?)
    {
        let written = status?;
        report.applied += events.len();
        let mut net = HashMap::new();
        for cell in written.cells.iter().filter(|c| c.family == "l") {
            net.extend(parse_log(&cell.value)?);
        }
        let mut counts = BTreeMap::new();
        let mut logs: BTreeMap<i64, Vec<u8>> = BTreeMap::new();
        for e in events.iter() {
            let surplus = net.get(&e.id).copied().unwrap_or(1) - 1;
            if surplus > 0 {
                apply_rules(&mut counts, e, -surplus);
                let log = logs.entry(e.id.day()).or_default();
                for _ in 0..surplus {
                    log.extend_from_slice(&e.id.record(b'-'));
                }
                report.compensated += 1;
                report.applied -= 1;
                report.duplicates += 1;
            }
        }
        if !logs.is_empty() {
            surplus_entries.push(row_rules((*key).clone(), counts, logs));
        }
    }
    if !surplus_entries.is_empty() {
        for status in app.profiles.read_modify_write_rows(&surplus_entries)? {
            status?;
        }
    }
    Ok(report)
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
            let key = EventKey::for_event(&app.id, e.identity(), e.timestamp_millis, &e.content())?;
            let suffix = key.suffix.as_deref().unwrap_or_default();
            let suffix = u64::from_str_radix(suffix, 16)
                .map_err(|_| Error::corrupt("event key suffix", suffix.to_string()))?;
            out.push(Prepared {
                user: e.identity().to_string(),
                key: key.encode()?,
                id: EventId {
                    timestamp_millis: e.timestamp_millis,
                    suffix,
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
        let prepared = self.prepare(&app, events, &mut report)?;
        let mut seen = HashSet::new();
        let unique: Vec<&Prepared> = prepared
            .iter()
            .filter(|p| seen.insert(p.key.as_str()))
            .collect();
        report.duplicates += prepared.len() - unique.len();
        let entries: Vec<RowMutations> = unique
            .iter()
            .map(|p| {
                RowMutations::new(
                    app.event_key(p.key.as_bytes()),
                    app.event_mutations(&p.event),
                )
            })
            .collect();
        for status in app.events.mutate_rows(&entries)? {
            status?;
        }
        self.write_trends(&app, events)?;
        let mut rows: BTreeMap<Bytes, Vec<&Prepared>> = BTreeMap::new();
        for p in unique {
            let key = Bytes::from(state_row_key(&p.user, p.id.day()));
            rows.entry(key).or_default().push(p);
        }
        report.merge(&apply_rows(&app, &rows)?);
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
