//! Cases for the table admin API: create, list, delete, spec, families.

use std::time::Duration;

use super::util::*;
use super::{Ctx, TableGuard};
use crate::error::Error;
use crate::rowset::ReadRowsRequest;
use crate::table_spec::{FamilyModification, GcRule, TableSpec};

fn create(family: &str, gc_rule: GcRule) -> FamilyModification {
    FamilyModification::Create {
        family: family.to_string(),
        gc_rule,
    }
}

pub fn admin_create_list_delete(ctx: &Ctx) {
    let store = ctx.store();
    let name = ctx.unique_name();
    let spec = TableSpec::new().with_family("a", GcRule::None);
    ok(store.create_table(&name, &spec), "create_table");
    let guard = TableGuard::new(store.clone(), name.clone());
    let tables = ok(store.list_tables(), "list_tables");
    assert!(tables.contains(&name), "{name} not in {tables:?}");
    let mut sorted = tables.clone();
    sorted.sort();
    assert_eq!(tables, sorted, "list_tables must be sorted");
    let t = ok(store.open_table(&name), "open_table");
    assert_eq!(t.name(), name);
    ok(store.delete_table(&name), "delete_table");
    drop(guard);
    let tables = ok(store.list_tables(), "list_tables");
    assert!(!tables.contains(&name), "{name} still in {tables:?}");
    expect_err(
        store.table_spec(&name),
        "table_spec of a deleted table",
        |e| matches!(e, Error::TableNotFound { .. }),
    );
}

pub fn admin_table_spec(ctx: &Ctx) {
    let store = ctx.store();
    let name = ctx.unique_name();
    let spec = TableSpec::new()
        .with_family("a", GcRule::MaxVersions(2))
        .with_family(
            "b",
            GcRule::Union(vec![
                GcRule::MaxAge(Duration::from_secs(3600)),
                GcRule::MaxVersions(1),
            ]),
        )
        .with_family(
            "c",
            GcRule::Intersection(vec![
                GcRule::MaxAge(Duration::from_secs(86_400)),
                GcRule::MaxVersions(5),
            ]),
        )
        .with_family("d", GcRule::None);
    ok(store.create_table(&name, &spec), "create_table");
    let _guard = TableGuard::new(store.clone(), name.clone());
    assert_eq!(ok(store.table_spec(&name), "table_spec"), spec);
}

pub fn admin_modify_families(ctx: &Ctx) {
    let t = ctx.table(&[("a", GcRule::None)]);
    let store = ctx.store();
    let spec = ok(
        store.modify_families(
            t.name(),
            &[
                create("b", GcRule::MaxVersions(1)),
                FamilyModification::Update {
                    family: "a".into(),
                    gc_rule: GcRule::MaxVersions(3),
                },
            ],
        ),
        "modify_families",
    );
    let expected = TableSpec::new()
        .with_family("a", GcRule::MaxVersions(3))
        .with_family("b", GcRule::MaxVersions(1));
    assert_eq!(spec, expected);
    assert_eq!(ok(store.table_spec(t.name()), "table_spec"), expected);
    write(&t, "k", &[set("a", "q", 1, "a"), set("b", "q", 1, "b")]);
    ok(
        store.modify_families(t.name(), &[FamilyModification::Drop { family: "b".into() }]),
        "drop family",
    );
    assert_eq!(read_all(&t), ["k/a:q@1=a"]);
    expect_err(
        t.mutate_row(b"k", &[set("b", "q", 2, "b")]),
        "write to a dropped family",
        |e| matches!(e, Error::FamilyNotFound { .. }),
    );
}

pub fn admin_missing_table_errors(ctx: &Ctx) {
    let store = ctx.store();
    let name = ctx.unique_name();
    let not_found = |e: &Error| matches!(e, Error::TableNotFound { .. });
    expect_err(store.delete_table(&name), "delete_table", not_found);
    expect_err(store.table_spec(&name), "table_spec", not_found);
    expect_err(
        store.modify_families(&name, &[create("a", GcRule::None)]),
        "modify_families",
        not_found,
    );
    // A backend may open handles lazily; the first use must then fail.
    match store.open_table(&name) {
        Err(e) => assert!(not_found(&e), "open_table: {e:?}"),
        Ok(t) => {
            expect_err(
                try_read(t.as_ref(), &ReadRowsRequest::all()),
                "read_rows",
                not_found,
            );
            expect_err(
                t.mutate_row(b"k", &[set("a", "q", 1, "v")]),
                "mutate_row",
                not_found,
            );
        }
    }
}

