//! Salted fan-out scans return exactly what the same scan of an unsalted
//! table returns: same rows, same order (k-way merge) or same set
//! (unordered), limits respected across the merge; and a forward-looking
//! migration reads old and new key spaces as one table.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use affinity_embedded::EmbeddedStore;
use affinity_model::{
    Bytes, GcRule, MemoryStore, Mutation, ReadRowsRequest, Row, RowFilter, RowRange, RowSet, Store,
    Table, TableSpec,
};
use affinity_rowkey::salt::{SaltScope, Salter};
use affinity_rowkey::{MigratingTable, SaltedTable, ScanOrder};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

fn spec() -> TableSpec {
    TableSpec::new().with_family("f", GcRule::MaxVersions(1))
}

fn table(store: &dyn Store, name: &str) -> Arc<dyn Table> {
    store.create_table(name, &spec()).unwrap();
    store.open_table(name).unwrap()
}

fn put(value: &[u8]) -> Vec<Mutation> {
    vec![Mutation::set_cell(
        "f",
        "q",
        1000,
        Bytes::copy_from_slice(value),
    )]
}

fn collect(rows: impl Iterator<Item = affinity_rowkey::Result<Row>>) -> Vec<Row> {
    rows.collect::<Result<_, _>>().unwrap()
}

fn keys() -> impl Strategy<Value = Vec<Vec<u8>>> {
    // Short keys over a small alphabet share prefixes often; '-' is the
    // component separator of scoped salting.
    prop::collection::btree_set(
        prop::collection::vec(prop::sample::select(&b"ab-0\xff"[..]), 1..6),
        0..60,
    )
    .prop_map(|s| s.into_iter().collect())
}

fn scope() -> impl Strategy<Value = SaltScope> {
    prop_oneof![
        Just(SaltScope::WholeKey),
        (1usize..4).prop_map(SaltScope::Bytes),
        (1usize..3).prop_map(|count| SaltScope::Components {
            separator: b'-',
            count
        }),
    ]
}

fn request() -> impl Strategy<Value = ReadRowsRequest> {
    let bytes = || prop::collection::vec(prop::sample::select(&b"ab-0\xff"[..]), 0..4);
    let rows = prop_oneof![
        Just(RowSet::all()),
        bytes().prop_map(|p| RowSet::from_range(if p.is_empty() {
            RowRange::all()
        } else {
            RowRange::prefix(p)
        })),
        (bytes(), bytes()).prop_map(|(a, b)| {
            let (a, b) = if a <= b { (a, b) } else { (b, a) };
            RowSet::from_range(RowRange::closed_open(a, b))
        }),
        prop::collection::vec(bytes(), 1..4).prop_map(|ks| RowSet {
            keys: ks
                .into_iter()
                .filter(|k| !k.is_empty())
                .map(Bytes::from)
                .collect(),
            ranges: vec![RowRange::prefix("a-")],
        }),
    ];
    (
        rows,
        prop::option::of(0u64..20),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(rows, limit, reversed, filtered)| ReadRowsRequest {
            rows,
            filter: filtered.then(|| RowFilter::ValueRegex(Bytes::from_static(b".*a.*"))),
            rows_limit: limit,
            reversed,
        })
}

static NEXT_TABLE: AtomicUsize = AtomicUsize::new(0);

