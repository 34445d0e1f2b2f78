//! `MemoryStore`: the in-memory reference store.
//!
//! Simple and obviously correct rather than fast: each table is a `BTreeMap`
//! from row key to the row's cells (canonical order) behind one lock, so
//! every operation is trivially atomic. It applies exactly the model's
//! semantics ([`crate::apply`], [`crate::eval`], [`crate::gc`]) and is what
//! the conformance suite compares other backends against. GC rules are
//! enforced on every read and every write of a row (a cell expired by
//! `MaxVersions` is gone for good, as after Bigtable's collection ran).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::RwLock;

use crate::apply::{self, apply_mutations, predicate_matches, read_modify_write};
use crate::cell::{Cell, Row, SampleRowKey};
use crate::error::{Error, Result};
use crate::eval::CompiledFilter;
use crate::filter::RowFilter;
use crate::gc::visible_cells;
use crate::limits;
use crate::mutation::{Mutation, ReadModifyWriteRule, RowMutations};
use crate::rowset::{ReadRowsRequest, RowRange};
use crate::store::{RowStream, Store, Table};
use crate::table_spec::{FamilyModification, FamilyType, TableSpec};

/// A clock returning microseconds since the Unix epoch.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// Default data size between two `sample_row_keys` split points.
pub const DEFAULT_SAMPLE_SPACING_BYTES: u64 = 64 * 1024;

/// An in-memory [`Store`]: the reference model of the storage traits.
pub struct MemoryStore {
    tables: RwLock<BTreeMap<String, Arc<MemoryTable>>>,
    clock: Clock,
    sample_spacing: u64,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("tables", &self.tables.read().keys().collect::<Vec<_>>())
            .finish()
    }
}

impl MemoryStore {
    /// An empty store on the system clock.
    pub fn new() -> MemoryStore {
        MemoryStore::with_clock(Arc::new(apply::now_micros))
    }

    /// An empty store reading time from `clock` (for server timestamps,
    /// read-modify-write and `MaxAge` GC), e.g. a test's fake clock.
    pub fn with_clock(clock: Clock) -> MemoryStore {
        MemoryStore {
            tables: RwLock::new(BTreeMap::new()),
            clock,
            sample_spacing: DEFAULT_SAMPLE_SPACING_BYTES,
        }
    }

    /// Emit a `sample_row_keys` split point every `bytes` of data (at least 1).
    pub fn with_sample_spacing(mut self, bytes: u64) -> MemoryStore {
        self.sample_spacing = bytes.max(1);
        self
    }

    fn table(&self, table: &str) -> Result<Arc<MemoryTable>> {
        self.tables
            .read()
            .get(table)
            .cloned()
            .ok_or_else(|| Error::TableNotFound {
                table: table.to_string(),
            })
    }
}

impl Store for MemoryStore {
    fn create_table(&self, table: &str, spec: &TableSpec) -> Result<()> {
        limits::check_table_name(table)?;
        spec.validate()?;
        let mut tables = self.tables.write();
        if tables.contains_key(table) {
            return Err(Error::TableExists {
                table: table.to_string(),
            });
        }
        let t = MemoryTable {
            name: table.to_string(),
            clock: self.clock.clone(),
            sample_spacing: self.sample_spacing,
            deleted: AtomicBool::new(false),
            state: RwLock::new(TableState {
                spec: spec.clone(),
                rows: BTreeMap::new(),
            }),
        };
        tables.insert(table.to_string(), Arc::new(t));
        Ok(())
    }

    fn delete_table(&self, table: &str) -> Result<()> {
        let removed = self.tables.write().remove(table);
        match removed {
            Some(t) => {
                t.deleted.store(true, Ordering::SeqCst);
                Ok(())
            }
            None => Err(Error::TableNotFound {
                table: table.to_string(),
            }),
        }
    }

    fn list_tables(&self) -> Result<Vec<String>> {
        Ok(self.tables.read().keys().cloned().collect())
    }

    fn table_spec(&self, table: &str) -> Result<TableSpec> {
        Ok(self.table(table)?.state.read().spec.clone())
    }

