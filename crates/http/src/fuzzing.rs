//! Request body decoding reached without a server, for the fuzz targets
//! in `fuzz/` (feature `fuzzing`; not part of the crate's API): the bytes
//! as a client sent them, decompressed under the body size limit, parsed
//! as JSON and, for `POST /1/events`, validated event by event, exactly as
//! the handlers do.

use affinity_engine::{Event, Limits};
use axum::body::Bytes;

pub use crate::body::Encoding;

use crate::body::Body;
use crate::error::{Result, MAX_BODY_BYTES};

/// The encodings a body may name, by number (`choice` modulo 3):
/// identity, gzip, deflate.
pub fn encoding(choice: u8) -> Encoding {
    match choice % 3 {
        0 => Encoding::Identity,
        1 => Encoding::Gzip,
        _ => Encoding::Deflate,
    }
}

/// A body as sent, decompressed: at most [`MAX_BODY_BYTES`] whatever the
/// bytes claim (a bomb is refused once past the limit, not expanded).
pub fn decode_body(bytes: &[u8], encoding: Encoding) -> Result<Vec<u8>> {
    let body = Body::new(Bytes::copy_from_slice(bytes), encoding);
    let decoded = body.decoded()?.into_owned();
    assert!(
        decoded.len() <= MAX_BODY_BYTES,
        "a body decoded past the limit"
    );
    Ok(decoded)
}

/// A `POST /1/events` body, decoded and validated as the handler does
/// before storing: the events, or the error and the index of the event
/// at fault.
pub fn events(
    bytes: &[u8],
    encoding: Encoding,
    limits: &Limits,
) -> std::result::Result<Vec<Event>, (crate::Error, Option<usize>)> {
    let body = Body::new(Bytes::copy_from_slice(bytes), encoding);
    let json = body.json().map_err(|e| (e, None))?;
    let list = crate::insights::event_list(&json).map_err(|e| (e, None))?;
    list.iter()
        .enumerate()
        .map(|(i, v)| Event::from_json(v, limits).map_err(|e| (e.into(), Some(i))))
        .collect()
}

/// A re-ranking body read as the handler reads it: `None` when it is not
/// UTF-8, else whether its scanner and serde_json agree on what the
/// scanner takes (they must).
pub fn rerank_body(bytes: &[u8]) -> Option<bool> {
    let text = std::str::from_utf8(bytes).ok()?;
    Some(crate::members::scan_agrees(text))
}
