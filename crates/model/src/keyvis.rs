//! A [`Store`] wrapper that counts reads and writes per key range and
//! time slot, for a key visualizer in the manner of Bigtable's: a heatmap
//! of key ranges over time where a hot row shows as a bright band.
//!
//! Cheap on the hot path: a table's counters are split into stripes, each
//! on cache lines of its own, and a thread always adds to the same stripe
//! (threads are dealt stripes in turn), so threads never write to each
//! other's lines. Recording takes the stripe's lock once per call (once
//! per batch for `mutate_rows`), uncontended unless more threads than
//! stripes are busy on one table; each row then costs a binary search
//! among at most [`BUCKETS`] range bounds and a plain add. One key in
//! [`SAMPLE_EVERY`] is offered to the stripe's small reservoir (a copy of
//! the key only when it is taken). [`KeyVis::rotate`] (the server calls it
//! every slot) locks every stripe of a table at once, sums their counts
//! into a slot of the ring and re-cuts the ranges at the quantiles of the
//! distinct keys the stripes sampled, so ranges follow the keys in use and
//! each holds about as many of them; a slot keeps the bounds it was
//! counted with.
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

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard, RwLock};

use crate::{
    FamilyModification, Mutation, ReadModifyWriteRule, ReadRowsRequest, Result, Row, RowFilter,
    RowMutations, RowRef, RowRules, RowStream, SampleRowKey, Store, Table, TableSpec,
};

/// Key ranges per table.
pub const BUCKETS: usize = 64;
/// One key in this many is offered to a stripe's reservoir.
pub const SAMPLE_EVERY: u64 = 8;
/// Keys a stripe's reservoir holds (a table's ranges are cut among the
/// keys of all its stripes).
const RESERVOIR: usize = 256;
/// The most stripes a table has.
const MAX_STRIPES: usize = 16;
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
}

