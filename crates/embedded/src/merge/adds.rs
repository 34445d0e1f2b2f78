//! Merging operands that only add (nearly every operand: the profile
//! state's counters) in one pass, without applying them group by group.
//!
//! An add never removes a cell, so what GC hides at a group's clock it
//! hides at any later one: summing every group's adds per cell and
//! writing the sums into the stored row at the latest clock shows readers
//! the same cells as applying the groups in order (a property test holds
//! the two byte-equal).

use rustc_hash::FxHashMap;

use super::operand::{Cursor, OPERAND};
use crate::meta::TableMeta;
use crate::row::{row_cursor, CellKey, GcRowWriter};

/// One cell's add, or the sum of its adds.
#[derive(Clone, Copy, Debug)]
pub(super) struct Add<'a> {
    /// The cell's place in canonical order.
    pub key: CellKey<'a>,
    /// The id the cell's family is stored under.
    pub family_id: u32,
    /// The input, or the (wrapping) sum of the cell's inputs.
    pub sum: i64,
}

/// Adds in canonical cell order, each cell once.
pub(super) type Adds<'a> = Vec<Add<'a>>;

/// Sort `adds` in canonical cell order and sum the adds of each cell into
/// one (stable: a cell's family id is its first add's).
pub(super) fn sort_and_sum(adds: &mut Adds<'_>) {
    adds.sort_by(|a, b| a.key.cmp(&b.key));
    adds.dedup_by(|later, kept| {
        let same = later.key == kept.key;
        if same {
            kept.sum = kept.sum.wrapping_add(later.sum);
        }
        same
    });
}

