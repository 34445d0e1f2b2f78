//! The events key of the Algolia design: `app_id,user_token,timestamp[,suffix]`.
//!
//! The timestamp is ISO-8601 UTC with milliseconds
//! (`2019-05-28T00:04:34.000Z`): fixed width, so keys of one user sort
//! chronologically and read well in `cbt`. An event of a day its user is
//! spread on (a hot user, see the engine's `hot.rs`) has a bucket `~kk`
//! (two hex digits) after the date: `2019-05-28~0aT00:04:34.000Z`. The
//! bucket sorts after every time of that date and before the next date,
//! so a user's keys still sort by day, and within a spread day by bucket,
//! then time: the day's new events land at the ends of several adjacent
//! ranges, which load-based splitting can divide. The optional suffix is 16
//! lowercase hex digits of XXH64 (seed 0) over the event's content bytes:
//! a retried event maps to the same key (idempotent), and two different
//! events of one user in the same millisecond get different keys (they
//! collide only if their 64-bit content hashes do, probability 2^-64).

use std::fmt::Write;

use affinity_model::RowRange;

use crate::error::{Error, Result};
use crate::time::{format_millis, millis_text, parse_millis, MILLIS_PER_DAY};
use crate::xxh64::xxh64;

/// The separator between components.
pub const SEPARATOR: char = ',';

/// Length of an event suffix in hex digits.
pub const SUFFIX_LEN: usize = 16;

/// The byte that starts a bucket, after the date.
pub const BUCKET_MARK: u8 = b'~';

/// Buckets are `0..MAX_BUCKETS` (two hex digits).
pub const MAX_BUCKETS: u32 = 256;

/// Check one component: non-empty and free of the separator.
pub fn validate_component(component: &'static str, value: &str) -> Result<()> {
    let reason = if value.is_empty() {
        "must not be empty"
    } else if value.contains(SEPARATOR) {
        "must not contain ','"
    } else {
        return Ok(());
    };
    Err(Error::InvalidComponent {
        component,
        value: value.to_string(),
        reason,
    })
}

/// The deterministic suffix of an event: 16 lowercase hex digits of
/// XXH64(content). `content` must hold everything that makes the event
/// distinct (type, name, object ids, query id...) in a canonical encoding.
pub fn event_suffix(content: &[u8]) -> String {
    format!("{:016x}", event_hash(content))
}

/// The number an event suffix writes in hex: XXH64 (seed 0) of the
/// event's content.
pub fn event_hash(content: &[u8]) -> u64 {
    xxh64(content)
}

/// The key of an event whose suffix is `hash` in hex, written in one pass:
/// what `EventKey { suffix: Some(format!("{hash:016x}")), .. }.encode()`
/// gives, without the intermediate strings (ingestion writes one per
/// event).
pub fn event_key_text(
    app_id: &str,
    user_token: &str,
    timestamp_millis: i64,
    hash: u64,
) -> Result<String> {
    bucketed_event_key_text(app_id, user_token, timestamp_millis, None, hash)
}

/// [`event_key_text`] of an event in `bucket` of its spread day (`None`:
/// not spread).
pub fn bucketed_event_key_text(
    app_id: &str,
    user_token: &str,
    timestamp_millis: i64,
    bucket: Option<u32>,
    hash: u64,
) -> Result<String> {
    validate_component("app_id", app_id)?;
    validate_component("user_token", user_token)?;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut suffix = [0u8; SUFFIX_LEN];
    for (i, digit) in suffix.iter_mut().rev().enumerate() {
        *digit = HEX[((hash >> (4 * i)) & 15) as usize];
    }
    // Hex digits are ASCII.
    let suffix = std::str::from_utf8(&suffix).unwrap_or_default();
    join_key(app_id, user_token, timestamp_millis, bucket, Some(suffix))
}

/// `app_id,user_token,timestamp[,suffix]`, the timestamp (with its
/// bucket), and suffix checked (the callers check the other components).
fn join_key(
    app_id: &str,
    user_token: &str,
    timestamp_millis: i64,
    bucket: Option<u32>,
    suffix: Option<&str>,
) -> Result<String> {
    let time = millis_text(timestamp_millis)?;
    let suffix_len = suffix.map_or(0, |s| s.len() + 1);
    let mut key =
        String::with_capacity(app_id.len() + user_token.len() + time.len() + 5 + suffix_len);
    key.push_str(app_id);
    key.push(SEPARATOR);
    key.push_str(user_token);
    key.push(SEPARATOR);
    let (date, rest) = time.split_at(DATE_LEN);
    key.extend(date.iter().copied().map(char::from));
    if let Some(bucket) = bucket {
        if bucket >= MAX_BUCKETS {
            return Err(Error::InvalidArgument {
                name: "bucket",
                reason: format!("{bucket} is not below {MAX_BUCKETS}"),
            });
        }
        // Writing to memory cannot fail.
        let _ = write!(key, "{}{bucket:02x}", char::from(BUCKET_MARK));
    }
    key.extend(rest.iter().copied().map(char::from));
    if let Some(suffix) = suffix {
        validate_component("suffix", suffix)?;
        key.push(SEPARATOR);
        key.push_str(suffix);
    }
    Ok(key)
}

