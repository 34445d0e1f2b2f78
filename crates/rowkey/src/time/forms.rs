//! Times as people write them (CSV files, query parameters), in
//! milliseconds since the Unix epoch:
//!
//! - RFC 3339 / ISO 8601 date-times, `T` or a space between date and time:
//!   `2020-06-30T00:00:00Z`, `2014-07-01 15:45:43-0000`,
//!   `2020-06-30T00:00:00.250+02:00`; fractions of a second are truncated
//!   to milliseconds; the offset is `Z`, `+HH:MM`, `+HHMM` or `+HH`
//!   (optionally after one space), and a time without one is UTC;
//! - epoch numbers: an integer of at most 11 digits is seconds, a longer one
//!   milliseconds (`1593475200` and `1593475200000` are the same instant);
//!   a number with a fraction is seconds (`1593475200.5`).

use super::parse_millis;
use crate::error::{Error, Result};

fn bad(text: &str, reason: impl Into<String>) -> Error {
    Error::InvalidTime {
        value: text.to_string(),
        reason: reason.into(),
    }
}

/// Parse a time in any accepted form into milliseconds since the epoch.
pub fn parse_time(text: &str) -> Result<i64> {
    let t = text.trim();
    if t.is_empty() {
        return Err(bad(text, "is empty"));
    }
    let digits_or_dot = t
        .bytes()
        .enumerate()
        .all(|(i, b)| b.is_ascii_digit() || b == b'.' || (i == 0 && b == b'-'));
    if digits_or_dot {
        return parse_epoch(text, t);
    }
    parse_datetime(text, t)
}

fn parse_epoch(text: &str, t: &str) -> Result<i64> {
    let negative = t.starts_with('-');
    let body = t.trim_start_matches('-');
    let (int, frac) = match body.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (body, None),
    };
    if int.is_empty() || frac.is_some_and(|f| f.is_empty() || f.contains('.')) {
        return Err(bad(
            text,
            "is not a number of epoch seconds or milliseconds",
        ));
    }
    let value: i64 = int
        .parse()
        .map_err(|_| bad(text, "is too large for an epoch time"))?;
    let millis = match frac {
        None if int.trim_start_matches('0').len() > 11 => value,
        None => value
            .checked_mul(1000)
            .ok_or_else(|| bad(text, "is too large for an epoch time"))?,
        Some(f) => {
            let ms: String = f.chars().chain("000".chars()).take(3).collect();
            let ms: i64 = ms.parse().map_err(|_| bad(text, "has a bad fraction"))?;
            value
                .checked_mul(1000)
                .and_then(|v| v.checked_add(ms))
                .ok_or_else(|| bad(text, "is too large for an epoch time"))?
        }
    };
    Ok(if negative { -millis } else { millis })
}

fn two_digits(text: &str, s: &str) -> Result<i64> {
    if s.len() != 2 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(text, "has a bad offset (use Z, +HH:MM, +HHMM or +HH)"));
    }
    s.parse()
        .map_err(|_| bad(text, "has a bad offset (use Z, +HH:MM, +HHMM or +HH)"))
}

/// Offset text (after the seconds and fraction) -> offset in minutes east.
fn parse_offset(text: &str, off: &str) -> Result<i64> {
    let off = off.strip_prefix(' ').unwrap_or(off);
    if off.is_empty() || off == "Z" || off == "z" {
        return Ok(0);
    }
    let sign = match off.as_bytes()[0] {
        b'+' => 1,
        b'-' => -1,
        _ => {
            return Err(bad(
                text,
                "has text after the seconds that is not an offset (Z, +HH:MM, +HHMM or +HH)",
            ))
        }
    };
    let rest = &off[1..];
    if !rest.is_ascii() {
        return Err(bad(text, "has a bad offset (use Z, +HH:MM, +HHMM or +HH)"));
    }
    let (h, m) = match rest.len() {
        2 => (two_digits(text, rest)?, 0),
        4 => (two_digits(text, &rest[..2])?, two_digits(text, &rest[2..])?),
        5 if rest.as_bytes()[2] == b':' => {
            (two_digits(text, &rest[..2])?, two_digits(text, &rest[3..])?)
        }
        _ => return Err(bad(text, "has a bad offset (use Z, +HH:MM, +HHMM or +HH)")),
    };
    if h > 23 || m > 59 {
        return Err(bad(text, "has an offset out of range"));
    }
    Ok(sign * (h * 60 + m))
}

fn parse_datetime(text: &str, t: &str) -> Result<i64> {
    let form = "must be RFC 3339, YYYY-MM-DD HH:MM:SS[offset] or epoch seconds/milliseconds";
    let b = t.as_bytes();
    if b.len() < 19 || !matches!(b[10], b'T' | b't' | b' ') || !t.is_char_boundary(19) {
        return Err(bad(text, form));
    }
    let (date, clock) = (&t[..10], &t[11..19]);
    let mut rest = &t[19..];
    let mut ms = String::from("000");
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return Err(bad(text, "has a '.' without fraction digits"));
        }
        ms = frac[..n].chars().chain("00".chars()).take(3).collect();
        rest = &frac[n..];
    }
    let offset_minutes = parse_offset(text, rest)?;
    let canonical = format!("{date}T{clock}.{ms}Z");
    let local = parse_millis(&canonical).map_err(|e| match e {
        Error::InvalidTimestamp { reason, .. } => bad(text, reason),
        other => bad(text, other.to_string()),
    })?;
    Ok(local - offset_minutes * 60_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_shift_to_utc() {
        let utc = parse_time("2014-07-01 15:45:43").unwrap();
        assert_eq!(parse_time("2014-07-01 15:45:43-0000").unwrap(), utc);
        assert_eq!(parse_time("2014-07-01T17:45:43+02:00").unwrap(), utc);
        assert_eq!(parse_time("2014-07-01T13:45:43-02").unwrap(), utc);
        assert_eq!(parse_time("2014-07-01T15:45:43.999Z").unwrap(), utc + 999);
        assert_eq!(parse_time("2014-07-01T15:45:43.1Z").unwrap(), utc + 100);
    }

    #[test]
    fn non_ascii_offsets_are_errors_not_panics() {
        // Each puts a multi-byte character across a slice of the offset.
        for text in [
            "2014-07-01T15:45:43+1\u{e9}1",
            "2014-07-01T15:45:43+\u{e9}12",
            "2014-07-01T15:45:43+1\u{e9}:1",
            "2014-07-01T15:45:43-12:\u{e9}",
            "2014-07-01T15:45:43+\u{1f600}",
        ] {
            let err = parse_time(text).unwrap_err().to_string();
            assert!(err.contains("bad offset"), "{text}: {err}");
        }
    }
}