pub fn admin_missing_family_errors(ctx: &Ctx) {
    let t = ctx.table(&[("a", GcRule::None)]);
    let store = ctx.store();
    let before = ok(store.table_spec(t.name()), "table_spec");
    let not_found = |e: &Error| matches!(e, Error::FamilyNotFound { .. });
    expect_err(
        store.modify_families(
            t.name(),
            &[FamilyModification::Update {
                family: "zz".into(),
                gc_rule: GcRule::MaxVersions(1),
            }],
        ),
        "update a missing family",
        not_found,
    );
    expect_err(
        store.modify_families(
            t.name(),
            &[FamilyModification::Drop {
                family: "zz".into(),
            }],
        ),
        "drop a missing family",
        not_found,
    );
    assert_eq!(ok(store.table_spec(t.name()), "table_spec"), before);
}

pub fn admin_duplicates(ctx: &Ctx) {
    let t = ctx.table(&[("a", GcRule::None)]);
    let store = ctx.store();
    expect_err(
        store.create_table(t.name(), &TableSpec::new()),
        "create an existing table",
        |e| matches!(e, Error::TableExists { .. }),
    );
    let before = ok(store.table_spec(t.name()), "table_spec");
    expect_err(
        store.modify_families(
            t.name(),
            &[create("c", GcRule::None), create("a", GcRule::None)],
        ),
        "create an existing family",
        |e| matches!(e, Error::FamilyExists { .. }),
    );
    // All modifications are checked before any is applied.
    assert_eq!(ok(store.table_spec(t.name()), "table_spec"), before);
}

pub fn admin_invalid_names_and_rules(ctx: &Ctx) {
    let store = ctx.store();
    let bad_table = |e: &Error| matches!(e, Error::InvalidTableName { .. });
    expect_err(
        store.create_table("bad name", &TableSpec::new()),
        "create_table(bad name)",
        bad_table,
    );
    let long = format!("t{}", "x".repeat(50));
    expect_err(
        store.create_table(&long, &TableSpec::new()),
        "create_table(51 bytes)",
        bad_table,
    );
    let name = ctx.unique_name();
    let _guard = TableGuard::new(store.clone(), name.clone());
    let family = TableSpec::new().with_family("a b", GcRule::None);
    expect_err(
        store.create_table(&name, &family),
        "create_table with family \"a b\"",
        |e| matches!(e, Error::InvalidFamilyName { .. }),
    );
    for rule in [
        GcRule::MaxVersions(0),
        GcRule::MaxAge(Duration::ZERO),
        GcRule::Union(vec![]),
    ] {
        let spec = TableSpec::new().with_family("a", rule.clone());
        expect_err(
            store.create_table(&name, &spec),
            &format!("create_table with {rule:?}"),
            |e| matches!(e, Error::InvalidArgument(_)),
        );
    }
    let tables = ok(store.list_tables(), "list_tables");
    assert!(!tables.contains(&name), "an invalid create left {name}");
}

pub fn admin_drop_row_range(ctx: &Ctx) {
    let t = ctx.table(&[("a", GcRule::None)]);
    for key in ["shop#1", "shop#2", "shop2#1", "sho#1", "shop", "shoq"] {
        write(&t, key, &[set("a", "q", 1, "v")]);
    }
    ok(
        ctx.store().drop_row_range(t.name(), b"shop#"),
        "drop_row_range",
    );
    let rows = read(&t, &ReadRowsRequest::all());
    assert_eq!(keys(&rows), ["sho#1", "shop", "shop2#1", "shoq"]);
    // A prefix matching nothing drops nothing; the table stays writable.
    ok(ctx.store().drop_row_range(t.name(), b"x"), "drop_row_range");
    write(&t, "shop#3", &[set("a", "q", 1, "v")]);
    assert_eq!(read(&t, &ReadRowsRequest::all()).len(), 5);
    expect_err(
        ctx.store().drop_row_range(t.name(), b""),
        "drop_row_range of an empty prefix",
        |e| matches!(e, Error::InvalidArgument(_)),
    );
    expect_err(
        ctx.store().drop_row_range(&ctx.unique_name(), b"a"),
        "drop_row_range of a missing table",
        |e| matches!(e, Error::TableNotFound { .. }),
    );
}
