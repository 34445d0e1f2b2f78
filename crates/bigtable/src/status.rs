//! The one mapping from gRPC status codes onto the model's [`Error`].
//!
//! The server's message is kept wherever the variant has room for it; where
//! the variant names a table instead (not found, already exists), the table
//! the call was about is named.

use affinity_model::Error;
use tonic::Code;

/// Codes worth retrying: the request may succeed as it is.
pub(crate) fn is_retryable_code(code: Code) -> bool {
    matches!(
        code,
        Code::Unavailable | Code::DeadlineExceeded | Code::Aborted
    )
}

/// A failed call worth retrying: a retryable code, or a connection that
/// broke under the call (tonic reports a connection lost in the middle of a
/// response as `Unknown`, "h2 protocol error").
pub(crate) fn is_retryable(status: &tonic::Status) -> bool {
    is_retryable_code(status.code()) || is_connection_failure(status)
}

/// True when the status comes from the transport failing (I/O error, GOAWAY,
/// connection closed), not from the server answering.
fn is_connection_failure(status: &tonic::Status) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(err) = source {
        if let Some(h2) = err.downcast_ref::<h2::Error>() {
            if h2.is_io() || h2.is_go_away() || h2.reason() == Some(h2::Reason::REFUSED_STREAM) {
                return true;
            }
        }
        if let Some(hyper) = err.downcast_ref::<hyper::Error>() {
            if hyper.is_closed() || hyper.is_incomplete_message() || hyper.is_canceled() {
                return true;
            }
        }
        if err.downcast_ref::<std::io::Error>().is_some() {
            return true;
        }
        source = err.source();
    }
    false
}

/// Map a failed call's status. `table` is the table the call was about,
/// when there is one, to name in not-found and already-exists errors.
pub(crate) fn from_status(status: &tonic::Status, table: Option<&str>) -> Error {
    if !is_retryable_code(status.code()) && is_connection_failure(status) {
        return Error::Unavailable(format!("connection lost: {}", status.message()));
    }
    from_code(status.code(), status.message(), table)
}

/// Map a `google.rpc.Status` (the per-entry status of `MutateRows`).
pub(crate) fn from_rpc_status(code: i32, message: &str, table: Option<&str>) -> Error {
    from_code(Code::from_i32(code), message, table)
}

fn from_code(code: Code, message: &str, table: Option<&str>) -> Error {
    let message = message.to_string();
    match code {
        Code::Ok => Error::Internal(format!("call failed with status ok: {message}")),
        Code::InvalidArgument | Code::OutOfRange => Error::InvalidArgument(message),
        Code::NotFound => match table {
            Some(table) if !message.to_ascii_lowercase().contains("family") => {
                Error::TableNotFound {
                    table: table.to_string(),
                }
            }
            _ => Error::InvalidArgument(format!("not found: {message}")),
        },
        Code::AlreadyExists => match table {
            Some(table) => Error::TableExists {
                table: table.to_string(),
            },
            None => Error::InvalidArgument(format!("already exists: {message}")),
        },
        Code::Unavailable | Code::Aborted | Code::ResourceExhausted => {
            Error::Unavailable(format!("{}: {message}", code_name(code)))
        }
        Code::DeadlineExceeded => Error::DeadlineExceeded(message),
        Code::FailedPrecondition => {
            Error::InvalidArgument(format!("failed precondition: {message}"))
        }
        Code::PermissionDenied | Code::Unauthenticated => {
            Error::Internal(format!("{}: {message}", code_name(code)))
        }
        Code::Cancelled | Code::Unknown | Code::Unimplemented | Code::Internal | Code::DataLoss => {
            Error::Internal(format!("{}: {message}", code_name(code)))
        }
    }
}

fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "ok",
        Code::Cancelled => "cancelled",
        Code::Unknown => "unknown",
        Code::InvalidArgument => "invalid argument",
        Code::DeadlineExceeded => "deadline exceeded",
        Code::NotFound => "not found",
        Code::AlreadyExists => "already exists",
        Code::PermissionDenied => "permission denied",
        Code::ResourceExhausted => "resource exhausted",
        Code::FailedPrecondition => "failed precondition",
        Code::Aborted => "aborted",
        Code::OutOfRange => "out of range",
        Code::Unimplemented => "unimplemented",
        Code::Internal => "internal",
        Code::Unavailable => "unavailable",
        Code::DataLoss => "data loss",
        Code::Unauthenticated => "unauthenticated",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_errors_name_the_table() {
        let status =
            tonic::Status::not_found("table \"projects/p/instances/i/tables/t\" not found");
        assert_eq!(
            from_status(&status, Some("t")),
            Error::TableNotFound { table: "t".into() }
        );
        let status = tonic::Status::already_exists("table exists");
        assert_eq!(
            from_status(&status, Some("t")),
            Error::TableExists { table: "t".into() }
        );
    }

    #[test]
    fn transient_codes_are_retryable_and_keep_the_message() {
        for code in [Code::Unavailable, Code::DeadlineExceeded, Code::Aborted] {
            assert!(is_retryable_code(code));
            let err = from_code(code, "try again", None);
            assert!(err.is_retryable(), "{err:?}");
            assert!(err.to_string().contains("try again"), "{err}");
        }
        assert!(!is_retryable_code(Code::InvalidArgument));
        assert!(!is_retryable(&tonic::Status::unknown("no source")));
    }

    #[test]
    fn invalid_argument_keeps_the_server_message() {
        let err = from_rpc_status(3, "bad regex", Some("t"));
        assert_eq!(err, Error::InvalidArgument("bad regex".into()));
    }
}
