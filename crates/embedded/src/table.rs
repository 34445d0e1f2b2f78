//! A table's data operations.
//!
//! `mutate_row(s)` write blind: each row's mutations become one merge
//! operand ([`crate::merge`]), written under the rows' stripes held
//! shared. Check-and-mutate and read-modify-write lock their rows'
//! stripes exclusively, read them, apply the request with the model's
//! semantics ([`crate::write`]) and write the rows back whole. Either way
//! one `WriteBatch` goes to the memtable and the log; the locks are
//! released before the log is synced, so concurrent requests on the same
//! stripes overlap their syncs. The log is sequential, so whatever a later
//! request read from an earlier one is durable no later than the later
//! request itself, and a request returns only once its write is durable.

use rustc_hash::FxHashSet as HashSet;
use std::sync::Arc;

use affinity_model::apply::{apply_mutations, now_micros, predicate_matches, read_modify_write};
use affinity_model::eval::CompiledFilter;
use affinity_model::limits::{
    check_check_and_mutate, check_mutate_rows, check_read_modify_write, check_row_mutations,
    check_row_set,
};
use affinity_model::{
    Bytes, Mutation, ReadModifyWriteRule, ReadRowsRequest, Result, Row, RowFilter, RowMutations,
    RowRef, RowRules, RowStream, SampleRowKey, Table,
};
use rocksdb::WriteBatch;

use crate::error::{in_table, storage};
use crate::locks::Guard;
use crate::merge::encode_operand;
use crate::meta::TableMeta;
use crate::ranges::plan;
use crate::repairer::RepairJob;
use crate::row::encode_created_row;
use crate::scan::{Compiled, Repair, Scan, ScanOptions};
use crate::store::Inner;
use crate::write::Pending;

/// A handle on one table of an [`crate::EmbeddedStore`]. It names the table:
/// if the table is deleted, operations fail with `TableNotFound`.
pub struct EmbeddedTable {
    name: String,
    inner: Arc<Inner>,
}

impl EmbeddedTable {
    pub(crate) fn new(name: String, inner: Arc<Inner>) -> EmbeddedTable {
        EmbeddedTable { name, inner }
    }

    fn meta(&self) -> Result<Arc<TableMeta>> {
        Ok(self.inner.entry(&self.name)?.meta())
    }

    fn check_mutations(
        &self,
        meta: &TableMeta,
        row_key: &[u8],
        mutations: &[Mutation],
    ) -> Result<()> {
        check_row_mutations(&self.name, row_key, mutations, &|f| meta.family_type(f))
    }

