//! The `lat#long` string key (the seed's design) and the best range cover
//! it allows, so benchmarks can set it beside the curve keys.
//!
//! Key: `{lat}#{lng}` with a sign and fixed widths at 5 decimals (about
//! 1 m): `+45.52306#-122.67648`, then whatever the row appends. Strings
//! sort by latitude first, so an area query reads one range per latitude
//! row of the box (two where the box straddles longitude 0 or the
//! antimeridian). With a budget of B ranges, rows are grouped into B runs
//! and each run reads every longitude in between: the cover is exact only
//! while the box has at most B rows, and otherwise reads whole latitude
//! bands of the planet (Portland shares its band with Milan).
//!
//! Cells here are the key's grid points (1e-5 degree), and ranges are
//! ranks in the key's string order; overhead is covered points / points in
//! the box, as for the curves.

use std::ops::Bound;

use affinity_model::{prefix_successor, Bytes, RowRange};

use crate::cover::{merge_to_budget, Cover};
use crate::error::{Error, Result};
use crate::plan::BBox;

/// Decimal places of a coordinate in the key.
pub const DECIMALS: u32 = 5;
const SCALE: f64 = 100_000.0;
const LAT_MAX: i64 = 90 * 100_000;
const LNG_MAX: i64 = 180 * 100_000;
/// Longitude values per latitude row.
const ROW: u64 = (2 * LNG_MAX + 1) as u64;

fn unit(v: f64) -> i64 {
    (v * SCALE).round() as i64
}

/// Rank of a unit value in string order: `+` values ascending, then `-`
/// values by ascending magnitude.
fn rank(u: i64, max: i64) -> u64 {
    if u >= 0 {
        u as u64
    } else {
        (max - u) as u64
    }
}

fn unrank(r: u64, max: i64) -> i64 {
    let r = r as i64;
    if r <= max {
        r
    } else {
        max - r
    }
}

fn format_unit(u: i64, int_width: usize) -> String {
    let sign = if u < 0 { '-' } else { '+' };
    let m = u.unsigned_abs();
    format!("{sign}{:0int_width$}.{:05}", m / 100_000, m % 100_000)
}

/// The key of a point.
pub fn latlong_key(lng: f64, lat: f64) -> Result<String> {
    let check = |name, v: f64, max: f64| {
        if v.is_finite() && v.abs() <= max {
            Ok(())
        } else {
            Err(Error::InvalidCoordinate {
                name,
                value: v,
                reason: "is out of range",
            })
        }
    };
    check("longitude", lng, 180.0)?;
    check("latitude", lat, 90.0)?;
    Ok(key_of(
        rank(unit(lat), LAT_MAX) * ROW + rank(unit(lng), LNG_MAX),
    ))
}

fn key_of(r: u64) -> String {
    format!(
        "{}#{}",
        format_unit(unrank(r / ROW, LAT_MAX), 2),
        format_unit(unrank(r % ROW, LNG_MAX), 3)
    )
}

/// Rank intervals (inclusive) of the unit interval `[a, b]`.
fn rank_segments(a: i64, b: i64, max: i64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    if b >= 0 {
        out.push((rank(a.max(0), max), rank(b, max)));
    }
    if a < 0 {
        out.push((rank(b.min(-1), max), rank(a, max)));
    }
    out
}