    fn modify_families(
        &self,
        table: &str,
        modifications: &[FamilyModification],
    ) -> Result<TableSpec> {
        let t = self.table(table)?;
        let mut state = t.state.write();
        let next = state.spec.apply_modifications(table, modifications)?;
        // Data of dropped families is deleted, so re-creating a family
        // starts empty.
        let dropped: Vec<&String> = state
            .spec
            .families
            .keys()
            .filter(|f| !next.families.contains_key(*f))
            .collect();
        if !dropped.is_empty() {
            let dropped: BTreeSet<String> = dropped.into_iter().cloned().collect();
            state.rows.retain(|_, cells| {
                cells.retain(|c| !dropped.contains(&c.family));
                !cells.is_empty()
            });
        }
        state.spec = next.clone();
        Ok(next)
    }

    fn open_table(&self, table: &str) -> Result<Arc<dyn Table>> {
        Ok(self.table(table)?)
    }

    fn drop_row_range(&self, table: &str, prefix: &[u8]) -> Result<()> {
        limits::check_row_key_prefix(prefix)?;
        let t = self.table(table)?;
        let mut state = t.state.write();
        state.rows.retain(|key, _| !key.starts_with(prefix));
        Ok(())
    }
}

struct TableState {
    spec: TableSpec,
    rows: BTreeMap<Bytes, Vec<Cell>>,
}

impl TableState {
    fn family_type(&self) -> impl Fn(&str) -> Option<FamilyType> + '_ {
        |f: &str| self.spec.family_type(f)
    }

    /// Run `f` on the visible cells of row `key`, then store what is left
    /// visible (an empty row is removed).
    fn update_row<T>(
        &mut self,
        key: &[u8],
        now: i64,
        f: impl FnOnce(&mut Vec<Cell>) -> Result<T>,
    ) -> Result<T> {
        let stored = self.rows.remove(key).unwrap_or_default();
        let mut cells = visible_cells(&self.spec, stored, now);
        let result = f(&mut cells);
        let cells = visible_cells(&self.spec, cells, now);
        if !cells.is_empty() {
            self.rows.insert(Bytes::copy_from_slice(key), cells);
        }
        result
    }
}

struct MemoryTable {
    name: String,
    clock: Clock,
    sample_spacing: u64,
    deleted: AtomicBool,
    state: RwLock<TableState>,
}

impl MemoryTable {
    fn check_live(&self) -> Result<()> {
        if self.deleted.load(Ordering::SeqCst) {
            return Err(Error::TableNotFound {
                table: self.name.clone(),
            });
        }
        Ok(())
    }

    fn now(&self) -> i64 {
        (self.clock)()
    }
}

/// The keys of `range` present in `rows`, added to `out`.
fn collect_range(rows: &BTreeMap<Bytes, Vec<Cell>>, range: &RowRange, out: &mut BTreeSet<Bytes>) {
    let as_slice = |b: &Bound<Bytes>, empty_is_unbounded: bool| -> Bound<Vec<u8>> {
        match b {
            Bound::Included(k) | Bound::Excluded(k) if empty_is_unbounded && k.is_empty() => {
                Bound::Unbounded
            }
            Bound::Included(k) => Bound::Included(k.to_vec()),
            Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        }
    };
    if range.is_empty() {
        return;
    }
    let start = as_slice(&range.start, false);
    let end = as_slice(&range.end, true);
    let bounds = (
        start.as_ref().map(|k| k.as_slice()),
        end.as_ref().map(|k| k.as_slice()),
    );
    for key in rows.range::<[u8], _>(bounds).map(|(k, _)| k) {
        out.insert(key.clone());
    }
}

impl Table for MemoryTable {
    fn name(&self) -> &str {
        &self.name
    }

    fn mutate_row(&self, row_key: &[u8], mutations: &[Mutation]) -> Result<()> {
        self.check_live()?;
        let now = self.now();
        let mut state = self.state.write();
        limits::check_row_mutations(&self.name, row_key, mutations, &state.family_type())?;
        state.update_row(row_key, now, |cells| {
            apply_mutations(cells, mutations, now);
            Ok(())
        })
    }

