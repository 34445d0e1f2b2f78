//! Validation of a `RowFilter` and its compilation into an evaluable tree.

use super::regex::FullMatch;
use crate::error::{Error, Result};
use crate::filter::{ColumnRange, RowFilter, TimestampRange, ValueRange};

/// Deepest nesting of Chain/Interleave/Condition Bigtable accepts.
pub const MAX_FILTER_DEPTH: usize = 20;
/// Longest label `ApplyLabel` accepts.
pub const MAX_LABEL_LEN: usize = 15;

/// A filter with its regexes compiled and its arguments checked.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    Chain(Vec<Node>),
    Interleave(Vec<Node>),
    Condition {
        predicate: Box<Node>,
        true_filter: Option<Box<Node>>,
        false_filter: Option<Box<Node>>,
    },
    Sink,
    PassAll,
    BlockAll,
    RowKey(FullMatch),
    RowSample(f64),
    Family(FullMatch),
    Qualifier(FullMatch),
    ColumnRange(ColumnRange),
    Timestamp(TimestampRange),
    Value(FullMatch),
    ValueRange(ValueRange),
    Offset(usize),
    Limit(usize),
    ColumnLimit(usize),
    StripValue,
    Label(String),
}

fn invalid(reason: impl Into<String>) -> Error {
    Error::InvalidFilter {
        reason: reason.into(),
    }
}

/// Check a label against Bigtable's rule: `[a-z0-9-]+`, at most 15 chars.
pub fn check_label(label: &str) -> Result<()> {
    let ok = !label.is_empty()
        && label.len() <= MAX_LABEL_LEN
        && label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "label {label:?} must match [a-z0-9-]+ and be at most {MAX_LABEL_LEN} characters"
        )))
    }
}

/// True when `filter` can add a label to a cell it outputs. A condition's
/// predicate does not count: its output is only tested for emptiness.
fn contains_label(filter: &RowFilter) -> bool {
    match filter {
        RowFilter::ApplyLabel(_) => true,
        RowFilter::Chain(fs) | RowFilter::Interleave(fs) => fs.iter().any(contains_label),
        RowFilter::Condition {
            true_filter,
            false_filter,
            ..
        } => [true_filter, false_filter]
            .into_iter()
            .flatten()
            .any(|f| contains_label(f)),
        _ => false,
    }
}

fn count(n: u32, what: &str) -> Result<usize> {
    if n == 0 {
        return Err(invalid(format!("{what} must be > 0")));
    }
    usize::try_from(n).map_err(|_| invalid(format!("{what} {n} is too large")))
}

pub(crate) fn compile_node(filter: &RowFilter, depth: usize, in_condition: bool) -> Result<Node> {
    if depth > MAX_FILTER_DEPTH {
        return Err(invalid(format!(
            "filters are nested more than {MAX_FILTER_DEPTH} levels deep"
        )));
    }
    let node = match filter {
        RowFilter::Chain(filters) => {
            let labelled = filters.iter().filter(|f| contains_label(f)).count();
            if labelled > 1 {
                return Err(invalid(format!(
                    "a chain may have at most one sub-filter that applies a label, this one has {labelled}"
                )));
            }
            Node::Chain(compile_all(filters, depth, in_condition)?)
        }
        RowFilter::Interleave(filters) => {
            Node::Interleave(compile_all(filters, depth, in_condition)?)
        }
        RowFilter::Condition {
            predicate,
            true_filter,
            false_filter,
        } => {
            let branch = |f: &Option<Box<RowFilter>>| -> Result<Option<Box<Node>>> {
                f.as_deref()
                    .map(|f| compile_node(f, depth + 1, true).map(Box::new))
                    .transpose()
            };
            Node::Condition {
                predicate: Box::new(compile_node(predicate, depth + 1, true)?),
                true_filter: branch(true_filter)?,
                false_filter: branch(false_filter)?,
            }
        }
        RowFilter::Sink => {
            if in_condition {
                return Err(invalid("sink cannot be used within a condition"));
            }
            Node::Sink
        }
        RowFilter::PassAll => Node::PassAll,
        RowFilter::BlockAll => Node::BlockAll,
        RowFilter::RowKeyRegex(pattern) => {
            if pattern.is_empty() {
                return Err(invalid("row key regex must not be empty"));
            }
            Node::RowKey(FullMatch::compile(pattern)?)
        }
        RowFilter::RowSample(p) => {
            // NaN fails both comparisons, so it is rejected too.
            if !(*p > 0.0 && *p < 1.0) {
                return Err(invalid(format!(
                    "row sample probability {p} must be between 0 and 1, exclusive"
                )));
            }
            Node::RowSample(*p)
        }
        RowFilter::FamilyNameRegex(pattern) => {
            Node::Family(FullMatch::compile(pattern.as_bytes())?)
        }
        RowFilter::ColumnQualifierRegex(pattern) => Node::Qualifier(FullMatch::compile(pattern)?),
        RowFilter::ColumnRange(range) => {
            if range.family.is_empty() {
                return Err(invalid("column range needs a family name"));
            }
            Node::ColumnRange(range.clone())
        }
        RowFilter::TimestampRange(range) => {
            for micros in [range.start_micros, range.end_micros] {
                if micros < 0 || micros % 1000 != 0 {
                    return Err(invalid(format!(
                        "timestamp range bound {micros} must be >= 0 and a multiple of 1000"
                    )));
                }
            }
            Node::Timestamp(*range)
        }
        RowFilter::ValueRegex(pattern) => Node::Value(FullMatch::compile(pattern)?),
        RowFilter::ValueRange(range) => Node::ValueRange(range.clone()),
        RowFilter::CellsPerRowOffset(n) => Node::Offset(
            usize::try_from(*n)
                .map_err(|_| invalid(format!("cells per row offset {n} is too large")))?,
        ),
        RowFilter::CellsPerRowLimit(n) => Node::Limit(count(*n, "cells per row limit")?),
        RowFilter::CellsPerColumnLimit(n) => {
            Node::ColumnLimit(count(*n, "cells per column limit")?)
        }
        RowFilter::StripValue => Node::StripValue,
        RowFilter::ApplyLabel(label) => {
            check_label(label)?;
            Node::Label(label.clone())
        }
    };
    Ok(node)
}

fn compile_all(filters: &[RowFilter], depth: usize, in_condition: bool) -> Result<Vec<Node>> {
    filters
        .iter()
        .map(|f| compile_node(f, depth + 1, in_condition))
        .collect()
}
