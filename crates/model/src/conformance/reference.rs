//! The reference-model property test: random operation sequences applied to
//! a backend and to a [`MemoryStore`] must give the same results, read for
//! read (redb's fuzzer, on the storage traits).
//!
//! Timestamps are explicit and in the future (year 2100), so nothing depends
//! on either store's clock: before each read-modify-write the runner seeds
//! its columns with a cell newer than any other, so the written timestamp is
//! that cell's (Bigtable writes at `max(now, latest)`). GC rules are off:
//! when collection runs is backend-specific, and the GC cases cover it.

use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use super::{Capabilities, TableGuard};
use crate::cell::{Cell, Row};
use crate::error::{Error, Result};
use crate::filter::{ColumnRange, RowFilter, TimestampRange, ValueRange};
use crate::memory::MemoryStore;
use crate::mutation::{Mutation, ReadModifyWriteRule, RowMutations};
use crate::rowset::{ReadRowsRequest, RowRange, RowSet};
use crate::store::{Store, Table};
use crate::table_spec::{FamilyModification, GcRule, TableSpec};

/// How many sequences to run and what the backend supports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferenceConfig {
    /// Random operation sequences to run.
    pub cases: u32,
    /// Longest sequence.
    pub max_ops: usize,
    /// Most shrinking steps after a failure (each replays a sequence).
    pub max_shrink_iters: u32,
    /// Generate `Sink` filters.
    pub sink_filter: bool,
    /// Generate read-modify-writes with several rules (whose failure must
    /// be atomic).
    pub multi_rule_read_modify_write: bool,
    /// Compare the error variant of a failed read-modify-write (else only
    /// that it failed).
    pub typed_increment_error: bool,
    /// Generate `CellsPerRowOffset` and `CellsPerRowLimit` filters.
    pub cells_per_row_filters: bool,
    /// Generate `StripValue` filters (which must keep labels).
    pub strip_value: bool,
}

impl ReferenceConfig {
    /// The defaults, limited to what a backend with `caps` supports.
    pub fn for_capabilities(caps: Capabilities) -> ReferenceConfig {
        ReferenceConfig {
            cases: 64,
            max_ops: 40,
            max_shrink_iters: 256,
            sink_filter: caps.sink_filter,
            multi_rule_read_modify_write: caps.atomic_read_modify_write_failure,
            typed_increment_error: caps.typed_increment_error,
            cells_per_row_filters: caps.cells_per_row_across_families,
            strip_value: caps.strip_value_keeps_labels,
        }
    }
}

impl Default for ReferenceConfig {
    fn default() -> Self {
        ReferenceConfig::for_capabilities(Capabilities::default())
    }
}

/// 2100-01-01 in microseconds: every generated timestamp is after it.
const BASE: i64 = 4_102_444_800_000_000;
/// The timestamp of the cells seeded before a read-modify-write.
const SEED_TS: i64 = BASE + 1_000_000;
const FAMILIES: [&str; 2] = ["a", "b"];

#[derive(Debug, Clone)]
enum Op {
    Mutate(Bytes, Vec<Mutation>),
    MutateRows(Vec<RowMutations>),
    CheckAndMutate {
        key: Bytes,
        predicate: Option<RowFilter>,
        true_mutations: Vec<Mutation>,
        false_mutations: Vec<Mutation>,
    },
    ReadModifyWrite {
        key: Bytes,
        seed: Bytes,
        rules: Vec<ReadModifyWriteRule>,
    },
    Read(ReadRowsRequest),
    ReadRow(Bytes, Option<RowFilter>),
}

/// Which optional filter kinds to generate.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Kinds {
    pub(crate) sink: bool,
    pub(crate) per_row: bool,
    pub(crate) strip_value: bool,
}

