//! Every query of the real position data sets (the geo benchmark's query
//! set) returns exactly the brute-force answer, under every key kind, on the
//! embedded store and on the in-memory reference store.

mod common;

use affinity_embedded::EmbeddedStore;
use affinity_geo::csv::Columns;
use affinity_geo::{KeyKind, PointLayout};
use affinity_model::{MemoryStore, Store};
use affinity_rowkey::geo::TimeBin;
use affinity_rowkey::plan::{BBox, GeoQuery};

use common::datasets::{read_csv, Dataset};
use common::{check_dataset, geo_file};

fn columns(id: &str, time: &str, lat: &str, lng: &str) -> Columns {
    Columns {
        id: id.into(),
        time: time.into(),
        lat: lat.into(),
        lng: lng.into(),
    }
}

fn harbor() -> Dataset {
    let path = geo_file("NYHarbor_2020_06_30_first_hour.csv");
    let ds = read_csv(
        &path,
        "harbor",
        &columns("MMSI", "BaseDateTime", "LAT", "LON"),
        TimeBin::Hour,
    );
    assert_eq!(ds.points.len(), 8689);
    ds
}

fn flights() -> Dataset {
    let path = geo_file("SampleTrajectories.csv");
    let ds = read_csv(
        &path,
        "flights",
        &columns("object_id", "timestamp", "latitude", "longitude"),
        TimeBin::Hour,
    );
    assert_eq!(ds.points.len(), 86321);
    assert!(ds.points.iter().all(|p| (-180.0..=180.0).contains(&p.lng)));
    ds
}

/// Extra queries: the whole data, and boxes across the antimeridian.
fn extra(ds: &Dataset) -> Vec<GeoQuery> {
    let from = ds.points.iter().map(|p| p.time_millis).min().unwrap_or(0);
    let to = ds.points.iter().map(|p| p.time_millis).max().unwrap_or(0) + 1;
    [
        "-180,-90,180,90",
        "170,-60,-170,60",
        "100,-90,-100,90",
        "-74.05,40.6,-74.0,40.7",
    ]
    .iter()
    .map(|b| GeoQuery {
        bbox: BBox::parse(b).unwrap(),
        from_millis: from,
        to_millis: to,
    })
    .collect()
}

fn check_all(store: &dyn Store, ds: &Dataset, salts: u32) {
    let mut counts = Vec::new();
    for kind in KeyKind::ALL {
        let layout = PointLayout::new(kind, ds.bin, salts).unwrap();
        counts.push(check_dataset(store, ds, layout, &extra(ds)));
    }
    // The queries found points, and every key found the same number.
    assert!(counts[0].1 > 0);
    assert!(counts.windows(2).all(|w| w[0] == w[1]), "{counts:?}");
}

#[test]
fn harbor_on_memory_and_embedded() {
    let ds = harbor();
    check_all(&MemoryStore::new(), &ds, 1);
    let dir = tempfile::tempdir().unwrap();
    check_all(&EmbeddedStore::open(dir.path()).unwrap(), &ds, 4);
}

#[test]
fn flights_on_memory_and_embedded() {
    let ds = flights();
    check_all(&MemoryStore::new(), &ds, 3);
    let dir = tempfile::tempdir().unwrap();
    check_all(&EmbeddedStore::open(dir.path()).unwrap(), &ds, 1);
}
