//! Writing a stored row: [`RowWriter`] encodes cells given in canonical
//! order; [`GcRowWriter`] leaves out on the way the cells GC hides.

use affinity_model::{Cell, Result};

use super::{common_prefix, put_varint, zigzag, RawCell, FORMAT};
use crate::meta::TableMeta;

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
    /// to its value, as [`super::RowCursor::cell_head`] gives them, and `cell` as
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
        let id = meta.known_family_id(&cell.family)?;
        writer.put(id, &cell.qualifier, cell.timestamp_micros, &cell.value);
    }
    Ok(())
}

/// Writes the cells of a row in canonical order, leaving out those GC
/// hides at `clock` (the latest write's: hidden then, hidden at every
/// later read, since a row's versions only pile up and ages only grow).
pub(crate) struct GcRowWriter<'m, 'o> {
    meta: &'m TableMeta,
    clock: i64,
    /// The encoder, for cells the caller admitted itself
    /// ([`GcRowWriter::admit_known`]).
    pub row: RowWriter<'o>,
    /// The column of the last cell seen (family, qualifier), and its
    /// version number.
    column_family: Option<u32>,
    column: Vec<u8>,
    version: usize,
}

impl<'m, 'o> GcRowWriter<'m, 'o> {
    /// A writer of a row collected at `clock` into `out` (cleared first).
    pub fn new(meta: &'m TableMeta, clock: i64, out: &'o mut Vec<u8>) -> Self {
        GcRowWriter {
            meta,
            clock,
            row: RowWriter::new(out),
            column_family: None,
            column: Vec::new(),
            version: 0,
        }
    }

    /// Append one cell unless GC hides it.
    #[inline]
    pub fn put(&mut self, family_id: u32, qualifier: &[u8], ts: i64, value: &[u8]) {
        if self.admit(family_id, qualifier, ts) {
            self.row.put(family_id, qualifier, ts, value);
        }
    }

    /// Whether a cell of `family_id` and `qualifier` is in the column of the
    /// cell before it.
    #[inline]
    pub fn same_column(&self, family_id: u32, qualifier: &[u8]) -> bool {
        self.column_family == Some(family_id) && self.column.as_slice() == qualifier
    }

    /// Count the next cell's version in its column; true when GC keeps
    /// it (the caller then writes it).
    #[inline]
    fn admit(&mut self, family_id: u32, qualifier: &[u8], ts: i64) -> bool {
        let same = self.same_column(family_id, qualifier);
        self.admit_known(family_id, qualifier, same, ts)
    }

    /// [`GcRowWriter::admit`] when the caller knows whether the cell is in
    /// the column of the one before it (`same`).
    #[inline]
    pub fn admit_known(&mut self, family_id: u32, qualifier: &[u8], same: bool, ts: i64) -> bool {
        if same {
            self.version += 1;
        } else {
            self.version = 0;
            self.column_family = Some(family_id);
            self.column.clear();
            self.column.extend_from_slice(qualifier);
        }
        let Some(family) = self.meta.family(family_id) else {
            return false;
        };
        !affinity_model::gc::deletes(&family.gc_rule, self.version, ts, self.clock)
    }
}