fn pick(items: &[&'static [u8]]) -> BoxedStrategy<Bytes> {
    let items: Vec<Bytes> = items.iter().map(|b| Bytes::from_static(b)).collect();
    prop::sample::select(items).boxed()
}

pub(crate) fn key() -> BoxedStrategy<Bytes> {
    pick(&[b"a", b"b", b"b\0", b"c", b"c\xff", b"d", b"e"])
}

fn family() -> BoxedStrategy<String> {
    prop_oneof![
        12 => prop::sample::select(FAMILIES.to_vec()).prop_map(String::from),
        1 => Just("zz".to_string()),
    ]
    .boxed()
}

pub(crate) fn qualifier() -> BoxedStrategy<Bytes> {
    pick(&[b"", b"q", b"r", b"s\0", b"\xff"])
}

pub(crate) fn value() -> BoxedStrategy<Bytes> {
    pick(&[b"", b"v", b"w", b"\0\0\0\0\0\0\0\x01", b"zz"])
}

pub(crate) fn timestamp() -> BoxedStrategy<i64> {
    (0i64..6).prop_map(|ms| BASE + ms * 1000).boxed()
}

fn range_bound() -> BoxedStrategy<i64> {
    prop_oneof![Just(0i64), (0i64..7).prop_map(|ms| BASE + ms * 1000)].boxed()
}

fn mutation() -> BoxedStrategy<Mutation> {
    prop_oneof![
        6 => (family(), qualifier(), timestamp(), value()).prop_map(|(f, q, ts, v)| {
            Mutation::SetCell { family: f.into(), qualifier: q, timestamp_micros: ts, value: v }
        }),
        2 => (family(), qualifier(), range_bound(), range_bound()).prop_map(|(f, q, s, e)| {
            Mutation::DeleteFromColumn { family: f.into(), qualifier: q, time_range: TimestampRange::new(s, e) }
        }),
        1 => family().prop_map(|f| Mutation::DeleteFromFamily { family: f.into() }),
        1 => Just(Mutation::DeleteFromRow),
    ]
    .boxed()
}

fn mutations() -> BoxedStrategy<Vec<Mutation>> {
    prop::collection::vec(mutation(), 1..5).boxed()
}

fn bytes_bound(items: BoxedStrategy<Bytes>) -> BoxedStrategy<Bound<Bytes>> {
    prop_oneof![
        1 => Just(Bound::Unbounded),
        2 => items.clone().prop_map(Bound::Included),
        2 => items.prop_map(Bound::Excluded),
    ]
    .boxed()
}

pub(crate) fn leaf_filter(kinds: Kinds) -> BoxedStrategy<RowFilter> {
    let regex = |items: &[&'static [u8]]| pick(items);
    let mut leaves = vec![
        Just(RowFilter::PassAll).boxed(),
        Just(RowFilter::BlockAll).boxed(),
        regex(&[b"a", b"b.*", b"c\\C", b"."])
            .prop_map(RowFilter::RowKeyRegex)
            .boxed(),
        prop::sample::select(vec!["a", "b", "a|b", "[ab]", "z"])
            .prop_map(|s| RowFilter::FamilyNameRegex(s.to_string()))
            .boxed(),
        regex(&[b"q", b"r|s.", b"", b"\\C*", b"[^q]*"])
            .prop_map(RowFilter::ColumnQualifierRegex)
            .boxed(),
        regex(&[b"v", b"w|zz", b".*", b"\\x00.*"])
            .prop_map(RowFilter::ValueRegex)
            .boxed(),
        (
            prop::sample::select(FAMILIES.to_vec()),
            bytes_bound(qualifier()),
            bytes_bound(qualifier()),
        )
            .prop_map(|(f, start, end)| {
                RowFilter::ColumnRange(ColumnRange {
                    family: f.to_string(),
                    start,
                    end,
                })
            })
            .boxed(),
        (range_bound(), range_bound())
            .prop_map(|(s, e)| RowFilter::TimestampRange(TimestampRange::new(s, e)))
            .boxed(),
        (bytes_bound(value()), bytes_bound(value()))
            .prop_map(|(start, end)| RowFilter::ValueRange(ValueRange { start, end }))
            .boxed(),
        (1u32..3).prop_map(RowFilter::CellsPerColumnLimit).boxed(),
        prop::sample::select(vec!["x", "y"])
            .prop_map(|l| RowFilter::ApplyLabel(l.to_string()))
            .boxed(),
    ];
    if kinds.sink {
        leaves.push(Just(RowFilter::Sink).boxed());
    }
    if kinds.strip_value {
        leaves.push(Just(RowFilter::StripValue).boxed());
    }
    if kinds.per_row {
        leaves.push((0u32..4).prop_map(RowFilter::CellsPerRowOffset).boxed());
        leaves.push((1u32..4).prop_map(RowFilter::CellsPerRowLimit).boxed());
    }
    prop::strategy::Union::new(leaves).boxed()
}

pub(crate) fn filter(kinds: Kinds) -> BoxedStrategy<RowFilter> {
    leaf_filter(kinds)
        .prop_recursive(3, 12, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 2..4).prop_map(RowFilter::Chain),
                prop::collection::vec(inner.clone(), 2..4).prop_map(RowFilter::Interleave),
                (
                    inner.clone(),
                    prop::option::of(inner.clone()),
                    prop::option::of(inner)
                )
                    .prop_map(|(p, t, f)| RowFilter::Condition {
                        predicate: Box::new(p),
                        true_filter: t.map(Box::new),
                        false_filter: f.map(Box::new),
                    }),
            ]
        })
        .boxed()
}

