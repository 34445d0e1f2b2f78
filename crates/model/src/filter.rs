//! The `RowFilter` algebra of Bigtable v2, as data. Evaluation lives in
//! [`crate::eval`]; backends that talk to a server translate it field for
//! field (and validate it with [`crate::eval::validate`] first).

use std::ops::Bound;

use bytes::Bytes;

/// A half-open range of cell timestamps in microseconds:
/// `start_micros <= t < end_micros`. `end_micros == 0` means no upper bound,
/// as in Bigtable's `TimestampRange`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimestampRange {
    pub start_micros: i64,
    pub end_micros: i64,
}

impl TimestampRange {
    pub fn new(start_micros: i64, end_micros: i64) -> TimestampRange {
        TimestampRange {
            start_micros,
            end_micros,
        }
    }

    /// True when `micros` falls in the range.
    pub fn contains(&self, micros: i64) -> bool {
        micros >= self.start_micros && (self.end_micros == 0 || micros < self.end_micros)
    }
}

/// A range of qualifiers within one family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnRange {
    pub family: String,
    pub start: Bound<Bytes>,
    pub end: Bound<Bytes>,
}

/// A range of cell values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueRange {
    pub start: Bound<Bytes>,
    pub end: Bound<Bytes>,
}

/// Bigtable's `RowFilter`, one variant per filter kind.
///
/// Regexes are RE2 syntax matched against the whole byte string (as if
/// anchored with `\A(?:...)\z`), byte-wise: as in Bigtable, `.` matches any
/// byte except `\n` and `\C` matches any byte. Evaluation lives in
/// [`crate::eval`].
#[derive(Debug, Clone, PartialEq)]
pub enum RowFilter {
    /// Apply each filter to the output of the previous one. At most one
    /// sub-filter may apply a label. An empty chain passes everything.
    Chain(Vec<RowFilter>),
    /// Apply each filter to the input and merge the outputs in canonical
    /// order, keeping duplicates (a cell passed by two filters appears twice).
    /// An empty interleave outputs nothing.
    Interleave(Vec<RowFilter>),
    /// If `predicate` outputs any cell for the row, apply `true_filter`, else
    /// `false_filter` (a missing branch outputs nothing).
    Condition {
        predicate: Box<RowFilter>,
        true_filter: Option<Box<RowFilter>>,
        false_filter: Option<Box<RowFilter>>,
    },
    /// Send the input cells straight to the read's output, bypassing the
    /// enclosing filters; outputs nothing to its parent. Not allowed inside a
    /// condition.
    Sink,
    PassAll,
    BlockAll,
    RowKeyRegex(Bytes),
    /// Keep each row with this probability (0 < p < 1, exclusive).
    RowSample(f64),
    FamilyNameRegex(String),
    ColumnQualifierRegex(Bytes),
    ColumnRange(ColumnRange),
    TimestampRange(TimestampRange),
    ValueRegex(Bytes),
    ValueRange(ValueRange),
    /// Skip the first N cells of the row.
    CellsPerRowOffset(u32),
    /// Keep only the first N cells of the row (N > 0).
    CellsPerRowLimit(u32),
    /// Keep only the N newest cells of each column (N > 0).
    CellsPerColumnLimit(u32),
    /// Replace each value with the empty string.
    StripValue,
    /// Add a label to each cell: `[a-z0-9-]{1,15}`.
    ApplyLabel(String),
}

impl RowFilter {
    /// A chain of filters, flattening the one-element case.
    pub fn chain(filters: Vec<RowFilter>) -> RowFilter {
        match filters.len() {
            1 => filters.into_iter().next().unwrap_or(RowFilter::PassAll),
            _ => RowFilter::Chain(filters),
        }
    }

    /// An interleave of filters, flattening the one-element case.
    pub fn interleave(filters: Vec<RowFilter>) -> RowFilter {
        match filters.len() {
            1 => filters.into_iter().next().unwrap_or(RowFilter::BlockAll),
            _ => RowFilter::Interleave(filters),
        }
    }

    /// Cells whose qualifier is exactly `qualifier` (regex-escaped).
    pub fn exact_qualifier(qualifier: &[u8]) -> RowFilter {
        RowFilter::ColumnQualifierRegex(Bytes::from(escape_regex_bytes(qualifier)))
    }

    /// Cells of exactly the family `family` (regex-escaped).
    pub fn exact_family(family: &str) -> RowFilter {
        RowFilter::FamilyNameRegex(regex::escape(family))
    }
}

/// Escape bytes so an RE2 regex matches them literally. Non-ASCII and
/// non-printable bytes are written as `\xNN`.
pub fn escape_regex_bytes(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len() + 8);
    for &b in raw {
        if b.is_ascii_alphanumeric() || b == b'_' {
            out.push(b);
        } else if b.is_ascii_graphic() || b == b' ' {
            out.push(b'\\');
            out.push(b);
        } else {
            out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
        }
    }
    out
}
