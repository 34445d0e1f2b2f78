//! The storage traits every backend implements.

use std::sync::Arc;

use crate::cell::{recycle_cells, CellRef, Row, RowRef, SampleRowKey};
use crate::error::Result;
use crate::filter::RowFilter;
use crate::mutation::{Mutation, ReadModifyWriteRule, RowMutations, RowRules};
use crate::rowset::ReadRowsRequest;
use crate::table_spec::{FamilyModification, TableSpec};

/// A stream of rows in key order (descending when the request is reversed).
/// An `Err` item ends the stream.
pub type RowStream<'a> = Box<dyn Iterator<Item = Result<Row>> + Send + 'a>;

/// An instance: a set of named tables (Bigtable's admin API).
pub trait Store: Send + Sync {
    /// Create a table with the given families.
    fn create_table(&self, table: &str, spec: &TableSpec) -> Result<()>;
    /// Delete a table and all its data.
    fn delete_table(&self, table: &str) -> Result<()>;
    /// Names of all tables, sorted.
    fn list_tables(&self) -> Result<Vec<String>>;
    /// The families of a table.
    fn table_spec(&self, table: &str) -> Result<TableSpec>;
    /// Create, update or drop families; returns the new spec. All
    /// modifications are validated before any is applied.
    fn modify_families(
        &self,
        table: &str,
        modifications: &[FamilyModification],
    ) -> Result<TableSpec>;
    /// A handle for reading and writing a table.
    fn open_table(&self, table: &str) -> Result<Arc<dyn Table>>;
    /// Delete every row whose key starts with `prefix` (non-empty, at most
    /// a row key's length; see [`crate::limits::check_row_key_prefix`]),
    /// as Bigtable's `DropRowRange` with `row_key_prefix` does. Rows
    /// written concurrently may or may not survive.
    fn drop_row_range(&self, table: &str, prefix: &[u8]) -> Result<()>;
}

/// One table's data operations (Bigtable's data API). Every method is atomic
/// per row: a reader sees all of a row mutation or none of it.
pub trait Table: Send + Sync {
    /// The table's name.
    fn name(&self) -> &str;

    /// Apply mutations to one row atomically.
    fn mutate_row(&self, row_key: &[u8], mutations: &[Mutation]) -> Result<()>;

    /// Apply several row mutations; each entry is atomic on its own and gets
    /// its own status. The outer error is for failures of the whole request
    /// (too many mutations in total, unavailable backend).
    fn mutate_rows(&self, entries: &[RowMutations]) -> Result<Vec<Result<()>>>;

    /// [`Table::mutate_rows`] for writes that a durable write to the same
    /// store follows before anyone is told they were made (an Affinity
    /// extension): ingestion's event rows, trends and late markers, whose
    /// batch is acknowledged after its state adds, written last and
    /// durably. The embedded store writes them without syncing its log;
    /// one log holds every table's writes in order, so the sync of the
    /// later write makes them durable too, and a crash before it loses at
    /// most such writes, of a request not yet answered. Other stores: as
    /// `mutate_rows`.
    fn mutate_rows_unsynced(&self, entries: &[RowMutations]) -> Result<Vec<Result<()>>> {
        self.mutate_rows(entries)
    }

    /// Atomically: evaluate `predicate` on the row (no predicate: "the row
    /// has any cell"), apply `true_mutations` if it output any cell, else
    /// `false_mutations`. Returns whether the predicate matched. The row
    /// key and both mutation lists are checked before the predicate, so a
    /// request with both kinds of fault reports the mutation's.
    fn check_and_mutate_row(
        &self,
        row_key: &[u8],
        predicate: Option<&RowFilter>,
        true_mutations: &[Mutation],
        false_mutations: &[Mutation],
    ) -> Result<bool>;

