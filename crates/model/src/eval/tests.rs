use std::ops::Bound;

use bytes::Bytes;

use super::*;
use crate::error::Error;
use crate::filter::{ColumnRange, TimestampRange, ValueRange};

fn cell(f: &str, q: &str, ts: i64, v: &str) -> Cell {
    Cell::new(
        f,
        Bytes::copy_from_slice(q.as_bytes()),
        ts,
        Bytes::copy_from_slice(v.as_bytes()),
    )
}

fn labelled(mut c: Cell, label: &str) -> Cell {
    c.labels.push(label.to_string());
    c
}

fn row(cells: Vec<Cell>) -> Row {
    let mut cells = cells;
    cells.sort_by(Cell::canonical_cmp);
    Row {
        key: Bytes::from_static(b"row1"),
        cells,
    }
}

fn run(filter: RowFilter, cells: Vec<Cell>) -> Vec<Cell> {
    CompiledFilter::compile(&filter)
        .expect("filter compiles")
        .apply(row(cells))
        .map(|r| r.cells)
        .unwrap_or_default()
}

fn abc() -> Vec<Cell> {
    vec![
        cell("A", "A", 1000, "w"),
        cell("A", "B", 2000, "x"),
        cell("B", "B", 4000, "z"),
    ]
}

fn invalid_filter(filter: RowFilter) -> bool {
    matches!(
        CompiledFilter::compile(&filter),
        Err(Error::InvalidFilter { .. })
    )
}

#[test]
fn proto_sink_example() {
    // The example of data.proto's `sink` documentation.
    let filter = RowFilter::Chain(vec![
        RowFilter::FamilyNameRegex("A".into()),
        RowFilter::Interleave(vec![
            RowFilter::PassAll,
            RowFilter::Chain(vec![RowFilter::ApplyLabel("foo".into()), RowFilter::Sink]),
        ]),
        RowFilter::ColumnQualifierRegex(Bytes::from_static(b"B")),
    ]);
    let out = run(filter, abc());
    assert_eq!(
        out,
        vec![
            labelled(cell("A", "A", 1000, "w"), "foo"),
            cell("A", "B", 2000, "x"),
            labelled(cell("A", "B", 2000, "x"), "foo"),
        ]
    );
}

#[test]
fn single_column_ranges_make_an_exact_prefilter_of_one_set() {
    use std::ops::Bound;
    let column = |f: &str, q: &str| {
        RowFilter::ColumnRange(crate::ColumnRange {
            family: f.into(),
            start: Bound::Included(Bytes::from(q.to_string())),
            end: Bound::Included(Bytes::from(q.to_string())),
        })
    };
    let wide = RowFilter::Chain(vec![
        RowFilter::TimestampRange(crate::TimestampRange::new(1000, 0)),
        RowFilter::interleave(vec![
            column("e", "view,a"),
            column("e", "click,a"),
            column("e", "view,b"),
        ]),
    ]);
    let compiled = CompiledFilter::compile(&wide).expect("compiles");
    let pre = compiled.cell_prefilter().expect("a prefilter");
    assert!(pre.is_exact());
    let cells = vec![
        cell("e", "click,a", 2000, "x"),
        cell("e", "click,b", 2000, "x"),
        cell("e", "view,a", 2000, "x"),
        cell("e", "view,b", 0, "x"),
        cell("f", "view,a", 2000, "x"),
    ];
    let kept: Vec<Cell> = cells
        .iter()
        .filter(|c| pre.may_pass(&c.family, &c.qualifier, c.timestamp_micros, &c.value))
        .cloned()
        .collect();
    assert_eq!(kept, run(wide, cells));
    assert_eq!(kept.len(), 2);
    // The column part is known per column; the timestamp part is not.
    assert_eq!(pre.column_verdict("e", b"click,b"), Some(false));
    assert_eq!(pre.column_verdict("f", b"view,a"), Some(false));
    assert_eq!(pre.column_verdict("e", b"view,a"), None);
    // What is left of it for that column is the timestamp part alone.
    let ColumnTest::Cells(test) = pre.column_test("e", b"view,a") else {
        panic!("the column's cells depend on their timestamp");
    };
    assert!(test.may_pass(2000, b"x"));
    assert!(!test.may_pass(0, b"x"));
    // Columns share it (a backend keeps one test for all of them).
    let ColumnTest::Cells(other) = pre.column_test("e", b"view,b") else {
        panic!("the column's cells depend on their timestamp");
    };
    assert_eq!(test, other);
    // Columns of different families overlap nothing.
    let apart = RowFilter::interleave(vec![column("e", "a"), column("f", "a")]);
    let compiled = CompiledFilter::compile(&apart).expect("compiles");
    assert_eq!(compiled.cell_prefilter().map(|p| p.is_exact()), Some(true));
}

