//! Regional trends: "what is trending around here lately" — the top facet
//! values of the events on located objects in an area and time window,
//! weighted by the strategy's event scores.
//!
//! # Table `trends.<app>`
//!
//! At ingestion ([`Engine::ingest`] calls [`Engine::write_trends`] right
//! after the events are stored), every event with `objectIDs` writes one
//! row per object that the catalog knows and that has a `_geoloc`: the
//! object's place, the event's time, type and name, and the object's facet
//! values as the catalog had them then (see [`row`] for key and value).
//! Events given by `filters` name no object, so they have no place and are
//! never counted; neither are objects without `_geoloc` or unknown to the
//! catalog, nor events before 1970 (the location key cannot hold them).
//! Events stored before this table existed have no rows and cannot get
//! any: the events table keeps their resolved facet counts, not their
//! objects or places.
//!
//! The key is the row-key crate's location + time key: Hilbert curve, one
//! salt byte ([`row::SALTS`] = 4 values) and one-day time bins. Day bins,
//! not hours: a trends window is days long (7 by default, up to the
//! retention), and a query reads `salts x days x cover ranges`; with hour
//! bins the default window would be 24 times as many ranges (4 x 168 x up
//! to 64), for rows that are read anyway. Only the first and last day of a
//! window can hold rows outside it. Four salts spread a busy day's writes
//! over four tablets instead of one key prefix.
//!
//! The row id is the event's content hash and the object's position in
//! `objectIDs`, so a retried batch rewrites the same rows (idempotent).
//! If the catalog moved the object between the try and the retry, the
//! retry writes a second row at the new place: trends record the catalog
//! as it was at ingestion, not as it is now.
//!
//! The family keeps one version and expires cells `retention` after the
//! event time, like the events table; queries also drop anything older
//! than `now - retention`, so an expired event never counts even before
//! compaction removes it.
//!
//! # Personal data
//!
//! A trends row holds no user token: place, time, event type and name, and
//! the object's facets. The only link to a person is the 64-bit content
//! hash in the id, which can be recomputed only from the whole event (user
//! token, millisecond time, objects...), i.e. from data the events table
//! holds and [`Engine::delete_user`] deletes. So `delete_user` does not
//! touch this table (finding a user's rows would take a full scan): a
//! deleted user's past events keep contributing to aggregate trends until
//! they expire with the retention.
//!
//! # Query
//!
//! [`Engine::trends`]: the planner's key ranges of the area's bounding box
//! and the window's days, then an exact filter per row (time in the window,
//! place in the box or within the circle's haversine radius). The weight of
//! a row is the strategy's `eventsScoring` score of its (type, name);
//! events the strategy does not score do not count, and without a strategy
//! nothing counts. `score(facet, value)` is the sum of the weights of the
//! rows whose object has that value (each occurrence counts, as in
//! profiles). `eventsCounted` is the number of distinct events with at
//! least one counted row; `rowsScanned` what the key ranges returned and
//! `rowsMatched` how many of those were in the area and window.

pub mod area;
pub mod row;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use affinity_model::{GcRule, ReadRowsRequest, RowMutations, RowSet, TableSpec};
use affinity_rowkey::composite::event_suffix;
use affinity_rowkey::cover::CoverOptions;
use affinity_rowkey::plan::{plan, GeoQuery};
use serde_json::{json, Value};

pub use area::{haversine_meters, Area};
pub use row::TrendRow;

use crate::catalog::Catalog;
use crate::engine::{App, AppConfig, Engine, DAY_MILLIS};
use crate::error::{Error, Result};
use crate::event::Event;

/// The window when a query gives no start: this long before its end.
pub const DEFAULT_WINDOW_MILLIS: i64 = 7 * DAY_MILLIS;
/// Values per facet when a query gives no limit.
pub const DEFAULT_LIMIT: usize = 10;
/// Most values per facet a query may ask for.
pub const MAX_LIMIT: usize = 100;
/// Curve ranges per (salt, day) the planner may use.
pub const RANGE_BUDGET: usize = 64;
/// Row ranges per read request (a 90-day window over a large area plans
/// 4 salts x 90 days x up to 64 ranges; requests stay small).
const RANGES_PER_READ: usize = 1024;
/// Rows per `mutate_rows` call at ingestion.
const WRITE_CHUNK: usize = 1000;

/// The spec of `trends.<app>`: one family, one version, expiring with the
/// retention.
pub fn table_spec(config: &AppConfig) -> TableSpec {
    let age = Duration::from_millis(config.retention_millis().max(0) as u64);
    TableSpec::new().with_family(
        row::FAMILY,
        GcRule::Union(vec![GcRule::MaxVersions(1), GcRule::MaxAge(age)]),
    )
}

