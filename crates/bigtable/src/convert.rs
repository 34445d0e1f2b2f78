//! Model types to and from Bigtable v2 data-API messages, field for field.

use std::ops::Bound;

use affinity_model::{
    Cell, ColumnRange, Error, Mutation, ReadModifyWriteOp, ReadModifyWriteRule, Result, Row,
    RowFilter, RowRange, RowSet, TimestampRange, ValueRange,
};
use googleapis_tonic_google_bigtable_v2::google::bigtable::v2 as pb;
use pb::row_filter::Filter;

/// A filter as the server takes it, after the equivalence rewrites of
/// [`crate::filter_rewrite`]. Counts above `i32::MAX` cannot be sent.
pub(crate) fn filter_to_proto(filter: &RowFilter) -> Result<pb::RowFilter> {
    to_proto(&crate::filter_rewrite::normalize(filter))
}

fn to_proto(filter: &RowFilter) -> Result<pb::RowFilter> {
    let f = match filter {
        RowFilter::Chain(filters) => Filter::Chain(pb::row_filter::Chain {
            filters: filters.iter().map(to_proto).collect::<Result<_>>()?,
        }),
        RowFilter::Interleave(filters) => Filter::Interleave(pb::row_filter::Interleave {
            filters: filters.iter().map(to_proto).collect::<Result<_>>()?,
        }),
        RowFilter::Condition {
            predicate,
            true_filter,
            false_filter,
        } => {
            let branch = |f: &Option<Box<RowFilter>>| -> Result<Option<Box<pb::RowFilter>>> {
                f.as_deref().map(|f| to_proto(f).map(Box::new)).transpose()
            };
            Filter::Condition(Box::new(pb::row_filter::Condition {
                predicate_filter: Some(Box::new(to_proto(predicate)?)),
                true_filter: branch(true_filter)?,
                false_filter: branch(false_filter)?,
            }))
        }
        RowFilter::Sink => Filter::Sink(true),
        RowFilter::PassAll => Filter::PassAllFilter(true),
        RowFilter::BlockAll => Filter::BlockAllFilter(true),
        RowFilter::RowKeyRegex(re) => Filter::RowKeyRegexFilter(re.clone()),
        RowFilter::RowSample(p) => Filter::RowSampleFilter(*p),
        RowFilter::FamilyNameRegex(re) => Filter::FamilyNameRegexFilter(re.clone()),
        RowFilter::ColumnQualifierRegex(re) => Filter::ColumnQualifierRegexFilter(re.clone()),
        RowFilter::ColumnRange(range) => Filter::ColumnRangeFilter(column_range_to_proto(range)),
        RowFilter::TimestampRange(range) => {
            Filter::TimestampRangeFilter(timestamp_range_to_proto(range))
        }
        RowFilter::ValueRegex(re) => Filter::ValueRegexFilter(re.clone()),
        RowFilter::ValueRange(range) => Filter::ValueRangeFilter(value_range_to_proto(range)),
        RowFilter::CellsPerRowOffset(n) => {
            Filter::CellsPerRowOffsetFilter(count("cells_per_row_offset", *n)?)
        }
        RowFilter::CellsPerRowLimit(n) => {
            Filter::CellsPerRowLimitFilter(count("cells_per_row_limit", *n)?)
        }
        RowFilter::CellsPerColumnLimit(n) => {
            Filter::CellsPerColumnLimitFilter(count("cells_per_column_limit", *n)?)
        }
        RowFilter::StripValue => Filter::StripValueTransformer(true),
        RowFilter::ApplyLabel(label) => Filter::ApplyLabelTransformer(label.clone()),
    };
    Ok(pb::RowFilter { filter: Some(f) })
}

fn count(field: &str, n: u32) -> Result<i32> {
    i32::try_from(n).map_err(|_| Error::InvalidFilter {
        reason: format!("{field} {n} is larger than {}", i32::MAX),
    })
}

