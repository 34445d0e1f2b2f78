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
//! with its length, timestamp u64 BE) are still read; every write stores
//! [`FORMAT`].

use affinity_model::{Cell, Error, Result};

use crate::meta::TableMeta;

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

/// Encodes a row's cells, given in canonical order, into a buffer.
pub(crate) struct RowWriter<'o> {
    out: &'o mut Vec<u8>,
    previous_qualifier: Vec<u8>,
    previous_ts: i64,
}

impl<'o> RowWriter<'o> {
    /// Start a row in `out` (cleared first).
    pub fn new(out: &'o mut Vec<u8>) -> RowWriter<'o> {
        out.clear();
        out.push(FORMAT);
        RowWriter {
            out,
            previous_qualifier: Vec::new(),
            previous_ts: 0,
        }
    }

    /// Append a cell copied from a stored row: `head` its stored bytes up
    /// to its value, as [`RowCursor::cell_head`] gives them, and `cell` as
    /// the cursor read it. The caller vouches that the cell written last is
    /// the one that preceded it in its row (so its prefix and timestamp
    /// delta hold here too).
    pub fn put_copied(&mut self, head: &[u8], cell: &RawCell<'_>, value: &[u8]) {
        self.out.extend_from_slice(head);
        self.out.extend_from_slice(value);
        self.previous_qualifier.truncate(cell.shared);
        self.previous_qualifier.extend_from_slice(cell.suffix);
        self.previous_ts = cell.timestamp_micros;
    }

    /// Append one cell.
    pub fn put(&mut self, family_id: u32, qualifier: &[u8], ts: i64, value: &[u8]) {
        let shared = common_prefix(&self.previous_qualifier, qualifier);
        let suffix = &qualifier[shared..];
        put_varint(self.out, u64::from(family_id));
        put_varint(self.out, shared as u64);
        put_varint(self.out, suffix.len() as u64);
        self.out.extend_from_slice(suffix);
        put_varint(self.out, zigzag(ts.wrapping_sub(self.previous_ts)));
        put_varint(self.out, value.len() as u64);
        self.out.extend_from_slice(value);
        self.previous_qualifier.truncate(shared);
        self.previous_qualifier.extend_from_slice(suffix);
        self.previous_ts = ts;
    }
}

/// Encode a row's cells (canonical order, families live in `meta`) into
/// `out` (cleared first).
pub(crate) fn encode_row(out: &mut Vec<u8>, meta: &TableMeta, cells: &[Cell]) -> Result<()> {
    let mut writer = RowWriter::new(out);
    for cell in cells {
        let id = meta
            .family_id(&cell.family)
            .ok_or_else(|| Error::Internal(format!("family {:?} has no id", cell.family)))?;
        writer.put(id, &cell.qualifier, cell.timestamp_micros, &cell.value);
    }
    Ok(())
}

/// One stored cell, as [`RowCursor::next_cell`] shows it. Its whole
/// qualifier is [`RowCursor::qualifier`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawCell<'a> {
    pub family_id: u32,
    /// The qualifier as stored: the first `shared` bytes of the previous
    /// cell's, then `suffix` (`shared` is 0 in a plain row).
    pub shared: usize,
    pub suffix: &'a [u8],
    /// The suffix's first 16 bytes as a big-endian number, zero past its
    /// end: two suffixes of one length up to 16 are equal exactly when
    /// their words are.
    pub suffix_word: u128,
    /// True when the cell is in the same column (family and qualifier) as
    /// the one before it in the row.
    pub same_column: bool,
    pub timestamp_micros: i64,
    pub value: &'a [u8],
}

impl<'a> RawCell<'a> {
    /// The qualifier as a slice of the row's bytes, when it is stored
    /// whole (`shared == 0`).
    pub fn qualifier_in_row(&self) -> Option<&'a [u8]> {
        (self.shared == 0).then_some(self.suffix)
    }
}

/// The buffers of a [`RowCursor`], kept from row to row by a reader of
/// many rows ([`row_cursor_with`], [`RowCursor::into_buffers`]).
#[derive(Default)]
pub(crate) struct CursorBuffers {
    qualifier: Vec<u8>,
}

/// Walks the cells of a stored row value, in stored order. Qualifiers are
/// rebuilt only when asked for ([`RowCursor::qualifier`]): a reader that
/// recognises a cell's column from its suffix never pays for it.
pub(crate) struct RowCursor<'a> {
    row: &'a [u8],
    /// Where the next cell starts in `row`.
    at: usize,
    plain: bool,
    failed: bool,
    /// `buffers.qualifier` is the qualifier of the cell before the one
    /// starting at `rebuilt`.
    buffers: CursorBuffers,
    rebuilt: usize,
    /// Where the last cell stored with its whole qualifier starts.
    whole_from: usize,
    /// The last cell's qualifier length.
    qualifier_len: usize,
    /// The last cell's qualifier (plain rows: a slice of the row).
    plain_previous: Option<&'a [u8]>,
    previous_family: Option<u32>,
    previous_ts: i64,
    /// Where the last cell starts, and its stored qualifier: shared
    /// length and suffix range.
    cell_start: usize,
    cell_shared: usize,
    cell_suffix: (usize, usize),
}

