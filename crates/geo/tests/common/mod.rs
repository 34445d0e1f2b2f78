//! Shared helpers: the test data, data sets and their queries, and
//! a brute-force reference.
#![allow(dead_code)]

pub mod datasets;

use std::collections::BTreeMap;
use std::path::PathBuf;

use affinity_geo::{Point, PointLayout, PointTable};
use affinity_model::Store;
use affinity_rowkey::plan::GeoQuery;

use datasets::{queries, Dataset};

/// `testdata/geo/NAME` of the repository.
pub fn geo_file(name: &str) -> PathBuf {
    affinity_testdata::file(&format!("geo/{name}"))
}

/// Sortable identity of a point.
pub type Ident = (String, i64, u64, u64);

pub fn ident(p: &Point) -> Ident {
    (
        p.id.clone(),
        p.time_millis,
        p.lng.to_bits(),
        p.lat.to_bits(),
    )
}

/// The brute-force answer, written out from the definition: inside the
/// box (edges included, across the antimeridian when min > max) and
/// `from <= t < to`.
pub fn inside(q: &GeoQuery, p: &Point) -> bool {
    let b = q.bbox;
    let lng_ok = if b.min_lng <= b.max_lng {
        p.lng >= b.min_lng && p.lng <= b.max_lng
    } else {
        p.lng >= b.min_lng || p.lng <= b.max_lng
    };
    lng_ok
        && p.lat >= b.min_lat
        && p.lat <= b.max_lat
        && p.time_millis >= q.from_millis
        && p.time_millis < q.to_millis
}

/// The points a table of `layout` holds after writing `points` in order:
/// a later point with an earlier one's key replaces it.
pub fn stored(layout: &PointLayout, points: &[Point]) -> Vec<Point> {
    let mut by_key = BTreeMap::new();
    for p in points {
        by_key.insert(layout.key(p).unwrap(), p.clone());
    }
    by_key.into_values().collect()
}

pub fn brute_force(q: &GeoQuery, stored: &[Point]) -> Vec<Ident> {
    let mut v: Vec<Ident> = stored.iter().filter(|p| inside(q, p)).map(ident).collect();
    v.sort();
    v
}

/// Load `ds` into `store` under `layout` and check every query of the data
/// set (plus `extra`) against brute force; returns (queries, points
/// returned).
pub fn check_dataset(
    store: &dyn Store,
    ds: &Dataset,
    layout: PointLayout,
    extra: &[GeoQuery],
) -> (usize, u64) {
    let name = format!("t_{}_{}", ds.name, layout.kind.name());
    let table = PointTable::create(store, &name, layout).unwrap();
    for chunk in ds.points.chunks(1000) {
        table.write(chunk).unwrap();
    }
    let reference = stored(&layout, &ds.points);
    let mut all = queries(ds);
    all.extend_from_slice(extra);
    let mut returned = 0;
    for q in &all {
        let (points, stats) = table.query(q).unwrap();
        let mut got: Vec<Ident> = points.iter().map(ident).collect();
        got.sort();
        let want = brute_force(q, &reference);
        assert_eq!(got.len(), want.len(), "{} {q:?}", layout);
        assert!(got == want, "{} {q:?}", layout);
        assert!(stats.rows_scanned >= stats.rows_returned);
        assert!(stats.ranges_per_bin <= 64, "{} {q:?}", layout);
        returned += stats.rows_returned;
    }
    (all.len(), returned)
}
