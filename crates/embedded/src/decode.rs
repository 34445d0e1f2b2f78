//! Stored rows (see [`crate::row`]) into model rows, with GC visibility
//! applied.
//!
//! A read copies the row key and the stored value into one buffer that
//! becomes a single `Bytes`; every cell's qualifier and value are slices
//! of it, so decoding allocates per row, not per cell (except the family
//! name, which `Cell` owns as a `String`). Cells GC hides, and cells the
//! read's prefilter rules out, are dropped before any `Cell` is built.

use std::ops::Range;

use affinity_model::eval::CellPrefilter;
use affinity_model::gc::deletes;
use affinity_model::{Bytes, Cell, CellRef, Result, Row};
use rustc_hash::FxHashMap;

use crate::meta::{FamilyView, TableMeta};
use crate::row::{corrupt_row, raw_cells, RawCell};

/// Tells, cell by cell in stored order, which cells of a row GC hides:
/// cells of dropped families and cells their family's rule deletes.
pub(crate) struct Visibility<'m> {
    meta: &'m TableMeta,
    now_micros: i64,
    version: usize,
}

impl<'m> Visibility<'m> {
    /// For one row.
    pub fn new(meta: &'m TableMeta, now_micros: i64) -> Visibility<'m> {
        Visibility {
            meta,
            now_micros,
            version: 0,
        }
    }

    /// The cell's family when the cell is visible, `None` when GC hides
    /// it. Cells of one row must be fed in stored order.
    pub fn visible(
        &mut self,
        cell: &RawCell<'_>,
        previous: Option<&RawCell<'_>>,
    ) -> Option<&'m FamilyView> {
        let version = self.advance(cell, previous);
        self.check(cell, version)
    }

    /// The cell's version number within its column (0 for the newest).
    /// Every cell of a row must go through here, in stored order.
    pub fn advance(&mut self, cell: &RawCell<'_>, previous: Option<&RawCell<'_>>) -> usize {
        let same = previous.is_some_and(|p| p.same_column(cell));
        self.version = if same { self.version + 1 } else { 0 };
        self.version
    }