#[test]
fn whole_families_and_a_value_range_make_an_exact_family_decided_prefilter() {
    use std::ops::Bound;
    // The profile reader's shape: two families whole, of a third only the
    // cells whose value is above 1 (an Int64 sum, big-endian).
    let one = Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 1]);
    let filter = RowFilter::interleave(vec![
        RowFilter::exact_family("n"),
        RowFilter::exact_family("t"),
        RowFilter::Chain(vec![
            RowFilter::exact_family("i"),
            RowFilter::ValueRange(crate::ValueRange {
                start: Bound::Excluded(one.clone()),
                end: Bound::Unbounded,
            }),
        ]),
    ]);
    let compiled = CompiledFilter::compile(&filter).expect("compiles");
    let pre = compiled.cell_prefilter().expect("a prefilter");
    assert!(pre.family_decided());
    assert!(pre.is_exact());
    assert!(matches!(pre.column_test("n", b"q"), ColumnTest::EveryCell));
    assert!(matches!(pre.column_test("x", b"q"), ColumnTest::NoCell));
    let ColumnTest::Cells(test) = pre.column_test("i", b"any id") else {
        panic!("family i depends on the value");
    };
    assert!(!test.may_pass(0, &one));
    assert!(test.may_pass(0, &[0, 0, 0, 0, 0, 0, 0, 2]));
    // A qualifier test makes the verdict depend on the column.
    let by_column = RowFilter::Chain(vec![
        RowFilter::exact_family("n"),
        RowFilter::exact_qualifier(b"a"),
    ]);
    let compiled = CompiledFilter::compile(&by_column).expect("compiles");
    assert!(!compiled
        .cell_prefilter()
        .expect("a prefilter")
        .family_decided());
}

#[test]
fn prefilter_is_exact_only_when_interleaved_columns_are_disjoint() {
    let q = |s: &str| RowFilter::exact_qualifier(s.as_bytes());
    let alt =
        |a: &str, b: &str| RowFilter::ColumnQualifierRegex(Bytes::from(format!("(?:{a}|{b})")));
    let exactness = |f: RowFilter| {
        let compiled = CompiledFilter::compile(&f).expect("compiles");
        compiled.cell_prefilter().map(|p| p.is_exact())
    };
    // The wide batch filter's shape: a family, then disjoint qualifier sets.
    let wide = RowFilter::Chain(vec![
        RowFilter::exact_family("e"),
        RowFilter::interleave(vec![alt("view,a", "view,b"), alt("click,a", "click,c")]),
    ]);
    assert_eq!(exactness(wide.clone()), Some(true));
    let compiled = CompiledFilter::compile(&wide).expect("compiles");
    let pre = compiled.cell_prefilter().expect("a prefilter");
    let cells = vec![
        cell("e", "click,a", 1, "x"),
        cell("e", "click,b", 1, "x"),
        cell("e", "view,a", 1, "x"),
        cell("f", "view,a", 1, "x"),
    ];
    let kept: Vec<Cell> = cells
        .iter()
        .filter(|c| pre.may_pass(&c.family, &c.qualifier, c.timestamp_micros, &c.value))
        .cloned()
        .collect();
    assert_eq!(kept, run(wide, cells));
    // Overlapping branches output a cell twice: not exact.
    assert_eq!(
        exactness(RowFilter::interleave(vec![q("ab"), alt("ab", "cd")])),
        Some(false)
    );
    // Disjoint by family, even with the same qualifier.
    let column = |f: &str| RowFilter::Chain(vec![RowFilter::exact_family(f), q("a")]);
    assert_eq!(
        exactness(RowFilter::interleave(vec![column("f"), column("g")])),
        Some(true)
    );
    // A limit is not a selector.
    assert_eq!(
        exactness(RowFilter::Chain(vec![
            q("a"),
            RowFilter::CellsPerColumnLimit(1)
        ])),
        Some(false)
    );
}

