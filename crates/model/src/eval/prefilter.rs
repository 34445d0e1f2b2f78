//! A per-cell necessary condition of a filter, for backends to test on a
//! cell's parts before they build a `Cell` (the batch reader's filters
//! keep a few cells of many; building the others only to drop them is
//! most of the cost of a filtered scan).
//!
//! For every filter node `N` the derived predicate `P_N` satisfies
//! `N(X) == N(P_N(X))` for any row `X`, where `P_N(X)` keeps the cells of
//! `X` that pass `P_N`: removing the cells `P_N` rejects never changes the
//! output. It is derived as:
//! - a cell test (family, qualifier, column range, timestamp, value): the
//!   test itself; `PassAll`: true; `BlockAll`: false;
//! - `Interleave`: any child's predicate (each child sees at least the
//!   cells its own predicate keeps);
//! - `Chain`: all predicates of its leading *selectors* (nodes that keep or
//!   drop each cell on its own, unchanged: cell tests and interleaves or
//!   chains of them) and of the first node after them; later nodes see
//!   cells the first non-selector may have changed, so they add nothing;
//! - anything else (limits, offsets, conditions, labels, sinks, row-key
//!   regexes, samples): true.
//!
//! The predicate is *exact* ([`CellPrefilter::is_exact`]) when the filter
//! is a tree of selectors whose interleaves' branches are pairwise
//! disjoint (their exact families or exact qualifiers share no string):
//! then `N(X)` is exactly the cells of `X` that pass `P_N`, in order, and a
//! backend may skip the filter. (An interleave whose branches overlap
//! outputs a cell once per branch, which no per-cell test expresses.)
//! Alternatives of exact-qualifier tests are merged into one sorted set.

use super::compile::Node;
use super::in_bounds;
use super::regex::{in_literal_set, FullMatch};
use std::ops::Bound;
use std::sync::Arc;

use crate::filter::{ColumnRange, TimestampRange, ValueRange};

/// See the module docs. Built by [`super::CompiledFilter::cell_prefilter`].
#[derive(Debug, Clone)]
pub struct CellPrefilter {
    pre: Pre,
    exact: bool,
    /// When the test is a conjunction of column tests and cell tests
    /// (`All` of parts testing only the family and qualifier, or only the
    /// timestamp and value): its cell part, the residual of every column
    /// its column parts pass (`None` if it has no cell part).
    cell_part: Option<Option<CellTest>>,
}

#[derive(Debug, Clone)]
enum Pre {
    True,
    False,
    All(Vec<Pre>),
    Any(Vec<Pre>),
    Family(FullMatch),
    Qualifier(FullMatch),
    /// Qualifier is one of these (sorted, deduplicated).
    QualifierIn(Vec<Box<[u8]>>),
    /// Family is this one and qualifier one of these (sorted,
    /// deduplicated): alternatives of single-column ranges.
    ColumnIn(String, Vec<Box<[u8]>>),
    ColumnRange(ColumnRange),
    Timestamp(TimestampRange),
    Value(FullMatch),
    ValueRange(ValueRange),
}

impl CellPrefilter {
    /// The predicate of `node`, `None` when it keeps every cell.
    pub(crate) fn of(node: &Node) -> Option<CellPrefilter> {
        match simplify(derive(node)) {
            Pre::True => None,
            pre => Some(CellPrefilter {
                cell_part: cell_part(&pre),
                pre,
                exact: exact(node),
            }),
        }
    }

    /// True when the cells passing this test, in order, *are* the filter's
    /// output (see the module docs).
    pub fn is_exact(&self) -> bool {
        self.exact
    }

    /// Whether a cell with these parts may reach the filter's output.
    pub fn may_pass(
        &self,
        family: &str,
        qualifier: &[u8],
        timestamp_micros: i64,
        value: &[u8],
    ) -> bool {
        test(&self.pre, family, qualifier, timestamp_micros, value)
    }

    /// True when the test looks at no qualifier: every column of a family
    /// gets the same [`CellPrefilter::column_test`], so a backend may
    /// decide it once per family (the profile reader's filter keeps whole
    /// families, and of one family only the cells with some values).
    pub fn family_decided(&self) -> bool {
        !tests_qualifier(&self.pre)
    }

    /// What the test says of every cell of a column, whatever its
    /// timestamp and value: `Some(false)` when no cell of it may pass,
    /// `Some(true)` when every cell may, `None` when it depends on the
    /// cell. A backend may remember this per column and test only the
    /// cells of columns answering `None`.
    pub fn column_verdict(&self, family: &str, qualifier: &[u8]) -> Option<bool> {
        match self.column_test(family, qualifier) {
            ColumnTest::NoCell => Some(false),
            ColumnTest::EveryCell => Some(true),
            ColumnTest::Cells(_) => None,
        }
    }

