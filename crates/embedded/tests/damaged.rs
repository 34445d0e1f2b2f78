//! A damaged store file gives a clear error naming the table and the row,
//! never a panic or a wrong answer: bytes written under a row through
//! RocksDB directly (a stored value, a merge operand) that do not decode
//! fail every read and write of that row, and leave the other rows
//! readable. The decoders themselves are fuzzed (`fuzz/`, docs/fuzzing.md).

use affinity_embedded::{EmbeddedOptions, EmbeddedStore};
use affinity_model::{
    Bytes, Error, GcRule, Mutation, ReadRowsRequest, RowFilter, RowSet, Store, TableSpec,
};

const TABLE: &str = "events";

fn open(dir: &tempfile::TempDir) -> EmbeddedStore {
    let mut options = EmbeddedOptions::default();
    options.gc_interval = None;
    EmbeddedStore::open_with(dir.path(), options).expect("opens")
}

/// A store with rows `alice` and `bob` in table `events`.
fn store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open(&dir);
    store
        .create_table(
            TABLE,
            &TableSpec::new()
                .with_family("e", GcRule::None)
                .with_sum_family("n", GcRule::None),
        )
        .expect("creates");
    let table = store.open_table(TABLE).expect("opens");
    for user in ["alice", "bob"] {
        table
            .mutate_row(user.as_bytes(), &[Mutation::set_cell("e", "q", 1000, "v")])
            .expect("writes");
    }
    dir
}

/// Write `value` under `key` in the table's column family, bypassing the
/// store, as a merge operand when `operand`.
fn damage(dir: &tempfile::TempDir, key: &[u8], value: &[u8], operand: bool) {
    let path = dir.path();
    let cfs = rocksdb::DB::list_cf(&rocksdb::Options::default(), path).expect("lists");
    // Any merge operator: RocksDB wants one to accept a merge operand.
    let descriptors = cfs.iter().map(|name| {
        let mut options = rocksdb::Options::default();
        options
            .set_merge_operator_associative("raw", |_, existing, _| existing.map(<[u8]>::to_vec));
        rocksdb::ColumnFamilyDescriptor::new(name, options)
    });
    let db = rocksdb::DB::open_cf_descriptors(&rocksdb::Options::default(), path, descriptors)
        .expect("opens RocksDB");
    let table_cf = cfs
        .iter()
        .find(|name| name.contains(TABLE))
        .expect("the table's column family");
    let cf = db.cf_handle(table_cf).expect("a handle");
    if operand {
        db.merge_cf(&cf, key, value).expect("merges");
    } else {
        db.put_cf(&cf, key, value).expect("puts");
    }
    db.flush_cf(&cf).expect("flushes");
}

fn assert_names_table_and_row(err: &Error, row: &str) {
    let text = err.to_string();
    assert!(matches!(err, Error::Storage(_)), "{err:?}");
    assert!(text.contains(&format!("table {TABLE:?}")), "{text}");
    assert!(text.contains(&format!("{row:?}")), "{text}");
}

/// Every way to read and write row `row` fails naming the table and the
/// row; `ok` still reads.
fn check(dir: &tempfile::TempDir, row: &str, ok: &str) {
    let store = open(dir);
    let table = store.open_table(TABLE).expect("opens");
    let one = ReadRowsRequest {
        rows: RowSet::from_keys([Bytes::copy_from_slice(row.as_bytes())]),
        ..ReadRowsRequest::all()
    };
    // A point read, a scan, the same with a filter, and a visit.
    let point = table
        .read_rows(&one)
        .expect("starts")
        .next()
        .expect("an item");
    assert_names_table_and_row(&point.expect_err("a damaged row"), row);
    let scanned: Vec<_> = table
        .read_rows(&ReadRowsRequest::all())
        .expect("starts")
        .collect();
    let err = scanned
        .iter()
        .find_map(|r| r.as_ref().err())
        .expect("the scan fails at the damaged row");
    assert_names_table_and_row(err, row);
    let filtered = ReadRowsRequest {
        filter: Some(RowFilter::exact_family("e")),
        ..ReadRowsRequest::all()
    };
    let scanned: Vec<_> = table.read_rows(&filtered).expect("starts").collect();
    assert!(
        scanned.iter().any(|r| r.is_err()),
        "a filtered scan reads the damaged row"
    );
    let err = table
        .visit_rows(&ReadRowsRequest::all(), &mut |_| Ok(true))
        .expect_err("a visit fails at the damaged row");
    assert_names_table_and_row(&err, row);
    // A write that reads the row first.
    let err = table
        .check_and_mutate_row(
            row.as_bytes(),
            None,
            &[Mutation::set_cell("e", "q", 2000, "w")],
            &[],
        )
        .expect_err("a write over a damaged row");
    assert_names_table_and_row(&err, row);
    // The other row reads as written.
    let other = ReadRowsRequest {
        rows: RowSet::from_keys([Bytes::copy_from_slice(ok.as_bytes())]),
        ..ReadRowsRequest::all()
    };
    let rows: Vec<_> = table
        .read_rows(&other)
        .expect("starts")
        .collect::<Result<_, _>>()
        .expect("the other row reads");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].cells[0].value.as_ref(), b"v");
}

#[test]
fn a_damaged_row_value_is_an_error_naming_the_table_and_row() {
    // The current format's tag, then a cell cut short.
    for value in [
        &[4u8, 0, 0, 5, b'q'][..],
        &[9u8, 1, 2, 3][..],
        &[4u8, 0xff, 0xff][..],
    ] {
        let dir = store();
        damage(&dir, b"alice", value, false);
        check(&dir, "alice", "bob");
    }
}

#[test]
fn a_damaged_merge_operand_is_an_error_naming_the_table_and_row() {
    // An operand tag with a group cut short, and an unknown tag.
    for operand in [&[3u8, 0, 0, 0][..], &[7u8, 1][..]] {
        let dir = store();
        damage(&dir, b"bob", operand, true);
        check(&dir, "bob", "alice");
    }
}

#[test]
fn a_damaged_operand_met_by_a_compaction_is_an_error_naming_the_table_and_row() {
    let dir = store();
    damage(&dir, b"bob", &[7u8, 1], true);
    let store = open(&dir);
    let table = store.open_table(TABLE).expect("opens");
    // The compaction merges bob's operand into its base and fails: RocksDB
    // then refuses every write, of any row, until the store is reopened.
    store.compact().expect("a compaction is asked for");
    let err = table
        .mutate_row(b"carol", &[Mutation::set_cell("e", "q", 3000, "v")])
        .expect_err("writes stop after a failed compaction");
    assert_names_table_and_row(&err, "bob");
    assert!(err.to_string().contains("compaction"), "{err}");
    // Reads of the other rows go on.
    let alice = table.read_row(b"alice", None).expect("alice reads");
    assert_eq!(alice.expect("alice is there").cells[0].value.as_ref(), b"v");
}
