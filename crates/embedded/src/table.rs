//! A table's data operations.

use std::collections::HashMap;
use std::sync::Arc;

use affinity_model::apply::{now_micros, predicate_matches, read_modify_write};
use affinity_model::eval::CompiledFilter;
use affinity_model::limits::{
    check_check_and_mutate, check_mutate_rows, check_read_modify_write, check_row_mutations,
    check_row_set,
};
use affinity_model::{
    Bytes, Cell, Mutation, ReadModifyWriteRule, ReadRowsRequest, Result, Row, RowFilter,
    RowMutations, RowRules, RowStream, SampleRowKey, Table,
};

use crate::error::storage;
use crate::locks::Mode;
use crate::meta::TableMeta;
use crate::ranges::plan;
use crate::scan::{point_iter, read_latest, read_row, Scan, ScanOptions};
use crate::store::Inner;
use crate::write::{needs_read, BatchBuilder};

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
        check_row_mutations(&self.name, row_key, mutations, &|f| meta.has_family(f))
    }

    /// Apply validated mutations to one row. The caller holds the row's
    /// lock: exclusively when a mutation deletes (it reads the row).
    fn write_row(
        &self,
        meta: &TableMeta,
        row_key: &[u8],
        mutations: &[Mutation],
        now: i64,
    ) -> Result<()> {
        let inner = &*self.inner;
        let cf = inner.cf(&self.name, meta)?;
        let with_reads = mutations.iter().any(needs_read);
        let mut builder = BatchBuilder::new(&inner.db, &cf, meta, &self.name, now, with_reads);
        builder.add_row(row_key, mutations)?;
        inner
            .db
            .write_opt(builder.finish(), &inner.write_options)
            .map_err(storage)
    }

    fn lock_mode(mutations: &[Mutation]) -> Mode {
        if mutations.iter().any(needs_read) {
            Mode::Exclusive
        } else {
            Mode::Shared
        }
    }
}

/// Indices of the entries whose checks passed.
fn passed<T>(statuses: &[Result<T>]) -> Vec<usize> {
    (0..statuses.len())
        .filter(|&i| statuses[i].is_ok())
        .collect()
}