    /// The test specialised to one column: its family and qualifier tests
    /// decided, what is left depends on a cell's timestamp and value only.
    /// A backend may remember this per column, so a cell of a column that
    /// depends on the cell (the batch reader's columns within a retention
    /// window) costs a timestamp comparison, not a qualifier lookup.
    pub fn column_test(&self, family: &str, qualifier: &[u8]) -> ColumnTest {
        match (column(&self.pre, family, qualifier), &self.cell_part) {
            (Some(false), _) => ColumnTest::NoCell,
            (Some(true), _) => ColumnTest::EveryCell,
            // Every column part passed (or the test would be false).
            (None, Some(Some(cells))) => ColumnTest::Cells(cells.clone()),
            (None, _) => match simplify(residual(&self.pre, family, qualifier)) {
                Pre::False => ColumnTest::NoCell,
                Pre::True => ColumnTest::EveryCell,
                pre => ColumnTest::Cells(CellTest(Arc::new(pre))),
            },
        }
    }
}

/// See [`CellPrefilter::cell_part`]: `None` when `pre` mixes column and
/// cell tests otherwise than in a conjunction of parts testing one or
/// the other.
fn cell_part(pre: &Pre) -> Option<Option<CellTest>> {
    let parts = match pre {
        Pre::All(parts) => parts.as_slice(),
        one => std::slice::from_ref(one),
    };
    let mut cells = Vec::new();
    for p in parts {
        match (tests_column(p), tests_cell(p)) {
            (true, true) => return None,
            (false, true) => cells.push(p.clone()),
            _ => {}
        }
    }
    Some(match simplify(Pre::All(cells)) {
        Pre::True => None,
        cells => Some(CellTest(Arc::new(cells))),
    })
}

/// Whether `pre` tests a family or qualifier somewhere.
fn tests_column(pre: &Pre) -> bool {
    match pre {
        Pre::True | Pre::False => false,
        Pre::All(parts) | Pre::Any(parts) => parts.iter().any(tests_column),
        Pre::Timestamp(_) | Pre::Value(_) | Pre::ValueRange(_) => false,
        _ => true,
    }
}

/// Whether `pre` tests a qualifier somewhere.
fn tests_qualifier(pre: &Pre) -> bool {
    match pre {
        Pre::All(parts) | Pre::Any(parts) => parts.iter().any(tests_qualifier),
        Pre::Qualifier(_) | Pre::QualifierIn(_) | Pre::ColumnIn(..) | Pre::ColumnRange(_) => true,
        Pre::True
        | Pre::False
        | Pre::Family(_)
        | Pre::Timestamp(_)
        | Pre::Value(_)
        | Pre::ValueRange(_) => false,
    }
}

/// Whether `pre` tests a timestamp or value somewhere.
fn tests_cell(pre: &Pre) -> bool {
    match pre {
        Pre::All(parts) | Pre::Any(parts) => parts.iter().any(tests_cell),
        Pre::Timestamp(_) | Pre::Value(_) | Pre::ValueRange(_) => true,
        _ => false,
    }
}

/// Three-valued [`test`] over a column: timestamp and value tests unknown.
fn column(pre: &Pre, family: &str, qualifier: &[u8]) -> Option<bool> {
    match pre {
        Pre::Timestamp(_) | Pre::Value(_) | Pre::ValueRange(_) => None,
        Pre::All(parts) => {
            let mut out = Some(true);
            for p in parts {
                match column(p, family, qualifier) {
                    Some(false) => return Some(false),
                    None => out = None,
                    Some(true) => {}
                }
            }
            out
        }
        Pre::Any(parts) => {
            let mut out = Some(false);
            for p in parts {
                match column(p, family, qualifier) {
                    Some(true) => return Some(true),
                    None => out = None,
                    Some(false) => {}
                }
            }
            out
        }
        other => Some(test(other, family, qualifier, 0, &[])),
    }
}

/// A [`CellPrefilter`] specialised to one column, see
/// [`CellPrefilter::column_test`].
#[derive(Debug, Clone)]
pub enum ColumnTest {
    /// No cell of the column may pass.
    NoCell,
    /// Every cell of the column may pass.
    EveryCell,
    /// A cell may pass when its timestamp and value pass this test.
    Cells(CellTest),
}

/// The part of a [`CellPrefilter`] that depends on a cell's timestamp and
/// value, for the cells of one column.
#[derive(Debug, Clone)]
pub struct CellTest(Arc<Pre>);

impl CellTest {
    /// Whether a cell of the column with this timestamp and value may
    /// reach the filter's output (as [`CellPrefilter::may_pass`] says).
    #[inline]
    pub fn may_pass(&self, timestamp_micros: i64, value: &[u8]) -> bool {
        // No family or qualifier test is left in a residual.
        test(&self.0, "", &[], timestamp_micros, value)
    }
}

