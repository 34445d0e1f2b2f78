//! Cases for mutations, `mutate_rows`, check-and-mutate and
//! read-modify-write.

use bytes::Bytes;

use super::util::*;
use super::Ctx;
use crate::apply::now_micros;
use crate::cell::SERVER_TIME;
use crate::error::Error;
use crate::filter::{RowFilter, TimestampRange};
use crate::mutation::{Mutation, ReadModifyWriteRule, RowMutations, RowRules};
use crate::table_spec::GcRule;

fn ab(ctx: &Ctx) -> super::TestTable {
    ctx.table(&[("a", GcRule::None), ("b", GcRule::None)])
}

/// 2100-01-01 in milliseconds: a timestamp always in the future.
const FUTURE_MS: i64 = 4_102_444_800_000;

pub fn set_cell_explicit_timestamp(ctx: &Ctx) {
    let t = ab(ctx);
    write(&t, "k", &[set("a", "q", 1, "v1"), set("a", "q", 2, "v2")]);
    write(&t, "k", &[set("a", "q", 1, "new")]);
    assert_eq!(read_all(&t), ["k/a:q@2=v2", "k/a:q@1=new"]);
}

pub fn set_cell_server_time(ctx: &Ctx) {
    let t = ab(ctx);
    let before = now_micros();
    write(&t, "k", &[Mutation::set_cell("a", "q", SERVER_TIME, "v")]);
    let after = now_micros();
    let rows = read(&t, &crate::ReadRowsRequest::all());
    let ts = rows[0].cells[0].timestamp_micros;
    assert_eq!(ts % 1000, 0, "server time {ts} is not whole milliseconds");
    let slack = 2_000_000;
    assert!(
        ts >= before - slack && ts <= after + slack,
        "server time {ts} is not between {before} and {after}"
    );
}

fn column_fixture(ctx: &Ctx) -> super::TestTable {
    let t = ab(ctx);
    write(
        &t,
        "k",
        &[
            set("a", "q", 1, "1"),
            set("a", "q", 2, "2"),
            set("a", "q", 3, "3"),
            set("a", "q", 4, "4"),
            set("a", "r", 2, "r"),
            set("b", "q", 2, "b"),
        ],
    );
    write(&t, "other", &[set("a", "q", 1, "o")]);
    t
}

fn delete_range(start_ms: i64, end_ms: i64) -> Mutation {
    Mutation::DeleteFromColumn {
        family: "a".into(),
        qualifier: Bytes::from_static(b"q"),
        time_range: TimestampRange::new(start_ms * 1000, end_ms * 1000),
    }
}

pub fn delete_from_column_time_range(ctx: &Ctx) {
    let t = column_fixture(ctx);
    write(&t, "k", &[delete_range(2, 4)]);
    assert_eq!(
        read_all(&t),
        [
            "k/a:q@4=4",
            "k/a:q@1=1",
            "k/a:r@2=r",
            "k/b:q@2=b",
            "other/a:q@1=o"
        ]
    );
    write(&t, "k", &[delete_range(3, 0)]);
    assert_eq!(
        read_all(&t),
        ["k/a:q@1=1", "k/a:r@2=r", "k/b:q@2=b", "other/a:q@1=o"]
    );
}

pub fn delete_from_column_all_versions(ctx: &Ctx) {
    let t = column_fixture(ctx);
    write(&t, "k", &[Mutation::delete_column("a", "q")]);
    assert_eq!(read_all(&t), ["k/a:r@2=r", "k/b:q@2=b", "other/a:q@1=o"]);
}

pub fn delete_from_family(ctx: &Ctx) {
    let t = column_fixture(ctx);
    write(
        &t,
        "k",
        &[Mutation::DeleteFromFamily { family: "a".into() }],
    );
    assert_eq!(read_all(&t), ["k/b:q@2=b", "other/a:q@1=o"]);
}

pub fn delete_from_row(ctx: &Ctx) {
    let t = column_fixture(ctx);
    write(&t, "k", &[Mutation::DeleteFromRow]);
    assert_eq!(read_all(&t), ["other/a:q@1=o"]);
    assert!(ok(t.read_row(b"k", None), "read_row").is_none());
}

pub fn mutations_apply_in_order(ctx: &Ctx) {
    let t = ab(ctx);
    write(
        &t,
        "k",
        &[
            set("a", "q", 1, "1"),
            Mutation::DeleteFromRow,
            set("a", "z", 5, "5"),
        ],
    );
    write(
        &t,
        "k",
        &[
            set("b", "q", 7, "x"),
            Mutation::delete_column("b", "q"),
            set("b", "r", 7, "y"),
        ],
    );
    assert_eq!(read_all(&t), ["k/a:z@5=5", "k/b:r@7=y"]);
}

