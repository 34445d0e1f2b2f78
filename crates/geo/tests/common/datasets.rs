//! Test data sets and the queries checked on them: the real position data
//! read from CSV, or seeded sensor points crowding around cities (and
//! around the antimeridian); from each data set's query centres, every box
//! from 1 km to 5000 km with windows of 10 minutes (less than a bin), one
//! bin and one day. The same data and queries as `affinity bench geo`'s.

use std::io::BufReader;
use std::path::Path;

use affinity_geo::csv::{Columns, CsvPoints};
use affinity_geo::sample::{sensor_centres, sensor_points};
use affinity_geo::Point;
use affinity_rowkey::geo::TimeBin;
use affinity_rowkey::plan::{BBox, GeoQuery};

/// Points, the time bin their tables use and the query centres.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// A short name, used in table names (`[a-z0-9_]`).
    pub name: String,
    pub points: Vec<Point>,
    pub bin: TimeBin,
    /// Query centres (lng, lat, time).
    pub centres: Vec<(f64, f64, i64)>,
}

/// Box sides of the queries, in km.
const SIZES_KM: [f64; 5] = [1.0, 10.0, 100.0, 1000.0, 5000.0];

/// `[from, to)` windows around a centre time `t`: ten minutes, the time
/// bin of `t`, the UTC day of `t`.
fn windows(t: i64, bin: TimeBin) -> [(i64, i64); 3] {
    let aligned = |len: i64| (t - t.rem_euclid(len), t - t.rem_euclid(len) + len);
    [
        (t - 300_000, t + 300_000),
        aligned(bin.millis()),
        aligned(86_400_000),
    ]
}

/// Every (centre, size, window) query of a data set.
pub fn queries(ds: &Dataset) -> Vec<GeoQuery> {
    let mut out = Vec::new();
    for &(lng, lat, t) in &ds.centres {
        for km in SIZES_KM {
            for (from_millis, to_millis) in windows(t, ds.bin) {
                out.push(GeoQuery {
                    bbox: BBox::around(lng, lat, km).unwrap(),
                    from_millis: from_millis.max(0),
                    to_millis,
                });
            }
        }
    }
    out
}

/// A CSV file as a data set, with four query centres at evenly spaced
/// positions of the input.
pub fn read_csv(path: &Path, name: &str, columns: &Columns, bin: TimeBin) -> Dataset {
    let file = std::fs::File::open(path).unwrap();
    let points: Vec<Point> = CsvPoints::new(BufReader::new(file), columns)
        .unwrap()
        .map(|r| r.unwrap().1)
        .collect();
    let count = 4;
    let centres = (0..count)
        .filter_map(|k| points.get(points.len() * (2 * k + 1) / (2 * count)))
        .map(|p| (p.lng, p.lat, p.time_millis))
        .collect();
    Dataset {
        name: name.to_string(),
        points,
        bin,
        centres,
    }
}

/// `n` sensor points over one week, seeded
/// ([`affinity_geo::sample::sensor_points`]). Hour bins; query centres at
/// five cities (Suva's boxes cross the antimeridian), mid-week.
pub fn generated(n: usize, seed: u64) -> Dataset {
    let points = sensor_points(n, seed);
    let centres = sensor_centres();
    Dataset {
        name: "generated".into(),
        points,
        bin: TimeBin::Hour,
        centres,
    }
}
