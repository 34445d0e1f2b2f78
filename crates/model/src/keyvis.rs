//! A [`Store`] wrapper that counts reads and writes per key range and
//! time slot, for a key visualizer in the manner of Bigtable's: a heatmap
//! of key ranges over time where a hot row shows as a bright band.
//!
//! Cheap on the hot path: each row a read returns, or a write touches,
//! costs a binary search among at most [`BUCKETS`] range bounds and one
//! relaxed atomic add; every [`SAMPLE_EVERY`]th key of a table is offered
//! to a small reservoir under a lock. [`KeyVis::rotate`] (the server calls
//! it every slot) moves the counters into a ring of slots and re-cuts the
//! ranges at the quantiles of the distinct sampled keys, so ranges follow
//! the keys in use and each holds about as many of them; a slot keeps the
//! bounds it was counted with.
//!
//! ```
//! use std::sync::Arc;
//! use affinity_model::keyvis::KeyVisStore;
//! use affinity_model::{GcRule, MemoryStore, Mutation, Store, TableSpec};
//!
//! let store = KeyVisStore::new(Arc::new(MemoryStore::new()), 10);
//! store.create_table("t", &TableSpec::new().with_family("e", GcRule::None))?;
//! let table = store.open_table("t")?;
//! table.mutate_row(b"r1", &[Mutation::set_cell("e", "q", 1_000, "value")])?;
//! table.read_row(b"r1", None)?;
//! let vis = store.key_vis();
//! vis.rotate(1_000);
//! let slot = &vis.history(|_| true)[0].slots[0];
//! assert_eq!((slot.reads.iter().sum::<u64>(), slot.writes.iter().sum::<u64>()), (1, 1));
//! # Ok::<(), affinity_model::Error>(())
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};

use crate::{
    FamilyModification, Mutation, ReadModifyWriteRule, ReadRowsRequest, Result, Row, RowFilter,
    RowMutations, RowRef, RowRules, RowStream, SampleRowKey, Store, Table, TableSpec,
};

/// Key ranges per table.
pub const BUCKETS: usize = 64;
/// One key in this many is offered to a table's reservoir.
pub const SAMPLE_EVERY: u64 = 8;
/// Keys a table's reservoir holds.
const RESERVOIR: usize = 1024;
/// Bytes of a sampled key kept (enough to order ranges and label them).
const KEY_PREFIX: usize = 64;

/// One table's counts over one slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// When the slot ended (milliseconds since the epoch).
    pub end_millis: i64,
    /// Rows read per range (`bounds.len() + 1` ranges).
    pub reads: Vec<u64>,
    /// Rows written per range.
    pub writes: Vec<u64>,
    /// The first key of ranges `1..`: range 0 starts at the table's start.
    pub bounds: Arc<Vec<Bytes>>,
}

/// A table's slots, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableHistory {
    pub table: String,
    pub slots: Vec<Slot>,
}

/// Algorithm R over the keys offered, with a xorshift generator.
struct Reservoir {
    keys: Vec<Bytes>,
    offered: u64,
    rng: u64,
}

impl Reservoir {
    fn offer(&mut self, key: &[u8]) {
        self.offered += 1;
        let key = || Bytes::copy_from_slice(&key[..key.len().min(KEY_PREFIX)]);
        if self.keys.len() < RESERVOIR {
            self.keys.push(key());
            return;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let at = self.rng % self.offered;
        if let Some(slot) = self.keys.get_mut(at as usize) {
            *slot = key();
        }
    }

    /// `BUCKETS - 1` bounds (fewer for fewer keys) at the quantiles of the
    /// distinct keys sampled.
    fn bounds(&self) -> Vec<Bytes> {
        let mut keys = self.keys.clone();
        keys.sort_unstable();
        keys.dedup();
        if keys.len() < 2 {
            return keys.into_iter().skip(1).collect();
        }
        let ranges = BUCKETS.min(keys.len());
        let mut bounds: Vec<Bytes> = (1..ranges)
            .map(|i| keys[i * keys.len() / ranges].clone())
            .collect();
        bounds.dedup();
        bounds
    }
}

/// One table's live counters.
struct TableHeat {
    reads: [AtomicU64; BUCKETS],
    writes: [AtomicU64; BUCKETS],
    bounds: RwLock<Arc<Vec<Bytes>>>,
    seen: AtomicU64,
    reservoir: Mutex<Reservoir>,
    slots: Mutex<VecDeque<Slot>>,
}

impl TableHeat {
    fn new(seed: u64) -> TableHeat {
        TableHeat {
            reads: std::array::from_fn(|_| AtomicU64::new(0)),
            writes: std::array::from_fn(|_| AtomicU64::new(0)),
            bounds: RwLock::new(Arc::new(Vec::new())),
            seen: AtomicU64::new(0),
            reservoir: Mutex::new(Reservoir {
                keys: Vec::with_capacity(RESERVOIR),
                offered: 0,
                rng: seed | 1,
            }),
            slots: Mutex::new(VecDeque::new()),
        }
    }

