//! Rebuilding rows from `ReadRows` cell chunks.
//!
//! The server streams a row as chunks: the first names the row key, family
//! and qualifier; later ones inherit what they leave out; a cell value may be
//! split over several chunks (`value_size` > 0 on all but the last); the last
//! chunk of a row says `commit_row`, and `reset_row` throws away the row in
//! progress. [`RowMerger`] is that state machine, strict about every rule the
//! official conformance vectors pin (`tests/readrows_vectors.rs`).

use affinity_model::{Cell, Error, Result, Row};
use bytes::{Bytes, BytesMut};
use googleapis_tonic_google_bigtable_v2::google::bigtable::v2::read_rows_response::{
    cell_chunk::RowStatus, CellChunk,
};

/// Largest buffer reserved up front for a split cell, whatever `value_size`
/// claims (the value still grows past it if the server sends more).
const MAX_RESERVE: usize = affinity_model::limits::MAX_VALUE_BYTES + 1024;

/// Rows out of cell chunks. Feed chunks in stream order with
/// [`RowMerger::push`]; call [`RowMerger::finish`] at the end of the stream.
#[derive(Debug)]
pub struct RowMerger {
    reversed: bool,
    /// Key of the last row committed (or scanned), for order checks.
    last_key: Option<Bytes>,
    row: Option<RowInProgress>,
}

#[derive(Debug)]
struct RowInProgress {
    key: Bytes,
    cells: Vec<Cell>,
    family: String,
    qualifier: Bytes,
    /// A cell whose value is split over chunks, when one is open.
    split: Option<SplitCell>,
}

#[derive(Debug)]
struct SplitCell {
    timestamp_micros: i64,
    labels: Vec<String>,
    value: BytesMut,
}

fn invalid(reason: impl std::fmt::Display) -> Error {
    Error::Internal(format!("invalid ReadRows response: {reason}"))
}

impl RowMerger {
    /// A merger for a forward (`reversed == false`) or reversed read.
    pub fn new(reversed: bool) -> RowMerger {
        RowMerger {
            reversed,
            last_key: None,
            row: None,
        }
    }

    /// Key of the last row returned (or reported scanned): a retry resumes
    /// after it.
    pub fn last_key(&self) -> Option<&Bytes> {
        self.last_key.as_ref()
    }

    /// The server scanned up to `key` without a row to return: remember it
    /// as the resume point. Ignored in the middle of a row.
    pub fn note_scanned(&mut self, key: Bytes) {
        if self.row.is_none() && !key.is_empty() {
            self.last_key = Some(key);
        }
    }

    /// Consume one chunk; returns the row it completes, if any.
    pub fn push(&mut self, chunk: CellChunk) -> Result<Option<Row>> {
        let reset = matches!(chunk.row_status, Some(RowStatus::ResetRow(true)));
        let commit = matches!(chunk.row_status, Some(RowStatus::CommitRow(true)));
        let has_key_part = !chunk.row_key.is_empty()
            || chunk.family_name.is_some()
            || chunk.qualifier.is_some()
            || chunk.timestamp_micros != 0;
        if reset
            && (has_key_part
                || !chunk.value.is_empty()
                || chunk.value_size != 0
                || !chunk.labels.is_empty())
        {
            return Err(invalid("reset_row with other fields set"));
        }
        if commit && chunk.value_size > 0 {
            return Err(invalid("commit_row in the middle of a split cell"));
        }

        let Some(mut row) = self.row.take() else {
            if reset {
                return Err(invalid("reset_row between rows"));
            }
            let row = self.start_row(chunk)?;
            return Ok(self.finish_chunk(row, commit));
        };
        if reset {
            return Ok(None);
        }
        if row.split.is_some() {
            if has_key_part {
                return Err(invalid("cell key fields in the middle of a split cell"));
            }
        } else {
            if !chunk.row_key.is_empty() && chunk.row_key != row.key {
                return Err(invalid(format!(
                    "new row key {:?} before row {:?} was committed",
                    chunk.row_key, row.key
                )));
            }
            if chunk.family_name.is_some() && chunk.qualifier.is_none() {
                return Err(invalid("family name without a qualifier"));
            }
            if let Some(family) = chunk.family_name {
                row.family = family;
            }
            if let Some(qualifier) = chunk.qualifier {
                row.qualifier = Bytes::from(qualifier);
            }
        }
        row.take_value(
            chunk.timestamp_micros,
            chunk.labels,
            chunk.value,
            chunk.value_size,
        );
        Ok(self.finish_chunk(row, commit))
    }

