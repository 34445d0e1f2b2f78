//! The benchmark's data sets (real position data, generated sensor points)
//! and its fixed set of queries.

use std::io::BufReader;
use std::path::Path;

use affinity_geo::csv::{Columns, CsvPoints};
use affinity_geo::sample::{sensor_centres, sensor_points};
use affinity_geo::Point;
use affinity_rowkey::geo::TimeBin;
use affinity_rowkey::plan::{BBox, GeoQuery};
use anyhow::Context;

/// Points to load, with the time bin their tables use.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// A short name, used in table names (`[a-z0-9_]`).
    pub name: String,
    pub description: String,
    pub points: Vec<Point>,
    pub bin: TimeBin,
    /// Query centres (lng, lat, time).
    pub centres: Vec<(f64, f64, i64)>,
}

/// Box sides of the queries, in km, and their labels.
pub const SIZES: [(f64, &str); 5] = [
    (1.0, "1 km"),
    (10.0, "10 km"),
    (100.0, "100 km"),
    (1000.0, "1000 km"),
    (5000.0, "5000 km"),
];

/// Time windows of the queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Window {
    /// Ten minutes around the centre's time: less than one bin.
    TenMinutes,
    /// The time bin of the centre's time.
    OneBin,
    /// The UTC day of the centre's time.
    OneDay,
}

impl Window {
    pub const ALL: [Window; 3] = [Window::TenMinutes, Window::OneBin, Window::OneDay];

    pub fn label(self) -> &'static str {
        match self {
            Window::TenMinutes => "10 min",
            Window::OneBin => "1 bin",
            Window::OneDay => "1 day",
        }
    }

    /// `[from, to)` for a centre time `t`.
    pub fn range(self, t: i64, bin: TimeBin) -> (i64, i64) {
        let aligned = |len: i64| (t - t.rem_euclid(len), t - t.rem_euclid(len) + len);
        match self {
            Window::TenMinutes => (t - 300_000, t + 300_000),
            Window::OneBin => aligned(bin.millis()),
            Window::OneDay => aligned(86_400_000),
        }
    }
}

/// One query of the benchmark.
#[derive(Debug, Clone)]
pub struct BenchQuery {
    pub size: usize,
    pub window: Window,
    pub query: GeoQuery,
}

/// Every (centre, size, window) query of a data set.
pub fn queries(ds: &Dataset) -> anyhow::Result<Vec<BenchQuery>> {
    let mut out = Vec::new();
    for &(lng, lat, t) in &ds.centres {
        for (size, &(km, _)) in SIZES.iter().enumerate() {
            for window in Window::ALL {
                let (from_millis, to_millis) = window.range(t, ds.bin);
                out.push(BenchQuery {
                    size,
                    window,
                    query: GeoQuery {
                        bbox: BBox::around(lng, lat, km)?,
                        from_millis: from_millis.max(0),
                        to_millis,
                    },
                });
            }
        }
    }
    Ok(out)
}

/// Centres at evenly spaced positions of the input.
fn centres_from(points: &[Point], count: usize) -> Vec<(f64, f64, i64)> {
    (0..count)
        .filter_map(|k| points.get(points.len() * (2 * k + 1) / (2 * count)))
        .map(|p| (p.lng, p.lat, p.time_millis))
        .collect()
}

/// A CSV file as a data set, with four query centres taken from it.
pub fn read_csv(
    path: &Path,
    name: &str,
    description: &str,
    columns: &Columns,
    bin: TimeBin,
) -> anyhow::Result<Dataset> {
    let file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let points = CsvPoints::new(BufReader::new(file), columns)?
        .map(|r| r.map(|(_, p)| p))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Dataset {
        name: name.to_string(),
        description: description.to_string(),
        centres: centres_from(&points, 4),
        points,
        bin,
    })
}

fn columns(id: &str, time: &str, lat: &str, lng: &str) -> Columns {
    Columns {
        id: id.into(),
        time: time.into(),
        lat: lat.into(),
        lng: lng.into(),
    }
}

/// The real position data in `dir` (the repository's `testdata/geo`): ships in
/// New York harbor and flight tracks around the world, hour bins.
pub fn real_datasets(dir: &Path) -> anyhow::Result<Vec<Dataset>> {
    let real = [
        (
            "NYHarbor_2020_06_30_first_hour.csv",
            "harbor",
            "AIS ship positions in New York harbor, 2020-06-30, first hour",
            columns("MMSI", "BaseDateTime", "LAT", "LON"),
        ),
        (
            "SampleTrajectories.csv",
            "flights",
            "flight tracks around the world (tracktable sample), 2014-07-01/02",
            columns("object_id", "timestamp", "latitude", "longitude"),
        ),
    ];
    real.iter()
        .map(|(file, name, description, cols)| {
            read_csv(&dir.join(file), name, description, cols, TimeBin::Hour)
        })
        .collect()
}

/// `n` sensor points over one week, seeded
/// ([`affinity_geo::sample::sensor_points`]). Hour bins; query centres at
/// five cities, mid-week.
pub fn generated(n: usize, seed: u64) -> Dataset {
    let points = sensor_points(n, seed);
    let centres = sensor_centres();
    Dataset {
        name: "generated".into(),
        description: format!(
            "{n} generated sensor points (seed {seed}), one week, 80% around 16 cities"
        ),
        points,
        bin: TimeBin::Hour,
        centres,
    }
}
