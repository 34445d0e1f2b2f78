//! Row keys of a points table and the ranges an area + time query reads.
//!
//! Three key kinds share one frame, `[salt][time bin][position][time within
//! bin][id]`, so they differ only in how the position orders rows:
//!
//! - `hilbert`, `zorder`: the row-key crate's location + time key
//!   ([`affinity_rowkey::geo`]): an 8-byte curve index;
//! - `latlong`: the 20-byte `lat#long` string of [`affinity_rowkey::latlong`]
//!   (`+45.52306#-122.67648`), the source system's key, kept for the
//!   benchmark.
//!
//! Salt (1 byte, `XXH64(id) mod salts`), time bin (4 bytes) and time within
//! the bin (4 bytes) are as in [`affinity_rowkey::geo`]; the id ends the key.

use std::fmt;
use std::ops::Bound;

use affinity_model::{prefix_successor, Bytes, RowRange};
use affinity_rowkey::cover::CoverOptions;
use affinity_rowkey::curve::Curve;
use affinity_rowkey::geo::{GeoLayout, TimeBin, FIXED_LEN};
use affinity_rowkey::latlong::{latlong_cover, latlong_key, latlong_row_ranges};
use affinity_rowkey::plan::{plan, GeoQuery};

use crate::error::{Error, Result};
use crate::point::Point;

/// Bytes of a `lat#long` position string.
const LATLONG_LEN: usize = 20;

/// How the position orders rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyKind {
    Hilbert,
    ZOrder,
    LatLong,
}

impl KeyKind {
    pub const ALL: [KeyKind; 3] = [KeyKind::Hilbert, KeyKind::ZOrder, KeyKind::LatLong];

    /// Parse `hilbert`, `zorder` (or `z-order`) or `latlong` (or `lat#long`).
    pub fn parse(text: &str) -> Result<KeyKind> {
        match text {
            "hilbert" => Ok(KeyKind::Hilbert),
            "zorder" | "z-order" => Ok(KeyKind::ZOrder),
            "latlong" | "lat#long" => Ok(KeyKind::LatLong),
            _ => Err(Error::InvalidArgument {
                name: "key",
                reason: format!("{text:?} is not hilbert, zorder or latlong"),
            }),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            KeyKind::Hilbert => "hilbert",
            KeyKind::ZOrder => "zorder",
            KeyKind::LatLong => "latlong",
        }
    }

    /// A label for reports.
    pub fn label(self) -> &'static str {
        match self {
            KeyKind::Hilbert => "Hilbert",
            KeyKind::ZOrder => "Z-order",
            KeyKind::LatLong => "lat#long",
        }
    }
}

fn bin_name(bin: TimeBin) -> &'static str {
    match bin {
        TimeBin::Hour => "hour",
        TimeBin::Day => "day",
        TimeBin::Week => "week",
    }
}

/// The key layout of a points table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PointLayout {
    pub kind: KeyKind,
    geo: GeoLayout,
}

/// The row ranges of one query.
#[derive(Debug, Clone)]
pub struct PointPlan {
    pub ranges: Vec<RowRange>,
    /// Ranges of the position cover, repeated for each (salt, bin).
    pub ranges_per_bin: usize,
    /// Time bins the query touches.
    pub bins: u32,
}

impl PointLayout {
    /// A layout; `salts` in 1..=256.
    pub fn new(kind: KeyKind, bin: TimeBin, salts: u32) -> Result<PointLayout> {
        let curve = match kind {
            KeyKind::ZOrder => Curve::ZOrder,
            KeyKind::Hilbert | KeyKind::LatLong => Curve::Hilbert,
        };
        Ok(PointLayout {
            kind,
            geo: GeoLayout::new(curve, bin, salts)?,
        })
    }

    pub fn bin(&self) -> TimeBin {
        self.geo.bin
    }

    pub fn salts(&self) -> u32 {
        self.geo.salts()
    }

    /// Bytes before the id.
    pub fn fixed_len(&self) -> usize {
        match self.kind {
            KeyKind::LatLong => 1 + 4 + LATLONG_LEN + 4,
            KeyKind::Hilbert | KeyKind::ZOrder => FIXED_LEN,
        }
    }