fn row_set() -> BoxedStrategy<RowSet> {
    let range =
        (bytes_bound(key()), bytes_bound(key())).prop_map(|(start, end)| RowRange { start, end });
    prop_oneof![
        1 => Just(RowSet::all()),
        3 => (prop::collection::vec(key(), 0..3), prop::collection::vec(range, 0..3))
            .prop_map(|(keys, ranges)| RowSet { keys, ranges }),
    ]
    .boxed()
}

fn read_request(kinds: Kinds) -> BoxedStrategy<ReadRowsRequest> {
    (
        row_set(),
        prop::option::of(filter(kinds)),
        prop::option::of(0u64..4),
        any::<bool>(),
    )
        .prop_map(|(rows, filter, rows_limit, reversed)| ReadRowsRequest {
            rows,
            filter,
            rows_limit,
            reversed,
        })
        .boxed()
}

fn rule() -> BoxedStrategy<ReadModifyWriteRule> {
    prop_oneof![
        (family(), qualifier(), value()).prop_map(|(f, q, v)| ReadModifyWriteRule::append(f, q, v)),
        (family(), qualifier(), -3i64..4)
            .prop_map(|(f, q, n)| ReadModifyWriteRule::increment(f, q, n)),
    ]
    .boxed()
}

fn op(config: &ReferenceConfig) -> BoxedStrategy<Op> {
    let kinds = Kinds {
        sink: config.sink_filter,
        per_row: config.cells_per_row_filters,
        strip_value: config.strip_value,
    };
    // Sink is not allowed in a check-and-mutate predicate's conditions, and
    // keeping it out of predicates keeps most of them valid.
    let predicate_kinds = Kinds {
        sink: false,
        ..kinds
    };
    let max_rules = if config.multi_rule_read_modify_write {
        4
    } else {
        2
    };
    prop_oneof![
        6 => (key(), mutations()).prop_map(|(k, m)| Op::Mutate(k, m)),
        2 => prop::collection::vec((key(), mutations()), 1..4).prop_map(|entries| {
            Op::MutateRows(entries.into_iter().map(|(k, m)| RowMutations::new(k, m)).collect())
        }),
        2 => (key(), prop::option::of(filter(predicate_kinds)), prop::collection::vec(mutation(), 0..3),
              prop::collection::vec(mutation(), 0..3))
            .prop_map(|(key, predicate, t, f)| Op::CheckAndMutate {
                key, predicate, true_mutations: t, false_mutations: f,
            }),
        2 => (key(), value(), prop::collection::vec(rule(), 1..max_rules))
            .prop_map(|(key, seed, rules)| Op::ReadModifyWrite { key, seed, rules }),
        4 => read_request(kinds).prop_map(Op::Read),
        1 => (key(), prop::option::of(filter(kinds))).prop_map(|(k, f)| Op::ReadRow(k, f)),
    ]
    .boxed()
}

