//! The conformance suite and the reference-model runner must fail on a
//! broken backend: a store wrapping `MemoryStore` with one deliberate bug.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use affinity_model::conformance::{
    cases, check_against_reference, run_case, ReferenceConfig, StoreHarness,
};
use affinity_model::{
    FamilyModification, MemoryStore, Mutation, ReadModifyWriteRule, ReadRowsRequest, Result, Row,
    RowFilter, RowMutations, RowStream, SampleRowKey, Store, Table, TableSpec,
};

#[derive(Clone, Copy, PartialEq)]
enum Bug {
    IgnoreReversed,
    DropLastMutation,
    IgnoreFilter,
}

struct BuggyStore {
    inner: MemoryStore,
    bug: Bug,
}

struct BuggyTable {
    inner: Arc<dyn Table>,
    bug: Bug,
}

impl Store for BuggyStore {
    fn create_table(&self, table: &str, spec: &TableSpec) -> Result<()> {
        self.inner.create_table(table, spec)
    }
    fn delete_table(&self, table: &str) -> Result<()> {
        self.inner.delete_table(table)
    }
    fn list_tables(&self) -> Result<Vec<String>> {
        self.inner.list_tables()
    }
    fn table_spec(&self, table: &str) -> Result<TableSpec> {
        self.inner.table_spec(table)
    }
    fn modify_families(&self, table: &str, m: &[FamilyModification]) -> Result<TableSpec> {
        self.inner.modify_families(table, m)
    }
    fn drop_row_range(&self, table: &str, prefix: &[u8]) -> Result<()> {
        self.inner.drop_row_range(table, prefix)
    }

    fn open_table(&self, table: &str) -> Result<Arc<dyn Table>> {
        Ok(Arc::new(BuggyTable {
            inner: self.inner.open_table(table)?,
            bug: self.bug,
        }))
    }
}

impl Table for BuggyTable {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn mutate_row(&self, key: &[u8], mutations: &[Mutation]) -> Result<()> {
        if self.bug == Bug::DropLastMutation && mutations.len() > 1 {
            return self
                .inner
                .mutate_row(key, &mutations[..mutations.len() - 1]);
        }
        self.inner.mutate_row(key, mutations)
    }
    fn mutate_rows(&self, entries: &[RowMutations]) -> Result<Vec<Result<()>>> {
        self.inner.mutate_rows(entries)
    }
    fn check_and_mutate_row(
        &self,
        key: &[u8],
        predicate: Option<&RowFilter>,
        t: &[Mutation],
        f: &[Mutation],
    ) -> Result<bool> {
        self.inner.check_and_mutate_row(key, predicate, t, f)
    }
    fn read_modify_write_row(&self, key: &[u8], rules: &[ReadModifyWriteRule]) -> Result<Row> {
        self.inner.read_modify_write_row(key, rules)
    }
    fn sample_row_keys(&self) -> Result<Vec<SampleRowKey>> {
        self.inner.sample_row_keys()
    }
    fn read_rows(&self, request: &ReadRowsRequest) -> Result<RowStream<'_>> {
        let mut request = request.clone();
        match self.bug {
            Bug::IgnoreReversed => request.reversed = false,
            Bug::IgnoreFilter => request.filter = None,
            Bug::DropLastMutation => {}
        }
        let rows: Vec<Result<Row>> = self.inner.read_rows(&request)?.collect();
        Ok(Box::new(rows.into_iter()))
    }
}

fn buggy(bug: Bug) -> Arc<dyn Store> {
    Arc::new(BuggyStore {
        inner: MemoryStore::new(),
        bug,
    })
}

fn fails(f: impl FnOnce()) -> bool {
    catch_unwind(AssertUnwindSafe(f)).is_err()
}

#[test]
fn cases_fail_on_broken_backends() {
    let reversed = StoreHarness(buggy(Bug::IgnoreReversed));
    assert!(fails(|| run_case(
        &reversed,
        "read_rows_reversed",
        cases::read_rows_reversed
    )));
    let dropping = StoreHarness(buggy(Bug::DropLastMutation));
    assert!(fails(|| run_case(
        &dropping,
        "delete_from_row",
        cases::mutations_apply_in_order
    )));
    let unfiltered = StoreHarness(buggy(Bug::IgnoreFilter));
    assert!(fails(|| run_case(
        &unfiltered,
        "filter_chain",
        cases::filter_chain
    )));
    // And pass on the healthy store.
    let healthy = StoreHarness(Arc::new(MemoryStore::new()));
    run_case(&healthy, "read_rows_reversed", cases::read_rows_reversed);
}

#[test]
fn the_reference_runner_finds_each_bug() {
    for bug in [
        Bug::IgnoreReversed,
        Bug::DropLastMutation,
        Bug::IgnoreFilter,
    ] {
        let config = ReferenceConfig {
            cases: 256,
            max_shrink_iters: 32,
            ..ReferenceConfig::default()
        };
        assert!(fails(|| check_against_reference(buggy(bug), config)));
    }
}
