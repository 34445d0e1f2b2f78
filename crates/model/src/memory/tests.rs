use std::sync::atomic::AtomicI64;
use std::time::Duration;

use super::*;
use crate::rowset::RowSet;
use crate::table_spec::GcRule;

fn store_with(rows: &[&str]) -> (MemoryStore, Arc<dyn Table>) {
    let store = MemoryStore::new();
    store
        .create_table("t", &TableSpec::new().with_family("f", GcRule::None))
        .expect("create");
    let table = store.open_table("t").expect("open");
    for key in rows {
        table
            .mutate_row(
                key.as_bytes(),
                &[Mutation::set_cell("f", "q", 1000, key.to_string())],
            )
            .expect("write");
    }
    (store, table)
}

fn keys(table: &Arc<dyn Table>, request: &ReadRowsRequest) -> Vec<String> {
    table
        .read_rows(request)
        .expect("read")
        .map(|r| String::from_utf8_lossy(&r.expect("row").key).into_owned())
        .collect()
}

#[test]
fn row_sets_are_deduplicated_and_ordered() {
    let (_s, t) = store_with(&["a", "b", "c", "d", "e"]);
    let rows = RowSet {
        keys: vec![
            Bytes::from_static(b"d"),
            Bytes::from_static(b"b"),
            Bytes::from_static(b"zz"),
        ],
        ranges: vec![
            RowRange::closed_open("a", "c"),
            RowRange::closed_open("b", "e"),
        ],
    };
    let request = ReadRowsRequest::new(rows);
    assert_eq!(keys(&t, &request), ["a", "b", "c", "d"]);
    assert_eq!(
        keys(&t, &request.clone().reversed(true).with_limit(3)),
        ["d", "c", "b"]
    );
    assert_eq!(keys(&t, &request.with_limit(0)), ["a", "b", "c", "d"]);
}

#[test]
fn inverted_ranges_are_rejected() {
    let (_s, t) = store_with(&["a"]);
    let request = ReadRowsRequest::new(RowSet::from_range(RowRange::closed_open("b", "a")));
    assert!(matches!(
        t.read_rows(&request).err(),
        Some(Error::InvalidRowRange { .. })
    ));
}

#[test]
fn sample_row_keys_split_by_size() {
    let (_s, t) = store_with(&[]);
    for i in 0..100u32 {
        let key = format!("k{i:03}");
        t.mutate_row(
            key.as_bytes(),
            &[Mutation::set_cell("f", "q", 1000, vec![0u8; 10_000])],
        )
        .expect("write");
    }
    let samples = t.sample_row_keys().expect("samples");
    assert!(samples.len() > 5, "{} samples", samples.len());
    assert_eq!(samples.last().map(|s| s.row_key.is_empty()), Some(true));
    for pair in samples.windows(2) {
        assert!(pair[0].offset_bytes < pair[1].offset_bytes);
        assert!(pair[1].row_key.is_empty() || pair[0].row_key < pair[1].row_key);
    }
}

#[test]
fn dropped_family_data_is_gone() {
    let (s, t) = store_with(&["a"]);
    s.modify_families("t", &[FamilyModification::Drop { family: "f".into() }])
        .expect("drop");
    s.modify_families(
        "t",
        &[FamilyModification::Create {
            family: "f".into(),
            gc_rule: GcRule::None,
        }],
    )
    .expect("create");
    assert!(keys(&t, &ReadRowsRequest::all()).is_empty());
}

#[test]
fn handles_of_deleted_tables_fail() {
    let (s, t) = store_with(&["a"]);
    s.delete_table("t").expect("delete");
    assert!(matches!(
        t.read_rows(&ReadRowsRequest::all()).err(),
        Some(Error::TableNotFound { .. })
    ));
    assert!(matches!(
        s.open_table("t").err(),
        Some(Error::TableNotFound { .. })
    ));
}

#[test]
fn max_age_follows_the_injected_clock() {
    let now = Arc::new(AtomicI64::new(10_000_000_000));
    let clock = now.clone();
    let store = MemoryStore::with_clock(Arc::new(move || clock.load(Ordering::SeqCst)));
    store
        .create_table(
            "t",
            &TableSpec::new().with_family("f", GcRule::MaxAge(Duration::from_secs(60))),
        )
        .expect("create");
    let t = store.open_table("t").expect("open");
    t.mutate_row(
        b"k",
        &[Mutation::set_cell("f", "q", crate::SERVER_TIME, "v")],
    )
    .expect("write");
    assert_eq!(keys(&t, &ReadRowsRequest::all()), ["k"]);
    now.fetch_add(61_000_000, Ordering::SeqCst);
    assert!(keys(&t, &ReadRowsRequest::all()).is_empty());
}
