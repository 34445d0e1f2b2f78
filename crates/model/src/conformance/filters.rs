//! Cases for every `RowFilter` kind, on the data of [`fixture`].

use std::ops::Bound;

use bytes::Bytes;

use super::util::*;
use super::Ctx;
use crate::error::Error;
use crate::filter::{ColumnRange, RowFilter, TimestampRange, ValueRange};
use crate::rowset::ReadRowsRequest;
use crate::table_spec::GcRule;

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn fam(re: &str) -> RowFilter {
    RowFilter::FamilyNameRegex(re.to_string())
}

fn qual(re: &str) -> RowFilter {
    RowFilter::ColumnQualifierRegex(b(re))
}

fn label(l: &str) -> RowFilter {
    RowFilter::ApplyLabel(l.to_string())
}

fn rejected(table: &super::TestTable, filter: RowFilter, expected: fn(&Error) -> bool) {
    let what = format!("read_rows with {filter:?}");
    expect_err(
        try_read(table.as_ref(), &ReadRowsRequest::all().with_filter(filter)),
        &what,
        expected,
    );
}

fn invalid_filter(e: &Error) -> bool {
    matches!(e, Error::InvalidFilter { .. })
}

pub fn filter_pass_all_and_block_all(ctx: &Ctx) {
    let t = fixture(ctx);
    assert_eq!(read_all(&t), strings(&FIXTURE));
    assert_eq!(read_filtered(&t, RowFilter::PassAll), strings(&FIXTURE));
    assert!(read_filtered(&t, RowFilter::BlockAll).is_empty());
}

pub fn filter_chain(ctx: &Ctx) {
    let t = fixture(ctx);
    let chain = RowFilter::Chain(vec![fam("a"), qual("x"), RowFilter::CellsPerColumnLimit(2)]);
    assert_eq!(
        read_filtered(&t, chain),
        ["r1/a:x@3=v3", "r1/a:x@2=v2", "r2/a:x@1=w1"]
    );
}

pub fn filter_degenerate_chain_and_interleave(ctx: &Ctx) {
    let t = fixture(ctx);
    assert_eq!(
        read_filtered(&t, RowFilter::Chain(vec![])),
        strings(&FIXTURE)
    );
    assert!(read_filtered(&t, RowFilter::Interleave(vec![])).is_empty());
    assert_eq!(
        read_filtered(&t, RowFilter::Chain(vec![qual("y")])),
        ["r1/a:y@1=y1"]
    );
    assert_eq!(
        read_filtered(&t, RowFilter::Interleave(vec![qual("y")])),
        ["r1/a:y@1=y1"]
    );
}

pub fn filter_interleave_keeps_duplicates(ctx: &Ctx) {
    let t = fixture(ctx);
    let filter = RowFilter::Interleave(vec![fam("b"), qual("z")]);
    let rows = read(&t, &ReadRowsRequest::all().with_filter(filter));
    assert_eq!(
        render_unordered_copies(&rows),
        [
            "r1/b:x@5=bx",
            "r2/b:z@2=bz",
            "r2/b:z@2=bz",
            "r3/b:z@4=zz",
            "r3/b:z@4=zz"
        ]
    );
}

pub fn filter_condition_branches(ctx: &Ctx) {
    let t = fixture(ctx);
    let both = RowFilter::Condition {
        predicate: Box::new(qual("y")),
        true_filter: Some(Box::new(fam("b"))),
        false_filter: Some(Box::new(qual("x"))),
    };
    assert_eq!(read_filtered(&t, both), ["r1/b:x@5=bx", "r2/a:x@1=w1"]);
    let no_true = RowFilter::Condition {
        predicate: Box::new(qual("y")),
        true_filter: None,
        false_filter: Some(Box::new(RowFilter::PassAll)),
    };
    assert_eq!(
        read_filtered(&t, no_true),
        ["r2/a:x@1=w1", "r2/b:z@2=bz", "r3/b:z@4=zz"]
    );
    let no_false = RowFilter::Condition {
        predicate: Box::new(qual("y")),
        true_filter: Some(Box::new(fam("b"))),
        false_filter: None,
    };
    assert_eq!(read_filtered(&t, no_false), ["r1/b:x@5=bx"]);
}

pub fn filter_condition_labels_do_not_leak(ctx: &Ctx) {
    let t = fixture(ctx);
    let filter = RowFilter::Condition {
        predicate: Box::new(RowFilter::Chain(vec![fam("a"), label("pred")])),
        true_filter: Some(Box::new(RowFilter::PassAll)),
        false_filter: None,
    };
    assert_eq!(read_filtered(&t, filter), strings(&FIXTURE[..7]));
}