    fn record(&self, key: &[u8], write: bool) {
        let bucket = self.bounds.read().partition_point(|b| b.as_ref() <= key);
        let counters = if write { &self.writes } else { &self.reads };
        counters[bucket.min(BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
        if self
            .seen
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(SAMPLE_EVERY)
        {
            self.reservoir.lock().offer(key);
        }
    }
}

/// The counters of every table of a [`KeyVisStore`], and their history.
pub struct KeyVis {
    tables: RwLock<HashMap<String, Arc<TableHeat>>>,
    /// Slots kept per table.
    keep: usize,
}

impl KeyVis {
    /// Counters keeping the last `keep` slots of each table.
    pub fn new(keep: usize) -> KeyVis {
        KeyVis {
            tables: RwLock::new(HashMap::new()),
            keep: keep.max(1),
        }
    }

    fn table(&self, name: &str) -> Arc<TableHeat> {
        if let Some(t) = self.tables.read().get(name) {
            return Arc::clone(t);
        }
        let mut tables = self.tables.write();
        let seed = name.bytes().fold(0x9E37_79B9_7F4A_7C15u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01B3)
        });
        Arc::clone(
            tables
                .entry(name.to_string())
                .or_insert_with(|| Arc::new(TableHeat::new(seed))),
        )
    }

    /// End the current slot of every table at `end_millis`: its counts go
    /// into the ring (the oldest slot leaves past `keep`), and the ranges
    /// are re-cut for the next slot.
    pub fn rotate(&self, end_millis: i64) {
        let tables: Vec<Arc<TableHeat>> = self.tables.read().values().cloned().collect();
        for t in tables {
            let bounds = Arc::clone(&t.bounds.read());
            let ranges = bounds.len() + 1;
            let take = |c: &[AtomicU64; BUCKETS]| -> Vec<u64> {
                c[..ranges]
                    .iter()
                    .map(|a| a.swap(0, Ordering::Relaxed))
                    .collect()
            };
            let slot = Slot {
                end_millis,
                reads: take(&t.reads),
                writes: take(&t.writes),
                bounds,
            };
            let next = Arc::new(t.reservoir.lock().bounds());
            *t.bounds.write() = next;
            let mut slots = t.slots.lock();
            slots.push_back(slot);
            while slots.len() > self.keep {
                slots.pop_front();
            }
        }
    }

    /// The slots of the tables `wanted` selects, by table name.
    pub fn history(&self, wanted: impl Fn(&str) -> bool) -> Vec<TableHistory> {
        let mut out: Vec<TableHistory> = self
            .tables
            .read()
            .iter()
            .filter(|(name, _)| wanted(name))
            .map(|(name, t)| TableHistory {
                table: name.clone(),
                slots: t.slots.lock().iter().cloned().collect(),
            })
            .collect();
        out.sort_by(|a, b| a.table.cmp(&b.table));
        out
    }
}

/// A store whose tables count their reads and writes per key range (see
/// the module documentation). Every trait method delegates to the wrapped
/// store, so code above it behaves exactly as on the store itself.
pub struct KeyVisStore {
    inner: Arc<dyn Store>,
    vis: Arc<KeyVis>,
}

impl KeyVisStore {
    /// `inner`, counting, keeping the last `keep` slots of each table.
    pub fn new(inner: Arc<dyn Store>, keep: usize) -> KeyVisStore {
        KeyVisStore {
            inner,
            vis: Arc::new(KeyVis::new(keep)),
        }
    }

    /// The counters, to rotate and read.
    pub fn key_vis(&self) -> Arc<KeyVis> {
        Arc::clone(&self.vis)
    }
}

impl Store for KeyVisStore {
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
        Ok(Arc::new(KeyVisTable {
            inner: self.inner.open_table(table)?,
            heat: self.vis.table(table),
        }))
    }
}

/// One table of a [`KeyVisStore`].
struct KeyVisTable {
    inner: Arc<dyn Table>,
    heat: Arc<TableHeat>,
}

impl Table for KeyVisTable {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn mutate_row(&self, row_key: &[u8], mutations: &[Mutation]) -> Result<()> {
        self.heat.record(row_key, true);
        self.inner.mutate_row(row_key, mutations)
    }

    fn mutate_rows(&self, entries: &[RowMutations]) -> Result<Vec<Result<()>>> {
        for e in entries {
            self.heat.record(&e.row_key, true);
        }
        self.inner.mutate_rows(entries)
    }

