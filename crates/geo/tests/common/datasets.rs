//! Test data sets and the queries checked on them: the real position data
//! read from CSV, or seeded sensor points crowding around cities (and
//! around the antimeridian); from each data set's query centres, every box
//! from 1 km to 5000 km with windows of 10 minutes (less than a bin), one
//! bin and one day. The same data and queries as `affinity bench geo`'s.

use std::io::BufReader;
use std::path::Path;

use affinity_geo::csv::{Columns, CsvPoints};
use affinity_geo::{Field, Point};
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

/// Cities the generated points crowd around: Portland, Milan and Venice
/// share a latitude band, and Suva sits by the antimeridian.
const CITIES: [(&str, f64, f64); 16] = [
    ("Portland", -122.68, 45.52),
    ("Milan", 9.19, 45.46),
    ("Venice", 12.33, 45.44),
    ("Montreal", -73.57, 45.50),
    ("Bordeaux", -0.58, 44.84),
    ("Harbin", 126.63, 45.80),
    ("New York", -74.0, 40.71),
    ("London", -0.13, 51.51),
    ("Tokyo", 139.69, 35.69),
    ("Sao Paulo", -46.63, -23.55),
    ("Sydney", 151.21, -33.87),
    ("Lagos", 3.38, 6.52),
    ("Mumbai", 72.88, 19.08),
    ("Auckland", 174.76, -36.85),
    ("Anchorage", -149.9, 61.2),
    ("Suva", 178.44, -18.14),
];

/// Start of the generated week: 2024-01-01T00:00:00Z.
pub const GENERATED_START: i64 = 1_704_067_200_000;

const MEASUREMENTS: [&str; 8] = [
    "temperature",
    "humidity",
    "pressure",
    "speed",
    "heading",
    "battery",
    "pm25",
    "noise",
];

/// A small seeded generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A standard normal deviate (Box-Muller).
    fn normal(&mut self) -> f64 {
        let u = self.unit().max(1e-12);
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * self.unit()).cos()
    }
}

/// `n` sensor points over one week, seeded: 80% around the [`CITIES`]
/// (about 30 km spread), 20% anywhere between 60 S and 70 N; 8 numeric
/// measurements each; one id per 50 points. Hour bins; query centres at
/// five cities (Suva's boxes cross the antimeridian), mid-week.
pub fn generated(n: usize, seed: u64) -> Dataset {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let devices = (n / 50).max(1);
    let week = 7.0 * 86_400_000.0;
    let points = (0..n)
        .map(|i| {
            let (lng, lat) = if rng.unit() < 0.8 {
                let (_, clng, clat) = CITIES[(rng.unit() * CITIES.len() as f64) as usize % 16];
                let lat = (clat + 0.3 * rng.normal()).clamp(-89.0, 89.0);
                let lng = clng + 0.3 * rng.normal() / clat.to_radians().cos();
                ((lng + 180.0).rem_euclid(360.0) - 180.0, lat)
            } else {
                (rng.unit() * 360.0 - 180.0, rng.unit() * 130.0 - 60.0)
            };
            let fields = MEASUREMENTS
                .iter()
                .map(|m| {
                    let value = (rng.unit() * 1000.0).round() / 10.0;
                    (m.to_string(), Field::Number(value))
                })
                .collect();
            Point {
                id: format!("sensor{:07}", i % devices),
                time_millis: GENERATED_START + (rng.unit() * week) as i64,
                lng,
                lat,
                fields,
            }
        })
        .collect();
    let mid = GENERATED_START + 3 * 86_400_000 + 12 * 3_600_000 + 1_800_000;
    let centres = ["Portland", "Milan", "Tokyo", "Sydney", "Suva"]
        .iter()
        .filter_map(|name| CITIES.iter().find(|c| c.0 == *name))
        .map(|&(_, lng, lat)| (lng, lat, mid))
        .collect();
    Dataset {
        name: "generated".into(),
        points,
        bin: TimeBin::Hour,
        centres,
    }
}
