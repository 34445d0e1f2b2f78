//! Writes: a request reads the rows it touches (under their exclusive
//! locks), changes their cells with the model's reference semantics
//! (`affinity_model::apply`), collects what GC hides, and stores each row
//! back whole, all in one `WriteBatch`.
//!
//! This is exactly the reference model's behaviour (`MemoryStore` keeps a
//! row's visible cells and collects it whenever it is written), so
//! versions past a family's limit never pile up: a row holds at most one
//! write's worth of hidden cells, those its rules hid by age since.

use std::collections::HashMap;
use std::sync::Arc;

use affinity_model::{Bytes, Cell, Result};
use rocksdb::{BoundColumnFamily, WriteBatch};

use crate::decode::{collect, visible_cells};
use crate::error::storage;
use crate::meta::TableMeta;
use crate::row::encode_row;
use crate::store::Db;

/// One row of a request: its visible cells as the request leaves them.
struct Touched {
    cells: Vec<Cell>,
    existed: bool,
}

/// The rows a request touches, read once, changed in request order, then
/// written back together.
pub(crate) struct Pending<'a, 'db> {
    cf: &'a Arc<BoundColumnFamily<'db>>,
    meta: &'a TableMeta,
    now_micros: i64,
    rows: HashMap<Bytes, Touched>,
    /// Keys in first-touched order (the batch is written in this order).
    order: Vec<Bytes>,
}

impl<'a, 'db> Pending<'a, 'db> {
    /// Read the rows of `keys` (the caller holds their locks exclusively).
    pub fn load<'k>(
        db: &'db Db,
        cf: &'a Arc<BoundColumnFamily<'db>>,
        meta: &'a TableMeta,
        keys: impl IntoIterator<Item = &'k Bytes>,
        now_micros: i64,
    ) -> Result<Pending<'a, 'db>> {
        let mut order: Vec<Bytes> = Vec::new();
        let mut rows = HashMap::new();
        for key in keys {
            if !rows.contains_key(key) {
                rows.insert(
                    key.clone(),
                    Touched {
                        cells: Vec::new(),
                        existed: false,
                    },
                );
                order.push(key.clone());
            }
        }
        let values = db.batched_multi_get_cf(cf, order.iter().map(|k| k.as_ref()), false);
        for (key, value) in order.iter().zip(values) {
            if let Some(value) = value.map_err(storage)? {
                let row = rows
                    .get_mut(key)
                    .ok_or_else(|| affinity_model::Error::Internal("row not loaded".into()))?;
                row.cells = visible_cells(meta, key, &value, now_micros)?;
                row.existed = true;
            }
        }
        Ok(Pending {
            cf,
            meta,
            now_micros,
            rows,
            order,
        })
    }

    /// The current cells of a loaded row.
    pub fn cells(&mut self, key: &Bytes) -> Result<&mut Vec<Cell>> {
        self.rows
            .get_mut(key)
            .map(|r| &mut r.cells)
            .ok_or_else(|| affinity_model::Error::Internal("row not loaded".into()))
    }

    /// The batch storing every touched row as it now stands (collected by
    /// GC; an emptied row is deleted).
    pub fn into_batch(self) -> Result<WriteBatch> {
        let mut batch = WriteBatch::default();
        let mut buf = Vec::new();
        let mut rows = self.rows;
        for key in &self.order {
            let Some(row) = rows.remove(key) else {
                continue;
            };
            let cells = collect(self.meta, row.cells, self.now_micros);
            if cells.is_empty() {
                if row.existed {
                    batch.delete_cf(self.cf, key);
                }
                continue;
            }
            encode_row(&mut buf, self.meta, &cells)?;
            batch.put_cf(self.cf, key, &buf);
        }
        Ok(batch)
    }
}