fn column_range_to_proto(range: &ColumnRange) -> pb::ColumnRange {
    use pb::column_range::{EndQualifier, StartQualifier};
    pb::ColumnRange {
        family_name: range.family.clone(),
        start_qualifier: match &range.start {
            Bound::Included(q) => Some(StartQualifier::StartQualifierClosed(q.clone())),
            Bound::Excluded(q) => Some(StartQualifier::StartQualifierOpen(q.clone())),
            Bound::Unbounded => None,
        },
        end_qualifier: match &range.end {
            Bound::Included(q) => Some(EndQualifier::EndQualifierClosed(q.clone())),
            Bound::Excluded(q) => Some(EndQualifier::EndQualifierOpen(q.clone())),
            Bound::Unbounded => None,
        },
    }
}

fn value_range_to_proto(range: &ValueRange) -> pb::ValueRange {
    use pb::value_range::{EndValue, StartValue};
    pb::ValueRange {
        start_value: match &range.start {
            Bound::Included(v) => Some(StartValue::StartValueClosed(v.clone())),
            Bound::Excluded(v) => Some(StartValue::StartValueOpen(v.clone())),
            Bound::Unbounded => None,
        },
        end_value: match &range.end {
            Bound::Included(v) => Some(EndValue::EndValueClosed(v.clone())),
            Bound::Excluded(v) => Some(EndValue::EndValueOpen(v.clone())),
            Bound::Unbounded => None,
        },
    }
}

fn timestamp_range_to_proto(range: &TimestampRange) -> pb::TimestampRange {
    pb::TimestampRange {
        start_timestamp_micros: range.start_micros,
        end_timestamp_micros: range.end_micros,
    }
}

/// A row range as the server takes it.
pub(crate) fn row_range_to_proto(range: &RowRange) -> pb::RowRange {
    use pb::row_range::{EndKey, StartKey};
    pb::RowRange {
        start_key: match &range.start {
            Bound::Included(k) => Some(StartKey::StartKeyClosed(k.clone())),
            Bound::Excluded(k) => Some(StartKey::StartKeyOpen(k.clone())),
            Bound::Unbounded => None,
        },
        end_key: match &range.end {
            Bound::Included(k) => Some(EndKey::EndKeyClosed(k.clone())),
            Bound::Excluded(k) => Some(EndKey::EndKeyOpen(k.clone())),
            Bound::Unbounded => None,
        },
    }
}

/// A row set as the server takes it (empty still means the whole table).
pub(crate) fn row_set_to_proto(rows: &RowSet) -> pb::RowSet {
    pb::RowSet {
        row_keys: rows.keys.clone(),
        row_ranges: rows.ranges.iter().map(row_range_to_proto).collect(),
    }
}

/// A mutation as the server takes it.
pub(crate) fn mutation_to_proto(mutation: &Mutation) -> pb::Mutation {
    use pb::mutation as m;
    let inner = match mutation {
        Mutation::SetCell {
            family,
            qualifier,
            timestamp_micros,
            value,
        } => m::Mutation::SetCell(m::SetCell {
            family_name: family.to_string(),
            column_qualifier: qualifier.clone(),
            timestamp_micros: *timestamp_micros,
            value: value.clone(),
        }),
        Mutation::AddToCell {
            family,
            qualifier,
            timestamp_micros,
            input,
        } => m::Mutation::AddToCell(m::AddToCell {
            family_name: family.to_string(),
            column_qualifier: Some(pb::Value {
                kind: Some(pb::value::Kind::RawValue(qualifier.clone())),
                r#type: None,
            }),
            timestamp: Some(pb::Value {
                kind: Some(pb::value::Kind::RawTimestampMicros(*timestamp_micros)),
                r#type: None,
            }),
            input: Some(pb::Value {
                kind: Some(pb::value::Kind::IntValue(*input)),
                r#type: None,
            }),
        }),
        Mutation::DeleteFromColumn {
            family,
            qualifier,
            time_range,
        } => m::Mutation::DeleteFromColumn(m::DeleteFromColumn {
            family_name: family.to_string(),
            column_qualifier: qualifier.clone(),
            time_range: Some(timestamp_range_to_proto(time_range)),
        }),
        Mutation::DeleteFromFamily { family } => {
            m::Mutation::DeleteFromFamily(m::DeleteFromFamily {
                family_name: family.to_string(),
            })
        }
        Mutation::DeleteFromRow => m::Mutation::DeleteFromRow(m::DeleteFromRow {}),
    };
    pb::Mutation {
        mutation: Some(inner),
    }
}