    /// The cell's family when GC keeps the cell with this version number.
    pub fn check(&self, cell: &RawCell<'_>, version: usize) -> Option<&'m FamilyView> {
        let family = self.meta.family(cell.family_id)?;
        (!deletes(
            &family.gc_rule,
            version,
            cell.timestamp_micros,
            self.now_micros,
        ))
        .then_some(family)
    }
}

/// A scan's memory of its prefilter's column verdicts
/// ([`CellPrefilter::column_verdict`]): rows of one table mostly repeat
/// the same columns in the same order, so a cell's verdict is first looked
/// for at its position in the previous rows (one comparison), then among
/// every column the scan met. A cell of a column the filter rules out
/// then costs no GC check and no test.
#[derive(Default)]
pub(crate) struct ColumnVerdicts {
    by_position: Vec<(u32, Vec<u8>, Option<bool>)>,
    by_column: FxHashMap<u32, FxHashMap<Box<[u8]>, Option<bool>>>,
}

impl ColumnVerdicts {
    fn verdict(
        &mut self,
        position: usize,
        family_id: u32,
        family: &str,
        qualifier: &[u8],
        prefilter: &CellPrefilter,
    ) -> Option<bool> {
        if let Some((id, q, verdict)) = self.by_position.get(position) {
            if *id == family_id && q.as_slice() == qualifier {
                return *verdict;
            }
        }
        let columns = self.by_column.entry(family_id).or_default();
        let verdict = match columns.get(qualifier) {
            Some(verdict) => *verdict,
            None => {
                let verdict = prefilter.column_verdict(family, qualifier);
                columns.insert(qualifier.into(), verdict);
                verdict
            }
        };
        // Positions are fed in order from 0, so the list stays dense.
        if let Some(slot) = self.by_position.get_mut(position) {
            slot.0 = family_id;
            slot.1.clear();
            slot.1.extend_from_slice(qualifier);
            slot.2 = verdict;
        } else if position == self.by_position.len() {
            self.by_position
                .push((family_id, qualifier.to_vec(), verdict));
        }
        verdict
    }
}

/// Offset of `part` (a slice of `whole`) within `whole`.
fn span(whole: &[u8], part: &[u8]) -> Range<usize> {
    let start = part.as_ptr() as usize - whole.as_ptr() as usize;
    start..start + part.len()
}

/// Decode a stored row for a read: the cells visible at `now_micros` that
/// `prefilter` lets through; `None` when no cell is left. The row's key
/// and value are copied into one buffer whose slices the cells' qualifiers
/// and values are.
pub(crate) fn read_row(
    meta: &TableMeta,
    key: &[u8],
    value: &[u8],
    now_micros: i64,
    prefilter: Option<&CellPrefilter>,
    verdicts: &mut ColumnVerdicts,
) -> Result<Option<Row>> {
    let mut refs = Vec::new();
    read_refs(meta, key, value, now_micros, prefilter, verdicts, &mut refs)?;
    if refs.is_empty() {
        return Ok(None);
    }
    let mut buf = Vec::with_capacity(key.len() + value.len());
    buf.extend_from_slice(key);
    buf.extend_from_slice(value);
    let data = Bytes::from(buf);
    let at = key.len();
    let slice = |part: &[u8]| {
        let r = span(value, part);
        data.slice(at + r.start..at + r.end)
    };
    let cells = refs
        .iter()
        .map(|c| Cell {
            family: c.family.to_string(),
            qualifier: slice(c.qualifier),
            timestamp_micros: c.timestamp_micros,
            value: slice(c.value),
            labels: Vec::new(),
        })
        .collect();
    Ok(Some(Row {
        key: data.slice(..at),
        cells,
    }))
}

/// Decode a stored row for a visiting read: the cells visible at
/// `now_micros` that `prefilter` lets through, as views of `value` (and of
/// `meta`'s family names) pushed onto `out` (cleared first).
pub(crate) fn read_refs<'v>(
    meta: &'v TableMeta,
    key: &[u8],
    value: &'v [u8],
    now_micros: i64,
    prefilter: Option<&CellPrefilter>,
    verdicts: &mut ColumnVerdicts,
    out: &mut Vec<CellRef<'v>>,
) -> Result<()> {
    out.clear();
    let mut visibility = Visibility::new(meta, now_micros);
    let mut previous: Option<RawCell<'_>> = None;
    let mut cells = raw_cells(value);
    for (position, cell) in cells.by_ref().enumerate() {
        let version = visibility.advance(&cell, previous.as_ref());
        previous = Some(cell);
        let Some(family) = meta.family(cell.family_id) else {
            continue;
        };
        let verdict = match prefilter {
            Some(p) => verdicts.verdict(position, cell.family_id, &family.name, cell.qualifier, p),
            None => Some(true),
        };
        if verdict == Some(false) || visibility.check(&cell, version).is_none() {
            continue;
        }
        if verdict.is_none()
            && prefilter.is_some_and(|p| {
                !p.may_pass(
                    &family.name,
                    cell.qualifier,
                    cell.timestamp_micros,
                    cell.value,
                )
            })
        {
            continue;
        }
        out.push(CellRef {
            family: &family.name,
            qualifier: cell.qualifier,
            timestamp_micros: cell.timestamp_micros,
            value: cell.value,
        });
    }
    if cells.failed() {
        return Err(corrupt_row(key));
    }
    Ok(())
}

/// Decode a stored row for a write: its visible cells at `now_micros`,
/// in canonical order (what the reference model keeps of a row it is
/// about to write).
pub(crate) fn visible_cells(
    meta: &TableMeta,
    key: &[u8],
    value: &[u8],
    now_micros: i64,
) -> Result<Vec<Cell>> {
    let mut verdicts = ColumnVerdicts::default();
    Ok(read_row(meta, key, value, now_micros, None, &mut verdicts)?
        .map(|r| r.cells)
        .unwrap_or_default())
}
