//! The merge operand format: one blind write of a row, its mutations
//! encoded with the clock they ran at.
//!
//! ```text
//! operand  = OPERAND u8 | group+
//! group    = now_micros u64 BE | count varint | mutation * count
//! mutation = 1 family varint | qualifier (len varint, bytes) | ts u64 BE | value (len varint, bytes)
//!          | 2 family varint | qualifier | ts u64 BE | input i64 BE
//!          | 6 family varint | qualifier | ts delta zigzag varint | input zigzag varint
//!          | 3 family varint | qualifier | start u64 BE | end u64 BE
//!          | 4 family varint
//!          | 5
//! ```
//!
//! 1 is `SetCell` (server time already resolved to the group's clock), 2
//! `AddToCell`, 3 `DeleteFromColumn`, 4 `DeleteFromFamily`, 5
//! `DeleteFromRow`, 6 `AddToCell` packed: its timestamp as the difference
//! from the previous packed add of the group (from 0 for the first), its
//! input as a varint, so the adds of a profile-state row (one day's
//! timestamp, inputs of 1) take 5 bytes besides their qualifier instead
//! of 19. Writers write 6; 2 is still read, from stores written before
//! (a store the old code wrote is a fixture of `tests/old_formats.rs`).
//! A group is one write's mutations of the row with the clock it ran at;
//! a partial merge concatenates groups. Families are named by id, so the
//! mutations of a family dropped since are skipped, as its cells are.
//! A group made only of adds is written in canonical cell order, each
//! cell once with its inputs summed, so merges find it sorted.

use affinity_model::apply::truncate_to_millis;
use affinity_model::{Mutation, Result, TimestampRange, SERVER_TIME};

use super::adds::{sort_and_sum, Add, Adds};
use crate::meta::{FamilyLookup, TableMeta};
use crate::row::{put_varint, take_varint, unzigzag, zigzag, CellKey};

/// First byte of every merge operand.
pub(crate) const OPERAND: u8 = 3;

const SET_CELL: u8 = 1;
/// `AddToCell` with its timestamp and input as 8 bytes each: read only.
const ADD_TO_CELL: u8 = 2;
const DELETE_FROM_COLUMN: u8 = 3;
const DELETE_FROM_FAMILY: u8 = 4;
const DELETE_FROM_ROW: u8 = 5;
const PACKED_ADD: u8 = 6;

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Append one `AddToCell`, packed; `previous_ts` is the timestamp of the
/// group's previous packed add (0 for the first), and becomes `ts`.
fn put_add(
    out: &mut Vec<u8>,
    family_id: u32,
    qualifier: &[u8],
    ts: i64,
    input: i64,
    previous_ts: &mut i64,
) {
    out.push(PACKED_ADD);
    put_varint(out, u64::from(family_id));
    put_bytes(out, qualifier);
    put_varint(out, zigzag(ts.wrapping_sub(*previous_ts)));
    put_varint(out, zigzag(input));
    *previous_ts = ts;
}

/// Append a group of adds (in canonical cell order, each cell once) at
/// `clock`, its head included.
pub(super) fn put_add_group(out: &mut Vec<u8>, clock: i64, adds: &[Add<'_>]) {
    out.extend_from_slice(&(clock as u64).to_be_bytes());
    put_varint(out, adds.len() as u64);
    let mut previous_ts = 0;
    for add in adds {
        put_add(
            out,
            add.family_id,
            add.key.qualifier,
            add.key.timestamp_micros,
            add.sum,
            &mut previous_ts,
        );
    }
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
    if let Some(adds) = sorted_adds(meta, mutations)? {
        put_add_group(out, now_micros, &adds);
        return Ok(());
    }
    out.extend_from_slice(&(now_micros as u64).to_be_bytes());
    put_varint(out, mutations.len() as u64);
    let mut previous_ts = 0;
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
                put_varint(out, u64::from(meta.known_family_id(family)?));
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
                put_add(
                    out,
                    meta.known_family_id(family)?,
                    qualifier,
                    *timestamp_micros,
                    *input,
                    &mut previous_ts,
                );
            }
            Mutation::DeleteFromColumn {
                family,
                qualifier,
                time_range,
            } => {
                out.push(DELETE_FROM_COLUMN);
                put_varint(out, u64::from(meta.known_family_id(family)?));
                put_bytes(out, qualifier);
                out.extend_from_slice(&(time_range.start_micros as u64).to_be_bytes());
                out.extend_from_slice(&(time_range.end_micros as u64).to_be_bytes());
            }
            Mutation::DeleteFromFamily { family } => {
                out.push(DELETE_FROM_FAMILY);
                put_varint(out, u64::from(meta.known_family_id(family)?));
            }
            Mutation::DeleteFromRow => out.push(DELETE_FROM_ROW),
        }
    }
    Ok(())
}

