//! ISO-8601 UTC timestamps with milliseconds (`2019-05-28T00:04:34.000Z`),
//! the fixed-width form the events key uses so rows read well in `cbt` and
//! sort chronologically as strings; and [`parse_time`], the looser forms
//! people write (RFC 3339 with offsets, epoch seconds or milliseconds).

mod forms;

pub use forms::parse_time;

use crate::error::{Error, Result};

/// Length of a formatted timestamp: `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub const TIMESTAMP_LEN: usize = 24;

/// Smallest millisecond time that formats (`0000-01-01T00:00:00.000Z`).
pub const MIN_MILLIS: i64 = -62_167_219_200_000;
/// Largest millisecond time that formats (`9999-12-31T23:59:59.999Z`).
pub const MAX_MILLIS: i64 = 253_402_300_799_999;

/// Milliseconds in a day.
pub(crate) const MILLIS_PER_DAY: i64 = 86_400_000;

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day number (inverse of [`days_from_civil`]).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        _ => 28,
    }
}

/// Format milliseconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn format_millis(millis: i64) -> Result<String> {
    Ok(ascii(&millis_text(millis)?))
}

/// The text of the ASCII digits and separators [`millis_text`] writes.
fn ascii(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 1);
    out.extend(bytes.iter().copied().map(char::from));
    out
}

/// [`format_millis`] into a fixed-size buffer (ASCII), without allocating:
/// every event key holds one.
pub fn millis_text(millis: i64) -> Result<[u8; TIMESTAMP_LEN]> {
    if !(MIN_MILLIS..=MAX_MILLIS).contains(&millis) {
        return Err(Error::InvalidTimestamp {
            value: millis.to_string(),
            reason: "is outside years 0000-9999",
        });
    }
    let days = millis.div_euclid(MILLIS_PER_DAY);
    let in_day = millis.rem_euclid(MILLIS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    let (h, rest) = (in_day / 3_600_000, in_day % 3_600_000);
    let (m, rest) = (rest / 60_000, rest % 60_000);
    let (s, ms) = (rest / 1000, rest % 1000);
    let mut out = *b"0000-00-00T00:00:00.000Z";
    for (range, value) in [
        (0..4, year),
        (5..7, month),
        (8..10, day),
        (11..13, h),
        (14..16, m),
        (17..19, s),
        (20..23, ms),
    ] {
        let mut value = value;
        for b in out[range].iter_mut().rev() {
            *b = b'0' + (value % 10) as u8;
            value /= 10;
        }
    }
    Ok(out)
}

/// Format milliseconds since the Unix epoch to the second, as APIs often
/// write times: `YYYY-MM-DDTHH:MM:SSZ` (milliseconds truncated).
pub fn format_seconds(millis: i64) -> Result<String> {
    let mut out = ascii(&millis_text(millis)?[..19]); // drop ".mmm"
    out.push('Z');
    Ok(out)
}

fn digits(text: &str, bytes: &[u8], range: std::ops::Range<usize>) -> Result<i64> {
    let mut value = 0i64;
    for &b in &bytes[range] {
        if !b.is_ascii_digit() {
            return Err(bad(text, "must be YYYY-MM-DDTHH:MM:SS.mmmZ"));
        }
        value = value * 10 + i64::from(b - b'0');
    }
    Ok(value)
}

fn bad(text: &str, reason: &'static str) -> Error {
    Error::InvalidTimestamp {
        value: format!("{text:?}"),
        reason,
    }
}

/// Parse `YYYY-MM-DDTHH:MM:SS.mmmZ` (exactly that form) into milliseconds
/// since the Unix epoch.
pub fn parse_millis(text: &str) -> Result<i64> {
    let b = text.as_bytes();
    if b.len() != TIMESTAMP_LEN
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'.'
        || b[23] != b'Z'
    {
        return Err(bad(text, "must be YYYY-MM-DDTHH:MM:SS.mmmZ"));
    }
    let year = digits(text, b, 0..4)?;
    let month = digits(text, b, 5..7)?;
    let day = digits(text, b, 8..10)?;
    let (h, m, s) = (
        digits(text, b, 11..13)?,
        digits(text, b, 14..16)?,
        digits(text, b, 17..19)?,
    );
    let ms = digits(text, b, 20..23)?;
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err(bad(text, "is not a calendar date"));
    }
    if h > 23 || m > 59 || s > 59 {
        return Err(bad(text, "is not a time of day"));
    }
    let days = days_from_civil(year, month, day);
    Ok(days * MILLIS_PER_DAY + h * 3_600_000 + m * 60_000 + s * 1000 + ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_the_algolia_example() {
        let ms = parse_millis("2019-05-28T00:04:34.000Z").unwrap();
        assert_eq!(ms, 1_559_001_874_000);
        assert_eq!(format_millis(ms).unwrap(), "2019-05-28T00:04:34.000Z");
        assert_eq!(format_millis(0).unwrap(), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_millis(-1).unwrap(), "1969-12-31T23:59:59.999Z");
        assert_eq!(format_seconds(ms + 999).unwrap(), "2019-05-28T00:04:34Z");
        assert!(format_seconds(MAX_MILLIS + 1).is_err());
        assert_eq!(
            format_millis(MIN_MILLIS).unwrap(),
            "0000-01-01T00:00:00.000Z"
        );
        assert_eq!(
            format_millis(MAX_MILLIS).unwrap(),
            "9999-12-31T23:59:59.999Z"
        );
        assert!(format_millis(MAX_MILLIS + 1).is_err());
        assert!(format_millis(MIN_MILLIS - 1).is_err());
    }

    #[test]
    fn rejects_malformed_text() {
        for text in [
            "2019-05-28T00:04:34Z",
            "2019-05-28 00:04:34.000Z",
            "2019-02-29T00:00:00.000Z",
            "2019-13-01T00:00:00.000Z",
            "2019-05-28T24:00:00.000Z",
            "2019-05-28T00:04:34.000+",
            "2019-05-2xT00:04:34.000Z",
        ] {
            assert!(parse_millis(text).is_err(), "{text}");
        }
        assert!(parse_millis("2020-02-29T00:00:00.000Z").is_ok());
    }

    #[test]
    fn round_trips_across_the_range() {
        let mut ms = MIN_MILLIS;
        let mut previous = String::new();
        while ms <= MAX_MILLIS {
            let text = format_millis(ms).unwrap();
            assert_eq!(parse_millis(&text).unwrap(), ms);
            assert!(text > previous, "{text} sorts after {previous}");
            previous = text;
            ms += 77_777_777_777;
        }
    }
}