/// Write `keys` to a plain and a salted table of `store`, then check that
/// every way of scanning the salted one gives the plain table's answer.
fn check_salted_scan(
    store: &dyn Store,
    keys: &[Vec<u8>],
    salter: Salter,
    request: &ReadRowsRequest,
) -> Result<(), TestCaseError> {
    let n = NEXT_TABLE.fetch_add(1, Ordering::Relaxed);
    let plain = table(store, &format!("plain{n}"));
    let salted = SaltedTable::new(table(store, &format!("salted{n}")), salter);
    for (i, key) in keys.iter().enumerate() {
        let value = if i % 2 == 0 { b"a".as_slice() } else { b"b" };
        plain.mutate_row(key, &put(value)).unwrap();
        salted.mutate_row(key, &put(value)).unwrap();
    }
    let expected: Vec<Row> = plain
        .read_rows(request)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let ordered = collect(salted.read_rows(request, ScanOrder::KeyOrder).unwrap());
    prop_assert_eq!(&ordered, &expected);

    let mut unordered = collect(salted.read_rows(request, ScanOrder::Unordered).unwrap());
    let mut unlimited = ReadRowsRequest {
        rows_limit: None,
        ..request.clone()
    };
    unlimited.reversed = false;
    let all: Vec<Row> = plain
        .read_rows(&unlimited)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    prop_assert_eq!(unordered.len(), expected.len());
    unordered.sort_by(|a, b| a.key.cmp(&b.key));
    unordered.dedup_by(|a, b| a.key == b.key);
    prop_assert_eq!(unordered.len(), expected.len(), "duplicate rows");
    for row in &unordered {
        prop_assert!(all.contains(row));
    }
    for key in keys {
        let point = salted.read_row(key, None).unwrap();
        prop_assert_eq!(point.map(|r| r.key.to_vec()), Some(key.clone()));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    #[test]
    fn salted_scan_equals_unsalted_scan_in_memory(
        keys in keys(), buckets in 1u32..12, scope in scope(), request in request(),
    ) {
        let store = MemoryStore::new();
        check_salted_scan(&store, &keys, Salter::new(buckets).unwrap().with_scope(scope), &request)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]

    #[test]
    fn salted_scan_equals_unsalted_scan_on_the_embedded_store(
        keys in keys(), buckets in 1u32..12, scope in scope(), request in request(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        check_salted_scan(&store, &keys, Salter::new(buckets).unwrap().with_scope(scope), &request)?;
    }
}

#[test]
fn physical_keys_carry_the_salt() {
    let store = MemoryStore::new();
    let salter = Salter::new(16).unwrap();
    let salted = SaltedTable::new(table(&store, "t"), salter.clone());
    salted.mutate_row(b"user42", &put(b"v")).unwrap();
    let raw: Vec<Row> = salted
        .table()
        .read_rows(&ReadRowsRequest::all())
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(raw[0].key.as_ref(), b"12user42");
    assert_eq!(salter.unsalt(&raw[0].key).unwrap(), b"user42");
}

#[test]
fn scoped_prefix_scan_reads_one_bucket() {
    let store = MemoryStore::new();
    let salter = Salter::new(8).unwrap().with_scope(SaltScope::Components {
        separator: b'-',
        count: 2,
    });
    let salted = SaltedTable::new(table(&store, "t"), salter.clone());
    for ts in 0..20 {
        salted
            .mutate_row(format!("u1-siteA-{ts:03}").as_bytes(), &put(b"v"))
            .unwrap();
        salted
            .mutate_row(format!("u1-siteB-{ts:03}").as_bytes(), &put(b"v"))
            .unwrap();
    }
    let raw: Vec<Row> = salted
        .table()
        .read_rows(&ReadRowsRequest::all())
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let bucket_a = salter.salt_field(salter.bucket(b"u1-siteA"));
    assert_eq!(
        raw.iter()
            .filter(|r| r.key.starts_with(&bucket_a) && r.key[1..].starts_with(b"u1-siteA"))
            .count(),
        20
    );
    let rows = collect(
        salted
            .scan_prefix(b"u1-siteA-", ScanOrder::KeyOrder, Some(5))
            .unwrap(),
    );
    let got: Vec<&[u8]> = rows.iter().map(|r| r.key.as_ref()).collect();
    assert_eq!(
        got,
        vec![
            &b"u1-siteA-000"[..],
            b"u1-siteA-001",
            b"u1-siteA-002",
            b"u1-siteA-003",
            b"u1-siteA-004"
        ]
    );
}

fn migration_case(shared: bool) {
    let store = MemoryStore::new();
    let old = table(&store, "old");
    let salter = Salter::new(4).unwrap();
    let cutoff = 1_000_000;
    let m = if shared {
        MigratingTable::same_table(Arc::clone(&old), salter, cutoff)
    } else {
        MigratingTable::separate(Arc::clone(&old), table(&store, "new"), salter, cutoff)
    };
    let mut plain = std::collections::BTreeMap::new();
    for i in 0..40u32 {
        let key = format!("k{:02}", i * 7 % 40);
        let at = if i < 20 { cutoff - 1 } else { cutoff };
        m.mutate_row_at(
            key.as_bytes(),
            &[Mutation::set_cell("f", format!("q{i}"), 1000, "v")],
            at,
        )
        .unwrap();
        plain
            .entry(key)
            .or_insert_with(Vec::new)
            .push(format!("q{i}"));
    }
    // The same logical row written before and after the cut-off: both
    // cells come back as one row.
    m.mutate_row_at(b"k05", &[Mutation::set_cell("f", "old", 1000, "v")], 0)
        .unwrap();
    m.mutate_row_at(
        b"k05",
        &[Mutation::set_cell("f", "new", 1000, "v")],
        cutoff + 5,
    )
    .unwrap();
    plain
        .get_mut("k05")
        .unwrap()
        .extend(["old".to_string(), "new".to_string()]);
    let rows = collect(m.read_rows(&ReadRowsRequest::all()).unwrap());
    let got: Vec<(String, Vec<String>)> = rows
        .iter()
        .map(|r| {
            let mut q: Vec<String> = r
                .cells
                .iter()
                .map(|c| String::from_utf8_lossy(&c.qualifier).into_owned())
                .collect();
            q.sort();
            (String::from_utf8_lossy(&r.key).into_owned(), q)
        })
        .collect();
    let want: Vec<(String, Vec<String>)> = plain
        .into_iter()
        .map(|(k, mut q)| {
            q.sort();
            (k, q)
        })
        .collect();
    assert_eq!(got, want);
    let reversed = collect(
        m.read_rows(&ReadRowsRequest::all().reversed(true).with_limit(3))
            .unwrap(),
    );
    let rk: Vec<&[u8]> = reversed.iter().map(|r| r.key.as_ref()).collect();
    assert_eq!(rk, vec![&b"k39"[..], b"k38", b"k37"]);
    let k05 = m.read_row(b"k05", None).unwrap().unwrap();
    assert!(k05.latest("f", b"old").is_some() && k05.latest("f", b"new").is_some());
    // A deletion after the cut-off removes the old cells too.
    m.mutate_row_at(b"k05", &[Mutation::DeleteFromRow], cutoff + 6)
        .unwrap();
    assert!(m.read_row(b"k05", None).unwrap().is_none());
    if shared {
        assert!(m.mutate_row_at(b"12abc", &put(b"v"), 0).is_err());
    }
}

#[test]
fn migration_merges_old_and_new_spaces_in_one_table() {
    migration_case(true);
}

#[test]
fn migration_merges_old_and_new_tables() {
    migration_case(false);
}

#[test]
fn dropping_a_scan_early_stops_it() {
    let store = MemoryStore::new();
    let salted = SaltedTable::new(table(&store, "t"), Salter::new(16).unwrap());
    for i in 0..5000 {
        salted
            .mutate_row(format!("key{i:05}").as_bytes(), &put(b"v"))
            .unwrap();
    }
    let mut scan = salted.scan_prefix(b"", ScanOrder::KeyOrder, None).unwrap();
    let first = scan.next().unwrap().unwrap();
    assert_eq!(first.key.as_ref(), b"key00000");
    drop(scan);
    let n = collect(
        salted
            .scan_prefix(b"key0", ScanOrder::Unordered, Some(1234))
            .unwrap(),
    )
    .len();
    assert_eq!(n, 1234);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// Rows written before and after the cut-off, read through the
    /// migration, equal the same writes to one plain table.
    #[test]
    fn migration_reads_equal_a_plain_table(
        writes in prop::collection::vec((prop::collection::vec(prop::sample::select(&b"ab-0"[..]), 0..4), any::<bool>(), 0u8..3), 0..40),
        shared in any::<bool>(), buckets in 1u32..6, request in request(),
    ) {
        let store = MemoryStore::new();
        let plain = table(&store, "plain");
        let old = table(&store, "old");
        let salter = Salter::new(buckets).unwrap();
        let cutoff = 5_000;
        let m = if shared {
            MigratingTable::same_table(old, salter, cutoff)
        } else {
            MigratingTable::separate(old, table(&store, "new"), salter, cutoff)
        };
        for (tail, after, q) in &writes {
            // Logical keys start with a letter, as app ids do, so none
            // looks like a salt field in a shared table.
            let key = [b"a".as_slice(), tail].concat();
            let mutation = [Mutation::set_cell("f", format!("q{q}"), 1000, if *after { "a" } else { "b" })];
            plain.mutate_row(&key, &mutation).unwrap();
            m.mutate_row_at(&key, &mutation, if *after { cutoff } else { cutoff - 1 }).unwrap();
        }
        // A column written on both sides of the cut-off has a cell in each
        // space (same timestamp), where a plain table keeps one: compare
        // the columns of each row.
        let columns = |rows: &[Row]| -> Vec<(Bytes, Vec<Bytes>)> {
            rows.iter().map(|r| {
                let mut q: Vec<Bytes> = r.cells.iter().map(|c| c.qualifier.clone()).collect();
                q.dedup();
                (r.key.clone(), q)
            }).collect()
        };
        let request = ReadRowsRequest { filter: None, ..request };
        let expected: Vec<Row> = plain.read_rows(&request).unwrap().collect::<Result<_, _>>().unwrap();
        let got = collect(m.read_rows(&request).unwrap());
        prop_assert_eq!(columns(&got), columns(&expected));
    }
}
