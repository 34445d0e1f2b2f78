//! The query planner for location + time keys: (bounding box, time range)
//! -> row ranges. The box's curve cover ([`crate::cover`]) is computed once
//! and repeated for every (salt, time bin); ranges that touch (a full-curve
//! cover of consecutive bins) are joined. Rows of the first and last bins
//! outside the time range, and cells of the cover outside the box, are
//! dropped by [`GeoQuery::matches`] as rows come back.

use std::ops::Bound;

use affinity_model::{prefix_successor, Bytes, RowRange};

use crate::cover::{cover, Cover, CoverOptions, Rect};
use crate::curve::{lat_cell, lng_cell};
use crate::error::{Error, Result};
use crate::geo::GeoLayout;

/// A bounding box in degrees. `min_lng > max_lng` means the box crosses the
/// antimeridian (from `min_lng` east to 180, then from -180 to `max_lng`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BBox {
    pub min_lng: f64,
    pub min_lat: f64,
    pub max_lng: f64,
    pub max_lat: f64,
}

impl BBox {
    /// A checked box: coordinates in range, `min_lat <= max_lat`.
    pub fn new(min_lng: f64, min_lat: f64, max_lng: f64, max_lat: f64) -> Result<BBox> {
        for (name, v) in [("min_lng", min_lng), ("max_lng", max_lng)] {
            lng_cell(v).map_err(|_| coordinate(name, v, "must be a longitude in [-180, 180]"))?;
        }
        for (name, v) in [("min_lat", min_lat), ("max_lat", max_lat)] {
            lat_cell(v).map_err(|_| coordinate(name, v, "must be a latitude in [-90, 90]"))?;
        }
        if min_lat > max_lat {
            return Err(coordinate("min_lat", min_lat, "is north of max_lat"));
        }
        Ok(BBox {
            min_lng,
            min_lat,
            max_lng,
            max_lat,
        })
    }

    /// Parse `MINLNG,MINLAT,MAXLNG,MAXLAT`.
    pub fn parse(text: &str) -> Result<BBox> {
        let parts: Vec<&str> = text.split(',').map(str::trim).collect();
        let bad = || Error::InvalidArgument {
            name: "bbox",
            reason: format!("{text:?} is not MINLNG,MINLAT,MAXLNG,MAXLAT"),
        };
        if parts.len() != 4 {
            return Err(bad());
        }
        let mut v = [0f64; 4];
        for (slot, part) in v.iter_mut().zip(&parts) {
            *slot = part.parse().map_err(|_| bad())?;
        }
        BBox::new(v[0], v[1], v[2], v[3])
    }

    /// A box of about `km` x `km` centred on (lng, lat), wrapped across the
    /// antimeridian and clamped at the poles; the whole width of the map
    /// when it is wider.
    pub fn around(lng: f64, lat: f64, km: f64) -> Result<BBox> {
        let half_lat = km / 2.0 / 111.32;
        let (min_lat, max_lat) = ((lat - half_lat).max(-90.0), (lat + half_lat).min(90.0));
        let half_lng = half_lat / lat.to_radians().cos().max(1e-9);
        if half_lng >= 180.0 {
            return BBox::new(-180.0, min_lat, 180.0, max_lat);
        }
        let wrap = |v: f64| {
            if v < -180.0 {
                v + 360.0
            } else if v > 180.0 {
                v - 360.0
            } else {
                v
            }
        };
        BBox::new(wrap(lng - half_lng), min_lat, wrap(lng + half_lng), max_lat)
    }

    pub fn crosses_antimeridian(&self) -> bool {
        self.min_lng > self.max_lng
    }