    fn check_and_mutate_row(
        &self,
        row_key: &[u8],
        predicate: Option<&RowFilter>,
        true_mutations: &[Mutation],
        false_mutations: &[Mutation],
    ) -> Result<bool> {
        self.heat.record(row_key, true);
        self.inner
            .check_and_mutate_row(row_key, predicate, true_mutations, false_mutations)
    }

    fn read_modify_write_row(&self, row_key: &[u8], rules: &[ReadModifyWriteRule]) -> Result<Row> {
        self.heat.record(row_key, true);
        self.inner.read_modify_write_row(row_key, rules)
    }

    fn read_modify_write_rows(&self, entries: &[RowRules]) -> Result<Vec<Result<Row>>> {
        for e in entries {
            self.heat.record(&e.row_key, true);
        }
        self.inner.read_modify_write_rows(entries)
    }

    fn sample_row_keys(&self) -> Result<Vec<SampleRowKey>> {
        self.inner.sample_row_keys()
    }

    fn read_rows(&self, request: &ReadRowsRequest) -> Result<RowStream<'_>> {
        let heat = &self.heat;
        Ok(Box::new(self.inner.read_rows(request)?.inspect(move |r| {
            if let Ok(row) = r {
                heat.record(&row.key, false);
            }
        })))
    }

    fn visit_rows(
        &self,
        request: &ReadRowsRequest,
        visit: &mut dyn FnMut(RowRef<'_>) -> Result<bool>,
    ) -> Result<()> {
        self.inner.visit_rows(request, &mut |row| {
            self.heat.record(row.key, false);
            visit(row)
        })
    }

    fn read_row(&self, row_key: &[u8], filter: Option<&RowFilter>) -> Result<Option<Row>> {
        self.heat.record(row_key, false);
        self.inner.read_row(row_key, filter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GcRule, MemoryStore};

    fn store() -> (KeyVisStore, Arc<dyn Table>) {
        let store = KeyVisStore::new(Arc::new(MemoryStore::new()), 3);
        store
            .create_table("t", &TableSpec::new().with_family("e", GcRule::None))
            .unwrap();
        let table = store.open_table("t").unwrap();
        (store, table)
    }

    fn write(table: &dyn Table, key: &str) {
        table
            .mutate_row(key.as_bytes(), &[Mutation::set_cell("e", "q", 1_000, "v")])
            .unwrap();
    }

    #[test]
    fn a_hot_key_is_one_bright_range_once_ranges_are_cut() {
        let (store, table) = store();
        let vis = store.key_vis();
        for i in 0..400 {
            write(table.as_ref(), &format!("user{i:04}"));
        }
        vis.rotate(1_000);
        for _ in 0..2_000 {
            write(table.as_ref(), "user0200");
        }
        for i in 0..400 {
            write(table.as_ref(), &format!("user{i:04}"));
        }
        // Reads count the rows a scan returns.
        assert_eq!(
            table.read_rows(&ReadRowsRequest::all()).unwrap().count(),
            400
        );
        vis.rotate(2_000);
        let history = vis.history(|t| t == "t");
        assert_eq!(history.len(), 1);
        let slots = &history[0].slots;
        assert_eq!(slots.len(), 2);
        // Before any cut every key lands in the one range.
        assert_eq!(
            (slots[0].writes.clone(), slots[0].bounds.len()),
            (vec![400], 0)
        );
        let slot = &slots[1];
        assert!(slot.bounds.len() > 8, "{:?}", slot.bounds);
        assert_eq!(slot.writes.iter().sum::<u64>(), 2_400);
        assert_eq!(slot.reads.iter().sum::<u64>(), 400);
        let hot = slot
            .bounds
            .partition_point(|b| b.as_ref() <= b"user0200".as_slice());
        let brightest = (0..slot.writes.len())
            .max_by_key(|&i| slot.writes[i])
            .unwrap();
        assert_eq!(brightest, hot);
        assert!(slot.writes[hot] >= 2_000);
        let others = slot.writes.iter().enumerate().filter(|(i, _)| *i != hot);
        assert!(others.map(|(_, n)| *n).max().unwrap() < 100);
    }

    #[test]
    fn the_ring_keeps_the_newest_slots_and_history_filters_tables() {
        let (store, table) = store();
        store
            .create_table("other", &TableSpec::new().with_family("e", GcRule::None))
            .unwrap();
        let other = store.open_table("other").unwrap();
        let vis = store.key_vis();
        for end in 1..=5 {
            write(table.as_ref(), "a");
            write(other.as_ref(), "b");
            vis.rotate(end * 1_000);
        }
        let history = vis.history(|t| t == "t");
        assert_eq!(history.len(), 1);
        let ends: Vec<i64> = history[0].slots.iter().map(|s| s.end_millis).collect();
        assert_eq!(ends, [3_000, 4_000, 5_000]);
        assert_eq!(vis.history(|_| true).len(), 2);
        assert!(table.read_row(b"a", None).unwrap().is_some());
    }
}
