//! A scan's memory of row shapes and of its prefilter's column verdicts
//! (see [`ColumnVerdicts`]), which lets [`crate::decode`] reject a cell
//! of a column the filter rules out from its stored suffix alone.

use affinity_model::eval::{CellPrefilter, CellTest, ColumnTest};
use rustc_hash::FxHashMap;

use crate::meta::TableMeta;
use crate::row::{CursorBuffers, RawCell, RowCursor};

/// What the prefilter says of a column's cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// No cell of the column may pass.
    Drop,
    /// Every cell may.
    Keep,
    /// A cell may when it passes this test of [`ColumnVerdicts::test`]
    /// (on its timestamp and value).
    Test(u32),
}

/// One remembered position of a row shape: the cell as stored there
/// (family, shared prefix length, suffix), its whole qualifier and its
/// column's verdict.
pub(crate) struct Position {
    family_id: u32,
    pub verdict: Verdict,
    shared: usize,
    suffix_word: u128,
    suffix: Vec<u8>,
    pub qualifier: Vec<u8>,
}

impl Position {
    /// True when `cell` is stored as this position's cell was.
    #[inline(always)]
    pub fn repeats(&self, cell: &RawCell<'_>) -> bool {
        self.family_id == cell.family_id
            && self.shared == cell.shared
            && self.suffix_word == cell.suffix_word
            && self.suffix.len() == cell.suffix.len()
            && (cell.suffix.len() <= 16 || self.suffix == cell.suffix)
    }
}

/// Row shapes remembered at most, besides the scratch shape.
const MAX_SHAPES: usize = 256;

/// A scan's memory of its prefilter's column verdicts
/// ([`CellPrefilter::column_test`]).
///
/// Rows of one table mostly repeat a few layouts: a wide-schema event row
/// holds the same facet columns as the other events of its type and name.
/// So the scan remembers row *shapes*, keyed by the first cell's column:
/// each cell of a shape as stored (family, shared prefix length, suffix),
/// its qualifier and its verdict. While every cell of a row so far was
/// stored exactly as in its shape, the qualifiers are equal too, so a
/// cell's suffix alone finds its verdict and its qualifier, without
/// rebuilding it. Past the first difference, cells are looked up by whole
/// qualifier among every column the scan met, and the shape learns the
/// row. A cell of a column the filter rules out then costs its decoding
/// and one comparison: no family lookup, no GC check, no test, no
/// qualifier; a cell of a column whose cells the filter tests by
/// timestamp or value (the batch reader's retention window) costs that
/// test alone, not a lookup of its qualifier among the filter's.
#[derive(Default)]
pub(crate) struct ColumnVerdicts {
    shapes: Vec<Vec<Position>>,
    /// Shape index by the first cell's family and qualifier.
    shape_of: FxHashMap<u32, FxHashMap<Box<[u8]>, usize>>,
    /// The shape of rows whose first column has none (once `MAX_SHAPES`
    /// are known): the previous such row's.
    scratch: Vec<Position>,
    by_column: FxHashMap<u32, FxHashMap<Box<[u8]>, Verdict>>,
    /// The distinct cell tests of the columns met, by [`Verdict::Test`].
    tests: Vec<CellTest>,
    /// Per family id met, the test of its every column, when the
    /// prefilter is [`CellPrefilter::family_decided`].
    by_family: Vec<(u32, ColumnTest)>,
    /// The row cursor's buffers, from one row to the next.
    pub(crate) cursor: Option<CursorBuffers>,
}

/// A row's shape in [`ColumnVerdicts`]: an index in `shapes`, `None` for
/// the scratch shape.
pub(crate) type ShapeId = Option<usize>;

impl ColumnVerdicts {
    /// The shape of a row whose first cell is in column
    /// (`family_id`, `qualifier`).
    pub fn shape_for(&mut self, family_id: u32, qualifier: &[u8]) -> ShapeId {
        if let Some(i) = self.shape_of.get(&family_id).and_then(|m| m.get(qualifier)) {
            return Some(*i);
        }
        if self.shapes.len() == MAX_SHAPES {
            return None;
        }
        self.shapes.push(Vec::new());
        let i = self.shapes.len() - 1;
        self.shape_of
            .entry(family_id)
            .or_default()
            .insert(qualifier.into(), i);
        Some(i)
    }

