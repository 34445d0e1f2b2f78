//! The located-points table: writes, and area + time queries that read the
//! planner's ranges and keep exactly the points inside.
//!
//! The table has one family, `p` (one version kept). Each point is one row
//! (see [`crate::point`] for the value). The layout (key kind, time bin,
//! salts) is stored in the table itself, in the row [`LAYOUT_KEY`], whose
//! first five bytes (salt 255, bin 2^32 - 1) no point key can have: that
//! bin starts after the year 9999, the last a time may have.

use std::sync::Arc;
use std::time::{Duration, Instant};

use affinity_model::{
    GcRule, Mutation, ReadRowsRequest, RowMutations, RowSet, Store, Table, TableSpec,
};
use affinity_rowkey::plan::GeoQuery;

use crate::error::{Error, Result};
use crate::layout::PointLayout;
use crate::point::Point;

/// The family of point values.
pub const FAMILY: &str = "p";
/// The qualifier of a point's value.
pub const QUALIFIER: &[u8] = b"v";
/// The row holding the layout's description.
pub const LAYOUT_KEY: &[u8] = b"\xff\xff\xff\xff\xff~layout";
const LAYOUT_QUALIFIER: &[u8] = b"layout";
/// Position ranges per (salt, bin) that queries use unless told otherwise.
pub const DEFAULT_BUDGET: usize = 64;

/// True when `p` is inside the query's box (edges included; across the
/// antimeridian when `min_lng > max_lng`) and `from <= t < to`.
pub fn contains(query: &GeoQuery, p: &Point) -> bool {
    let b = &query.bbox;
    let lng_in = if b.crosses_antimeridian() {
        p.lng >= b.min_lng || p.lng <= b.max_lng
    } else {
        b.min_lng <= p.lng && p.lng <= b.max_lng
    };
    lng_in
        && b.min_lat <= p.lat
        && p.lat <= b.max_lat
        && query.from_millis <= p.time_millis
        && p.time_millis < query.to_millis
}

/// What a query read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueryStats {
    /// Row ranges requested.
    pub ranges: usize,
    /// Position ranges per (salt, bin).
    pub ranges_per_bin: usize,
    pub bins: u32,
    /// Rows the ranges returned.
    pub rows_scanned: u64,
    /// Points inside the box and time range.
    pub rows_returned: u64,
    /// Time spent planning.
    pub plan_time: Duration,
}

/// A table of located points.
#[derive(Clone)]
pub struct PointTable {
    table: Arc<dyn Table>,
    layout: PointLayout,
}

impl PointTable {
    /// Create table `name` with `layout`, or open it when it exists with
    /// the same layout.
    pub fn create(store: &dyn Store, name: &str, layout: PointLayout) -> Result<PointTable> {
        if store.list_tables()?.iter().any(|t| t == name) {
            let existing = PointTable::open(store, name)?;
            if existing.layout != layout {
                return Err(Error::InvalidArgument {
                    name: "layout",
                    reason: format!(
                        "table {name:?} exists with layout `{}`, not `{layout}`",
                        existing.layout
                    ),
                });
            }
            return Ok(existing);
        }
        store.create_table(
            name,
            &TableSpec::new().with_family(FAMILY, GcRule::MaxVersions(1)),
        )?;
        let table = store.open_table(name)?;
        table.mutate_row(
            LAYOUT_KEY,
            &[Mutation::set_cell(
                FAMILY,
                LAYOUT_QUALIFIER,
                0,
                layout.describe(),
            )],
        )?;
        Ok(PointTable { table, layout })
    }

    /// Open an existing points table.
    pub fn open(store: &dyn Store, name: &str) -> Result<PointTable> {
        let table = store.open_table(name)?;
        let not_points = |reason: &str| Error::NotPointsTable {
            table: name.to_string(),
            reason: reason.to_string(),
        };
        let row = table
            .read_row(LAYOUT_KEY, None)?
            .ok_or_else(|| not_points("it has no layout row"))?;
        let cell = row
            .latest(FAMILY, LAYOUT_QUALIFIER)
            .ok_or_else(|| not_points("its layout row has no layout cell"))?;
        let text =
            std::str::from_utf8(&cell.value).map_err(|_| not_points("its layout is not UTF-8"))?;
        let layout = PointLayout::parse(text).map_err(|e| not_points(&e.to_string()))?;
        Ok(PointTable { table, layout })
    }

    pub fn layout(&self) -> PointLayout {
        self.layout
    }

    /// The row mutations of a point (its key and value, checked).
    pub fn mutations(&self, p: &Point) -> Result<RowMutations> {
        let key = self.layout.key(p)?;
        let value = p.encode_value()?;
        Ok(RowMutations {
            row_key: key.into(),
            mutations: vec![Mutation::set_cell(
                FAMILY,
                QUALIFIER,
                p.time_millis.saturating_mul(1000),
                value,
            )],
        })
    }

    /// Write points; a point with the key of an earlier one replaces it.
    pub fn write(&self, points: &[Point]) -> Result<()> {
        let entries = points
            .iter()
            .map(|p| self.mutations(p))
            .collect::<Result<Vec<_>>>()?;
        self.write_entries(&entries)
    }

    /// Write prepared mutations, failing on the first entry's error.
    pub fn write_entries(&self, entries: &[RowMutations]) -> Result<()> {
        for status in self.table.mutate_rows(entries)? {
            status?;
        }
        Ok(())
    }

    /// Call `visit` with every point inside the query's box and time
    /// range, in key order, with at most `budget` ranges per (salt, bin).
    pub fn scan(
        &self,
        query: &GeoQuery,
        budget: usize,
        mut visit: impl FnMut(Point),
    ) -> Result<QueryStats> {
        let started = Instant::now();
        let plan = self.layout.plan(query, budget)?;
        let mut stats = QueryStats {
            ranges: plan.ranges.len(),
            ranges_per_bin: plan.ranges_per_bin,
            bins: plan.bins,
            plan_time: started.elapsed(),
            ..QueryStats::default()
        };
        let request = ReadRowsRequest::new(RowSet::from_ranges(plan.ranges));
        for row in self.table.read_rows(&request)? {
            let row = row?;
            if row.key.as_ref() == LAYOUT_KEY {
                continue;
            }
            stats.rows_scanned += 1;
            let Some(cell) = row.latest(FAMILY, QUALIFIER) else {
                continue;
            };
            let point = self.decode(&row.key, &cell.value)?;
            if contains(query, &point) {
                stats.rows_returned += 1;
                visit(point);
            }
        }
        Ok(stats)
    }

    /// The points inside the query's box and time range, and the stats.
    pub fn query(&self, query: &GeoQuery) -> Result<(Vec<Point>, QueryStats)> {
        let mut points = Vec::new();
        let stats = self.scan(query, DEFAULT_BUDGET, |p| points.push(p))?;
        Ok((points, stats))
    }

    fn decode(&self, key: &[u8], value: &[u8]) -> Result<Point> {
        let corrupt = |reason: &str| Error::Corrupt {
            what: "point key",
            key: format!("{key:02x?}"),
            reason: reason.to_string(),
        };
        let id = self
            .layout
            .id_of(key)
            .ok_or_else(|| corrupt("is shorter than a point key"))?;
        let id = String::from_utf8(id.to_vec()).map_err(|_| corrupt("has an id not UTF-8"))?;
        Point::decode_value(id, value, key)
    }
}