/// A trends query.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendsQuery {
    pub area: Area,
    /// Start of the window (included), ms; default: [`DEFAULT_WINDOW_MILLIS`]
    /// before its end.
    pub from_millis: Option<i64>,
    /// End of the window (excluded), ms; default: now.
    pub to_millis: Option<i64>,
    /// Facets to rank; default: the strategy's `facetsScoring` facets.
    pub facets: Option<Vec<String>>,
    /// Values per facet, 1..=[`MAX_LIMIT`]; default [`DEFAULT_LIMIT`].
    pub limit: Option<usize>,
}

impl TrendsQuery {
    /// A query of `area` with every default.
    pub fn new(area: Area) -> TrendsQuery {
        TrendsQuery {
            area,
            from_millis: None,
            to_millis: None,
            facets: None,
            limit: None,
        }
    }
}

/// One ranked facet value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueScore {
    pub value: String,
    pub score: u64,
}

/// The answer to a trends query.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trends {
    /// Per facet asked, values by score descending then value ascending.
    pub facets: BTreeMap<String, Vec<ValueScore>>,
    /// Distinct events with at least one counted row.
    pub events_counted: u64,
    /// Rows the key ranges returned.
    pub rows_scanned: u64,
    /// Of those, rows in the area and window (scored by the strategy or
    /// not): `rows_scanned / rows_matched` is what the key costs.
    pub rows_matched: u64,
    /// Row ranges read.
    pub ranges: usize,
    /// The window, as asked (defaults filled in).
    pub from_millis: i64,
    pub to_millis: i64,
}

impl Trends {
    /// The API's JSON: `{"facets": {"brand": [{"value", "score"}]},
    /// "eventsCounted", "rowsScanned", "rowsMatched", "ranges", "from", "to"}`
    /// (times as ISO 8601 with milliseconds, UTC).
    pub fn to_json(&self) -> Value {
        let facets: serde_json::Map<String, Value> = self
            .facets
            .iter()
            .map(|(f, values)| {
                let list: Vec<Value> = values
                    .iter()
                    .map(|v| json!({"value": v.value, "score": v.score}))
                    .collect();
                (f.clone(), Value::from(list))
            })
            .collect();
        let time =
            |t: i64| affinity_rowkey::time::format_millis(t).unwrap_or_else(|_| t.to_string());
        json!({"facets": facets, "eventsCounted": self.events_counted,
            "rowsScanned": self.rows_scanned, "rowsMatched": self.rows_matched,
            "ranges": self.ranges, "from": time(self.from_millis), "to": time(self.to_millis)})
    }
}

/// The trends rows of a batch of events (see the module docs for which).
fn rows_of(
    engine: &Engine,
    app: &App,
    events: &[Event],
    layout: &affinity_rowkey::geo::GeoLayout,
) -> Result<Vec<RowMutations>> {
    let mut catalogs: HashMap<&str, Arc<Catalog>> = HashMap::new();
    let mut out = Vec::new();
    for e in events {
        if e.object_ids.is_empty() || e.timestamp_millis < 0 {
            continue;
        }
        let catalog = match catalogs.get(e.index.as_str()) {
            Some(c) => Arc::clone(c),
            None => {
                let c = engine.catalog(&app.id, &e.index)?;
                catalogs.insert(&e.index, Arc::clone(&c));
                c
            }
        };
        // Hashing the content costs a serialization: only for events with
        // a located object.
        let mut suffix: Option<String> = None;
        for (i, object_id) in e.object_ids.iter().enumerate() {
            let Some(object) = catalog.get(object_id) else {
                continue;
            };
            let Some((lat, lng)) = object.geoloc else {
                continue;
            };
            let suffix = suffix.get_or_insert_with(|| event_suffix(&e.content()));
            let row = TrendRow {
                id: row::row_id(suffix, i),
                time_millis: e.timestamp_millis,
                lat,
                lng,
                event_type: e.event_type,
                event_name: e.event_name.clone(),
                facets: object.facets.clone(),
            };
            out.push(row.mutations(layout)?);
        }
    }
    Ok(out)
}

/// Parse a time given for the parameter `name`, in the forms of
/// [`affinity_rowkey::time::parse_time`] (those `affinity geo` accepts):
/// RFC 3339 (`Z` or an offset; UTC without one), `YYYY-MM-DD HH:MM:SS`, or
/// epoch seconds (up to 11 digits) or milliseconds.
pub fn parse_time(name: &'static str, text: &str) -> Result<i64> {
    affinity_rowkey::time::parse_time(text).map_err(|e| Error::InvalidArgument {
        name,
        reason: e.to_string(),
    })
}

fn check_limit(limit: Option<usize>) -> Result<usize> {
    match limit {
        None => Ok(DEFAULT_LIMIT),
        Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        Some(n) => Err(Error::InvalidArgument {
            name: "limit",
            reason: format!("{n} is not in 1..={MAX_LIMIT}"),
        }),
    }
}

