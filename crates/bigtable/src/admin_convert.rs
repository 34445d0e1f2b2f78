//! Model tables, families and GC rules to and from Bigtable admin-API
//! messages.

use std::time::Duration;

use affinity_model::{
    ColumnFamily, Error, FamilyModification, FamilyType, GcRule, Result, TableSpec,
};
use googleapis_tonic_google_bigtable_admin_v2::google::bigtable::admin::v2 as admin;

/// A GC rule as the admin API takes it.
pub(crate) fn gc_rule_to_proto(rule: &GcRule) -> Result<admin::GcRule> {
    use admin::gc_rule::{Intersection, Rule, Union};
    let rule = match rule {
        GcRule::None => None,
        GcRule::MaxVersions(n) => Some(Rule::MaxNumVersions(i32::try_from(*n).map_err(|_| {
            Error::InvalidArgument(format!(
                "gc rule max versions {n} is larger than {}",
                i32::MAX
            ))
        })?)),
        GcRule::MaxAge(age) => Some(Rule::MaxAge(duration_to_proto(*age)?)),
        GcRule::Intersection(rules) => Some(Rule::Intersection(Intersection {
            rules: rules.iter().map(gc_rule_to_proto).collect::<Result<_>>()?,
        })),
        GcRule::Union(rules) => Some(Rule::Union(Union {
            rules: rules.iter().map(gc_rule_to_proto).collect::<Result<_>>()?,
        })),
    };
    Ok(admin::GcRule { rule })
}

/// A GC rule as the model holds it. A missing rule keeps everything.
pub(crate) fn gc_rule_from_proto(rule: Option<&admin::GcRule>) -> Result<GcRule> {
    use admin::gc_rule::Rule;
    let Some(rule) = rule.and_then(|r| r.rule.as_ref()) else {
        return Ok(GcRule::None);
    };
    Ok(match rule {
        Rule::MaxNumVersions(n) => GcRule::MaxVersions(u32::try_from(*n).map_err(|_| {
            Error::Internal(format!(
                "server returned a negative max versions gc rule {n}"
            ))
        })?),
        Rule::MaxAge(d) => GcRule::MaxAge(duration_from_proto(d)?),
        Rule::Intersection(i) => GcRule::Intersection(
            i.rules
                .iter()
                .map(|r| gc_rule_from_proto(Some(r)))
                .collect::<Result<_>>()?,
        ),
        Rule::Union(u) => GcRule::Union(
            u.rules
                .iter()
                .map(|r| gc_rule_from_proto(Some(r)))
                .collect::<Result<_>>()?,
        ),
    })
}

fn duration_to_proto(d: Duration) -> Result<prost_types::Duration> {
    let seconds = i64::try_from(d.as_secs())
        .map_err(|_| Error::InvalidArgument(format!("gc rule max age {d:?} is too large")))?;
    Ok(prost_types::Duration {
        seconds,
        // Always below 1e9, so it fits.
        nanos: d.subsec_nanos() as i32,
    })
}

fn duration_from_proto(d: &prost_types::Duration) -> Result<Duration> {
    let (Ok(seconds), Ok(nanos)) = (u64::try_from(d.seconds), u32::try_from(d.nanos)) else {
        return Err(Error::Internal(format!(
            "server returned a negative max age gc rule {}s {}ns",
            d.seconds, d.nanos
        )));
    };
    Ok(Duration::new(seconds, nanos))
}

/// A column family as the admin API takes it.
pub(crate) fn family_to_proto(family: &ColumnFamily) -> Result<admin::ColumnFamily> {
    Ok(admin::ColumnFamily {
        gc_rule: Some(gc_rule_to_proto(&family.gc_rule)?),
        value_type: type_to_proto(family.value_type),
    })
}

/// A family's `value_type`: none for a standard family, an int64 sum
/// aggregate (big-endian 8-byte values) for a sum family.
fn type_to_proto(value_type: FamilyType) -> Option<admin::Type> {
    use admin::r#type::{aggregate, int64, Aggregate, Int64, Kind};
    match value_type {
        FamilyType::Standard => None,
        FamilyType::SumInt64 => {
            let int64 = admin::Type {
                kind: Some(Kind::Int64Type(Int64 {
                    encoding: Some(int64::Encoding {
                        encoding: Some(int64::encoding::Encoding::BigEndianBytes(
                            int64::encoding::BigEndianBytes::default(),
                        )),
                    }),
                })),
            };
            Some(admin::Type {
                kind: Some(Kind::AggregateType(Box::new(Aggregate {
                    input_type: Some(Box::new(int64)),
                    state_type: None,
                    aggregator: Some(aggregate::Aggregator::Sum(aggregate::Sum {})),
                }))),
            })
        }
    }
}

