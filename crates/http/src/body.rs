//! Request bodies as Algolia's clients send them: JSON under any
//! `Content-Type` (`application/json`, `text/plain` from `sendBeacon`, or
//! none), plain or compressed with `Content-Encoding: gzip` or `deflate`
//! (the JavaScript Insights client's `compression: 'gzip'`).
//!
//! The size limit holds twice: the body as sent (a declared length over it
//! is refused before a byte is read, a streamed one as soon as it passes)
//! and the body once decompressed. Decompression streams into a buffer
//! capped at the limit, so a small compressed bomb is refused after
//! inflating at most [`MAX_BODY_BYTES`], never in full.

use std::io::Read;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::header::{CONTENT_ENCODING, CONTENT_LENGTH};
use axum::http::HeaderMap;
use flate2::read::{DeflateDecoder, MultiGzDecoder, ZlibDecoder};
use serde_json::Value;

use crate::error::{Error, Result, MAX_BODY_BYTES};
use crate::limits::Shed;
use crate::state::State;

/// How a body was compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Identity,
    Gzip,
    Deflate,
}

impl Encoding {
    /// The `Content-Encoding` of a request (absent: identity).
    fn of(headers: &HeaderMap) -> Result<Encoding> {
        let Some(value) = headers.get(CONTENT_ENCODING) else {
            return Ok(Encoding::Identity);
        };
        let text = value.to_str().unwrap_or("").trim();
        match text.to_ascii_lowercase().as_str() {
            "" | "identity" => Ok(Encoding::Identity),
            "gzip" | "x-gzip" => Ok(Encoding::Gzip),
            "deflate" => Ok(Encoding::Deflate),
            _ => Err(Error::UnsupportedEncoding {
                encoding: String::from_utf8_lossy(value.as_bytes()).into_owned(),
            }),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Encoding::Identity => "identity",
            Encoding::Gzip => "gzip",
            Encoding::Deflate => "deflate",
        }
    }
}

/// A request body of at most [`MAX_BODY_BYTES`] as sent, decoded on
/// demand (on a blocking thread: see [`Body::json`]).
pub struct Body {
    bytes: Bytes,
    encoding: Encoding,
}

impl FromRequest<Arc<State>> for Body {
    type Rejection = Error;

    /// The body, refused with 408 when not all sent within the
    /// configured `body_timeout_secs`: a client trickling its body would
    /// otherwise hold its place among the requests in flight.
    async fn from_request(req: Request, state: &Arc<State>) -> Result<Body> {
        let encoding = Encoding::of(req.headers())?;
        if let Some(len) = req
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
        {
            if len > MAX_BODY_BYTES as u64 {
                return Err(Error::TooLarge {
                    len: format!("{len} bytes"),
                });
            }
        }
        let timeout = state.limiter.server.body_timeout();
        let Ok(read) = tokio::time::timeout(timeout, Bytes::from_request(req, state)).await else {
            return Err(state.limiter.shed(
                Shed::BodyTimeout,
                format!(
                    "Request body not received within {} s",
                    timeout.as_secs_f64()
                ),
            ));
        };
        match read {
            Ok(bytes) => Ok(Body { bytes, encoding }),
            Err(rejection) if rejection.status().as_u16() == 413 => Err(Error::TooLarge {
                len: format!("over {MAX_BODY_BYTES} bytes"),
            }),
            Err(rejection) => Err(Error::InvalidJson {
                reason: rejection.body_text(),
            }),
        }
    }
}

impl Body {
    /// A body as received.
    #[cfg(feature = "fuzzing")]
    pub(crate) fn new(bytes: Bytes, encoding: Encoding) -> Body {
        Body { bytes, encoding }
    }

    /// The body's bytes as sent.
    pub fn raw(&self) -> &[u8] {
        &self.bytes
    }