/// A list of `AddToCell`s summed per cell in canonical cell order (so
/// operands arrive sorted at merges); `None` when it holds anything else.
fn sorted_adds<'a>(meta: &TableMeta, mutations: &'a [Mutation]) -> Result<Option<Adds<'a>>> {
    let mut adds: Adds<'a> = Vec::with_capacity(mutations.len());
    let mut families = FamilyLookup::new(meta);
    for m in mutations {
        let Mutation::AddToCell {
            family,
            qualifier,
            timestamp_micros,
            input,
        } = m
        else {
            return Ok(None);
        };
        let (family_id, rank) = families.id_and_rank(family)?;
        adds.push(Add {
            key: CellKey {
                rank,
                qualifier,
                timestamp_micros: *timestamp_micros,
            },
            family_id,
            sum: *input,
        });
    }
    sort_and_sum(&mut adds);
    Ok(Some(adds))
}

/// One `AddToCell` as an operand stores it (either tag).
pub(super) struct OperandAdd<'a> {
    pub family_id: u32,
    pub qualifier: &'a [u8],
    pub timestamp_micros: i64,
    pub input: i64,
}

/// Reads the groups of an operand (the bytes after [`OPERAND`]) back.
/// Every method returns `None` where the bytes do not decode.
pub(super) struct Cursor<'a> {
    rest: &'a [u8],
    /// The timestamp of the group's last packed add (0 before the first).
    previous_ts: i64,
}

impl<'a> Cursor<'a> {
    pub fn new(groups: &'a [u8]) -> Cursor<'a> {
        Cursor {
            rest: groups,
            previous_ts: 0,
        }
    }

    /// True when every group was read.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// Bytes left: a bound on the mutations left (each takes more than
    /// one), whatever count a damaged operand claims.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// A group's clock and mutation count, starting it.
    #[inline]
    pub fn group_head(&mut self) -> Option<(i64, u64)> {
        self.previous_ts = 0;
        Some((self.u64()? as i64, self.varint()?))
    }

    /// The group's next mutation when it is an add (either tag); `None`
    /// for any other mutation too.
    #[inline]
    pub fn next_add(&mut self) -> Option<OperandAdd<'a>> {
        match self.u8()? {
            tag @ (ADD_TO_CELL | PACKED_ADD) => self.add(tag),
            _ => None,
        }
    }

    /// An add after its tag (`ADD_TO_CELL` or `PACKED_ADD`).
    #[inline]
    fn add(&mut self, tag: u8) -> Option<OperandAdd<'a>> {
        let family_id = u32::try_from(self.varint()?).ok()?;
        let qualifier = self.bytes()?;
        let (timestamp_micros, input) = if tag == PACKED_ADD {
            let ts = self.previous_ts.wrapping_add(unzigzag(self.varint()?));
            self.previous_ts = ts;
            (ts, unzigzag(self.varint()?))
        } else {
            let ts = self.u64()? as i64;
            (ts, self.u64()? as i64)
        };
        // No stored cell has a negative timestamp (a row does not decode
        // with one): a damaged operand's add is refused, not merged.
        if timestamp_micros < 0 {
            return None;
        }
        Some(OperandAdd {
            family_id,
            qualifier,
            timestamp_micros,
            input,
        })
    }

    #[inline]
    fn varint(&mut self) -> Option<u64> {
        take_varint(&mut self.rest)
    }

    #[inline]
    fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.rest.split_first()?;
        self.rest = rest;
        Some(b)
    }

    #[inline]
    fn u64(&mut self) -> Option<u64> {
        let (head, rest) = self.rest.split_first_chunk::<8>()?;
        self.rest = rest;
        Some(u64::from_be_bytes(*head))
    }

    #[inline]
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
                // Server time is resolved before encoding: never negative.
                if ts < 0 {
                    return None;
                }
                let value = self.bytes()?;
                family.map(|family| Mutation::SetCell {
                    family: family.into(),
                    qualifier: bytes(qualifier),
                    timestamp_micros: ts,
                    value: bytes(value),
                })
            }
            tag @ (ADD_TO_CELL | PACKED_ADD) => {
                let add = self.add(tag)?;
                let family = meta.family(add.family_id).map(|f| f.name.clone());
                family.map(|family| Mutation::AddToCell {
                    family: family.into(),
                    qualifier: bytes(add.qualifier),
                    timestamp_micros: add.timestamp_micros,
                    input: add.input,
                })
            }
            DELETE_FROM_COLUMN => {
                let family = self.family(meta)?;
                let qualifier = self.bytes()?;
                let start = self.u64()? as i64;
                let end = self.u64()? as i64;
                family.map(|family| Mutation::DeleteFromColumn {
                    family: family.into(),
                    qualifier: bytes(qualifier),
                    time_range: TimestampRange {
                        start_micros: start,
                        end_micros: end,
                    },
                })
            }
            DELETE_FROM_FAMILY => self.family(meta)?.map(|family| Mutation::DeleteFromFamily {
                family: family.into(),
            }),
            DELETE_FROM_ROW => Some(Mutation::DeleteFromRow),
            _ => return None,
        })
    }

    /// The next group: its clock and mutations (those of families dropped
    /// since left out).
    pub fn group(&mut self, meta: &TableMeta) -> Option<(i64, Vec<Mutation>)> {
        let (now, count) = self.group_head()?;
        let count = usize::try_from(count).ok()?;
        let mut mutations = Vec::with_capacity(count.min(self.rest.len()));
        for _ in 0..count {
            if let Some(m) = self.mutation(meta)? {
                mutations.push(m);
            }
        }
        Some((now, mutations))
    }
}

