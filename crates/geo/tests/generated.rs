//! Generated global data, antimeridian boxes and edge cases: queries equal
//! brute force under every key kind, salted and not.

mod common;

use affinity_geo::{Field, KeyKind, Point, PointLayout, PointTable};
use affinity_model::MemoryStore;
use affinity_rowkey::geo::TimeBin;
use affinity_rowkey::plan::{BBox, GeoQuery};

use common::datasets::generated;
use common::{brute_force, check_dataset, ident, stored};

#[test]
fn generated_data_every_key() {
    let ds = generated(20_000, 7);
    let store = MemoryStore::new();
    let mut returned = Vec::new();
    for (kind, salts) in [
        (KeyKind::Hilbert, 1),
        (KeyKind::ZOrder, 5),
        (KeyKind::LatLong, 2),
    ] {
        let layout = PointLayout::new(kind, TimeBin::Hour, salts).unwrap();
        returned.push(check_dataset(&store, &ds, layout, &[]).1);
    }
    assert!(returned[0] > 1000, "{returned:?}");
    assert!(returned.windows(2).all(|w| w[0] == w[1]));
}

fn point(id: &str, lng: f64, lat: f64, t: i64) -> Point {
    Point {
        id: id.into(),
        time_millis: t,
        lng,
        lat,
        fields: vec![("v".into(), Field::Number(lng))],
    }
}

#[test]
fn antimeridian_and_edges() {
    let t0 = 1_700_000_000_000;
    let mut points = Vec::new();
    for (i, lng) in [
        -180.0, -179.99999, -179.5, -170.0, 0.0, 170.0, 179.5, 179.99999, 180.0,
    ]
    .into_iter()
    .enumerate()
    {
        for (j, lat) in [-90.0, -10.0, 0.0, 10.0, 90.0].into_iter().enumerate() {
            for k in 0..3 {
                points.push(point(
                    &format!("p{i}-{j}-{k}"),
                    lng,
                    lat,
                    t0 + k * 1_800_000,
                ));
            }
        }
    }
    let boxes = [
        "179,-20,-179,20",
        "170,-90,-170,90",
        "179.99999,0,-179.99999,10",
        "180,-10,-180,10",
        "-180,-90,180,90",
        "0,0,0,0",
        "-179.5,-10,179.5,10",
        "179.5,-10,-179.5,10",
        "10,-10,-10,10",
    ];
    let store = MemoryStore::new();
    for kind in KeyKind::ALL {
        let layout = PointLayout::new(kind, TimeBin::Hour, 3).unwrap();
        let table = PointTable::create(&store, &format!("am_{}", kind.name()), layout).unwrap();
        table.write(&points).unwrap();
        let reference = stored(&layout, &points);
        for b in boxes {
            for (from, to) in [(t0, t0 + 1), (t0, t0 + 3_600_000), (t0 - 1, t0 + 9_000_000)] {
                let q = GeoQuery {
                    bbox: BBox::parse(b).unwrap(),
                    from_millis: from,
                    to_millis: to,
                };
                let (got, _) = table.query(&q).unwrap();
                let mut got: Vec<_> = got.iter().map(ident).collect();
                got.sort();
                assert_eq!(
                    got,
                    brute_force(&q, &reference),
                    "{kind:?} {b} {from}..{to}"
                );
            }
        }
        // A box across the antimeridian finds points on both sides.
        let q = GeoQuery {
            bbox: BBox::parse("179,-20,-179,20").unwrap(),
            from_millis: t0,
            to_millis: t0 + 1,
        };
        let (got, _) = table.query(&q).unwrap();
        assert!(got.iter().any(|p| p.lng > 179.0) && got.iter().any(|p| p.lng < -179.0));
    }
}
