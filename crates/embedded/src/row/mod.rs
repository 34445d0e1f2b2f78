//! The on-disk encoding of a row: one RocksDB key per row.
//!
//! ```text
//! RocksDB key   = row key (raw bytes: RocksDB's bytewise order is Bigtable's)
//! RocksDB value = FORMAT u8 | cell*
//! cell          = family id varint
//!               | shared varint | suffix length varint | suffix
//!               | timestamp delta varint (zigzag)
//!               | value length varint | value
//! ```
//!
//! Cells are stored in canonical order (family *name*, qualifier,
//! timestamp descending), so a decoded row needs no sorting. A cell names
//! its family by id: ids are never reused, so the cells of a dropped
//! family (or of a family dropped and created again) are recognised and
//! skipped until GC rewrites the row. Varints are LEB128.
//!
//! A cell's qualifier is the first `shared` bytes of the previous cell's
//! qualifier followed by `suffix`; the writer always shares the longest
//! common prefix, which readers rely on: a cell is in the previous cell's
//! column exactly when it shares all of its qualifier and adds nothing
//! (and has its family). Its timestamp is the previous cell's plus the
//! delta (the first cell's is relative to 0). Sorted qualifiers share long
//! prefixes: the cells of a wide-schema event all start with
//! `type,name,` and carry one timestamp, so a 20-facet event row is less
//! than half the size it is with whole qualifiers and timestamps, and a
//! reader can tell that a cell repeats the previous row's column from its
//! short suffix alone.
//!
//! Rows written before this encoding ([`PLAIN_FORMAT`]: whole qualifier
//! with its length, timestamp u64 BE) are still read (a store the old
//! code wrote is a fixture of `tests/old_formats.rs`); every write stores
//! [`FORMAT`]. `docs/design/storage.md` has both layouts byte by byte.
//!
//! - [`RowWriter`] encodes cells given in canonical order, and
//!   [`GcRowWriter`] leaves out on the way the cells GC hides at a clock
//!   (`writer.rs`);
//! - [`encode_created_row`] encodes the row a write of `SetCell`s makes
//!   of no row straight from its mutations (`created.rs`);
//! - [`RowCursor`] walks a stored row's cells (`cursor.rs`).

use std::cmp::Ordering;

use affinity_model::Error;

mod created;
mod cursor;
mod writer;

pub(crate) use created::encode_created_row;
pub(crate) use cursor::{row_cursor, row_cursor_with, CursorBuffers, RawCell, RowCursor};
pub(crate) use writer::{encode_row, GcRowWriter, RowWriter};

/// First byte of every stored row written now: prefix-compressed.
pub(crate) const FORMAT: u8 = 4;
/// First byte of rows written before prefix compression (read only):
/// `family id varint | qualifier length varint | qualifier | timestamp
/// u64 BE | value length varint | value` per cell.
pub(crate) const PLAIN_FORMAT: u8 = 2;