    /// The start of every write: lock the rows of `keys` exclusively, then
    /// read them.
    fn begin<'s>(
        &'s self,
        meta: &'s TableMeta,
        keys: &[&Bytes],
    ) -> Result<(Held<'s>, Pending<'s, 's>)> {
        let inner = &*self.inner;
        let held = self.hold_exclusive(keys.iter().map(|k| k.as_ref()));
        let cf = inner.cf(&self.name, meta)?;
        let pending = Pending::load(&inner.db, cf, meta, keys.iter().copied(), now_micros())
            .map_err(|e| in_table(&self.name, e))?;
        Ok((held, pending))
    }

    /// Write `batch` while the stripes are held, note the write on them,
    /// release them, then make the write durable.
    fn commit(&self, batch: WriteBatch, held: Held<'_>) -> Result<()> {
        self.commit_as(batch, held, true)
    }

    /// [`EmbeddedTable::commit`], without the log's sync when `durable`
    /// is false (it is written to the log, so it survives the process,
    /// and the next synced write syncs it too).
    fn commit_as(&self, batch: WriteBatch, held: Held<'_>, durable: bool) -> Result<()> {
        let inner = &*self.inner;
        let written = if batch.is_empty() {
            Ok(())
        } else {
            inner
                .db
                .write_opt(batch, &inner.write_options)
                .map_err(storage)
        };
        if written.is_ok() {
            let sequence = inner.db.latest_sequence_number();
            inner
                .locks
                .note_write(held.stripes.iter().copied(), sequence);
        }
        drop(held);
        written?;
        if durable && inner.options.sync_writes {
            inner.db.flush_wal(true).map_err(storage)?;
        }
        Ok(())
    }

    /// `check_and_mutate_row`, synced when `durable`.
    fn check_and_mutate(
        &self,
        row_key: &[u8],
        predicate: Option<&RowFilter>,
        true_mutations: &[Mutation],
        false_mutations: &[Mutation],
        durable: bool,
    ) -> Result<bool> {
        // Same order of checks as the reference model.
        let meta = self.meta()?;
        check_check_and_mutate(&self.name, row_key, true_mutations, false_mutations, &|f| {
            meta.family_type(f)
        })?;
        let predicate = predicate.map(CompiledFilter::compile).transpose()?;
        let key = Bytes::copy_from_slice(row_key);
        let (held, mut pending) = self.begin(&meta, &[&key])?;
        let now = pending.now_micros();
        let cells = pending.cells(&key).map_err(|e| in_table(&self.name, e))?;
        let matched = predicate_matches(predicate.as_ref(), &key, cells);
        let mutations = if matched {
            true_mutations
        } else {
            false_mutations
        };
        if !mutations.is_empty() {
            apply_mutations(cells, mutations, now);
            self.commit_as(pending.into_batch()?, held, durable)?;
        }
        Ok(matched)
    }

    /// Apply validated entries, in order, in one batch. A row whose
    /// entries only add to aggregate cells (`AddToCell`) gets each entry as
    /// a merge operand ([`crate::merge`]): no read, its stripe held shared.
    /// Every other row is locked exclusively, read, changed and written
    /// back whole; a request that only replaces distinct rows whole skips
    /// the reading and applying ([`EmbeddedTable::write_replaced`]).
    fn write_entries(
        &self,
        meta: &TableMeta,
        entries: &[&RowMutations],
        durable: bool,
    ) -> Result<()> {
        if let Some(rows) = replaced_rows(entries) {
            return self.write_replaced(meta, rows, durable);
        }
        let inner = &*self.inner;
        let locks = &inner.locks;
        // Fx, not SipHash: one request's keys (at most 100,000 mutations'
        // worth) bound what colliding keys could cost.
        let read: HashSet<&Bytes> = entries
            .iter()
            .filter(|e| !is_blind_write(&e.mutations))
            .map(|e| &e.row_key)
            .collect();
        let wanted: Vec<(usize, bool)> = entries
            .iter()
            .map(|e| {
                let stripe = locks.stripe(&self.name, &e.row_key);
                (stripe, read.contains(&e.row_key))
            })
            .collect();
        let held = Held {
            stripes: wanted.iter().map(|(s, _)| *s).collect(),
            guards: locks.lock_mixed(wanted),
        };
        let cf = inner.cf(&self.name, meta)?;
        let read_keys: Vec<&Bytes> = entries
            .iter()
            .map(|e| &e.row_key)
            .filter(|k| read.contains(k))
            .collect();
        // Rows whose first entry here starts with `DeleteFromRow` are
        // written whole without reading what they held.
        let mut first_entry: rustc_hash::FxHashMap<&Bytes, bool> = Default::default();
        for entry in entries.iter().filter(|e| read.contains(&e.row_key)) {
            first_entry.entry(&entry.row_key).or_insert_with(|| {
                matches!(entry.mutations.first(), Some(Mutation::DeleteFromRow))
            });
        }
        let overwritten = |key: &Bytes| first_entry.get(key).copied().unwrap_or(false);
        let mut pending = Pending::load_unless_overwritten(
            &inner.db,
            Arc::clone(&cf),
            meta,
            read_keys,
            overwritten,
            now_micros(),
        )
        .map_err(|e| in_table(&self.name, e))?;
        let now = pending.now_micros();
        let mut operands: Vec<(&Bytes, Vec<u8>)> = Vec::new();
        for entry in entries {
            if read.contains(&entry.row_key) {
                pending
                    .apply(&entry.row_key, &entry.mutations)
                    .map_err(|e| in_table(&self.name, e))?;
            } else {
                let mut operand = Vec::new();
                encode_operand(&mut operand, meta, &entry.mutations, now)?;
                operands.push((&entry.row_key, operand));
            }
        }
        self.commit_as(pending.into_batch_with(operands)?, held, durable)
    }
}