    /// The body decompressed, at most [`MAX_BODY_BYTES`].
    pub fn decoded(&self) -> Result<std::borrow::Cow<'_, [u8]>> {
        let bytes: &[u8] = &self.bytes;
        match self.encoding {
            Encoding::Identity => Ok(bytes.into()),
            Encoding::Gzip => inflate(MultiGzDecoder::new(bytes), self.encoding).map(Into::into),
            // RFC 9110's deflate is zlib-wrapped, but some clients send a
            // raw stream: a zlib header tells them apart.
            Encoding::Deflate if is_zlib(bytes) => {
                inflate(ZlibDecoder::new(bytes), self.encoding).map(Into::into)
            }
            Encoding::Deflate => inflate(DeflateDecoder::new(bytes), self.encoding).map(Into::into),
        }
    }

    /// The body as JSON (decompressing it first).
    pub fn json(&self) -> Result<Value> {
        serde_json::from_slice(&self.decoded()?).map_err(|e| Error::InvalidJson {
            reason: e.to_string(),
        })
    }
}

/// A zlib stream starts with a deflate method byte whose 16-bit header is
/// a multiple of 31 (RFC 1950).
fn is_zlib(bytes: &[u8]) -> bool {
    match bytes {
        [cmf, flg, ..] => cmf & 0x0f == 8 && (u16::from(*cmf) << 8 | u16::from(*flg)) % 31 == 0,
        _ => false,
    }
}

/// Decompress into a buffer that stops one byte past the limit.
fn inflate(reader: impl Read, encoding: Encoding) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    reader
        .take(MAX_BODY_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| Error::BadEncoding {
            encoding: encoding.name(),
            reason: e.to_string(),
        })?;
    if out.len() > MAX_BODY_BYTES {
        return Err(Error::TooLarge {
            len: format!("over {MAX_BODY_BYTES} bytes once decompressed"),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use flate2::write::{DeflateEncoder, GzEncoder, ZlibEncoder};
    use flate2::Compression;

    use super::*;

    fn body(bytes: Vec<u8>, encoding: Encoding) -> Body {
        Body {
            bytes: bytes.into(),
            encoding,
        }
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn every_encoding_decodes_to_the_same_json() {
        let json = br#"{"events":[{"eventType":"view"}]}"#;
        let mut zlib = ZlibEncoder::new(Vec::new(), Compression::default());
        zlib.write_all(json).unwrap();
        let mut raw = DeflateEncoder::new(Vec::new(), Compression::default());
        raw.write_all(json).unwrap();
        let mut two_members = gzip(&json[..10]);
        two_members.extend(gzip(&json[10..]));
        for b in [
            body(json.to_vec(), Encoding::Identity),
            body(gzip(json), Encoding::Gzip),
            body(two_members, Encoding::Gzip),
            body(zlib.finish().unwrap(), Encoding::Deflate),
            body(raw.finish().unwrap(), Encoding::Deflate),
        ] {
            assert_eq!(&*b.decoded().unwrap(), &json[..]);
        }
    }

    #[test]
    fn a_bomb_stops_at_the_limit_and_garbage_is_a_bad_encoding() {
        let bomb = gzip(&vec![b' '; 64 * 1024 * 1024]);
        assert!(bomb.len() < 200 * 1024, "{}", bomb.len());
        let e = body(bomb, Encoding::Gzip).decoded().unwrap_err();
        assert_eq!(e.status().as_u16(), 413, "{e}");
        let just_under = gzip(&vec![b' '; MAX_BODY_BYTES]);
        assert_eq!(
            body(just_under, Encoding::Gzip).decoded().unwrap().len(),
            MAX_BODY_BYTES
        );
        let e = body(b"{\"events\":[]}".to_vec(), Encoding::Gzip)
            .decoded()
            .unwrap_err();
        assert_eq!(e.status().as_u16(), 400, "{e}");
        assert!(e.to_string().contains("gzip"), "{e}");
    }

    #[test]
    fn content_encoding_names_are_case_insensitive_and_others_refused() {
        let of = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(CONTENT_ENCODING, v.parse().unwrap());
            Encoding::of(&h)
        };
        assert_eq!(of("GZIP").unwrap(), Encoding::Gzip);
        assert_eq!(of("x-gzip").unwrap(), Encoding::Gzip);
        assert_eq!(of(" Deflate ").unwrap(), Encoding::Deflate);
        assert_eq!(of("identity").unwrap(), Encoding::Identity);
        assert_eq!(Encoding::of(&HeaderMap::new()).unwrap(), Encoding::Identity);
        let e = of("br").unwrap_err();
        assert_eq!(e.status().as_u16(), 415);
        assert!(e.to_string().contains("br"), "{e}");
    }
}