/// Walk the cells of a stored row value.
pub(crate) fn row_cursor(value: &[u8]) -> RowCursor<'_> {
    row_cursor_with(value, CursorBuffers::default())
}

/// [`row_cursor`] with buffers a cursor of an earlier row handed back.
pub(crate) fn row_cursor_with(value: &[u8], mut buffers: CursorBuffers) -> RowCursor<'_> {
    let (plain, failed) = match value.first() {
        Some(&FORMAT) => (false, false),
        Some(&PLAIN_FORMAT) => (true, false),
        _ => (false, true),
    };
    buffers.qualifier.clear();
    RowCursor {
        row: value,
        at: 1,
        plain,
        failed,
        buffers,
        rebuilt: 1,
        whole_from: 1,
        qualifier_len: 0,
        plain_previous: None,
        previous_family: None,
        previous_ts: 0,
        cell_start: 1,
        cell_shared: 0,
        cell_suffix: (1, 1),
    }
}

/// The error for a stored row that does not decode.
pub(crate) fn corrupt_row(key: &[u8]) -> Error {
    Error::Storage(format!(
        "corrupt stored row {:?}",
        String::from_utf8_lossy(key)
    ))
}

/// One varint of `row` at `*at`, moving `*at` past it.
#[inline(always)]
fn varint_at(row: &[u8], at: &mut usize) -> Option<u64> {
    let mut rest = row.get(*at..)?;
    let n = take_varint(&mut rest)?;
    *at = row.len() - rest.len();
    Some(n)
}

/// The `len` bytes of `row` at `*at`, as a range, moving `*at` past them.
#[inline(always)]
fn span_at(row: &[u8], at: &mut usize, len: u64) -> Option<(usize, usize)> {
    let start = *at;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    if end > row.len() {
        return None;
    }
    *at = end;
    Some((start, end))
}

/// The first 16 bytes of `row[start..end]` as a big-endian number, zero
/// past `end`: one unaligned load where the row goes on 16 bytes (nearly
/// always: a value follows), no loop.
#[inline(always)]
fn word_at(row: &[u8], start: usize, end: usize) -> u128 {
    let len = end - start;
    match row.get(start..).and_then(<[u8]>::first_chunk::<16>) {
        Some(bytes) => {
            let word = u128::from_be_bytes(*bytes);
            match len {
                0 => 0,
                1..16 => word & (u128::MAX << (8 * (16 - len))),
                _ => word,
            }
        }
        None => {
            let mut bytes = [0u8; 16];
            let n = len.min(16);
            bytes[..n].copy_from_slice(&row[start..start + n]);
            u128::from_be_bytes(bytes)
        }
    }
}

/// The stored qualifier of the compressed cell at `at` (shared length,
/// suffix range) and where the next cell starts.
fn stored_qualifier_at(row: &[u8], mut at: usize) -> Option<(usize, (usize, usize), usize)> {
    varint_at(row, &mut at)?;
    let shared = usize::try_from(varint_at(row, &mut at)?).ok()?;
    let slen = varint_at(row, &mut at)?;
    let suffix = span_at(row, &mut at, slen)?;
    varint_at(row, &mut at)?;
    let vlen = varint_at(row, &mut at)?;
    span_at(row, &mut at, vlen)?;
    Some((shared, suffix, at))
}

impl<'a> RowCursor<'a> {
    #[inline(always)]
    fn varint(&mut self) -> Option<u64> {
        varint_at(self.row, &mut self.at)
    }

    #[inline(always)]
    fn span(&mut self, len: u64) -> Option<(usize, usize)> {
        span_at(self.row, &mut self.at, len)
    }