/// The rows of `entries` when each entry replaces a distinct row whole
/// (`DeleteFromRow`, then `SetCell`s), as a batch job writes its output:
/// `(key, cells)` in key order; `None` for any other request.
fn replaced_rows<'e>(entries: &[&'e RowMutations]) -> Option<Vec<(&'e Bytes, &'e [Mutation])>> {
    let mut rows = Vec::with_capacity(entries.len());
    for entry in entries {
        match entry.mutations.as_slice() {
            [Mutation::DeleteFromRow, cells @ ..]
                if cells.iter().all(|m| matches!(m, Mutation::SetCell { .. })) =>
            {
                rows.push((&entry.row_key, cells));
            }
            _ => return None,
        }
    }
    rows.sort_unstable_by(|a, b| a.0.cmp(b.0));
    if rows.windows(2).any(|pair| pair[0].0 == pair[1].0) {
        return None;
    }
    Some(rows)
}

impl EmbeddedTable {
    /// [`EmbeddedTable::write_entries`] of rows replaced whole (see
    /// [`replaced_rows`]): nothing to read and nothing to apply, each row
    /// encoded straight from its cells (what `Pending` makes of such an
    /// entry, without its bookkeeping), an emptied one deleted.
    fn write_replaced(
        &self,
        meta: &TableMeta,
        rows: Vec<(&Bytes, &[Mutation])>,
        durable: bool,
    ) -> Result<()> {
        let held = self.hold_exclusive(rows.iter().map(|(key, _)| key.as_ref()));
        let cf = self.inner.cf(&self.name, meta)?;
        let now = now_micros();
        let mut batch = WriteBatch::default();
        for (key, cells) in rows {
            match encode_created_row(meta, cells, now)? {
                // More than the format byte: some cell GC does not hide.
                Some(encoded) if encoded.len() > 1 => batch.put_cf(&cf, key, encoded),
                _ => batch.delete_cf(&cf, key),
            }
        }
        self.commit_as(batch, held, durable)
    }

    /// Lock the stripes of the rows of `keys` exclusively.
    fn hold_exclusive<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) -> Held<'_> {
        let stripes = self.stripes(keys);
        Held {
            guards: self.inner.locks.lock_many(stripes.clone()),
            stripes,
        }
    }

    /// [`EmbeddedTable::hold_exclusive`] if no stripe of `keys` is held
    /// now; `None`, without waiting, when one is.
    fn try_hold_exclusive<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) -> Option<Held<'_>> {
        let stripes = self.stripes(keys);
        Some(Held {
            guards: self.inner.locks.try_lock_many(stripes.clone())?,
            stripes,
        })
    }

    /// The stripes of the rows of `keys`.
    fn stripes<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) -> Vec<usize> {
        let locks = &self.inner.locks;
        keys.map(|k| locks.stripe(&self.name, k)).collect()
    }

    /// `mutate_rows`, its log synced before it returns when `durable`.
    fn mutate_rows_as(&self, entries: &[RowMutations], durable: bool) -> Result<Vec<Result<()>>> {
        let meta = self.meta()?;
        check_mutate_rows(entries)?;
        let mut statuses: Vec<Result<()>> = entries
            .iter()
            .map(|e| self.check_mutations(&meta, &e.row_key, &e.mutations))
            .collect();
        let valid = passed(&statuses);
        if valid.is_empty() {
            return Ok(statuses);
        }
        let chosen: Vec<&RowMutations> = valid.iter().map(|&i| &entries[i]).collect();
        let written = self.write_entries(&meta, &chosen, durable);
        for &i in &valid {
            statuses[i] = written.clone();
        }
        Ok(statuses)
    }
}

/// Stripes a write holds, and which they are (to note the write on them).
struct Held<'a> {
    #[allow(dead_code)]
    guards: Vec<Guard<'a>>,
    stripes: Vec<usize>,
}

