//! A [`Store`] wrapper that counts what reads return: rows, cells and bytes
//! (family + qualifier + value of each cell; row keys not included) per
//! table, from `read_rows` streams, `visit_rows` and `read_row`. Every trait
//! method, default ones included, delegates to the wrapped store, so code
//! above it behaves exactly as on the store itself (the schema benchmark
//! measures what the engine reads with it).
//!
//! ```
//! use std::sync::Arc;
//! use affinity_model::counting::CountingStore;
//! use affinity_model::{GcRule, MemoryStore, Mutation, ReadRowsRequest, Store, TableSpec};
//!
//! let store = CountingStore::new(Arc::new(MemoryStore::new()));
//! store.create_table("t", &TableSpec::new().with_family("e", GcRule::None))?;
//! let table = store.open_table("t")?;
//! table.mutate_row(b"r1", &[Mutation::set_cell("e", "q", 1_000, "value")])?;
//! assert_eq!(table.read_rows(&ReadRowsRequest::all())?.count(), 1);
//! let counts = store.counts("t");
//! assert_eq!((counts.rows, counts.cells, counts.bytes), (1, 1, 7));
//! # Ok::<(), affinity_model::Error>(())
//! ```

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::{
    FamilyModification, Mutation, ReadModifyWriteRule, ReadRowsRequest, Result, Row, RowFilter,
    RowMutations, RowRef, RowRules, RowStream, SampleRowKey, Store, Table, TableSpec,
};

/// What reads of one table returned so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub rows: u64,
    pub cells: u64,
    pub bytes: u64,
}

impl Counts {
    /// `self - earlier`.
    pub fn since(self, earlier: Counts) -> Counts {
        Counts {
            rows: self.rows - earlier.rows,
            cells: self.cells - earlier.cells,
            bytes: self.bytes - earlier.bytes,
        }
    }

    fn add_row(&mut self, row: &Row) {
        self.rows += 1;
        for cell in &row.cells {
            self.cells += 1;
            self.bytes += (cell.family.len() + cell.qualifier.len() + cell.value.len()) as u64;
        }
    }

    fn add_row_ref(&mut self, row: &RowRef<'_>) {
        self.rows += 1;
        for cell in row.cells {
            self.cells += 1;
            self.bytes += (cell.family.len() + cell.qualifier.len() + cell.value.len()) as u64;
        }
    }
}

#[derive(Debug, Default)]
struct Counters {
    rows: AtomicU64,
    cells: AtomicU64,
    bytes: AtomicU64,
}

impl Counters {
    fn add(&self, c: Counts) {
        self.rows.fetch_add(c.rows, Ordering::Relaxed);
        self.cells.fetch_add(c.cells, Ordering::Relaxed);
        self.bytes.fetch_add(c.bytes, Ordering::Relaxed);
    }

    fn get(&self) -> Counts {
        Counts {
            rows: self.rows.load(Ordering::Relaxed),
            cells: self.cells.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        }
    }
}

/// A store whose tables count what their reads return.
pub struct CountingStore {
    inner: Arc<dyn Store>,
    tables: Mutex<HashMap<String, Arc<Counters>>>,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn Store>) -> CountingStore {
        CountingStore {
            inner,
            tables: Mutex::new(HashMap::new()),
        }
    }

    fn counters(&self, table: &str) -> Arc<Counters> {
        let mut tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(tables.entry(table.to_string()).or_default())
    }

    /// What reads of `table` returned since the store was wrapped.
    pub fn counts(&self, table: &str) -> Counts {
        self.counters(table).get()
    }
}

impl Store for CountingStore {
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

    fn modify_families(
        &self,
        table: &str,
        modifications: &[FamilyModification],
    ) -> Result<TableSpec> {
        self.inner.modify_families(table, modifications)
    }

    fn drop_row_range(&self, table: &str, prefix: &[u8]) -> Result<()> {
        self.inner.drop_row_range(table, prefix)
    }

    fn open_table(&self, table: &str) -> Result<Arc<dyn Table>> {
        Ok(Arc::new(CountingTable {
            inner: self.inner.open_table(table)?,
            counters: self.counters(table),
        }))
    }
}

/// One table of a [`CountingStore`].
struct CountingTable {
    inner: Arc<dyn Table>,
    counters: Arc<Counters>,
}

impl Table for CountingTable {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn mutate_row(&self, row_key: &[u8], mutations: &[Mutation]) -> Result<()> {
        self.inner.mutate_row(row_key, mutations)
    }

    fn mutate_rows(&self, entries: &[RowMutations]) -> Result<Vec<Result<()>>> {
        self.inner.mutate_rows(entries)
    }

    fn mutate_rows_unsynced(&self, entries: &[RowMutations]) -> Result<Vec<Result<()>>> {
        self.inner.mutate_rows_unsynced(entries)
    }

    fn check_and_mutate_row(
        &self,
        row_key: &[u8],
        predicate: Option<&RowFilter>,
        true_mutations: &[Mutation],
        false_mutations: &[Mutation],
    ) -> Result<bool> {
        self.inner
            .check_and_mutate_row(row_key, predicate, true_mutations, false_mutations)
    }