    /// The next cell; `None` at the end of the row or where it stops
    /// decoding (then [`RowCursor::failed`] says so).
    #[inline(always)]
    pub fn next_cell(&mut self) -> Option<RawCell<'a>> {
        if self.at >= self.row.len() || self.failed {
            return None;
        }
        let cell = if self.plain {
            self.plain_cell()
        } else {
            self.compressed_cell()
        };
        if cell.is_none() {
            self.failed = true;
        }
        cell
    }

    /// The whole qualifier of the cell [`RowCursor::next_cell`] returned
    /// last (rebuilt from the cells since the last one stored whole, or
    /// since the last rebuild).
    pub fn qualifier(&mut self) -> &[u8] {
        if self.plain {
            return self.plain_previous.unwrap_or_default();
        }
        let q = &mut self.buffers.qualifier;
        if self.rebuilt == self.cell_start && self.cell_start < self.at {
            // Rebuilt up to the previous cell: add this one's suffix.
            q.truncate(self.cell_shared);
            q.extend_from_slice(&self.row[self.cell_suffix.0..self.cell_suffix.1]);
            self.rebuilt = self.at;
            return q;
        }
        let mut at = self.rebuilt.max(self.whole_from);
        while at < self.at {
            // Every cell before `self.at` decoded once already.
            let Some((shared, (start, end), next)) = stored_qualifier_at(self.row, at) else {
                break;
            };
            q.truncate(shared);
            q.extend_from_slice(&self.row[start..end]);
            at = next;
        }
        self.rebuilt = self.at;
        q
    }

    /// This cursor's buffers, for the cursor of a next row.
    pub fn into_buffers(self) -> CursorBuffers {
        self.buffers
    }

    #[inline(always)]
    fn compressed_cell(&mut self) -> Option<RawCell<'a>> {
        let cell_start = self.at;
        self.cell_start = cell_start;
        let family_id = u32::try_from(self.varint()?).ok()?;
        let shared = usize::try_from(self.varint()?).ok()?;
        let slen = self.varint()?;
        let (start, end) = self.span(slen)?;
        let suffix = &self.row[start..end];
        self.cell_shared = shared;
        self.cell_suffix = (start, end);
        let previous_len = self.qualifier_len;
        if shared > previous_len {
            return None;
        }
        // The writer shares the longest common prefix, so a qualifier
        // equal to the previous one is all shared, and one sharing less
        // differs from it.
        let same_column =
            shared == previous_len && suffix.is_empty() && self.previous_family == Some(family_id);
        if shared == 0 {
            self.whole_from = cell_start;
        }
        self.qualifier_len = shared + suffix.len();
        let ts = self.previous_ts.wrapping_add(unzigzag(self.varint()?));
        if ts < 0 {
            return None;
        }
        let vlen = self.varint()?;
        let (vstart, vend) = self.span(vlen)?;
        self.previous_family = Some(family_id);
        self.previous_ts = ts;
        Some(RawCell {
            family_id,
            shared,
            suffix,
            suffix_word: word_at(self.row, start, end),
            same_column,
            timestamp_micros: ts,
            value: &self.row[vstart..vend],
        })
    }

    fn plain_cell(&mut self) -> Option<RawCell<'a>> {
        let family_id = u32::try_from(self.varint()?).ok()?;
        let qlen = self.varint()?;
        let (qstart, qend) = self.span(qlen)?;
        let qualifier = &self.row[qstart..qend];
        let (ts, _) = self.row.get(self.at..)?.split_first_chunk::<8>()?;
        let ts = u64::from_be_bytes(*ts) as i64;
        self.at += 8;
        let vlen = self.varint()?;
        let (vstart, vend) = self.span(vlen)?;
        let same_column =
            self.previous_family == Some(family_id) && self.plain_previous == Some(qualifier);
        self.plain_previous = Some(qualifier);
        self.previous_family = Some(family_id);
        self.previous_ts = ts;
        Some(RawCell {
            family_id,
            shared: 0,
            suffix: qualifier,
            suffix_word: word_at(self.row, qstart, qend),
            same_column,
            timestamp_micros: ts,
            value: &self.row[vstart..vend],
        })
    }

    /// The stored bytes of the last cell up to its value (family,
    /// qualifier, timestamp, value length): valid as they are right after
    /// the cell before it, as a row writer writes it. `None` in a plain
    /// row, whose cells are stored another way.
    pub fn cell_head(&self, cell: &RawCell<'a>) -> Option<&'a [u8]> {
        if self.plain {
            return None;
        }
        let value_start = cell.value.as_ptr() as usize - self.row.as_ptr() as usize;
        self.row.get(self.cell_start..value_start)
    }

    /// True when the row did not decode to its end (a corrupt value).
    pub fn failed(&self) -> bool {
        self.failed
    }
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

    proptest! {
        #[test]
        fn cells_round_trip(input in proptest::collection::vec(cell_strategy(), 0..12)) {
            let (out, failed) = cells(&row(&input));
            prop_assert!(!failed);
            prop_assert_eq!(out, with_flags(&input));
        }

        #[test]
        fn plain_rows_still_decode(input in proptest::collection::vec(cell_strategy(), 0..12)) {
            let (out, failed) = cells(&plain_row(&input));
            prop_assert!(!failed);
            prop_assert_eq!(out, with_flags(&input));
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
}