#[test]
fn interleave_keeps_duplicates_in_canonical_order() {
    let filter = RowFilter::Interleave(vec![
        RowFilter::FamilyNameRegex("B".into()),
        RowFilter::PassAll,
        RowFilter::ColumnQualifierRegex(Bytes::from_static(b"A")),
    ]);
    let out = run(filter, abc());
    assert_eq!(
        out,
        vec![
            cell("A", "A", 1000, "w"),
            cell("A", "A", 1000, "w"),
            cell("A", "B", 2000, "x"),
            cell("B", "B", 4000, "z"),
            cell("B", "B", 4000, "z"),
        ]
    );
}

#[test]
fn interleave_copies_keep_their_own_labels() {
    let filter = RowFilter::Interleave(vec![
        RowFilter::ApplyLabel("b".into()),
        RowFilter::ApplyLabel("a".into()),
    ]);
    let out = run(filter, vec![cell("A", "A", 1000, "w")]);
    assert_eq!(
        out,
        vec![
            labelled(cell("A", "A", 1000, "w"), "b"),
            labelled(cell("A", "A", 1000, "w"), "a"),
        ]
    );
}

#[test]
fn condition_picks_a_branch_and_hides_predicate_labels() {
    let cond = |pred: RowFilter| RowFilter::Condition {
        predicate: Box::new(pred),
        true_filter: Some(Box::new(RowFilter::FamilyNameRegex("B".into()))),
        false_filter: Some(Box::new(RowFilter::FamilyNameRegex("A".into()))),
    };
    let t = run(cond(RowFilter::ApplyLabel("p".into())), abc());
    assert_eq!(t, vec![cell("B", "B", 4000, "z")]);
    let f = run(
        cond(RowFilter::ValueRegex(Bytes::from_static(b"nope"))),
        abc(),
    );
    assert_eq!(
        f,
        vec![cell("A", "A", 1000, "w"), cell("A", "B", 2000, "x")]
    );
    let missing = RowFilter::Condition {
        predicate: Box::new(RowFilter::PassAll),
        true_filter: None,
        false_filter: Some(Box::new(RowFilter::PassAll)),
    };
    assert!(run(missing, abc()).is_empty());
}

#[test]
fn cell_filters() {
    let b = |s: &'static str| Bytes::from_static(s.as_bytes());
    assert_eq!(run(RowFilter::BlockAll, abc()), vec![]);
    assert_eq!(run(RowFilter::PassAll, abc()), row(abc()).cells);
    assert_eq!(run(RowFilter::RowKeyRegex(b("row.")), abc()).len(), 3);
    assert_eq!(run(RowFilter::RowKeyRegex(b("row")), abc()).len(), 0);
    assert_eq!(run(RowFilter::ValueRegex(b("[xz]")), abc()).len(), 2);
    let range = ColumnRange {
        family: "A".into(),
        start: Bound::Excluded(b("A")),
        end: Bound::Unbounded,
    };
    assert_eq!(
        run(RowFilter::ColumnRange(range), abc()),
        vec![cell("A", "B", 2000, "x")]
    );
    let ts = TimestampRange::new(2000, 4000);
    assert_eq!(
        run(RowFilter::TimestampRange(ts), abc()),
        vec![cell("A", "B", 2000, "x")]
    );
    let vr = ValueRange {
        start: Bound::Included(b("x")),
        end: Bound::Excluded(b("z")),
    };
    assert_eq!(
        run(RowFilter::ValueRange(vr), abc()),
        vec![cell("A", "B", 2000, "x")]
    );
    let stripped = run(RowFilter::StripValue, abc());
    assert!(stripped.iter().all(|c| c.value.is_empty()));
    assert_eq!(stripped.len(), 3);
}

