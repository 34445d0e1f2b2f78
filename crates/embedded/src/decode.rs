//! Stored rows (see [`crate::row`]) into model rows, with GC visibility
//! applied.
//!
//! A read copies the row key and the stored value into one buffer that
//! becomes a single `Bytes`; every cell's value is a slice of it, and so is
//! its qualifier (stored whole, or rebuilt from the previous cell's into
//! the same buffer), so decoding allocates per row, not per cell (except
//! the family name, which `Cell` owns as a `String`). Cells GC hides, and
//! cells the read's prefilter rules out, are dropped before any `Cell` is
//! built.

use std::ops::Range;

use affinity_model::eval::{CellPrefilter, CellTest, ColumnTest};
use affinity_model::gc::deletes;
use affinity_model::{Bytes, Cell, CellRef, Result, Row};

use crate::meta::{FamilyView, TableMeta};
use crate::row::{corrupt_row, row_cursor_with, RawCell};
pub(crate) use crate::shapes::ColumnVerdicts;
use crate::shapes::Verdict;

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
    pub fn visible(&mut self, cell: &RawCell<'_>) -> Option<&'m FamilyView> {
        self.version = if cell.same_column {
            self.version + 1
        } else {
            0
        };
        let family = self.meta.family(cell.family_id)?;
        (!deletes(
            &family.gc_rule,
            self.version,
            cell.timestamp_micros,
            self.now_micros,
        ))
        .then_some(family)
    }
}

/// Offset of `part` (a slice of `whole`) within `whole`.
fn span(whole: &[u8], part: &[u8]) -> Range<usize> {
    let start = part.as_ptr() as usize - whole.as_ptr() as usize;
    start..start + part.len()
}

/// Where a kept cell's qualifier is: in the stored value, or rebuilt in
/// the arena.
#[derive(Clone, Copy)]
enum Qualifier<'v> {
    InValue(&'v [u8]),
    InArena(usize, usize),
}

/// Decode a stored row for a read: the cells visible at `now_micros` that
/// `prefilter` lets through; `None` when no cell is left. The row's key,
/// the stored value and the rebuilt qualifiers are copied into one buffer
/// whose slices the cells' qualifiers and values are.
pub(crate) fn read_row(
    meta: &TableMeta,
    key: &[u8],
    value: &[u8],
    now_micros: i64,
    prefilter: Option<&CellPrefilter>,
    verdicts: &mut ColumnVerdicts,
) -> Result<Option<Row>> {
    let mut kept = Vec::new();
    let mut arena = Vec::new();
    decode_kept(
        meta,
        key,
        value,
        now_micros,
        prefilter,
        verdicts,
        &mut arena,
        |family, qualifier, ts, v| kept.push((family, qualifier, ts, v)),
    )?;
    if kept.is_empty() {
        return Ok(None);
    }
    let mut buf = Vec::with_capacity(key.len() + value.len() + arena.len());
    buf.extend_from_slice(key);
    buf.extend_from_slice(value);
    buf.extend_from_slice(&arena);
    let data = Bytes::from(buf);
    let at = key.len();
    let arena_at = at + value.len();
    let in_value = |part: &[u8]| {
        let r = span(value, part);
        data.slice(at + r.start..at + r.end)
    };
    let cells = kept
        .into_iter()
        .map(|(family, qualifier, ts, v)| Cell {
            family: family.to_string(),
            qualifier: match qualifier {
                Qualifier::InValue(q) => in_value(q),
                Qualifier::InArena(start, end) => data.slice(arena_at + start..arena_at + end),
            },
            timestamp_micros: ts,
            value: in_value(v),
            labels: Vec::new(),
        })
        .collect();
    Ok(Some(Row {
        key: data.slice(..at),
        cells,
    }))
}

