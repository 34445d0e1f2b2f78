//! `PrefixedTable`: a tenant's rows of a shared table behave as a table of
//! their own (the conformance suite and the reference-model test run
//! through it, with neighbouring tenants' rows in the same physical table),
//! and no method reaches another tenant's rows (a property test driving
//! every method of tenants whose ids are prefixes of one another).

use std::ops::Bound;
use std::sync::Arc;

use affinity_model::conformance::{Capabilities, Harness};
use affinity_model::limits::MAX_ROW_KEY_BYTES;
use affinity_model::prefixed::{check_tenant, tenant_prefix};
use affinity_model::{
    Bytes, FamilyModification, FamilyType, GcRule, MemoryStore, Mutation, PrefixedTable,
    ReadModifyWriteRule, ReadRowsRequest, Result, Row, RowFilter, RowMutations, RowRange, RowRules,
    RowSet, Store, Table, TableSpec,
};
use proptest::prelude::*;

/// The tenant the conformance suite runs as.
const TENANT: &str = "shop";
/// Its neighbours: ids that are prefixes or extensions of it, or differ
/// in case, or end in the id alphabet's bytes around the separator.
const NEIGHBOURS: [&str; 7] = ["sho", "shop2", "shop-", "shop_", "Shop", "shopA", "s"];

/// A store whose tables are opened as tenant [`TENANT`]'s view; opening a
/// table with a standard family writes rows of every neighbour into it, so
/// a read that leaks shows them.
struct TenantStore(Arc<dyn Store>);

impl Store for TenantStore {
    fn create_table(&self, table: &str, spec: &TableSpec) -> Result<()> {
        self.0.create_table(table, spec)
    }
    fn delete_table(&self, table: &str) -> Result<()> {
        self.0.delete_table(table)
    }
    fn list_tables(&self) -> Result<Vec<String>> {
        self.0.list_tables()
    }
    fn table_spec(&self, table: &str) -> Result<TableSpec> {
        self.0.table_spec(table)
    }
    fn modify_families(&self, table: &str, m: &[FamilyModification]) -> Result<TableSpec> {
        self.0.modify_families(table, m)
    }
    fn drop_row_range(&self, table: &str, prefix: &[u8]) -> Result<()> {
        affinity_model::limits::check_row_key_prefix(prefix)?;
        let physical = [tenant_prefix(TENANT)?.as_slice(), prefix].concat();
        self.0.drop_row_range(table, &physical)
    }
    fn open_table(&self, table: &str) -> Result<Arc<dyn Table>> {
        let inner = self.0.open_table(table)?;
        let spec = self.0.table_spec(table)?;
        let family = spec
            .families
            .iter()
            .find(|(_, f)| f.value_type == FamilyType::Standard)
            .map(|(name, _)| name.clone());
        if let Some(family) = family {
            for id in NEIGHBOURS {
                for key in [&b"a"[..], b"\x00", b"\xff", b"#", b"$", b"zz"] {
                    let physical = [tenant_prefix(id)?.as_slice(), key].concat();
                    inner.mutate_row(
                        &physical,
                        &[Mutation::set_cell(family.clone(), "n", -1, "neighbour")],
                    )?;
                }
            }
        }
        Ok(Arc::new(PrefixedTable::new(inner, TENANT, table)?))
    }
}

struct TenantHarness(Arc<dyn Store>);

impl Harness for TenantHarness {
    fn store(&self) -> Arc<dyn Store> {
        Arc::clone(&self.0)
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_row_key_bytes: MAX_ROW_KEY_BYTES - TENANT.len() - 1,
            ..Capabilities::default()
        }
    }
}

fn harness() -> TenantHarness {
    TenantHarness(Arc::new(TenantStore(Arc::new(MemoryStore::new()))))
}

affinity_model::conformance_suite!(harness());
affinity_model::reference_model_test!(harness(), cases = 64);

#[test]
fn tenant_ids_are_checked() {
    for bad in ["", "a#b", "a b", "é", &"x".repeat(65)] {
        assert!(check_tenant(bad).is_err(), "{bad:?} accepted");
    }
    assert_eq!(tenant_prefix("shop-2_A").unwrap(), b"shop-2_A#");
}

#[test]
fn drop_row_range_needs_a_prefix() {
    let store = MemoryStore::new();
    store
        .create_table("t", &TableSpec::new().with_family("f", GcRule::None))
        .unwrap();
    assert!(store.drop_row_range("t", b"").is_err());
    assert!(store.drop_row_range("missing", b"a").is_err());
}

// ---- isolation: every method of every tenant, against a table per tenant

/// Tenants of one physical table: prefixes and extensions of one another.
const TENANTS: [&str; 6] = ["shop", "shop2", "sho", "shop-", "Shop", "s"];

/// Key bytes around the separator and the id alphabet.
fn key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop::sample::select(vec![b'"', b'#', b'$', b'2', b'-', b's', b'h', 0, 0xff]),
        1..4,
    )
}

fn bound() -> impl Strategy<Value = Bound<Bytes>> {
    prop_oneof![
        Just(Bound::Unbounded),
        Just(Bound::Included(Bytes::new())),
        key().prop_map(|k| Bound::Included(Bytes::from(k))),
        key().prop_map(|k| Bound::Excluded(Bytes::from(k))),
    ]
}

