//! The crate's error type.

/// What went wrong loading, encoding or querying located points. Each
/// variant names the offending value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A CSV row that cannot become a point: the line (1-based, as an
    /// editor shows it), the column and why.
    #[error("line {line}, column {column:?}: {reason}")]
    BadRow {
        line: u64,
        column: String,
        reason: String,
    },
    /// A CSV header that lacks a column the load needs, or repeats one.
    #[error("csv header: {reason}")]
    BadHeader { reason: String },
    /// A stored point value or table description that does not decode.
    #[error("corrupt {what} in row {key}: {reason}")]
    Corrupt {
        what: &'static str,
        key: String,
        reason: String,
    },
    /// A table that was not created as a points table.
    #[error("table {table:?} is not a points table: {reason}")]
    NotPointsTable { table: String, reason: String },
    /// A parameter that makes no sense (unknown key kind, empty time range).
    #[error("invalid argument {name}: {reason}")]
    InvalidArgument { name: &'static str, reason: String },
    /// An error from the row-key crate (coordinates, bins, planning).
    #[error(transparent)]
    Key(#[from] affinity_rowkey::Error),
    /// An error from the store.
    #[error(transparent)]
    Store(#[from] affinity_model::Error),
    /// Reading the input failed.
    #[error("reading {what}: {reason}")]
    Io { what: String, reason: String },
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