/// Length of the date that starts a timestamp (`YYYY-MM-DD`).
const DATE_LEN: usize = 10;

/// A parsed events key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventKey {
    pub app_id: String,
    pub user_token: String,
    /// Milliseconds since the Unix epoch, within years 0000-9999.
    pub timestamp_millis: i64,
    /// The bucket of an event of a spread day (see the module docs).
    pub bucket: Option<u32>,
    /// Content-derived disambiguator (see [`event_suffix`]).
    pub suffix: Option<String>,
}

impl EventKey {
    /// A key without suffix, after validating every component.
    pub fn new(app_id: &str, user_token: &str, timestamp_millis: i64) -> Result<EventKey> {
        validate_component("app_id", app_id)?;
        validate_component("user_token", user_token)?;
        format_millis(timestamp_millis)?;
        Ok(EventKey {
            app_id: app_id.to_string(),
            user_token: user_token.to_string(),
            timestamp_millis,
            bucket: None,
            suffix: None,
        })
    }

    /// The key of one event: components plus the suffix of its content, so
    /// retries land on the same row and distinct events never share one.
    pub fn for_event(
        app_id: &str,
        user_token: &str,
        timestamp_millis: i64,
        content: &[u8],
    ) -> Result<EventKey> {
        let mut key = EventKey::new(app_id, user_token, timestamp_millis)?;
        key.suffix = Some(event_suffix(content));
        Ok(key)
    }

    /// The row key as text.
    pub fn encode(&self) -> Result<String> {
        join_key(
            &self.app_id,
            &self.user_token,
            self.timestamp_millis,
            self.bucket,
            self.suffix.as_deref(),
        )
    }

    /// Parse a row key written by [`EventKey::encode`].
    pub fn parse(key: &str) -> Result<EventKey> {
        let malformed = |reason: &str| Error::MalformedKey {
            key: key.to_string(),
            reason: reason.to_string(),
        };
        let parts: Vec<&str> = key.split(SEPARATOR).collect();
        if !(3..=4).contains(&parts.len()) {
            return Err(malformed("expected app_id,user_token,timestamp[,suffix]"));
        }
        validate_component("app_id", parts[0])?;
        validate_component("user_token", parts[1])?;
        let (timestamp_millis, bucket) = parse_time(parts[2])?;
        let suffix = match parts.get(3) {
            Some(s) => {
                validate_component("suffix", s)?;
                Some(s.to_string())
            }
            None => None,
        };
        Ok(EventKey {
            app_id: parts[0].to_string(),
            user_token: parts[1].to_string(),
            timestamp_millis,
            bucket,
            suffix,
        })
    }
}

