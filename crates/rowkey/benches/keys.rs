//! Criterion benchmarks of curve encoding and range-cover planning.
//! `affinity bench keys` prints the fuller report (crate `affinity-bench`).

use std::hint::black_box;

use affinity_rowkey::cover::{cover, CoverOptions};
use affinity_rowkey::curve::Curve;
use affinity_rowkey::plan::BBox;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn cells(n: usize) -> Vec<(u32, u32)> {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 32) as u32, s as u32)
        })
        .collect()
}

fn encode(c: &mut Criterion) {
    let points = cells(4096);
    let mut group = c.benchmark_group("encode");
    group.throughput(Throughput::Elements(points.len() as u64));
    for curve in [Curve::Hilbert, Curve::ZOrder] {
        group.bench_function(curve.name(), |b| {
            b.iter(|| {
                let mut acc = 0u64;
                for &(x, y) in &points {
                    acc ^= curve.encode(black_box(x), black_box(y));
                }
                acc
            })
        });
    }
    group.bench_function("hilbert-decode", |b| {
        b.iter(|| {
            let mut acc = 0u32;
            for &(x, y) in &points {
                acc ^= Curve::Hilbert
                    .decode(black_box((u64::from(x) << 32) | u64::from(y)))
                    .0;
            }
            acc
        })
    });
    group.finish();
}

/// Box sizes of the report: side in km, and a label.
const BOX_SIZES: [(f64, &str); 5] = [
    (1.0, "1 km"),
    (10.0, "10 km"),
    (100.0, "100 km"),
    (1000.0, "1000 km"),
    (5000.0, "continent"),
];

fn plan(c: &mut Criterion) {
    let mut group = c.benchmark_group("cover");
    for (km, label) in BOX_SIZES {
        let Ok(bbox) = BBox::around(-122.68, 45.52, km) else {
            continue;
        };
        let Ok(rects) = bbox.rects() else { continue };
        group.bench_function(format!("hilbert {label}"), |b| {
            b.iter(|| cover(Curve::Hilbert, black_box(&rects), &CoverOptions::default()))
        });
    }
    group.finish();
}

criterion_group!(benches, encode, plan);
criterion_main!(benches);