    /// Validate the first chunk of a row and open the row.
    fn start_row(&self, chunk: CellChunk) -> Result<RowInProgress> {
        let (Some(family), Some(qualifier)) = (chunk.family_name, chunk.qualifier) else {
            return Err(invalid("a new row must name its key, family and qualifier"));
        };
        if chunk.row_key.is_empty() {
            return Err(invalid("a new row must name its key, family and qualifier"));
        }
        if let Some(last) = &self.last_key {
            let in_order = if self.reversed {
                chunk.row_key < *last
            } else {
                chunk.row_key > *last
            };
            if !in_order {
                return Err(invalid(format!(
                    "row key {:?} out of order after {:?}",
                    chunk.row_key, last
                )));
            }
        }
        let mut row = RowInProgress {
            key: chunk.row_key,
            cells: Vec::new(),
            family,
            qualifier: Bytes::from(qualifier),
            split: None,
        };
        row.take_value(
            chunk.timestamp_micros,
            chunk.labels,
            chunk.value,
            chunk.value_size,
        );
        Ok(row)
    }

    /// Commit the row if the chunk said so, else keep it in progress.
    fn finish_chunk(&mut self, row: RowInProgress, commit: bool) -> Option<Row> {
        if !commit {
            self.row = Some(row);
            return None;
        }
        self.last_key = Some(row.key.clone());
        Some(Row {
            key: row.key,
            cells: row.cells,
        })
    }

    /// End of stream: an error when a row was left uncommitted.
    pub fn finish(&self) -> Result<()> {
        match &self.row {
            Some(row) => Err(invalid(format!(
                "stream ended in the middle of row {:?}",
                row.key
            ))),
            None => Ok(()),
        }
    }

    /// True when no row is in progress (a stream may end or restart here).
    pub fn is_between_rows(&self) -> bool {
        self.row.is_none()
    }
}

impl RowInProgress {
    /// Add a chunk's value: a whole cell, a piece of a split cell, or its
    /// last piece.
    fn take_value(&mut self, timestamp: i64, labels: Vec<String>, value: Bytes, value_size: i32) {
        if value_size > 0 {
            let split = self.split.get_or_insert_with(|| SplitCell {
                timestamp_micros: timestamp,
                labels,
                value: BytesMut::with_capacity((value_size as usize).min(MAX_RESERVE)),
            });
            split.value.extend_from_slice(&value);
            return;
        }
        let (timestamp_micros, labels, value) = match self.split.take() {
            Some(mut split) => {
                split.value.extend_from_slice(&value);
                (split.timestamp_micros, split.labels, split.value.freeze())
            }
            None => (timestamp, labels, value),
        };
        self.cells.push(Cell {
            family: self.family.clone(),
            qualifier: self.qualifier.clone(),
            timestamp_micros,
            value,
            labels,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(key: &str, family: &str, qualifier: &str, ts: i64, value: &str) -> CellChunk {
        CellChunk {
            row_key: Bytes::copy_from_slice(key.as_bytes()),
            family_name: Some(family.to_string()),
            qualifier: Some(qualifier.as_bytes().to_vec()),
            timestamp_micros: ts,
            value: Bytes::copy_from_slice(value.as_bytes()),
            ..CellChunk::default()
        }
    }

    fn commit(mut c: CellChunk) -> CellChunk {
        c.row_status = Some(RowStatus::CommitRow(true));
        c
    }

    #[test]
    fn reversed_reads_require_descending_keys() {
        let mut m = RowMerger::new(true);
        assert!(m
            .push(commit(chunk("b", "f", "q", 1, "v")))
            .unwrap()
            .is_some());
        assert!(m
            .push(commit(chunk("a", "f", "q", 1, "v")))
            .unwrap()
            .is_some());
        assert!(m.push(commit(chunk("c", "f", "q", 1, "v"))).is_err());
    }

    #[test]
    fn scanned_keys_move_the_resume_point() {
        let mut m = RowMerger::new(false);
        m.note_scanned(Bytes::from_static(b"k"));
        assert_eq!(m.last_key().map(|k| k.as_ref()), Some(&b"k"[..]));
        assert!(m.push(commit(chunk("a", "f", "q", 1, "v"))).is_err());
    }

    #[test]
    fn split_cells_are_joined() {
        let mut m = RowMerger::new(false);
        let mut first = chunk("r", "f", "q", 5, "ab");
        first.value_size = 4;
        assert!(m.push(first).unwrap().is_none());
        assert!(!m.is_between_rows());
        let last = CellChunk {
            value: Bytes::from_static(b"cd"),
            row_status: Some(RowStatus::CommitRow(true)),
            ..CellChunk::default()
        };
        let row = m.push(last).unwrap().unwrap();
        assert_eq!(row.cells.len(), 1);
        assert_eq!(row.cells[0].value, "abcd");
        assert_eq!(row.cells[0].timestamp_micros, 5);
        assert!(m.finish().is_ok());
    }
}