/// The facets a query ranks: its own, checked, or the strategy's.
fn facets_of(query: &TrendsQuery, strategy: Option<&crate::Strategy>) -> Result<Vec<String>> {
    match &query.facets {
        Some(list) => {
            if let Some(bad) = list.iter().find(|f| f.trim().is_empty()) {
                return Err(Error::InvalidArgument {
                    name: "facets",
                    reason: format!("{bad:?} is not a facet name"),
                });
            }
            Ok(list.clone())
        }
        None => Ok(strategy
            .map(|s| s.facets.keys().cloned().collect())
            .unwrap_or_default()),
    }
}

/// Values by score descending, then value ascending; the first `limit`.
fn ranked(values: HashMap<String, u64>, limit: usize) -> Vec<ValueScore> {
    let mut list: Vec<ValueScore> = values
        .into_iter()
        .map(|(value, score)| ValueScore { value, score })
        .collect();
    list.sort_by(|a, b| b.score.cmp(&a.score).then_with(|| a.value.cmp(&b.value)));
    list.truncate(limit);
    list
}

impl Engine {
    /// Write the trends rows of a batch of events (idempotent; called by
    /// [`Engine::ingest`] after the events are stored). Unsynced
    /// (`mutate_rows_unsynced`): the batch's state write, durable, follows
    /// before the batch is acknowledged.
    pub(crate) fn write_trends(&self, app: &App, events: &[Event]) -> Result<()> {
        let layout = row::layout()?;
        let entries = rows_of(self, app, events, &layout)?;
        for chunk in entries.chunks(WRITE_CHUNK) {
            for status in app.trends.mutate_rows_unsynced(chunk)? {
                status?;
            }
        }
        Ok(())
    }

    /// The top facet values of the events on objects in the query's area
    /// and window (see the module docs for the exact definition).
    pub fn trends(&self, app: &str, query: &TrendsQuery) -> Result<Trends> {
        let app = self.app(app)?;
        let limit = check_limit(query.limit)?;
        let now = self.now_millis();
        let to = query.to_millis.unwrap_or(now);
        let from = query
            .from_millis
            .unwrap_or_else(|| to.saturating_sub(DEFAULT_WINDOW_MILLIS));
        if from >= to {
            return Err(Error::InvalidArgument {
                name: "time range",
                reason: format!("from {from} is not before to {to}"),
            });
        }
        if let Area::Circle {
            lat,
            lng,
            radius_meters,
        } = query.area
        {
            Area::circle(lat, lng, radius_meters)?;
        }
        let strategy = self.strategy(&app.id)?;
        let facets = facets_of(query, strategy.as_ref())?;
        let bbox = query.area.bounding_box()?;
        let mut out = Trends {
            facets: facets.iter().map(|f| (f.clone(), Vec::new())).collect(),
            from_millis: from,
            to_millis: to,
            ..Trends::default()
        };
        // Expired events never count; the key holds no time before 1970.
        let read_from = from.max(now - app.config.retention_millis()).max(0);
        let read_to = to.min(affinity_rowkey::time::MAX_MILLIS + 1);
        let Some(weights) = strategy.map(|s| s.weights()) else {
            return Ok(out);
        };
        if read_from >= read_to {
            return Ok(out);
        }
        let layout = row::layout()?;
        let geo = GeoQuery {
            bbox,
            from_millis: read_from,
            to_millis: read_to,
        };
        let plan = plan(&layout, &geo, &CoverOptions::with_budget(RANGE_BUDGET))?;
        out.ranges = plan.ranges.len();
        let wanted: HashSet<&str> = facets.iter().map(String::as_str).collect();
        let mut scores: HashMap<&str, HashMap<String, u64>> = HashMap::new();
        let mut events: HashSet<String> = HashSet::new();
        for chunk in plan.ranges.chunks(RANGES_PER_READ) {
            let request = ReadRowsRequest::new(RowSet::from_ranges(chunk.to_vec()));
            for r in app.trends.read_rows(&request)? {
                let r = r?;
                out.rows_scanned += 1;
                let Some(cell) = r.latest(row::FAMILY, row::QUALIFIER.as_bytes()) else {
                    continue;
                };
                let t = TrendRow::decode(&layout, &r.key, &cell.value)?;
                if t.time_millis < read_from
                    || t.time_millis >= read_to
                    || !query.area.contains(t.lat, t.lng)
                {
                    continue;
                }
                out.rows_matched += 1;
                let Some(weight) = weights.event(t.event_type, &t.event_name) else {
                    continue;
                };
                if !events.contains(t.event_id()) {
                    events.insert(t.event_id().to_string());
                }
                for (f, v) in &t.facets {
                    if let Some(facet) = wanted.get(f.as_str()) {
                        *scores
                            .entry(facet)
                            .or_default()
                            .entry(v.clone())
                            .or_default() += u64::from(weight);
                    }
                }
            }
        }
        out.events_counted = events.len() as u64;
        for (facet, values) in scores {
            out.facets.insert(facet.to_string(), ranked(values, limit));
        }
        Ok(out)
    }
}
