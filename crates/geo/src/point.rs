//! A located point and the encoding of its value.
//!
//! # Value encoding (version 1)
//!
//! One cell per point, family `p`, qualifier `v`, cell timestamp = the
//! point's time in microseconds. All integers and floats are big-endian.
//!
//! | bytes | content |
//! |---|---|
//! | 1 | format version, `1` |
//! | 8 | longitude, f64 |
//! | 8 | latitude, f64 |
//! | 8 | time, i64 milliseconds since the epoch |
//! | 2 | number of fields, u16 |
//! | per field | name length (u8), name (UTF-8), tag, payload |
//!
//! Tag `n`: a number, payload an f64 (8 bytes). Tag `s`: text, payload a
//! u32 length and the UTF-8 bytes. Numbers cost 8 bytes whatever their
//! text; a missing value (an empty CSV cell) is simply absent. The id is
//! not repeated: it is the end of the row key.

use crate::error::{Error, Result};

/// Format version written in the first byte of a value.
pub const VALUE_VERSION: u8 = 1;
/// Most fields a point can carry.
pub const MAX_FIELDS: usize = u16::MAX as usize;
/// Longest field name, in bytes.
pub const MAX_NAME_BYTES: usize = u8::MAX as usize;

/// A measurement: a number, or text for columns that are not numeric.
#[derive(Debug, Clone, PartialEq)]
pub enum Field {
    Number(f64),
    Text(String),
}

/// A point: an id at a place and time, with named measurements.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub id: String,
    pub time_millis: i64,
    /// Longitude in [-180, 180].
    pub lng: f64,
    /// Latitude in [-90, 90].
    pub lat: f64,
    pub fields: Vec<(String, Field)>,
}

impl Point {
    /// The value of a measurement by name.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, f)| f)
    }

    /// Encode the value (everything but the id).
    pub fn encode_value(&self) -> Result<Vec<u8>> {
        if self.fields.len() > MAX_FIELDS {
            return Err(Error::InvalidArgument {
                name: "fields",
                reason: format!("{} fields, at most {MAX_FIELDS}", self.fields.len()),
            });
        }
        let mut out = Vec::with_capacity(27 + self.fields.len() * 16);
        out.push(VALUE_VERSION);
        out.extend_from_slice(&self.lng.to_be_bytes());
        out.extend_from_slice(&self.lat.to_be_bytes());
        out.extend_from_slice(&self.time_millis.to_be_bytes());
        out.extend_from_slice(&(self.fields.len() as u16).to_be_bytes());
        for (name, field) in &self.fields {
            let name_len = u8::try_from(name.len()).map_err(|_| Error::InvalidArgument {
                name: "field name",
                reason: format!("{name:?} is longer than {MAX_NAME_BYTES} bytes"),
            })?;
            out.push(name_len);
            out.extend_from_slice(name.as_bytes());
            match field {
                Field::Number(v) => {
                    out.push(b'n');
                    out.extend_from_slice(&v.to_be_bytes());
                }
                Field::Text(t) => {
                    let len = u32::try_from(t.len()).map_err(|_| Error::InvalidArgument {
                        name: "field value",
                        reason: format!("{name:?} is longer than 4 GiB"),
                    })?;
                    out.push(b's');
                    out.extend_from_slice(&len.to_be_bytes());
                    out.extend_from_slice(t.as_bytes());
                }
            }
        }
        Ok(out)
    }

    /// Decode a value written by [`Point::encode_value`]; `id` comes from
    /// the key, `key` only names the row in errors.
    pub fn decode_value(id: String, value: &[u8], key: &[u8]) -> Result<Point> {
        let corrupt = |reason: &str| Error::Corrupt {
            what: "point value",
            key: format!("{key:02x?}"),
            reason: reason.to_string(),
        };
        let mut r = Reader { buf: value, pos: 0 };
        let version = r.take(1).ok_or_else(|| corrupt("is empty"))?[0];
        if version != VALUE_VERSION {
            return Err(corrupt(&format!("has unknown format version {version}")));
        }
        let truncated = || corrupt("is truncated");
        let lng = f64::from_be_bytes(r.array().ok_or_else(truncated)?);
        let lat = f64::from_be_bytes(r.array().ok_or_else(truncated)?);
        let time_millis = i64::from_be_bytes(r.array().ok_or_else(truncated)?);
        let count = u16::from_be_bytes(r.array().ok_or_else(truncated)?);
        let mut fields = Vec::with_capacity(usize::from(count));
        for _ in 0..count {
            let len = usize::from(r.take(1).ok_or_else(truncated)?[0]);
            let name = std::str::from_utf8(r.take(len).ok_or_else(truncated)?)
                .map_err(|_| corrupt("has a field name that is not UTF-8"))?
                .to_string();
            let field = match r.take(1).ok_or_else(truncated)?[0] {
                b'n' => Field::Number(f64::from_be_bytes(r.array().ok_or_else(truncated)?)),
                b's' => {
                    let len = u32::from_be_bytes(r.array().ok_or_else(truncated)?) as usize;
                    let text = std::str::from_utf8(r.take(len).ok_or_else(truncated)?)
                        .map_err(|_| corrupt("has a text field that is not UTF-8"))?;
                    Field::Text(text.to_string())
                }
                tag => return Err(corrupt(&format!("has unknown field tag {tag:#04x}"))),
            };
            fields.push((name, field));
        }
        if r.pos != value.len() {
            return Err(corrupt("has trailing bytes"));
        }
        Ok(Point {
            id,
            time_millis,
            lng,
            lat,
            fields,
        })
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_round_trips() {
        let p = Point {
            id: "ship 7".into(),
            time_millis: 1_593_475_200_123,
            lng: -74.07157,
            lat: 40.64409,
            fields: vec![
                ("SOG".into(), Field::Number(0.5)),
                ("VesselName".into(), Field::Text("SAMUEL I NEWHOUSE".into())),
            ],
        };
        let v = p.encode_value().unwrap();
        assert_eq!(
            v.len(),
            1 + 24 + 2 + (1 + 3 + 1 + 8) + (1 + 10 + 1 + 4 + 17)
        );
        assert_eq!(Point::decode_value("ship 7".into(), &v, b"k").unwrap(), p);
        assert!(Point::decode_value("x".into(), &v[..v.len() - 1], b"k").is_err());
    }
}