/// Run `config.cases` random operation sequences against `store` and a
/// `MemoryStore`, panicking with the (shrunk) sequence at the first
/// difference.
pub fn check_against_reference(store: Arc<dyn Store>, config: ReferenceConfig) {
    let mut runner = TestRunner::new(Config {
        cases: config.cases,
        max_shrink_iters: config.max_shrink_iters,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = prop::collection::vec(op(&config), 1..config.max_ops.max(2));
    let result = runner.run(&strategy, |ops| {
        run_sequence(&store, &ops, &config).map_err(TestCaseError::fail)
    });
    if let Err(e) = result {
        panic!("backend differs from the reference model: {e}");
    }
}

fn open(store: &Arc<dyn Store>, name: &str) -> Result<Arc<dyn Table>> {
    store.create_table(name, &TableSpec::new())?;
    let mods: Vec<FamilyModification> = FAMILIES
        .iter()
        .map(|f| FamilyModification::Create {
            family: f.to_string(),
            gc_rule: GcRule::None,
        })
        .collect();
    store.modify_families(name, &mods)?;
    store.open_table(name)
}

fn run_sequence(
    store: &Arc<dyn Store>,
    ops: &[Op],
    config: &ReferenceConfig,
) -> std::result::Result<(), String> {
    let name = format!("reference-{:08x}", rand::random::<u32>());
    let backend = open(store, &name).map_err(|e| format!("creating {name}: {e}"))?;
    let _guard = TableGuard::new(store.clone(), name.clone());
    let reference_store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let reference = open(&reference_store, &name).map_err(|e| format!("reference: {e}"))?;
    for (i, op) in ops.iter().enumerate() {
        let mut got = run_op(backend.as_ref(), op);
        let mut want = run_op(reference.as_ref(), op);
        if !config.typed_increment_error && matches!(op, Op::ReadModifyWrite { .. }) {
            for o in got.iter_mut().chain(want.iter_mut()) {
                if let Outcome::Failed(kind) = o {
                    *kind = "any error".to_string();
                }
            }
        }
        if got != want {
            return Err(format!(
                "operation {i} {op:?}\n  backend:   {got:?}\n  reference: {want:?}"
            ));
        }
    }
    let got = run_op(backend.as_ref(), &Op::Read(ReadRowsRequest::all()));
    let want = run_op(reference.as_ref(), &Op::Read(ReadRowsRequest::all()));
    if got != want {
        return Err(format!(
            "final contents\n  backend:   {got:?}\n  reference: {want:?}"
        ));
    }
    Ok(())
}

/// What an operation returned, in a form two stores must agree on: errors
/// compare by variant (messages may differ), copies of a cell by content.
#[derive(Debug, PartialEq)]
enum Outcome {
    Done(Vec<String>),
    Failed(String),
}

fn kind(e: &Error) -> String {
    let debug = format!("{e:?}");
    debug
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default()
        .to_string()
}

fn outcome<T>(result: Result<T>, render: impl FnOnce(T) -> Vec<String>) -> Outcome {
    match result {
        Ok(v) => Outcome::Done(render(v)),
        Err(e) => Outcome::Failed(kind(&e)),
    }
}

fn render_rows(rows: Vec<Row>) -> Vec<String> {
    rows.into_iter()
        .flat_map(|row| {
            let mut cells: Vec<Cell> = row.cells;
            cells.sort_by(|a, b| {
                a.canonical_cmp(b)
                    .then_with(|| a.labels.cmp(&b.labels))
                    .then_with(|| a.value.cmp(&b.value))
            });
            let key = row.key;
            cells
                .into_iter()
                .map(move |c| super::util::render_cell(&key, &c))
        })
        .collect()
}

fn run_op(table: &dyn Table, op: &Op) -> Vec<Outcome> {
    match op {
        Op::Mutate(key, mutations) => {
            vec![outcome(table.mutate_row(key, mutations), |()| vec![])]
        }
        Op::MutateRows(entries) => match table.mutate_rows(entries) {
            Err(e) => vec![Outcome::Failed(kind(&e))],
            Ok(statuses) => statuses
                .into_iter()
                .map(|s| outcome(s, |()| vec![]))
                .collect(),
        },
        Op::CheckAndMutate {
            key,
            predicate,
            true_mutations,
            false_mutations,
        } => vec![outcome(
            table.check_and_mutate_row(key, predicate.as_ref(), true_mutations, false_mutations),
            |matched| vec![matched.to_string()],
        )],
        Op::ReadModifyWrite { key, seed, rules } => {
            let mut columns: Vec<(crate::FamilyName, Bytes)> = rules
                .iter()
                .map(|r| (r.family.clone(), r.qualifier.clone()))
                .collect();
            columns.sort();
            columns.dedup();
            let seeds: Vec<Mutation> = columns
                .into_iter()
                .map(|(f, q)| Mutation::set_cell(f, q, SEED_TS, seed.clone()))
                .collect();
            vec![
                outcome(table.mutate_row(key, &seeds), |()| vec![]),
                outcome(table.read_modify_write_row(key, rules), |row| {
                    render_rows(vec![row])
                }),
            ]
        }
        Op::Read(request) => vec![outcome(
            table.read_rows(request).and_then(|s| s.collect()),
            render_rows,
        )],
        Op::ReadRow(key, filter) => vec![outcome(table.read_row(key, filter.as_ref()), |row| {
            render_rows(row.into_iter().collect())
        })],
    }
}