    /// The grid cells of the box: one rectangle, or two across the
    /// antimeridian.
    pub fn rects(&self) -> Result<Vec<Rect>> {
        let (y0, y1) = (lat_cell(self.min_lat)?, lat_cell(self.max_lat)?);
        let (x0, x1) = (lng_cell(self.min_lng)?, lng_cell(self.max_lng)?);
        Ok(if self.crosses_antimeridian() && x1 >= x0 {
            // Both ends in one cell column: the box wraps the whole globe.
            vec![Rect {
                x0: 0,
                y0,
                x1: u32::MAX,
                y1,
            }]
        } else if self.crosses_antimeridian() {
            vec![
                Rect {
                    x0,
                    y0,
                    x1: u32::MAX,
                    y1,
                },
                Rect { x0: 0, y0, x1, y1 },
            ]
        } else {
            vec![Rect { x0, y0, x1, y1 }]
        })
    }
}

fn coordinate(name: &'static str, value: f64, reason: &'static str) -> Error {
    Error::InvalidCoordinate {
        name,
        value,
        reason,
    }
}

/// An area + time query: `from_millis <= t < to_millis`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeoQuery {
    pub bbox: BBox,
    pub from_millis: i64,
    pub to_millis: i64,
}

impl GeoQuery {
    /// True when a key of `layout` is a hit: its cell in the box and its
    /// time in the range.
    pub fn matches(&self, layout: &GeoLayout, key: &[u8]) -> bool {
        let Ok(k) = layout.decode(key) else {
            return false;
        };
        let t = layout.time_of(&k);
        if t < self.from_millis || t >= self.to_millis {
            return false;
        }
        let (x, y) = layout.curve.decode(k.index);
        self.bbox
            .rects()
            .is_ok_and(|rects| rects.iter().any(|r| r.contains(x, y)))
    }
}

/// The row ranges of a query, and the cover they repeat.
#[derive(Debug, Clone)]
pub struct QueryPlan {
    pub ranges: Vec<RowRange>,
    /// The cover of the box on the curve, the same for every bin and salt.
    pub cover: Cover,
    /// Time bins the query touches.
    pub bins: u32,
}

/// Plan `query` over keys of `layout`: at most `options.budget` curve
/// ranges per (salt, bin), before joining touching ranges.
pub fn plan(layout: &GeoLayout, query: &GeoQuery, options: &CoverOptions) -> Result<QueryPlan> {
    if query.from_millis >= query.to_millis {
        return Err(Error::InvalidArgument {
            name: "time range",
            reason: format!(
                "from {} is not before to {}",
                query.from_millis, query.to_millis
            ),
        });
    }
    if options.budget == 0 {
        return Err(Error::InvalidArgument {
            name: "budget",
            reason: "must be at least 1".to_string(),
        });
    }
    let first = layout.bin_of(query.from_millis)?;
    let last = layout.bin_of(query.to_millis - 1)?;
    let cover = cover(layout.curve, &query.bbox.rects()?, options);
    let mut spans: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
    for salt in 0..layout.salts() {
        for bin in first..=last {
            let mut head = Vec::with_capacity(13);
            head.push(salt as u8);
            head.extend_from_slice(&bin.to_be_bytes());
            for &(lo, hi) in &cover.ranges {
                let mut start = head.clone();
                start.extend_from_slice(&lo.to_be_bytes());
                // Trailing zero bytes only admit keys shorter than any real
                // key; trimming them lets touching ranges meet exactly.
                while start.last() == Some(&0) {
                    start.pop();
                }
                let mut end = head.clone();
                end.extend_from_slice(&hi.to_be_bytes());
                let end = prefix_successor(&end);
                match spans.last_mut() {
                    Some((_, prev_end)) if prev_end.as_ref().is_none_or(|e| *e >= start) => {
                        *prev_end = end;
                    }
                    _ => spans.push((start, end)),
                }
            }
        }
    }
    let ranges = spans
        .into_iter()
        .map(|(start, end)| RowRange {
            start: Bound::Included(Bytes::from(start)),
            end: end.map_or(Bound::Unbounded, |e| Bound::Excluded(Bytes::from(e))),
        })
        .collect();
    Ok(QueryPlan {
        ranges,
        cover,
        bins: last - first + 1,
    })
}