/// Equal tests: two columns' tests are equal when they test the same
/// timestamps and values the same way (a value regex by its pattern).
impl PartialEq for CellTest {
    fn eq(&self, other: &CellTest) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || same(&self.0, &other.0)
    }
}

fn same(a: &Pre, b: &Pre) -> bool {
    match (a, b) {
        (Pre::True, Pre::True) | (Pre::False, Pre::False) => true,
        (Pre::All(a), Pre::All(b)) | (Pre::Any(a), Pre::Any(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same(a, b))
        }
        (Pre::Timestamp(a), Pre::Timestamp(b)) => a == b,
        (Pre::ValueRange(a), Pre::ValueRange(b)) => a == b,
        (Pre::Value(a), Pre::Value(b)) => a.pattern() == b.pattern(),
        // Column tests are never left in a residual.
        _ => false,
    }
}

/// `pre` with its family and qualifier tests decided for one column.
fn residual(pre: &Pre, family: &str, qualifier: &[u8]) -> Pre {
    match pre {
        Pre::All(parts) => Pre::All(
            parts
                .iter()
                .map(|p| residual(p, family, qualifier))
                .collect(),
        ),
        Pre::Any(parts) => Pre::Any(
            parts
                .iter()
                .map(|p| residual(p, family, qualifier))
                .collect(),
        ),
        Pre::Timestamp(_) | Pre::Value(_) | Pre::ValueRange(_) => pre.clone(),
        column => {
            if test(column, family, qualifier, 0, &[]) {
                Pre::True
            } else {
                Pre::False
            }
        }
    }
}

fn test(pre: &Pre, family: &str, qualifier: &[u8], ts: i64, value: &[u8]) -> bool {
    match pre {
        Pre::True => true,
        Pre::False => false,
        Pre::All(parts) => parts.iter().all(|p| test(p, family, qualifier, ts, value)),
        Pre::Any(parts) => parts.iter().any(|p| test(p, family, qualifier, ts, value)),
        Pre::Family(m) => m.is_match(family.as_bytes()),
        Pre::Qualifier(m) => m.is_match(qualifier),
        Pre::QualifierIn(set) => in_literal_set(set, qualifier),
        Pre::ColumnIn(f, set) => family == f && in_literal_set(set, qualifier),
        Pre::ColumnRange(r) => family == r.family && in_bounds(qualifier, &r.start, &r.end),
        Pre::Timestamp(r) => r.contains(ts),
        Pre::Value(m) => m.is_match(value),
        Pre::ValueRange(r) => in_bounds(value, &r.start, &r.end),
    }
}

/// Nodes that keep or drop each cell on its own and leave it unchanged.
fn is_selector(node: &Node) -> bool {
    match node {
        Node::PassAll
        | Node::BlockAll
        | Node::Family(_)
        | Node::Qualifier(_)
        | Node::ColumnRange(_)
        | Node::Timestamp(_)
        | Node::Value(_)
        | Node::ValueRange(_) => true,
        Node::Chain(nodes) | Node::Interleave(nodes) => nodes.iter().all(is_selector),
        _ => false,
    }
}

/// What a selector says of the columns it keeps: the exact families and
/// exact qualifiers it allows (`None`: any).
#[derive(Default)]
struct Columns<'a> {
    families: Option<Vec<&'a [u8]>>,
    qualifiers: Option<Vec<&'a [u8]>>,
}

fn intersect<'a>(a: Option<Vec<&'a [u8]>>, b: Option<Vec<&'a [u8]>>) -> Option<Vec<&'a [u8]>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.into_iter().filter(|x| b.contains(x)).collect()),
        (a, None) => a,
        (None, b) => b,
    }
}

fn literals(m: &FullMatch) -> Option<Vec<&[u8]>> {
    m.literals().map(|set| set.iter().map(|l| &**l).collect())
}

fn columns(node: &Node) -> Columns<'_> {
    match node {
        Node::Family(m) => Columns {
            families: literals(m),
            qualifiers: None,
        },
        Node::Qualifier(m) => Columns {
            families: None,
            qualifiers: literals(m),
        },
        Node::ColumnRange(r) => match single_column(r) {
            Some(q) => Columns {
                families: Some(vec![r.family.as_bytes()]),
                qualifiers: Some(vec![q]),
            },
            None => Columns {
                families: Some(vec![r.family.as_bytes()]),
                qualifiers: None,
            },
        },
        Node::Chain(nodes) => nodes
            .iter()
            .map(columns)
            .fold(Columns::default(), |a, b| Columns {
                families: intersect(a.families, b.families),
                qualifiers: intersect(a.qualifiers, b.qualifiers),
            }),
        _ => Columns::default(),
    }
}