pub fn filter_sink_in_chain_and_interleave(ctx: &Ctx) {
    if !ctx.caps.sink_filter {
        eprintln!("skipping: the backend does not implement sink");
        return;
    }
    let t = fixture(ctx);
    // The example of the `sink` documentation in Bigtable's data.proto.
    let filter = RowFilter::Chain(vec![
        fam("a"),
        RowFilter::Interleave(vec![
            RowFilter::PassAll,
            RowFilter::Chain(vec![label("foo"), RowFilter::Sink]),
        ]),
        qual("y"),
    ]);
    let rows = read(&t, &ReadRowsRequest::all().with_filter(filter));
    assert_eq!(
        render_unordered_copies(&rows),
        [
            "r1/a:x@3=v3[foo]",
            "r1/a:x@2=v2[foo]",
            "r1/a:x@1=v1[foo]",
            "r1/a:y@1=y1",
            "r1/a:y@1=y1[foo]",
            "r2/a:x@1=w1[foo]",
        ]
    );
    // Cells reaching a sink bypass the filters after it.
    let tail = RowFilter::Chain(vec![fam("b"), RowFilter::Sink, RowFilter::BlockAll]);
    assert_eq!(
        read_filtered(&t, tail),
        ["r1/b:x@5=bx", "r2/b:z@2=bz", "r3/b:z@4=zz"]
    );
}

pub fn filter_sink_in_condition_is_rejected(ctx: &Ctx) {
    let t = fixture(ctx);
    let in_branch = RowFilter::Condition {
        predicate: Box::new(RowFilter::PassAll),
        true_filter: Some(Box::new(RowFilter::Sink)),
        false_filter: None,
    };
    rejected(&t, in_branch, invalid_filter);
    let in_predicate = RowFilter::Condition {
        predicate: Box::new(RowFilter::Chain(vec![fam("a"), RowFilter::Sink])),
        true_filter: Some(Box::new(RowFilter::PassAll)),
        false_filter: None,
    };
    rejected(&t, in_predicate, invalid_filter);
}

pub fn filter_labels_on_interleave_copies(ctx: &Ctx) {
    let t = fixture(ctx);
    let filter = RowFilter::Chain(vec![
        qual("y"),
        RowFilter::Interleave(vec![label("one"), label("two")]),
    ]);
    let rows = read(&t, &ReadRowsRequest::all().with_filter(filter));
    assert_eq!(
        render_unordered_copies(&rows),
        ["r1/a:y@1=y1[one]", "r1/a:y@1=y1[two]"]
    );
    let single = RowFilter::Chain(vec![qual("y"), label("l-0")]);
    assert_eq!(read_filtered(&t, single), ["r1/a:y@1=y1[l-0]"]);
}

pub fn filter_invalid_labels_are_rejected(ctx: &Ctx) {
    let t = fixture(ctx);
    for bad in ["Upper", "", "sixteen-chars-xx", "a_b"] {
        rejected(&t, label(bad), invalid_filter);
    }
    // A cell can carry at most one label: a chain may hold one labelling
    // sub-filter at most.
    rejected(
        &t,
        RowFilter::Chain(vec![label("a"), label("b")]),
        invalid_filter,
    );
    rejected(
        &t,
        RowFilter::Chain(vec![
            label("a"),
            RowFilter::Interleave(vec![RowFilter::PassAll, label("b")]),
        ]),
        invalid_filter,
    );
}

pub fn filter_row_key_regex(ctx: &Ctx) {
    let t = fixture(ctx);
    let out = read_filtered(&t, RowFilter::RowKeyRegex(b("r[13]")));
    let mut expected = strings(&FIXTURE[..5]);
    expected.push(FIXTURE[7].to_string());
    assert_eq!(out, expected);
    // The regex must match the whole key.
    assert!(read_filtered(&t, RowFilter::RowKeyRegex(b("r"))).is_empty());
}

pub fn filter_family_regex(ctx: &Ctx) {
    let t = fixture(ctx);
    assert_eq!(
        read_filtered(&t, fam("b")),
        ["r1/b:x@5=bx", "r2/b:z@2=bz", "r3/b:z@4=zz"]
    );
    assert_eq!(read_filtered(&t, fam("a|b")), strings(&FIXTURE));
    assert!(read_filtered(&t, fam("")).is_empty());
}

pub fn filter_qualifier_regex(ctx: &Ctx) {
    let t = fixture(ctx);
    assert_eq!(read_filtered(&t, qual("y")), ["r1/a:y@1=y1"]);
    assert_eq!(
        read_filtered(&t, qual("[xz]")),
        [
            "r1/a:x@3=v3",
            "r1/a:x@2=v2",
            "r1/a:x@1=v1",
            "r1/b:x@5=bx",
            "r2/a:x@1=w1",
            "r2/b:z@2=bz",
            "r3/b:z@4=zz"
        ]
    );
}