impl EmbeddedTable {
    /// Store rows that reads found as chains of merge operands as the
    /// values they merged to, under their stripes held exclusively (no
    /// blind write can slip in between the check and the write). A row
    /// whose stripe saw no write since the read's iterator was opened
    /// (its sequence number `seen`) is stored as the read merged it; one
    /// that may have changed is read, and merged, again. Nothing is stored
    /// when the table is no longer the one read (`cf_name`: deleted and
    /// created again since), nor when a stripe is held (a batch holds its
    /// rows' stripes until it is in the memtable, at ingestion's lower
    /// priority; an exclusive request waiting for it would hold back the
    /// next batches too), and the next read of the row tries again. Run
    /// by the repair thread (`repairer.rs`). Not logged (see below).
    pub(crate) fn store_merged(&self, cf_name: &str, repairs: &[Repair]) -> Result<()> {
        let inner = &*self.inner;
        let meta = self.meta()?;
        if meta.cf_name != cf_name {
            return Ok(());
        }
        let locks = &inner.locks;
        let Some(held) = self.try_hold_exclusive(repairs.iter().map(|r| r.key.as_slice())) else {
            return Ok(());
        };
        let cf = inner.cf(&self.name, &meta)?;
        let mut batch = WriteBatch::default();
        let mut stale: Vec<&[u8]> = Vec::new();
        for (repair, stripe) in repairs.iter().zip(&held.stripes) {
            if locks.last_write(*stripe) <= repair.seen {
                batch.put_cf(&cf, &repair.key, &repair.merged);
            } else {
                stale.push(&repair.key);
            }
        }
        for (key, value) in stale
            .iter()
            .zip(inner.db.batched_multi_get_cf(&cf, &stale, false))
        {
            if let Some(value) = value.map_err(storage)? {
                batch.put_cf(&cf, key, &*value);
            }
        }
        if !batch.is_empty() {
            // Not logged: a repair only caches what the logged operands
            // already say, so a crash that loses it loses nothing (reads
            // merge the operands again).
            let mut unlogged = rocksdb::WriteOptions::default();
            unlogged.disable_wal(true);
            inner.db.write_opt(batch, &unlogged).map_err(storage)?;
            locks.note_write(
                held.stripes.iter().copied(),
                inner.db.latest_sequence_number(),
            );
        }
        drop(held);
        Ok(())
    }
}

/// True for a non-empty list of `AddToCell`s: an entry written blind, as
/// a merge operand.
fn is_blind_write(mutations: &[Mutation]) -> bool {
    !mutations.is_empty()
        && mutations
            .iter()
            .all(|m| matches!(m, Mutation::AddToCell { .. }))
}

/// Indices of the entries whose checks passed.
fn passed<T>(statuses: &[Result<T>]) -> Vec<usize> {
    (0..statuses.len())
        .filter(|&i| statuses[i].is_ok())
        .collect()
}

impl Table for EmbeddedTable {
    fn name(&self) -> &str {
        &self.name
    }

    fn mutate_row(&self, row_key: &[u8], mutations: &[Mutation]) -> Result<()> {
        let meta = self.meta()?;
        self.check_mutations(&meta, row_key, mutations)?;
        let entry = RowMutations::new(Bytes::copy_from_slice(row_key), mutations.to_vec());
        self.write_entries(&meta, &[&entry], true)
    }

    fn mutate_rows(&self, entries: &[RowMutations]) -> Result<Vec<Result<()>>> {
        self.mutate_rows_as(entries, true)
    }

    fn mutate_rows_unsynced(&self, entries: &[RowMutations]) -> Result<Vec<Result<()>>> {
        self.mutate_rows_as(entries, false)
    }

    fn check_and_mutate_row(
        &self,
        row_key: &[u8],
        predicate: Option<&RowFilter>,
        true_mutations: &[Mutation],
        false_mutations: &[Mutation],
    ) -> Result<bool> {
        self.check_and_mutate(row_key, predicate, true_mutations, false_mutations, true)
    }

    fn check_and_mutate_row_unsynced(
        &self,
        row_key: &[u8],
        predicate: Option<&RowFilter>,
        true_mutations: &[Mutation],
        false_mutations: &[Mutation],
    ) -> Result<bool> {
        self.check_and_mutate(row_key, predicate, true_mutations, false_mutations, false)
    }

    fn read_modify_write_row(&self, row_key: &[u8], rules: &[ReadModifyWriteRule]) -> Result<Row> {
        let entry = RowRules::new(Bytes::copy_from_slice(row_key), rules.to_vec());
        self.read_modify_write_rows(std::slice::from_ref(&entry))?
            .pop()
            .unwrap_or_else(|| {
                Err(affinity_model::Error::Internal(
                    "no status for the row".into(),
                ))
            })
    }

