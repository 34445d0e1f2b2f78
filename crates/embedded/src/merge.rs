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
//! timestamp, inputs of 1) take 5 bytes past their qualifier instead of 19.
//! Writers write 6; 2 is still read, from stores written before. A group is one write's mutations of the row with the
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
use rustc_hash::FxHashMap;
use std::cmp::Reverse;

use crate::decode::visible_cells;
use crate::gc::GcSlot;
use crate::meta::TableMeta;
use crate::row::{
    common_prefix, encode_row, put_varint, row_cursor, take_varint, unzigzag, zigzag, RowWriter,
};

/// First byte of every merge operand.
pub(crate) const OPERAND: u8 = 3;

const SET_CELL: u8 = 1;
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
    family_id: u64,
    qualifier: &[u8],
    ts: i64,
    input: i64,
    previous_ts: &mut i64,
) {
    out.push(PACKED_ADD);
    put_varint(out, family_id);
    put_bytes(out, qualifier);
    put_varint(out, zigzag(ts.wrapping_sub(*previous_ts)));
    put_varint(out, zigzag(input));
    *previous_ts = ts;
}

fn family_id(meta: &TableMeta, family: &str) -> Result<u64> {
    meta.family_id(family)
        .map(u64::from)
        .ok_or_else(|| affinity_model::Error::Internal(format!("family {family:?} has no id")))
}

/// Family ids and ranks by name, for mutations that come in runs of one
/// family: each run's looked up once.
struct Families<'m, 'n> {
    meta: &'m TableMeta,
    last: Option<(&'n str, u32, u32)>,
}

impl<'m, 'n> Families<'m, 'n> {
    fn new(meta: &'m TableMeta) -> Self {
        Families { meta, last: None }
    }

    fn id_and_rank(&mut self, name: &'n str) -> Result<(u32, u32)> {
        match self.last {
            Some((last, id, rank)) if last == name => Ok((id, rank)),
            _ => {
                let id = family_id(self.meta, name)? as u32;
                let rank = self.meta.family(id).map_or(u32::MAX, |f| f.rank);
                self.last = Some((name, id, rank));
                Ok((id, rank))
            }
        }
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
    out.extend_from_slice(&(now_micros as u64).to_be_bytes());
    if let Some(adds) = sorted_adds(meta, mutations)? {
        put_varint(out, adds.len() as u64);
        let mut previous_ts = 0;
        for ((_, qualifier, Reverse(ts)), (id, input)) in adds {
            put_add(out, u64::from(id), qualifier, ts, input, &mut previous_ts);
        }
        return Ok(());
    }
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
                put_add(
                    out,
                    family_id(meta, family)?,
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

/// A list of `AddToCell`s summed per cell in canonical cell order (so
/// operands arrive sorted at merges); `None` when it holds anything else.
fn sorted_adds<'a>(meta: &TableMeta, mutations: &'a [Mutation]) -> Result<Option<Adds<'a>>> {
    let mut adds: Adds<'a> = Vec::with_capacity(mutations.len());
    let mut families = Families::new(meta);
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
        let (id, rank) = families.id_and_rank(family)?;
        adds.push(((rank, qualifier, Reverse(*timestamp_micros)), (id, *input)));
    }
    sort_and_sum(&mut adds);
    Ok(Some(adds))
}

/// Sort `adds` in canonical cell order and sum the adds of each cell into
/// one (stable: a cell's family id is its first add's).
fn sort_and_sum(adds: &mut Adds<'_>) {
    adds.sort_by(|a, b| cell_order(&a.0, &b.0));
    adds.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 .1 = kept.1 .1.wrapping_add(later.1 .1);
        }
        same
    });
}

/// Reads groups back.
struct Cursor<'a> {
    rest: &'a [u8],
    /// The timestamp of the group's last packed add (0 before the first).
    previous_ts: i64,
}