pub fn filter_regex_bytes_and_newlines(ctx: &Ctx) {
    let t = ctx.table(&[("a", GcRule::None)]);
    let key = b"k\n1";
    super::util::ok(
        t.mutate_row(key, &[set_raw("a", b"\xff\x00", 1, b"v\n")]),
        "mutate_row",
    );
    let all = ["k\\n1/a:\\xff\\x00@1=v\\n"];
    let raw = |p: &[u8]| Bytes::copy_from_slice(p);
    // `.` does not match a newline, `\C` matches any byte.
    assert!(read_filtered(&t, RowFilter::RowKeyRegex(raw(b"k.1"))).is_empty());
    assert_eq!(
        read_filtered(&t, RowFilter::RowKeyRegex(raw(b"k\\C1"))),
        all
    );
    assert_eq!(
        read_filtered(&t, RowFilter::ColumnQualifierRegex(raw(b"\xff."))),
        all
    );
    assert!(read_filtered(&t, RowFilter::ValueRegex(raw(b"v."))).is_empty());
    assert_eq!(read_filtered(&t, RowFilter::ValueRegex(raw(b"v\\C"))), all);
    assert_eq!(read_filtered(&t, RowFilter::ValueRegex(raw(b"v\\n"))), all);
}

pub fn filter_invalid_regex_is_rejected(ctx: &Ctx) {
    let t = fixture(ctx);
    let invalid_regex = |e: &Error| matches!(e, Error::InvalidRegex { .. });
    rejected(&t, qual("("), invalid_regex);
    rejected(&t, RowFilter::ValueRegex(b("a[")), invalid_regex);
    rejected(&t, RowFilter::RowKeyRegex(b("*")), invalid_regex);
    rejected(
        &t,
        RowFilter::Chain(vec![fam("a"), RowFilter::Interleave(vec![fam("(")])]),
        invalid_regex,
    );
}

pub fn filter_column_range(ctx: &Ctx) {
    let t = fixture(ctx);
    let range = |family: &str, start, end| {
        RowFilter::ColumnRange(ColumnRange {
            family: family.to_string(),
            start,
            end,
        })
    };
    assert_eq!(
        read_filtered(
            &t,
            range("a", Bound::Included(b("x")), Bound::Excluded(b("y")))
        ),
        ["r1/a:x@3=v3", "r1/a:x@2=v2", "r1/a:x@1=v1", "r2/a:x@1=w1"]
    );
    assert_eq!(
        read_filtered(
            &t,
            range("a", Bound::Excluded(b("x")), Bound::Included(b("y")))
        ),
        ["r1/a:y@1=y1"]
    );
    assert_eq!(
        read_filtered(&t, range("b", Bound::Unbounded, Bound::Unbounded)),
        ["r1/b:x@5=bx", "r2/b:z@2=bz", "r3/b:z@4=zz"]
    );
    assert_eq!(
        read_filtered(&t, range("b", Bound::Included(b("y")), Bound::Unbounded)),
        ["r2/b:z@2=bz", "r3/b:z@4=zz"]
    );
    assert!(read_filtered(&t, range("a", Bound::Excluded(b("y")), Bound::Unbounded)).is_empty());
}

pub fn filter_timestamp_range(ctx: &Ctx) {
    let t = fixture(ctx);
    assert_eq!(
        read_filtered(
            &t,
            RowFilter::TimestampRange(TimestampRange::new(2000, 4000))
        ),
        ["r1/a:x@3=v3", "r1/a:x@2=v2", "r2/b:z@2=bz"]
    );
    assert_eq!(
        read_filtered(&t, RowFilter::TimestampRange(TimestampRange::new(4000, 0))),
        ["r1/b:x@5=bx", "r3/b:z@4=zz"]
    );
}

pub fn filter_value_regex(ctx: &Ctx) {
    let t = fixture(ctx);
    assert_eq!(
        read_filtered(&t, RowFilter::ValueRegex(b("v[12]"))),
        ["r1/a:x@2=v2", "r1/a:x@1=v1"]
    );
    assert!(read_filtered(&t, RowFilter::ValueRegex(b("v"))).is_empty());
}

pub fn filter_value_range(ctx: &Ctx) {
    let t = fixture(ctx);
    let range = |start, end| RowFilter::ValueRange(ValueRange { start, end });
    assert_eq!(
        read_filtered(
            &t,
            range(Bound::Included(b("v2")), Bound::Excluded(b("w1")))
        ),
        ["r1/a:x@3=v3", "r1/a:x@2=v2"]
    );
    assert_eq!(
        read_filtered(
            &t,
            range(Bound::Excluded(b("v3")), Bound::Included(b("w1")))
        ),
        ["r2/a:x@1=w1"]
    );
    assert_eq!(
        read_filtered(&t, range(Bound::Unbounded, Bound::Excluded(b("c")))),
        ["r1/b:x@5=bx", "r2/b:z@2=bz"]
    );
}