/// A key's timestamp and bucket: `YYYY-MM-DD[~kk]THH:MM:SS.mmmZ`.
fn parse_time(text: &str) -> Result<(i64, Option<u32>)> {
    let b = text.as_bytes();
    if b.get(DATE_LEN) != Some(&BUCKET_MARK) {
        return Ok((parse_millis(text)?, None));
    }
    let hex = b
        .get(DATE_LEN + 1..DATE_LEN + 3)
        .filter(|h| h.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')))
        .ok_or_else(|| Error::MalformedKey {
            key: text.to_string(),
            reason: "a bucket is two lowercase hex digits after the date".to_string(),
        })?;
    let bucket = hex
        .iter()
        .fold(0, |n, c| n * 16 + char::from(*c).to_digit(16).unwrap_or(0));
    let plain = format!("{}{}", &text[..DATE_LEN], &text[DATE_LEN + 3..]);
    Ok((parse_millis(&plain)?, Some(bucket)))
}

/// Every row of an application: keys starting `app_id,`.
pub fn app_prefix(app_id: &str) -> Result<RowRange> {
    validate_component("app_id", app_id)?;
    Ok(RowRange::prefix(format!("{app_id},")))
}

/// Every row of one user of an application: keys starting
/// `app_id,user_token,`.
pub fn user_prefix(app_id: &str, user_token: &str) -> Result<RowRange> {
    validate_component("app_id", app_id)?;
    validate_component("user_token", user_token)?;
    Ok(RowRange::prefix(format!("{app_id},{user_token},")))
}

/// The rows of one user with `from_millis <= timestamp < to_millis`,
/// suffixed or not, bucketed or not. A bucketed row sorts by its date
/// alone, so when a bound falls inside a day the range also holds that
/// day's rows on the other side of the bound: callers keep the rows whose
/// time is within the bounds.
pub fn user_time_range(
    app_id: &str,
    user_token: &str,
    from_millis: i64,
    to_millis: i64,
) -> Result<RowRange> {
    validate_component("app_id", app_id)?;
    validate_component("user_token", user_token)?;
    if from_millis > to_millis {
        return Err(Error::InvalidArgument {
            name: "time range",
            reason: format!("from {from_millis} is after to {to_millis}"),
        });
    }
    // A bucketed key of `from`'s day sorts after every plain one of it.
    let start = format!("{app_id},{user_token},{}", format_millis(from_millis)?);
    let to = format_millis(to_millis)?;
    let end = if to_millis.rem_euclid(MILLIS_PER_DAY) == 0 {
        // Keys at `to` sort at or after "app,user,TO" (with or without
        // suffix or bucket), so an exclusive end at exactly that string
        // excludes all of them.
        format!("{app_id},{user_token},{to}")
    } else {
        // Past the buckets of `to`'s day ("~~" sorts after "~ff").
        let mark = char::from(BUCKET_MARK);
        format!("{app_id},{user_token},{}{mark}{mark}", &to[..DATE_LEN])
    };
    Ok(RowRange::closed_open(start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_key_text_is_the_encoded_event_key() {
        for (app, user, ts, content) in [
            ("app1", "user42", 1_559_001_874_000, &b"x"[..]),
            ("a", "é-ü", 0, b""),
            ("bench", "u", crate::time::MIN_MILLIS, b"{}"),
            ("bench", "u", crate::time::MAX_MILLIS, b"[1,2]"),
            ("b", "u", -1, b"z"),
        ] {
            let hash = event_hash(content);
            assert_eq!(
                event_key_text(app, user, ts, hash).unwrap(),
                EventKey::for_event(app, user, ts, content)
                    .unwrap()
                    .encode()
                    .unwrap()
            );
        }
        assert!(event_key_text("a,b", "u", 0, 1).is_err());
        assert!(event_key_text("a", "", 0, 1).is_err());
        assert!(event_key_text("a", "u", crate::time::MAX_MILLIS + 1, 1).is_err());
    }

    #[test]
    fn encodes_the_algolia_key() {
        let key = EventKey::new("app1", "user42", 1_559_001_874_000).unwrap();
        assert_eq!(
            key.encode().unwrap(),
            "app1,user42,2019-05-28T00:04:34.000Z"
        );
        assert_eq!(EventKey::parse(&key.encode().unwrap()).unwrap(), key);
    }

    #[test]
    fn errors_name_the_component() {
        let err = EventKey::new("app,1", "u", 0).unwrap_err();
        assert!(err.to_string().contains("app_id"), "{err}");
        let err = EventKey::new("app", "", 0).unwrap_err();
        assert!(err.to_string().contains("user_token"), "{err}");
        assert!(user_prefix("a", "b,c").is_err());
        assert!(EventKey::parse("a,b").is_err());
        assert!(EventKey::parse("a,b,2019-05-28T00:04:34.000Z,x,y").is_err());
    }

    #[test]
    fn same_millisecond_events_get_distinct_stable_keys() {
        let t: i64 = 1_559_001_874_000;
        let a = EventKey::for_event("app", "u", t, b"click obj1").unwrap();
        let b = EventKey::for_event("app", "u", t, b"click obj2").unwrap();
        let retry = EventKey::for_event("app", "u", t, b"click obj1").unwrap();
        assert_ne!(a.encode().unwrap(), b.encode().unwrap());
        assert_eq!(a.encode().unwrap(), retry.encode().unwrap());
        assert_eq!(
            a.encode().unwrap(),
            format!(
                "app,u,2019-05-28T00:04:34.000Z,{}",
                event_suffix(b"click obj1")
            )
        );
    }

    #[test]
    fn prefixes_select_the_right_rows() {
        let t: i64 = 1_559_001_874_000;
        let key = |user: &str, ms: i64, content: Option<&[u8]>| {
            let k = match content {
                Some(c) => EventKey::for_event("app", user, ms, c).unwrap(),
                None => EventKey::new("app", user, ms).unwrap(),
            };
            k.encode().unwrap().into_bytes()
        };
        let user = user_prefix("app", "u1").unwrap();
        assert!(user.contains(&key("u1", t, None)));
        assert!(!user.contains(&key("u10", t, None)));
        let app = app_prefix("app").unwrap();
        assert!(app.contains(&key("u10", t, Some(b"x"))));
        assert!(!app.contains(b"app2,u1,2019-05-28T00:04:34.000Z"));
        // A range ending at a day's start excludes every key from it on.
        let midnight = t - t.rem_euclid(DAY);
        let range = user_time_range("app", "u1", midnight - 1000, midnight).unwrap();
        assert!(range.contains(&key("u1", midnight - 1000, None)));
        assert!(range.contains(&key("u1", midnight - 1, Some(b"x"))));
        assert!(!range.contains(&key("u1", midnight, None)));
        assert!(!range.contains(&key("u1", midnight, Some(b"x"))));
        assert!(!range.contains(&key("u1", midnight - 1001, Some(b"x"))));
        // Ending inside a day, it holds the rest of that day too.
        let range = user_time_range("app", "u1", t, t + 1000).unwrap();
        assert!(range.contains(&key("u1", t, None)));
        assert!(range.contains(&key("u1", t + 999, Some(b"x"))));
        assert!(range.contains(&key("u1", t + 1000, Some(b"x"))));
        assert!(!range.contains(&key("u1", t - 1, Some(b"x"))));
        assert!(!range.contains(&key("u1", midnight + DAY, None)));
    }

    const DAY: i64 = MILLIS_PER_DAY;

    #[test]
    fn bucketed_keys_round_trip_and_sort_within_their_date() {
        let t: i64 = 1_559_001_874_000; // 2019-05-28T00:04:34.000Z
        let plain = event_key_text("app", "u", t, 0xab).unwrap();
        let bucketed = bucketed_event_key_text("app", "u", t, Some(10), 0xab).unwrap();
        assert_eq!(
            bucketed,
            "app,u,2019-05-28~0aT00:04:34.000Z,00000000000000ab"
        );
        let parsed = EventKey::parse(&bucketed).unwrap();
        assert_eq!(parsed.bucket, Some(10));
        assert_eq!(parsed.timestamp_millis, t);
        assert_eq!(parsed.encode().unwrap(), bucketed);
        assert_eq!(EventKey::parse(&plain).unwrap().bucket, None);
        // After every plain key of the date, before the next date.
        let day_end = t - t.rem_euclid(DAY) + DAY;
        let last = event_key_text("app", "u", day_end - 1, u64::MAX).unwrap();
        let next = event_key_text("app", "u", day_end, 0).unwrap();
        let first_bucket = bucketed_event_key_text("app", "u", t, Some(0), 0).unwrap();
        let last_bucket = bucketed_event_key_text("app", "u", day_end - 1, Some(255), 0).unwrap();
        assert!(last < first_bucket && last_bucket < next);
        assert!(bucketed_event_key_text("app", "u", t, Some(256), 0).is_err());
        for bad in [
            "app,u,2019-05-28~0AT00:04:34.000Z,00000000000000ab",
            "app,u,2019-05-28~g0T00:04:34.000Z,00000000000000ab",
            "app,u,2019-05-28~0T00:04:34.000Z,00000000000000ab",
            "app,u,2019-05-28~",
        ] {
            assert!(EventKey::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn time_ranges_hold_the_buckets_of_their_days() {
        let t: i64 = 1_559_001_874_000;
        let midnight = t - t.rem_euclid(DAY);
        let key = |ms: i64, bucket: u32| {
            bucketed_event_key_text("app", "u1", ms, Some(bucket), 7)
                .unwrap()
                .into_bytes()
        };
        // Bounds inside the day: all of the day's buckets, either side.
        let range = user_time_range("app", "u1", t, t + 1000).unwrap();
        for ms in [midnight, t, midnight + DAY - 1] {
            for bucket in [0, 255] {
                assert!(range.contains(&key(ms, bucket)), "{ms} {bucket}");
            }
        }
        assert!(!range.contains(&key(midnight - 1, 0)));
        assert!(!range.contains(&key(midnight + DAY, 0)));
        // Bounds on days: exactly the days between.
        let range = user_time_range("app", "u1", midnight, midnight + DAY).unwrap();
        assert!(range.contains(&key(midnight, 0)));
        assert!(range.contains(&key(midnight + DAY - 1, 255)));
        assert!(!range.contains(&key(midnight + DAY, 0)));
        assert!(!range.contains(&key(midnight - 1, 255)));
    }
}