/// The adds of `operands` when every mutation in them is an `AddToCell`
/// (the only blind writes the table makes), summed per cell in canonical
/// cell order, with the latest group clock; `None` otherwise, or when
/// something does not decode. Adds to dropped families are left out, as
/// the general path skips them.
///
/// Operands are written in canonical order (see
/// [`super::encode_operand`], [`super::partial_merge_fn`]). What a read
/// finds after a burst of writes is one or two long combined groups
/// (flushes and compactions made them) and many short ones (the
/// memtable's writes): long groups are merged as the sorted runs they are
/// (their order checked as they are read; one out of order is summed
/// with the short ones), the short ones summed per cell and sorted
/// ([`sum_loose`]), which costs fewer comparisons than sorting them all
/// together.
pub(super) fn decode_adds<'a>(
    meta: &'a TableMeta,
    operands: &[&'a [u8]],
) -> Option<(Adds<'a>, i64)> {
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
        while !cursor.is_empty() {
            let (group_clock, count) = cursor.group_head()?;
            clock = clock.max(group_clock);
            groups += 1;
            let run = count >= RUN_ADDS;
            let into = if run {
                let count = usize::try_from(count).ok()?;
                runs.push(Vec::with_capacity(count.min(cursor.remaining())));
                runs.last_mut()?
            } else {
                &mut loose
            };
            let mut sorted = true;
            for _ in 0..count {
                let stored = cursor.next_add()?;
                let Some(family) = meta.family(stored.family_id) else {
                    continue;
                };
                let add = Add {
                    key: CellKey {
                        rank: family.rank,
                        qualifier: stored.qualifier,
                        timestamp_micros: stored.timestamp_micros,
                    },
                    family_id: stored.family_id,
                    sum: stored.input,
                };
                if run && sorted {
                    sorted = into
                        .last()
                        .is_none_or(|last| last.key.cmp(&add.key).is_lt());
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

/// A cell's family id and the sum of its adds so far.
struct Sum {
    family_id: u32,
    sum: i64,
}

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
    let mut sums: FxHashMap<CellKey<'a>, Sum> =
        FxHashMap::with_capacity_and_hasher(adds.len(), Default::default());
    // Families keeping one version: per column (family rank, qualifier),
    // the newest timestamp's sum (GC hides the older versions the moment
    // they are merged).
    let mut newest: FxHashMap<(u32, &'a [u8]), Add<'a>> = FxHashMap::default();
    for add in adds.drain(..) {
        if meta.family(add.family_id).is_some_and(|f| f.newest_only) {
            let column = (add.key.rank, add.key.qualifier);
            let kept = newest.entry(column).or_insert(Add { sum: 0, ..add });
            if add.key.timestamp_micros > kept.key.timestamp_micros {
                *kept = add;
            } else if add.key.timestamp_micros == kept.key.timestamp_micros {
                kept.sum = kept.sum.wrapping_add(add.sum);
            }
        } else {
            // Sums wrap, so their order does not matter.
            let sum = sums.entry(add.key).or_insert(Sum {
                family_id: add.family_id,
                sum: 0,
            });
            sum.sum = sum.sum.wrapping_add(add.sum);
        }
    }
    adds.extend(sums.into_iter().map(|(key, sum)| Add {
        key,
        family_id: sum.family_id,
        sum: sum.sum,
    }));
    adds.extend(newest.into_values());
    adds.sort_unstable_by(|a, b| a.key.cmp(&b.key));
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
        match x.key.cmp(&y.key) {
            std::cmp::Ordering::Less => out.extend(a.next()),
            std::cmp::Ordering::Greater => out.extend(b.next()),
            std::cmp::Ordering::Equal => {
                let sum = x.sum.wrapping_add(y.sum);
                out.push(Add { sum, ..*x });
                a.next();
                b.next();
            }
        }
    }
    out.extend(a);
    out.extend(b);
    out
}

/// [`super::full_merge`] of operands that only add: the stored row's
/// cells with the sums added in, one pass over the encoded row. Applying
/// adds one group at a time and collecting GC after each (the general
/// path) shows readers the same cells: an add never removes a cell, so
/// what GC hides at a group's clock it hides at any later one, when reads
/// collect it.
///
/// A stored cell that directly follows the stored cell written before it
/// (nothing inserted or hidden between) is copied as its stored bytes,
/// with the new sum in place of its value: its shared prefix and timestamp
/// delta hold as they are, and need no re-encoding.
pub(super) fn merge_adds(
    meta: &TableMeta,
    existing: Option<&[u8]>,
    adds: Adds<'_>,
    clock: i64,
) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(existing.map_or(0, <[u8]>::len) + adds.len() * 24);
    let mut writer = GcRowWriter::new(meta, clock, &mut out);
    let mut pending = adds.into_iter().peekable();
    if let Some(stored) = existing {
        let mut cells = row_cursor(stored).ranked(meta);
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
            let at = CellKey {
                rank: family.rank,
                qualifier,
                timestamp_micros: cell.timestamp_micros,
            };
            let mut landed = None;
            while let Some(add) = pending.peek() {
                match add.key.cmp(&at) {
                    std::cmp::Ordering::Less => {
                        writer.put(
                            add.family_id,
                            add.key.qualifier,
                            add.key.timestamp_micros,
                            &add.sum.to_be_bytes(),
                        );
                        in_step = false;
                        pending.next();
                    }
                    std::cmp::Ordering::Equal => {
                        landed = Some(add.sum);
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
    for add in pending {
        writer.put(
            add.family_id,
            add.key.qualifier,
            add.key.timestamp_micros,
            &add.sum.to_be_bytes(),
        );
    }
    drop(writer);
    Some(out)
}

#[cfg(test)]
mod tests {
    use affinity_model::{GcRule, Mutation, TableSpec};

    use super::*;
    use crate::decode::decode_cells;
    use crate::merge::operand::{legacy_operand, operand};
    use crate::merge::{combine, full_merge, merge_in_order};

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
        let (adds, clock) = decode_adds(&meta, &slices).expect("only adds");
        assert_eq!(clock, 9000, "the latest group's clock");
        let fast = merge_adds(&meta, Some(&base), adds, clock).expect("merges");
        let general = merge_in_order(&meta, b"k", Some(&base), &slices).expect("merges");
        for now in [9000, 10_000, 20_000, 40_000] {
            assert_eq!(
                decode_cells(&meta, b"k", &fast, now).expect("decodes"),
                decode_cells(&meta, b"k", &general, now).expect("decodes"),
                "at {now}"
            );
        }
        // Without a stored row too.
        let (adds, clock) = decode_adds(&meta, &slices).expect("adds");
        let fast = merge_adds(&meta, None, adds, clock).expect("merges");
        let general = merge_in_order(&meta, b"k", None, &slices).expect("merges");
        assert_eq!(
            decode_cells(&meta, b"k", &fast, 9000).expect("decodes"),
            decode_cells(&meta, b"k", &general, 9000).expect("decodes")
        );
        // A set among the operands takes the general path.
        let mixed = operand(&meta, &[Mutation::set_cell("a", "y", 0, "v")], 9000);
        assert!(decode_adds(&meta, &[slices[0], mixed.as_slice()]).is_none());
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
                decode_cells(&meta, b"k", &later, now).expect("decodes"),
                decode_cells(&meta, b"k", &fast, now).expect("decodes")
            );
        }
    }
}