    fn check_and_mutate_row_unsynced(
        &self,
        row_key: &[u8],
        predicate: Option<&RowFilter>,
        true_mutations: &[Mutation],
        false_mutations: &[Mutation],
    ) -> Result<bool> {
        self.inner.check_and_mutate_row_unsynced(
            row_key,
            predicate,
            true_mutations,
            false_mutations,
        )
    }

    fn read_modify_write_row(&self, row_key: &[u8], rules: &[ReadModifyWriteRule]) -> Result<Row> {
        self.inner.read_modify_write_row(row_key, rules)
    }

    fn read_modify_write_rows(&self, entries: &[RowRules]) -> Result<Vec<Result<Row>>> {
        self.inner.read_modify_write_rows(entries)
    }

    fn sample_row_keys(&self) -> Result<Vec<SampleRowKey>> {
        self.inner.sample_row_keys()
    }

    fn read_rows(&self, request: &ReadRowsRequest) -> Result<RowStream<'_>> {
        Ok(Box::new(CountingStream {
            inner: self.inner.read_rows(request)?,
            counters: &self.counters,
            counts: Counts::default(),
        }))
    }

    fn visit_rows(
        &self,
        request: &ReadRowsRequest,
        visit: &mut dyn FnMut(RowRef<'_>) -> Result<bool>,
    ) -> Result<()> {
        let mut counts = Counts::default();
        let result = self.inner.visit_rows(request, &mut |row| {
            counts.add_row_ref(&row);
            visit(row)
        });
        self.counters.add(counts);
        result
    }

    fn read_row(&self, row_key: &[u8], filter: Option<&RowFilter>) -> Result<Option<Row>> {
        let row = self.inner.read_row(row_key, filter)?;
        if let Some(row) = &row {
            let mut counts = Counts::default();
            counts.add_row(row);
            self.counters.add(counts);
        }
        Ok(row)
    }
}

/// Counts rows locally and adds them to the table's counters when dropped
/// (one atomic update per stream, not per row).
struct CountingStream<'a> {
    inner: RowStream<'a>,
    counters: &'a Counters,
    counts: Counts,
}

impl Iterator for CountingStream<'_> {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        let item = self.inner.next();
        if let Some(Ok(row)) = &item {
            self.counts.add_row(row);
        }
        item
    }
}

impl Drop for CountingStream<'_> {
    fn drop(&mut self) {
        self.counters.add(self.counts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GcRule, MemoryStore, RowRange, RowSet};

    #[test]
    fn counts_equal_what_a_plain_read_returns() {
        let inner: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let store = CountingStore::new(Arc::clone(&inner));
        let spec = TableSpec::new()
            .with_family("e", GcRule::None)
            .with_family("view", GcRule::None);
        store.create_table("t", &spec).unwrap();
        let table = store.open_table("t").unwrap();
        for i in 0..50u32 {
            let key = format!("row{i:03}");
            let mut muts = vec![Mutation::set_cell(
                "e",
                format!("q{i}"),
                1000,
                vec![7u8; i as usize],
            )];
            if i % 3 == 0 {
                muts.push(Mutation::set_cell("view", "Product Viewed", 2000, "{}"));
            }
            table.mutate_row(key.as_bytes(), &muts).unwrap();
        }
        let plain = inner.open_table("t").unwrap();
        let requests = [
            ReadRowsRequest::all(),
            ReadRowsRequest::new(RowSet::from_range(RowRange::prefix("row01")))
                .with_filter(RowFilter::exact_family("e")),
        ];
        for request in requests {
            let mut expected = Counts::default();
            for row in plain.read_rows(&request).unwrap() {
                expected.add_row(&row.unwrap());
            }
            assert!(expected.cells > 0);
            let before = store.counts("t");
            let rows = table.read_rows(&request).unwrap().count() as u64;
            let got = store.counts("t").since(before);
            assert_eq!(got, expected);
            assert_eq!(got.rows, rows);
        }
        // A partly consumed stream counts what it returned.
        let before = store.counts("t");
        let taken: Vec<Row> = table
            .read_rows(&ReadRowsRequest::all())
            .unwrap()
            .take(2)
            .map(|r| r.unwrap())
            .collect();
        let mut expected = Counts::default();
        taken.iter().for_each(|r| expected.add_row(r));
        assert_eq!(store.counts("t").since(before), expected);
        // read_row counts too; bytes are family + qualifier + value.
        let before = store.counts("t");
        let row = table.read_row(b"row003", None).unwrap().unwrap();
        let got = store.counts("t").since(before);
        assert_eq!((got.rows, got.cells), (1, 2));
        assert_eq!(got.bytes, (1 + 2 + 3 + 4 + 14 + 2) as u64);
        assert_eq!(row.cells.len(), 2);
        assert_eq!(store.counts("other"), Counts::default());
        assert_eq!(store.list_tables().unwrap(), vec!["t".to_string()]);
    }
}