/// The budgeted cover of a box on `lat#long` keys, in key ranks.
pub fn latlong_cover(bbox: &BBox, budget: usize) -> Result<Cover> {
    let budget = budget.max(1);
    let rows = rank_segments(unit(bbox.min_lat), unit(bbox.max_lat), LAT_MAX);
    let mut segs = if bbox.crosses_antimeridian() {
        let mut s = rank_segments(unit(bbox.min_lng), LNG_MAX, LNG_MAX);
        s.extend(rank_segments(-LNG_MAX, unit(bbox.max_lng), LNG_MAX));
        s
    } else {
        rank_segments(unit(bbox.min_lng), unit(bbox.max_lng), LNG_MAX)
    };
    segs.sort_unstable();
    let row_count: u64 = rows.iter().map(|&(a, b)| b - a + 1).sum();
    let seg_cells: u64 = segs.iter().map(|&(a, b)| b - a + 1).sum();
    let (first, last) = match (segs.first(), segs.last()) {
        (Some(f), Some(l)) => (f.0, l.1),
        _ => {
            return Err(Error::InvalidArgument {
                name: "bbox",
                reason: "is empty".into(),
            })
        }
    };
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    let mut push = |lo: u64, hi: u64| match ranges.last_mut() {
        Some(prev) if prev.1 + 1 >= lo => prev.1 = prev.1.max(hi),
        _ => ranges.push((lo, hi)),
    };
    if row_count * segs.len() as u64 <= budget as u64 {
        for &(a, b) in &rows {
            for r in a..=b {
                for &(lo, hi) in &segs {
                    push(r * ROW + lo, r * ROW + hi);
                }
            }
        }
    } else {
        // Split the rows into at most `budget` runs of equal size; a run
        // reads from its first row's first segment to its last row's last.
        let groups = (budget as u64).min(row_count).max(rows.len() as u64);
        for &(a, b) in &rows {
            let n = b - a + 1;
            let g = (groups * n / row_count).clamp(1, n);
            for i in 0..g {
                let (ra, rb) = (a + i * n / g, a + (i + 1) * n / g - 1);
                push(ra * ROW + first, rb * ROW + last);
            }
        }
    }
    merge_to_budget(&mut ranges, budget);
    Ok(Cover {
        covered_cells: ranges.iter().map(|&(lo, hi)| u128::from(hi - lo) + 1).sum(),
        region_cells: u128::from(row_count) * u128::from(seg_cells),
        ranges,
    })
}

/// Row ranges of a `lat#long` cover.
pub fn latlong_row_ranges(cover: &Cover) -> Vec<RowRange> {
    cover
        .ranges
        .iter()
        .map(|&(lo, hi)| RowRange {
            start: Bound::Included(Bytes::from(key_of(lo))),
            end: match prefix_successor(key_of(hi).as_bytes()) {
                Some(e) => Bound::Excluded(Bytes::from(e)),
                None => Bound::Unbounded,
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_like_their_ranks() {
        assert_eq!(
            latlong_key(-122.676483, 45.523064).unwrap(),
            "+45.52306#-122.67648"
        );
        assert_eq!(latlong_key(0.0, 0.0).unwrap(), "+00.00000#+000.00000");
        let mut ranks: Vec<u64> = (0..2000u64)
            .map(|i| i * 7919 % (2 * LAT_MAX as u64 + 1) * ROW + i * 104_729 % ROW)
            .collect();
        ranks.sort_unstable();
        let keys: Vec<String> = ranks.iter().map(|&r| key_of(r)).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn small_box_is_exact_wide_box_reads_bands() {
        let tiny = BBox::new(-122.6765, 45.52300, -122.6764, 45.52310).unwrap();
        let c = latlong_cover(&tiny, 64).unwrap();
        assert_eq!(c.overhead(), 1.0);
        let city = BBox::around(-122.68, 45.52, 10.0).unwrap();
        let c = latlong_cover(&city, 64).unwrap();
        assert!(c.ranges.len() <= 64);
        assert!(c.overhead() > 100.0, "{}", c.overhead());
    }

    #[test]
    fn straddling_zero_and_antimeridian() {
        for bbox in [
            BBox::new(-0.00002, -0.00001, 0.00002, 0.00001).unwrap(),
            BBox::new(179.99999, 10.0, -179.99999, 10.00001).unwrap(),
        ] {
            let c = latlong_cover(&bbox, 64).unwrap();
            assert_eq!(c.overhead(), 1.0);
            let keys_in_box = c.region_cells;
            let ranges = latlong_row_ranges(&c);
            let mut hits = 0;
            for lat in [-0.00001, 0.0, 0.00001, 10.0, 10.00001] {
                for lng in [
                    -0.00002, -0.00001, 0.0, 0.00001, 0.00002, 179.99999, 180.0, -180.0, -179.99999,
                ] {
                    let inside = (bbox.min_lat..=bbox.max_lat).contains(&lat)
                        && if bbox.crosses_antimeridian() {
                            lng >= bbox.min_lng || lng <= bbox.max_lng
                        } else {
                            (bbox.min_lng..=bbox.max_lng).contains(&lng)
                        };
                    let key = latlong_key(lng, lat).unwrap();
                    let covered = ranges.iter().any(|r| r.contains(key.as_bytes()));
                    assert_eq!(inside, covered, "{key}");
                    hits += u128::from(inside);
                }
            }
            assert_eq!(hits, keys_in_box);
        }
    }
}