#[test]
fn offsets_and_limits_count_cells_in_order() {
    let cells = vec![
        cell("A", "A", 3000, "1"),
        cell("A", "A", 2000, "2"),
        cell("A", "A", 1000, "3"),
        cell("A", "B", 2000, "4"),
        cell("B", "A", 5000, "5"),
    ];
    let vals = |cs: Vec<Cell>| -> String {
        cs.iter()
            .map(|c| String::from_utf8_lossy(&c.value).into_owned())
            .collect()
    };
    assert_eq!(
        vals(run(RowFilter::CellsPerRowOffset(2), cells.clone())),
        "345"
    );
    assert_eq!(
        vals(run(RowFilter::CellsPerRowOffset(0), cells.clone())),
        "12345"
    );
    assert_eq!(
        vals(run(RowFilter::CellsPerRowOffset(9), cells.clone())),
        ""
    );
    assert_eq!(
        vals(run(RowFilter::CellsPerRowLimit(2), cells.clone())),
        "12"
    );
    assert_eq!(
        vals(run(RowFilter::CellsPerColumnLimit(2), cells.clone())),
        "1245"
    );
    assert_eq!(
        vals(run(RowFilter::CellsPerColumnLimit(1), cells.clone())),
        "145"
    );
    // Duplicates from an interleave count separately.
    let dup = RowFilter::Chain(vec![
        RowFilter::Interleave(vec![RowFilter::PassAll, RowFilter::PassAll]),
        RowFilter::CellsPerColumnLimit(3),
    ]);
    assert_eq!(vals(run(dup, cells)), "1124455");
}

#[test]
fn row_sample_extremes() {
    let cells = abc();
    assert_eq!(
        run(RowFilter::RowSample(1.0 - 1e-12), cells.clone()).len(),
        3
    );
    assert_eq!(run(RowFilter::RowSample(1e-12), cells).len(), 0);
    assert!(invalid_filter(RowFilter::RowSample(0.0)));
    assert!(invalid_filter(RowFilter::RowSample(1.0)));
    assert!(invalid_filter(RowFilter::RowSample(f64::NAN)));
}

#[test]
fn label_rules() {
    assert!(invalid_filter(RowFilter::ApplyLabel("".into())));
    assert!(invalid_filter(RowFilter::ApplyLabel("Upper".into())));
    assert!(invalid_filter(RowFilter::ApplyLabel(
        "abcdefghijklmnop".into()
    )));
    assert!(validate(&RowFilter::ApplyLabel("abc-def-0123456".into())).is_ok());
    // A chain may hold at most one labelling sub-filter, however nested.
    assert!(invalid_filter(RowFilter::Chain(vec![
        RowFilter::ApplyLabel("a".into()),
        RowFilter::ApplyLabel("b".into()),
    ])));
    assert!(invalid_filter(RowFilter::Chain(vec![
        RowFilter::ApplyLabel("a".into()),
        RowFilter::Interleave(vec![RowFilter::PassAll, RowFilter::ApplyLabel("b".into())]),
    ])));
    // An interleave may label each copy, a predicate's label does not count.
    assert!(validate(&RowFilter::Interleave(vec![
        RowFilter::ApplyLabel("a".into()),
        RowFilter::ApplyLabel("b".into()),
    ]))
    .is_ok());
    assert!(validate(&RowFilter::Chain(vec![
        RowFilter::ApplyLabel("a".into()),
        RowFilter::Condition {
            predicate: Box::new(RowFilter::ApplyLabel("p".into())),
            true_filter: Some(Box::new(RowFilter::PassAll)),
            false_filter: None,
        },
    ]))
    .is_ok());
}

#[test]
fn other_invalid_filters() {
    assert!(invalid_filter(RowFilter::CellsPerRowLimit(0)));
    assert!(invalid_filter(RowFilter::CellsPerColumnLimit(0)));
    assert!(invalid_filter(RowFilter::RowKeyRegex(Bytes::new())));
    assert!(invalid_filter(RowFilter::TimestampRange(
        TimestampRange::new(1500, 0)
    )));
    assert!(invalid_filter(RowFilter::Condition {
        predicate: Box::new(RowFilter::PassAll),
        true_filter: Some(Box::new(RowFilter::Sink)),
        false_filter: None,
    }));
    let mut deep = RowFilter::PassAll;
    for _ in 0..=MAX_FILTER_DEPTH {
        deep = RowFilter::Chain(vec![deep, RowFilter::PassAll]);
    }
    assert!(invalid_filter(deep));
    match CompiledFilter::compile(&RowFilter::ValueRegex(Bytes::from_static(b"a("))) {
        Err(Error::InvalidRegex { pattern, .. }) => assert_eq!(pattern, "a("),
        other => panic!("expected InvalidRegex, got {other:?}"),
    }
}