    /// [`Table::check_and_mutate_row`] for a write whose loss in a crash
    /// is the same as its never having run: derived data that whatever
    /// wrote it redoes when it finds it missing, such as a rollup's fold.
    /// A store may acknowledge it before it is durable (an Affinity
    /// extension): the embedded store writes it without syncing its log,
    /// and since one log holds every table's writes in order, the next
    /// durable write makes it durable too; a crash loses at most such
    /// writes made after the last durable one. Other stores: as
    /// `check_and_mutate_row`.
    fn check_and_mutate_row_unsynced(
        &self,
        row_key: &[u8],
        predicate: Option<&RowFilter>,
        true_mutations: &[Mutation],
        false_mutations: &[Mutation],
    ) -> Result<bool> {
        self.check_and_mutate_row(row_key, predicate, true_mutations, false_mutations)
    }

    /// Atomically apply append/increment rules to the latest cells of their
    /// columns; returns the new cells written (one per rule's column).
    fn read_modify_write_row(&self, row_key: &[u8], rules: &[ReadModifyWriteRule]) -> Result<Row>;

    /// Several read-modify-writes (an Affinity extension; Bigtable has no
    /// such RPC). Each entry is atomic on its own row and gets its own
    /// status, `Ok` holding the cells it wrote as
    /// [`Table::read_modify_write_row`] returns them; entries on the same
    /// row apply in order. The outer error is for failures of the whole
    /// request. Nothing is retried (each try would apply again). Backends
    /// may commit the entries together: the embedded store does all of
    /// them in one synced write, Cloud Bigtable sends them concurrently.
    fn read_modify_write_rows(&self, entries: &[RowRules]) -> Result<Vec<Result<Row>>> {
        Ok(entries
            .iter()
            .map(|e| self.read_modify_write_row(&e.row_key, &e.rules))
            .collect())
    }

    /// Split points spaced by data size, ending with the table's end (an
    /// empty key), as Bigtable returns them.
    fn sample_row_keys(&self) -> Result<Vec<SampleRowKey>>;

    /// Read rows.
    fn read_rows(&self, request: &ReadRowsRequest) -> Result<RowStream<'_>>;

    /// Read rows as [`Table::read_rows`] does, showing each to `visit` as
    /// views of the store's buffers (labels are not shown): a backend can
    /// serve a scan without building a [`Row`] per row or a `String` per
    /// cell. `visit` returns `Ok(true)` to go on, `Ok(false)` to stop; its
    /// error ends the read and is returned.
    fn visit_rows(
        &self,
        request: &ReadRowsRequest,
        visit: &mut dyn FnMut(RowRef<'_>) -> Result<bool>,
    ) -> Result<()> {
        visit_each(self.read_rows(request)?, visit)
    }

    /// Read one row, `None` when it has no cells (after the filter).
    fn read_row(&self, row_key: &[u8], filter: Option<&RowFilter>) -> Result<Option<Row>> {
        let mut request =
            ReadRowsRequest::new(crate::RowSet::from_keys([bytes::Bytes::copy_from_slice(
                row_key,
            )]));
        request.filter = filter.cloned();
        self.read_rows(&request)?.next().transpose()
    }
}

/// Show each row of a stream to `visit` as a [`RowRef`] (what
/// [`Table::visit_rows`] does by default), until the stream ends, an item
/// is an error, or `visit` returns `Ok(false)` or an error.
pub fn visit_each(
    rows: impl Iterator<Item = Result<Row>>,
    visit: &mut dyn FnMut(RowRef<'_>) -> Result<bool>,
) -> Result<()> {
    let mut buffer: Vec<CellRef<'static>> = Vec::new();
    for row in rows {
        let row = row?;
        let mut cells = recycle_cells(std::mem::take(&mut buffer));
        cells.extend(row.cells.iter().map(CellRef::from));
        let go_on = visit(RowRef {
            key: &row.key,
            cells: &cells,
        })?;
        buffer = recycle_cells(cells);
        if !go_on {
            break;
        }
    }
    Ok(())
}
