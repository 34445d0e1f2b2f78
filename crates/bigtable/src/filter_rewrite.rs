//! Rewriting a `RowFilter` into an equivalent one every server takes: a
//! chain or interleave of one filter becomes that filter, an empty chain
//! `PassAll` and an empty interleave `BlockAll` (the model's meaning). The
//! emulator rejects chains and interleaves of fewer than two filters.

use affinity_model::RowFilter;

/// The filter, normalized as described in the module docs.
pub(crate) fn normalize(filter: &RowFilter) -> RowFilter {
    match filter {
        RowFilter::Chain(filters) => {
            let mut out: Vec<RowFilter> = filters.iter().map(normalize).collect();
            match out.len() {
                0 => RowFilter::PassAll,
                1 => out.pop().unwrap_or(RowFilter::PassAll),
                _ => RowFilter::Chain(out),
            }
        }
        RowFilter::Interleave(filters) => {
            let mut out: Vec<RowFilter> = filters.iter().map(normalize).collect();
            match out.len() {
                0 => RowFilter::BlockAll,
                1 => out.pop().unwrap_or(RowFilter::BlockAll),
                _ => RowFilter::Interleave(out),
            }
        }
        RowFilter::Condition {
            predicate,
            true_filter,
            false_filter,
        } => RowFilter::Condition {
            predicate: Box::new(normalize(predicate)),
            true_filter: true_filter.as_deref().map(|f| Box::new(normalize(f))),
            false_filter: false_filter.as_deref().map(|f| Box::new(normalize(f))),
        },
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use affinity_model::eval::CompiledFilter;
    use affinity_model::{Cell, Row};
    use bytes::Bytes;

    #[test]
    fn degenerate_chains_and_interleaves_collapse() {
        assert_eq!(normalize(&RowFilter::Chain(vec![])), RowFilter::PassAll);
        assert_eq!(
            normalize(&RowFilter::Interleave(vec![])),
            RowFilter::BlockAll
        );
        assert_eq!(
            normalize(&RowFilter::Chain(vec![RowFilter::Interleave(vec![
                RowFilter::StripValue
            ])])),
            RowFilter::StripValue
        );
    }

    mod equivalence {
        use super::*;
        use proptest::prelude::*;

        fn leaf() -> impl Strategy<Value = RowFilter> {
            prop_oneof![
                Just(RowFilter::PassAll),
                Just(RowFilter::BlockAll),
                Just(RowFilter::Sink),
                Just(RowFilter::StripValue),
                Just(RowFilter::ApplyLabel("x".into())),
                Just(RowFilter::ApplyLabel("y".into())),
                Just(RowFilter::ValueRegex(Bytes::from_static(b"v"))),
                Just(RowFilter::FamilyNameRegex("a".into())),
                Just(RowFilter::CellsPerColumnLimit(1)),
                Just(RowFilter::CellsPerRowLimit(2)),
            ]
        }

        fn filter() -> impl Strategy<Value = RowFilter> {
            leaf().prop_recursive(3, 24, 3, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(RowFilter::Chain),
                    prop::collection::vec(inner.clone(), 0..4).prop_map(RowFilter::Interleave),
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
        }

        fn row() -> impl Strategy<Value = Row> {
            let cell = (
                prop::sample::select(vec!["a", "b"]),
                prop::sample::select(vec!["p", "q"]),
                1i64..4,
                prop::sample::select(vec!["v", "w", ""]),
            )
                .prop_map(|(f, q, ts, v)| Cell::new(f, q, ts * 1000, v));
            prop::collection::vec(cell, 0..6).prop_map(|mut cells| {
                cells.sort_by(Cell::canonical_cmp);
                cells.dedup_by(|a, b| a.same_column(b) && a.timestamp_micros == b.timestamp_micros);
                Row {
                    key: Bytes::from_static(b"r"),
                    cells,
                }
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]
            /// Under the model's semantics a rewritten filter gives exactly
            /// the original's output, and stays valid.
            #[test]
            fn rewriting_preserves_meaning(f in filter(), row in row()) {
                let Ok(original) = CompiledFilter::compile(&f) else {
                    return Ok(());
                };
                let rewritten = normalize(&f);
                let compiled = CompiledFilter::compile(&rewritten);
                prop_assert!(compiled.is_ok(), "{f:?} became invalid {rewritten:?}");
                if let Ok(compiled) = compiled {
                    prop_assert_eq!(compiled.apply(row.clone()), original.apply(row), "{:?} -> {:?}", f, rewritten);
                }
            }
        }
    }
}
