//! Cases for `read_rows` (row sets, bounds, limits, reversed), `read_row`
//! and `sample_row_keys`.

use std::ops::Bound;

use bytes::Bytes;

use super::util::*;
use super::{Ctx, TestTable};
use crate::error::Error;
use crate::filter::RowFilter;
use crate::rowset::{ReadRowsRequest, RowRange, RowSet};
use crate::table_spec::GcRule;

const KEYS: [&str; 6] = ["a", "b", "b\0", "c", "d", "e"];

fn rows_table(ctx: &Ctx) -> TestTable {
    let t = ctx.table(&[("f", GcRule::None)]);
    for key in KEYS {
        write(&t, key, &[set("f", "q", 1, key)]);
    }
    t
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn range(start: Bound<&str>, end: Bound<&str>) -> RowRange {
    RowRange {
        start: start.map(b),
        end: end.map(b),
    }
}

fn read_keys(t: &TestTable, request: ReadRowsRequest) -> Vec<String> {
    keys(&read(t, &request))
}

fn mixed_set() -> RowSet {
    RowSet {
        keys: vec![b("d"), b("b"), b("zz")],
        ranges: vec![
            RowRange::closed_open("a", "c"),
            RowRange::closed_open("b", "e"),
        ],
    }
}

pub fn read_rows_keys_and_ranges(ctx: &Ctx) {
    let t = rows_table(ctx);
    assert_eq!(
        read_keys(&t, ReadRowsRequest::new(mixed_set())),
        ["a", "b", "b\\x00", "c", "d"]
    );
    assert_eq!(
        read_keys(&t, ReadRowsRequest::new(RowSet::from_keys(["e", "a", "e"]))),
        ["a", "e"]
    );
    assert_eq!(read_keys(&t, ReadRowsRequest::all()).len(), KEYS.len());
}

pub fn read_rows_open_and_closed_bounds(ctx: &Ctx) {
    let t = rows_table(ctx);
    use Bound::{Excluded as X, Included as I, Unbounded as U};
    let cases: [(RowRange, &[&str]); 7] = [
        (range(X("b"), I("d")), &["b\\x00", "c", "d"]),
        (range(I("b"), I("d")), &["b", "b\\x00", "c", "d"]),
        (range(X("b"), X("d")), &["b\\x00", "c"]),
        (range(I("b"), X("d")), &["b", "b\\x00", "c"]),
        (range(U, X("c")), &["a", "b", "b\\x00"]),
        (range(I("d"), U), &["d", "e"]),
        (RowRange::prefix("b"), &["b", "b\\x00"]),
    ];
    for (r, expected) in cases {
        let what = format!("{r:?}");
        let got = read_keys(&t, ReadRowsRequest::new(RowSet::from_range(r)));
        assert_eq!(got, strings(expected), "{what}");
    }
}

pub fn read_rows_limit(ctx: &Ctx) {
    let t = rows_table(ctx);
    assert_eq!(
        read_keys(&t, ReadRowsRequest::all().with_limit(2)),
        ["a", "b"]
    );
    assert_eq!(
        read_keys(&t, ReadRowsRequest::all().with_limit(100)).len(),
        KEYS.len()
    );
    // The limit counts rows the filter lets through.
    let filtered = ReadRowsRequest::all()
        .with_filter(RowFilter::ValueRegex(b("[ce]")))
        .with_limit(1);
    assert_eq!(read_keys(&t, filtered), ["c"]);
}

pub fn read_rows_reversed(ctx: &Ctx) {
    let t = rows_table(ctx);
    assert_eq!(
        read_keys(&t, ReadRowsRequest::all().reversed(true)),
        ["e", "d", "c", "b\\x00", "b", "a"]
    );
    let r = ReadRowsRequest::new(RowSet::from_range(RowRange::closed_open("b", "d")));
    assert_eq!(read_keys(&t, r.reversed(true)), ["c", "b\\x00", "b"]);
}

pub fn read_rows_reversed_with_limit(ctx: &Ctx) {
    let t = rows_table(ctx);
    assert_eq!(
        read_keys(&t, ReadRowsRequest::all().reversed(true).with_limit(2)),
        ["e", "d"]
    );
    assert_eq!(
        read_keys(
            &t,
            ReadRowsRequest::new(mixed_set())
                .reversed(true)
                .with_limit(3)
        ),
        ["d", "c", "b\\x00"]
    );
}

pub fn read_rows_inverted_range_is_rejected(ctx: &Ctx) {
    let t = rows_table(ctx);
    let request = ReadRowsRequest::new(RowSet::from_range(RowRange::closed_open("d", "b")));
    expect_err(try_read(t.as_ref(), &request), "inverted range", |e| {
        matches!(e, Error::InvalidRowRange { .. })
    });
}

pub fn read_row_single(ctx: &Ctx) {
    let t = rows_table(ctx);
    let row = ok(t.read_row(b"c", None), "read_row(c)").expect("row c exists");
    assert_eq!(render(&[row]), ["c/f:q@1=c"]);
    assert!(ok(t.read_row(b"zz", None), "read_row(zz)").is_none());
    let none = RowFilter::BlockAll;
    assert!(ok(t.read_row(b"c", Some(&none)), "read_row(c, block)").is_none());
}

pub fn sample_row_keys_shape(ctx: &Ctx) {
    let t = ctx.table(&[("f", GcRule::None)]);
    let empty = ok(t.sample_row_keys(), "sample_row_keys on an empty table");
    assert_eq!(
        empty.last().map(|s| s.row_key.is_empty()),
        Some(true),
        "{empty:?}"
    );
    let value = vec![b'x'; 4096];
    for i in 0..200u32 {
        let key = format!("row{i:04}");
        ok(
            t.mutate_row(key.as_bytes(), &[set_raw("f", b"q", 1, &value)]),
            "mutate_row",
        );
    }
    let samples = ok(t.sample_row_keys(), "sample_row_keys");
    let (last, splits) = samples.split_last().expect("at least one sample");
    assert!(last.row_key.is_empty(), "last sample must be the empty key");
    for s in splits {
        assert!(!s.row_key.is_empty(), "only the last sample may be empty");
    }
    for pair in splits.windows(2) {
        assert!(
            pair[0].row_key < pair[1].row_key,
            "keys must ascend: {samples:?}"
        );
    }
    for pair in samples.windows(2) {
        assert!(
            pair[0].offset_bytes <= pair[1].offset_bytes,
            "offsets must not decrease: {samples:?}"
        );
    }
}
