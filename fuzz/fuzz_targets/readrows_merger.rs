//! The `ReadRows` chunk merger (`affinity_bigtable::merger::RowMerger`) on
//! chunk sequences as a faulty server could send them: rows or an error,
//! never a panic; every row returned is non-empty and in key order after
//! the last one. And a round trip: rows the input describes, sent as
//! chunks (values split, fields inherited, a row reset and sent again),
//! come back exactly.
#![no_main]

use affinity_bigtable::merger::RowMerger;
use affinity_bigtable::proto::read_rows_response::cell_chunk::RowStatus;
use affinity_bigtable::proto::read_rows_response::CellChunk;
use affinity_fuzz::Input;
use affinity_model::{Bytes, Cell, Row};
use libfuzzer_sys::fuzz_target;

const FAMILIES: [&str; 3] = ["a", "b", "cf"];

/// Any chunk: each field present or not, as the input says.
fn any_chunk(input: &mut Input<'_>) -> CellChunk {
    let fields = input.byte();
    let status = input.byte();
    let mut chunk = CellChunk::default();
    if fields & 1 != 0 {
        chunk.row_key = input.chunk().to_vec().into();
    }
    if fields & 2 != 0 {
        chunk.family_name = Some(FAMILIES[usize::from(input.byte()) % 3].to_string());
    }
    if fields & 4 != 0 {
        chunk.qualifier = Some(input.chunk().to_vec());
    }
    if fields & 8 != 0 {
        chunk.timestamp_micros = input.i64();
    }
    if fields & 16 != 0 {
        chunk.labels = vec![input.text()];
    }
    if fields & 32 != 0 {
        chunk.value = input.chunk().to_vec().into();
    }
    if fields & 64 != 0 {
        chunk.value_size = i32::from(input.u16() as i16);
    }
    chunk.row_status = match status % 5 {
        0 => None,
        1 => Some(RowStatus::CommitRow(true)),
        2 => Some(RowStatus::ResetRow(true)),
        3 => Some(RowStatus::CommitRow(false)),
        _ => Some(RowStatus::ResetRow(false)),
    };
    chunk
}

fn arbitrary_stream(input: &mut Input<'_>, reversed: bool) {
    let mut merger = RowMerger::new(reversed);
    let mut last: Option<Bytes> = None;
    while !input.is_empty() {
        if input.byte() == 0xff {
            let key = Bytes::from(input.chunk().to_vec());
            let between = merger.is_between_rows();
            merger.note_scanned(key.clone());
            if between && !key.is_empty() {
                last = Some(key);
            }
            continue;
        }
        match merger.push(any_chunk(input)) {
            Err(_) => return,
            Ok(None) => {}
            Ok(Some(row)) => {
                assert!(!row.key.is_empty(), "a row without a key");
                assert!(!row.cells.is_empty(), "a row without cells");
                if let Some(last) = &last {
                    let in_order = if reversed {
                        row.key < *last
                    } else {
                        row.key > *last
                    };
                    assert!(in_order, "row {:?} out of order after {last:?}", row.key);
                }
                assert_eq!(merger.last_key(), Some(&row.key));
                last = Some(row.key);
            }
        }
    }
    assert_eq!(merger.finish().is_ok(), merger.is_between_rows());
}

/// Rows described by the input, in key order.
fn rows(input: &mut Input<'_>, reversed: bool) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    for _ in 0..input.byte() % 5 {
        let key = Bytes::from(input.chunk().to_vec());
        let cells = (0..1 + input.byte() % 4)
            .map(|_| Cell {
                family: FAMILIES[usize::from(input.byte()) % 3].to_string(),
                qualifier: Bytes::from(input.chunk().to_vec()),
                timestamp_micros: input.i64(),
                value: Bytes::from(input.chunk().to_vec()),
                labels: match input.byte() % 2 {
                    0 => Vec::new(),
                    _ => vec![input.text()],
                },
            })
            .collect();
        rows.push(Row { key, cells });
    }
    rows.retain(|r| !r.key.is_empty());
    rows.sort_by(|a, b| a.key.cmp(&b.key));
    rows.dedup_by(|a, b| a.key == b.key);
    if reversed {
        rows.reverse();
    }
    rows
}

/// A row as chunks: a cell's family and qualifier left out when they
/// repeat the previous cell's, values split in `pieces`.
fn chunks_of(row: &Row, pieces: usize, out: &mut Vec<CellChunk>) {
    let mut previous: Option<&Cell> = None;
    for cell in &row.cells {
        let mut first = CellChunk {
            timestamp_micros: cell.timestamp_micros,
            labels: cell.labels.clone(),
            ..CellChunk::default()
        };
        if previous.is_none() {
            first.row_key = row.key.to_vec().into();
        }
        if previous.is_none_or(|p| p.family != cell.family) {
            first.family_name = Some(cell.family.clone());
        }
        if previous.is_none_or(|p| p.family != cell.family || p.qualifier != cell.qualifier) {
            first.qualifier = Some(cell.qualifier.to_vec());
        }
        let value = &cell.value;
        let n = pieces.clamp(1, value.len().max(1));
        let size = (value.len() / n).max(1);
        let mut at = 0;
        let mut chunk = first;
        for i in 0..n {
            let end = if i + 1 == n { value.len() } else { at + size };
            chunk.value = value[at..end].to_vec().into();
            chunk.value_size = if i + 1 == n { 0 } else { value.len() as i32 };
            at = end;
            out.push(std::mem::take(&mut chunk));
        }
        previous = Some(cell);
    }
    if let Some(last) = out.last_mut() {
        last.row_status = Some(RowStatus::CommitRow(true));
    }
}

fn round_trip(input: &mut Input<'_>, reversed: bool) {
    let pieces = usize::from(input.byte() % 4) + 1;
    let reset_at = input.byte();
    let rows = rows(input, reversed);
    let mut chunks = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        if usize::from(reset_at) == i {
            // A row begun, then reset by the server: it is sent again.
            let start = chunks.len();
            chunks_of(row, pieces, &mut chunks);
            chunks.truncate(start + 1);
            chunks[start].row_status = None;
            chunks.push(CellChunk {
                row_status: Some(RowStatus::ResetRow(true)),
                ..CellChunk::default()
            });
        }
        chunks_of(row, pieces, &mut chunks);
    }
    let mut merger = RowMerger::new(reversed);
    let mut got = Vec::new();
    for chunk in chunks {
        if let Some(row) = merger.push(chunk).expect("a well-formed stream merges") {
            got.push(row);
        }
    }
    merger
        .finish()
        .expect("a well-formed stream ends between rows");
    assert_eq!(got, rows, "rows came back differently");
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let mode = input.byte();
    let reversed = mode & 2 != 0;
    match mode % 2 {
        0 => arbitrary_stream(&mut input, reversed),
        _ => round_trip(&mut input, reversed),
    }
});
