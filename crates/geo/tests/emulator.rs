//! The same brute-force check on the official Bigtable emulator (the
//! `--bigtable` path): the harbor data under every key, and generated
//! global data with antimeridian boxes. Ignored unless asked for
//! (`scripts/test` runs it when it finds the emulator).

mod common;

use affinity_geo::csv::Columns;
use affinity_geo::sample::GENERATED_START;
use affinity_geo::{KeyKind, PointLayout};
use affinity_rowkey::geo::TimeBin;
use affinity_rowkey::plan::{BBox, GeoQuery};

use common::datasets::{generated, read_csv};
use common::{check_dataset, geo_file};

#[ignore = "needs the Cloud Bigtable emulator (scripts/test runs it)"]
#[test]
fn harbor_and_generated_on_the_emulator() {
    let store = affinity_bigtable::emulator::test_store();
    let columns = Columns {
        id: "MMSI".into(),
        time: "BaseDateTime".into(),
        lat: "LAT".into(),
        lng: "LON".into(),
    };
    let path = geo_file("NYHarbor_2020_06_30_first_hour.csv");
    let harbor = read_csv(&path, "harbor", &columns, TimeBin::Hour);
    let mut small = generated(5_000, 3);
    small.name = "gen".into();
    let start = GENERATED_START;
    let across = GeoQuery {
        bbox: BBox::parse("150,-60,-150,60").unwrap(),
        from_millis: start,
        to_millis: start + 3 * 86_400_000,
    };
    for kind in KeyKind::ALL {
        let layout = PointLayout::new(kind, TimeBin::Hour, 2).unwrap();
        let (_, returned) = check_dataset(store.as_ref(), &harbor, layout, &[]);
        assert!(returned > 0);
        let (_, returned) = check_dataset(store.as_ref(), &small, layout, &[across]);
        assert!(returned > 0);
    }
}
