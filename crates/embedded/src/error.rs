//! Mapping RocksDB errors onto the model's [`Error`].
//!
//! The crate reports every failure with the model's error type, so callers
//! see the same kinds from every backend; this is the one place RocksDB's
//! errors are translated.

use affinity_model::Error;
use rocksdb::ErrorKind;

/// Translate a RocksDB error: transient conditions become `Unavailable`
/// (retryable), everything else `Storage`.
pub(crate) fn storage(err: rocksdb::Error) -> Error {
    match err.kind() {
        ErrorKind::Busy
        | ErrorKind::TryAgain
        | ErrorKind::TimedOut
        | ErrorKind::ShutdownInProgress => {
            Error::Unavailable(format!("rocksdb: {}", err.into_string()))
        }
        _ => Error::Storage(format!("rocksdb: {}", err.into_string())),
    }
}

/// The error for a table whose column family has vanished (dropped while
/// the request ran).
pub(crate) fn table_gone(table: &str) -> Error {
    Error::TableNotFound {
        table: table.to_string(),
    }
}
