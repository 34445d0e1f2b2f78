//! Cases for aggregate families (`FamilyType::SumInt64`) and `AddToCell`.

use std::ops::Bound;

use bytes::Bytes;

use super::util::*;
use super::Ctx;
use crate::apply::decode_i64;
use crate::cell::Row;
use crate::error::{Error, ErrorCode};
use crate::filter::{RowFilter, ValueRange};
use crate::mutation::{Mutation, RowMutations};
use crate::rowset::ReadRowsRequest;
use crate::table_spec::{FamilyType, GcRule, TableSpec};

/// Sum family `s`, standard family `a`.
fn sums(ctx: &Ctx, rule: GcRule) -> super::TestTable {
    ctx.table_with_spec(
        &TableSpec::new()
            .with_family("a", GcRule::None)
            .with_sum_family("s", rule),
    )
}

fn add(family: &str, qualifier: &str, ms: i64, input: i64) -> Mutation {
    Mutation::add_to_cell(
        family.to_string(),
        qualifier.as_bytes().to_vec(),
        ms * 1000,
        input,
    )
}

/// Cells as `key/family:qualifier@ms=N`, sums decoded.
fn render_sums(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .flat_map(|r| {
            r.cells.iter().map(move |c| {
                let value = match decode_i64(&c.value) {
                    Some(n) if c.family == "s" => n.to_string(),
                    _ => c.value.escape_ascii().to_string(),
                };
                format!(
                    "{}/{}:{}@{}={value}",
                    r.key.escape_ascii(),
                    c.family,
                    c.qualifier.escape_ascii(),
                    c.timestamp_micros / 1000
                )
            })
        })
        .collect()
}

fn read_sums(t: &super::TestTable) -> Vec<String> {
    render_sums(&read(t, &ReadRowsRequest::all()))
}

pub fn aggregate_add_to_cell_sums(ctx: &Ctx) {
    let t = sums(ctx, GcRule::None);
    write(&t, "k", &[add("s", "q", 1, 3), add("s", "q", 1, 4)]);
    write(&t, "k", &[add("s", "q", 2, 10), add("s", "r", 1, -5)]);
    write(&t, "k", &[add("s", "q", 1, -10), set("a", "x", 1, "v")]);
    assert_eq!(
        read_sums(&t),
        ["k/a:x@1=v", "k/s:q@2=10", "k/s:q@1=-3", "k/s:r@1=-5"]
    );
    // Values are 8-byte big-endian integers.
    let row = ok(
        t.read_row(b"k", Some(&RowFilter::exact_family("s"))),
        "read_row",
    )
    .expect("row k exists");
    assert!(row.cells.iter().all(|c| c.value.len() == 8), "{row:?}");
    // mutate_rows adds too, one entry per row.
    let entries = vec![
        RowMutations::new(&b"k"[..], vec![add("s", "q", 2, 5)]),
        RowMutations::new(&b"m"[..], vec![add("s", "q", 2, 7), add("s", "q", 2, 1)]),
    ];
    for status in ok(t.mutate_rows(&entries), "mutate_rows") {
        ok(status, "mutate_rows entry");
    }
    assert_eq!(
        read_sums(&t),
        [
            "k/a:x@1=v",
            "k/s:q@2=15",
            "k/s:q@1=-3",
            "k/s:r@1=-5",
            "m/s:q@2=8"
        ]
    );
}

pub fn aggregate_family_type_is_enforced(ctx: &Ctx) {
    let t = sums(ctx, GcRule::None);
    write(&t, "k", &[add("s", "q", 1, 1)]);
    let invalid = |e: &Error| e.code() == ErrorCode::InvalidArgument;
    // SetCell on an aggregate family, AddToCell on a standard one: the whole
    // row mutation fails and changes nothing.
    expect_err(
        t.mutate_row(b"k", &[add("s", "q", 1, 1), set("s", "q", 1, "v")]),
        "SetCell on an aggregate family",
        invalid,
    );
    expect_err(
        t.mutate_row(b"k", &[add("s", "q", 1, 1), add("a", "q", 1, 1)]),
        "AddToCell on a standard family",
        invalid,
    );
    expect_err(
        t.mutate_row(b"k", &[add("s", "q", -1, 1)]),
        "AddToCell at a negative timestamp",
        invalid,
    );
    expect_err(
        t.mutate_row(b"k", &[add("zz", "q", 1, 1)]),
        "AddToCell on a missing family",
        |e| matches!(e, Error::FamilyNotFound { .. }),
    );
    // In mutate_rows the failing entry fails alone.
    let entries = vec![
        RowMutations::new(&b"k"[..], vec![add("a", "q", 1, 1)]),
        RowMutations::new(&b"k"[..], vec![add("s", "q", 1, 2)]),
    ];
    let statuses = ok(t.mutate_rows(&entries), "mutate_rows");
    assert!(matches!(&statuses[0], Err(e) if invalid(e)), "{statuses:?}");
    assert!(statuses[1].is_ok(), "{statuses:?}");
    assert_eq!(read_sums(&t), ["k/s:q@1=3"]);
}