fn row_set() -> impl Strategy<Value = RowSet> {
    prop_oneof![
        Just(RowSet::all()),
        prop::collection::vec(key(), 1..3)
            .prop_map(|ks| RowSet::from_keys(ks.into_iter().map(Bytes::from))),
        prop::collection::vec((bound(), bound()), 1..3).prop_map(|rs| RowSet::from_ranges(
            rs.into_iter()
                .map(|(start, end)| RowRange { start, end })
                .collect()
        )),
    ]
}

fn filter() -> impl Strategy<Value = Option<RowFilter>> {
    let regex = prop_oneof![
        Just(".*"),
        Just("\\C*"),
        Just("s.*"),
        Just(".*#.*"),
        Just("shop2#.*"),
        Just("(?s).*"),
        Just("2|#|\\$"),
    ]
    .prop_map(|p| RowFilter::RowKeyRegex(Bytes::from(p)));
    prop_oneof![
        Just(None),
        regex.clone().prop_map(Some),
        regex.clone().prop_map(|r| Some(RowFilter::Chain(vec![
            RowFilter::PassAll,
            RowFilter::Interleave(vec![r, RowFilter::BlockAll])
        ]))),
        regex.prop_map(|r| Some(RowFilter::Condition {
            predicate: Box::new(r),
            true_filter: Some(Box::new(RowFilter::PassAll)),
            false_filter: None,
        })),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Set(usize, Vec<u8>, u8),
    SetMany(usize, Vec<(Vec<u8>, u8)>),
    DeleteRow(usize, Vec<u8>),
    CheckAndMutate(usize, Vec<u8>, Option<RowFilter>, u8),
    Append(usize, Vec<u8>, u8),
    AppendMany(usize, Vec<Vec<u8>>),
    Read(usize, RowSet, Option<RowFilter>, Option<u64>, bool),
    Visit(usize, RowSet, Option<RowFilter>),
    ReadRow(usize, Vec<u8>, Option<RowFilter>),
    Sample(usize),
    Drop(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let t = 0..TENANTS.len();
    prop_oneof![
        4 => (t.clone(), key(), any::<u8>()).prop_map(|(t, k, v)| Op::Set(t, k, v)),
        2 => (t.clone(), prop::collection::vec((key(), any::<u8>()), 1..4))
            .prop_map(|(t, e)| Op::SetMany(t, e)),
        1 => (t.clone(), key()).prop_map(|(t, k)| Op::DeleteRow(t, k)),
        1 => (t.clone(), key(), filter(), any::<u8>())
            .prop_map(|(t, k, f, v)| Op::CheckAndMutate(t, k, f, v)),
        1 => (t.clone(), key(), any::<u8>()).prop_map(|(t, k, v)| Op::Append(t, k, v)),
        1 => (t.clone(), prop::collection::vec(key(), 1..3)).prop_map(|(t, k)| Op::AppendMany(t, k)),
        3 => (t.clone(), row_set(), filter(), prop::option::of(1..3u64), any::<bool>())
            .prop_map(|(t, r, f, l, rev)| Op::Read(t, r, f, l, rev)),
        1 => (t.clone(), row_set(), filter()).prop_map(|(t, r, f)| Op::Visit(t, r, f)),
        1 => (t.clone(), key(), filter()).prop_map(|(t, k, f)| Op::ReadRow(t, k, f)),
        1 => t.clone().prop_map(Op::Sample),
        1 => t.prop_map(Op::Drop),
    ]
}

fn spec() -> TableSpec {
    TableSpec::new().with_family("f", GcRule::None)
}

fn rows(table: &dyn Table, request: &ReadRowsRequest) -> Result<Vec<Row>> {
    table.read_rows(request)?.collect()
}

/// The same call on the tenant's view and on its own table: equal results.
fn same<T: PartialEq + std::fmt::Debug>(what: &str, shared: Result<T>, own: Result<T>) {
    match (shared, own) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "{what}"),
        (Err(a), Err(b)) => assert_eq!(a.code(), b.code(), "{what}: {a} vs {b}"),
        (a, b) => panic!("{what}: shared {a:?}, own table {b:?}"),
    }
}

