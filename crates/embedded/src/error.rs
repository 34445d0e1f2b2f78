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
        // RocksDB stops writing and polls the free space, resuming by
        // itself once there is enough (its SstFileManager): retryable.
        _ if is_no_space(&err) => Error::Unavailable(format!(
            "the store's disk is full; writes resume by themselves once space is freed \
             (rocksdb: {})",
            err.into_string()
        )),
        // A flush or compaction met a row that does not decode; RocksDB
        // stops writing and says only "Merge operator failed".
        ErrorKind::Corruption if err.as_ref().contains("Merge operator failed") => {
            match crate::merge::last_failed_merge() {
                Some((cf, key)) => Error::Storage(format!(
                    "table {:?}: the store stopped writing after a flush or compaction met \
                     the corrupt stored row {:?} (its value or a merge operand does not \
                     decode); reads of other rows go on, and writes resume after a restart \
                     until a compaction meets that row again (rocksdb: {})",
                    table_of_cf(&cf),
                    String::from_utf8_lossy(&key),
                    err.into_string()
                )),
                None => Error::Storage(format!("rocksdb: {}", err.into_string())),
            }
        }
        _ => Error::Storage(format!("rocksdb: {}", err.into_string())),
    }
}

/// The table a column family holds (`t/<table>/<number>`), or the family's
/// name if it is not a table's.
fn table_of_cf(cf: &str) -> &str {
    cf.strip_prefix(crate::store::TABLE_CF_PREFIX)
        .and_then(|rest| rest.rsplit_once('/'))
        .map_or(cf, |(table, _)| table)
}

/// An out-of-space error (ENOSPC), as RocksDB words it.
fn is_no_space(err: &rocksdb::Error) -> bool {
    let text = err.as_ref();
    text.contains("No space left on device") || text.contains("NoSpace")
}

/// Translate a RocksDB error met while reading rows: a merge that failed
/// (a stored value or operand that does not decode) names the row, the
/// one read (`key`) or, for an iterator, the one whose merge failed.
pub(crate) fn read_error(err: rocksdb::Error, key: Option<&[u8]>) -> Error {
    let failed = crate::merge::take_failed_merge();
    match key.map(<[u8]>::to_vec).or(failed) {
        Some(key) if err.kind() == ErrorKind::Corruption => Error::Storage(format!(
            "corrupt stored row {:?}: its value or a merge operand does not decode (rocksdb: {})",
            String::from_utf8_lossy(&key),
            err.into_string()
        )),
        _ => storage(err),
    }
}

/// A storage error of table `table`, named in its message.
pub(crate) fn in_table(table: &str, err: Error) -> Error {
    match err {
        Error::Storage(message) => Error::Storage(format!("table {table:?}: {message}")),
        other => other,
    }
}

/// The error for a table whose column family has vanished (dropped while
/// the request ran).
pub(crate) fn table_gone(table: &str) -> Error {
    Error::TableNotFound {
        table: table.to_string(),
    }
}
