//! Row sets and read requests.

use std::ops::Bound;

use bytes::Bytes;

use crate::filter::RowFilter;

/// A range of row keys. `Unbounded` on either side means the start or end
/// of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowRange {
    pub start: Bound<Bytes>,
    pub end: Bound<Bytes>,
}

impl RowRange {
    /// Every row.
    pub fn all() -> RowRange {
        RowRange {
            start: Bound::Unbounded,
            end: Bound::Unbounded,
        }
    }

    /// `[start, end)`.
    pub fn closed_open(start: impl Into<Bytes>, end: impl Into<Bytes>) -> RowRange {
        RowRange {
            start: Bound::Included(start.into()),
            end: Bound::Excluded(end.into()),
        }
    }

    /// Every row whose key starts with `prefix`.
    pub fn prefix(prefix: impl Into<Bytes>) -> RowRange {
        let prefix: Bytes = prefix.into();
        let end = match prefix_successor(&prefix) {
            Some(end) => Bound::Excluded(Bytes::from(end)),
            None => Bound::Unbounded,
        };
        RowRange {
            start: Bound::Included(prefix),
            end,
        }
    }

    /// True when `key` falls in the range. As in Bigtable, an empty key on
    /// either side means "unbounded" (the proto cannot tell them apart).
    pub fn contains(&self, key: &[u8]) -> bool {
        let after_start = match &self.start {
            Bound::Unbounded => true,
            Bound::Included(s) => key >= s.as_ref(),
            Bound::Excluded(s) => key > s.as_ref(),
        };
        let before_end = match &self.end {
            Bound::Unbounded => true,
            Bound::Included(e) | Bound::Excluded(e) if e.is_empty() => true,
            Bound::Included(e) => key <= e.as_ref(),
            Bound::Excluded(e) => key < e.as_ref(),
        };
        after_start && before_end
    }

    /// True when no key can fall in the range.
    pub fn is_empty(&self) -> bool {
        match (&self.start, &self.end) {
            (Bound::Unbounded, _) | (_, Bound::Unbounded) => false,
            (_, Bound::Included(e) | Bound::Excluded(e)) if e.is_empty() => false,
            (Bound::Included(s), Bound::Included(e)) => s > e,
            (Bound::Included(s), Bound::Excluded(e)) | (Bound::Excluded(s), Bound::Included(e)) => {
                s >= e
            }
            (Bound::Excluded(s), Bound::Excluded(e)) => {
                // (s, e) is empty when e <= s or e is s's immediate successor.
                let mut succ = s.to_vec();
                succ.push(0);
                e.as_ref() <= succ.as_slice()
            }
        }
    }
}

/// The smallest key greater than every key starting with `prefix`, or `None`
/// when there is none (empty prefix or all `0xff`).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// A set of rows: single keys plus ranges. An empty set (no keys, no ranges)
/// means the whole table, as in Bigtable v2.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RowSet {
    pub keys: Vec<Bytes>,
    pub ranges: Vec<RowRange>,
}

impl RowSet {
    /// The whole table.
    pub fn all() -> RowSet {
        RowSet::default()
    }

    pub fn from_keys<K: Into<Bytes>>(keys: impl IntoIterator<Item = K>) -> RowSet {
        RowSet {
            keys: keys.into_iter().map(Into::into).collect(),
            ranges: Vec::new(),
        }
    }

    pub fn from_range(range: RowRange) -> RowSet {
        RowSet {
            keys: Vec::new(),
            ranges: vec![range],
        }
    }

    pub fn from_ranges(ranges: Vec<RowRange>) -> RowSet {
        RowSet {
            keys: Vec::new(),
            ranges,
        }
    }

    /// True when the set means "every row".
    pub fn is_all(&self) -> bool {
        self.keys.is_empty() && self.ranges.is_empty()
    }

    /// True when `key` is in the set.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.is_all()
            || self.keys.iter().any(|k| k.as_ref() == key)
            || self.ranges.iter().any(|r| r.contains(key))
    }
}

/// A `ReadRows` request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReadRowsRequest {
    pub rows: RowSet,
    pub filter: Option<RowFilter>,
    /// Stop after this many rows (`None`, or `Some(0)` as on the wire: no
    /// limit).
    pub rows_limit: Option<u64>,
    /// Return rows in descending key order.
    pub reversed: bool,
}

impl ReadRowsRequest {
    /// Read every row of the table.
    pub fn all() -> ReadRowsRequest {
        ReadRowsRequest::default()
    }

    pub fn new(rows: RowSet) -> ReadRowsRequest {
        ReadRowsRequest {
            rows,
            ..ReadRowsRequest::default()
        }
    }

    pub fn with_filter(mut self, filter: RowFilter) -> ReadRowsRequest {
        self.filter = Some(filter);
        self
    }

    pub fn with_limit(mut self, rows_limit: u64) -> ReadRowsRequest {
        self.rows_limit = Some(rows_limit);
        self
    }

    pub fn reversed(mut self, reversed: bool) -> ReadRowsRequest {
        self.reversed = reversed;
        self
    }
}
