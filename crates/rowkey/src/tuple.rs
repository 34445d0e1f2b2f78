//! A binary, order-preserving tuple codec for Affinity's internal tables,
//! where readability in `cbt` is not needed.
//!
//! Each element is a type tag followed by its value:
//!
//! | element | tag | value |
//! |---|---|---|
//! | byte string | `0x01` | bytes with `0x00` escaped as `0x00 0xFF`, then `0x00` |
//! | UTF-8 string | `0x02` | as a byte string |
//! | `u64` | `0x03` | 8 bytes big-endian |
//! | `i64` | `0x04` | 8 bytes big-endian of the value with its sign bit flipped |
//!
//! Encoded tuples compare (as bytes) exactly like the tuples compare
//! (element by element, a proper prefix first; elements of different types
//! by tag), `decode(encode(t)) == t`, and the encoding of a tuple's prefix is
//! a prefix of the tuple's encoding; [`prefix_range`] scans exactly the
//! tuples that extend a prefix. Tags stay below `0xFF`, which is what makes an
//! escaped `0x00 0xFF` sort after any terminator-plus-next-element.

use affinity_model::RowRange;

use crate::error::{Error, Result};

const TAG_BYTES: u8 = 0x01;
const TAG_STR: u8 = 0x02;
const TAG_U64: u8 = 0x03;
const TAG_I64: u8 = 0x04;

/// One element of a tuple. The derived order (variant, then value) is the
/// order of the encoding.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Element {
    Bytes(Vec<u8>),
    Str(String),
    U64(u64),
    I64(i64),
}

impl From<&str> for Element {
    fn from(s: &str) -> Element {
        Element::Str(s.to_string())
    }
}

impl From<String> for Element {
    fn from(s: String) -> Element {
        Element::Str(s)
    }
}

impl From<&[u8]> for Element {
    fn from(b: &[u8]) -> Element {
        Element::Bytes(b.to_vec())
    }
}

impl From<u64> for Element {
    fn from(v: u64) -> Element {
        Element::U64(v)
    }
}

impl From<i64> for Element {
    fn from(v: i64) -> Element {
        Element::I64(v)
    }
}

fn push_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.push(0);
}

/// Append one element's encoding to `out`.
pub fn encode_element(out: &mut Vec<u8>, element: &Element) {
    match element {
        Element::Bytes(b) => {
            out.push(TAG_BYTES);
            push_escaped(out, b);
        }
        Element::Str(s) => {
            out.push(TAG_STR);
            push_escaped(out, s.as_bytes());
        }
        Element::U64(v) => {
            out.push(TAG_U64);
            out.extend_from_slice(&v.to_be_bytes());
        }
        Element::I64(v) => {
            out.push(TAG_I64);
            out.extend_from_slice(&((*v as u64) ^ (1 << 63)).to_be_bytes());
        }
    }
}

/// Encode a tuple.
pub fn encode(elements: &[Element]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in elements {
        encode_element(&mut out, e);
    }
    out
}

fn unescape(bytes: &[u8], start: usize) -> Result<(Vec<u8>, usize)> {
    let mut out = Vec::new();
    let mut i = start;
    loop {
        match bytes.get(i) {
            None => {
                return Err(Error::MalformedTuple {
                    offset: i,
                    reason: "unterminated byte string",
                })
            }
            Some(0) if bytes.get(i + 1) == Some(&0xFF) => {
                out.push(0);
                i += 2;
            }
            Some(0) => return Ok((out, i + 1)),
            Some(&b) => {
                out.push(b);
                i += 1;
            }
        }
    }
}

fn fixed8(bytes: &[u8], start: usize) -> Result<u64> {
    let slice = bytes.get(start..start + 8).ok_or(Error::MalformedTuple {
        offset: start,
        reason: "truncated integer",
    })?;
    let mut word = [0u8; 8];
    word.copy_from_slice(slice);
    Ok(u64::from_be_bytes(word))
}

/// Decode a tuple written by [`encode`].
pub fn decode(bytes: &[u8]) -> Result<Vec<Element>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let tag = bytes[i];
        i += 1;
        match tag {
            TAG_BYTES => {
                let (b, next) = unescape(bytes, i)?;
                out.push(Element::Bytes(b));
                i = next;
            }
            TAG_STR => {
                let (b, next) = unescape(bytes, i)?;
                let s = String::from_utf8(b).map_err(|_| Error::MalformedTuple {
                    offset: i,
                    reason: "string is not UTF-8",
                })?;
                out.push(Element::Str(s));
                i = next;
            }
            TAG_U64 => {
                out.push(Element::U64(fixed8(bytes, i)?));
                i += 8;
            }
            TAG_I64 => {
                out.push(Element::I64((fixed8(bytes, i)? ^ (1 << 63)) as i64));
                i += 8;
            }
            _ => {
                return Err(Error::MalformedTuple {
                    offset: i - 1,
                    reason: "unknown type tag",
                })
            }
        }
    }
    Ok(out)
}

/// Every key whose tuple starts with `prefix` (all keys for an empty prefix).
///
/// Not simply the keys starting with the prefix's bytes: `("",)` encodes to
/// `02 00`, a byte prefix of `("\0",)` = `02 00 FF 00`. After a complete
/// tuple the next byte is a tag (below `0xFF`) or nothing, so the range
/// stops at `encoding || 0xFF`.
pub fn prefix_range(prefix: &[Element]) -> RowRange {
    let encoded = encode(prefix);
    if encoded.is_empty() {
        return RowRange::all();
    }
    let mut end = encoded.clone();
    end.push(0xFF);
    RowRange::closed_open(encoded, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_encodings() {
        assert_eq!(
            encode(&[Element::from("a\0b"), Element::U64(1), Element::I64(-1)]),
            [
                &[0x02, b'a', 0, 0xFF, b'b', 0][..],
                &[0x03, 0, 0, 0, 0, 0, 0, 0, 1],
                &[0x04, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF],
            ]
            .concat()
        );
    }

    #[test]
    fn rejects_garbage() {
        assert!(decode(&[0x09]).is_err());
        assert!(decode(&[0x01, b'a']).is_err());
        assert!(decode(&[0x03, 0, 0]).is_err());
        assert!(decode(&[0x02, 0xFF, 0x00]).is_err());
    }
}