#[test]
fn degenerate_chains_and_interleaves() {
    assert_eq!(run(RowFilter::Chain(vec![]), abc()).len(), 3);
    assert_eq!(run(RowFilter::Interleave(vec![]), abc()).len(), 0);
    assert_eq!(
        run(RowFilter::Chain(vec![RowFilter::StripValue]), abc()).len(),
        3
    );
}

#[test]
fn no_cells_means_no_row() {
    let f = CompiledFilter::compile(&RowFilter::PassAll).expect("compiles");
    assert!(f
        .apply(Row {
            key: Bytes::from_static(b"k"),
            cells: vec![]
        })
        .is_none());
    assert!(CompiledFilter::pass_all().is_pass_all());
}

/// Algebraic properties of the evaluator over random filters and rows.
#[cfg(feature = "conformance")]
mod properties {
    use proptest::prelude::*;

    use super::*;
    use crate::conformance::reference::{self as gen, Kinds};

    const KINDS: Kinds = Kinds {
        sink: true,
        per_row: true,
        strip_value: true,
    };
    /// Without sinks, whose cells bypass the filters after them.
    const NO_SINK: Kinds = Kinds {
        sink: false,
        ..KINDS
    };

    fn rows() -> impl Strategy<Value = Row> {
        let cell = (
            prop::sample::select(vec!["a", "b"]),
            gen::qualifier(),
            gen::timestamp(),
            gen::value(),
        )
            .prop_map(|(f, q, ts, v)| Cell::new(f, q, ts, v));
        (gen::key(), prop::collection::vec(cell, 0..8)).prop_map(|(key, mut cells)| {
            cells.sort_by(Cell::canonical_cmp);
            cells.dedup_by(|a, b| a.canonical_cmp(b).is_eq());
            Row { key, cells }
        })
    }

    /// Filters that keep or drop each cell on its own (and chains of them).
    fn cell_test() -> impl Strategy<Value = RowFilter> {
        gen::leaf_filter(NO_SINK)
            .prop_filter("a cell test", |f| {
                matches!(
                    f,
                    RowFilter::PassAll
                        | RowFilter::BlockAll
                        | RowFilter::FamilyNameRegex(_)
                        | RowFilter::ColumnQualifierRegex(_)
                        | RowFilter::ValueRegex(_)
                        | RowFilter::ColumnRange(_)
                        | RowFilter::TimestampRange(_)
                        | RowFilter::ValueRange(_)
                )
            })
            .prop_recursive(2, 6, 3, |inner| {
                prop::collection::vec(inner, 2..4).prop_map(RowFilter::Chain)
            })
    }

    fn apply(f: &RowFilter, row: &Row) -> Option<Option<Vec<Cell>>> {
        let compiled = CompiledFilter::compile(f).ok()?;
        Some(compiled.apply(row.clone()).map(|r| r.cells))
    }

