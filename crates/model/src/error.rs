//! The model's error type and the one mapping from error kind to HTTP status
//! and gRPC code.

/// Result alias used across the storage layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong in a storage operation. Each variant carries the offending
/// value so a message can name it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("row key is {len} bytes, the limit is 4096")]
    RowKeyTooLarge { len: usize },
    #[error("row key must not be empty")]
    EmptyRowKey,
    #[error("column qualifier is {len} bytes, the limit is 16384")]
    QualifierTooLarge { len: usize },
    #[error("cell value is {len} bytes, the limit is 104857600")]
    ValueTooLarge { len: usize },
    #[error("request has {count} mutations, the limit is 100000")]
    TooManyMutations { count: usize },
    #[error("request has no mutations")]
    NoMutations,
    #[error("invalid column family name {name:?}: must match [_a-zA-Z0-9][-_.a-zA-Z0-9]*")]
    InvalidFamilyName { name: String },
    #[error("invalid table name {name:?}: must match [_a-zA-Z0-9][-_.a-zA-Z0-9]* and be at most 50 bytes")]
    InvalidTableName { name: String },
    #[error("timestamp {micros} is not a multiple of 1000 microseconds (millisecond granularity)")]
    TimestampGranularity { micros: i64 },
    #[error("timestamp {micros} is invalid: cell timestamps must be >= 0, or -1 for server time")]
    InvalidTimestamp { micros: i64 },
    #[error("table {table:?} not found")]
    TableNotFound { table: String },
    #[error("table {table:?} already exists")]
    TableExists { table: String },
    #[error("column family {family:?} not found in table {table:?}")]
    FamilyNotFound { table: String, family: String },
    #[error("column family type mismatch in table {table:?}: {reason}")]
    FamilyTypeMismatch {
        table: String,
        family: String,
        reason: String,
    },
    #[error("column family {family:?} already exists in table {table:?}")]
    FamilyExists { table: String, family: String },
    #[error("invalid regex {pattern:?}: {reason}")]
    InvalidRegex { pattern: String, reason: String },
    #[error("invalid filter: {reason}")]
    InvalidFilter { reason: String },
    #[error("invalid row range: {reason}")]
    InvalidRowRange { reason: String },
    #[error("cannot increment cell {family}:{qualifier}: existing value is {len} bytes, not a 64-bit big-endian integer")]
    InvalidIncrementTarget {
        family: String,
        qualifier: String,
        len: usize,
    },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("backend unavailable: {0}")]
    Unavailable(String),
    #[error("deadline exceeded: {0}")]
    DeadlineExceeded(String),
    #[error("storage error: {0}")]
    Storage(String),
    #[error("internal error: {0}")]
    Internal(String),
}

/// The kind of an error, independent of transport. The HTTP and gRPC layers
/// map errors through this one table, never with matches of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    InvalidArgument,
    NotFound,
    AlreadyExists,
    FailedPrecondition,
    Unavailable,
    DeadlineExceeded,
    Internal,
}

impl ErrorCode {
    /// HTTP status for this kind of error.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::InvalidArgument => 400,
            ErrorCode::NotFound => 404,
            ErrorCode::AlreadyExists => 409,
            ErrorCode::FailedPrecondition => 412,
            ErrorCode::Unavailable => 503,
            ErrorCode::DeadlineExceeded => 504,
            ErrorCode::Internal => 500,
        }
    }

    /// gRPC status code number (google.rpc.Code) for this kind of error.
    pub fn grpc_code(self) -> i32 {
        match self {
            ErrorCode::InvalidArgument => 3,
            ErrorCode::NotFound => 5,
            ErrorCode::AlreadyExists => 6,
            ErrorCode::FailedPrecondition => 9,
            ErrorCode::Unavailable => 14,
            ErrorCode::DeadlineExceeded => 4,
            ErrorCode::Internal => 13,
        }
    }
}

impl Error {
    /// The kind of this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::RowKeyTooLarge { .. }
            | Error::EmptyRowKey
            | Error::QualifierTooLarge { .. }
            | Error::ValueTooLarge { .. }
            | Error::TooManyMutations { .. }
            | Error::NoMutations
            | Error::InvalidFamilyName { .. }
            | Error::InvalidTableName { .. }
            | Error::TimestampGranularity { .. }
            | Error::InvalidTimestamp { .. }
            | Error::InvalidRegex { .. }
            | Error::InvalidFilter { .. }
            | Error::InvalidRowRange { .. }
            | Error::InvalidArgument(_)
            | Error::FamilyTypeMismatch { .. } => ErrorCode::InvalidArgument,
            Error::TableNotFound { .. } | Error::FamilyNotFound { .. } => ErrorCode::NotFound,
            Error::TableExists { .. } | Error::FamilyExists { .. } => ErrorCode::AlreadyExists,
            Error::InvalidIncrementTarget { .. } => ErrorCode::FailedPrecondition,
            Error::Unavailable(_) => ErrorCode::Unavailable,
            Error::DeadlineExceeded(_) => ErrorCode::DeadlineExceeded,
            Error::Storage(_) | Error::Internal(_) => ErrorCode::Internal,
        }
    }

    /// True when retrying the same request may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.code(),
            ErrorCode::Unavailable | ErrorCode::DeadlineExceeded
        )
    }
}
