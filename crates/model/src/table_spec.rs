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

/// A column family of a table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ColumnFamily {
    pub gc_rule: GcRule,
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
        self.families.insert(name.into(), ColumnFamily { gc_rule });
        self
    }
}

/// One change to a table's families, as in `ModifyColumnFamilies`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FamilyModification {
    Create { family: String, gc_rule: GcRule },
    Update { family: String, gc_rule: GcRule },
    Drop { family: String },
}
