//! Reading a stored row: [`RowCursor`] walks its cells in stored order
//! (both formats), rebuilding qualifiers only when asked.

use super::{take_varint, unzigzag, FORMAT, PLAIN_FORMAT};
use crate::meta::TableMeta;

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
    /// Where the last cell's qualifier is in the row, as runs: each
    /// `(position in the qualifier, offset in the row)` starts a run
    /// that goes on to the next one's position (the last one to the
    /// qualifier's end). The order check reads the one byte it needs
    /// from them without rebuilding the qualifier.
    runs: Vec<(usize, usize)>,
    /// Family ids from 64 on the row had (below 64: a bit mask).
    families: Vec<u32>,
}

/// Walks the cells of a stored row value, in stored order. Qualifiers are
/// rebuilt only when asked for ([`RowCursor::qualifier`]): a reader that
/// recognises a cell's column from its suffix never pays for it.
///
/// Cells must come in canonical order: each family's cells together, the
/// table's families by name ([`RowCursor::ranked`]: without the table's
/// metadata, only together), and within a family qualifiers rising and
/// a column's timestamps falling, each once. A row that breaks it stops
/// decoding there, as a damaged one does: every reader (filters, GC,
/// merges) relies on the order, and would disagree on such a row.
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
    /// The table whose family order the row must follow, and the rank of
    /// the last family of it the row had.
    meta: Option<&'a TableMeta>,
    rank: Option<u32>,
    /// Family ids below 64 the row had.
    families_low: u64,
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
    buffers.runs.clear();
    buffers.families.clear();
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
        meta: None,
        rank: None,
        families_low: 0,
        cell_start: 1,
        cell_shared: 0,
        cell_suffix: (1, 1),
    }
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
    /// This cursor checking the order of families too: by name, as in
    /// `meta` (families it does not have, dropped ones, anywhere).
    pub fn ranked(mut self, meta: &'a TableMeta) -> RowCursor<'a> {
        self.meta = Some(meta);
        self
    }

    /// Whether a cell of `family_id`, after a cell of another family (or
    /// none), keeps the row in order: a family the row had already, or
    /// one of a lower rank than the last, breaks it.
    #[cold]
    fn family_starts(&mut self, family_id: u32) -> bool {
        let seen = match 1u64.checked_shl(family_id) {
            Some(bit) => {
                let seen = self.families_low & bit != 0;
                self.families_low |= bit;
                seen
            }
            None => {
                let seen = self.buffers.families.contains(&family_id);
                self.buffers.families.push(family_id);
                seen
            }
        };
        if seen {
            return false;
        }
        if let Some(family) = self.meta.and_then(|m| m.family(family_id)) {
            if self.rank.is_some_and(|r| family.rank < r) {
                return false;
            }
            self.rank = Some(family.rank);
        }
        true
    }

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
        // The previous qualifier's byte where this one's suffix starts
        // (none when this one only adds to it), and this one's runs.
        let runs = &mut self.buffers.runs;
        while runs.last().is_some_and(|&(position, _)| position > shared) {
            runs.pop();
        }
        let replaced = match runs.last() {
            Some(&(position, offset)) if shared < previous_len => {
                Some(self.row[offset + shared - position])
            }
            _ => None,
        };
        if runs.last().is_some_and(|&(position, _)| position == shared) {
            runs.pop();
        }
        if !suffix.is_empty() {
            runs.push((shared, start));
        }
        // The writer shares the longest common prefix, so a qualifier
        // equal to the previous one is all shared, and one sharing less
        // differs from it where its suffix starts: in one family, by
        // rising there.
        let same_family = self.previous_family == Some(family_id);
        if !same_family && !self.family_starts(family_id) {
            return None;
        }
        let same_column = shared == previous_len && suffix.is_empty() && same_family;
        if same_family {
            if let Some(replaced) = replaced {
                if suffix.first().is_none_or(|&b| b <= replaced) {
                    return None;
                }
            }
        }
        if shared == 0 {
            self.whole_from = cell_start;
        }
        self.qualifier_len = shared + suffix.len();
        let ts = self.previous_ts.wrapping_add(unzigzag(self.varint()?));
        if ts < 0 || (same_column && ts >= self.previous_ts) {
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
        // As in the current format: no stored cell has a negative
        // timestamp (a damaged one would not survive a rewrite).
        if ts < 0 {
            return None;
        }
        self.at += 8;
        let vlen = self.varint()?;
        let (vstart, vend) = self.span(vlen)?;
        let same_family = self.previous_family == Some(family_id);
        if !same_family && !self.family_starts(family_id) {
            return None;
        }
        let same_column = same_family && self.plain_previous == Some(qualifier);
        // Canonical order in a family, as in the current format.
        if same_family
            && (self.plain_previous.is_some_and(|p| qualifier < p)
                || (same_column && ts >= self.previous_ts))
        {
            return None;
        }
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