    /// What `prefilter`, which must be [`CellPrefilter::family_decided`],
    /// says of every column of family `family_id` (no cell of a dropped
    /// family): worked out once per scan.
    pub fn family_test(
        &mut self,
        family_id: u32,
        meta: &TableMeta,
        prefilter: &CellPrefilter,
    ) -> &ColumnTest {
        let at = match self.by_family.iter().position(|(id, _)| *id == family_id) {
            Some(at) => at,
            None => {
                let test = match meta.family(family_id) {
                    Some(family) => prefilter.column_test(&family.name, b""),
                    None => ColumnTest::NoCell,
                };
                self.by_family.push((family_id, test));
                self.by_family.len() - 1
            }
        };
        &self.by_family[at].1
    }

    /// The cell test of [`Verdict::Test`]`(i)`.
    #[inline(always)]
    pub fn test(&self, i: u32) -> &CellTest {
        &self.tests[i as usize]
    }

    pub fn shape(&self, id: ShapeId) -> &[Position] {
        match id {
            Some(i) => &self.shapes[i],
            None => &self.scratch,
        }
    }

    /// The verdict on the cell at `position`, which does not repeat its
    /// shape, by whole qualifier; the shape learns the cell (`family` is
    /// `None` for a dropped family, whose cells are skipped anyway).
    /// `cursor` is the row's, standing on the cell.
    pub fn learn(
        &mut self,
        id: ShapeId,
        position: usize,
        cell: &RawCell<'_>,
        family: Option<&str>,
        prefilter: &CellPrefilter,
        cursor: &mut RowCursor<'_>,
    ) -> Verdict {
        let whole = cursor.qualifier();
        let verdict = match family {
            None => Verdict::Drop,
            Some(family) => {
                let columns = self.by_column.entry(cell.family_id).or_default();
                match columns.get(whole) {
                    Some(verdict) => *verdict,
                    None => {
                        let verdict = match prefilter.column_test(family, whole) {
                            ColumnTest::NoCell => Verdict::Drop,
                            ColumnTest::EveryCell => Verdict::Keep,
                            ColumnTest::Cells(test) => {
                                // Columns mostly share one test (a
                                // timestamp range): kept once.
                                let i = match self.tests.iter().position(|t| *t == test) {
                                    Some(i) => i,
                                    None => {
                                        self.tests.push(test);
                                        self.tests.len() - 1
                                    }
                                };
                                Verdict::Test(i as u32)
                            }
                        };
                        columns.insert(whole.into(), verdict);
                        verdict
                    }
                }
            }
        };
        let shape = match id {
            Some(i) => &mut self.shapes[i],
            None => &mut self.scratch,
        };
        // Positions are fed in order from 0, so a shape stays dense.
        if position == shape.len() {
            shape.push(Position {
                family_id: 0,
                verdict: Verdict::Drop,
                shared: 0,
                suffix_word: 0,
                suffix: Vec::new(),
                qualifier: Vec::new(),
            });
        }
        let p = &mut shape[position];
        p.family_id = cell.family_id;
        p.verdict = verdict;
        p.shared = cell.shared;
        p.suffix_word = cell.suffix_word;
        p.suffix.clear();
        p.suffix.extend_from_slice(cell.suffix);
        p.qualifier.clear();
        p.qualifier.extend_from_slice(whole);
        verdict
    }

    /// End a row of `cells` cells that stopped repeating its shape: the
    /// shape's positions past its end followed other cells than its own,
    /// so they are forgotten.
    pub fn forget_past(&mut self, id: ShapeId, cells: usize) {
        match id {
            Some(i) => self.shapes[i].truncate(cells),
            None => self.scratch.truncate(cells),
        }
    }
}
