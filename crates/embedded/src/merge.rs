//! Blind writes: `mutate_row(s)` store their mutations as a RocksDB merge
//! operand instead of reading the row and writing it back whole, and the
//! table's merge operator applies them, with the model's own
//! `apply_mutations`, whenever RocksDB reads the row or compacts it.
//!
//! ```text
//! operand  = OPERAND u8 | group+
//! group    = now_micros u64 BE | count varint | mutation * count
//! mutation = 1 family varint | qualifier (len varint, bytes) | ts u64 BE | value (len varint, bytes)
//!          | 2 family varint | qualifier | ts u64 BE | input i64 BE
//!          | 3 family varint | qualifier | start u64 BE | end u64 BE
//!          | 4 family varint
//!          | 5
//! ```
//!
//! 1 is `SetCell` (server time already resolved to the group's clock), 2
//! `AddToCell`, 3 `DeleteFromColumn`, 4 `DeleteFromFamily`, 5
//! `DeleteFromRow`. A group is one write's mutations of the row with the
//! clock it ran at; a partial merge concatenates groups. Applying a group
//! is exactly what a locked read-modify-write of the row would have done
//! at that clock: the visible cells, the mutations in order, GC on the
//! result (what `MemoryStore` does). Families are named by id, so the
//! mutations of a family dropped since are skipped, as its cells are.
//!
//! Writes that must read (check-and-mutate, read-modify-write, the
//! sweeper) hold their rows' stripes exclusively, blind writes hold them
//! shared: a blind write cannot land between another request's read and
//! its write, and blind writes do not wait for each other.

use affinity_model::apply::{apply_mutations, truncate_to_millis};
use affinity_model::gc::visible_cells as collect;
use affinity_model::{Cell, Mutation, Result, TimestampRange, SERVER_TIME};
use rocksdb::MergeOperands;

use crate::decode::visible_cells;
use crate::gc::GcSlot;
use crate::meta::TableMeta;
use crate::row::{encode_row, put_varint};

/// First byte of every merge operand.
pub(crate) const OPERAND: u8 = 3;

const SET_CELL: u8 = 1;
const ADD_TO_CELL: u8 = 2;
const DELETE_FROM_COLUMN: u8 = 3;
const DELETE_FROM_FAMILY: u8 = 4;
const DELETE_FROM_ROW: u8 = 5;

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn family_id(meta: &TableMeta, family: &str) -> Result<u64> {
    meta.family_id(family)
        .map(u64::from)
        .ok_or_else(|| affinity_model::Error::Internal(format!("family {family:?} has no id")))
}

/// Encode one write of a row (validated mutations) at `now_micros` as an
/// operand into `out` (cleared first).
pub(crate) fn encode_operand(
    out: &mut Vec<u8>,
    meta: &TableMeta,
    mutations: &[Mutation],
    now_micros: i64,
) -> Result<()> {
    out.clear();
    out.push(OPERAND);
    out.extend_from_slice(&(now_micros as u64).to_be_bytes());
    put_varint(out, mutations.len() as u64);
    for m in mutations {
        match m {
            Mutation::SetCell {
                family,
                qualifier,
                timestamp_micros,
                value,
            } => {
                let ts = match *timestamp_micros {
                    SERVER_TIME => truncate_to_millis(now_micros),
                    ts => ts,
                };
                out.push(SET_CELL);
                put_varint(out, family_id(meta, family)?);
                put_bytes(out, qualifier);
                out.extend_from_slice(&(ts as u64).to_be_bytes());
                put_bytes(out, value);
            }
            Mutation::AddToCell {
                family,
                qualifier,
                timestamp_micros,
                input,
            } => {
                out.push(ADD_TO_CELL);
                put_varint(out, family_id(meta, family)?);
                put_bytes(out, qualifier);
                out.extend_from_slice(&(*timestamp_micros as u64).to_be_bytes());
                out.extend_from_slice(&input.to_be_bytes());
            }
            Mutation::DeleteFromColumn {
                family,
                qualifier,
                time_range,
            } => {
                out.push(DELETE_FROM_COLUMN);
                put_varint(out, family_id(meta, family)?);
                put_bytes(out, qualifier);
                out.extend_from_slice(&(time_range.start_micros as u64).to_be_bytes());
                out.extend_from_slice(&(time_range.end_micros as u64).to_be_bytes());
            }
            Mutation::DeleteFromFamily { family } => {
                out.push(DELETE_FROM_FAMILY);
                put_varint(out, family_id(meta, family)?);
            }
            Mutation::DeleteFromRow => out.push(DELETE_FROM_ROW),
        }
    }
    Ok(())
}

