//! Writes: a request reads the rows it touches (under their exclusive
//! locks), changes their cells with the model's reference semantics
//! (`affinity_model::apply`), collects what GC hides, and stores each row
//! back whole, all in one `WriteBatch`.
//!
//! This is exactly the reference model's behaviour (`MemoryStore` keeps a
//! row's visible cells and collects it whenever it is written), so
//! versions past a family's limit never pile up: a row holds at most one
//! write's worth of hidden cells, those its rules hid by age since.

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use affinity_model::apply::apply_mutations;
use affinity_model::gc::visible_cells;
use affinity_model::{Bytes, Cell, Result};
use rocksdb::{BoundColumnFamily, WriteBatch};

use crate::decode::decode_cells;
use crate::error::read_error;
use crate::meta::TableMeta;
use crate::row::{encode_created_row, encode_row};
use crate::store::Db;

/// One row of a request: its visible cells as the request leaves them.
struct Touched {
    key: Bytes,
    cells: Vec<Cell>,
    existed: bool,
    /// Not read: the request's first entry for it starts with
    /// `DeleteFromRow`, so what it held does not matter (`existed` is
    /// then true: an emptied row is deleted).
    overwritten: bool,
    /// No entry changed it yet.
    untouched: bool,
    /// A row the request creates with its only entry, already encoded
    /// (`cells` is then empty): see [`encode_created_row`].
    created: Option<Vec<u8>>,
}

impl Touched {
    /// Decode `created` back into `cells`, for a further change.
    fn materialize(&mut self, meta: &TableMeta, now_micros: i64) -> Result<()> {
        if let Some(encoded) = self.created.take() {
            self.cells = decode_cells(meta, &self.key, &encoded, now_micros)?;
        }
        Ok(())
    }
}

/// The rows a request touches, read once, changed in request order, then
/// written back together.
pub(crate) struct Pending<'a, 'db> {
    cf: Arc<BoundColumnFamily<'db>>,
    meta: &'a TableMeta,
    /// `meta`'s spec, for GC.
    spec: affinity_model::TableSpec,
    now_micros: i64,
    /// In first-touched order (the batch is written in this order).
    rows: Vec<Touched>,
    /// Position of each key in `rows`.
    index: HashMap<Bytes, usize>,
}

