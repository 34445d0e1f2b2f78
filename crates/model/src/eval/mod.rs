//! Bigtable `RowFilter` semantics: compile a filter once per request, then
//! apply it to each row.
//!
//! A row's cells come in canonical order (family, qualifier ascending,
//! timestamp descending; [`Cell::canonical_cmp`]). Every filter keeps that
//! order, except that `Interleave` and `Sink` may output several copies of a
//! cell; copies from different branches appear in branch order (Bigtable
//! leaves their mutual order unspecified).
//!
//! Validation follows Bigtable: regexes must compile, a chain may hold at
//! most one sub-filter that applies a label (a cell carries at most one
//! label), labels match `[a-z0-9-]{1,15}`, `Sink` may not appear inside a
//! condition, row samples are in (0, 1), per-row/per-column limits are > 0,
//! timestamp bounds are whole milliseconds, nesting is at most 20 deep.
//! Backends that forward filters to a server should call [`validate`] first
//! so every backend rejects the same filters with the same error.

mod compile;
mod prefilter;
mod regex;

use std::ops::Bound;

use bytes::Bytes;

use crate::cell::{Cell, Row};
use crate::error::Result;
use crate::filter::RowFilter;
use compile::Node;

pub use self::compile::{check_label, MAX_FILTER_DEPTH, MAX_LABEL_LEN};
pub use self::prefilter::{CellPrefilter, CellTest, ColumnTest};
pub use self::regex::{compile_full_match, FullMatch};

/// A `RowFilter` ready to be applied to rows: arguments checked, regexes
/// compiled once.
#[derive(Debug, Clone)]
pub struct CompiledFilter {
    node: Node,
}

/// Check a filter the way Bigtable does, without keeping the compiled form.
pub fn validate(filter: &RowFilter) -> Result<()> {
    CompiledFilter::compile(filter).map(|_| ())
}

impl CompiledFilter {
    /// Compile `filter`. Invalid regexes give `Error::InvalidRegex` naming
    /// the pattern; other invalid arguments give `Error::InvalidFilter`.
    pub fn compile(filter: &RowFilter) -> Result<CompiledFilter> {
        Ok(CompiledFilter {
            node: compile::compile_node(filter, 0, false)?,
        })
    }

    /// Compile an optional filter; `None` passes every cell.
    pub fn compile_opt(filter: Option<&RowFilter>) -> Result<CompiledFilter> {
        match filter {
            Some(f) => CompiledFilter::compile(f),
            None => Ok(CompiledFilter::pass_all()),
        }
    }

    /// The filter that passes every cell unchanged.
    pub fn pass_all() -> CompiledFilter {
        CompiledFilter {
            node: Node::PassAll,
        }
    }

    /// True when the filter passes every row unchanged, so a backend may
    /// skip calling [`CompiledFilter::apply`].
    pub fn is_pass_all(&self) -> bool {
        matches!(self.node, Node::PassAll)
    }

    /// A test a backend may apply to each cell of a row (after GC, before
    /// building the row) to drop cells that cannot change this filter's
    /// output; `None` when it would keep every cell. See
    /// [`CellPrefilter`].
    pub fn cell_prefilter(&self) -> Option<CellPrefilter> {
        CellPrefilter::of(&self.node)
    }

    /// Apply the filter to a row whose cells are in canonical order. Returns
    /// `None` when no cell survives (Bigtable then omits the row).
    pub fn apply(&self, row: Row) -> Option<Row> {
        let Row { key, cells } = row;
        if cells.is_empty() {
            return None;
        }
        let mut sink = Vec::new();
        let out = eval(&self.node, &key, cells, &mut sink);
        let cells = if sink.is_empty() {
            out
        } else {
            merge(vec![out, sink])
        };
        (!cells.is_empty()).then_some(Row { key, cells })
    }

    /// True when the filter outputs at least one cell of the row (the test
    /// of a check-and-mutate predicate).
    pub fn matches(&self, key: &Bytes, cells: &[Cell]) -> bool {
        self.apply(Row {
            key: key.clone(),
            cells: cells.to_vec(),
        })
        .is_some()
    }
}

/// Merge outputs that are each in canonical order into one, keeping
/// duplicates; equal cells keep the order of `parts`.
fn merge(parts: Vec<Vec<Cell>>) -> Vec<Cell> {
    let mut all: Vec<Cell> = parts.into_iter().flatten().collect();
    all.sort_by(Cell::canonical_cmp); // stable
    all
}

pub(crate) fn in_bounds(v: &[u8], start: &Bound<Bytes>, end: &Bound<Bytes>) -> bool {
    let after_start = match start {
        Bound::Unbounded => true,
        Bound::Included(s) => v >= s.as_ref(),
        Bound::Excluded(s) => v > s.as_ref(),
    };
    let before_end = match end {
        Bound::Unbounded => true,
        Bound::Included(e) => v <= e.as_ref(),
        Bound::Excluded(e) => v < e.as_ref(),
    };
    after_start && before_end
}

