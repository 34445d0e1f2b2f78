//! The profile state: one row per user and day in table `profiles.<app>`,
//! key `user,DDDDDDDD` ([`state_row_key`]), written by ingestion's blind
//! adds ([`Engine::ingest`]; `ingest.rs` states the protocol and its
//! guarantee) and read by the streaming profile read ([`Engine::profile`]).
//!
//! [`Engine::ingest`]: crate::Engine::ingest
//! [`Engine::profile`]: crate::Engine::profile
//!
//! The three families are aggregate families summing 64-bit integers (Cloud
//! Bigtable's `Int64` sum type; the embedded store adds them with a RocksDB
//! merge operand, without reading the row). Every add of a batch to `n`
//! and `i` is stamped with the first microsecond of the day it *arrives*
//! (today), so a column holds one cell per arrival day: nearly always one,
//! since most events arrive on their own day.
//!
//! - family `n`: one counter per `(type, name, facet, value)` of the day,
//!   qualifier CSV(type, name, facet, value), the sum of the counts of the
//!   day's events that arrived that day;
//! - family `i`: one cell per event of the day, qualifier = the event's id
//!   (16 bytes: timestamp i64 BE | key suffix u64 BE), the number of times
//!   the event was added that arrival day;
//! - family `t`: one column per `(type, name, facet)` of the day,
//!   qualifier CSV(type, name, facet), each add stamped with the event's
//!   own time; the family keeps one version, so the column's timestamp is
//!   the latest time of an event of that type and name with that facet
//!   (a maximum kept by Bigtable's version GC, without a read).
//!
//! Closed days are folded into the user's rollup row `user,!` (see
//! [`crate::rollup`] and `docs/design/profiles.md`). `n`, `i` and `t`
//! expire `retention + 5 days` after their timestamp: the rollup slack of
//! 3 days plus a day's margin each way.

use std::borrow::Cow;

use affinity_rowkey::composite::bucketed_event_key_text;

use crate::csv;
use crate::engine::DAY_MILLIS;
use crate::error::{Error, Result};
use crate::event::EventType;

/// The state family of counters.
pub const COUNTERS_FAMILY: &str = "n";
/// The state family of event ids.
pub const IDS_FAMILY: &str = "i";
/// The state family of latest event times.
pub const LAST_FAMILY: &str = "t";
/// The digest of a day row's closed arrival hours: its counters of those
/// hours, one packed cell per facet (see `crate::digest`).
pub const DIGEST_FAMILY: &str = "g";

/// An event id within a user: its timestamp and key suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventId {
    pub timestamp_millis: i64,
    pub suffix: u64,
}

impl EventId {
    // `day` and `qualifier` are inlined: ingestion calls them per event,
    // from another module.
    #[inline]
    pub fn day(&self) -> i64 {
        self.timestamp_millis.div_euclid(DAY_MILLIS)
    }

    /// The qualifier of this event's cell in family `i`.
    #[inline]
    pub fn qualifier(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.timestamp_millis.to_be_bytes());
        out[8..].copy_from_slice(&self.suffix.to_be_bytes());
        out
    }

    /// The id a family-`i` qualifier names.
    pub fn from_qualifier(q: &[u8]) -> Result<EventId> {
        let bad = || Error::corrupt("event id qualifier", format!("{q:?}"));
        let (ts, suffix) = q
            .split_first_chunk::<8>()
            .filter(|(_, rest)| rest.len() == 8)
            .ok_or_else(bad)?;
        let suffix: [u8; 8] = suffix.try_into().map_err(|_| bad())?;
        Ok(EventId {
            timestamp_millis: i64::from_be_bytes(*ts),
            suffix: u64::from_be_bytes(suffix),
        })
    }

    /// The event's row key in the events table, for a user whose day has
    /// `rows` sub-rows (1: not spread; else the key has the bucket of the
    /// event's sub-row, `hot.rs`).
    pub fn row_key(&self, app: &str, user: &str, rows: u32) -> Result<String> {
        Ok(bucketed_event_key_text(
            app,
            user,
            self.timestamp_millis,
            (rows > 1).then(|| crate::hot::sub_row(self, rows)),
            self.suffix,
        )?)
    }
}

/// The counter qualifier of `(type, name, facet, value)`.
pub fn counter_qualifier(ty: EventType, name: &str, facet: &str, value: &str) -> String {
    csv::encode(&[ty.as_str(), name, facet, value])
}

/// A counter qualifier's fields: type, name, facet, value (borrowed when
/// unquoted).
pub type CounterColumn<'q> = (EventType, Cow<'q, str>, Cow<'q, str>, Cow<'q, str>);

