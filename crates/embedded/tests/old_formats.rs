//! Stores written before the current formats still read. The store in
//! `fixtures/old_formats/store/` was written by the code of commit
//! 1dd53e1^ (rows in format 2, adds as merge operands of tag 2; see the
//! fixture's README): every read of it, before and after the current code
//! compacts it and writes on top of it, must equal the reference model's
//! after the same writes.

use std::path::Path;

use affinity_embedded::{EmbeddedOptions, EmbeddedStore};
use affinity_model::{
    Bytes, GcRule, MemoryStore, Mutation, ReadRowsRequest, RowFilter, RowMutations, RowSet, Store,
    Table, TableSpec,
};

include!("fixtures/old_formats/steps.rs");

/// A copy of the fixture store (opening a store writes to it).
fn fixture_copy() -> tempfile::TempDir {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/old_formats/store");
    let dir = tempfile::tempdir().expect("temporary directory");
    for file in std::fs::read_dir(&from).expect("the fixture store") {
        let file = file.expect("a fixture file");
        std::fs::copy(file.path(), dir.path().join(file.file_name())).expect("copies");
    }
    dir
}

fn open(dir: &tempfile::TempDir) -> EmbeddedStore {
    let mut options = EmbeddedOptions::default();
    options.gc_interval = None;
    EmbeddedStore::open_with(dir.path(), options).expect("opens the old store")
}

/// The reference model after the fixture's writes and `more`.
fn reference(more: &[Vec<RowMutations>]) -> MemoryStore {
    let store = MemoryStore::new();
    store.create_table(TABLE, &spec()).expect("creates");
    let table = store.open_table(TABLE).expect("opens");
    let (before, after) = writes();
    for request in before.iter().chain(&after).chain(more) {
        write(table.as_ref(), request);
    }
    store
}

fn write(table: &dyn Table, request: &[RowMutations]) {
    for status in table.mutate_rows(request).expect("writes") {
        status.expect("every entry writes");
    }
}

/// Every cell `request` returns: row key, family, qualifier, timestamp,
/// value; read both ways (`read_rows` and `visit_rows`, which must agree).
fn cells(table: &dyn Table, request: &ReadRowsRequest) -> Vec<(Bytes, String, Bytes, i64, Bytes)> {
    let mut read = Vec::new();
    for row in table.read_rows(request).expect("reads") {
        let row = row.expect("a row");
        for c in row.cells {
            read.push((
                row.key.clone(),
                c.family,
                c.qualifier,
                c.timestamp_micros,
                c.value,
            ));
        }
    }
    let mut visited = Vec::new();
    table
        .visit_rows(request, &mut |row| {
            for c in row.cells {
                visited.push((
                    Bytes::copy_from_slice(row.key),
                    c.family.to_string(),
                    Bytes::copy_from_slice(c.qualifier),
                    c.timestamp_micros,
                    Bytes::copy_from_slice(c.value),
                ));
            }
            Ok(true)
        })
        .expect("visits");
    assert_eq!(read, visited, "read_rows and visit_rows agree");
    read
}

/// Reads of every row, of single rows, and through filters that take
/// the decoder's three paths (no prefilter, one test per family, shapes).
fn requests() -> Vec<ReadRowsRequest> {
    vec![
        ReadRowsRequest::all(),
        ReadRowsRequest::all().reversed(true),
        ReadRowsRequest::new(RowSet::from_keys(["row-a", "row-b", "row-c", "row-e"])),
        ReadRowsRequest::all().with_filter(RowFilter::exact_family("n")),
        ReadRowsRequest::all().with_filter(RowFilter::chain(vec![
            RowFilter::exact_family("p"),
            RowFilter::exact_qualifier(b"view,Viewed,color"),
        ])),
        ReadRowsRequest::all().with_filter(RowFilter::ColumnQualifierRegex(Bytes::from_static(
            b"view,Viewed,.*",
        ))),
    ]
}

fn assert_reads_as(store: &EmbeddedStore, reference: &MemoryStore, when: &str) {
    let table = store.open_table(TABLE).expect("opens");
    let expected = reference.open_table(TABLE).expect("opens");
    for request in requests() {
        assert_eq!(
            cells(table.as_ref(), &request),
            cells(expected.as_ref(), &request),
            "{when}: {request:?}"
        );
    }
}

/// The sum an aggregate cell holds.
fn sum(table: &dyn Table, key: &str, family: &str, qualifier: &[u8]) -> Option<i64> {
    let request = ReadRowsRequest::new(RowSet::from_keys([key.to_string()]));
    cells(table, &request)
        .into_iter()
        .find(|c| c.1 == family && c.2 == qualifier)
        .and_then(|c| Some(i64::from_be_bytes(c.4.as_ref().try_into().ok()?)))
}

#[test]
fn rows_and_operands_in_old_formats_read_as_written() {
    let dir = fixture_copy();
    let store = open(&dir);
    let reference = reference(&[]);
    assert_reads_as(&store, &reference, "as the old code left it");
    let table = store.open_table(TABLE).expect("opens");
    // Values the writes above make, so an empty read cannot pass.
    assert_eq!(cells(table.as_ref(), &ReadRowsRequest::all()).len(), 56);
    assert_eq!(
        sum(table.as_ref(), "row-b", "n", b"view,Viewed,brand,Apple"),
        Some(2)
    );
    assert_eq!(sum(table.as_ref(), "row-e", "n", b"count"), Some(6));

    // The merge operator and the compaction filter rewrite every row.
    store.compact().expect("compacts");
    assert_reads_as(&store, &reference, "compacted");
}

#[test]
fn old_rows_take_new_writes_and_survive_reopen() {
    let dir = fixture_copy();
    // Written by the current code on top of old rows: read-modify-write of
    // a format-2 row, blind adds onto a format-2 row and onto old
    // operands, and a row replaced whole.
    let more = vec![
        vec![
            entry("row-a", vec![set("e", "brand", 5000, "Apple III")]),
            entry("row-b", vec![add("n", "view,Viewed,brand,Apple", DAY, 10)]),
            entry("row-c", vec![add("n", "count", 0, 3)]),
        ],
        vec![entry(
            "row-g",
            vec![Mutation::DeleteFromRow, set("p", "z", 1000, "new")],
        )],
    ];
    let reference = reference(&more);
    {
        let store = open(&dir);
        let table = store.open_table(TABLE).expect("opens");
        for request in &more {
            write(table.as_ref(), request);
        }
        assert_reads_as(&store, &reference, "written on");
    }
    let store = open(&dir);
    assert_reads_as(&store, &reference, "reopened");
    store.compact().expect("compacts");
    assert_reads_as(&store, &reference, "compacted");
}
