//! The HTTP layer's error type and its one mapping to status codes.
//!
//! Every error leaves the server as `{"status":N,"message":"..."}`, the
//! shape Algolia's clients parse. Wire messages follow the API's
//! (Algolia's) wording, capitalised, naming the field at fault.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// The request body limit: 2 MB.
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;
/// The most events one `POST /1/events` may carry.
pub const MAX_BATCH_EVENTS: usize = 1000;

/// What went wrong while serving a request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Missing or wrong application id / API key.
    #[error("Invalid credentials")]
    Unauthorized,
    /// A valid key without the ACL the endpoint needs.
    #[error("Method not allowed with this API key: it needs the {acl} ACL")]
    Forbidden { acl: &'static str },
    /// A secured API key refused: signed by no key of the application,
    /// expired, unreadable, or a restriction the request breaks (the
    /// message names it).
    #[error("{message}")]
    Restricted { message: String },
    /// A body over [`MAX_BODY_BYTES`], as sent or once decompressed.
    #[error("Request body is too large: {len}, the limit is 2097152 bytes")]
    TooLarge { len: String },
    /// A `Content-Encoding` other than gzip, deflate or identity.
    #[error("Unsupported Content-Encoding {encoding:?}: use gzip, deflate or none")]
    UnsupportedEncoding { encoding: String },
    /// A compressed body that does not decompress.
    #[error("Invalid {encoding} body: {reason}")]
    BadEncoding {
        encoding: &'static str,
        reason: String,
    },
    /// A body that is not JSON.
    #[error("Invalid JSON: {reason}")]
    InvalidJson { reason: String },
    /// A request rule of the API broken (a field named in the message):
    /// 422, like Algolia's Insights.
    #[error("{message}")]
    Unprocessable {
        field: &'static str,
        message: String,
    },
    /// An unknown user, job, object or route.
    #[error("{message}")]
    NotFound { message: String },
    /// An endpoint the engine cannot serve yet.
    #[error("{message}")]
    NotImplemented { message: String },
    /// A rate limit of the application or the key reached (429, with
    /// `Retry-After`).
    #[error("{message}")]
    RateLimited { message: String, retry_after: u64 },
    /// A cap on requests in flight reached (503, with `Retry-After`).
    #[error("{message}")]
    Overloaded { message: String, retry_after: u64 },
    /// A body not sent in time (408).
    #[error("{message}")]
    Timeout { message: String },
    /// A configuration file or flag that cannot be used.
    #[error("invalid configuration: {reason}")]
    Config { reason: String },
    /// A blocking task that died.
    #[error("internal error: {0}")]
    Internal(String),
    /// Whatever the engine reported.
    #[error(transparent)]
    Engine(#[from] affinity_engine::Error),
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn not_found(message: impl Into<String>) -> Error {
        Error::NotFound {
            message: message.into(),
        }
    }

    pub fn unprocessable(field: &'static str, message: impl Into<String>) -> Error {
        Error::Unprocessable {
            field,
            message: message.into(),
        }
    }

    /// The one mapping from error kind to HTTP status.
    pub fn status(&self) -> StatusCode {
        use affinity_engine::Error as E;
        match self {
            Error::Unauthorized => StatusCode::UNAUTHORIZED,
            Error::Forbidden { .. } | Error::Restricted { .. } => StatusCode::FORBIDDEN,
            Error::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Error::UnsupportedEncoding { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Error::InvalidJson { .. } | Error::BadEncoding { .. } | Error::Config { .. } => {
                StatusCode::BAD_REQUEST
            }
            Error::Unprocessable { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Error::NotFound { .. } => StatusCode::NOT_FOUND,
            Error::NotImplemented { .. } => StatusCode::NOT_IMPLEMENTED,
            Error::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Error::Overloaded { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Error::Timeout { .. } => StatusCode::REQUEST_TIMEOUT,
            Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Error::Engine(e) => match e {
                E::InvalidEvent { .. } | E::AtLine { .. } => StatusCode::UNPROCESSABLE_ENTITY,
                E::InvalidStrategy { .. }
                | E::InvalidObject { .. }
                | E::Json { .. }
                | E::InvalidApp { .. }
                | E::InvalidArgument { .. } => StatusCode::BAD_REQUEST,
                E::SchemaChange { .. } | E::LayoutChange { .. } => StatusCode::CONFLICT,
                E::UnknownApp { .. } => StatusCode::NOT_FOUND,
                E::Store(store) => StatusCode::from_u16(store.code().http_status())
                    .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            },
        }
    }

    /// A short, stable name of what went wrong: the field at fault for
    /// validation errors, else the kind (`invalid_json`, `too_large`, ...).
    pub fn code(&self) -> &'static str {
        if let Some(field) = self.field() {
            return field;
        }
        match self {
            Error::Unauthorized => "unauthorized",
            Error::Forbidden { .. } | Error::Restricted { .. } => "forbidden",
            Error::TooLarge { .. } => "too_large",
            Error::UnsupportedEncoding { .. } => "unsupported_encoding",
            Error::BadEncoding { .. } => "bad_encoding",
            Error::InvalidJson { .. } | Error::Engine(affinity_engine::Error::Json { .. }) => {
                "invalid_json"
            }
            Error::NotFound { .. } => "not_found",
            Error::RateLimited { .. } => "rate_limited",
            Error::Overloaded { .. } => "overloaded",
            Error::Timeout { .. } => "timeout",
            e if e.status().is_server_error() => "server_error",
            _ => "invalid_request",
        }
    }

    /// The field at fault, for validation errors.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            Error::Unprocessable { field, .. } => Some(field),
            Error::Engine(e) => e.field(),
            _ => None,
        }
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = self.status();
        // Shed requests are counted in /metrics; logging each would add
        // work exactly when the server has none to spare.
        if status.is_server_error() && !matches!(self, Error::Overloaded { .. }) {
            tracing::error!(error = %self, "request failed");
        }
        let body = serde_json::json!({"status": status.as_u16(), "message": self.to_string()});
        let mut response = (status, Json(body)).into_response();
        if let Error::RateLimited { retry_after, .. } | Error::Overloaded { retry_after, .. } = self
        {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, retry_after.into());
        }
        response
    }
}

/// Run blocking engine work off the async threads.
pub async fn blocking<T, F>(work: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::Internal(format!("worker task failed: {e}")))?
}
