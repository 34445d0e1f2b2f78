//! Cells and rows as a read returns them.

use bytes::Bytes;

/// Timestamp value asking the server to stamp a cell with its own clock
/// (Bigtable's `-1`).
pub const SERVER_TIME: i64 = -1;

/// One cell of a row: `(family, qualifier, timestamp) -> value`, plus the
/// labels a filter may have applied to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub family: String,
    pub qualifier: Bytes,
    /// Microseconds since the Unix epoch, always a multiple of 1000.
    pub timestamp_micros: i64,
    pub value: Bytes,
    /// Labels added by `ApplyLabel` filters (empty for plain reads).
    pub labels: Vec<String>,
}

impl Cell {
    /// A cell without labels.
    pub fn new(
        family: impl Into<String>,
        qualifier: impl Into<Bytes>,
        timestamp_micros: i64,
        value: impl Into<Bytes>,
    ) -> Cell {
        Cell {
            family: family.into(),
            qualifier: qualifier.into(),
            timestamp_micros,
            value: value.into(),
            labels: Vec::new(),
        }
    }

    /// Canonical order of cells within a row: family name ascending,
    /// qualifier ascending, timestamp descending (newest first).
    pub fn canonical_cmp(&self, other: &Cell) -> std::cmp::Ordering {
        self.family
            .cmp(&other.family)
            .then_with(|| self.qualifier.cmp(&other.qualifier))
            .then_with(|| other.timestamp_micros.cmp(&self.timestamp_micros))
    }

    /// True when both cells are in the same column.
    pub fn same_column(&self, other: &Cell) -> bool {
        self.family == other.family && self.qualifier == other.qualifier
    }
}

/// A row as returned by a read: its key and its cells in canonical order
/// (family, then qualifier ascending, then timestamp descending), except that
/// an `Interleave` filter may repeat cells as Bigtable does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub key: Bytes,
    pub cells: Vec<Cell>,
}

impl Row {
    /// The newest cell of a column, if present.
    pub fn latest(&self, family: &str, qualifier: &[u8]) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| c.family == family && c.qualifier.as_ref() == qualifier)
    }
}

/// A split point returned by `sample_row_keys`: rows sorting before
/// `row_key` take approximately `offset_bytes` of storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleRowKey {
    pub row_key: Bytes,
    pub offset_bytes: i64,
}

/// A cell borrowed from a store's buffers, as [`crate::Table::visit_rows`]
/// shows it (no labels).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellRef<'a> {
    pub family: &'a str,
    pub qualifier: &'a [u8],
    /// Microseconds since the Unix epoch, always a multiple of 1000.
    pub timestamp_micros: i64,
    pub value: &'a [u8],
}

impl<'a> From<&'a Cell> for CellRef<'a> {
    fn from(cell: &'a Cell) -> CellRef<'a> {
        CellRef {
            family: &cell.family,
            qualifier: &cell.qualifier,
            timestamp_micros: cell.timestamp_micros,
            value: &cell.value,
        }
    }
}

/// A row borrowed from a store's buffers: its key and its cells in the
/// order [`Row::cells`] would hold them.
#[derive(Debug, Clone, Copy)]
pub struct RowRef<'a> {
    pub key: &'a [u8],
    pub cells: &'a [CellRef<'a>],
}

/// An empty vector of cell views of any lifetime, keeping `cells`'s
/// allocation: a scan reuses one buffer for the views of every row.
pub fn recycle_cells<'b>(mut cells: Vec<CellRef<'_>>) -> Vec<CellRef<'b>> {
    cells.clear();
    // In-place collect of an empty vector of the same layout: no element
    // is produced and the allocation is kept.
    cells.into_iter().map(|_| unreachable!()).collect()
}