impl<'a> Cursor<'a> {
    fn new(groups: &'a [u8]) -> Cursor<'a> {
        Cursor {
            rest: groups,
            previous_ts: 0,
        }
    }

    /// A group's clock and mutation count, starting it.
    fn group_head(&mut self) -> Option<(i64, u64)> {
        self.previous_ts = 0;
        Some((self.u64()? as i64, self.varint()?))
    }

    /// An add after its tag (`ADD_TO_CELL` or `PACKED_ADD`): family id,
    /// qualifier, timestamp, input.
    fn add(&mut self, tag: u8) -> Option<(u32, &'a [u8], i64, i64)> {
        let id = u32::try_from(self.varint()?).ok()?;
        let qualifier = self.bytes()?;
        if tag == PACKED_ADD {
            let ts = self.previous_ts.wrapping_add(unzigzag(self.varint()?));
            self.previous_ts = ts;
            Some((id, qualifier, ts, unzigzag(self.varint()?)))
        } else {
            let ts = self.u64()? as i64;
            Some((id, qualifier, ts, self.u64()? as i64))
        }
    }

    fn varint(&mut self) -> Option<u64> {
        take_varint(&mut self.rest)
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
                    family: family.into(),
                    qualifier: bytes(qualifier),
                    timestamp_micros: ts,
                    value: bytes(value),
                })
            }
            tag @ (ADD_TO_CELL | PACKED_ADD) => {
                let (id, qualifier, ts, input) = self.add(tag)?;
                let family = meta.family(id).map(|f| f.name.clone());
                family.map(|family| Mutation::AddToCell {
                    family: family.into(),
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

    /// The next group: its clock and mutations.
    fn group(&mut self, meta: &TableMeta) -> Option<(i64, Vec<Mutation>)> {
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

/// The adds of operands made only of `AddToCell`s, summed per cell, in
/// canonical cell order: ((family rank by name, qualifier, newest
/// timestamp first), (family id, sum)).
type Adds<'a> = Vec<((u32, &'a [u8], Reverse<i64>), (u32, i64))>;

/// The adds of `operands` when every mutation in them is an `AddToCell`
/// (the only blind writes the table makes), summed per cell in canonical
/// cell order, with the latest group clock; `None` otherwise, or when
/// something does not decode. Adds to dropped families are left out, as
/// the general path skips them.
///
/// Operands are written in canonical order (see [`encode_operand`],
/// [`partial_merge_fn`]). What a read finds after a burst of writes is
/// one or two long combined groups (flushes and compactions made them)
/// and many short ones (the memtable's writes): long groups are merged as
/// the sorted runs they are (their order checked as they are read; one out
/// of order is summed with the short ones), the short ones summed per cell
/// and sorted ([`sum_loose`]). On the operands reads merged after
/// `affinity bench http`'s ingest (one group of ~170 adds and ~16 of 9):
/// 14.4 -> 11.4 us per row.
fn only_adds<'a>(meta: &'a TableMeta, operands: &[&'a [u8]]) -> Option<(Adds<'a>, i64)> {
    let mut clock = i64::MIN;
    // Long groups in canonical order, taken as they are.
    let mut runs: Vec<Adds<'a>> = Vec::new();
    // The adds of the other groups.
    let mut loose: Adds<'a> = Vec::with_capacity(operands.iter().map(|o| o.len() / 32).sum());
    let mut groups = 0;
    for operand in operands {
        let (&OPERAND, rest) = operand.split_first()? else {
            return None;
        };
        let mut cursor = Cursor::new(rest);
        while !cursor.rest.is_empty() {
            let (group_clock, count) = cursor.group_head()?;
            clock = clock.max(group_clock);
            groups += 1;
            let run = count >= RUN_ADDS;
            let into = if run {
                runs.push(Vec::with_capacity(usize::try_from(count).ok()?));
                runs.last_mut()?
            } else {
                &mut loose
            };
            let mut sorted = true;
            for _ in 0..count {
                let tag = cursor.u8()?;
                if tag != PACKED_ADD && tag != ADD_TO_CELL {
                    return None;
                }
                let (id, qualifier, ts, input) = cursor.add(tag)?;
                let Some(family) = meta.family(id) else {
                    continue;
                };
                let add = ((family.rank, qualifier, Reverse(ts)), (id, input));
                if run && sorted {
                    sorted = into
                        .last()
                        .is_none_or(|last| cell_order(&last.0, &add.0).is_lt());
                }
                into.push(add);
            }
            if run && !sorted {
                let run = runs.pop()?;
                loose.extend(run);
            }
        }
    }
    let mut merged = sum_loose(meta, loose, groups > 2);
    for run in runs {
        merged = merge_sorted(merged, run);
    }
    Some((merged, clock))
}

/// Groups of at least this many adds are merged as the sorted runs they
/// are (checked while read), not summed and sorted again: a row's
/// operands are one or two long combined groups and many short ones.
const RUN_ADDS: u64 = 32;

/// `adds` summed per cell, in canonical cell order. With `summing` (adds
/// of many groups, which repeat the same cells) they are summed per cell
/// first and only the distinct cells sorted: a hundred groups of nine
/// adds name about 280 cells, and sorting those takes a fraction of the
/// qualifier comparisons of sorting all 900. In a family whose GC rule
/// keeps one version, only each column's newest timestamp is kept then:
/// the older ones are hidden as soon as they are merged, so the merged row
/// is the same.
fn sum_loose<'a>(meta: &TableMeta, mut adds: Adds<'a>, summing: bool) -> Adds<'a> {
    if !summing {
        sort_and_sum(&mut adds);
        return adds;
    }
    let mut sums: FxHashMap<(u32, &'a [u8], i64), (u32, i64)> =
        FxHashMap::with_capacity_and_hasher(adds.len(), Default::default());
    // Families keeping one version: per column, the newest timestamp's
    // sum (GC hides the older versions the moment they are merged).
    let mut newest: FxHashMap<(u32, &'a [u8]), (i64, u32, i64)> = FxHashMap::default();
    for ((rank, qualifier, Reverse(ts)), (id, input)) in adds.drain(..) {
        if meta.family(id).is_some_and(|f| f.newest_only) {
            let kept = newest.entry((rank, qualifier)).or_insert((ts, id, 0));
            if ts > kept.0 {
                *kept = (ts, id, input);
            } else if ts == kept.0 {
                kept.2 = kept.2.wrapping_add(input);
            }
        } else {
            // Sums wrap, so their order does not matter.
            let sum = sums.entry((rank, qualifier, ts)).or_insert((id, 0));
            sum.1 = sum.1.wrapping_add(input);
        }
    }
    adds.extend(
        sums.into_iter()
            .map(|((rank, q, ts), sum)| ((rank, q, Reverse(ts)), sum)),
    );
    adds.extend(
        newest
            .into_iter()
            .map(|((rank, q), (ts, id, sum))| ((rank, q, Reverse(ts)), (id, sum))),
    );
    adds.sort_unstable_by(|a, b| cell_order(&a.0, &b.0));
    adds
}

/// Two lists of adds in canonical cell order (each naming a cell once)
/// merged into one, summing the adds of a cell both name.
fn merge_sorted<'a>(a: Adds<'a>, b: Adds<'a>) -> Adds<'a> {
    if a.is_empty() {
        return b;
    }
    if b.is_empty() {
        return a;
    }
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    while let (Some(x), Some(y)) = (a.peek(), b.peek()) {
        match cell_order(&x.0, &y.0) {
            std::cmp::Ordering::Less => out.extend(a.next()),
            std::cmp::Ordering::Greater => out.extend(b.next()),
            std::cmp::Ordering::Equal => {
                let (key, (id, x)) = a.next().expect("peeked");
                let (_, (_, y)) = b.next().expect("peeked");
                out.push((key, (id, x.wrapping_add(y))));
            }
        }
    }
    out.extend(a);
    out.extend(b);
    out
}

/// Canonical cell order of `(family rank, qualifier, newest first)`
/// (what `Ord` gives), comparing qualifiers eight bytes at a time before
/// `memcmp`: sorted qualifiers share long prefixes.
#[inline]
fn cell_order(
    a: &(u32, &[u8], Reverse<i64>),
    b: &(u32, &[u8], Reverse<i64>),
) -> std::cmp::Ordering {
    a.0.cmp(&b.0)
        .then_with(|| qualifier_order(a.1, b.1))
        .then_with(|| a.2.cmp(&b.2))
}

/// `a.cmp(b)` for qualifiers: past their common prefix (found eight
/// bytes at a time), the first byte that differs or the shorter decides.
#[inline]
fn qualifier_order(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let shared = common_prefix(a, b);
    match (a.get(shared), b.get(shared)) {
        (Some(x), Some(y)) => x.cmp(y),
        _ => a.len().cmp(&b.len()),
    }
}

/// [`full_merge`] of operands that only add: the stored row's cells with
/// the sums added in, one pass over the encoded row. Applying adds one
/// group at a time and collecting GC after each (the general path) shows
/// readers the same cells: an add never removes a cell, so what GC hides
/// at a group's clock it hides at any later one, when reads collect it.
///
/// A stored cell that directly follows the stored cell written before it
/// (nothing inserted or hidden between) is copied as its stored bytes,
/// with the new sum in place of its value: its shared prefix and timestamp
/// delta hold as they are, and need no re-encoding.
fn merge_adds(
    meta: &TableMeta,
    existing: Option<&[u8]>,
    adds: Adds<'_>,
    clock: i64,
) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(existing.map_or(0, <[u8]>::len) + adds.len() * 24);
    let mut writer = Writer::new(meta, clock, &mut out);
    let mut pending = adds.into_iter().peekable();
    if let Some(stored) = existing {
        let mut cells = row_cursor(stored);
        // The cell written last is the stored cell before the current one,
        // so the current one's stored bytes are valid as they are.
        let mut in_step = true;
        while let Some(cell) = cells.next_cell() {
            // Cells of dropped families go, as decoding hides them.
            let Some(family) = meta.family(cell.family_id) else {
                in_step = false;
                continue;
            };
            let head = cells.cell_head(&cell);
            let qualifier = cells.qualifier();
            let at = (family.rank, qualifier, Reverse(cell.timestamp_micros));
            let mut landed = None;
            while let Some((key, (id, sum))) = pending.peek() {
                match cell_order(key, &at) {
                    std::cmp::Ordering::Less => {
                        writer.put(*id, key.1, key.2 .0, &sum.to_be_bytes());
                        in_step = false;
                        pending.next();
                    }
                    std::cmp::Ordering::Equal => {
                        landed = Some(*sum);
                        pending.next();
                        break;
                    }
                    std::cmp::Ordering::Greater => break,
                }
            }
            let total;
            let value = match landed {
                Some(sum) => {
                    let base = affinity_model::apply::decode_i64(cell.value).unwrap_or(0);
                    total = base.wrapping_add(sum).to_be_bytes();
                    &total[..]
                }
                None => cell.value,
            };
            let same = if in_step {
                cell.same_column
            } else {
                writer.same_column(cell.family_id, qualifier)
            };
            if !writer.admit_known(cell.family_id, qualifier, same, cell.timestamp_micros) {
                in_step = false;
                continue;
            }
            match head {
                Some(head) if in_step && value.len() == cell.value.len() => {
                    writer.row.put_copied(head, &cell, value);
                }
                _ => writer
                    .row
                    .put(cell.family_id, qualifier, cell.timestamp_micros, value),
            }
            in_step = true;
        }
        if cells.failed() {
            return None;
        }
    }
    for (key, (id, sum)) in pending {
        writer.put(id, key.1, key.2 .0, &sum.to_be_bytes());
    }
    drop(writer);
    Some(out)
}

/// The stored form of the row `mutations` make of no row at all at clock
/// `now_micros`, when they only set cells: what applying them to no cells,
/// collecting GC and encoding gives, without building `Cell`s (nearly
/// every write to an events table creates its row). `Ok(None)` when they
/// do anything else.
pub(crate) fn encode_created_row(
    meta: &TableMeta,
    mutations: &[Mutation],
    now_micros: i64,
) -> Result<Option<Vec<u8>>> {
    type Key<'a> = (u32, &'a [u8], Reverse<i64>);
    let mut cells: Vec<(Key<'_>, (u32, &[u8]))> = Vec::with_capacity(mutations.len());
    let mut families = Families::new(meta);
    for m in mutations {
        let Mutation::SetCell {
            family,
            qualifier,
            timestamp_micros,
            value,
        } = m
        else {
            return Ok(None);
        };
        let ts = match *timestamp_micros {
            SERVER_TIME => truncate_to_millis(now_micros),
            ts => ts,
        };
        let (id, rank) = families.id_and_rank(family)?;
        cells.push(((rank, qualifier, Reverse(ts)), (id, value)));
    }
    // Stable, and a later cell of the same column and time replaces the
    // earlier, as `apply_mutations` does.
    cells.sort_by(|a, b| cell_order(&a.0, &b.0));
    cells.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 = later.1;
        }
        same
    });
    let mut out = Vec::with_capacity(
        cells
            .iter()
            .map(|(k, (_, v))| k.1.len() + v.len() + 8)
            .sum(),
    );
    let mut writer = Writer::new(meta, now_micros, &mut out);
    for ((_, qualifier, Reverse(ts)), (id, value)) in cells {
        writer.put(id, qualifier, ts, value);
    }
    drop(writer);
    Ok(Some(out))
}

