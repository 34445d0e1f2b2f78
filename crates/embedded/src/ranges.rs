//! Turning a `RowSet` into sorted, disjoint ranges of stored keys (row
//! keys: one RocksDB key per row).

use std::ops::Bound;

use affinity_model::{RowRange, RowSet};

use crate::row::successor;

/// A range of row keys `[lower, upper)`; `None` is unbounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyRange {
    pub lower: Option<Vec<u8>>,
    pub upper: Option<Vec<u8>>,
    /// True when the range holds exactly one row (a point read: a `get`,
    /// which the whole-key bloom filters serve).
    pub single_row: bool,
}

impl KeyRange {
    pub fn all() -> KeyRange {
        KeyRange {
            lower: None,
            upper: None,
            single_row: false,
        }
    }

    /// Exactly one row.
    pub fn row(row_key: &[u8]) -> KeyRange {
        KeyRange {
            upper: Some(successor(row_key)),
            lower: Some(row_key.to_vec()),
            single_row: true,
        }
    }

    /// As in Bigtable, an empty key on either side means unbounded.
    fn from_row_range(range: &RowRange) -> KeyRange {
        let lower = match &range.start {
            Bound::Unbounded => None,
            Bound::Included(k) | Bound::Excluded(k) if k.is_empty() => None,
            Bound::Included(k) => Some(k.to_vec()),
            Bound::Excluded(k) => Some(successor(k)),
        };
        let upper = match &range.end {
            Bound::Unbounded => None,
            Bound::Included(k) | Bound::Excluded(k) if k.is_empty() => None,
            Bound::Included(k) => Some(successor(k)),
            Bound::Excluded(k) => Some(k.to_vec()),
        };
        KeyRange {
            lower,
            upper,
            single_row: false,
        }
    }

    fn is_empty(&self) -> bool {
        matches!((&self.lower, &self.upper), (Some(l), Some(u)) if l >= u)
    }
}

/// The ranges to scan for `rows`, ascending and disjoint.
pub(crate) fn plan(rows: &RowSet) -> Vec<KeyRange> {
    if rows.is_all() {
        return vec![KeyRange::all()];
    }
    let mut ranges: Vec<KeyRange> = rows
        .keys
        .iter()
        .filter(|k| !k.is_empty())
        .map(|k| KeyRange::row(k))
        .chain(rows.ranges.iter().map(KeyRange::from_row_range))
        .filter(|r| !r.is_empty())
        .collect();
    // `None` (unbounded below) sorts first, as it should.
    ranges.sort_by(|a, b| a.lower.cmp(&b.lower));
    let mut merged: Vec<KeyRange> = Vec::with_capacity(ranges.len());
    for range in ranges {
        if let Some(last) = merged.last_mut() {
            let overlaps = match (&last.upper, &range.lower) {
                (None, _) => true,
                (Some(_), None) => true,
                (Some(end), Some(start)) => start < end,
            };
            if overlaps {
                if last.lower != range.lower || last.upper != range.upper {
                    last.single_row = false;
                }
                last.upper = match (last.upper.take(), range.upper) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
                continue;
            }
        }
        merged.push(range);
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use affinity_model::Bytes;

    fn lower_of(key: &[u8]) -> Option<Vec<u8>> {
        Some(key.to_vec())
    }

    #[test]
    fn empty_row_set_is_the_whole_table() {
        assert_eq!(plan(&RowSet::all()), vec![KeyRange::all()]);
    }

    #[test]
    fn duplicate_keys_read_once_and_stay_point_reads() {
        let ranges = plan(&RowSet::from_keys([b"b".as_ref(), b"a", b"b"]));
        assert_eq!(ranges.len(), 2);
        assert_eq!(ranges[0].lower, lower_of(b"a"));
        assert!(ranges.iter().all(|r| r.single_row));
    }

    #[test]
    fn adjacent_point_reads_stay_point_reads() {
        // "a" ends at "a\0", where the point read of "a\0" starts.
        let ranges = plan(&RowSet::from_keys([b"a".as_ref(), b"a\x00"]));
        assert_eq!(ranges.len(), 2);
        assert!(ranges.iter().all(|r| r.single_row));
    }

    #[test]
    fn overlapping_ranges_and_keys_merge() {
        let rows = RowSet {
            keys: vec![Bytes::from_static(b"c"), Bytes::from_static(b"z")],
            ranges: vec![
                RowRange::closed_open("a", "d"),
                RowRange::closed_open("c", "f"),
                RowRange::closed_open("x", "y"),
            ],
        };
        let ranges = plan(&rows);
        assert_eq!(ranges.len(), 3, "{ranges:?}");
        assert_eq!(ranges[0].lower, lower_of(b"a"));
        assert_eq!(ranges[0].upper, lower_of(b"f"));
        assert!(!ranges[0].single_row);
        assert!(ranges[2].single_row);
    }

    #[test]
    fn empty_and_inverted_ranges_read_nothing() {
        let rows = RowSet::from_ranges(vec![
            RowRange::closed_open("b", "b"),
            RowRange::closed_open("c", "a"),
        ]);
        assert!(plan(&rows).is_empty());
    }

    #[test]
    fn empty_keys_are_unbounded() {
        let range = RowRange {
            start: Bound::Excluded(Bytes::new()),
            end: Bound::Excluded(Bytes::new()),
        };
        assert_eq!(plan(&RowSet::from_range(range)), vec![KeyRange::all()]);
    }

    #[test]
    fn excluded_start_skips_exactly_that_row() {
        let range = RowRange {
            start: Bound::Excluded(Bytes::from_static(b"a")),
            end: Bound::Unbounded,
        };
        let ranges = plan(&RowSet::from_range(range));
        let lower = ranges[0].lower.clone().expect("bounded");
        assert!(b"a".as_slice() < lower.as_slice());
        assert!(b"a\x00".as_slice() >= lower.as_slice());
    }
}
