//! `affinity bench keys`: curve encode speed, and for square boxes of 1 km
//! to a continent the planning time, ranges per query and cover overhead of
//! Hilbert, Z-order and `lat#long` keys, printed as a report. Numbers vary
//! with the machine; the criterion bench (`cargo bench -p affinity-rowkey`)
//! measures encoding more carefully.

use std::fmt::Write;
use std::hint::black_box;
use std::time::{Duration, Instant};

use affinity_rowkey::cover::CoverOptions;
use affinity_rowkey::curve::{lat_cell, lng_cell, Curve};
use affinity_rowkey::geo::{GeoLayout, TimeBin};
use affinity_rowkey::latlong::{latlong_cover, latlong_row_ranges};
use affinity_rowkey::plan::{plan, BBox, GeoQuery};

/// Print the report.
pub fn run() -> anyhow::Result<()> {
    print!("{}", report());
    Ok(())
}

/// Box sizes of the report: side in km, and a label.
const BOX_SIZES: [(f64, &str); 5] = [
    (1.0, "1 km"),
    (10.0, "10 km"),
    (100.0, "100 km"),
    (1000.0, "1000 km"),
    (5000.0, "continent"),
];

struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Nanoseconds per point to encode random cells on `curve`.
fn encode_ns_per_point(curve: Curve, points: usize, rounds: usize) -> f64 {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let cells: Vec<(u32, u32)> = (0..points)
        .map(|_| ((rng.unit() * 4e9) as u32, (rng.unit() * 4e9) as u32))
        .collect();
    let start = Instant::now();
    let mut acc = 0u64;
    for _ in 0..rounds {
        for &(x, y) in &cells {
            acc ^= curve.encode(black_box(x), black_box(y));
        }
    }
    black_box(acc);
    start.elapsed().as_nanos() as f64 / (points * rounds) as f64
}

/// Nanoseconds per point from (lng, lat) degrees to a curve index.
fn encode_degrees_ns(curve: Curve, points: usize) -> f64 {
    let mut rng = Rng(7);
    let pts: Vec<(f64, f64)> = (0..points)
        .map(|_| (rng.unit() * 360.0 - 180.0, rng.unit() * 180.0 - 90.0))
        .collect();
    let start = Instant::now();
    let mut acc = 0u64;
    for &(lng, lat) in &pts {
        if let (Ok(x), Ok(y)) = (lng_cell(black_box(lng)), lat_cell(black_box(lat))) {
            acc ^= curve.encode(x, y);
        }
    }
    black_box(acc);
    start.elapsed().as_nanos() as f64 / points as f64
}

/// Statistics of one (key design, box size) cell of the report.
#[derive(Debug, Clone)]
struct PlanStats {
    p50: Duration,
    p99: Duration,
    mean_ranges: f64,
    mean_overhead: f64,
    p99_overhead: f64,
    max_overhead: f64,
}

fn percentile<T: Copy + PartialOrd>(sorted: &[T], p: usize) -> T {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

/// Plan one box: (row ranges, overhead).
fn plan_once(
    design: Option<Curve>,
    bbox: BBox,
    options: &CoverOptions,
    budget: usize,
) -> Option<(usize, f64)> {
    match design {
        Some(curve) => {
            let layout = GeoLayout::new(curve, TimeBin::Hour, 1).ok()?;
            let query = GeoQuery {
                bbox,
                from_millis: 1_559_001_600_000,
                to_millis: 1_559_001_600_001,
            };
            let p = plan(&layout, &query, options).ok()?;
            Some((p.ranges.len(), p.cover.overhead()))
        }
        None => {
            let c = latlong_cover(&bbox, budget).ok()?;
            Some((latlong_row_ranges(&c).len(), c.overhead()))
        }
    }
}

/// Plan `queries` random boxes of side `km` (|lat| <= 70) with `design`:
/// a curve, or `None` for `lat#long`.
fn plan_stats(design: Option<Curve>, km: f64, queries: usize, budget: usize) -> PlanStats {
    let mut rng = Rng(0x5eed ^ km.to_bits());
    let mut times = Vec::with_capacity(queries);
    let mut overheads = Vec::with_capacity(queries);
    let mut ranges = 0usize;
    let options = CoverOptions::with_budget(budget);
    for _ in 0..queries {
        let (lng, lat) = (rng.unit() * 360.0 - 180.0, rng.unit() * 140.0 - 70.0);
        let Ok(bbox) = BBox::around(lng, lat, km) else {
            continue;
        };
        // Best of three runs: on a shared machine a single run's time is
        // mostly other processes' when the scheduler preempts it.
        let mut best = Duration::MAX;
        let mut result = None;
        for _ in 0..3 {
            let start = Instant::now();
            result = plan_once(design, bbox, &options, budget);
            best = best.min(start.elapsed());
        }
        let Some((n, overhead)) = result else {
            continue;
        };
        times.push(best);
        overheads.push(overhead);
        ranges += n;
    }
    times.sort_unstable();
    overheads.sort_by(f64::total_cmp);
    let count = overheads.len().max(1) as f64;
    PlanStats {
        p50: percentile(&times, 50),
        p99: percentile(&times, 99),
        mean_ranges: ranges as f64 / count,
        mean_overhead: overheads.iter().sum::<f64>() / count,
        p99_overhead: percentile(&overheads, 99),
        max_overhead: overheads.last().copied().unwrap_or(1.0),
    }
}

/// The whole report as text.
fn report() -> String {
    let mut out = String::new();
    let _ = writeln!(out, "curve encode (random cells, one core)");
    for curve in [Curve::Hilbert, Curve::ZOrder] {
        let ns = encode_ns_per_point(curve, 1 << 20, 20);
        let deg = encode_degrees_ns(curve, 1 << 20);
        let _ = writeln!(
            out,
            "  {:<8} {ns:>6.2} ns/point ({:>6.1} M points/s); from degrees {deg:.2} ns/point",
            curve.name(),
            1e3 / ns,
        );
    }
    let budget = 64;
    let queries = 300;
    let _ = writeln!(
        out,
        "\nrange covers, budget {budget} ranges, {queries} random square boxes per size (|lat| <= 70);\nplan time = key ranges for one bin and salt, best of 3 runs per box"
    );
    let _ = writeln!(
        out,
        "  {:<10} {:<9} {:>9} {:>9} {:>8} {:>10} {:>10} {:>10}",
        "box", "key", "plan p50", "plan p99", "ranges", "overhead", "ovh p99", "ovh max"
    );
    for (km, label) in BOX_SIZES {
        for (design, name) in [
            (Some(Curve::Hilbert), "hilbert"),
            (Some(Curve::ZOrder), "z-order"),
            (None, "lat#long"),
        ] {
            let s = plan_stats(design, km, queries, budget);
            let _ = writeln!(
                out,
                "  {label:<10} {name:<9} {:>7.0}us {:>7.0}us {:>8.1} {:>10.4} {:>10.4} {:>10.4}",
                s.p50.as_secs_f64() * 1e6,
                s.p99.as_secs_f64() * 1e6,
                s.mean_ranges,
                s.mean_overhead,
                s.p99_overhead,
                s.max_overhead,
            );
        }
    }
    let _ = writeln!(
        out,
        "\noverhead = grid cells read / grid cells in the box (1.0 = exact); lat#long cells are its 1e-5 degree grid points"
    );
    out
}