/// Writes the cells of a merged row in canonical order, leaving out those
/// GC hides at the latest write's clock (hidden then, hidden at every
/// later read: a row's versions only pile up, and ages only grow).
struct Writer<'m, 'o> {
    meta: &'m TableMeta,
    clock: i64,
    row: RowWriter<'o>,
    /// The column of the last cell seen (family, qualifier), and its
    /// version number.
    column_family: Option<u32>,
    column: Vec<u8>,
    version: usize,
}

impl<'m, 'o> Writer<'m, 'o> {
    /// A writer of a row merged at `clock` into `out` (cleared first).
    fn new(meta: &'m TableMeta, clock: i64, out: &'o mut Vec<u8>) -> Self {
        Writer {
            meta,
            clock,
            row: RowWriter::new(out),
            column_family: None,
            column: Vec::new(),
            version: 0,
        }
    }

    fn put(&mut self, family_id: u32, qualifier: &[u8], ts: i64, value: &[u8]) {
        if self.admit(family_id, qualifier, ts) {
            self.row.put(family_id, qualifier, ts, value);
        }
    }

    /// Whether a cell of `family_id` and `qualifier` is in the column of the
    /// cell before it.
    fn same_column(&self, family_id: u32, qualifier: &[u8]) -> bool {
        self.column_family == Some(family_id) && self.column.as_slice() == qualifier
    }

