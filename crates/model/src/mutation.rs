//! Mutations, as in Bigtable v2's `Mutation` and `ReadModifyWriteRule`.

use std::borrow::Cow;

use bytes::Bytes;

use crate::filter::TimestampRange;

/// A family name in a mutation: a `&'static str` (the names code writes)
/// costs no allocation; names known only at run time are owned.
pub type FamilyName = Cow<'static, str>;

/// One change to a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Mutation {
    /// Write a cell. `timestamp_micros` is explicit (a multiple of 1000) or
    /// [`crate::SERVER_TIME`] for the server's clock. A cell with the same
    /// column and timestamp is replaced.
    SetCell {
        family: FamilyName,
        qualifier: Bytes,
        timestamp_micros: i64,
        value: Bytes,
    },
    /// Add `input` to the cell of one column and timestamp of an aggregate
    /// family (`FamilyType::SumInt64`), creating it (as `input`) when
    /// missing. `timestamp_micros` is explicit (>= 0, whole milliseconds).
    AddToCell {
        family: FamilyName,
        qualifier: Bytes,
        timestamp_micros: i64,
        input: i64,
    },
    /// Delete the cells of one column whose timestamp is in `time_range`.
    DeleteFromColumn {
        family: FamilyName,
        qualifier: Bytes,
        time_range: TimestampRange,
    },
    /// Delete every cell of one family in the row.
    DeleteFromFamily { family: FamilyName },
    /// Delete the whole row.
    DeleteFromRow,
}

impl Mutation {
    /// A `SetCell` with an explicit timestamp.
    pub fn set_cell(
        family: impl Into<FamilyName>,
        qualifier: impl Into<Bytes>,
        timestamp_micros: i64,
        value: impl Into<Bytes>,
    ) -> Mutation {
        Mutation::SetCell {
            family: family.into(),
            qualifier: qualifier.into(),
            timestamp_micros,
            value: value.into(),
        }
    }

    /// An `AddToCell` of `input`.
    pub fn add_to_cell(
        family: impl Into<FamilyName>,
        qualifier: impl Into<Bytes>,
        timestamp_micros: i64,
        input: i64,
    ) -> Mutation {
        Mutation::AddToCell {
            family: family.into(),
            qualifier: qualifier.into(),
            timestamp_micros,
            input,
        }
    }

    /// A `DeleteFromColumn` over all timestamps.
    pub fn delete_column(family: impl Into<FamilyName>, qualifier: impl Into<Bytes>) -> Mutation {
        Mutation::DeleteFromColumn {
            family: family.into(),
            qualifier: qualifier.into(),
            time_range: TimestampRange::default(),
        }
    }

    /// True when applying it twice has the same effect as once (it neither
    /// uses the server's clock nor adds). Only idempotent entries are
    /// retried.
    pub fn is_idempotent(&self) -> bool {
        !matches!(
            self,
            Mutation::SetCell {
                timestamp_micros: crate::SERVER_TIME,
                ..
            } | Mutation::AddToCell { .. }
        )
    }
}

/// The mutations of one row, an entry of `mutate_rows`.
#[derive(Debug, Clone, PartialEq)]
pub struct RowMutations {
    pub row_key: Bytes,
    pub mutations: Vec<Mutation>,
}

impl RowMutations {
    pub fn new(row_key: impl Into<Bytes>, mutations: Vec<Mutation>) -> RowMutations {
        RowMutations {
            row_key: row_key.into(),
            mutations,
        }
    }
}

/// The rules of one row, an entry of `read_modify_write_rows`.
#[derive(Debug, Clone, PartialEq)]
pub struct RowRules {
    pub row_key: Bytes,
    pub rules: Vec<ReadModifyWriteRule>,
}

impl RowRules {
    pub fn new(row_key: impl Into<Bytes>, rules: Vec<ReadModifyWriteRule>) -> RowRules {
        RowRules {
            row_key: row_key.into(),
            rules,
        }
    }
}

/// What a read-modify-write rule does to the latest cell of its column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadModifyWriteOp {
    /// Append bytes to the existing value (or to empty).
    Append(Bytes),
    /// Add to the existing value read as a 64-bit big-endian signed integer
    /// (or to 0); wraps on overflow as Bigtable does.
    Increment(i64),
}

/// One rule of `read_modify_write_row`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadModifyWriteRule {
    pub family: FamilyName,
    pub qualifier: Bytes,
    pub op: ReadModifyWriteOp,
}

impl ReadModifyWriteRule {
    pub fn increment(
        family: impl Into<FamilyName>,
        qualifier: impl Into<Bytes>,
        amount: i64,
    ) -> ReadModifyWriteRule {
        ReadModifyWriteRule {
            family: family.into(),
            qualifier: qualifier.into(),
            op: ReadModifyWriteOp::Increment(amount),
        }
    }

    pub fn append(
        family: impl Into<FamilyName>,
        qualifier: impl Into<Bytes>,
        value: impl Into<Bytes>,
    ) -> ReadModifyWriteRule {
        ReadModifyWriteRule {
            family: family.into(),
            qualifier: qualifier.into(),
            op: ReadModifyWriteOp::Append(value.into()),
        }
    }
}
