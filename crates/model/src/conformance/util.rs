//! Helpers shared by the conformance cases. They panic with a message naming
//! the operation, as test code does.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{Ctx, TestTable};
use crate::cell::{Cell, Row};
use crate::error::{Error, Result};
use crate::filter::RowFilter;
use crate::mutation::Mutation;
use crate::rowset::ReadRowsRequest;
use crate::store::Table;
use crate::table_spec::GcRule;

/// How long GC cases wait for a backend that collects in the background.
pub const GC_TIMEOUT: Duration = Duration::from_secs(10);

/// A `SetCell` at `ms` milliseconds.
pub fn set(family: &str, qualifier: &str, ms: i64, value: &str) -> Mutation {
    Mutation::set_cell(
        family.to_string(),
        Bytes::copy_from_slice(qualifier.as_bytes()),
        ms * 1000,
        Bytes::copy_from_slice(value.as_bytes()),
    )
}

/// A `SetCell` with raw bytes.
pub fn set_raw(family: &str, qualifier: &[u8], ms: i64, value: &[u8]) -> Mutation {
    Mutation::set_cell(
        family.to_string(),
        Bytes::copy_from_slice(qualifier),
        ms * 1000,
        Bytes::copy_from_slice(value),
    )
}

/// Unwrap a result, naming the operation on failure.
pub fn ok<T, E: Debug>(result: std::result::Result<T, E>, what: &str) -> T {
    match result {
        Ok(v) => v,
        Err(e) => panic!("{what} failed: {e:?}"),
    }
}

/// Apply mutations to a row, panicking on error.
pub fn write(table: &TestTable, key: &str, mutations: &[Mutation]) {
    ok(
        table.mutate_row(key.as_bytes(), mutations),
        &format!("mutate_row({key})"),
    );
}

/// Read rows, collecting the stream.
pub fn try_read(table: &dyn Table, request: &ReadRowsRequest) -> Result<Vec<Row>> {
    table.read_rows(request)?.collect()
}

/// Read rows, panicking on error.
pub fn read(table: &TestTable, request: &ReadRowsRequest) -> Vec<Row> {
    ok(try_read(table.as_ref(), request), "read_rows")
}

/// Read the whole table through `filter`.
pub fn read_filtered(table: &TestTable, filter: RowFilter) -> Vec<String> {
    render(&read(table, &ReadRowsRequest::all().with_filter(filter)))
}

/// Read the whole table.
pub fn read_all(table: &TestTable) -> Vec<String> {
    render(&read(table, &ReadRowsRequest::all()))
}

fn text(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

/// A cell as `key/family:qualifier@ms=value`, with `[label]`s appended.
pub fn render_cell(key: &[u8], cell: &Cell) -> String {
    let mut s = format!(
        "{}/{}:{}@{}={}",
        text(key),
        cell.family,
        text(&cell.qualifier),
        cell.timestamp_micros / 1000,
        text(&cell.value)
    );
    for l in &cell.labels {
        s.push_str(&format!("[{l}]"));
    }
    s
}

/// Every cell of `rows`, rendered in order.
pub fn render(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .flat_map(|r| r.cells.iter().map(move |c| render_cell(&r.key, c)))
        .collect()
}

/// Rendered cells, where copies of one cell (same column and timestamp, as
/// an interleave or a sink produces) are sorted among themselves, since
/// Bigtable leaves their mutual order unspecified.
pub fn render_unordered_copies(rows: &[Row]) -> Vec<String> {
    let mut out = Vec::new();
    for row in rows {
        let mut cells = row.cells.clone();
        cells.sort_by(|a, b| {
            a.canonical_cmp(b)
                .then_with(|| a.labels.cmp(&b.labels))
                .then_with(|| a.value.cmp(&b.value))
        });
        out.extend(cells.iter().map(|c| render_cell(&row.key, c)));
    }
    out
}

/// Keys of the rows, as text.
pub fn keys(rows: &[Row]) -> Vec<String> {
    rows.iter().map(|r| text(&r.key)).collect()
}

/// Assert `result` is the error `expected` describes.
#[track_caller]
pub fn expect_err<T: Debug>(result: Result<T>, what: &str, expected: fn(&Error) -> bool) {
    match result {
        Err(e) if expected(&e) => {}
        other => panic!("{what}: expected a specific error, got {other:?}"),
    }
}

/// The standard data of the filter and read cases, in families `a` and `b`:
///
/// ```text
/// r1: a:x@3=v3 a:x@2=v2 a:x@1=v1 a:y@1=y1 b:x@5=bx
/// r2: a:x@1=w1 b:z@2=bz
/// r3: b:z@4=zz
/// ```
pub fn fixture(ctx: &Ctx) -> TestTable {
    let t = ctx.table(&[("a", GcRule::None), ("b", GcRule::None)]);
    write(
        &t,
        "r1",
        &[
            set("a", "x", 1, "v1"),
            set("a", "x", 2, "v2"),
            set("a", "x", 3, "v3"),
            set("a", "y", 1, "y1"),
            set("b", "x", 5, "bx"),
        ],
    );
    write(&t, "r2", &[set("a", "x", 1, "w1"), set("b", "z", 2, "bz")]);
    write(&t, "r3", &[set("b", "z", 4, "zz")]);
    t
}

/// Every cell of [`fixture`], rendered.
pub const FIXTURE: [&str; 8] = [
    "r1/a:x@3=v3",
    "r1/a:x@2=v2",
    "r1/a:x@1=v1",
    "r1/a:y@1=y1",
    "r1/b:x@5=bx",
    "r2/a:x@1=w1",
    "r2/b:z@2=bz",
    "r3/b:z@4=zz",
];

/// Poll `check` until it returns `Ok`, or panic with its last error after
/// `timeout`.
pub fn eventually(timeout: Duration, mut check: impl FnMut() -> std::result::Result<(), String>) {
    let start = Instant::now();
    loop {
        match check() {
            Ok(()) => return,
            Err(e) if start.elapsed() >= timeout => {
                panic!("not true after {timeout:?}: {e}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// `expected` as owned strings, for comparisons.
pub fn strings(expected: &[&str]) -> Vec<String> {
    expected.iter().map(|s| s.to_string()).collect()
}