/// The distinct columns the rules touch.
fn rule_columns(rules: &[ReadModifyWriteRule]) -> Vec<(&str, &Bytes)> {
    let mut out: Vec<(&str, &Bytes)> = rules
        .iter()
        .map(|r| (r.family.as_str(), &r.qualifier))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The mutations that store `cells` as they are.
fn set_cells(cells: &[Cell]) -> Vec<Mutation> {
    cells
        .iter()
        .map(|c| {
            Mutation::set_cell(
                c.family.clone(),
                c.qualifier.clone(),
                c.timestamp_micros,
                c.value.clone(),
            )
        })
        .collect()
}

impl Table for EmbeddedTable {
    fn name(&self) -> &str {
        &self.name
    }

    fn mutate_row(&self, row_key: &[u8], mutations: &[Mutation]) -> Result<()> {
        let meta = self.meta()?;
        self.check_mutations(&meta, row_key, mutations)?;
        let stripe = self.inner.locks.stripe(&self.name, row_key);
        let _guard = self.inner.locks.lock(stripe, Self::lock_mode(mutations));
        self.write_row(&meta, row_key, mutations, now_micros())
    }

    fn mutate_rows(&self, entries: &[RowMutations]) -> Result<Vec<Result<()>>> {
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
        let inner = &*self.inner;
        let locks = valid
            .iter()
            .map(|&i| {
                let e = &entries[i];
                (
                    inner.locks.stripe(&self.name, &e.row_key),
                    Self::lock_mode(&e.mutations),
                )
            })
            .collect();
        let _guards = inner.locks.lock_many(locks);
        let cf = inner.cf(&self.name, &meta)?;
        let with_reads = valid
            .iter()
            .any(|&i| entries[i].mutations.iter().any(needs_read));
        let mut builder =
            BatchBuilder::new(&inner.db, &cf, &meta, &self.name, now_micros(), with_reads);
        for &i in &valid {
            // Only a failed read can fail here; nothing is written then.
            builder.add_row(&entries[i].row_key, &entries[i].mutations)?;
        }
        let written = inner
            .db
            .write_opt(builder.finish(), &inner.write_options)
            .map_err(storage);
        for &i in &valid {
            statuses[i] = written.clone();
        }
        Ok(statuses)
    }

    fn check_and_mutate_row(
        &self,
        row_key: &[u8],
        predicate: Option<&RowFilter>,
        true_mutations: &[Mutation],
        false_mutations: &[Mutation],
    ) -> Result<bool> {
        // Same order of checks as the reference model.
        let meta = self.meta()?;
        check_check_and_mutate(&self.name, row_key, true_mutations, false_mutations, &|f| {
            meta.has_family(f)
        })?;
        let predicate = predicate.map(CompiledFilter::compile).transpose()?;
        let inner = &*self.inner;
        let stripe = inner.locks.stripe(&self.name, row_key);
        let _guard = inner.locks.lock(stripe, Mode::Exclusive);
        let now = now_micros();
        let cf = inner.cf(&self.name, &meta)?;
        let cells = read_row(&inner.db, &cf, &meta, row_key, now)?
            .map(|r| r.cells)
            .unwrap_or_default();
        let matched =
            predicate_matches(predicate.as_ref(), &Bytes::copy_from_slice(row_key), &cells);
        let mutations = if matched {
            true_mutations
        } else {
            false_mutations
        };
        if !mutations.is_empty() {
            self.write_row(&meta, row_key, mutations, now)?;
        }
        Ok(matched)
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
    /// in one synced write: one fsync for the whole request.
    fn read_modify_write_rows(&self, entries: &[RowRules]) -> Result<Vec<Result<Row>>> {
        let meta = self.meta()?;
        let mut statuses: Vec<Result<Row>> = entries
            .iter()
            .map(|e| {
                check_read_modify_write(&self.name, &e.row_key, &e.rules, &|f| meta.has_family(f))
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
        let inner = &*self.inner;
        let locks = valid
            .iter()
            .map(|&i| {
                let stripe = inner.locks.stripe(&self.name, &entries[i].row_key);
                (stripe, Mode::Exclusive)
            })
            .collect();
        let _guards = inner.locks.lock_many(locks);
        let now = now_micros();
        let cf = inner.cf(&self.name, &meta)?;
        // Each row's rule columns, read with one iterator for the whole
        // request and kept as this request leaves them, so a later entry
        // on a row sees an earlier one's cells.
        let mut iter = point_iter(&inner.db, &cf);
        let mut rows: HashMap<Bytes, Vec<Cell>> = HashMap::with_capacity(valid.len());
        let mut builder = BatchBuilder::new(&inner.db, &cf, &meta, &self.name, now, false);
        for &i in &valid {
            let entry = &entries[i];
            let cells = rows.entry(entry.row_key.clone()).or_default();
            let missing: Vec<(&str, &Bytes)> = rule_columns(&entry.rules)
                .into_iter()
                .filter(|&(f, q)| !cells.iter().any(|c| c.family == f && c.qualifier == *q))
                .collect();
            if !missing.is_empty() {
                cells.extend(read_latest(
                    &mut iter,
                    &meta,
                    &entry.row_key,
                    &missing,
                    now,
                )?);
            }
            // `read_modify_write` leaves `cells` as the batch will store
            // the row, or unchanged when the entry fails.
            statuses[i] = match read_modify_write(cells, &entry.rules, now) {
                Ok(written) => {
                    // Only sets of validated families: nothing to fail on
                    // but a broken store, which fails the whole request.
                    builder.add_row(&entry.row_key, &set_cells(&written))?;
                    Ok(Row {
                        key: entry.row_key.clone(),
                        cells: written,
                    })
                }
                Err(err) => Err(err),
            };
        }
        if statuses.iter().all(|s| s.is_err()) {
            return Ok(statuses);
        }
        let committed = inner
            .db
            .write_opt(builder.finish(), &inner.write_options)
            .map_err(storage);
        if let Err(err) = committed {
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
        let meta = self.meta()?;
        check_row_set(&request.rows)?;
        let filter = CompiledFilter::compile_opt(request.filter.as_ref())?;
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
        let scan = Scan::new(&inner.db, cf, meta, plan(&request.rows), how);
        Ok(Box::new(scan))
    }
}