/// Decode a stored row for a visiting read: the cells visible at
/// `now_micros` that `prefilter` lets through, as views of `value`, of
/// `arena` (qualifiers rebuilt from a shared prefix; cleared first) and of
/// `meta`'s family names, pushed onto `out` (cleared first).
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_refs<'v>(
    meta: &'v TableMeta,
    key: &[u8],
    value: &'v [u8],
    now_micros: i64,
    prefilter: Option<&CellPrefilter>,
    verdicts: &mut ColumnVerdicts,
    arena: &'v mut Vec<u8>,
    out: &mut Vec<CellRef<'v>>,
) -> Result<()> {
    out.clear();
    // Cells whose qualifier is in the arena: their index in `out` and
    // where in the arena, filled in once the arena stops growing. The
    // thread's list is kept between rows.
    let mut rebuilt = REBUILT.with(|r| std::mem::take(&mut *r.borrow_mut()));
    rebuilt.clear();
    decode_kept(
        meta,
        key,
        value,
        now_micros,
        prefilter,
        verdicts,
        arena,
        |family, qualifier, ts, v| {
            let qualifier = match qualifier {
                Qualifier::InValue(q) => q,
                Qualifier::InArena(start, end) => {
                    rebuilt.push((out.len(), start, end));
                    &[]
                }
            };
            out.push(CellRef {
                family,
                qualifier,
                timestamp_micros: ts,
                value: v,
            });
        },
    )?;
    let arena: &'v [u8] = arena;
    for &(i, start, end) in &rebuilt {
        out[i].qualifier = &arena[start..end];
    }
    // Kept unless a huge row grew it (every reading thread keeps one).
    if rebuilt.capacity() <= 1 << 13 {
        REBUILT.with(|r| *r.borrow_mut() = rebuilt);
    }
    Ok(())
}

thread_local! {
    /// [`read_refs`]'s list of rebuilt qualifiers, kept between rows.
    static REBUILT: std::cell::RefCell<Vec<(usize, usize, usize)>> = const {
        std::cell::RefCell::new(Vec::new())
    };
}

/// What one read keeps of a row, cell by cell: the part of the decoding
/// loop after a cell's verdict.
struct Keeper<'m, 'a, K> {
    meta: &'m TableMeta,
    now_micros: i64,
    arena: &'a mut Vec<u8>,
    keep: K,
}

impl<'m, K: FnMut(&'m str, Qualifier<'m>, i64, &'m [u8])> Keeper<'m, '_, K> {
    /// Keep `cell` (version `version` of its column, of a column the
    /// prefilter does not rule out; `test`: what the prefilter still asks
    /// of its cells) unless GC hides it or `test` rules it out; `whole`
    /// gives its whole qualifier when it is not stored whole.
    #[inline(always)]
    fn offer<'q>(
        &mut self,
        cell: &RawCell<'m>,
        version: usize,
        test: Option<&CellTest>,
        whole: impl FnOnce() -> &'q [u8],
    ) {
        let Some(family) = self.meta.family(cell.family_id) else {
            return;
        };
        if test.is_some_and(|t| !t.may_pass(cell.timestamp_micros, cell.value)) {
            return;
        }
        if deletes(
            &family.gc_rule,
            version,
            cell.timestamp_micros,
            self.now_micros,
        ) {
            return;
        }
        let qualifier = match cell.qualifier_in_row() {
            Some(q) => Qualifier::InValue(q),
            None => {
                let start = self.arena.len();
                self.arena.extend_from_slice(whole());
                Qualifier::InArena(start, self.arena.len())
            }
        };
        (self.keep)(&family.name, qualifier, cell.timestamp_micros, cell.value);
    }
}