/// Reads groups back.
struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn varint(&mut self) -> Option<u64> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self.rest.split_first()?;
            self.rest = rest;
            n |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Some(n);
            }
        }
        None
    }

    fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.rest.split_first()?;
        self.rest = rest;
        Some(b)
    }

    fn u64(&mut self) -> Option<u64> {
        let (head, rest) = self.rest.split_first_chunk::<8>()?;
        self.rest = rest;
        Some(u64::from_be_bytes(*head))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.varint()?).ok()?;
        let (out, rest) = self.rest.split_at_checked(len)?;
        self.rest = rest;
        Some(out)
    }

    fn family(&mut self, meta: &TableMeta) -> Option<Option<String>> {
        let id = u32::try_from(self.varint()?).ok()?;
        Some(meta.family(id).map(|f| f.name.clone()))
    }

    /// One mutation: `Some(None)` for one of a dropped family.
    fn mutation(&mut self, meta: &TableMeta) -> Option<Option<Mutation>> {
        let bytes = |b: &[u8]| affinity_model::Bytes::copy_from_slice(b);
        Some(match self.u8()? {
            SET_CELL => {
                let family = self.family(meta)?;
                let qualifier = self.bytes()?;
                let ts = self.u64()? as i64;
                let value = self.bytes()?;
                family.map(|family| Mutation::SetCell {
                    family,
                    qualifier: bytes(qualifier),
                    timestamp_micros: ts,
                    value: bytes(value),
                })
            }
            ADD_TO_CELL => {
                let family = self.family(meta)?;
                let qualifier = self.bytes()?;
                let ts = self.u64()? as i64;
                let input = self.u64()? as i64;
                family.map(|family| Mutation::AddToCell {
                    family,
                    qualifier: bytes(qualifier),
                    timestamp_micros: ts,
                    input,
                })
            }
            DELETE_FROM_COLUMN => {
                let family = self.family(meta)?;
                let qualifier = self.bytes()?;
                let start = self.u64()? as i64;
                let end = self.u64()? as i64;
                family.map(|family| Mutation::DeleteFromColumn {
                    family,
                    qualifier: bytes(qualifier),
                    time_range: TimestampRange {
                        start_micros: start,
                        end_micros: end,
                    },
                })
            }
            DELETE_FROM_FAMILY => self
                .family(meta)?
                .map(|family| Mutation::DeleteFromFamily { family }),
            DELETE_FROM_ROW => Some(Mutation::DeleteFromRow),
            _ => return None,
        })
    }

    /// The next group: its clock and mutations.
    fn group(&mut self, meta: &TableMeta) -> Option<(i64, Vec<Mutation>)> {
        let now = self.u64()? as i64;
        let count = usize::try_from(self.varint()?).ok()?;
        let mut mutations = Vec::with_capacity(count.min(self.rest.len()));
        for _ in 0..count {
            if let Some(m) = self.mutation(meta)? {
                mutations.push(m);
            }
        }
        Some((now, mutations))
    }
}

/// The row `existing` (a stored row, or none) becomes after `operands`,
/// encoded; `None` when something does not decode.
pub(crate) fn full_merge<'o>(
    meta: &TableMeta,
    key: &[u8],
    existing: Option<&[u8]>,
    operands: impl IntoIterator<Item = &'o [u8]>,
) -> Option<Vec<u8>> {
    let spec = meta.spec();
    let mut cells: Vec<Cell> = Vec::new();
    let mut base = existing;
    for operand in operands {
        let (&OPERAND, groups) = operand.split_first()? else {
            return None;
        };
        let mut cursor = Cursor { rest: groups };
        while !cursor.rest.is_empty() {
            let (now, mutations) = cursor.group(meta)?;
            cells = match base.take() {
                Some(stored) => visible_cells(meta, key, stored, now).ok()?,
                None => collect(&spec, cells, now),
            };
            apply_mutations(&mut cells, &mutations, now);
            cells = collect(&spec, cells, now);
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

/// The table's merge operator, reading its metadata from `slot`.
pub(crate) fn full_merge_fn(
    slot: GcSlot,
) -> impl Fn(&[u8], Option<&[u8]>, &MergeOperands) -> Option<Vec<u8>> + Send + Sync + 'static {
    move |key, existing, operands| {
        let meta = slot.read().clone()?;
        full_merge(&meta, key, existing, operands)
    }
}

/// Operands combined: their groups, in order, in one operand.
pub(crate) fn partial_merge(
    _key: &[u8],
    _existing: Option<&[u8]>,
    operands: &MergeOperands,
) -> Option<Vec<u8>> {
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
    use super::*;
    use affinity_model::apply::decode_i64;
    use affinity_model::{GcRule, TableSpec};

    use crate::decode::visible_cells as decode;

    fn meta() -> TableMeta {
        let spec = TableSpec::new()
            .with_family("a", GcRule::None)
            .with_family("v", GcRule::MaxVersions(1))
            .with_sum_family("s", GcRule::None);
        TableMeta::from_spec("cf".into(), &spec)
    }

    fn operand(meta: &TableMeta, mutations: &[Mutation], now: i64) -> Vec<u8> {
        let mut out = Vec::new();
        encode_operand(&mut out, meta, mutations, now).expect("encodes");
        out
    }

    fn reference(meta: &TableMeta, writes: &[(Vec<Mutation>, i64)]) -> Vec<Cell> {
        let spec = meta.spec();
        let mut cells = Vec::new();
        for (mutations, now) in writes {
            cells = collect(&spec, cells, *now);
            apply_mutations(&mut cells, mutations, *now);
            cells = collect(&spec, cells, *now);
        }
        cells
    }

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
            decode(&meta, b"k", &merged, 30_000).expect("decodes"),
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
    fn a_deleted_row_merges_to_no_cells_and_garbage_fails() {
        let meta = meta();
        let set = operand(&meta, &[Mutation::set_cell("a", "q", 0, "x")], 1000);
        let delete = operand(&meta, &[Mutation::DeleteFromRow], 2000);
        let merged =
            full_merge(&meta, b"k", None, [set.as_slice(), delete.as_slice()]).expect("merges");
        assert!(decode(&meta, b"k", &merged, 3000)
            .expect("decodes")
            .is_empty());
        assert_eq!(
            full_merge(&meta, b"k", None, [b"\x03\x00".as_slice()]),
            None
        );
        assert_eq!(full_merge(&meta, b"k", None, [b"\x09".as_slice()]), None);
    }
}
