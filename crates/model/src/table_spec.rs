//! Tables, column families and their garbage-collection rules.

use std::collections::BTreeMap;
use std::time::Duration;

/// A column family's garbage-collection rule, as in Bigtable's `GcRule`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum GcRule {
    /// Keep everything.
    #[default]
    None,
    /// Keep at most N versions of each column (the newest).
    MaxVersions(u32),
    /// Delete cells older than this (by cell timestamp against the clock).
    MaxAge(Duration),
    /// Delete cells that every sub-rule would delete.
    Intersection(Vec<GcRule>),
    /// Delete cells that any sub-rule would delete.
    Union(Vec<GcRule>),
}

/// What the cells of a family hold, as Bigtable's family `value_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FamilyType {
    /// Plain cells, written with `SetCell`.
    #[default]
    Standard,
    /// An aggregate family summing 64-bit integers: cells are written with
    /// `AddToCell` only (adds to the same column and timestamp sum into one
    /// cell) and read as 8-byte big-endian values.
    SumInt64,
}

impl FamilyType {
    pub fn is_aggregate(self) -> bool {
        self != FamilyType::Standard
    }
}

/// A column family of a table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ColumnFamily {
    pub gc_rule: GcRule,
    pub value_type: FamilyType,
}

impl ColumnFamily {
    /// A standard family.
    pub fn standard(gc_rule: GcRule) -> ColumnFamily {
        ColumnFamily {
            gc_rule,
            value_type: FamilyType::Standard,
        }
    }
}

/// What a table holds: its column families.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TableSpec {
    pub families: BTreeMap<String, ColumnFamily>,
}

impl TableSpec {
    pub fn new() -> TableSpec {
        TableSpec::default()
    }

    /// Add (or replace) a family.
    pub fn with_family(mut self, name: impl Into<String>, gc_rule: GcRule) -> TableSpec {
        self.families
            .insert(name.into(), ColumnFamily::standard(gc_rule));
        self
    }

    /// Add (or replace) an aggregate family summing 64-bit integers.
    pub fn with_sum_family(mut self, name: impl Into<String>, gc_rule: GcRule) -> TableSpec {
        let family = ColumnFamily {
            gc_rule,
            value_type: FamilyType::SumInt64,
        };
        self.families.insert(name.into(), family);
        self
    }

    /// The type of a family, if the table has it.
    pub fn family_type(&self, name: &str) -> Option<FamilyType> {
        self.families.get(name).map(|f| f.value_type)
    }
}

/// One change to a table's families, as in `ModifyColumnFamilies`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FamilyModification {
    /// Create a standard family.
    Create {
        family: String,
        gc_rule: GcRule,
    },
    /// Create an aggregate family summing 64-bit integers
    /// ([`FamilyType::SumInt64`]).
    CreateSum {
        family: String,
        gc_rule: GcRule,
    },
    /// Change a family's GC rule (its type stays).
    Update {
        family: String,
        gc_rule: GcRule,
    },
    Drop {
        family: String,
    },
}

impl TableSpec {
    /// Check every family name and GC rule.
    pub fn validate(&self) -> crate::Result<()> {
        for (name, family) in &self.families {
            crate::limits::check_family_name(name)?;
            crate::gc::validate_gc_rule(&family.gc_rule)?;
        }
        Ok(())
    }

    /// The spec after `modifications`, applied in order, or the first error
    /// (`FamilyExists` for a create of an existing family, `FamilyNotFound`
    /// for an update or drop of a missing one, invalid names or rules). Every
    /// modification is checked before the caller changes anything.
    pub fn apply_modifications(
        &self,
        table: &str,
        modifications: &[FamilyModification],
    ) -> crate::Result<TableSpec> {
        use crate::Error;
        let mut next = self.clone();
        for m in modifications {
            match m {
                FamilyModification::Create { family, gc_rule }
                | FamilyModification::CreateSum { family, gc_rule } => {
                    crate::limits::check_family_name(family)?;
                    crate::gc::validate_gc_rule(gc_rule)?;
                    if next.families.contains_key(family) {
                        return Err(Error::FamilyExists {
                            table: table.to_string(),
                            family: family.clone(),
                        });
                    }
                    let value_type = match m {
                        FamilyModification::CreateSum { .. } => FamilyType::SumInt64,
                        _ => FamilyType::Standard,
                    };
                    let created = ColumnFamily {
                        gc_rule: gc_rule.clone(),
                        value_type,
                    };
                    next.families.insert(family.clone(), created);
                }
                FamilyModification::Update { family, gc_rule } => {
                    crate::gc::validate_gc_rule(gc_rule)?;
                    match next.families.get_mut(family) {
                        Some(f) => f.gc_rule = gc_rule.clone(),
                        None => {
                            return Err(Error::FamilyNotFound {
                                table: table.to_string(),
                                family: family.clone(),
                            })
                        }
                    }
                }
                FamilyModification::Drop { family } => {
                    if next.families.remove(family).is_none() {
                        return Err(Error::FamilyNotFound {
                            table: table.to_string(),
                            family: family.clone(),
                        });
                    }
                }
            }
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    #[test]
    fn modifications_apply_in_order_and_fail_whole() {
        let spec = TableSpec::new().with_family("a", GcRule::None);
        let next = spec
            .apply_modifications(
                "t",
                &[
                    FamilyModification::Create {
                        family: "b".into(),
                        gc_rule: GcRule::MaxVersions(1),
                    },
                    FamilyModification::Update {
                        family: "a".into(),
                        gc_rule: GcRule::MaxVersions(2),
                    },
                    FamilyModification::Drop { family: "b".into() },
                ],
            )
            .expect("valid modifications");
        assert_eq!(
            next,
            TableSpec::new().with_family("a", GcRule::MaxVersions(2))
        );
        let dup = spec.apply_modifications(
            "t",
            &[FamilyModification::Create {
                family: "a".into(),
                gc_rule: GcRule::None,
            }],
        );
        assert!(matches!(dup, Err(Error::FamilyExists { .. })));
        let missing =
            spec.apply_modifications("t", &[FamilyModification::Drop { family: "z".into() }]);
        assert!(matches!(missing, Err(Error::FamilyNotFound { .. })));
        let bad = spec.apply_modifications(
            "t",
            &[FamilyModification::Create {
                family: "a b".into(),
                gc_rule: GcRule::None,
            }],
        );
        assert!(matches!(bad, Err(Error::InvalidFamilyName { .. })));
    }
}