pub fn mutate_rows_per_entry_status(ctx: &Ctx) {
    let t = ab(ctx);
    let entries = vec![
        RowMutations::new("k1", vec![set("a", "q", 1, "1")]),
        RowMutations::new("k2", vec![set("zz", "q", 1, "2")]),
        RowMutations::new("k3", vec![set("b", "q", 1, "3")]),
        RowMutations::new("k4", vec![Mutation::set_cell("a", "q", 1500, "4")]),
        RowMutations::new("k5", vec![set("a", "q", 1, "5"), set("zz", "q", 1, "5")]),
    ];
    let statuses = ok(t.mutate_rows(&entries), "mutate_rows");
    assert_eq!(statuses.len(), 5, "one status per entry: {statuses:?}");
    assert!(statuses[0].is_ok() && statuses[2].is_ok(), "{statuses:?}");
    assert!(
        matches!(statuses[1], Err(Error::FamilyNotFound { .. })),
        "{statuses:?}"
    );
    assert!(
        matches!(statuses[3], Err(Error::TimestampGranularity { .. })),
        "{statuses:?}"
    );
    assert!(
        matches!(statuses[4], Err(Error::FamilyNotFound { .. })),
        "{statuses:?}"
    );
    assert_eq!(read_all(&t), ["k1/a:q@1=1", "k3/b:q@1=3"]);
}

fn cam(t: &super::TestTable, key: &str, predicate: Option<&RowFilter>) -> crate::Result<bool> {
    t.check_and_mutate_row(
        key.as_bytes(),
        predicate,
        &[set("a", "t", 9, "T")],
        &[set("a", "f", 9, "F")],
    )
}

pub fn check_and_mutate_true_branch(ctx: &Ctx) {
    let t = fixture(ctx);
    let pred = RowFilter::ColumnQualifierRegex(Bytes::from_static(b"y"));
    assert!(ok(cam(&t, "r1", Some(&pred)), "check_and_mutate_row"));
    let r1: Vec<String> = read_all(&t)
        .into_iter()
        .filter(|c| c.starts_with("r1/"))
        .collect();
    assert_eq!(
        r1,
        [
            "r1/a:t@9=T",
            "r1/a:x@3=v3",
            "r1/a:x@2=v2",
            "r1/a:x@1=v1",
            "r1/a:y@1=y1",
            "r1/b:x@5=bx"
        ]
    );
}

pub fn check_and_mutate_false_branch(ctx: &Ctx) {
    let t = fixture(ctx);
    let pred = RowFilter::ColumnQualifierRegex(Bytes::from_static(b"y"));
    assert!(!ok(cam(&t, "r2", Some(&pred)), "check_and_mutate_row"));
    let r2: Vec<String> = read_all(&t)
        .into_iter()
        .filter(|c| c.starts_with("r2/"))
        .collect();
    assert_eq!(r2, ["r2/a:f@9=F", "r2/a:x@1=w1", "r2/b:z@2=bz"]);
}

pub fn check_and_mutate_without_predicate(ctx: &Ctx) {
    let t = fixture(ctx);
    assert!(ok(cam(&t, "r3", None), "check_and_mutate_row on a row"));
    assert!(!ok(cam(&t, "new", None), "check_and_mutate_row on no row"));
    let touched: Vec<String> = read_all(&t)
        .into_iter()
        .filter(|c| c.starts_with("r3/") || c.starts_with("new/"))
        .collect();
    assert_eq!(touched, ["new/a:f@9=F", "r3/a:t@9=T", "r3/b:z@4=zz"]);
}

pub fn check_and_mutate_invalid_request_changes_nothing(ctx: &Ctx) {
    let t = fixture(ctx);
    let before = read_all(&t);
    let bad_family = t.check_and_mutate_row(
        b"r1",
        None,
        &[set("a", "t", 9, "T")],
        &[set("zz", "f", 9, "F")],
    );
    expect_err(bad_family, "check_and_mutate with an unknown family", |e| {
        matches!(e, Error::FamilyNotFound { .. })
    });
    let bad_regex = RowFilter::ValueRegex(Bytes::from_static(b"("));
    let bad_pred = t.check_and_mutate_row(b"r1", Some(&bad_regex), &[set("a", "t", 9, "T")], &[]);
    expect_err(bad_pred, "check_and_mutate with a bad predicate", |e| {
        matches!(e, Error::InvalidRegex { .. })
    });
    expect_err(
        t.check_and_mutate_row(b"r1", None, &[], &[]),
        "check_and_mutate without mutations",
        |e| matches!(e, Error::NoMutations),
    );
    assert_eq!(read_all(&t), before);
}

