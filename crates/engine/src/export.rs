//! Export: every user's profile scored from the events table in one
//! pass, under the current strategy or a candidate one, each handed to a
//! [`ProfileSink`] as the API's profile JSON (`affinity export` writes
//! them as JSON lines). For loading profiles into a search index offline,
//! or seeing a candidate strategy's effect on everyone before setting it.
//! Nothing is written to the store.
//!
//! The scan is the batch pipeline's (`batch.rs`): ranges at user
//! boundaries, threads, shards. In the wide schema the store returns only
//! the strategy's qualifiers (see [`crate::schema::wide_filter`]), in the
//! narrow one only the strategy's `(type, name)` columns; both with a
//! timestamp filter at the start of the reads' whole-day window, so
//! expired cells never count even where GC lags. An exported profile is
//! the one a read answers at the same instant.

use std::sync::atomic::{AtomicU64, Ordering};

use affinity_model::{ReadRowsRequest, RowFilter, RowRange, RowRef, RowSet};
use rustc_hash::FxHashMap;

use crate::batch::{event_ranges, event_user, run_ranges, visit_rows, Progress};
use crate::engine::{App, Engine};
use crate::error::{Error, Result};
use crate::event::EventType;
use crate::schema::{
    narrow_filter, not_utf8, parse_wide_qualifier, since, utf8, visit_narrow_value,
    visit_wide_value_bytes, wide_filter, Schema, WIDE_FAMILY,
};
use crate::scoring::Accumulator;
use crate::strategy::{Strategy, Weights};

/// Where [`Engine::export`] hands the profiles, from its threads: within
/// a key range in key order, ranges in any order. Any
/// `Fn(&str, &[u8]) -> std::io::Result<()> + Sync` is one.
pub trait ProfileSink: Sync {
    /// One user's profile: `json` is the bytes `GET
    /// /1/profiles/personalization/{user}` answers.
    fn profile(&self, user: &str, json: &[u8]) -> std::io::Result<()>;
}

impl<F> ProfileSink for F
where
    F: Fn(&str, &[u8]) -> std::io::Result<()> + Sync,
{
    fn profile(&self, user: &str, json: &[u8]) -> std::io::Result<()> {
        self(user, json)
    }
}

/// How to run an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportOptions {
    /// Scanning threads (default 2).
    pub threads: usize,
    /// `(i, n)`: take only shard `i` of `n`.
    pub shard: Option<(usize, usize)>,
}

impl Default for ExportOptions {
    fn default() -> ExportOptions {
        ExportOptions {
            threads: 2,
            shard: None,
        }
    }
}

/// What an export did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExportReport {
    /// Event rows read (in the wide schema only those holding a facet the
    /// strategy scores).
    pub events: u64,
    /// Profiles handed to the sink: the users with a scoring event.
    pub profiles: u64,
    /// Key ranges of the shard.
    pub ranges: usize,
    /// The `updatedAt` of the strategy used; `None` for a candidate one.
    pub strategy_version: Option<i64>,
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

/// What one range's scan found.
#[derive(Default)]
struct Found {
    events: u64,
    profiles: u64,
}

/// Score the users of one range and hand their profiles to `sink`.
fn export_range(
    app: &App,
    range: RowRange,
    filter: &RowFilter,
    weights: &Weights,
    sink: &dyn ProfileSink,
    progress: &Progress,
) -> Result<Found> {
    let request = ReadRowsRequest::new(RowSet::from_range(range)).with_filter(filter.clone());
    // The user being scored and their accumulator, which then serves the
    // next user (emptied, its maps' room kept).
    let mut current: Option<(Vec<u8>, Accumulator<'_>)> = None;
    let mut scorer = RowScorer::new(weights);
    let mut out = Output {
        sink,
        json: Vec::with_capacity(256),
        profiles: 0,
    };
    let mut events = 0u64;
    visit_rows(app.events.as_ref(), &request, |row| {
        let Some(key) = app.logical_key(row.key)? else {
            return Ok(());
        };
        let user =
            event_user(key).ok_or_else(|| Error::corrupt("event key", format!("{:?}", row.key)))?;
        if current.as_ref().is_none_or(|(u, _)| u.as_slice() != user) {
            let next = match current.take() {
                Some((mut u, mut acc)) => {
                    out.finish_user(&u, &mut acc, progress)?;
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
        out.finish_user(&u, &mut acc, progress)?;
    }
    Ok(Found {
        events,
        profiles: out.profiles,
    })
}

/// A scan's output: the sink and the buffer each profile is written into.
struct Output<'s> {
    sink: &'s dyn ProfileSink,
    json: Vec<u8>,
    profiles: u64,
}

impl Output<'_> {
    /// Hand over the profile `acc` holds for `user` (none without a
    /// scoring event) and empty `acc` for the next user.
    fn finish_user(
        &mut self,
        user: &[u8],
        acc: &mut Accumulator<'_>,
        progress: &Progress,
    ) -> Result<()> {
        let user = std::str::from_utf8(user)
            .map_err(|_| Error::corrupt("event key", "user token not utf-8"))?;
        if let Some((last_event_millis, scores)) = acc.take_sorted() {
            self.json.clear();
            scores.write_profile_json(&mut self.json, user, last_event_millis)?;
            self.sink
                .profile(user, &self.json)
                .map_err(|e| Error::ExportOutput {
                    reason: e.to_string(),
                })?;
            self.profiles += 1;
        }
        progress.users.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

fn schema_filter(schema: Schema, strategy: &Strategy) -> RowFilter {
    match schema {
        Schema::Narrow => narrow_filter(strategy),
        Schema::Wide => wide_filter(strategy),
    }
}

impl Engine {
    /// Score every user of the application (or of one shard) from the
    /// events table under `strategy` (`None`: the current one) and hand
    /// each profile to `sink` (see the module docs). [`Progress`] counts
    /// event rows and users read.
    pub fn export(
        &self,
        app: &str,
        options: ExportOptions,
        strategy: Option<&Strategy>,
        sink: &dyn ProfileSink,
        progress: &Progress,
    ) -> Result<ExportReport> {
        let current;
        let (strategy, version) = match strategy {
            Some(candidate) => (candidate, None),
            None => {
                current = self
                    .strategy_version(app)?
                    .ok_or_else(|| Error::InvalidArgument {
                        name: "strategy",
                        reason: format!("application {app:?} has no strategy"),
                    })?;
                (&current.0, Some(current.1))
            }
        };
        let app = self.app(app)?;
        let cutoff = app.config.window_start_millis(self.now_millis());
        let filter = RowFilter::Chain(vec![
            since(cutoff),
            schema_filter(app.config.schema, strategy),
        ]);
        let weights = strategy.weights();
        let (events, profiles) = (AtomicU64::new(0), AtomicU64::new(0));
        let ranges = run_ranges(
            &app,
            event_ranges(&app)?,
            options.threads,
            options.shard,
            None,
            progress,
            |range| {
                let found = export_range(&app, range, &filter, &weights, sink, progress)?;
                events.fetch_add(found.events, Ordering::Relaxed);
                profiles.fetch_add(found.profiles, Ordering::Relaxed);
                Ok(())
            },
        )?;
        Ok(ExportReport {
            events: events.into_inner(),
            profiles: profiles.into_inner(),
            ranges: ranges.shard,
            strategy_version: version,
        })
    }
}