/// A family's type from its `value_type`; aggregates other than an int64
/// sum are refused (Affinity never creates them).
fn type_from_proto(family: &str, value_type: Option<&admin::Type>) -> Result<FamilyType> {
    use admin::r#type::{aggregate::Aggregator, Kind};
    match value_type.and_then(|t| t.kind.as_ref()) {
        None => Ok(FamilyType::Standard),
        Some(Kind::AggregateType(a)) if matches!(a.aggregator, Some(Aggregator::Sum(_))) => {
            Ok(FamilyType::SumInt64)
        }
        Some(other) => Err(Error::InvalidArgument(format!(
            "column family {family:?} has a value type Affinity does not support: {other:?}"
        ))),
    }
}

/// A table's spec from its admin-API description.
pub(crate) fn spec_from_proto(table: &admin::Table) -> Result<TableSpec> {
    let mut spec = TableSpec::new();
    for (name, family) in &table.column_families {
        spec.families.insert(
            name.clone(),
            ColumnFamily {
                gc_rule: gc_rule_from_proto(family.gc_rule.as_ref())?,
                value_type: type_from_proto(name, family.value_type.as_ref())?,
            },
        );
    }
    Ok(spec)
}

/// A family modification as the admin API takes it.
pub(crate) fn modification_to_proto(
    modification: &FamilyModification,
) -> Result<admin::modify_column_families_request::Modification> {
    use admin::modify_column_families_request::{modification::Mod, Modification};
    let (id, m) = match modification {
        FamilyModification::Create { family, gc_rule } => (
            family,
            Mod::Create(family_to_proto(&ColumnFamily::standard(gc_rule.clone()))?),
        ),
        FamilyModification::CreateSum { family, gc_rule } => (
            family,
            Mod::Create(family_to_proto(&ColumnFamily {
                gc_rule: gc_rule.clone(),
                value_type: FamilyType::SumInt64,
            })?),
        ),
        FamilyModification::Update { family, gc_rule } => (
            family,
            Mod::Update(family_to_proto(&ColumnFamily::standard(gc_rule.clone()))?),
        ),
        FamilyModification::Drop { family } => (family, Mod::Drop(true)),
    };
    Ok(Modification {
        id: id.clone(),
        update_mask: None,
        r#mod: Some(m),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gc_rules_round_trip() {
        let rule = GcRule::Union(vec![
            GcRule::MaxVersions(3),
            GcRule::Intersection(vec![
                GcRule::MaxAge(Duration::from_millis(90 * 86_400_000 + 1)),
                GcRule::MaxVersions(1),
            ]),
        ]);
        let proto = gc_rule_to_proto(&rule).unwrap();
        assert_eq!(gc_rule_from_proto(Some(&proto)).unwrap(), rule);
        let none = gc_rule_to_proto(&GcRule::None).unwrap();
        assert_eq!(gc_rule_from_proto(Some(&none)).unwrap(), GcRule::None);
        assert_eq!(gc_rule_from_proto(None).unwrap(), GcRule::None);
    }

    #[test]
    fn specs_come_back_with_their_families() {
        let mut table = admin::Table::default();
        table.column_families.insert(
            "e".into(),
            family_to_proto(&ColumnFamily::standard(GcRule::MaxVersions(1))).unwrap(),
        );
        table.column_families.insert(
            "n".into(),
            family_to_proto(&ColumnFamily {
                gc_rule: GcRule::None,
                value_type: FamilyType::SumInt64,
            })
            .unwrap(),
        );
        let spec = spec_from_proto(&table).unwrap();
        assert_eq!(
            spec,
            TableSpec::new()
                .with_family("e", GcRule::MaxVersions(1))
                .with_sum_family("n", GcRule::None)
        );
    }

    #[test]
    fn modifications_carry_the_family_id() {
        let m = modification_to_proto(&FamilyModification::Drop { family: "x".into() }).unwrap();
        assert_eq!(m.id, "x");
        assert!(matches!(
            m.r#mod,
            Some(admin::modify_column_families_request::modification::Mod::Drop(true))
        ));
    }
}