impl<'a, 'db> Pending<'a, 'db> {
    /// Read the rows of `keys` (the caller holds their locks exclusively)
    /// at `now_micros`, the clock the request runs at.
    pub fn load<'k>(
        db: &'db Db,
        cf: Arc<BoundColumnFamily<'db>>,
        meta: &'a TableMeta,
        keys: impl IntoIterator<Item = &'k Bytes>,
        now_micros: i64,
    ) -> Result<Pending<'a, 'db>> {
        Pending::load_unless_overwritten(db, cf, meta, keys, |_| false, now_micros)
    }

    /// [`Pending::load`], except rows for which `overwritten` is true:
    /// the request's first entry for them starts with `DeleteFromRow`, so
    /// they are not read (a row is written whole either way).
    pub fn load_unless_overwritten<'k>(
        db: &'db Db,
        cf: Arc<BoundColumnFamily<'db>>,
        meta: &'a TableMeta,
        keys: impl IntoIterator<Item = &'k Bytes>,
        overwritten: impl Fn(&Bytes) -> bool,
        now_micros: i64,
    ) -> Result<Pending<'a, 'db>> {
        let mut index = HashMap::default();
        let mut unique: Vec<&Bytes> = Vec::new();
        for key in keys {
            if !index.contains_key(key) {
                index.insert(key.clone(), unique.len());
                unique.push(key);
            }
        }
        let blind: Vec<bool> = unique.iter().map(|k| overwritten(k)).collect();
        let read = unique.iter().zip(&blind).filter(|(_, b)| !**b);
        let mut values = db
            .batched_multi_get_cf(&cf, read.map(|(k, _)| k.as_ref()), false)
            .into_iter();
        let mut rows = Vec::with_capacity(unique.len());
        for (key, blind) in unique.into_iter().zip(blind) {
            let stored = match blind {
                true => None,
                false => values
                    .next()
                    .ok_or_else(|| affinity_model::Error::Internal("multi-get lost a row".into()))?
                    .map_err(|e| read_error(e, Some(key)))?,
            };
            rows.push(Touched {
                key: key.clone(),
                cells: match &stored {
                    Some(value) => decode_cells(meta, key, value, now_micros)?,
                    None => Vec::new(),
                },
                existed: blind || stored.is_some(),
                overwritten: blind,
                untouched: true,
                created: None,
            });
        }
        Ok(Pending {
            cf,
            meta,
            spec: meta.spec(),
            now_micros,
            rows,
            index,
        })
    }

    /// The clock the request runs at.
    pub fn now_micros(&self) -> i64 {
        self.now_micros
    }

    /// The current cells of a loaded row.
    pub fn cells(&mut self, key: &Bytes) -> Result<&mut Vec<Cell>> {
        let row = self
            .index
            .get(key)
            .and_then(|&i| self.rows.get_mut(i))
            .ok_or_else(|| affinity_model::Error::Internal("row not loaded".into()))?;
        row.materialize(self.meta, self.now_micros)?;
        row.untouched = false;
        Ok(&mut row.cells)
    }

    /// Apply one entry's mutations to a loaded row, then collect what GC
    /// hides, as `MemoryStore` does for each entry it writes (a later entry
    /// of the same request sees the row collected).
    pub fn apply(&mut self, key: &Bytes, mutations: &[affinity_model::Mutation]) -> Result<()> {
        let now = self.now_micros;
        let i = *self
            .index
            .get(key)
            .ok_or_else(|| affinity_model::Error::Internal("row not loaded".into()))?;
        let row = &mut self.rows[i];
        if row.untouched && (!row.existed || row.overwritten) {
            row.untouched = false;
            // An overwritten row's first entry starts with `DeleteFromRow`
            // (of cells not read): what follows creates it.
            let creating = match (row.overwritten, mutations) {
                (false, all) => Some(all),
                (true, [affinity_model::Mutation::DeleteFromRow, rest @ ..]) => Some(rest),
                (true, _) => None,
            };
            if let Some(creating) = creating {
                if let Some(encoded) = encode_created_row(self.meta, creating, now)? {
                    row.created = Some(encoded);
                    return Ok(());
                }
            }
        }
        row.untouched = false;
        row.materialize(self.meta, now)?;
        let cells = &mut row.cells;
        apply_mutations(cells, mutations, now);
        *cells = visible_cells(&self.spec, std::mem::take(cells), now);
        Ok(())
    }

    /// The batch storing every touched row as it now stands (collected by
    /// GC, exactly as `MemoryStore` collects a row it writes; an emptied
    /// row is deleted).
    pub fn into_batch(self) -> Result<WriteBatch> {
        self.into_batch_with(Vec::new())
    }

    /// [`Pending::into_batch`] plus merge operands of rows this request
    /// did not read, in request order per row. The batch holds its keys in
    /// ascending order: memtable inserts of sorted keys reuse the
    /// skiplist position of the previous one.
    pub fn into_batch_with(self, merges: Vec<(&Bytes, Vec<u8>)>) -> Result<WriteBatch> {
        enum Op {
            Put(Vec<u8>),
            Delete,
            Merge(Vec<u8>),
        }
        let spec = self.spec;
        let mut ops: Vec<(Bytes, Op)> = Vec::with_capacity(self.rows.len() + merges.len());
        for row in self.rows {
            if let Some(encoded) = row.created {
                // Only the format byte: every cell was hidden.
                if encoded.len() > 1 {
                    ops.push((row.key, Op::Put(encoded)));
                } else if row.existed {
                    ops.push((row.key, Op::Delete));
                }
                continue;
            }
            let cells = visible_cells(&spec, row.cells, self.now_micros);
            if cells.is_empty() {
                if row.existed {
                    ops.push((row.key, Op::Delete));
                }
                continue;
            }
            let mut buf = Vec::new();
            encode_row(&mut buf, self.meta, &cells)?;
            ops.push((row.key, Op::Put(buf)));
        }
        ops.extend(merges.into_iter().map(|(k, m)| (k.clone(), Op::Merge(m))));
        // Stable: a row's merge operands keep their order.
        ops.sort_by(|a, b| a.0.cmp(&b.0));
        let mut batch = WriteBatch::default();
        for (key, op) in ops {
            match op {
                Op::Put(value) => batch.put_cf(&self.cf, &key, value),
                Op::Delete => batch.delete_cf(&self.cf, &key),
                Op::Merge(operand) => batch.merge_cf(&self.cf, &key, operand),
            }
        }
        Ok(batch)
    }
}