fn run(ops: Vec<Op>) {
    // One fixed clock: read-modify-writes stamp cells with it.
    let clock = || MemoryStore::with_clock(Arc::new(|| 5_000_000_000));
    let physical = Arc::new(clock().with_sample_spacing(16));
    physical.create_table("shared", &spec()).unwrap();
    let inner = physical.open_table("shared").unwrap();
    let views: Vec<PrefixedTable> = TENANTS
        .iter()
        .map(|t| PrefixedTable::new(Arc::clone(&inner), t, format!("shared.{t}")).unwrap())
        .collect();
    let own_store = clock();
    let mut own: Vec<Arc<dyn Table>> = TENANTS
        .iter()
        .map(|t| {
            own_store.create_table(t, &spec()).unwrap();
            own_store.open_table(t).unwrap()
        })
        .collect();
    let set = |v: u8| [Mutation::set_cell("f", "q", 1000, vec![v])];
    for op in ops {
        match op {
            Op::Set(t, k, v) => same(
                "mutate_row",
                views[t].mutate_row(&k, &set(v)),
                own[t].mutate_row(&k, &set(v)),
            ),
            Op::SetMany(t, entries) => {
                let entries: Vec<RowMutations> = entries
                    .into_iter()
                    .map(|(k, v)| RowMutations::new(k, set(v).to_vec()))
                    .collect();
                same(
                    "mutate_rows",
                    views[t].mutate_rows(&entries),
                    own[t].mutate_rows(&entries),
                )
            }
            Op::DeleteRow(t, k) => same(
                "delete row",
                views[t].mutate_row(&k, &[Mutation::DeleteFromRow]),
                own[t].mutate_row(&k, &[Mutation::DeleteFromRow]),
            ),
            Op::CheckAndMutate(t, k, f, v) => same(
                "check_and_mutate_row",
                views[t].check_and_mutate_row(&k, f.as_ref(), &set(v), &[]),
                own[t].check_and_mutate_row(&k, f.as_ref(), &set(v), &[]),
            ),
            Op::Append(t, k, v) => {
                let rule = [ReadModifyWriteRule::append("f", "a", vec![v])];
                same(
                    "read_modify_write_row",
                    views[t].read_modify_write_row(&k, &rule).map(|r| r.key),
                    own[t].read_modify_write_row(&k, &rule).map(|r| r.key),
                )
            }
            Op::AppendMany(t, keys) => {
                let entries: Vec<RowRules> = keys
                    .into_iter()
                    .map(|k| RowRules::new(k, vec![ReadModifyWriteRule::append("f", "a", "x")]))
                    .collect();
                let keys = |r: Result<Vec<Result<Row>>>| {
                    r.map(|v| {
                        v.into_iter()
                            .map(|r| r.map(|r| r.key).ok())
                            .collect::<Vec<_>>()
                    })
                };
                same(
                    "read_modify_write_rows",
                    keys(views[t].read_modify_write_rows(&entries)),
                    keys(own[t].read_modify_write_rows(&entries)),
                )
            }
            Op::Read(t, rows_set, f, limit, reversed) => {
                let mut request = ReadRowsRequest::new(rows_set).reversed(reversed);
                request.filter = f;
                request.rows_limit = limit;
                same(
                    "read_rows",
                    rows(&views[t], &request),
                    rows(own[t].as_ref(), &request),
                )
            }
            Op::Visit(t, rows_set, f) => {
                let mut request = ReadRowsRequest::new(rows_set);
                request.filter = f;
                let visit = |table: &dyn Table| -> Result<Vec<Vec<u8>>> {
                    let mut keys = Vec::new();
                    table.visit_rows(&request, &mut |r| {
                        keys.push(r.key.to_vec());
                        Ok(true)
                    })?;
                    Ok(keys)
                };
                same("visit_rows", visit(&views[t]), visit(own[t].as_ref()))
            }
            Op::ReadRow(t, k, f) => same(
                "read_row",
                views[t].read_row(&k, f.as_ref()),
                own[t].read_row(&k, f.as_ref()),
            ),
            Op::Sample(t) => {
                // The tenant's split points are the physical ones inside
                // its prefix, stripped, in order, ending with the end key.
                let prefix = tenant_prefix(TENANTS[t]).unwrap();
                let expected: Vec<Bytes> = inner
                    .sample_row_keys()
                    .unwrap()
                    .into_iter()
                    .filter(|s| s.row_key.len() > prefix.len() && s.row_key.starts_with(&prefix))
                    .map(|s| s.row_key.slice(prefix.len()..))
                    .chain([Bytes::new()])
                    .collect();
                let samples = views[t].sample_row_keys().unwrap();
                let keys: Vec<Bytes> = samples.iter().map(|s| s.row_key.clone()).collect();
                assert_eq!(keys, expected);
                assert!(samples
                    .windows(2)
                    .all(|w| w[0].offset_bytes <= w[1].offset_bytes));
            }
            Op::Drop(t) => {
                physical
                    .drop_row_range("shared", &tenant_prefix(TENANTS[t]).unwrap())
                    .unwrap();
                own_store.delete_table(TENANTS[t]).unwrap();
                own_store.create_table(TENANTS[t], &spec()).unwrap();
                own[t] = own_store.open_table(TENANTS[t]).unwrap();
            }
        }
        // Every tenant sees exactly its own table's rows, and the physical
        // table holds nothing but the tenants' rows.
        let mut total = 0;
        for (t, view) in views.iter().enumerate() {
            let mine = rows(view, &ReadRowsRequest::all()).unwrap();
            total += mine.len();
            assert_eq!(
                mine,
                rows(own[t].as_ref(), &ReadRowsRequest::all()).unwrap()
            );
        }
        assert_eq!(
            total,
            rows(inner.as_ref(), &ReadRowsRequest::all()).unwrap().len()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn no_tenant_reaches_another(ops in prop::collection::vec(op(), 1..40)) {
        run(ops);
    }
}