/// The one decoding loop of reads: `keep(family, qualifier, timestamp,
/// value)` for each cell visible at `now_micros` that `prefilter` lets
/// through, in stored order; qualifiers not stored whole are copied into
/// `arena` (cleared first).
///
/// With a prefilter, a row is walked in two phases: while it repeats its
/// shape (see [`ColumnVerdicts`]), each cell is compared with its shape's
/// position and a cell of a column the filter rules out costs nothing
/// more; from the first cell that differs, cells are looked up by whole
/// qualifier and the shape learns them.
#[allow(clippy::too_many_arguments)]
fn decode_kept<'v>(
    meta: &'v TableMeta,
    key: &[u8],
    value: &'v [u8],
    now_micros: i64,
    prefilter: Option<&CellPrefilter>,
    verdicts: &mut ColumnVerdicts,
    arena: &mut Vec<u8>,
    keep: impl FnMut(&'v str, Qualifier<'v>, i64, &'v [u8]),
) -> Result<()> {
    arena.clear();
    let mut keeper = Keeper {
        meta,
        now_micros,
        arena,
        keep,
    };
    let mut cursor =
        row_cursor_with(value, verdicts.cursor.take().unwrap_or_default()).ranked(meta);
    let (mut position, mut version) = (0usize, 0usize);
    let mut next = cursor.next_cell();
    match (prefilter, next) {
        (None, _) => {
            while let Some(cell) = next {
                version = if cell.same_column { version + 1 } else { 0 };
                keeper.offer(&cell, version, None, || cursor.qualifier());
                next = cursor.next_cell();
            }
        }
        (Some(_), None) => {}
        (Some(prefilter), Some(_)) if prefilter.family_decided() => {
            // One test per family, whatever the qualifier: no shapes, and
            // a cell's qualifier is rebuilt only when the cell is kept (the
            // profile reader drops most of family `i` on its value alone).
            while let Some(cell) = next {
                version = if cell.same_column { version + 1 } else { 0 };
                match verdicts.family_test(cell.family_id, meta, prefilter) {
                    ColumnTest::NoCell => {}
                    ColumnTest::EveryCell => {
                        keeper.offer(&cell, version, None, || cursor.qualifier())
                    }
                    ColumnTest::Cells(test) => {
                        keeper.offer(&cell, version, Some(test), || cursor.qualifier())
                    }
                }
                next = cursor.next_cell();
            }
        }
        (Some(prefilter), Some(first)) => {
            // The first cell's qualifier is stored whole.
            let id = verdicts.shape_for(first.family_id, first.suffix);
            let shape = verdicts.shape(id);
            // While the row repeats its shape.
            while let Some(cell) = next {
                let Some(p) = shape.get(position).filter(|p| p.repeats(&cell)) else {
                    break;
                };
                version = if cell.same_column { version + 1 } else { 0 };
                position += 1;
                match p.verdict {
                    Verdict::Drop => {}
                    Verdict::Keep => keeper.offer(&cell, version, None, || &p.qualifier),
                    Verdict::Test(i) => {
                        keeper.offer(&cell, version, Some(verdicts.test(i)), || &p.qualifier)
                    }
                }
                next = cursor.next_cell();
            }
            // From the first cell that differs.
            if next.is_some() {
                while let Some(cell) = next {
                    version = if cell.same_column { version + 1 } else { 0 };
                    let family = meta.family(cell.family_id).map(|f| f.name.as_str());
                    let verdict =
                        verdicts.learn(id, position, &cell, family, prefilter, &mut cursor);
                    position += 1;
                    match verdict {
                        Verdict::Drop => {}
                        Verdict::Keep => keeper.offer(&cell, version, None, || cursor.qualifier()),
                        Verdict::Test(i) => {
                            let test = Some(verdicts.test(i));
                            keeper.offer(&cell, version, test, || cursor.qualifier())
                        }
                    }
                    next = cursor.next_cell();
                }
                verdicts.forget_past(id, position);
            }
        }
    }
    let failed = cursor.failed();
    verdicts.cursor = Some(cursor.into_buffers());
    if failed {
        return Err(corrupt_row(key));
    }
    Ok(())
}