/// `BUCKETS - 1` bounds (fewer for fewer keys) at the quantiles of the
/// distinct keys of `keys`.
fn cut(mut keys: Vec<Bytes>) -> Vec<Bytes> {
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

/// Stripes per table: twice the processors, from 4 to [`MAX_STRIPES`].
fn stripes() -> usize {
    static STRIPES: OnceLock<usize> = OnceLock::new();
    *STRIPES.get_or_init(|| {
        let cpus = std::thread::available_parallelism().map_or(4, |n| n.get());
        (2 * cpus).clamp(4, MAX_STRIPES)
    })
}

/// This thread's number: threads are dealt numbers in turn, so busy
/// threads spread over the stripes.
fn this_thread() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static MINE: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    MINE.with(|mine| {
        if mine.get() == usize::MAX {
            mine.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        mine.get()
    })
}

/// What one stripe counted in the current slot.
struct Counts {
    /// The ranges' bounds this slot (the same in every stripe).
    bounds: Arc<Vec<Bytes>>,
    reads: [u64; BUCKETS],
    writes: [u64; BUCKETS],
    /// Rows recorded, to offer one in [`SAMPLE_EVERY`] to the reservoir.
    seen: u64,
    reservoir: Reservoir,
}

impl Counts {
    fn record(&mut self, key: &[u8], write: bool) {
        // At most BUCKETS - 1 bounds: the index is below BUCKETS.
        let range = self.bounds.partition_point(|b| b.as_ref() <= key);
        let counters = if write {
            &mut self.writes
        } else {
            &mut self.reads
        };
        counters[range.min(BUCKETS - 1)] += 1;
        let seen = self.seen;
        self.seen += 1;
        if seen.is_multiple_of(SAMPLE_EVERY) {
            self.reservoir.offer(key);
        }
    }
}

/// One stripe, aligned so that no two stripes share a cache line (nor the
/// neighbouring line prefetchers fetch with it).
#[repr(align(128))]
struct Stripe(Mutex<Counts>);

/// One table's live counters, by stripe, and its slots.
struct TableHeat {
    stripes: Box<[Stripe]>,
    slots: Mutex<VecDeque<Slot>>,
}

impl TableHeat {
    fn new(seed: u64) -> TableHeat {
        let stripe = |i: u64| {
            Stripe(Mutex::new(Counts {
                bounds: Arc::new(Vec::new()),
                reads: [0; BUCKETS],
                writes: [0; BUCKETS],
                seen: 0,
                reservoir: Reservoir {
                    keys: Vec::new(),
                    offered: 0,
                    rng: (seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1,
                },
            }))
        };
        TableHeat {
            stripes: (0..stripes() as u64).map(stripe).collect(),
            slots: Mutex::new(VecDeque::new()),
        }
    }

    /// This thread's stripe, locked.
    fn stripe(&self) -> MutexGuard<'_, Counts> {
        self.stripes[this_thread() % self.stripes.len()].0.lock()
    }

    fn record(&self, key: &[u8], write: bool) {
        self.stripe().record(key, write);
    }

    /// Record every key of a batch under one lock.
    fn record_all<'a>(&self, keys: impl Iterator<Item = &'a [u8]>, write: bool) {
        let mut counts = self.stripe();
        for key in keys {
            counts.record(key, write);
        }
    }

    /// End the slot at `end_millis`: every stripe locked at once, so the
    /// counts and the bounds they were counted with change together.
    fn rotate(&self, end_millis: i64, keep: usize) {
        let mut stripes: Vec<MutexGuard<'_, Counts>> =
            self.stripes.iter().map(|s| s.0.lock()).collect();
        let bounds = Arc::clone(&stripes[0].bounds);
        let ranges = bounds.len() + 1;
        let (mut reads, mut writes) = (vec![0; ranges], vec![0; ranges]);
        let mut sampled = Vec::new();
        for counts in stripes.iter_mut() {
            for i in 0..ranges {
                reads[i] += counts.reads[i];
                writes[i] += counts.writes[i];
            }
            counts.reads = [0; BUCKETS];
            counts.writes = [0; BUCKETS];
            sampled.extend(counts.reservoir.keys.iter().cloned());
        }
        let next = Arc::new(cut(sampled));
        for counts in stripes.iter_mut() {
            counts.bounds = Arc::clone(&next);
        }
        drop(stripes);
        let mut slots = self.slots.lock();
        slots.push_back(Slot {
            end_millis,
            reads,
            writes,
            bounds,
        });
        while slots.len() > keep {
            slots.pop_front();
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
            t.rotate(end_millis, self.keep);
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
        self.heat
            .record_all(entries.iter().map(|e| e.row_key.as_ref()), true);
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
        self.heat
            .record_all(entries.iter().map(|e| e.row_key.as_ref()), true);
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
    fn threads_count_on_their_own_stripes_and_every_row_is_summed() {
        let (store, table) = store();
        let vis = store.key_vis();
        for i in 0..400 {
            write(table.as_ref(), &format!("user{i:04}"));
        }
        vis.rotate(1_000);
        // More threads than stripes, so some share one; batches and
        // single rows, writes and reads.
        let threads = 2 * stripes() + 1;
        std::thread::scope(|scope| {
            for t in 0..threads {
                let table = Arc::clone(&table);
                scope.spawn(move || {
                    for i in 0..100 {
                        let key = format!("user{:04}", (t * 100 + i) % 400);
                        write(table.as_ref(), &key);
                        write(table.as_ref(), "user0300");
                        let batch: Vec<RowMutations> = (0..10)
                            .map(|_| RowMutations {
                                row_key: Bytes::from_static(b"user0300"),
                                mutations: vec![Mutation::set_cell("e", "q", 1_000, "v")],
                            })
                            .collect();
                        assert!(table.mutate_rows(&batch).unwrap().iter().all(|r| r.is_ok()));
                        assert!(table.read_row(key.as_bytes(), None).unwrap().is_some());
                    }
                });
            }
        });
        vis.rotate(2_000);
        let slot = &vis.history(|t| t == "t")[0].slots[1];
        let n = threads as u64 * 100;
        assert_eq!(slot.writes.iter().sum::<u64>(), n * 12);
        assert_eq!(slot.reads.iter().sum::<u64>(), n);
        let hot = slot
            .bounds
            .partition_point(|b| b.as_ref() <= b"user0300".as_slice());
        assert!(slot.writes[hot] >= n * 11, "{:?}", slot.writes);
        let brightest = (0..slot.writes.len())
            .max_by_key(|&i| slot.writes[i])
            .unwrap();
        assert_eq!(brightest, hot);
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
