//! The HTTP API (in progress).
