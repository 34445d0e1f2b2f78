//! The crate's error type.

/// What went wrong building, parsing or planning a key. Each variant names
/// the offending value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A composite-key component is empty or contains the separator.
    #[error("invalid key component {component}: {value:?} {reason}")]
    InvalidComponent {
        component: &'static str,
        value: String,
        reason: &'static str,
    },
    /// A composite key that does not parse.
    #[error("malformed key {key:?}: {reason}")]
    MalformedKey { key: String, reason: String },
    /// A timestamp outside what the key format can hold, or unparsable.
    #[error("invalid timestamp {value}: {reason}")]
    InvalidTimestamp { value: String, reason: &'static str },
    /// A time given by a person ([`crate::time::parse_time`]) in none of
    /// the accepted forms, or out of range.
    #[error("invalid time {value:?}: {reason}")]
    InvalidTime { value: String, reason: String },
    /// A binary tuple that does not decode.
    #[error("malformed tuple at byte {offset}: {reason}")]
    MalformedTuple { offset: usize, reason: &'static str },
    /// A salt bucket count outside 1..=256.
    #[error("invalid bucket count {buckets}: must be between 1 and 256")]
    InvalidBuckets { buckets: u32 },
    /// A coordinate outside [-180, 180] x [-90, 90], or not finite.
    #[error("invalid coordinate {name} {value}: {reason}")]
    InvalidCoordinate {
        name: &'static str,
        value: f64,
        reason: &'static str,
    },
    /// A query argument that makes no sense (empty time range, zero budget).
    #[error("invalid argument {name}: {reason}")]
    InvalidArgument { name: &'static str, reason: String },
    /// An error from the table a scan or write went to.
    #[error(transparent)]
    Store(#[from] affinity_model::Error),
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