/// Parse a counter qualifier.
pub fn parse_counter_qualifier(q: &[u8]) -> Result<CounterColumn<'_>> {
    let bad = || Error::corrupt("counter qualifier", String::from_utf8_lossy(q).into_owned());
    let text = std::str::from_utf8(q).map_err(|_| bad())?;
    let ([ty, name, facet, value], 4) = csv::decode_n::<4>(text).ok_or_else(bad)? else {
        return Err(bad());
    };
    let ty = EventType::parse(&ty).ok_or_else(bad)?;
    Ok((ty, name, facet, value))
}

/// A counter's prefix `type,name,facet` and value.
pub type SplitCounter<'q> = (Cow<'q, [u8]>, Cow<'q, [u8]>);

/// A counter qualifier split into its prefix `type,name,facet` (a `t`
/// qualifier) and its value as text: borrowed when nothing is quoted (the
/// common case: one scan for the third comma).
pub fn split_counter_qualifier(q: &[u8]) -> Result<SplitCounter<'_>> {
    if !q.contains(&b'"') {
        let mut commas = q.iter().enumerate().filter(|(_, b)| **b == b',');
        if let (Some(_), Some(_), Some((third, _)), None) =
            (commas.next(), commas.next(), commas.next(), commas.next())
        {
            return Ok((Cow::Borrowed(&q[..third]), Cow::Borrowed(&q[third + 1..])));
        }
    }
    let (ty, name, facet, value) = parse_counter_qualifier(q)?;
    let prefix = last_qualifier(ty, &name, &facet).into_bytes();
    let value = match value {
        Cow::Borrowed(v) => Cow::Owned(v.as_bytes().to_vec()),
        Cow::Owned(v) => Cow::Owned(v.into_bytes()),
    };
    Ok((Cow::Owned(prefix), value))
}

/// The qualifier of a `t` column: CSV(type, name, facet).
pub fn last_qualifier(ty: EventType, name: &str, facet: &str) -> String {
    csv::encode(&[ty.as_str(), name, facet])
}

/// Parse a `t` qualifier.
pub fn parse_last_qualifier(q: &[u8]) -> Result<(EventType, Cow<'_, str>, Cow<'_, str>)> {
    let bad = || {
        Error::corrupt(
            "latest-time qualifier",
            String::from_utf8_lossy(q).into_owned(),
        )
    };
    let text = std::str::from_utf8(q).map_err(|_| bad())?;
    let ([ty, name, facet], 3) = csv::decode_n::<3>(text).ok_or_else(bad)? else {
        return Err(bad());
    };
    let ty = EventType::parse(&ty).ok_or_else(bad)?;
    Ok((ty, name, facet))
}

/// The timestamp of `day`'s cells in `i`: the day's first microsecond.
#[inline]
pub fn day_micros(day: i64) -> i64 {
    day * DAY_MILLIS * 1000
}

/// The sum a cell of a sum family (`n`, `i`) holds.
pub(crate) fn decode_sum(value: &[u8]) -> Result<i64> {
    affinity_model::apply::decode_i64(value)
        .ok_or_else(|| Error::corrupt("state cell", format!("{} bytes", value.len())))
}

/// An hour.
pub const HOUR_MILLIS: i64 = 3_600_000;

/// The timestamp of the counters (`n`) added at `now_millis`: its hour's
/// first microsecond, in the arrival day as [`day_micros`] is.
#[inline]
pub fn hour_micros(now_millis: i64) -> i64 {
    now_millis.div_euclid(HOUR_MILLIS) * HOUR_MILLIS * 1000
}

/// The state row of a user's day: `user,DDDDDDDD` (the day number,
/// zero-padded, so a user's days sort in order, after their rollup row
/// `user,!`).
pub fn state_row_key(user: &str, day: i64) -> String {
    let mut key = String::with_capacity(user.len() + 9);
    push_state_row_key(&mut key, user, day);
    key
}

/// [`state_row_key`] written into `out`.
pub(crate) fn push_state_row_key(out: &mut impl std::fmt::Write, user: &str, day: i64) {
    // Writing to memory cannot fail.
    let _ = write!(out, "{user},{day:08}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_qualifiers_split_into_prefix_and_value() {
        for (ty, name, facet, value) in [
            (EventType::Click, "click", "brand", "Apple"),
            (EventType::Conversion, "buy, now", "brand", "A \"B\", C"),
            (EventType::View, "view", "size", ""),
            (EventType::View, "view", "note", "a\nb"),
        ] {
            let q = counter_qualifier(ty, name, facet, value);
            let (prefix, got) = split_counter_qualifier(q.as_bytes()).unwrap();
            assert_eq!(&*prefix, last_qualifier(ty, name, facet).as_bytes(), "{q}");
            assert_eq!(&*got, value.as_bytes(), "{q}");
        }
        assert!(split_counter_qualifier(b"nonsense").is_err());
    }
}