pub(crate) fn mutations_to_proto(mutations: &[Mutation]) -> Vec<pb::Mutation> {
    mutations.iter().map(mutation_to_proto).collect()
}

/// A read-modify-write rule as the server takes it.
pub(crate) fn rule_to_proto(rule: &ReadModifyWriteRule) -> pb::ReadModifyWriteRule {
    use pb::read_modify_write_rule::Rule;
    pb::ReadModifyWriteRule {
        family_name: rule.family.to_string(),
        column_qualifier: rule.qualifier.clone(),
        rule: Some(match &rule.op {
            ReadModifyWriteOp::Append(value) => Rule::AppendValue(value.clone()),
            ReadModifyWriteOp::Increment(amount) => Rule::IncrementAmount(*amount),
        }),
    }
}

/// A whole row as a read-modify-write returns it, cells in canonical order.
pub(crate) fn row_from_proto(row: pb::Row) -> Row {
    let mut cells = Vec::new();
    for family in row.families {
        for column in family.columns {
            for cell in column.cells {
                cells.push(Cell {
                    family: family.name.clone(),
                    qualifier: column.qualifier.clone(),
                    timestamp_micros: cell.timestamp_micros,
                    value: cell.value,
                    labels: cell.labels,
                });
            }
        }
    }
    cells.sort_by(Cell::canonical_cmp);
    Row {
        key: row.key,
        cells,
    }
}

