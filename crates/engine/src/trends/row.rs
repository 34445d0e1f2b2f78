//! One row of the trends table: its key and its value.
//!
//! # Key
//!
//! The row-key crate's location + time key ([`affinity_rowkey::geo`]):
//! `[salt][day][Hilbert index of the object's _geoloc][ms within the day][id]`
//! with [`layout`] (Hilbert curve, one-day bins, [`SALTS`] salts). The id is
//! [`row_id`]: the event's 16 hex digit content hash (the suffix of its row
//! key in `events.<app>`, see [`affinity_rowkey::composite::event_suffix`])
//! followed by the object's position in the event's `objectIDs` as 2 hex
//! digits. A retried batch therefore rewrites the same rows, and the first
//! 16 bytes of the id name the event (for `eventsCounted`).
//!
//! # Value (version 1; family `t`, qualifier `v`, cell timestamp = the
//! event's time in microseconds)
//!
//! Integers and floats big-endian, strings as a u32 length then UTF-8:
//!
//! | bytes | content |
//! |---|---|
//! | 1 | format version, `1` |
//! | 1 | event type: 0 view, 1 click, 2 conversion |
//! | 8 + 8 | the object's latitude and longitude, f64 (the key's curve cell is
//! |       | rounded; the exact place makes the circle test exact) |
//! | string | event name |
//! | 4 | number of facet values, u32 |
//! | per value | facet name string, value string |
//!
//! No user token: see the module docs of [`crate::trends`].

use affinity_model::{Bytes, Mutation, RowMutations};
use affinity_rowkey::curve::Curve;
use affinity_rowkey::geo::{GeoLayout, TimeBin};

use crate::error::{Error, Result};
use crate::event::EventType;

/// Salt values of the trends key: writes of one day spread over this many
/// tablets; a query reads this many times its ranges.
pub const SALTS: u32 = 4;
/// The one family of the trends table.
pub const FAMILY: &str = "t";
/// The qualifier of a row's value.
pub const QUALIFIER: &str = "v";
/// Format version written in the first byte of a value.
pub const VALUE_VERSION: u8 = 1;
/// Bytes of the event part of an id.
pub const EVENT_ID_LEN: usize = 16;

/// The key layout of the trends table.
pub fn layout() -> Result<GeoLayout> {
    Ok(GeoLayout::new(Curve::Hilbert, TimeBin::Day, SALTS)?)
}

/// The id of the row of object number `index` of an event whose content
/// hash (row-key suffix) is `event_suffix`.
pub fn row_id(event_suffix: &str, index: usize) -> String {
    format!("{event_suffix}{:02x}", index & 0xff)
}

/// What one row says: an event of some type and name on an object at a
/// place and time, with the object's facet values.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendRow {
    pub id: String,
    pub time_millis: i64,
    pub lat: f64,
    pub lng: f64,
    pub event_type: EventType,
    pub event_name: String,
    /// `(facet, value)` pairs, duplicates kept (each counts).
    pub facets: Vec<(String, String)>,
}

fn type_code(ty: EventType) -> u8 {
    match ty {
        EventType::View => 0,
        EventType::Click => 1,
        EventType::Conversion => 2,
    }
}

fn push_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

impl TrendRow {
    /// The row's key and its one cell.
    pub fn mutations(&self, layout: &GeoLayout) -> Result<RowMutations> {
        let key = layout.encode(self.lng, self.lat, self.time_millis, self.id.as_bytes())?;
        let mut value = Vec::with_capacity(64 + self.facets.len() * 24);
        value.push(VALUE_VERSION);
        value.push(type_code(self.event_type));
        value.extend_from_slice(&self.lat.to_be_bytes());
        value.extend_from_slice(&self.lng.to_be_bytes());
        push_str(&mut value, &self.event_name);
        value.extend_from_slice(&(self.facets.len() as u32).to_be_bytes());
        for (f, v) in &self.facets {
            push_str(&mut value, f);
            push_str(&mut value, v);
        }
        Ok(RowMutations::new(
            key,
            vec![Mutation::set_cell(
                FAMILY,
                QUALIFIER,
                self.time_millis.saturating_mul(1000),
                value,
            )],
        ))
    }

    /// Decode a row from its key and value.
    pub fn decode(layout: &GeoLayout, key: &Bytes, value: &[u8]) -> Result<TrendRow> {
        let corrupt = |reason: &str| {
            Error::corrupt("trends row", format!("key {:02x?}: {reason}", key.as_ref()))
        };
        let k = layout.decode(key).map_err(|e| corrupt(&e.to_string()))?;
        let id = String::from_utf8(k.id.clone()).map_err(|_| corrupt("id is not UTF-8"))?;
        let mut r = Reader { rest: value };
        let version = r.take(1).ok_or_else(|| corrupt("empty value"))?[0];
        if version != VALUE_VERSION {
            return Err(corrupt(&format!("unknown value version {version}")));
        }
        let event_type = match r.take(1).map(|b| b[0]) {
            Some(0) => EventType::View,
            Some(1) => EventType::Click,
            Some(2) => EventType::Conversion,
            other => return Err(corrupt(&format!("unknown event type {other:?}"))),
        };
        let short = || corrupt("value is truncated");
        let lat = r.f64().ok_or_else(short)?;
        let lng = r.f64().ok_or_else(short)?;
        let event_name = r.string().ok_or_else(short)?;
        let n = r.u32().ok_or_else(short)? as usize;
        let mut facets = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            let f = r.string().ok_or_else(short)?;
            let v = r.string().ok_or_else(short)?;
            facets.push((f, v));
        }
        if !r.rest.is_empty() {
            return Err(corrupt("value has trailing bytes"));
        }
        Ok(TrendRow {
            id,
            time_millis: layout.time_of(&k),
            lat,
            lng,
            event_type,
            event_name,
            facets,
        })
    }

    /// The event part of the id.
    pub fn event_id(&self) -> &str {
        self.id.get(..EVENT_ID_LEN).unwrap_or(&self.id)
    }
}

struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.rest.len() < n {
            return None;
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Some(head)
    }

    fn u32(&mut self) -> Option<u32> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        Some(u32::from_be_bytes(b))
    }

    fn f64(&mut self) -> Option<f64> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Some(f64::from_be_bytes(b))
    }

    fn string(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_and_bad_values_are_corrupt() {
        let layout = layout().unwrap();
        let row = TrendRow {
            id: row_id("00112233445566ff", 3),
            time_millis: 1_700_000_123_456,
            lat: 45.52306,
            lng: -122.67648,
            event_type: EventType::Conversion,
            event_name: "Product Purchased".into(),
            facets: vec![
                ("brand".into(), "Apple".into()),
                ("color".into(), "Black".into()),
                ("color".into(), "Black".into()),
            ],
        };
        let m = row.mutations(&layout).unwrap();
        let affinity_model::Mutation::SetCell { value, .. } = &m.mutations[0] else {
            panic!("one set cell");
        };
        let back = TrendRow::decode(&layout, &m.row_key, value).unwrap();
        assert_eq!(back, row);
        assert_eq!(back.event_id(), "00112233445566ff");
        for bad in [&value[..value.len() - 1], &[2u8][..], &[]] {
            let err = TrendRow::decode(&layout, &m.row_key, bad).unwrap_err();
            assert!(matches!(err, Error::Corrupt { .. }), "{err}");
        }
    }
}
