//! Blind writes: `mutate_row(s)` store their mutations as a RocksDB merge
//! operand ([`operand`]: the format) instead of reading the row and
//! writing it back whole, and the table's merge operator applies them,
//! with the model's own `apply_mutations`, whenever RocksDB reads the row
//! or compacts it. This module holds the RocksDB hooks: the full merge
//! ([`full_merge_fn`]) and the partial merge ([`partial_merge_fn`]).
//!
//! Applying a group of an operand is exactly what a locked
//! read-modify-write of the row would have done at that clock: the
//! visible cells, the mutations in order, GC on the result (what
//! `MemoryStore` does). Operands that only add take a one-pass merge
//! ([`adds`]) that stores the same bytes.
//!
//! Writes that must read (check-and-mutate, read-modify-write, the
//! sweeper) hold their rows' stripes exclusively, blind writes hold them
//! shared: a blind write cannot land between another request's read and
//! its write, and blind writes do not wait for each other.

use affinity_model::apply::apply_mutations;
use affinity_model::gc::visible_cells;
use affinity_model::Cell;
use rocksdb::MergeOperands;

use crate::decode::decode_cells;
use crate::gc::GcSlot;
use crate::meta::TableMeta;
use crate::row::encode_row;

mod adds;
mod operand;

use adds::{decode_adds, merge_adds};
pub(crate) use operand::encode_operand;
use operand::{put_add_group, Cursor, OPERAND};

/// The row `existing` (a stored row, or none) becomes after `operands`,
/// encoded; `None` when something does not decode.
pub(crate) fn full_merge<'o>(
    meta: &TableMeta,
    key: &[u8],
    existing: Option<&[u8]>,
    operands: impl IntoIterator<Item = &'o [u8]>,
) -> Option<Vec<u8>> {
    let operands: Vec<&[u8]> = operands.into_iter().collect();
    match decode_adds(meta, &operands) {
        Some((adds, clock)) => merge_adds(meta, existing, adds, clock),
        None => merge_in_order(meta, key, existing, &operands),
    }
}

/// [`full_merge`] the general way: each group applied at its own clock to
/// the row as the groups before it left it, GC collected after each.
fn merge_in_order(
    meta: &TableMeta,
    key: &[u8],
    existing: Option<&[u8]>,
    operands: &[&[u8]],
) -> Option<Vec<u8>> {
    let spec = meta.spec();
    let mut cells: Vec<Cell> = Vec::new();
    let mut base = existing;
    for operand in operands {
        let (&OPERAND, groups) = operand.split_first()? else {
            return None;
        };
        let mut cursor = Cursor::new(groups);
        while !cursor.is_empty() {
            let (now, mutations) = cursor.group(meta)?;
            cells = match base.take() {
                Some(stored) => decode_cells(meta, key, stored, now).ok()?,
                None => visible_cells(&spec, cells, now),
            };
            apply_mutations(&mut cells, &mutations, now);
            cells = visible_cells(&spec, cells, now);
        }
    }
    if let Some(stored) = base {
        // No operand at all: the row as it is.
        return Some(stored.to_vec());
    }
    let mut out = Vec::new();
    encode_row(&mut out, meta, &cells).ok()?;
    Some(out)
}

thread_local! {
    /// Bytes of operands this thread's full merges have taken so far.
    static MERGED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// The key of the row whose full merge last failed on this thread.
    static FAILED: std::cell::RefCell<Option<Vec<u8>>> = const { std::cell::RefCell::new(None) };
}

/// The table (column family) and row of the last full merge that failed
/// on any thread: a flush or compaction runs merges on RocksDB's own
/// threads, and a failed one stops the store's writes with RocksDB's
/// bare "Merge operator failed", which this names.
static LAST_FAILED: std::sync::Mutex<Option<(String, Vec<u8>)>> = std::sync::Mutex::new(None);

/// The column family and row of the last failed full merge, if any.
pub(crate) fn last_failed_merge() -> Option<(String, Vec<u8>)> {
    LAST_FAILED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

/// How many bytes of operands full merges on this thread have taken so
/// far: a read compares it around a step of its iterator to learn how
/// much merging the row it landed on needed (see `Scan::visit`).
pub(crate) fn merged_operand_bytes() -> u64 {
    MERGED.with(std::cell::Cell::get)
}

/// The table's merge operator, reading its metadata from `slot`.
pub(crate) fn full_merge_fn(
    slot: GcSlot,
) -> impl Fn(&[u8], Option<&[u8]>, &MergeOperands) -> Option<Vec<u8>> + Send + Sync + 'static {
    move |key, existing, operands| {
        let bytes: usize = operands.iter().map(<[u8]>::len).sum();
        MERGED.with(|m| m.set(m.get() + bytes as u64));
        let meta = slot.read().clone()?;
        let merged = full_merge(&meta, key, existing, operands);
        if merged.is_none() {
            FAILED.with(|f| *f.borrow_mut() = Some(key.to_vec()));
            *LAST_FAILED.lock().unwrap_or_else(|p| p.into_inner()) =
                Some((meta.cf_name.clone(), key.to_vec()));
        }
        merged
    }
}

/// The key of the row whose merge last failed on this thread (its stored
/// value or an operand does not decode), taken: RocksDB reports the
/// failure without the key, and a read runs its merges on its own thread.
pub(crate) fn take_failed_merge() -> Option<Vec<u8>> {
    FAILED.with(|f| f.borrow_mut().take())
}