/// One row, one family: `k/a:p@1, k/a:q@3, k/a:q@2, k/a:r@1`.
fn one_family(ctx: &Ctx) -> super::TestTable {
    let t = ctx.table(&[("a", GcRule::None)]);
    write(
        &t,
        "k",
        &[
            set("a", "p", 1, "1"),
            set("a", "q", 2, "2"),
            set("a", "q", 3, "3"),
            set("a", "r", 1, "4"),
        ],
    );
    t
}

pub fn filter_cells_per_row_offset(ctx: &Ctx) {
    let single = one_family(ctx);
    assert_eq!(
        read_filtered(&single, RowFilter::CellsPerRowOffset(2)),
        ["k/a:q@2=2", "k/a:r@1=4"]
    );
    assert!(read_filtered(&single, RowFilter::CellsPerRowOffset(4)).is_empty());
    if !ctx.caps.cells_per_row_across_families {
        return;
    }
    let t = fixture(ctx);
    assert_eq!(
        read_filtered(&t, RowFilter::CellsPerRowOffset(3)),
        ["r1/a:y@1=y1", "r1/b:x@5=bx"]
    );
    assert_eq!(
        read_filtered(&t, RowFilter::CellsPerRowOffset(0)),
        strings(&FIXTURE)
    );
}

pub fn filter_cells_per_row_limit(ctx: &Ctx) {
    let single = one_family(ctx);
    assert_eq!(
        read_filtered(&single, RowFilter::CellsPerRowLimit(3)),
        ["k/a:p@1=1", "k/a:q@3=3", "k/a:q@2=2"]
    );
    if !ctx.caps.cells_per_row_across_families {
        return;
    }
    let t = fixture(ctx);
    assert_eq!(
        read_filtered(&t, RowFilter::CellsPerRowLimit(2)),
        [
            "r1/a:x@3=v3",
            "r1/a:x@2=v2",
            "r2/a:x@1=w1",
            "r2/b:z@2=bz",
            "r3/b:z@4=zz"
        ]
    );
}

pub fn filter_cells_per_column_limit(ctx: &Ctx) {
    let t = fixture(ctx);
    assert_eq!(
        read_filtered(&t, RowFilter::CellsPerColumnLimit(1)),
        [
            "r1/a:x@3=v3",
            "r1/a:y@1=y1",
            "r1/b:x@5=bx",
            "r2/a:x@1=w1",
            "r2/b:z@2=bz",
            "r3/b:z@4=zz"
        ]
    );
}

pub fn filter_strip_value(ctx: &Ctx) {
    let t = fixture(ctx);
    let expected: Vec<String> = FIXTURE
        .iter()
        .map(|c| format!("{}=", c.split('=').next().unwrap_or_default()))
        .collect();
    assert_eq!(read_filtered(&t, RowFilter::StripValue), expected);
    if ctx.caps.strip_value_keeps_labels {
        let labelled = RowFilter::Chain(vec![qual("y"), label("l"), RowFilter::StripValue]);
        assert_eq!(read_filtered(&t, labelled), ["r1/a:y@1=[l]"]);
    }
}

pub fn filter_row_sample(ctx: &Ctx) {
    let t = fixture(ctx);
    rejected(&t, RowFilter::RowSample(0.0), invalid_filter);
    rejected(&t, RowFilter::RowSample(1.0), invalid_filter);
    assert_eq!(
        read_filtered(&t, RowFilter::RowSample(0.999_999_999)),
        strings(&FIXTURE)
    );
    assert!(read_filtered(&t, RowFilter::RowSample(1e-9)).is_empty());
}

pub fn filter_invalid_arguments_are_rejected(ctx: &Ctx) {
    let t = fixture(ctx);
    rejected(&t, RowFilter::CellsPerRowLimit(0), invalid_filter);
    rejected(&t, RowFilter::CellsPerColumnLimit(0), invalid_filter);
    rejected(&t, RowFilter::RowKeyRegex(Bytes::new()), invalid_filter);
    rejected(
        &t,
        RowFilter::TimestampRange(TimestampRange::new(1500, 0)),
        invalid_filter,
    );
    rejected(
        &t,
        RowFilter::ColumnRange(ColumnRange {
            family: String::new(),
            start: Bound::Unbounded,
            end: Bound::Unbounded,
        }),
        invalid_filter,
    );
}