pub(crate) fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Read one LEB128 varint off the front of `rest`.
#[inline(always)]
pub(crate) fn take_varint(rest: &mut &[u8]) -> Option<u64> {
    // Nearly every varint of a row is one byte.
    if let Some((&b, tail)) = rest.split_first() {
        if b < 0x80 {
            *rest = tail;
            return Some(u64::from(b));
        }
    }
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

pub(crate) fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

pub(crate) fn unzigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

/// Length of the longest common prefix of `a` and `b`, eight bytes at a
/// time.
pub(crate) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while let (Some(x), Some(y)) = (a[i..n].first_chunk::<8>(), b[i..n].first_chunk::<8>()) {
        let diff = u64::from_be_bytes(*x) ^ u64::from_be_bytes(*y);
        if diff != 0 {
            return i + (diff.leading_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + a[i..n]
        .iter()
        .zip(&b[i..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// Where a cell goes in canonical order, without its family's name: the
/// family's rank among the table's families by name, the qualifier, the
/// timestamp (newest first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CellKey<'a> {
    pub rank: u32,
    pub qualifier: &'a [u8],
    pub timestamp_micros: i64,
}

impl Ord for CellKey<'_> {
    /// Canonical cell order, comparing qualifiers eight bytes at a time
    /// before `memcmp`: sorted qualifiers share long prefixes.
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank
            .cmp(&other.rank)
            .then_with(|| qualifier_order(self.qualifier, other.qualifier))
            .then_with(|| other.timestamp_micros.cmp(&self.timestamp_micros))
    }
}

impl PartialOrd for CellKey<'_> {
    #[inline]
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// `a.cmp(b)` for qualifiers: past their common prefix (found eight
/// bytes at a time), the first byte that differs or the shorter decides.
#[inline]
fn qualifier_order(a: &[u8], b: &[u8]) -> Ordering {
    let shared = common_prefix(a, b);
    match (a.get(shared), b.get(shared)) {
        (Some(x), Some(y)) => x.cmp(y),
        _ => a.len().cmp(&b.len()),
    }
}

/// The error for a stored row that does not decode.
pub(crate) fn corrupt_row(key: &[u8]) -> Error {
    Error::Storage(format!(
        "corrupt stored row {:?}",
        String::from_utf8_lossy(key)
    ))
}

/// The number of cells in a stored row value (hidden ones included).
pub(crate) fn cell_count(value: &[u8]) -> u64 {
    let mut cursor = row_cursor(value);
    let mut n = 0;
    while cursor.next_cell().is_some() {
        n += 1;
    }
    n
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

    /// The cells of a row, each with its same-column flag, and whether
    /// decoding failed.
    fn cells(value: &[u8]) -> (Vec<(Owned, bool)>, bool) {
        let mut cursor = row_cursor(value);
        let mut out = Vec::new();
        while let Some(c) = cursor.next_cell() {
            out.push((
                (
                    c.family_id,
                    cursor.qualifier().to_vec(),
                    c.timestamp_micros,
                    c.value.to_vec(),
                ),
                c.same_column,
            ));
        }
        (out, cursor.failed())
    }

    /// What the same-column flags must be.
    fn with_flags(input: &[Owned]) -> Vec<(Owned, bool)> {
        input
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let same = i > 0 && input[i - 1].0 == c.0 && input[i - 1].1 == c.1;
                (c.clone(), same)
            })
            .collect()
    }

    fn plain_row(input: &[Owned]) -> Vec<u8> {
        let mut value = vec![PLAIN_FORMAT];
        for (f, q, ts, v) in input {
            put_varint(&mut value, u64::from(*f));
            put_varint(&mut value, q.len() as u64);
            value.extend_from_slice(q);
            value.extend_from_slice(&(*ts as u64).to_be_bytes());
            put_varint(&mut value, v.len() as u64);
            value.extend_from_slice(v);
        }
        value
    }

    fn row(input: &[Owned]) -> Vec<u8> {
        let mut value = Vec::new();
        let mut writer = RowWriter::new(&mut value);
        for (f, q, ts, v) in input {
            writer.put(*f, q, *ts, v);
        }
        value
    }

    /// Cells from a few families and qualifiers, so columns repeat and
    /// qualifiers share prefixes.
    fn cell_strategy() -> impl Strategy<Value = Owned> {
        (
            0u32..3,
            proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), any::<u8>()], 0..6),
            prop_oneof![0i64..3, 0i64..i64::MAX],
            proptest::collection::vec(any::<u8>(), 0..40),
        )
    }

    /// `input` in canonical order within each family (families by id
    /// here), each column and time once.
    fn canonical(mut input: Vec<Owned>) -> Vec<Owned> {
        input.sort_by(|a, b| (a.0, &a.1, b.2).cmp(&(b.0, &b.1, a.2)));
        input.dedup_by(|a, b| (a.0, &a.1, a.2) == (b.0, &b.1, b.2));
        input
    }

    /// Whether each family's cells are together, each after the one
    /// before it in canonical order.
    fn in_order(input: &[Owned]) -> bool {
        let mut left = std::collections::BTreeSet::new();
        input.windows(2).all(|w| {
            let (a, b) = (&w[0], &w[1]);
            if a.0 == b.0 {
                return (&a.1, b.2) < (&b.1, a.2);
            }
            left.insert(a.0);
            !left.contains(&b.0)
        })
    }

    proptest! {
        #[test]
        fn cells_round_trip(input in proptest::collection::vec(cell_strategy(), 0..12)) {
            let input = canonical(input);
            let (out, failed) = cells(&row(&input));
            prop_assert!(!failed);
            prop_assert_eq!(out, with_flags(&input));
        }

        #[test]
        fn plain_rows_still_decode(input in proptest::collection::vec(cell_strategy(), 0..12)) {
            let input = canonical(input);
            let (out, failed) = cells(&plain_row(&input));
            prop_assert!(!failed);
            prop_assert_eq!(out, with_flags(&input));
        }

        /// Every reader relies on the order (filters, GC's version counts,
        /// merges), so a row out of it decodes in neither format.
        #[test]
        fn rows_out_of_order_fail(
            input in proptest::collection::vec(cell_strategy(), 0..12),
        ) {
            for encode in [row, plain_row] {
                let (out, failed) = cells(&encode(&input));
                prop_assert_eq!(failed, !in_order(&input));
                if !failed {
                    prop_assert_eq!(out, with_flags(&input));
                }
            }
        }

        #[test]
        fn truncated_rows_fail(cut in 1usize..30) {
            // Cut within the last cell (a cut at a cell boundary leaves a
            // shorter row that is whole).
            let first = (300, b"qualifier".to_vec(), 5_000, b"some value".to_vec());
            let second = (300, b"qualifies".to_vec(), 4_000, b"another value".to_vec());
            for encode in [row, plain_row] {
                let one = encode(std::slice::from_ref(&first)).len();
                let value = encode(&[first.clone(), second.clone()]);
                let cut = cut.min(value.len() - one - 1);
                let (_, failed) = cells(&value[..value.len() - cut]);
                prop_assert!(failed);
            }
        }
    }

    #[test]
    fn sorted_qualifiers_and_one_timestamp_are_stored_once() {
        let ts = 1_700_000_000_123_000;
        let input: Vec<Owned> = ["brand", "category", "color", "material", "size"]
            .iter()
            .map(|f| {
                (
                    0,
                    format!("view,Product Viewed,{f}").into_bytes(),
                    ts,
                    b":,x,1".to_vec(),
                )
            })
            .collect();
        let compressed = row(&input);
        let plain = plain_row(&input);
        assert!(
            compressed.len() * 100 < plain.len() * 55,
            "{} vs {}",
            compressed.len(),
            plain.len()
        );
        let mut cursor = row_cursor(&compressed);
        let first = cursor.next_cell().expect("a cell");
        assert_eq!(
            first.qualifier_in_row(),
            Some(&b"view,Product Viewed,brand"[..])
        );
        let second = cursor.next_cell().expect("a cell");
        assert_eq!(second.suffix, b"category");
        assert_eq!(second.qualifier_in_row(), None);
        assert_eq!(cursor.qualifier(), b"view,Product Viewed,category");
    }

    #[test]
    fn unknown_format_and_bad_prefixes_fail() {
        assert!(cells(b"\x01abc").1);
        assert!(cells(b"").1);
        assert_eq!(cells(&[FORMAT]), (Vec::new(), false));
        assert_eq!(cells(&[PLAIN_FORMAT]), (Vec::new(), false));
        // A first cell sharing bytes of a previous qualifier it has not.
        assert!(cells(&[FORMAT, 0, 2, 1, b'q', 0, 0]).1);
        // A timestamp before the epoch.
        assert!(cells(&[FORMAT, 0, 0, 1, b'q', 1, 0]).1);
    }

    /// Found by fuzzing: a damaged row with one column's timestamps
    /// rising decoded, and a read of its columns (cells in stored order)
    /// differed from the same filter on the whole row (which merges them
    /// into canonical order).
    #[test]
    fn rising_timestamps_or_falling_qualifiers_are_corrupt() {
        let at = |q: &[u8], ts| (0, q.to_vec(), ts, Vec::new());
        let cases = [
            vec![at(b"x", 40), at(b"x", 80)],
            vec![at(b"x", 40), at(b"x", 40)],
            vec![at(b"xb", 1), at(b"xa", 1)],
            vec![at(b"x", 1), at(b"", 1)],
            vec![at(b"x", 1), at(b"xab", 1), at(b"xa", 1)],
        ];
        for input in cases {
            for value in [row(&input), plain_row(&input)] {
                assert!(cells(&value).1, "{input:?}");
            }
        }
        // Another family starts over; a family does not come back.
        let other = vec![at(b"y", 40), (1, b"x".to_vec(), 80, Vec::new())];
        assert!(!cells(&row(&other)).1);
        let back = vec![at(b"x", 40), (7, b"".to_vec(), 1, Vec::new()), at(b"", 1)];
        for value in [row(&back), plain_row(&back)] {
            assert!(cells(&value).1);
        }
    }

    /// Found by fuzzing: a damaged plain row with a negative timestamp
    /// decoded, and rewriting it in the current format (GC, a merge) gave
    /// a row that does not decode. Both formats refuse it now.
    #[test]
    fn a_negative_timestamp_is_corrupt_in_either_format() {
        let input = vec![(0, b"q".to_vec(), -5, b"v".to_vec())];
        for value in [plain_row(&input), row(&input)] {
            let (out, failed) = cells(&value);
            assert!(failed, "{out:?}");
        }
    }
}
