//! The official ReadRows conformance vectors (testdata/bigtable/
//! readrows.json, from googleapis/conformance-tests): each vector's chunks go
//! through the row merger and must give exactly its expected cells, or an
//! error where it expects one.

use std::path::PathBuf;

use affinity_bigtable::merger::RowMerger;
use affinity_bigtable::proto::read_rows_response::{cell_chunk::RowStatus, CellChunk};
use base64::Engine as _;
use bytes::Bytes;
use serde_json::Value;

fn vectors_path() -> PathBuf {
    affinity_testdata::file("bigtable/readrows.json")
}

fn b64(v: &Value) -> Bytes {
    let text = v.as_str().unwrap_or_default();
    Bytes::from(
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap_or_else(|e| panic!("bad base64 {text:?}: {e}")),
    )
}

fn chunk(v: &Value) -> CellChunk {
    let row_status = if v["resetRow"].as_bool() == Some(true) {
        Some(RowStatus::ResetRow(true))
    } else if v["commitRow"].as_bool() == Some(true) {
        Some(RowStatus::CommitRow(true))
    } else {
        None
    };
    CellChunk {
        row_key: b64(&v["rowKey"]),
        family_name: v["familyName"].as_str().map(str::to_string),
        qualifier: v.get("qualifier").map(|q| b64(q).to_vec()),
        timestamp_micros: v["timestampMicros"]
            .as_str()
            .map_or(0, |s| s.parse().expect("timestamp")),
        labels: v["labels"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|l| l.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        value: b64(&v["value"]),
        value_size: v["valueSize"].as_i64().unwrap_or(0) as i32,
        row_status,
    }
}

/// One expected or actual result line: a cell, or an error.
#[derive(Debug, PartialEq)]
enum Line {
    Cell {
        key: String,
        family: String,
        qualifier: String,
        ts: i64,
        value: String,
        label: String,
    },
    Error,
}

fn expected(v: &Value) -> Line {
    if v["error"].as_bool() == Some(true) {
        return Line::Error;
    }
    let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
    Line::Cell {
        key: s("rowKey"),
        family: s("familyName"),
        qualifier: s("qualifier"),
        ts: v["timestampMicros"]
            .as_str()
            .map_or(0, |t| t.parse().expect("timestamp")),
        value: s("value"),
        label: s("label"),
    }
}

fn run(chunks: &[Value]) -> Vec<Line> {
    let mut merger = RowMerger::new(false);
    let mut out = Vec::new();
    for c in chunks {
        match merger.push(chunk(c)) {
            Ok(Some(row)) => {
                for cell in row.cells {
                    out.push(Line::Cell {
                        key: String::from_utf8_lossy(&row.key).into_owned(),
                        family: cell.family,
                        qualifier: String::from_utf8_lossy(&cell.qualifier).into_owned(),
                        ts: cell.timestamp_micros,
                        value: String::from_utf8_lossy(&cell.value).into_owned(),
                        label: cell.labels.join(","),
                    });
                }
            }
            Ok(None) => {}
            Err(_) => {
                out.push(Line::Error);
                return out;
            }
        }
    }
    if merger.finish().is_err() {
        out.push(Line::Error);
    }
    out
}

#[test]
fn all_48_official_readrows_vectors_pass() {
    let text = std::fs::read_to_string(vectors_path()).expect("read readrows.json");
    let json: Value = serde_json::from_str(&text).expect("parse readrows.json");
    let tests = json["readRowsTests"].as_array().expect("readRowsTests");
    assert_eq!(tests.len(), 48);
    let mut failures = Vec::new();
    for test in tests {
        let name = test["description"].as_str().unwrap_or("?");
        let chunks = test["chunks"].as_array().cloned().unwrap_or_default();
        let want: Vec<Line> = test["results"]
            .as_array()
            .map(|r| r.iter().map(expected).collect())
            .unwrap_or_default();
        let got = run(&chunks);
        if got != want {
            failures.push(format!("{name}:\n  want {want:?}\n  got  {got:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} vectors failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