/// The operand of one write (tests).
#[cfg(test)]
pub(crate) fn operand(meta: &TableMeta, mutations: &[Mutation], now: i64) -> Vec<u8> {
    let mut out = Vec::new();
    encode_operand(&mut out, meta, mutations, now).expect("encodes");
    out
}

/// An operand of one group as stores wrote adds before packed adds (tag
/// 2: timestamp and input as 8 bytes each), holding `adds` (family,
/// qualifier, timestamp, input) in the order given, sorted or not (tests).
#[cfg(test)]
pub(crate) fn legacy_operand(
    meta: &TableMeta,
    adds: &[(&str, Vec<u8>, i64, i64)],
    now: i64,
) -> Vec<u8> {
    let mut out = vec![OPERAND];
    out.extend_from_slice(&(now as u64).to_be_bytes());
    put_varint(&mut out, adds.len() as u64);
    for (family, q, ts, input) in adds {
        out.push(ADD_TO_CELL);
        put_varint(
            &mut out,
            u64::from(meta.family_id(family).expect("a family")),
        );
        put_bytes(&mut out, q);
        out.extend_from_slice(&(*ts as u64).to_be_bytes());
        out.extend_from_slice(&input.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use affinity_model::apply::apply_mutations;

    use super::*;
    use crate::decode::decode_cells;
    use crate::merge::{combine, full_merge};
    use crate::test_util::{reference, sample_meta};

    #[test]
    fn adds_written_before_packing_still_merge() {
        let meta = sample_meta();
        let legacy = legacy_operand(
            &meta,
            &[
                ("s", b"n".to_vec(), 3000, 5),
                ("s", b"m".to_vec(), 1000, -2),
            ],
            5000,
        );
        let packed_adds = vec![
            Mutation::add_to_cell("s", "n", 3000, 7),
            Mutation::add_to_cell("s", "o", 9000, 1),
        ];
        let packed = operand(&meta, &packed_adds, 6000);
        assert!(packed.len() < legacy.len(), "packed adds are smaller");
        let expected = reference(
            &meta,
            &[
                (
                    vec![
                        Mutation::add_to_cell("s", "n", 3000, 5),
                        Mutation::add_to_cell("s", "m", 1000, -2),
                    ],
                    5000,
                ),
                (packed_adds.clone(), 6000),
            ],
        );
        let merged =
            full_merge(&meta, b"k", None, [legacy.as_slice(), packed.as_slice()]).expect("merges");
        assert_eq!(
            decode_cells(&meta, b"k", &merged, 7000).expect("decodes"),
            expected
        );
        // Partially merged (summing takes three or more), and mixed with
        // a general write.
        let combined = combine(Some(&meta), &[&legacy, &packed, &packed]).expect("combines");
        let again = full_merge(&meta, b"k", None, [combined.as_slice()]).expect("merges");
        // The packed operand counted twice.
        let mut twice = expected.clone();
        apply_mutations(&mut twice, &packed_adds, 6000);
        assert_eq!(
            decode_cells(&meta, b"k", &again, 7000).expect("decodes"),
            twice
        );
        let general = operand(&meta, &[Mutation::set_cell("a", "q", 1000, "x")], 6500);
        let mixed =
            full_merge(&meta, b"k", None, [legacy.as_slice(), general.as_slice()]).expect("merges");
        assert_eq!(
            decode_cells(&meta, b"k", &mixed, 7000)
                .expect("decodes")
                .len(),
            3
        );
    }
}