/// Decode a stored row for a write: its visible cells at `now_micros`,
/// in canonical order (what the reference model keeps of a row it is
/// about to write).
pub(crate) fn decode_cells(
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

#[cfg(test)]
mod tests {
    use std::ops::Bound;

    use affinity_model::eval::CompiledFilter;
    use affinity_model::{ColumnRange, GcRule, RowFilter, TableSpec, TimestampRange};
    use proptest::prelude::*;

    use super::*;
    use crate::row::RowWriter;

    /// Families `a` (id 0, no GC), `b` (id 1, two versions) and `c` (id 2,
    /// dropped).
    fn meta() -> TableMeta {
        let spec = TableSpec::new()
            .with_family("a", GcRule::None)
            .with_family("b", GcRule::MaxVersions(2))
            .with_family("c", GcRule::None);
        let meta = TableMeta::from_spec("cf".into(), &spec);
        let mut families = meta.families.clone();
        families.remove("c");
        TableMeta::new(meta.cf_name.clone(), meta.next_family_id, families)
    }

    /// Qualifiers sharing prefixes, so rows repeat, extend and cut each
    /// other's shapes.
    const QUALIFIERS: [&str; 7] = ["", "x", "xa", "xab", "xb", "y", "yb"];

    type Owned = (String, Vec<u8>, i64, Vec<u8>);

    fn stored(cells: &[(u32, usize, i64, u8)]) -> Vec<u8> {
        let mut cells = cells.to_vec();
        cells.sort_by(|a, b| (a.0, QUALIFIERS[a.1], b.2).cmp(&(b.0, QUALIFIERS[b.1], a.2)));
        cells.dedup_by(|a, b| (a.0, a.1, a.2) == (b.0, b.1, b.2));
        let mut out = Vec::new();
        let mut writer = RowWriter::new(&mut out);
        for (f, q, ts, v) in cells {
            writer.put(f, QUALIFIERS[q].as_bytes(), ts * 1000, &[v]);
        }
        out
    }

    fn owned(cells: &[CellRef<'_>]) -> Vec<Owned> {
        cells
            .iter()
            .map(|c| {
                (
                    c.family.to_string(),
                    c.qualifier.to_vec(),
                    c.timestamp_micros,
                    c.value.to_vec(),
                )
            })
            .collect()
    }

    fn row_cells(row: Option<Row>) -> Vec<Owned> {
        row.map(|r| {
            r.cells
                .into_iter()
                .map(|c| {
                    (
                        c.family,
                        c.qualifier.to_vec(),
                        c.timestamp_micros,
                        c.value.to_vec(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
    }

    fn column(family: &str, q: usize) -> RowFilter {
        let q = Bytes::from(QUALIFIERS[q]);
        RowFilter::ColumnRange(ColumnRange {
            family: family.to_string(),
            start: Bound::Included(q.clone()),
            end: Bound::Included(q),
        })
    }

    fn filter_strategy() -> impl Strategy<Value = RowFilter> {
        let columns =
            proptest::collection::vec((prop_oneof![Just("a"), Just("b")], 0..7usize), 1..5)
                .prop_map(|cs| {
                    RowFilter::interleave(cs.into_iter().map(|(f, q)| column(f, q)).collect())
                });
        prop_oneof![
            columns.clone(),
            (columns.clone(), 0i64..4).prop_map(|(f, from)| RowFilter::Chain(vec![
                RowFilter::TimestampRange(TimestampRange::new(from * 1000, 0)),
                f
            ])),
            proptest::collection::vec(0..7usize, 1..4).prop_map(|qs| RowFilter::interleave(
                qs.into_iter()
                    .map(|q| RowFilter::Chain(vec![
                        RowFilter::exact_family("b"),
                        RowFilter::exact_qualifier(QUALIFIERS[q].as_bytes())
                    ]))
                    .collect()
            )),
            Just(RowFilter::ColumnQualifierRegex(Bytes::from_static(b"x.*"))),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Rows decoded one after the other through one scan's memory of
        /// shapes give what each gives decoded alone, and what the
        /// model's filter keeps of the whole row.
        #[test]
        fn remembered_shapes_never_change_a_read(
            rows in proptest::collection::vec(
                proptest::collection::vec((0u32..3, 0..7usize, 0i64..5, any::<u8>()), 0..9),
                1..12,
            ),
            filter in filter_strategy(),
        ) {
            let meta = meta();
            let compiled = CompiledFilter::compile(&filter).expect("a valid filter");
            let prefilter = compiled.cell_prefilter();
            let exact = prefilter.as_ref().is_some_and(CellPrefilter::is_exact);
            let now = 10_000;
            let mut shared = ColumnVerdicts::default();
            for cells in &rows {
                let value = stored(cells);
                let mut arena = Vec::new();
                let mut out = Vec::new();
                read_refs(&meta, b"k", &value, now, prefilter.as_ref(), &mut shared, &mut arena, &mut out)
                    .expect("decodes");
                let remembered = owned(&out);
                let mut fresh_arena = Vec::new();
                let mut fresh_out = Vec::new();
                read_refs(
                    &meta, b"k", &value, now, prefilter.as_ref(),
                    &mut ColumnVerdicts::default(), &mut fresh_arena, &mut fresh_out,
                )
                .expect("decodes");
                prop_assert_eq!(&remembered, &owned(&fresh_out));

                let whole = read_row(&meta, b"k", &value, now, None, &mut ColumnVerdicts::default())
                    .expect("decodes");
                let expected = row_cells(whole.and_then(|r| compiled.apply(r)));
                let got = if exact {
                    remembered
                } else {
                    let pruned = read_row(&meta, b"k", &value, now, prefilter.as_ref(), &mut shared)
                        .expect("decodes");
                    row_cells(pruned.and_then(|r| compiled.apply(r)))
                };
                prop_assert_eq!(got, expected);
            }
        }
    }

    #[test]
    fn a_row_cut_short_of_its_shape_does_not_teach_it_wrong() {
        // Row 1 sets the shape [x, y, yb]; row 2 repeats x, then differs
        // (xa) and ends; row 3 is [x, xa, xb]: its third cell is stored
        // as (shared 1, "b"), as row 1's was (yb after y), but follows
        // xa, so it is xb. Row 2 must have cut the shape short.
        let meta = meta();
        let filter = RowFilter::interleave(vec![column("a", 4)]);
        let compiled = CompiledFilter::compile(&filter).expect("valid");
        let prefilter = compiled.cell_prefilter();
        let mut verdicts = ColumnVerdicts::default();
        let mut read = |cells: &[(u32, usize, i64, u8)]| {
            let value = stored(cells);
            let (mut arena, mut out) = (Vec::new(), Vec::new());
            read_refs(
                &meta,
                b"k",
                &value,
                0,
                prefilter.as_ref(),
                &mut verdicts,
                &mut arena,
                &mut out,
            )
            .expect("decodes");
            owned(&out)
        };
        assert!(read(&[(0, 1, 1, 1), (0, 5, 1, 2), (0, 6, 1, 3)]).is_empty());
        assert!(read(&[(0, 1, 1, 1), (0, 2, 1, 2)]).is_empty());
        let third = read(&[(0, 1, 1, 1), (0, 2, 1, 2), (0, 4, 1, 3)]);
        assert_eq!(
            third,
            vec![("a".to_string(), b"xb".to_vec(), 1000, vec![3])]
        );
    }

    /// Found by fuzzing: a row with a dropped family's cell between two
    /// of `a`'s decoded, and GC or a merge, dropping it, wrote a row whose
    /// `a` cells are out of order. Families come together and by name;
    /// dropped ones anywhere.
    #[test]
    fn families_out_of_order_are_corrupt() {
        let meta = meta();
        let raw = |cells: &[(u32, &[u8], i64)]| {
            let mut out = Vec::new();
            let mut writer = RowWriter::new(&mut out);
            for (f, q, ts) in cells {
                writer.put(*f, q, *ts, b"v");
            }
            out
        };
        let decodes =
            |cells: &[(u32, &[u8], i64)]| decode_cells(&meta, b"k", &raw(cells), 0).is_ok();
        assert!(decodes(&[(0, b"x", 1), (2, b"", 1), (1, b"", 1)]));
        assert!(decodes(&[(2, b"z", 1), (0, b"x", 1), (1, b"", 1)]));
        assert!(!decodes(&[(1, b"x", 1), (0, b"y", 1)]));
        assert!(!decodes(&[(0, b"xab", 1), (2, b"", 1), (0, b"", 1)]));
        assert!(!decodes(&[(0, b"x", 1), (1, b"", 1), (0, b"y", 1)]));
    }
}