/// `mutate_rows_unsynced` answers and writes as `mutate_rows` does (only
/// its durability may differ): blind adds, writes that read the row, rows
/// replaced whole, entries that fail alone, and a request refused whole.
pub fn mutate_rows_unsynced_is_mutate_rows(ctx: &Ctx) {
    let (synced, unsynced) = (sums(ctx, GcRule::None), sums(ctx, GcRule::None));
    let requests: Vec<Vec<RowMutations>> = vec![
        vec![
            RowMutations::new(&b"k"[..], vec![add("s", "q", 1, 3), add("s", "r", 2, 4)]),
            RowMutations::new(&b"m"[..], vec![add("s", "q", 1, -2)]),
            RowMutations::new(&b"k"[..], vec![add("s", "q", 1, 5)]),
        ],
        vec![
            RowMutations::new(&b"k"[..], vec![set("a", "x", 1, "v"), add("s", "q", 3, 1)]),
            RowMutations::new(&b"m"[..], vec![add("a", "q", 1, 1)]),
            RowMutations::new(&b"n"[..], vec![set("zz", "q", 1, "v")]),
            RowMutations::new(&b"n"[..], vec![Mutation::delete_column("a", "x")]),
        ],
        vec![
            RowMutations::new(
                &b"p"[..],
                vec![Mutation::DeleteFromRow, set("a", "y", 2, "w")],
            ),
            RowMutations::new(
                &b"k"[..],
                vec![Mutation::DeleteFromRow, set("a", "z", 4, "u")],
            ),
        ],
        vec![],
    ];
    for (i, entries) in requests.iter().enumerate() {
        // Errors name the table: each its own.
        let a = format!("{:?}", synced.mutate_rows(entries)).replace(synced.name(), "T");
        let b =
            format!("{:?}", unsynced.mutate_rows_unsynced(entries)).replace(unsynced.name(), "T");
        assert_eq!(a, b, "request {i} answered differently");
        assert_eq!(
            read_sums(&unsynced),
            read_sums(&synced),
            "request {i} wrote differently"
        );
    }
    assert_eq!(
        read_sums(&unsynced),
        ["k/a:z@4=u", "m/s:q@1=-2", "p/a:y@2=w"]
    );
}

pub fn aggregate_deletes_and_gc(ctx: &Ctx) {
    let t = sums(ctx, GcRule::MaxVersions(1));
    write(
        &t,
        "k",
        &[
            add("s", "q", 1, 1),
            add("s", "q", 2, 2),
            add("s", "r", 1, 4),
            add("s", "z", 1, 8),
        ],
    );
    // One version per column is visible.
    assert_eq!(
        render_sums(&read(
            &t,
            &ReadRowsRequest::all().with_filter(RowFilter::CellsPerColumnLimit(1))
        )),
        ["k/s:q@2=2", "k/s:r@1=4", "k/s:z@1=8"]
    );
    write(&t, "k", &[Mutation::delete_column("s", b"r".to_vec())]);
    write(&t, "k", &[add("s", "z", 1, 1)]);
    let rows = read(
        &t,
        &ReadRowsRequest::all().with_filter(RowFilter::CellsPerColumnLimit(1)),
    );
    assert_eq!(render_sums(&rows), ["k/s:q@2=2", "k/s:z@1=9"]);
    // Deleting the family and adding again starts from zero.
    write(
        &t,
        "k",
        &[
            Mutation::DeleteFromFamily { family: "s".into() },
            add("s", "z", 1, 5),
        ],
    );
    assert_eq!(read_sums(&t), ["k/s:z@1=5"]);
}

pub fn aggregate_check_and_mutate(ctx: &Ctx) {
    let t = sums(ctx, GcRule::None);
    write(&t, "k", &[add("s", "q", 1, 2)]);
    // Take the surplus back only while the sum is still exactly 2.
    let is_two = RowFilter::Chain(vec![
        RowFilter::exact_family("s"),
        RowFilter::exact_qualifier(b"q"),
        RowFilter::ValueRange(ValueRange {
            start: Bound::Included(Bytes::copy_from_slice(&2i64.to_be_bytes())),
            end: Bound::Included(Bytes::copy_from_slice(&2i64.to_be_bytes())),
        }),
    ]);
    let take_back = [add("s", "q", 1, -1)];
    let matched = ok(
        t.check_and_mutate_row(b"k", Some(&is_two), &take_back, &[]),
        "check_and_mutate_row",
    );
    assert!(matched);
    let matched = ok(
        t.check_and_mutate_row(b"k", Some(&is_two), &take_back, &[]),
        "check_and_mutate_row",
    );
    assert!(!matched);
    assert_eq!(read_sums(&t), ["k/s:q@1=1"]);
}

pub fn aggregate_concurrent_adds(ctx: &Ctx) {
    let t = sums(ctx, GcRule::None);
    let (threads, adds) = (4, 50);
    std::thread::scope(|s| {
        for thread in 0..threads {
            let t = &t;
            s.spawn(move || {
                for i in 0..adds {
                    let key = format!("k{}", i % 3);
                    let muts = [add("s", "q", 1, 1), add("s", &format!("t{thread}"), 1, 2)];
                    ok(t.mutate_row(key.as_bytes(), &muts), "mutate_row");
                }
            });
        }
    });
    let rows = read(&t, &ReadRowsRequest::all());
    let total: i64 = rows
        .iter()
        .flat_map(|r| &r.cells)
        .filter(|c| c.qualifier.as_ref() == b"q")
        .map(|c| decode_i64(&c.value).expect("8-byte sum"))
        .sum();
    assert_eq!(total, threads * adds);
    let per_thread: i64 = rows
        .iter()
        .flat_map(|r| &r.cells)
        .filter(|c| c.qualifier.starts_with(b"t"))
        .map(|c| decode_i64(&c.value).expect("8-byte sum"))
        .sum();
    assert_eq!(per_thread, 2 * threads * adds);
}

pub fn aggregate_table_spec(ctx: &Ctx) {
    let t = sums(ctx, GcRule::MaxVersions(1));
    let spec = ok(ctx.store().table_spec(t.name()), "table_spec");
    assert_eq!(spec.family_type("s"), Some(FamilyType::SumInt64));
    assert_eq!(spec.family_type("a"), Some(FamilyType::Standard));
    assert_eq!(spec.families["s"].gc_rule, GcRule::MaxVersions(1));
}
