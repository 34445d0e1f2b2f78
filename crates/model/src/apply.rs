//! Reference semantics of writes on one row's cells.
//!
//! Every function here works on the cells of a single row, in canonical
//! order with no duplicates, and assumes the request was validated with
//! [`crate::limits`] first (so a bad mutation anywhere in a request is
//! rejected before any of it is applied). Backends either call these
//! directly on a row they hold locked, or must behave exactly like them.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};

use crate::cell::{Cell, SERVER_TIME};
use crate::error::{Error, Result};
use crate::eval::CompiledFilter;
use crate::mutation::{Mutation, ReadModifyWriteOp, ReadModifyWriteRule};

/// The system clock in microseconds since the Unix epoch, truncated to whole
/// milliseconds (Bigtable's granularity).
pub fn now_micros() -> i64 {
    let micros = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    truncate_to_millis(micros)
}

/// Round a microsecond timestamp down to a whole millisecond.
pub fn truncate_to_millis(micros: i64) -> i64 {
    micros - micros.rem_euclid(1000)
}

/// Write `cell` into `cells`, replacing a cell of the same column and
/// timestamp, keeping canonical order.
pub fn set_cell(cells: &mut Vec<Cell>, cell: Cell) {
    match cells.binary_search_by(|c| c.canonical_cmp(&cell)) {
        Ok(i) => cells[i] = cell,
        Err(i) => cells.insert(i, cell),
    }
}

/// Apply validated mutations, in order, to a row's cells. `SERVER_TIME`
/// cells are stamped with `now_micros` truncated to milliseconds.
pub fn apply_mutations(cells: &mut Vec<Cell>, mutations: &[Mutation], now_micros: i64) {
    for m in mutations {
        match m {
            Mutation::SetCell {
                family,
                qualifier,
                timestamp_micros,
                value,
            } => {
                let ts = if *timestamp_micros == SERVER_TIME {
                    truncate_to_millis(now_micros)
                } else {
                    *timestamp_micros
                };
                set_cell(
                    cells,
                    Cell::new(family.clone(), qualifier.clone(), ts, value.clone()),
                );
            }
            Mutation::AddToCell {
                family,
                qualifier,
                timestamp_micros,
                input,
            } => add_to_cell(cells, family, qualifier, *timestamp_micros, *input),
            Mutation::DeleteFromColumn {
                family,
                qualifier,
                time_range,
            } => cells.retain(|c| {
                !(c.family == *family
                    && c.qualifier == *qualifier
                    && time_range.contains(c.timestamp_micros))
            }),
            Mutation::DeleteFromFamily { family } => cells.retain(|c| c.family != *family),
            Mutation::DeleteFromRow => cells.clear(),
        }
    }
}

/// Add `input` to the sum cell of one column and timestamp (created as
/// `input` when missing). The family is an aggregate one, so its cells are
/// all 8-byte sums; a value of another length (impossible through the
/// checks) is treated as 0.
pub fn add_to_cell(cells: &mut Vec<Cell>, family: &str, qualifier: &Bytes, ts: i64, input: i64) {
    let probe = Cell::new(family.to_string(), qualifier.clone(), ts, Bytes::new());
    match cells.binary_search_by(|c| c.canonical_cmp(&probe)) {
        Ok(i) => {
            let sum = decode_i64(&cells[i].value).unwrap_or(0).wrapping_add(input);
            cells[i].value = Bytes::copy_from_slice(&sum.to_be_bytes());
        }
        Err(i) => {
            let value = Bytes::copy_from_slice(&input.to_be_bytes());
            cells.insert(i, Cell { value, ..probe });
        }
    }
}

/// Apply read-modify-write rules to a row's cells, each to the latest cell
/// of its column as left by the rules before it. Returns the new cells, one
/// per column touched, in canonical order. On error (an increment of a
/// value that is not 8 bytes) `cells` is left unchanged.
///
/// The written cell's timestamp is `now` truncated to milliseconds, or the
/// latest cell's timestamp when that is newer, so the new value is always
/// the column's latest (as the Bigtable emulator does).
pub fn read_modify_write(
    cells: &mut Vec<Cell>,
    rules: &[ReadModifyWriteRule],
    now_micros: i64,
) -> Result<Vec<Cell>> {
    let now = truncate_to_millis(now_micros);
    let mut work = cells.clone();
    let mut written: BTreeMap<(&str, Bytes), Cell> = BTreeMap::new();
    for rule in rules {
        let latest = work
            .iter()
            .find(|c| c.family == rule.family && c.qualifier == rule.qualifier);
        let ts = latest.map_or(now, |c| c.timestamp_micros.max(now));
        let value = match &rule.op {
            ReadModifyWriteOp::Append(suffix) => {
                let old = latest.map(|c| c.value.as_ref()).unwrap_or_default();
                let mut v = BytesMut::with_capacity(old.len() + suffix.len());
                v.extend_from_slice(old);
                v.extend_from_slice(suffix);
                v.freeze()
            }
            ReadModifyWriteOp::Increment(amount) => {
                let old = match latest {
                    None => 0,
                    Some(c) => {
                        decode_i64(&c.value).ok_or_else(|| Error::InvalidIncrementTarget {
                            family: rule.family.to_string(),
                            qualifier: String::from_utf8_lossy(&rule.qualifier).into_owned(),
                            len: c.value.len(),
                        })?
                    }
                };
                Bytes::copy_from_slice(&old.wrapping_add(*amount).to_be_bytes())
            }
        };
        let cell = Cell::new(rule.family.clone(), rule.qualifier.clone(), ts, value);
        set_cell(&mut work, cell.clone());
        written.insert((&*rule.family, rule.qualifier.clone()), cell);
    }
    *cells = work;
    Ok(written.into_values().collect())
}

/// A 64-bit big-endian signed integer, if `value` is exactly 8 bytes.
pub fn decode_i64(value: &[u8]) -> Option<i64> {
    let bytes: [u8; 8] = value.try_into().ok()?;
    Some(i64::from_be_bytes(bytes))
}

/// The check of `check_and_mutate_row`: with a predicate, whether it outputs
/// any cell of the row; without one, whether the row has any cell.
pub fn predicate_matches(predicate: Option<&CompiledFilter>, key: &Bytes, cells: &[Cell]) -> bool {
    match predicate {
        None => !cells.is_empty(),
        Some(filter) => filter.matches(key, cells),
    }
}

#[cfg(test)]
mod tests;
