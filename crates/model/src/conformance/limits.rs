//! Cases for Bigtable's limits: each violation is rejected with the right
//! error variant and changes nothing.

use bytes::Bytes;

use super::util::*;
use super::{Ctx, TestTable};
use crate::error::Error;
use crate::limits::{
    MAX_MUTATIONS_PER_REQUEST, MAX_QUALIFIER_BYTES, MAX_ROW_KEY_BYTES, MAX_VALUE_BYTES,
};
use crate::mutation::{Mutation, RowMutations};
use crate::table_spec::GcRule;

fn table(ctx: &Ctx) -> TestTable {
    let t = ctx.table(&[("a", GcRule::None)]);
    write(&t, "k", &[set("a", "q", 1, "v")]);
    t
}

/// `mutate_row(key, [valid set, bad])` fails as `expected` and changes
/// nothing.
fn rejected(t: &TestTable, key: &[u8], bad: Mutation, what: &str, expected: fn(&Error) -> bool) {
    let before = read_all(t);
    let result = t.mutate_row(key, &[set("a", "ok", 1, "v"), bad]);
    expect_err(result, what, expected);
    assert_eq!(read_all(t), before, "{what} changed the table");
}

pub fn limit_row_key_too_large(ctx: &Ctx) {
    let t = table(ctx);
    let max = ctx.caps.max_row_key_bytes;
    let key = vec![b'k'; max + 1];
    rejected(
        &t,
        &key,
        set("a", "q", 1, "v"),
        "4 KiB + 1 row key",
        // A prefixed table counts its prefix in the length it reports.
        |e| matches!(e, Error::RowKeyTooLarge { len } if *len == MAX_ROW_KEY_BYTES + 1),
    );
    let max = vec![b'k'; max];
    ok(
        t.mutate_row(&max, &[set("a", "q", 1, "v")]),
        "4 KiB row key",
    );
}

pub fn limit_empty_row_key(ctx: &Ctx) {
    let t = table(ctx);
    rejected(&t, b"", set("a", "q", 1, "v"), "empty row key", |e| {
        matches!(e, Error::EmptyRowKey)
    });
}

pub fn limit_qualifier_too_large(ctx: &Ctx) {
    let t = table(ctx);
    let q = vec![b'q'; MAX_QUALIFIER_BYTES + 1];
    rejected(
        &t,
        b"k",
        set_raw("a", &q, 1, b"v"),
        "16 KiB + 1 qualifier",
        |e| matches!(e, Error::QualifierTooLarge { len } if *len == MAX_QUALIFIER_BYTES + 1),
    );
}

pub fn limit_value_too_large(ctx: &Ctx) {
    let t = table(ctx);
    let value = Bytes::from(vec![0u8; MAX_VALUE_BYTES + 1]);
    let bad = Mutation::set_cell("a", "q", 1000, value);
    rejected(
        &t,
        b"k",
        bad,
        "100 MiB + 1 value",
        |e| matches!(e, Error::ValueTooLarge { len } if *len == MAX_VALUE_BYTES + 1),
    );
}

pub fn limit_too_many_mutations(ctx: &Ctx) {
    let t = table(ctx);
    let before = read_all(&t);
    let mutations: Vec<Mutation> = (0..=MAX_MUTATIONS_PER_REQUEST)
        .map(|i| set("a", "q", i64::try_from(i % 1000).unwrap_or(0) + 10, "v"))
        .collect();
    expect_err(
        t.mutate_row(b"k", &mutations),
        "100,001 mutations",
        |e| matches!(e, Error::TooManyMutations { count } if *count == MAX_MUTATIONS_PER_REQUEST + 1),
    );
    assert_eq!(read_all(&t), before);
}

pub fn limit_no_mutations(ctx: &Ctx) {
    let t = table(ctx);
    expect_err(t.mutate_row(b"k", &[]), "no mutations", |e| {
        matches!(e, Error::NoMutations)
    });
    expect_err(
        t.read_modify_write_row(b"k", &[]),
        "no read-modify-write rules",
        |e| matches!(e, Error::NoMutations),
    );
}

pub fn limit_bad_family_name(ctx: &Ctx) {
    let t = table(ctx);
    rejected(
        &t,
        b"k",
        set("a b", "q", 1, "v"),
        "family \"a b\"",
        |e| matches!(e, Error::InvalidFamilyName { name } if name == "a b"),
    );
}

pub fn limit_unknown_family(ctx: &Ctx) {
    let t = table(ctx);
    rejected(
        &t,
        b"k",
        set("zz", "q", 1, "v"),
        "unknown family",
        |e| matches!(e, Error::FamilyNotFound { family, .. } if family == "zz"),
    );
    rejected(
        &t,
        b"k",
        Mutation::DeleteFromFamily {
            family: "zz".into(),
        },
        "delete of an unknown family",
        |e| matches!(e, Error::FamilyNotFound { .. }),
    );
}

pub fn limit_timestamp_granularity(ctx: &Ctx) {
    let t = table(ctx);
    let bad = Mutation::set_cell("a", "q", 1500, "v");
    rejected(&t, b"k", bad, "timestamp 1500", |e| {
        matches!(e, Error::TimestampGranularity { micros: 1500 })
    });
    let bad_range = Mutation::DeleteFromColumn {
        family: "a".into(),
        qualifier: Bytes::from_static(b"q"),
        time_range: crate::TimestampRange::new(1000, 2500),
    };
    rejected(&t, b"k", bad_range, "delete range ending at 2500", |e| {
        matches!(e, Error::TimestampGranularity { micros: 2500 })
    });
}

pub fn limit_negative_timestamp(ctx: &Ctx) {
    let t = table(ctx);
    let bad = Mutation::set_cell("a", "q", -2000, "v");
    rejected(&t, b"k", bad, "timestamp -2000", |e| {
        matches!(e, Error::InvalidTimestamp { micros: -2000 })
    });
}

pub fn limit_mutate_rows_total(ctx: &Ctx) {
    let t = table(ctx);
    let before = read_all(&t);
    let half = MAX_MUTATIONS_PER_REQUEST / 2 + 1;
    let entry = |key: &str| {
        RowMutations::new(
            key.to_string(),
            (0..half)
                .map(|i| set("a", "q", i64::try_from(i % 1000).unwrap_or(0) + 10, "v"))
                .collect(),
        )
    };
    expect_err(
        t.mutate_rows(&[entry("x"), entry("y")]),
        "mutate_rows with 100,002 mutations in total",
        |e| matches!(e, Error::TooManyMutations { .. }),
    );
    expect_err(t.mutate_rows(&[]), "mutate_rows without entries", |e| {
        matches!(e, Error::NoMutations)
    });
    assert_eq!(read_all(&t), before);
}