    proptest! {
        #[test]
        fn output_is_canonical_and_comes_from_the_input(f in gen::filter(KINDS), row in rows()) {
            if let Some(Some(out)) = apply(&f, &row) {
                for pair in out.windows(2) {
                    prop_assert!(pair[0].canonical_cmp(&pair[1]).is_le());
                }
                for c in &out {
                    prop_assert!(row.cells.iter().any(|i| i.canonical_cmp(c).is_eq()));
                    prop_assert!(c.labels.len() <= 1, "a cell with two labels: {c:?}");
                }
            }
        }

        #[test]
        fn identities(f in gen::filter(KINDS), row in rows()) {
            let base = apply(&f, &row);
            prop_assume!(base.is_some());
            let chained = RowFilter::Chain(vec![f.clone(), RowFilter::PassAll]);
            prop_assert_eq!(apply(&chained, &row), base.clone());
            let interleaved = RowFilter::Interleave(vec![f.clone(), RowFilter::BlockAll]);
            prop_assert_eq!(apply(&interleaved, &row), base);
        }

        #[test]
        fn interleave_of_cell_tests_equals_the_definition(
            tests in prop::collection::vec(cell_test(), 0..4),
            prefix in gen::filter(KINDS),
            row in rows(),
        ) {
            // After `prefix` (which may duplicate cells or label them), the
            // fast path and the definition must agree cell for cell.
            let (Ok(prefix), Ok(tests)) = (
                CompiledFilter::compile(&prefix),
                tests.iter().map(CompiledFilter::compile).collect::<Result<Vec<_>, _>>(),
            ) else {
                return Ok(());
            };
            let nodes: Vec<Node> = tests.into_iter().map(|t| t.node).collect();
            prop_assume!(nodes.iter().all(is_cell_test));
            let mut sink = Vec::new();
            let input = eval(&prefix.node, &row.key, row.cells.clone(), &mut sink);
            let mut unused = Vec::new();
            let by_definition = interleave(&nodes, &row.key, input.clone(), &mut unused);
            let fast = if has_equal_neighbours(&input) {
                by_definition.clone()
            } else {
                interleave_cell_tests(&nodes, input.clone())
            };
            prop_assert_eq!(&fast, &by_definition);
            // And through the public entry point.
            let mut sink = Vec::new();
            prop_assert_eq!(eval(&Node::Interleave(nodes), &row.key, input, &mut sink), by_definition);
        }

        #[test]
        fn the_cell_prefilter_never_changes_the_output(f in gen::filter(KINDS), row in rows()) {
            let Ok(compiled) = CompiledFilter::compile(&f) else {
                return Ok(());
            };
            let Some(pre) = compiled.cell_prefilter() else {
                return Ok(());
            };
            let pruned = Row {
                key: row.key.clone(),
                cells: row
                    .cells
                    .iter()
                    .filter(|c| pre.may_pass(&c.family, &c.qualifier, c.timestamp_micros, &c.value))
                    .cloned()
                    .collect(),
            };
            let expected = compiled.apply(row).map(|r| r.cells);
            if pre.is_exact() {
                let exact = (!pruned.cells.is_empty()).then(|| pruned.cells.clone());
                prop_assert_eq!(&exact, &expected, "an exact prefilter is the filter");
            }
            prop_assert_eq!(compiled.apply(pruned).map(|r| r.cells), expected);
        }

        #[test]
        fn a_column_verdict_and_column_test_hold_for_every_cell_of_the_column(f in gen::filter(KINDS), row in rows()) {
            let Ok(compiled) = CompiledFilter::compile(&f) else {
                return Ok(());
            };
            let Some(pre) = compiled.cell_prefilter() else {
                return Ok(());
            };
            for c in &row.cells {
                let passes = pre.may_pass(&c.family, &c.qualifier, c.timestamp_micros, &c.value);
                if let Some(verdict) = pre.column_verdict(&c.family, &c.qualifier) {
                    prop_assert_eq!(passes, verdict, "{:?}", c);
                }
                let by_column = match pre.column_test(&c.family, &c.qualifier) {
                    ColumnTest::NoCell => false,
                    ColumnTest::EveryCell => true,
                    ColumnTest::Cells(test) => test.may_pass(c.timestamp_micros, &c.value),
                };
                prop_assert_eq!(passes, by_column, "column test of {:?}", c);
                if pre.family_decided() {
                    // Any qualifier of the family gets the same test.
                    let by_family = match pre.column_test(&c.family, b"") {
                        ColumnTest::NoCell => false,
                        ColumnTest::EveryCell => true,
                        ColumnTest::Cells(test) => test.may_pass(c.timestamp_micros, &c.value),
                    };
                    prop_assert_eq!(passes, by_family, "family test of {:?}", c);
                }
            }
        }

        #[test]
        fn column_limit_bounds_every_column(f in gen::filter(NO_SINK), n in 1u32..3, row in rows()) {
            let limited = RowFilter::Chain(vec![f, RowFilter::CellsPerColumnLimit(n)]);
            if let Some(Some(out)) = apply(&limited, &row) {
                let mut run = 0;
                for (i, c) in out.iter().enumerate() {
                    run = if i > 0 && out[i - 1].same_column(c) { run + 1 } else { 1 };
                    prop_assert!(run <= n as usize, "{} cells of one column", run);
                }
            }
        }
    }
}