/// The cells `node` passes to its parent; cells reaching a `Sink` go to
/// `sink` instead.
fn eval(node: &Node, key: &[u8], mut cells: Vec<Cell>, sink: &mut Vec<Cell>) -> Vec<Cell> {
    if cells.is_empty() {
        return cells;
    }
    match node {
        Node::Chain(nodes) => {
            for n in nodes {
                cells = eval(n, key, cells, sink);
                if cells.is_empty() {
                    break;
                }
            }
            cells
        }
        Node::Interleave(nodes) => {
            if nodes.iter().all(is_cell_test) && !has_equal_neighbours(&cells) {
                interleave_cell_tests(nodes, cells)
            } else {
                interleave(nodes, key, cells, sink)
            }
        }
        Node::Condition {
            predicate,
            true_filter,
            false_filter,
        } => {
            // Sink is rejected inside conditions, so this sink stays empty;
            // the predicate's labels and values never reach the output.
            let mut unused = Vec::new();
            let matched = !eval(predicate, key, cells.clone(), &mut unused).is_empty();
            let branch = if matched { true_filter } else { false_filter };
            match branch {
                Some(n) => eval(n, key, cells, sink),
                None => Vec::new(),
            }
        }
        Node::Sink => {
            sink.append(&mut cells);
            cells
        }
        Node::PassAll => cells,
        Node::BlockAll => Vec::new(),
        Node::RowKey(re) => {
            if re.is_match(key) {
                cells
            } else {
                Vec::new()
            }
        }
        Node::RowSample(p) => {
            if rand::random::<f64>() < *p {
                cells
            } else {
                Vec::new()
            }
        }
        Node::Family(re) => retain(cells, |c| re.is_match(c.family.as_bytes())),
        Node::Qualifier(re) => retain(cells, |c| re.is_match(&c.qualifier)),
        Node::ColumnRange(r) => retain(cells, |c| {
            c.family == r.family && in_bounds(&c.qualifier, &r.start, &r.end)
        }),
        Node::Timestamp(r) => retain(cells, |c| r.contains(c.timestamp_micros)),
        Node::Value(re) => retain(cells, |c| re.is_match(&c.value)),
        Node::ValueRange(r) => retain(cells, |c| in_bounds(&c.value, &r.start, &r.end)),
        Node::Offset(n) => {
            let n = (*n).min(cells.len());
            cells.drain(..n);
            cells
        }
        Node::Limit(n) => {
            cells.truncate(*n);
            cells
        }
        Node::ColumnLimit(n) => column_limit(cells, *n),
        Node::StripValue => {
            for c in &mut cells {
                c.value = Bytes::new();
            }
            cells
        }
        Node::Label(label) => {
            for c in &mut cells {
                c.labels.push(label.clone());
            }
            cells
        }
    }
}

/// Interleave by definition: each sub-filter on its own copy of the
/// cells, the outputs merged in canonical order, duplicates kept.
fn interleave(nodes: &[Node], key: &[u8], cells: Vec<Cell>, sink: &mut Vec<Cell>) -> Vec<Cell> {
    let parts = nodes
        .iter()
        .map(|n| eval(n, key, cells.clone(), sink))
        .collect();
    merge(parts)
}

/// True when `node` keeps or drops each cell on its own, unchanged (so it
/// outputs the subsequence of its input that passes [`cell_passes`]).
fn is_cell_test(node: &Node) -> bool {
    match node {
        Node::PassAll
        | Node::BlockAll
        | Node::Family(_)
        | Node::Qualifier(_)
        | Node::ColumnRange(_)
        | Node::Timestamp(_)
        | Node::Value(_)
        | Node::ValueRange(_) => true,
        Node::Chain(nodes) => nodes.iter().all(is_cell_test),
        _ => false,
    }
}

/// Whether a cell test (see [`is_cell_test`]) keeps `c`.
fn cell_passes(node: &Node, c: &Cell) -> bool {
    match node {
        Node::PassAll => true,
        Node::Family(re) => re.is_match(c.family.as_bytes()),
        Node::Qualifier(re) => re.is_match(&c.qualifier),
        Node::ColumnRange(r) => c.family == r.family && in_bounds(&c.qualifier, &r.start, &r.end),
        Node::Timestamp(r) => r.contains(c.timestamp_micros),
        Node::Value(re) => re.is_match(&c.value),
        Node::ValueRange(r) => in_bounds(&c.value, &r.start, &r.end),
        Node::Chain(nodes) => nodes.iter().all(|n| cell_passes(n, c)),
        _ => false,
    }
}

fn has_equal_neighbours(cells: &[Cell]) -> bool {
    cells.windows(2).any(|w| w[0].canonical_cmp(&w[1]).is_eq())
}

/// [`interleave`] of cell tests, without copying the row per sub-filter:
/// each cell is output once per sub-filter that keeps it. Equal to the
/// definition when no two input cells compare equal (the copies of a cell
/// then sit together, in input order, which is canonical); the batch
/// reader's "only these qualifiers" filter is such an interleave.
fn interleave_cell_tests(nodes: &[Node], cells: Vec<Cell>) -> Vec<Cell> {
    let mut out = Vec::with_capacity(cells.len());
    for cell in cells {
        let copies = nodes.iter().filter(|n| cell_passes(n, &cell)).count();
        for _ in 1..copies {
            out.push(cell.clone());
        }
        if copies > 0 {
            out.push(cell);
        }
    }
    out
}

fn retain(mut cells: Vec<Cell>, keep: impl Fn(&Cell) -> bool) -> Vec<Cell> {
    cells.retain(|c| keep(c));
    cells
}

/// Keep the first `n` cells of each column (cells of a column are adjacent
/// in canonical order; duplicates count separately).
fn column_limit(cells: Vec<Cell>, n: usize) -> Vec<Cell> {
    let mut keep = Vec::with_capacity(cells.len());
    let mut run = 0usize;
    for (i, cell) in cells.iter().enumerate() {
        let continues = i > 0 && cells[i - 1].same_column(cell);
        run = if continues { run + 1 } else { 1 };
        keep.push(run <= n);
    }
    cells
        .into_iter()
        .zip(keep)
        .filter_map(|(c, k)| k.then_some(c))
        .collect()
}

#[cfg(test)]
mod tests;