    /// All entries under their rows' locks, read, computed, and committed
    /// in one write: one sync for the whole request.
    fn read_modify_write_rows(&self, entries: &[RowRules]) -> Result<Vec<Result<Row>>> {
        let meta = self.meta()?;
        let mut statuses: Vec<Result<Row>> = entries
            .iter()
            .map(|e| {
                check_read_modify_write(&self.name, &e.row_key, &e.rules, &|f| meta.family_type(f))
                    .map(|()| Row {
                        key: e.row_key.clone(),
                        cells: Vec::new(),
                    })
            })
            .collect();
        let valid = passed(&statuses);
        if valid.is_empty() {
            return Ok(statuses);
        }
        let keys: Vec<&Bytes> = valid.iter().map(|&i| &entries[i].row_key).collect();
        let (held, mut pending) = self.begin(&meta, &keys)?;
        let now = pending.now_micros();
        for &i in &valid {
            let entry = &entries[i];
            // `read_modify_write` leaves the cells as the batch will store
            // the row, or unchanged when the entry fails.
            let cells = pending
                .cells(&entry.row_key)
                .map_err(|e| in_table(&self.name, e))?;
            statuses[i] = read_modify_write(cells, &entry.rules, now).map(|written| Row {
                key: entry.row_key.clone(),
                cells: written,
            });
        }
        if statuses.iter().all(|s| s.is_err()) {
            return Ok(statuses);
        }
        if let Err(err) = self.commit(pending.into_batch()?, held) {
            for &i in &valid {
                if statuses[i].is_ok() {
                    statuses[i] = Err(err.clone());
                }
            }
        }
        Ok(statuses)
    }

    fn sample_row_keys(&self) -> Result<Vec<SampleRowKey>> {
        let meta = self.meta()?;
        crate::split::sample_row_keys(&self.inner, &self.name, &meta)
    }

    fn read_rows(&self, request: &ReadRowsRequest) -> Result<RowStream<'_>> {
        let scan = self.scan(request)?;
        Ok(Box::new(
            scan.map(|row| row.map_err(|e| in_table(&self.name, e))),
        ))
    }

    fn visit_rows(
        &self,
        request: &ReadRowsRequest,
        visit: &mut dyn FnMut(RowRef<'_>) -> Result<bool>,
    ) -> Result<()> {
        let scan = self.scan(request)?;
        let cf_name = scan.cf_name().to_string();
        let repairs = scan.visit(visit).map_err(|e| in_table(&self.name, e))?;
        if !repairs.is_empty() {
            // Stored by the repair thread: a read never writes.
            self.inner.repairs.offer(RepairJob {
                table: self.name.clone(),
                cf_name,
                repairs,
            });
        }
        Ok(())
    }
}

impl EmbeddedTable {
    /// The scan serving a read request.
    fn scan(&self, request: &ReadRowsRequest) -> Result<Scan<'_>> {
        let meta = self.meta()?;
        check_row_set(&request.rows)?;
        let filter = Compiled::of(request.filter.as_ref())?;
        // `Some(0)` means no limit, as on the wire.
        let rows_limit = request.rows_limit.filter(|&n| n > 0);
        let inner = &*self.inner;
        let cf = inner.cf(&self.name, &meta)?;
        let how = ScanOptions {
            reversed: request.reversed,
            filter,
            rows_limit,
            now_micros: now_micros(),
        };
        Ok(Scan::new(&inner.db, cf, meta, plan(&request.rows), how))
    }
}

#[cfg(test)]
mod tests {
    use affinity_model::{GcRule, Mutation, ReadRowsRequest, Store, Table, TableSpec};

    use std::sync::Arc;

    use crate::merge::merged_operand_bytes;
    use crate::scan::{Repair, REPAIR_BYTES};
    use crate::table::EmbeddedTable;
    use crate::{EmbeddedOptions, EmbeddedStore};

    /// Reads every cell value of the table, and how many bytes of
    /// operands the read merged.
    fn read(table: &dyn Table) -> (Vec<Vec<u8>>, u64) {
        let before = merged_operand_bytes();
        let mut values = Vec::new();
        table
            .visit_rows(&ReadRowsRequest::all(), &mut |row| {
                values.extend(row.cells.iter().map(|c| c.value.to_vec()));
                Ok(true)
            })
            .expect("reads");
        (values, merged_operand_bytes() - before)
    }

    fn store() -> (tempfile::TempDir, EmbeddedStore) {
        let dir = tempfile::tempdir().expect("temporary directory");
        let options = EmbeddedOptions {
            sync_writes: false,
            ..EmbeddedOptions::default()
        };
        let store = EmbeddedStore::open_with(dir.path(), options).expect("opens");
        let spec = TableSpec::new().with_sum_family("s", GcRule::None);
        store.create_table("t", &spec).expect("creates");
        (dir, store)
    }