    /// The row key of a point.
    pub fn key(&self, p: &Point) -> Result<Vec<u8>> {
        let id = p.id.as_bytes();
        if self.kind != KeyKind::LatLong {
            return Ok(self.geo.encode(p.lng, p.lat, p.time_millis, id)?);
        }
        let bin = self.geo.bin_of(p.time_millis)?;
        let offset = (p.time_millis % self.geo.bin.millis()) as u32;
        let position = latlong_key(p.lng, p.lat)?;
        let mut key = Vec::with_capacity(self.fixed_len() + id.len());
        key.push(self.geo.salt_of(id));
        key.extend_from_slice(&bin.to_be_bytes());
        key.extend_from_slice(position.as_bytes());
        key.extend_from_slice(&offset.to_be_bytes());
        key.extend_from_slice(id);
        Ok(key)
    }

    /// The id at the end of a key, `None` for a key too short to be one.
    pub fn id_of<'a>(&self, key: &'a [u8]) -> Option<&'a [u8]> {
        key.get(self.fixed_len()..)
    }

    /// The row ranges of `query`, at most `budget` position ranges per
    /// (salt, bin).
    pub fn plan(&self, query: &GeoQuery, budget: usize) -> Result<PointPlan> {
        if self.kind != KeyKind::LatLong {
            let p = plan(&self.geo, query, &CoverOptions::with_budget(budget))?;
            return Ok(PointPlan {
                ranges_per_bin: p.cover.ranges.len(),
                ranges: p.ranges,
                bins: p.bins,
            });
        }
        if query.from_millis >= query.to_millis {
            return Err(Error::InvalidArgument {
                name: "time range",
                reason: format!(
                    "from {} is not before to {}",
                    query.from_millis, query.to_millis
                ),
            });
        }
        let first = self.geo.bin_of(query.from_millis)?;
        let last = self.geo.bin_of(query.to_millis - 1)?;
        let position = latlong_row_ranges(&latlong_cover(&query.bbox, budget)?);
        let mut ranges = Vec::new();
        for salt in 0..self.salts() {
            for bin in first..=last {
                let mut head = vec![salt as u8];
                head.extend_from_slice(&bin.to_be_bytes());
                for r in &position {
                    ranges.push(prefixed(&head, r));
                }
            }
        }
        Ok(PointPlan {
            ranges,
            ranges_per_bin: position.len(),
            bins: last - first + 1,
        })
    }

    /// The layout's description, stored in the table: `key=hilbert
    /// bin=hour salts=4`.
    pub fn describe(&self) -> String {
        self.to_string()
    }

    /// Parse [`PointLayout::describe`].
    pub fn parse(text: &str) -> Result<PointLayout> {
        let bad = || Error::InvalidArgument {
            name: "layout",
            reason: format!("{text:?} is not `key=K bin=B salts=N`"),
        };
        let (mut kind, mut bin, mut salts) = (None, None, None);
        for part in text.split_whitespace() {
            match part.split_once('=').ok_or_else(bad)? {
                ("key", v) => kind = Some(KeyKind::parse(v)?),
                ("bin", v) => bin = Some(TimeBin::parse(v)?),
                ("salts", v) => salts = Some(v.parse().map_err(|_| bad())?),
                _ => return Err(bad()),
            }
        }
        match (kind, bin, salts) {
            (Some(k), Some(b), Some(s)) => PointLayout::new(k, b, s),
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for PointLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "key={} bin={} salts={}",
            self.kind.name(),
            bin_name(self.geo.bin),
            self.salts()
        )
    }
}

/// `range` with every key prefixed by `head`.
fn prefixed(head: &[u8], range: &RowRange) -> RowRange {
    let with = |k: &Bytes| {
        let mut v = head.to_vec();
        v.extend_from_slice(k);
        Bytes::from(v)
    };
    RowRange {
        start: match &range.start {
            Bound::Included(k) => Bound::Included(with(k)),
            Bound::Excluded(k) => Bound::Excluded(with(k)),
            Bound::Unbounded => Bound::Included(Bytes::from(head.to_vec())),
        },
        end: match &range.end {
            Bound::Included(k) => Bound::Included(with(k)),
            Bound::Excluded(k) => Bound::Excluded(with(k)),
            Bound::Unbounded => match prefix_successor(head) {
                Some(e) => Bound::Excluded(Bytes::from(e)),
                None => Bound::Unbounded,
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn description_round_trips() {
        for kind in KeyKind::ALL {
            let l = PointLayout::new(kind, TimeBin::Day, 7).unwrap();
            assert_eq!(PointLayout::parse(&l.describe()).unwrap(), l);
        }
        assert!(PointLayout::parse("key=hilbert bin=year salts=1").is_err());
    }
}