/// The table's partial merge, reading its metadata from `slot`: operands
/// combined into one. Operands that only add become one group of summed
/// adds in canonical order (stamped with the latest clock; an add's effect
/// does not depend on the clock), so the operands a read must merge stay
/// few, short and sorted; any other operands keep their groups, in order.
pub(crate) fn partial_merge_fn(
    slot: GcSlot,
) -> impl Fn(&[u8], Option<&[u8]>, &MergeOperands) -> Option<Vec<u8>> + Send + Sync + 'static {
    move |_key, _existing, operands| {
        let meta = slot.read().clone();
        let operands: Vec<&[u8]> = operands.into_iter().collect();
        combine(meta.as_deref(), &operands)
    }
}

/// [`partial_merge_fn`] of any operands (`meta` unknown: groups kept).
pub(crate) fn combine(meta: Option<&TableMeta>, operands: &[&[u8]]) -> Option<Vec<u8>> {
    if let Some((adds, clock)) = meta.and_then(|meta| decode_adds(meta, operands)) {
        let mut out = vec![OPERAND];
        put_add_group(&mut out, clock, &adds);
        return Some(out);
    }
    let mut out = vec![OPERAND];
    for operand in operands {
        let (&OPERAND, groups) = operand.split_first()? else {
            return None;
        };
        out.extend_from_slice(groups);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use affinity_model::apply::decode_i64;
    use affinity_model::{Mutation, SERVER_TIME};

    use super::*;
    use crate::merge::operand::operand;
    use crate::test_util::{reference, sample_meta as meta};

    #[test]
    fn operands_apply_like_the_reference_model() {
        let meta = meta();
        let writes = vec![
            (
                vec![
                    Mutation::set_cell("a", "q", 1000, "x"),
                    Mutation::set_cell("v", "q", 1000, "old"),
                    Mutation::add_to_cell("s", "n", 0, 5),
                ],
                10_000,
            ),
            (
                vec![
                    Mutation::set_cell("v", "q", SERVER_TIME, "new"),
                    Mutation::add_to_cell("s", "n", 0, -2),
                    Mutation::delete_column("a", "q"),
                    Mutation::set_cell("a", "r", 2000, "y"),
                ],
                20_500,
            ),
        ];
        let operands: Vec<Vec<u8>> = writes
            .iter()
            .map(|(m, now)| operand(&meta, m, *now))
            .collect();
        let expected = reference(&meta, &writes);
        let merged =
            full_merge(&meta, b"k", None, operands.iter().map(Vec::as_slice)).expect("merges");
        assert_eq!(
            decode_cells(&meta, b"k", &merged, 30_000).expect("decodes"),
            expected
        );
        let sum = expected.iter().find(|c| c.family == "s").expect("sum cell");
        assert_eq!(decode_i64(&sum.value), Some(3));
        assert_eq!(
            expected
                .iter()
                .find(|c| c.family == "v")
                .map(|c| c.timestamp_micros),
            Some(20_000),
            "server time is the write's clock"
        );

        // Partially merged operands, over a stored base, give the same row.
        let base = full_merge(&meta, b"k", None, [operands[0].as_slice()]).expect("merges");
        let combined = {
            let mut out = vec![OPERAND];
            out.extend_from_slice(&operands[1][1..]);
            out
        };
        let again = full_merge(&meta, b"k", Some(&base), [combined.as_slice()]).expect("merges");
        assert_eq!(again, merged);
    }

    #[test]
    fn combined_operands_merge_as_the_originals() {
        let meta = meta();
        let add = |q: &str, ts: i64, n: i64| Mutation::add_to_cell("s", q.to_string(), ts, n);
        let ops = [
            operand(&meta, &[add("q", 1000, 2), add("p", 0, 1)], 5000),
            operand(&meta, &[add("q", 1000, 3), add("q", 2000, -1)], 6000),
            operand(&meta, &[add("p", 0, 4)], 7000),
        ];
        let slices: Vec<&[u8]> = ops.iter().map(Vec::as_slice).collect();
        let combined = combine(Some(&meta), &slices).expect("combines");
        assert!(combined.len() < ops.iter().map(Vec::len).sum::<usize>());
        let once = full_merge(&meta, b"k", None, [combined.as_slice()]).expect("merges");
        let apart = full_merge(&meta, b"k", None, slices.iter().copied()).expect("merges");
        assert_eq!(
            decode_cells(&meta, b"k", &once, 9000).expect("decodes"),
            decode_cells(&meta, b"k", &apart, 9000).expect("decodes")
        );
        // Operands that do more than add keep their groups in order.
        let set = operand(&meta, &[Mutation::set_cell("a", "x", 0, "v")], 8000);
        let mixed = combine(Some(&meta), &[slices[0], set.as_slice()]).expect("combines");
        assert_eq!(mixed.len(), slices[0].len() + set.len() - 1);
    }

    #[test]
    fn a_deleted_row_merges_to_no_cells_and_garbage_fails() {
        let meta = meta();
        let set = operand(&meta, &[Mutation::set_cell("a", "q", 0, "x")], 1000);
        let delete = operand(&meta, &[Mutation::DeleteFromRow], 2000);
        let merged =
            full_merge(&meta, b"k", None, [set.as_slice(), delete.as_slice()]).expect("merges");
        assert!(decode_cells(&meta, b"k", &merged, 3000)
            .expect("decodes")
            .is_empty());
        assert_eq!(
            full_merge(&meta, b"k", None, [b"\x03\x00".as_slice()]),
            None
        );
        assert_eq!(full_merge(&meta, b"k", None, [b"\x09".as_slice()]), None);
    }
}