    #[test]
    fn a_read_that_merged_many_operands_stores_the_row_merged() {
        let (_dir, store) = store();
        let table = store.open_table("t").expect("opens");
        for i in 0..200 {
            let add = Mutation::add_to_cell("s", "q", 0, i);
            table.mutate_row(b"row", &[add]).expect("adds");
        }
        let (sums, merged) = read(table.as_ref());
        assert_eq!(sums, vec![19900i64.to_be_bytes().to_vec()]);
        assert!(merged >= REPAIR_BYTES, "{merged} bytes of operands merged");
        store.inner.repairs.settle();
        let (again, merged) = read(table.as_ref());
        assert_eq!(again, sums);
        assert_eq!(merged, 0, "the row was stored merged");
    }

    #[test]
    fn a_repair_never_stores_what_a_later_write_changed() {
        let (_dir, store) = store();
        let table = store.open_table("t").expect("opens");
        let embedded = EmbeddedTable::new("t".into(), Arc::clone(&store.inner));
        let add = |n: i64| Mutation::add_to_cell("s", "q", 0, n);
        table.mutate_row(b"row", &[add(1)]).expect("adds");
        let cf_name = embedded.meta().expect("meta").cf_name.clone();
        let stored = || {
            let meta = embedded.meta().expect("meta");
            let cf = store.inner.cf("t", &meta).expect("cf");
            store.inner.db.get_cf(&cf, b"row").expect("reads")
        };
        // What a read saw (merged to 1) before a write added 10.
        let seen = store.inner.db.latest_sequence_number();
        let merged = stored().expect("a row");
        table.mutate_row(b"row", &[add(10)]).expect("adds");
        let repair = Repair {
            key: b"row".to_vec(),
            merged: merged.clone(),
            seen,
        };
        embedded.store_merged(&cf_name, &[repair]).expect("repairs");
        assert_eq!(read(table.as_ref()).0, vec![11i64.to_be_bytes().to_vec()]);
        // Unchanged since: stored as the read merged it, unless a write
        // holds the row's stripe (a blind write in flight): then nothing
        // is stored, and the read does not wait.
        let seen = store.inner.db.latest_sequence_number();
        let repair = || Repair {
            key: b"row".to_vec(),
            merged: b"not what a merge gives".to_vec(),
            seen,
        };
        let stripe = store.inner.locks.stripe("t", b"row");
        let writing = store.inner.locks.lock_mixed(vec![(stripe, false)]);
        embedded
            .store_merged(&cf_name, &[repair()])
            .expect("repairs");
        assert_eq!(read(table.as_ref()).0, vec![11i64.to_be_bytes().to_vec()]);
        store.inner.repairs.settle();
        drop(writing);
        embedded
            .store_merged(&cf_name, &[repair()])
            .expect("repairs");
        assert_eq!(stored().as_deref(), Some(&b"not what a merge gives"[..]));
        // A table created again under the name is left alone.
        store.delete_table("t").expect("deletes");
        store
            .create_table("t", &TableSpec::new().with_sum_family("s", GcRule::None))
            .expect("creates");
        let repair = Repair {
            key: b"row".to_vec(),
            merged,
            seen: u64::MAX,
        };
        embedded.store_merged(&cf_name, &[repair]).expect("repairs");
        assert!(read(store.open_table("t").expect("opens").as_ref())
            .0
            .is_empty());
    }

    #[test]
    fn a_read_that_merged_one_large_combined_operand_stores_the_row_merged() {
        let (_dir, store) = store();
        let table = store.open_table("t").expect("opens");
        table
            .mutate_row(b"row", &[Mutation::add_to_cell("s", "base", 0, 1)])
            .expect("adds");
        store.flush().expect("flushes");
        // Two hundred adds, which the next flush combines into one operand.
        for i in 0..200 {
            let add = Mutation::add_to_cell("s", format!("qualifier{i:03}"), 0, 1);
            table.mutate_row(b"row", &[add]).expect("adds");
        }
        store.flush().expect("flushes");
        let (cells, merged) = read(table.as_ref());
        assert_eq!(cells.len(), 201);
        assert!(merged >= REPAIR_BYTES, "{merged} bytes of operands merged");
        store.inner.repairs.settle();
        let (again, merged) = read(table.as_ref());
        assert_eq!(again, cells);
        assert_eq!(merged, 0, "the row was stored merged");
    }
}
