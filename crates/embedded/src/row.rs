//! The on-disk encoding of a row: one RocksDB key per row.
//!
//! ```text
//! RocksDB key   = row key (raw bytes: RocksDB's bytewise order is Bigtable's)
//! RocksDB value = FORMAT u8 | cell*
//! cell          = family id varint | qualifier length varint | qualifier
//!               | timestamp u64 BE | value length varint | value
//! ```
//!
//! Cells are stored in canonical order (family *name*, qualifier,
//! timestamp descending), so a decoded row needs no sorting. A cell names
//! its family by id: ids are never reused, so the cells of a dropped
//! family (or of a family dropped and created again) are recognised and
//! skipped until GC rewrites the row. Varints are LEB128.

use affinity_model::{Cell, Error, Result};

use crate::meta::TableMeta;

/// First byte of every stored row.
pub(crate) const FORMAT: u8 = 2;

/// One stored cell, borrowed from the row's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawCell<'a> {
    pub family_id: u32,
    pub qualifier: &'a [u8],
    pub timestamp_micros: i64,
    pub value: &'a [u8],
}

impl RawCell<'_> {
    /// True when both cells are in the same column.
    pub fn same_column(&self, other: &RawCell<'_>) -> bool {
        self.family_id == other.family_id && self.qualifier == other.qualifier
    }
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Read one LEB128 varint off the front of `rest`.
pub(crate) fn take_varint(rest: &mut &[u8]) -> Option<u64> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, tail) = rest.split_first()?;
        *rest = tail;
        n |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(n);
        }
    }
    None
}

/// Append one cell.
pub(crate) fn put_cell(out: &mut Vec<u8>, family_id: u32, qualifier: &[u8], ts: i64, value: &[u8]) {
    put_varint(out, u64::from(family_id));
    put_varint(out, qualifier.len() as u64);
    out.extend_from_slice(qualifier);
    // Timestamps are validated >= 0.
    out.extend_from_slice(&(ts as u64).to_be_bytes());
    put_varint(out, value.len() as u64);
    out.extend_from_slice(value);
}

/// Encode a row's cells (canonical order, families live in `meta`) into
/// `out` (cleared first).
pub(crate) fn encode_row(out: &mut Vec<u8>, meta: &TableMeta, cells: &[Cell]) -> Result<()> {
    out.clear();
    out.push(FORMAT);
    for cell in cells {
        let id = meta
            .family_id(&cell.family)
            .ok_or_else(|| Error::Internal(format!("family {:?} has no id", cell.family)))?;
        put_cell(out, id, &cell.qualifier, cell.timestamp_micros, &cell.value);
    }
    Ok(())
}

/// The cells of a stored row, in stored order.
pub(crate) struct RawCells<'a> {
    rest: &'a [u8],
    failed: bool,
}

/// Iterate the cells of a stored row value.
pub(crate) fn raw_cells(value: &[u8]) -> RawCells<'_> {
    match value.split_first() {
        Some((&FORMAT, rest)) => RawCells {
            rest,
            failed: false,
        },
        _ => RawCells {
            rest: &[],
            failed: true,
        },
    }
}

/// The error for a stored row that does not decode.
pub(crate) fn corrupt_row(key: &[u8]) -> Error {
    Error::Storage(format!(
        "corrupt stored row {:?}",
        String::from_utf8_lossy(key)
    ))
}

impl<'a> RawCells<'a> {
    fn varint(&mut self) -> Option<u64> {
        take_varint(&mut self.rest)
    }

    fn bytes(&mut self, len: u64) -> Option<&'a [u8]> {
        let len = usize::try_from(len).ok()?;
        let (out, rest) = self.rest.split_at_checked(len)?;
        self.rest = rest;
        Some(out)
    }

    fn cell(&mut self) -> Option<RawCell<'a>> {
        let family_id = u32::try_from(self.varint()?).ok()?;
        let qlen = self.varint()?;
        let qualifier = self.bytes(qlen)?;
        let (ts, rest) = self.rest.split_first_chunk::<8>()?;
        self.rest = rest;
        let timestamp_micros = u64::from_be_bytes(*ts) as i64;
        let vlen = self.varint()?;
        let value = self.bytes(vlen)?;
        Some(RawCell {
            family_id,
            qualifier,
            timestamp_micros,
            value,
        })
    }

    /// True when the row did not decode to its end (a corrupt value).
    pub fn failed(&self) -> bool {
        self.failed
    }
}

impl<'a> Iterator for RawCells<'a> {
    type Item = RawCell<'a>;

    fn next(&mut self) -> Option<RawCell<'a>> {
        if self.rest.is_empty() || self.failed {
            return None;
        }
        let cell = self.cell();
        if cell.is_none() {
            self.failed = true;
        }
        cell
    }
}

/// The number of cells in a stored row value (hidden ones included).
pub(crate) fn cell_count(value: &[u8]) -> u64 {
    raw_cells(value).count() as u64
}

/// The exclusive end of a row key's single-row range: the smallest key
/// sorting after it.
pub(crate) fn successor(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 1);
    out.extend_from_slice(key);
    out.push(0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A decoded cell: family id, qualifier, timestamp, value.
    type Owned = (u32, Vec<u8>, i64, Vec<u8>);

    fn cells(value: &[u8]) -> (Vec<Owned>, bool) {
        let mut it = raw_cells(value);
        let out = it
            .by_ref()
            .map(|c| {
                (
                    c.family_id,
                    c.qualifier.to_vec(),
                    c.timestamp_micros,
                    c.value.to_vec(),
                )
            })
            .collect();
        (out, it.failed())
    }

    proptest! {
        #[test]
        fn cells_round_trip(
            input in proptest::collection::vec(
                (0u32..1_000_000, proptest::collection::vec(any::<u8>(), 0..200),
                 0i64..i64::MAX, proptest::collection::vec(any::<u8>(), 0..300)),
                0..8,
            )
        ) {
            let mut value = vec![FORMAT];
            for (f, q, ts, v) in &input {
                put_cell(&mut value, *f, q, *ts, v);
            }
            let (out, failed) = cells(&value);
            prop_assert!(!failed);
            prop_assert_eq!(out, input);
        }

        #[test]
        fn truncated_rows_fail(cut in 1usize..30) {
            let mut value = vec![FORMAT];
            put_cell(&mut value, 300, b"qualifier", 5_000, b"some value");
            let cut = cut.min(value.len() - 1);
            let (_, failed) = cells(&value[..value.len() - cut]);
            prop_assert!(failed);
        }
    }

    #[test]
    fn unknown_format_fails() {
        assert!(cells(b"\x01abc").1);
        assert!(cells(b"").1);
        assert_eq!(cells(&[FORMAT]), (Vec::new(), false));
    }
}