/// Approximate memory a row holds, for bounding read-ahead buffers.
pub(crate) fn row_weight(row: &Row) -> usize {
    const CELL_OVERHEAD: usize = 64;
    row.key.len()
        + row
            .cells
            .iter()
            .map(|c| c.family.len() + c.qualifier.len() + c.value.len() + CELL_OVERHEAD)
            .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn every_filter_kind_converts() {
        let filter = RowFilter::Chain(vec![
            RowFilter::Interleave(vec![
                RowFilter::Sink,
                RowFilter::PassAll,
                RowFilter::BlockAll,
            ]),
            RowFilter::Condition {
                predicate: Box::new(RowFilter::RowKeyRegex(Bytes::from_static(b"a.*"))),
                true_filter: Some(Box::new(RowFilter::StripValue)),
                false_filter: None,
            },
            RowFilter::RowSample(0.5),
            RowFilter::FamilyNameRegex("f".into()),
            RowFilter::ColumnQualifierRegex(Bytes::from_static(b"q")),
            RowFilter::ColumnRange(ColumnRange {
                family: "f".into(),
                start: Bound::Included(Bytes::from_static(b"a")),
                end: Bound::Excluded(Bytes::from_static(b"b")),
            }),
            RowFilter::TimestampRange(TimestampRange::new(1000, 2000)),
            RowFilter::ValueRegex(Bytes::from_static(b"v")),
            RowFilter::ValueRange(ValueRange {
                start: Bound::Excluded(Bytes::from_static(b"a")),
                end: Bound::Unbounded,
            }),
            RowFilter::CellsPerRowOffset(1),
            RowFilter::CellsPerRowLimit(2),
            RowFilter::CellsPerColumnLimit(3),
            RowFilter::ApplyLabel("l".into()),
        ]);
        let proto = filter_to_proto(&filter).unwrap();
        let Some(Filter::Chain(chain)) = proto.filter else {
            panic!("not a chain: {proto:?}");
        };
        assert_eq!(chain.filters.len(), 13);
        let Some(Filter::Condition(cond)) = &chain.filters[1].filter else {
            panic!("not a condition");
        };
        assert!(cond.false_filter.is_none());
        assert_eq!(
            cond.true_filter.as_deref().and_then(|f| f.filter.clone()),
            Some(Filter::StripValueTransformer(true))
        );
        assert_eq!(
            chain.filters[5].filter,
            Some(Filter::ColumnRangeFilter(pb::ColumnRange {
                family_name: "f".into(),
                start_qualifier: Some(pb::column_range::StartQualifier::StartQualifierClosed(
                    Bytes::from_static(b"a")
                )),
                end_qualifier: Some(pb::column_range::EndQualifier::EndQualifierOpen(
                    Bytes::from_static(b"b")
                )),
            }))
        );
        assert_eq!(
            chain.filters[11].filter,
            Some(Filter::CellsPerColumnLimitFilter(3))
        );
    }

    #[test]
    fn counts_beyond_i32_are_rejected() {
        let err = filter_to_proto(&RowFilter::CellsPerRowLimit(u32::MAX)).unwrap_err();
        assert!(matches!(err, Error::InvalidFilter { .. }), "{err:?}");
    }

    #[test]
    fn row_ranges_keep_their_bounds() {
        let range = RowRange {
            start: Bound::Excluded(Bytes::from_static(b"a")),
            end: Bound::Included(Bytes::from_static(b"z")),
        };
        let proto = row_range_to_proto(&range);
        assert_eq!(
            proto.start_key,
            Some(pb::row_range::StartKey::StartKeyOpen(Bytes::from_static(
                b"a"
            )))
        );
        assert_eq!(
            proto.end_key,
            Some(pb::row_range::EndKey::EndKeyClosed(Bytes::from_static(
                b"z"
            )))
        );
        let all = row_range_to_proto(&RowRange::all());
        assert_eq!((all.start_key, all.end_key), (None, None));
    }

    #[test]
    fn mutations_convert_field_for_field() {
        let set = mutation_to_proto(&Mutation::set_cell("f", "q", 3000, "v"));
        assert_eq!(
            set.mutation,
            Some(pb::mutation::Mutation::SetCell(pb::mutation::SetCell {
                family_name: "f".into(),
                column_qualifier: Bytes::from_static(b"q"),
                timestamp_micros: 3000,
                value: Bytes::from_static(b"v"),
            }))
        );
        let del = mutation_to_proto(&Mutation::DeleteFromColumn {
            family: "f".into(),
            qualifier: Bytes::from_static(b"q"),
            time_range: TimestampRange::new(1000, 0),
        });
        let Some(pb::mutation::Mutation::DeleteFromColumn(d)) = del.mutation else {
            panic!("wrong mutation");
        };
        assert_eq!(d.time_range.map(|r| r.start_timestamp_micros), Some(1000));
        let rule = rule_to_proto(&ReadModifyWriteRule::increment("f", "n", -2));
        assert_eq!(
            rule.rule,
            Some(pb::read_modify_write_rule::Rule::IncrementAmount(-2))
        );
    }

    #[test]
    fn rows_from_proto_are_in_canonical_order() {
        let row = pb::Row {
            key: Bytes::from_static(b"r"),
            families: vec![
                pb::Family {
                    name: "b".into(),
                    columns: vec![pb::Column {
                        qualifier: Bytes::from_static(b"q"),
                        cells: vec![pb::Cell {
                            timestamp_micros: 1000,
                            value: Bytes::from_static(b"1"),
                            labels: vec![],
                        }],
                    }],
                },
                pb::Family {
                    name: "a".into(),
                    columns: vec![pb::Column {
                        qualifier: Bytes::from_static(b"q"),
                        cells: vec![
                            pb::Cell {
                                timestamp_micros: 1000,
                                value: Bytes::from_static(b"old"),
                                labels: vec![],
                            },
                            pb::Cell {
                                timestamp_micros: 2000,
                                value: Bytes::from_static(b"new"),
                                labels: vec![],
                            },
                        ],
                    }],
                },
            ],
        };
        let row = row_from_proto(row);
        let order: Vec<_> = row
            .cells
            .iter()
            .map(|c| (c.family.as_str(), c.timestamp_micros))
            .collect();
        assert_eq!(order, [("a", 2000), ("a", 1000), ("b", 1000)]);
    }
}