    fn mutate_rows(&self, entries: &[RowMutations]) -> Result<Vec<Result<()>>> {
        self.check_live()?;
        limits::check_mutate_rows(entries)?;
        let now = self.now();
        let mut state = self.state.write();
        let mut statuses = Vec::with_capacity(entries.len());
        for entry in entries {
            let checked = limits::check_row_mutations(
                &self.name,
                &entry.row_key,
                &entry.mutations,
                &state.family_type(),
            );
            statuses.push(checked.and_then(|()| {
                state.update_row(&entry.row_key, now, |cells| {
                    apply_mutations(cells, &entry.mutations, now);
                    Ok(())
                })
            }));
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
        self.check_live()?;
        let now = self.now();
        let mut state = self.state.write();
        limits::check_check_and_mutate(
            &self.name,
            row_key,
            true_mutations,
            false_mutations,
            &state.family_type(),
        )?;
        let predicate = predicate.map(CompiledFilter::compile).transpose()?;
        let key = Bytes::copy_from_slice(row_key);
        state.update_row(row_key, now, |cells| {
            let matched = predicate_matches(predicate.as_ref(), &key, cells);
            let chosen = if matched {
                true_mutations
            } else {
                false_mutations
            };
            apply_mutations(cells, chosen, now);
            Ok(matched)
        })
    }

    fn read_modify_write_row(&self, row_key: &[u8], rules: &[ReadModifyWriteRule]) -> Result<Row> {
        self.check_live()?;
        let now = self.now();
        let mut state = self.state.write();
        limits::check_read_modify_write(&self.name, row_key, rules, &state.family_type())?;
        let cells = state.update_row(row_key, now, |cells| read_modify_write(cells, rules, now))?;
        Ok(Row {
            key: Bytes::copy_from_slice(row_key),
            cells,
        })
    }

    fn sample_row_keys(&self) -> Result<Vec<SampleRowKey>> {
        self.check_live()?;
        let state = self.state.read();
        let mut samples = Vec::new();
        let mut offset: u64 = 0;
        let mut last = 0u64;
        for (key, cells) in &state.rows {
            if offset - last >= self.sample_spacing {
                samples.push(SampleRowKey {
                    row_key: key.clone(),
                    offset_bytes: i64::try_from(offset).unwrap_or(i64::MAX),
                });
                last = offset;
            }
            offset += row_size(key, cells);
        }
        samples.push(SampleRowKey {
            row_key: Bytes::new(),
            offset_bytes: i64::try_from(offset).unwrap_or(i64::MAX),
        });
        Ok(samples)
    }

    fn read_rows(&self, request: &ReadRowsRequest) -> Result<RowStream<'_>> {
        self.check_live()?;
        limits::check_row_set(&request.rows)?;
        let filter = CompiledFilter::compile_opt(request.filter.as_ref())?;
        let limit = match request.rows_limit {
            None | Some(0) => usize::MAX,
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
        };
        let now = self.now();
        let state = self.state.read();
        let keys: Vec<Bytes> = if request.rows.is_all() {
            state.rows.keys().cloned().collect()
        } else {
            let mut set = BTreeSet::new();
            for key in &request.rows.keys {
                if state.rows.contains_key(key.as_ref()) {
                    set.insert(key.clone());
                }
            }
            for range in &request.rows.ranges {
                collect_range(&state.rows, range, &mut set);
            }
            set.into_iter().collect()
        };
        let ordered: Box<dyn Iterator<Item = &Bytes>> = if request.reversed {
            Box::new(keys.iter().rev())
        } else {
            Box::new(keys.iter())
        };
        let mut out = Vec::new();
        for key in ordered {
            if out.len() >= limit {
                break;
            }
            let Some(stored) = state.rows.get(key) else {
                continue;
            };
            let cells = visible_cells(&state.spec, stored.clone(), now);
            let row = Row {
                key: key.clone(),
                cells,
            };
            if let Some(row) = filter.apply(row) {
                out.push(Ok(row));
            }
        }
        Ok(Box::new(out.into_iter()))
    }
}

/// Approximate storage size of a row, for `sample_row_keys`.
fn row_size(key: &[u8], cells: &[Cell]) -> u64 {
    let cells: usize = cells
        .iter()
        .map(|c| c.family.len() + c.qualifier.len() + c.value.len() + 8)
        .sum();
    u64::try_from(key.len() + cells).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
