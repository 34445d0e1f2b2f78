//! ISO-8601 times as the API writes them (`2024-05-21T01:15:35Z`).

/// Milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (empty when out
/// of the years 0000-9999).
pub fn iso(millis: i64) -> String {
    affinity_rowkey::time::format_seconds(millis).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn iso_drops_milliseconds() {
        assert_eq!(super::iso(1_716_254_135_123), "2024-05-21T01:15:35Z");
        assert_eq!(super::iso(0), "1970-01-01T00:00:00Z");
    }
}