    /// Count the next cell's version in its column; true when GC keeps
    /// it (the caller then writes it).
    fn admit(&mut self, family_id: u32, qualifier: &[u8], ts: i64) -> bool {
        let same = self.same_column(family_id, qualifier);
        self.admit_known(family_id, qualifier, same, ts)
    }

    /// [`Writer::admit`] when the caller knows whether the cell is in the
    /// column of the one before it (`same`).
    fn admit_known(&mut self, family_id: u32, qualifier: &[u8], same: bool, ts: i64) -> bool {
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

/// The row `existing` (a stored row, or none) becomes after `operands`,
/// encoded; `None` when something does not decode.
pub(crate) fn full_merge<'o>(
    meta: &TableMeta,
    key: &[u8],
    existing: Option<&[u8]>,
    operands: impl IntoIterator<Item = &'o [u8]>,
) -> Option<Vec<u8>> {
    let operands: Vec<&[u8]> = operands.into_iter().collect();
    match only_adds(meta, &operands) {
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

thread_local! {
    /// Bytes of operands this thread's full merges have taken so far.
    static MERGED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
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
        full_merge(&meta, key, existing, operands)
    }
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
fn combine(meta: Option<&TableMeta>, operands: &[&[u8]]) -> Option<Vec<u8>> {
    if let Some((adds, clock)) = meta.and_then(|meta| only_adds(meta, operands)) {
        let mut out = vec![OPERAND];
        out.extend_from_slice(&(clock as u64).to_be_bytes());
        put_varint(&mut out, adds.len() as u64);
        let mut previous_ts = 0;
        for ((_, qualifier, Reverse(ts)), (id, sum)) in adds {
            put_add(
                &mut out,
                u64::from(id),
                qualifier,
                ts,
                sum,
                &mut previous_ts,
            );
        }
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
    fn adds_written_before_packing_still_merge() {
        let meta = meta();
        // One group of two adds as stores wrote them before packed adds:
        // tag 2, timestamp and input as 8 bytes each.
        let mut legacy = vec![OPERAND];
        legacy.extend_from_slice(&5000u64.to_be_bytes());
        put_varint(&mut legacy, 2);
        for (q, ts, input) in [(&b"n"[..], 3000i64, 5i64), (b"m", 1000, -2)] {
            legacy.push(ADD_TO_CELL);
            put_varint(&mut legacy, u64::from(meta.family_id("s").unwrap()));
            put_bytes(&mut legacy, q);
            legacy.extend_from_slice(&(ts as u64).to_be_bytes());
            legacy.extend_from_slice(&input.to_be_bytes());
        }
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
            decode(&meta, b"k", &merged, 7000).expect("decodes"),
            expected
        );
        // Partially merged (summing takes three or more), and mixed with
        // a general write.
        let combined = combine(Some(&meta), &[&legacy, &packed, &packed]).expect("combines");
        let again = full_merge(&meta, b"k", None, [combined.as_slice()]).expect("merges");
        // The packed operand counted twice.
        let mut twice = expected.clone();
        apply_mutations(&mut twice, &packed_adds, 6000);
        assert_eq!(decode(&meta, b"k", &again, 7000).expect("decodes"), twice);
        let general = operand(&meta, &[Mutation::set_cell("a", "q", 1000, "x")], 6500);
        let mixed =
            full_merge(&meta, b"k", None, [legacy.as_slice(), general.as_slice()]).expect("merges");
        assert_eq!(decode(&meta, b"k", &mixed, 7000).expect("decodes").len(), 3);
    }

    #[test]
    fn created_rows_encode_as_applied_collected_and_encoded() {
        let meta = TableMeta::from_spec(
            "cf".into(),
            &TableSpec::new()
                .with_family("a", GcRule::None)
                .with_family("m", GcRule::MaxVersions(2))
                .with_family("o", GcRule::MaxAge(std::time::Duration::from_millis(5)))
                .with_family("v", GcRule::MaxVersions(1))
                .with_sum_family("s", GcRule::None),
        );
        let set = |f: &'static str, q: &str, ts: i64, v: &str| {
            Mutation::set_cell(f, q.to_string(), ts, v.to_string())
        };
        let now = 20_000;
        let cases: Vec<Vec<Mutation>> = vec![
            vec![set("a", "q", 1000, "x")],
            // Unsorted, a repeated column and time (the later wins), server
            // time, versions past a limit, cells past their age, a family
            // used twice apart.
            vec![
                set("v", "q", 1000, "old"),
                set("a", "z", 3000, "1"),
                set("m", "q", 1000, "m1"),
                set("m", "q", 2000, "m2"),
                set("m", "q", 3000, "m3"),
                set("a", "b", 3000, "first"),
                set("a", "b", 3000, "second"),
                set("v", "q", SERVER_TIME, "new"),
                set("o", "old", 1000, "gone"),
                set("o", "young", 18_000, "kept"),
                set("a", "", 0, ""),
            ],
            // Nothing survives GC.
            vec![set("o", "old", 1000, "gone")],
        ];
        for mutations in cases {
            let encoded = encode_created_row(&meta, &mutations, now)
                .expect("encodes")
                .expect("only sets");
            let expected = reference(&meta, &[(mutations.clone(), now)]);
            let mut generic = Vec::new();
            crate::row::encode_row(&mut generic, &meta, &expected).expect("encodes");
            assert_eq!(encoded, generic, "{mutations:?}");
            assert_eq!(
                decode(&meta, b"k", &encoded, now).expect("decodes"),
                expected
            );
        }
        assert_eq!(
            encode_created_row(&meta, &[Mutation::add_to_cell("s", "n", 0, 1)], now).unwrap(),
            None
        );
        assert_eq!(
            encode_created_row(
                &meta,
                &[set("a", "q", 1, "x"), Mutation::DeleteFromRow],
                now
            )
            .unwrap(),
            None
        );
    }

    #[test]
    fn adds_merge_in_one_pass_as_in_order() {
        let meta = TableMeta::from_spec(
            "cf".into(),
            &TableSpec::new()
                .with_family("a", GcRule::None)
                .with_sum_family("s", GcRule::MaxVersions(2))
                .with_sum_family("t", GcRule::MaxAge(std::time::Duration::from_millis(5)))
                .with_sum_family("v", GcRule::MaxVersions(1)),
        );
        let add = |f: &'static str, q: &str, ts: i64, n: i64| {
            Mutation::add_to_cell(f, q.to_string(), ts, n)
        };
        let base = full_merge(
            &meta,
            b"k",
            None,
            [operand(
                &meta,
                &[
                    Mutation::set_cell("a", "x", 1000, "plain"),
                    add("s", "q", 3000, 7),
                    add("t", "q", 1000, 1),
                    add("v", "q", 5000, 7),
                    add("v", "r", 9500, 1),
                ],
                4000,
            )
            .as_slice()],
        )
        .expect("merges");
        // Column v:q of the one-version family gets several timestamps,
        // and two adds at its newest one (summed).
        let groups = [
            (
                vec![
                    add("s", "q", 3000, 5),
                    add("s", "p", 1000, -2),
                    add("v", "q", 2000, 1),
                ],
                5000,
            ),
            (
                vec![
                    add("s", "q", 2000, 1),
                    add("s", "q", 1000, 1),
                    add("t", "q", 1000, 3),
                    add("v", "q", 8000, 2),
                    add("v", "r", 1000, 1),
                ],
                6000,
            ),
            (
                vec![
                    add("t", "r", 9000, 4),
                    add("s", "p", 1000, 2),
                    add("v", "q", 8000, 3),
                    add("v", "q", 4000, 9),
                ],
                9000,
            ),
        ];
        let operands: Vec<Vec<u8>> = groups
            .iter()
            .map(|(m, now)| operand(&meta, m, *now))
            .collect();
        let slices: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
        let (adds, clock) = only_adds(&meta, &slices).expect("only adds");
        assert_eq!(clock, 9000, "the latest group's clock");
        let fast = merge_adds(&meta, Some(&base), adds, clock).expect("merges");
        let general = merge_in_order(&meta, b"k", Some(&base), &slices).expect("merges");
        for now in [9000, 10_000, 20_000, 40_000] {
            assert_eq!(
                decode(&meta, b"k", &fast, now).expect("decodes"),
                decode(&meta, b"k", &general, now).expect("decodes"),
                "at {now}"
            );
        }
        // Without a stored row too.
        let (adds, clock) = only_adds(&meta, &slices).expect("adds");
        let fast = merge_adds(&meta, None, adds, clock).expect("merges");
        let general = merge_in_order(&meta, b"k", None, &slices).expect("merges");
        assert_eq!(
            decode(&meta, b"k", &fast, 9000).expect("decodes"),
            decode(&meta, b"k", &general, 9000).expect("decodes")
        );
        // A set among the operands takes the general path.
        let mixed = operand(&meta, &[Mutation::set_cell("a", "y", 0, "v")], 9000);
        assert!(only_adds(&meta, &[slices[0], mixed.as_slice()]).is_none());
    }

    /// A legacy operand (tag 2: timestamp and input as 8 bytes each) of
    /// one group holding `adds` in the order given, sorted or not.
    fn legacy_operand(meta: &TableMeta, adds: &[(&str, Vec<u8>, i64, i64)], now: i64) -> Vec<u8> {
        let mut out = vec![OPERAND];
        out.extend_from_slice(&(now as u64).to_be_bytes());
        put_varint(&mut out, adds.len() as u64);
        for (family, q, ts, input) in adds {
            out.push(ADD_TO_CELL);
            put_varint(&mut out, u64::from(meta.family_id(family).unwrap()));
            put_bytes(&mut out, q);
            out.extend_from_slice(&(*ts as u64).to_be_bytes());
            out.extend_from_slice(&input.to_be_bytes());
        }
        out
    }

    proptest::proptest! {
        /// The one-pass merge of adds (long groups merged as sorted runs,
        /// short ones summed, stored cells copied as bytes where they can
        /// be) writes exactly the row the general path does, whatever the
        /// mix of group lengths, GC rules and stored cells GC hides.
        #[test]
        fn adds_merge_into_stored_rows_as_the_general_path(
            base in proptest::collection::vec((0usize..4, 0u8..40, 0i64..6, 1i64..4), 0..120),
            groups in proptest::collection::vec(
                (proptest::collection::vec((0usize..4, 0u8..40, 0i64..6, -2i64..4), 0..70), 0u8..3),
                1..8,
            ),
            dropped in proptest::bool::ANY,
        ) {
            let families = ["n", "s", "t", "v"];
            let spec = TableSpec::new()
                .with_sum_family("n", GcRule::None)
                .with_sum_family("s", GcRule::MaxVersions(2))
                .with_sum_family("t", GcRule::MaxAge(std::time::Duration::from_millis(3)))
                .with_sum_family(
                    "v",
                    GcRule::Union(vec![
                        GcRule::MaxVersions(1),
                        GcRule::MaxAge(std::time::Duration::from_millis(4)),
                    ]),
                );
            let mut meta = TableMeta::from_spec("cf".into(), &spec);
            // Qualifiers with long shared prefixes, as counters have.
            let q = |n: u8| format!("view,Viewed,brand,b{n}").into_bytes();
            let add = |(f, n, ts, input): (usize, u8, i64, i64)| {
                Mutation::add_to_cell(families[f], q(n), ts * 1000, input)
            };
            let stored = full_merge(
                &meta,
                b"k",
                None,
                [operand(&meta, &base.into_iter().map(add).collect::<Vec<_>>(), 1000).as_slice()],
            )
            .expect("merges");
            let mut now = 2000;
            let operands: Vec<Vec<u8>> = groups
                .into_iter()
                .map(|(adds, how)| {
                    now += 700;
                    match how {
                        // Packed: sorted and summed per cell when written.
                        0 | 1 => operand(&meta, &adds.into_iter().map(add).collect::<Vec<_>>(), now),
                        // Legacy, in the order given (a long one unsorted).
                        _ => {
                            let adds: Vec<_> = adds
                                .into_iter()
                                .map(|(f, n, ts, i)| (families[f], q(n), ts * 1000, i))
                                .collect();
                            legacy_operand(&meta, &adds, now)
                        }
                    }
                })
                .collect();
            if dropped {
                // A family dropped since: its stored cells and adds go.
                let mut families = meta.families.clone();
                families.remove("s");
                meta = TableMeta::new(meta.cf_name.clone(), meta.next_family_id, families);
            }
            let slices: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
            let fast = full_merge(&meta, b"k", Some(&stored), slices.iter().copied()).expect("merges");
            let general = merge_in_order(&meta, b"k", Some(&stored), &slices).expect("merges");
            proptest::prop_assert_eq!(&fast, &general);
            let fresh = full_merge(&meta, b"k", None, slices.iter().copied()).expect("merges");
            let general = merge_in_order(&meta, b"k", None, &slices).expect("merges");
            proptest::prop_assert_eq!(&fresh, &general);
            // Partially merged first, the same cells.
            let combined = combine(Some(&meta), &slices).expect("combines");
            let later = full_merge(&meta, b"k", Some(&stored), [combined.as_slice()]).expect("merges");
            proptest::prop_assert_eq!(
                decode(&meta, b"k", &later, now).expect("decodes"),
                decode(&meta, b"k", &fast, now).expect("decodes")
            );
        }
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
            decode(&meta, b"k", &once, 9000).expect("decodes"),
            decode(&meta, b"k", &apart, 9000).expect("decodes")
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
