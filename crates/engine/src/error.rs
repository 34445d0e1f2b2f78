//! The engine's error type.

/// What went wrong in the engine. Validation variants carry the field at
/// fault; their message is the API's (Algolia-style) message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An Insights event that breaks a field rule of the API.
    #[error("{message}")]
    InvalidEvent {
        field: &'static str,
        message: String,
    },
    /// A strategy that breaks a field rule of the API.
    #[error("{message}")]
    InvalidStrategy {
        field: &'static str,
        message: String,
    },
    /// A catalog object that cannot be loaded.
    #[error("invalid catalog object: {reason}")]
    InvalidObject { reason: String },
    /// A line of a JSON-lines input that is not valid. The message
    /// includes the inner error's, so it is not also a `source` (which
    /// would print it twice in an error chain).
    #[error("line {line}: {error}")]
    AtLine { line: usize, error: Box<Error> },
    /// Text that is not JSON (or not the expected shape).
    #[error("invalid json: {reason}")]
    Json { reason: String },
    /// An application id that cannot name tables.
    #[error("invalid application id {app:?}: must match [A-Za-z0-9_-]{{1,32}}")]
    InvalidApp { app: String },
    /// An argument outside what the engine accepts.
    #[error("invalid {name}: {reason}")]
    InvalidArgument { name: &'static str, reason: String },
    /// A new schema for an application that holds events, which stay in
    /// the layout they were written in: a migration moves them.
    #[error(
        "application {app:?} already holds {} events; moving it to {} is a migration \
         (`affinity migrate`)",
        .stored.as_str(),
        .requested.as_str()
    )]
    SchemaChange {
        app: String,
        stored: crate::schema::Schema,
        requested: crate::schema::Schema,
    },
    /// Tables of its own for an application whose events are in the
    /// shared tables: moving them is not built.
    #[error(
        "application {app:?} holds events in the shared tables (retention {shared_days} days); \
         {reason} needs tables of its own, which only an application without events can move to \
         (create it with dedicated tables, or delete it first)"
    )]
    LayoutChange {
        app: String,
        reason: String,
        shared_days: u32,
    },
    /// An application that was never created (or was deleted).
    #[error("application {app:?} does not exist")]
    UnknownApp { app: String },
    /// Stored data the engine did not write in this shape.
    #[error("corrupt {what}: {reason}")]
    Corrupt { what: &'static str, reason: String },
    /// The output an export hands its profiles to failed.
    #[error("export output: {reason}")]
    ExportOutput { reason: String },
    /// A batch job stopped before its end because it was asked to
    /// ([`crate::Progress::stop`]): what it finished is kept.
    #[error("the job was stopped before its end")]
    Stopped,
    /// A thread of a parallel job died.
    #[error("worker failed: {0}")]
    Worker(String),
    #[error(transparent)]
    Store(#[from] affinity_model::Error),
    #[error(transparent)]
    Key(#[from] affinity_rowkey::Error),
}

/// The JSON values of a JSON-lines input with their 1-based line numbers,
/// blank lines skipped; an unreadable or unparsable line is an error naming
/// it.
pub(crate) fn json_lines(
    input: impl std::io::BufRead,
) -> impl Iterator<Item = Result<(usize, serde_json::Value)>> {
    input.lines().enumerate().filter_map(|(i, line)| {
        let n = i + 1;
        match line {
            Err(e) => Some(Err(Error::at_line(
                n,
                Error::Json {
                    reason: e.to_string(),
                },
            ))),
            Ok(text) if text.trim().is_empty() => None,
            Ok(text) => Some(
                serde_json::from_str(&text)
                    .map(|value| (n, value))
                    .map_err(|e| Error::at_line(n, e.into())),
            ),
        }
    })
}

impl Error {
    /// `error`, found on line `line` of an input.
    pub(crate) fn at_line(line: usize, error: Error) -> Error {
        Error::AtLine {
            line,
            error: Box::new(error),
        }
    }

    pub(crate) fn event(field: &'static str, message: impl Into<String>) -> Error {
        Error::InvalidEvent {
            field,
            message: message.into(),
        }
    }

    pub(crate) fn strategy(field: &'static str, message: impl Into<String>) -> Error {
        Error::InvalidStrategy {
            field,
            message: message.into(),
        }
    }

    pub(crate) fn corrupt(what: &'static str, reason: impl Into<String>) -> Error {
        Error::Corrupt {
            what,
            reason: reason.into(),
        }
    }

    /// The field at fault, for validation errors.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            Error::InvalidEvent { field, .. } | Error::InvalidStrategy { field, .. } => Some(field),
            Error::AtLine { error, .. } => error.field(),
            _ => None,
        }
    }
}

impl From<serde_json::Error> for Error {
    fn from(err: serde_json::Error) -> Error {
        Error::Json {
            reason: err.to_string(),
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