/// The one qualifier a column range `[q, q]` holds.
fn single_column(r: &ColumnRange) -> Option<&[u8]> {
    match (&r.start, &r.end) {
        (Bound::Included(a), Bound::Included(b)) if a == b => Some(a),
        _ => None,
    }
}

fn disjoint(a: &Columns<'_>, b: &Columns<'_>) -> bool {
    let apart = |x: &Option<Vec<&[u8]>>, y: &Option<Vec<&[u8]>>| match (x, y) {
        (Some(x), Some(y)) => !x.iter().any(|s| y.contains(s)),
        _ => false,
    };
    apart(&a.families, &b.families) || apart(&a.qualifiers, &b.qualifiers)
}

/// See [`CellPrefilter::is_exact`].
fn exact(node: &Node) -> bool {
    match node {
        Node::Chain(nodes) => nodes.iter().all(|n| is_selector(n) && exact(n)),
        Node::Interleave(nodes) => {
            let cols: Vec<Columns<'_>> = nodes.iter().map(columns).collect();
            nodes.iter().all(|n| is_selector(n) && exact(n))
                && (0..cols.len())
                    .all(|i| (i + 1..cols.len()).all(|j| disjoint(&cols[i], &cols[j])))
        }
        n => is_selector(n),
    }
}

fn derive(node: &Node) -> Pre {
    match node {
        Node::PassAll => Pre::True,
        Node::BlockAll => Pre::False,
        Node::Family(m) => Pre::Family(m.clone()),
        Node::Qualifier(m) => Pre::Qualifier(m.clone()),
        Node::ColumnRange(r) => match single_column(r) {
            Some(q) => Pre::ColumnIn(r.family.clone(), vec![q.into()]),
            None => Pre::ColumnRange(r.clone()),
        },
        Node::Timestamp(r) => Pre::Timestamp(*r),
        Node::Value(m) => Pre::Value(m.clone()),
        Node::ValueRange(r) => Pre::ValueRange(r.clone()),
        Node::Interleave(nodes) => Pre::Any(nodes.iter().map(derive).collect()),
        Node::Chain(nodes) => {
            let mut parts = Vec::new();
            for n in nodes {
                parts.push(derive(n));
                if !is_selector(n) {
                    break;
                }
            }
            Pre::All(parts)
        }
        _ => Pre::True,
    }
}

/// A family and some of its qualifiers.
type FamilyColumns<'a> = (&'a str, &'a [Box<[u8]>]);

fn simplify(pre: Pre) -> Pre {
    match pre {
        Pre::All(parts) => {
            let mut kept = Vec::new();
            for p in parts.into_iter().map(simplify) {
                match p {
                    Pre::True => {}
                    Pre::False => return Pre::False,
                    p => kept.push(p),
                }
            }
            match kept.len() {
                0 => Pre::True,
                1 => kept.pop().unwrap_or(Pre::True),
                _ => Pre::All(kept),
            }
        }
        Pre::Any(parts) => {
            let mut kept = Vec::new();
            for p in parts.into_iter().map(simplify) {
                match p {
                    Pre::True => return Pre::True,
                    Pre::False => {}
                    p => kept.push(p),
                }
            }
            // Alternatives of single columns of one family: one set lookup.
            let columns: Option<Vec<FamilyColumns<'_>>> = kept
                .iter()
                .map(|p| match p {
                    Pre::ColumnIn(f, set) => Some((f.as_str(), set.as_slice())),
                    _ => None,
                })
                .collect();
            if let Some(columns) = columns.filter(|c| c.len() > 1) {
                let family = columns[0].0;
                if columns.iter().all(|(f, _)| *f == family) {
                    let mut set: Vec<Box<[u8]>> = columns
                        .iter()
                        .flat_map(|(_, s)| s.iter().cloned())
                        .collect();
                    set.sort_unstable();
                    set.dedup();
                    return Pre::ColumnIn(family.to_string(), set);
                }
            }
            // Alternatives of exact qualifiers: one set lookup.
            let sets: Option<Vec<&[Box<[u8]>]>> = kept
                .iter()
                .map(|p| match p {
                    Pre::Qualifier(m) => m.literals(),
                    Pre::QualifierIn(set) => Some(set.as_slice()),
                    _ => None,
                })
                .collect();
            if let Some(sets) = sets.filter(|s| s.len() > 1) {
                let mut set: Vec<Box<[u8]>> = sets.concat();
                set.sort_unstable();
                set.dedup();
                return Pre::QualifierIn(set);
            }
            match kept.len() {
                0 => Pre::False,
                1 => kept.pop().unwrap_or(Pre::False),
                _ => Pre::Any(kept),
            }
        }
        other => other,
    }
}