/// `check_and_mutate_row_unsynced` answers and writes as
/// `check_and_mutate_row` does (only its durability may differ), and
/// refuses the same bad requests.
pub fn check_and_mutate_unsynced_is_check_and_mutate(ctx: &Ctx) {
    let (synced, unsynced) = (fixture(ctx), fixture(ctx));
    let pred = RowFilter::ColumnQualifierRegex(Bytes::from_static(b"y"));
    let bad_regex = RowFilter::ValueRegex(Bytes::from_static(b"("));
    let cases: [(&str, Option<&RowFilter>); 5] = [
        ("r1", Some(&pred)),
        ("r2", Some(&pred)),
        ("r3", None),
        ("new", None),
        ("r1", Some(&bad_regex)),
    ];
    for (key, predicate) in cases {
        let run = |t: &super::TestTable, unsynced: bool| {
            let (yes, no) = ([set("a", "t", 9, "T")], [set("a", "f", 9, "F")]);
            if unsynced {
                t.check_and_mutate_row_unsynced(key.as_bytes(), predicate, &yes, &no)
            } else {
                t.check_and_mutate_row(key.as_bytes(), predicate, &yes, &no)
            }
        };
        let (a, b) = (run(&synced, false), run(&unsynced, true));
        assert_eq!(
            format!("{a:?}"),
            format!("{b:?}"),
            "check_and_mutate_row_unsynced on {key}"
        );
    }
    expect_err(
        unsynced.check_and_mutate_row_unsynced(b"r1", None, &[], &[]),
        "check_and_mutate_row_unsynced without mutations",
        |e| matches!(e, Error::NoMutations),
    );
    assert_eq!(read_all(&unsynced), read_all(&synced));
}

pub fn read_modify_write_append(ctx: &Ctx) {
    let t = ab(ctx);
    write(
        &t,
        "k",
        &[set("a", "s", 1, "ab"), set("a", "f", FUTURE_MS, "x")],
    );
    let before = now_micros();
    let row = ok(
        t.read_modify_write_row(
            b"k",
            &[
                ReadModifyWriteRule::append("a", "s", "cd"),
                ReadModifyWriteRule::append("a", "f", "y"),
            ],
        ),
        "read_modify_write_row",
    );
    assert_eq!(row.key.as_ref(), b"k");
    assert_eq!(row.cells.len(), 2, "{row:?}");
    // The newest cell of `f` is in the future: the new value replaces it at
    // that timestamp. `s` gets a new version at the server's clock.
    assert_eq!(row.cells[0].value.as_ref(), b"xy");
    assert_eq!(row.cells[0].timestamp_micros, FUTURE_MS * 1000);
    assert_eq!(row.cells[1].value.as_ref(), b"abcd");
    let ts = row.cells[1].timestamp_micros;
    assert!(ts % 1000 == 0 && ts >= before - 2_000_000, "timestamp {ts}");
    let all = read_all(&t);
    assert_eq!(
        all,
        [
            format!("k/a:f@{FUTURE_MS}=xy"),
            format!("k/a:s@{}=abcd", ts / 1000),
            "k/a:s@1=ab".to_string(),
        ]
    );
}

fn be(n: i64) -> Vec<u8> {
    n.to_be_bytes().to_vec()
}

pub fn read_modify_write_increment(ctx: &Ctx) {
    let t = ab(ctx);
    write(
        &t,
        "k",
        &[
            set_raw("a", b"n", 1, &be(5)),
            set_raw("b", b"m", 1, &be(-1)),
        ],
    );
    let row = ok(
        t.read_modify_write_row(
            b"k",
            &[
                ReadModifyWriteRule::increment("a", "n", 2),
                ReadModifyWriteRule::increment("b", "m", 1),
                ReadModifyWriteRule::increment("a", "n", 3),
            ],
        ),
        "read_modify_write_row",
    );
    let values: Vec<(String, Vec<u8>)> = row
        .cells
        .iter()
        .map(|c| (c.family.clone(), c.value.to_vec()))
        .collect();
    assert_eq!(
        values,
        [("a".to_string(), be(10)), ("b".to_string(), be(0))]
    );
    let latest = ok(t.read_row(b"k", None), "read_row").expect("row exists");
    assert_eq!(
        latest.latest("a", b"n").map(|c| c.value.to_vec()),
        Some(be(10))
    );
}

