//! The events key of the Algolia design: `app_id,user_token,timestamp[,suffix]`.
//!
//! The timestamp is ISO-8601 UTC with milliseconds
//! (`2019-05-28T00:04:34.000Z`): fixed width, so keys of one user sort
//! chronologically and read well in `cbt`. The optional suffix is 16
//! lowercase hex digits of XXH64 (seed 0) over the event's content bytes:
//! a retried event maps to the same key (idempotent), and two different
//! events of one user in the same millisecond get different keys (they
//! collide only if their 64-bit content hashes do, probability 2^-64).

use affinity_model::RowRange;

use crate::error::{Error, Result};
use crate::time::{format_millis, millis_text, parse_millis};
use crate::xxh64::xxh64;

/// The separator between components.
pub const SEPARATOR: char = ',';

/// Length of an event suffix in hex digits.
pub const SUFFIX_LEN: usize = 16;

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
    validate_component("app_id", app_id)?;
    validate_component("user_token", user_token)?;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut suffix = [0u8; SUFFIX_LEN];
    for (i, digit) in suffix.iter_mut().rev().enumerate() {
        *digit = HEX[((hash >> (4 * i)) & 15) as usize];
    }
    // Hex digits are ASCII.
    let suffix = std::str::from_utf8(&suffix).unwrap_or_default();
    join_key(app_id, user_token, timestamp_millis, Some(suffix))
}

/// `app_id,user_token,timestamp[,suffix]`, the timestamp and suffix
/// checked (the callers check the other components).
fn join_key(
    app_id: &str,
    user_token: &str,
    timestamp_millis: i64,
    suffix: Option<&str>,
) -> Result<String> {
    let time = millis_text(timestamp_millis)?;
    let suffix_len = suffix.map_or(0, |s| s.len() + 1);
    let mut key =
        String::with_capacity(app_id.len() + user_token.len() + time.len() + 2 + suffix_len);
    key.push_str(app_id);
    key.push(SEPARATOR);
    key.push_str(user_token);
    key.push(SEPARATOR);
    key.extend(time.iter().copied().map(char::from));
    if let Some(suffix) = suffix {
        validate_component("suffix", suffix)?;
        key.push(SEPARATOR);
        key.push_str(suffix);
    }
    Ok(key)
}

/// A parsed events key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventKey {
    pub app_id: String,
    pub user_token: String,
    /// Milliseconds since the Unix epoch, within years 0000-9999.
    pub timestamp_millis: i64,
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
        let timestamp_millis = parse_millis(parts[2])?;
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
            suffix,
        })
    }
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
/// suffixed or not.
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
    let start = format!("{app_id},{user_token},{}", format_millis(from_millis)?);
    // Keys at `to` sort at or after "app,user,TO" (with or without suffix),
    // so an exclusive end at exactly that string excludes all of them.
    let end = format!("{app_id},{user_token},{}", format_millis(to_millis)?);
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
        let t = 1_559_001_874_000;
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
        let t = 1_559_001_874_000;
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
        let range = user_time_range("app", "u1", t, t + 1000).unwrap();
        assert!(range.contains(&key("u1", t, None)));
        assert!(range.contains(&key("u1", t, Some(b"x"))));
        assert!(range.contains(&key("u1", t + 999, Some(b"x"))));
        assert!(!range.contains(&key("u1", t + 1000, None)));
        assert!(!range.contains(&key("u1", t + 1000, Some(b"x"))));
        assert!(!range.contains(&key("u1", t - 1, Some(b"x"))));
    }
}
