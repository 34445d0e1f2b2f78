//! Assembling rows from cell keys and values, with GC visibility applied.
//!
//! A row's key, qualifiers and values are copied into one buffer that
//! becomes a single `Bytes`; every cell's qualifier and value are slices of
//! it, so decoding allocates per row, not per cell (except the family name,
//! which `Cell` owns as a `String`).

use std::ops::Range;

use affinity_model::eval::CellPrefilter;
use affinity_model::gc::deletes;
use affinity_model::{Bytes, Cell, Error, Result, Row};

use crate::keys::{decode_after_row, push_unescaped};
use crate::meta::TableMeta;

/// One decoded cell, its bytes held in the row buffer.
#[derive(Debug, Clone)]
struct Slot {
    family_id: u32,
    rank: u32,
    qualifier: Range<usize>,
    timestamp_micros: i64,
    value: Range<usize>,
}

/// Builds one row at a time; reuse it across rows to keep its scratch space.
pub(crate) struct RowBuilder {
    /// Escaped row key with terminator of the row being built.
    prefix: Vec<u8>,
    /// Row key, then qualifiers and values.
    buf: Vec<u8>,
    key_len: usize,
    slots: Vec<Slot>,
    /// Capacity to give the next row's buffer.
    capacity_hint: usize,
    /// Key prefix (everything but the timestamp) of the column of the last
    /// cell offered, and how many versions of it were offered before.
    column: Vec<u8>,
    version: usize,
}

/// What [`RowBuilder::push`] did with a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    Kept,
    /// Dropped unread: a version past its family's version cap. `run` is
    /// how many versions of its column were dropped so far.
    Hidden {
        run: usize,
    },
}

impl RowBuilder {
    pub fn new() -> RowBuilder {
        RowBuilder {
            prefix: Vec::new(),
            buf: Vec::new(),
            key_len: 0,
            slots: Vec::new(),
            capacity_hint: 256,
            column: Vec::new(),
            version: 0,
        }
    }

    /// Start a row with the given escaped, terminated row prefix.
    pub fn start(&mut self, prefix: &[u8]) {
        self.prefix.clear();
        self.prefix.extend_from_slice(prefix);
        if self.buf.capacity() == 0 {
            self.buf = Vec::with_capacity(self.capacity_hint);
        } else {
            // The previous row was invisible: reuse its buffer.
            self.buf.clear();
        }
        push_unescaped(&mut self.buf, &prefix[..prefix.len() - 2]);
        self.key_len = self.buf.len();
        self.slots.clear();
        self.column.clear();
        self.version = 0;
    }

    /// The key prefix of the current column (its cells' keys without the
    /// timestamp), if the last cell offered was read forwards.
    pub fn column(&self) -> &[u8] {
        &self.column
    }

    /// True when `key` belongs to the row being built.
    pub fn owns(&self, key: &[u8]) -> bool {
        key.starts_with(&self.prefix)
    }

    /// Add a cell of the current row. Cells of unknown (dropped) families
    /// are skipped.
    ///
    /// Cells must come in key order (forwards) for the version count to
    /// hold; a backwards read sees the oldest version first and passes
    /// `forwards = false`, which keeps every cell for GC to judge later.
    pub fn push(
        &mut self,
        meta: &TableMeta,
        key: &[u8],
        value: &[u8],
        forwards: bool,
    ) -> Result<Pushed> {
        let cell = decode_after_row(key, self.prefix.len()).ok_or_else(|| corrupt_key(key))?;
        let Some(family) = meta.family(cell.family_id) else {
            return Ok(Pushed::Kept);
        };
        if forwards {
            let column = &key[..key.len().saturating_sub(8)];
            if self.column == column {
                self.version += 1;
            } else {
                self.column.clear();
                self.column.extend_from_slice(column);
                self.version = 0;
            }
            if let Some(cap) = family.version_cap {
                if self.version >= cap {
                    return Ok(Pushed::Hidden {
                        run: self.version + 1 - cap,
                    });
                }
            }
        }
        let q_start = self.buf.len();
        push_unescaped(&mut self.buf, cell.qualifier);
        let v_start = self.buf.len();
        self.buf.extend_from_slice(value);
        self.slots.push(Slot {
            family_id: cell.family_id,
            rank: family.rank,
            qualifier: q_start..v_start,
            timestamp_micros: cell.timestamp_micros,
            value: v_start..self.buf.len(),
        });
        Ok(Pushed::Kept)
    }

    /// Finish the row. `reversed` says cells were pushed in descending key
    /// order. Returns `None` when no cell is visible.
    /// `prefilter` drops, after GC, cells that cannot reach the read's
    /// filter output, before any `Cell` is built for them.
    pub fn finish(
        &mut self,
        meta: &TableMeta,
        reversed: bool,
        now_micros: i64,
        prefilter: Option<&CellPrefilter>,
    ) -> Option<Row> {
        if reversed {
            self.slots.reverse();
        }
        if meta.has_gc() {
            self.apply_gc(meta, now_micros);
        }
        if let Some(pre) = prefilter {
            let buf = &self.buf;
            self.slots.retain(|s| {
                meta.family(s.family_id).is_some_and(|f| {
                    pre.may_pass(
                        &f.name,
                        &buf[s.qualifier.clone()],
                        s.timestamp_micros,
                        &buf[s.value.clone()],
                    )
                })
            });
        }
        if self.slots.is_empty() {
            return None;
        }
        if !meta.ids_in_name_order() {
            // Stable: keeps (qualifier, timestamp desc) order within a family.
            self.slots.sort_by_key(|s| s.rank);
        }
        self.capacity_hint = self.buf.len().next_power_of_two().max(64);
        let data = Bytes::from(std::mem::take(&mut self.buf));
        let cells = self
            .slots
            .iter()
            .filter_map(|s| {
                let family = meta.family(s.family_id)?;
                Some(Cell {
                    family: family.name.clone(),
                    qualifier: data.slice(s.qualifier.clone()),
                    timestamp_micros: s.timestamp_micros,
                    value: data.slice(s.value.clone()),
                    labels: Vec::new(),
                })
            })
            .collect();
        Some(Row {
            key: data.slice(..self.key_len),
            cells,
        })
    }

    /// Drop the cells the families' GC rules delete. Slots are in key order
    /// (family id, qualifier, timestamp descending).
    fn apply_gc(&mut self, meta: &TableMeta, now_micros: i64) {
        let buf = &self.buf;
        let mut version = 0usize;
        let mut previous: Option<(u32, Range<usize>)> = None;
        self.slots.retain(|s| {
            let same_column = previous.as_ref().is_some_and(|(f, q)| {
                *f == s.family_id && buf[q.clone()] == buf[s.qualifier.clone()]
            });
            version = if same_column { version + 1 } else { 0 };
            previous = Some((s.family_id, s.qualifier.clone()));
            meta.family(s.family_id)
                .is_some_and(|f| !deletes(&f.gc_rule, version, s.timestamp_micros, now_micros))
        });
    }
}

pub(crate) fn corrupt_key(key: &[u8]) -> Error {
    Error::Storage(format!(
        "corrupt cell key {:?}",
        Bytes::copy_from_slice(key)
    ))
}