pub fn read_modify_write_missing_cell(ctx: &Ctx) {
    let t = ab(ctx);
    let row = ok(
        t.read_modify_write_row(
            b"fresh",
            &[
                ReadModifyWriteRule::increment("a", "n", -3),
                ReadModifyWriteRule::append("b", "s", "x"),
            ],
        ),
        "read_modify_write_row",
    );
    let values: Vec<Vec<u8>> = row.cells.iter().map(|c| c.value.to_vec()).collect();
    assert_eq!(values, [be(-3), b"x".to_vec()]);
    let stored = ok(t.read_row(b"fresh", None), "read_row").expect("row exists");
    assert_eq!(stored.cells.len(), 2);
}

pub fn read_modify_write_bad_length_target(ctx: &Ctx) {
    let t = ab(ctx);
    write(&t, "k", &[set("a", "bad", 1, "abc")]);
    let before = read_all(&t);
    let result = t.read_modify_write_row(b"k", &[ReadModifyWriteRule::increment("a", "bad", 1)]);
    if ctx.caps.typed_increment_error {
        expect_err(result, "increment of a 3-byte value", |e| {
            matches!(e, Error::InvalidIncrementTarget { len: 3, .. })
        });
    } else {
        assert!(result.is_err(), "increment of a 3-byte value succeeded");
    }
    assert_eq!(read_all(&t), before);
}

pub fn read_modify_write_failure_is_atomic(ctx: &Ctx) {
    if !ctx.caps.atomic_read_modify_write_failure {
        eprintln!("skipping: the backend applies read-modify-write rules one by one");
        return;
    }
    let t = ab(ctx);
    write(&t, "k", &[set("a", "bad", 1, "abc")]);
    let before = read_all(&t);
    let result = t.read_modify_write_row(
        b"k",
        &[
            ReadModifyWriteRule::increment("a", "ok", 1),
            ReadModifyWriteRule::append("b", "s", "x"),
            ReadModifyWriteRule::increment("a", "bad", 1),
        ],
    );
    assert!(result.is_err(), "increment of a 3-byte value succeeded");
    assert_eq!(read_all(&t), before);
}

pub fn read_modify_write_rows_per_entry_status(ctx: &Ctx) {
    let t = ab(ctx);
    write(
        &t,
        "k",
        &[set_raw("a", b"n", 1, &be(5)), set("a", "bad", 1, "abc")],
    );
    let statuses = ok(
        t.read_modify_write_rows(&[
            RowRules::new("k", vec![ReadModifyWriteRule::increment("a", "n", 2)]),
            RowRules::new("fresh", vec![ReadModifyWriteRule::append("b", "s", "x")]),
            RowRules::new("k", vec![ReadModifyWriteRule::increment("a", "bad", 1)]),
            RowRules::new("k", vec![ReadModifyWriteRule::increment("zz", "n", 1)]),
            RowRules::new("k", vec![ReadModifyWriteRule::increment("a", "n", 3)]),
        ]),
        "read_modify_write_rows",
    );
    assert_eq!(statuses.len(), 5);
    let value = |i: usize| -> Vec<u8> {
        match &statuses[i] {
            Ok(row) => row
                .cells
                .first()
                .map(|c| c.value.to_vec())
                .unwrap_or_default(),
            Err(e) => panic!("entry {i} failed: {e}"),
        }
    };
    // Entries on the same row apply in order: the last sees the first.
    assert_eq!(value(0), be(7));
    assert_eq!(value(1), b"x".to_vec());
    assert_eq!(value(4), be(10));
    assert!(
        statuses[2].is_err(),
        "increment of a 3-byte value succeeded"
    );
    expect_err(statuses[3].clone(), "increment in an unknown family", |e| {
        matches!(e, Error::FamilyNotFound { .. })
    });
    let latest = ok(t.read_row(b"k", None), "read_row").expect("row exists");
    assert_eq!(
        latest.latest("a", b"n").map(|c| c.value.to_vec()),
        Some(be(10))
    );
    assert_eq!(
        latest.latest("a", b"bad").map(|c| c.value.to_vec()),
        Some(b"abc".to_vec())
    );
    let fresh = ok(t.read_row(b"fresh", None), "read_row").expect("row exists");
    assert_eq!(fresh.cells.len(), 1);
}
