//! Tables that count their reads and writes per key range and time slot,
//! for a key visualizer in the manner of Bigtable's: a heatmap of key
//! ranges over time where a hot row shows as a bright band.
//!
//! [`KeyVis::wrap`] wraps a table under a name; the engine wraps each
//! application's logical tables (its own, or its view of the shared ones),
//! so an application's heatmap shows its own keys only, whatever its
//! layout. A wrapped table counts only while its name is watched
//! ([`KeyVis::watch`]: the dashboard watches an application's tables when
//! asked for them, for a day from the last time): a table nobody watches
//! costs one relaxed atomic load per call and no memory beyond its switch,
//! so 10,000 applications cost nothing until someone looks, and at most
//! [`MAX_WATCHED`] tables count at once.
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
//! use affinity_model::keyvis::KeyVis;
//! use affinity_model::{GcRule, MemoryStore, Mutation, Store, TableSpec};
//!
//! let store = MemoryStore::new();
//! store.create_table("t", &TableSpec::new().with_family("e", GcRule::None))?;
//! let vis = KeyVis::new(10);
//! let table = vis.wrap("t", store.open_table("t")?);
//! table.mutate_row(b"r0", &[Mutation::set_cell("e", "q", 1_000, "value")])?; // not watched
//! vis.watch(&["t"], 1_000, 60_000);
//! table.mutate_row(b"r1", &[Mutation::set_cell("e", "q", 1_000, "value")])?;
//! table.read_row(b"r1", None)?;
//! vis.rotate(2_000);
//! let slot = &vis.history(|_| true)[0].slots[0];
//! assert_eq!((slot.reads.iter().sum::<u64>(), slot.writes.iter().sum::<u64>()), (1, 1));
//! # Ok::<(), affinity_model::Error>(())
//! ```

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard, RwLock};

use crate::{
    Mutation, ReadModifyWriteRule, ReadRowsRequest, Result, Row, RowFilter, RowMutations, RowRef,
    RowRules, RowStream, SampleRowKey, Table,
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
    /// When the table started counting (milliseconds since the epoch).
    pub since_millis: i64,
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

/// Tables counted at once ([`KeyVis::watch`] drops the least recently
/// watched past this).
pub const MAX_WATCHED: usize = 96;

/// A table's counters while it is watched.
struct Watched {
    heat: Arc<TableHeat>,
    /// When counting started (milliseconds since the epoch).
    since: i64,
    /// When counting stops unless watched again.
    until: i64,
}

/// One table's switch: off (one relaxed load per call, nothing kept) or
/// counting into a [`TableHeat`].
struct Switch {
    on: AtomicBool,
    watched: RwLock<Option<Watched>>,
}

impl Switch {
    /// The counters, while watched.
    fn heat(&self) -> Option<Arc<TableHeat>> {
        if !self.on.load(Ordering::Relaxed) {
            return None;
        }
        self.watched.read().as_ref().map(|w| Arc::clone(&w.heat))
    }

    fn stop(&self) {
        self.on.store(false, Ordering::Relaxed);
        *self.watched.write() = None;
    }
}

/// The counters of the tables [`KeyVis::wrap`] wrapped, counting only
/// those watched (see [`KeyVis::watch`]), and their history.
pub struct KeyVis {
    /// Every wrapped table's switch, by name.
    cells: RwLock<HashMap<String, Arc<Switch>>>,
    /// The watched ones.
    watched: Mutex<HashMap<String, Arc<Switch>>>,
    /// Slots kept per table.
    keep: usize,
}

impl KeyVis {
    /// Counters keeping the last `keep` slots of each table.
    pub fn new(keep: usize) -> KeyVis {
        KeyVis {
            cells: RwLock::new(HashMap::new()),
            watched: Mutex::new(HashMap::new()),
            keep: keep.max(1),
        }
    }

    fn cell(&self, name: &str) -> Arc<Switch> {
        if let Some(c) = self.cells.read().get(name) {
            return Arc::clone(c);
        }
        let mut cells = self.cells.write();
        Arc::clone(cells.entry(name.to_string()).or_insert_with(|| {
            Arc::new(Switch {
                on: AtomicBool::new(false),
                watched: RwLock::new(None),
            })
        }))
    }

    /// `inner`, counted under `name` while that name is watched. Tables
    /// wrapped under one name (a table opened again) share their counters.
    pub fn wrap(&self, name: &str, inner: Arc<dyn Table>) -> Arc<dyn Table> {
        Arc::new(KeyVisTable {
            inner,
            cell: self.cell(name),
        })
    }

    /// Count the tables `names` from `now_millis` (or go on counting them)
    /// until `until_millis`; returns when each started counting. Past
    /// [`MAX_WATCHED`] tables, those whose watch ends first stop (their
    /// slots dropped).
    pub fn watch(&self, names: &[&str], now_millis: i64, until_millis: i64) -> Vec<i64> {
        let mut watched = self.watched.lock();
        let since = names
            .iter()
            .map(|name| {
                let cell = self.cell(name);
                let mut w = cell.watched.write();
                let since = match w.as_mut() {
                    Some(w) => {
                        w.until = w.until.max(until_millis);
                        w.since
                    }
                    None => {
                        *w = Some(Watched {
                            heat: Arc::new(TableHeat::new(seed(name))),
                            since: now_millis,
                            until: until_millis,
                        });
                        cell.on.store(true, Ordering::Relaxed);
                        now_millis
                    }
                };
                drop(w);
                watched.insert(name.to_string(), cell);
                since
            })
            .collect();
        while watched.len() > MAX_WATCHED {
            let first = watched
                .iter()
                .filter(|(name, _)| !names.contains(&name.as_str()))
                .min_by_key(|(_, c)| c.watched.read().as_ref().map_or(i64::MIN, |w| w.until))
                .map(|(name, _)| name.clone());
            let Some(first) = first else { break };
            if let Some(cell) = watched.remove(&first) {
                cell.stop();
            }
        }
        since
    }

    /// End the current slot of every watched table at `end_millis`: its
    /// counts go into the ring (the oldest slot leaves past `keep`), and
    /// the ranges are re-cut for the next slot. Tables whose watch ended
    /// stop counting and drop their slots.
    pub fn rotate(&self, end_millis: i64) {
        let mut heats = Vec::new();
        self.watched.lock().retain(|_, cell| {
            let w = cell.watched.read();
            match w.as_ref() {
                Some(w) if w.until > end_millis => {
                    heats.push(Arc::clone(&w.heat));
                    true
                }
                _ => {
                    drop(w);
                    cell.stop();
                    false
                }
            }
        });
        for heat in heats {
            heat.rotate(end_millis, self.keep);
        }
    }

    /// The slots of the watched tables `wanted` selects, by table name.
    pub fn history(&self, wanted: impl Fn(&str) -> bool) -> Vec<TableHistory> {
        let mut out: Vec<TableHistory> = self
            .watched
            .lock()
            .iter()
            .filter(|(name, _)| wanted(name))
            .filter_map(|(name, cell)| {
                let w = cell.watched.read();
                let w = w.as_ref()?;
                let slots = w.heat.slots.lock().iter().cloned().collect();
                Some(TableHistory {
                    table: name.clone(),
                    since_millis: w.since,
                    slots,
                })
            })
            .collect();
        out.sort_by(|a, b| a.table.cmp(&b.table));
        out
    }
}

/// A seed for a table's reservoirs, from its name.
fn seed(name: &str) -> u64 {
    name.bytes().fold(0x9E37_79B9_7F4A_7C15u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01B3)
    })
}

/// A table counted by a [`KeyVis`] (see [`KeyVis::wrap`]). Every method
/// delegates to the wrapped table, so code above it behaves exactly as
/// on the table itself.
struct KeyVisTable {
    inner: Arc<dyn Table>,
    cell: Arc<Switch>,
}

impl KeyVisTable {
    /// Count a write of `key`, while watched.
    fn wrote(&self, key: &[u8]) {
        if let Some(heat) = self.cell.heat() {
            heat.record(key, true);
        }
    }

    /// Count writes of every key of a batch, while watched.
    fn wrote_all<'a>(&self, keys: impl Iterator<Item = &'a [u8]>) {
        if let Some(heat) = self.cell.heat() {
            heat.record_all(keys, true);
        }
    }
}

impl Table for KeyVisTable {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn mutate_row(&self, row_key: &[u8], mutations: &[Mutation]) -> Result<()> {
        self.wrote(row_key);
        self.inner.mutate_row(row_key, mutations)
    }

    fn mutate_rows(&self, entries: &[RowMutations]) -> Result<Vec<Result<()>>> {
        self.wrote_all(entries.iter().map(|e| e.row_key.as_ref()));
        self.inner.mutate_rows(entries)
    }

    fn mutate_rows_unsynced(&self, entries: &[RowMutations]) -> Result<Vec<Result<()>>> {
        self.wrote_all(entries.iter().map(|e| e.row_key.as_ref()));
        self.inner.mutate_rows_unsynced(entries)
    }

    fn check_and_mutate_row(
        &self,
        row_key: &[u8],
        predicate: Option<&RowFilter>,
        true_mutations: &[Mutation],
        false_mutations: &[Mutation],
    ) -> Result<bool> {
        self.wrote(row_key);
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
        self.wrote(row_key);
        self.inner.check_and_mutate_row_unsynced(
            row_key,
            predicate,
            true_mutations,
            false_mutations,
        )
    }

    fn read_modify_write_row(&self, row_key: &[u8], rules: &[ReadModifyWriteRule]) -> Result<Row> {
        self.wrote(row_key);
        self.inner.read_modify_write_row(row_key, rules)
    }

    fn read_modify_write_rows(&self, entries: &[RowRules]) -> Result<Vec<Result<Row>>> {
        self.wrote_all(entries.iter().map(|e| e.row_key.as_ref()));
        self.inner.read_modify_write_rows(entries)
    }

    fn sample_row_keys(&self) -> Result<Vec<SampleRowKey>> {
        self.inner.sample_row_keys()
    }

    fn read_rows(&self, request: &ReadRowsRequest) -> Result<RowStream<'_>> {
        let rows = self.inner.read_rows(request)?;
        let Some(heat) = self.cell.heat() else {
            return Ok(rows);
        };
        Ok(Box::new(rows.inspect(move |r| {
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
        let Some(heat) = self.cell.heat() else {
            return self.inner.visit_rows(request, visit);
        };
        self.inner.visit_rows(request, &mut |row| {
            heat.record(row.key, false);
            visit(row)
        })
    }

    fn read_row(&self, row_key: &[u8], filter: Option<&RowFilter>) -> Result<Option<Row>> {
        if let Some(heat) = self.cell.heat() {
            heat.record(row_key, false);
        }
        self.inner.read_row(row_key, filter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GcRule, MemoryStore, Store, TableSpec};

    /// Table `t` of a memory store, wrapped and watched.
    fn store() -> (Arc<KeyVis>, Arc<dyn Table>) {
        let store = MemoryStore::new();
        store
            .create_table("t", &TableSpec::new().with_family("e", GcRule::None))
            .unwrap();
        let vis = Arc::new(KeyVis::new(3));
        let table = vis.wrap("t", store.open_table("t").unwrap());
        vis.watch(&["t"], 0, i64::MAX);
        (vis, table)
    }

    fn write(table: &dyn Table, key: &str) {
        table
            .mutate_row(key.as_bytes(), &[Mutation::set_cell("e", "q", 1_000, "v")])
            .unwrap();
    }

    #[test]
    fn a_hot_key_is_one_bright_range_once_ranges_are_cut() {
        let (vis, table) = store();
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
        let (vis, table) = store();
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
        let (vis, table) = store();
        let store = MemoryStore::new();
        store
            .create_table("other", &TableSpec::new().with_family("e", GcRule::None))
            .unwrap();
        let other = vis.wrap("other", store.open_table("other").unwrap());
        vis.watch(&["other"], 0, i64::MAX);
        for end in 1..=5 {
            write(table.as_ref(), "a");
            write(other.as_ref(), "b");
            vis.rotate(end * 1_000);
        }
        let history = vis.history(|t| t == "t");
        assert_eq!(history.len(), 1);
        let ends: Vec<i64> = history[0].slots.iter().map(|s| s.end_millis).collect();
        assert_eq!(ends, [3_000, 4_000, 5_000]);
        assert_eq!(history[0].since_millis, 0);
        assert_eq!(vis.history(|_| true).len(), 2);
        assert!(table.read_row(b"a", None).unwrap().is_some());
    }

    /// A memory store's table `name`, wrapped by `vis`.
    fn wrapped(vis: &KeyVis, store: &MemoryStore, name: &str) -> Arc<dyn Table> {
        store
            .create_table(name, &TableSpec::new().with_family("e", GcRule::None))
            .unwrap();
        vis.wrap(name, store.open_table(name).unwrap())
    }

    fn writes(vis: &KeyVis, name: &str) -> Vec<u64> {
        vis.history(|t| t == name)
            .iter()
            .flat_map(|h| &h.slots)
            .map(|s| s.writes.iter().sum())
            .collect()
    }

    #[test]
    fn only_watched_tables_count_and_a_watch_ends() {
        let (vis, store) = (KeyVis::new(10), MemoryStore::new());
        let table = wrapped(&vis, &store, "t");
        // Not watched: nothing counted, nothing kept, yet every call
        // reaches the table.
        write(table.as_ref(), "a");
        vis.rotate(1_000);
        assert!(vis.history(|_| true).is_empty());
        assert_eq!(vis.watch(&["t"], 1_500, 10_000), [1_500]);
        write(table.as_ref(), "b");
        write(table.as_ref(), "c");
        vis.rotate(2_000);
        // Opened again under the same name: the same counters.
        let again = vis.wrap("t", store.open_table("t").unwrap());
        write(again.as_ref(), "d");
        // Watched again: counting goes on from when it started, and
        // until the later end.
        assert_eq!(vis.watch(&["t"], 2_500, 3_500), [1_500]);
        vis.rotate(3_000);
        assert_eq!(writes(&vis, "t"), [2, 1]);
        // The watch ends at 10 s: the slots go, counting stops.
        vis.rotate(10_000);
        assert!(vis.history(|_| true).is_empty());
        write(table.as_ref(), "e");
        assert_eq!(vis.watch(&["t"], 11_000, 20_000), [11_000]);
        vis.rotate(12_000);
        assert_eq!(writes(&vis, "t"), [0]);
        let rows = table.read_rows(&ReadRowsRequest::all()).unwrap().count();
        assert_eq!(rows, 5);
    }

    #[test]
    fn past_the_cap_the_watch_ending_first_stops() {
        let (vis, store) = (KeyVis::new(10), MemoryStore::new());
        let names: Vec<String> = (0..=MAX_WATCHED).map(|i| format!("t{i}")).collect();
        let tables: Vec<Arc<dyn Table>> = names.iter().map(|n| wrapped(&vis, &store, n)).collect();
        for (i, name) in names.iter().enumerate() {
            vis.watch(&[name.as_str()], 0, 1_000_000 + i as i64);
        }
        for table in &tables {
            write(table.as_ref(), "k");
        }
        vis.rotate(1_000);
        let history = vis.history(|_| true);
        assert_eq!(history.len(), MAX_WATCHED);
        assert!(history.iter().all(|h| h.table != "t0"));
        assert_eq!(writes(&vis, "t1"), [1]);
        // Watching the dropped one again drops the next to end.
        vis.watch(&["t0"], 2_000, 2_000_000);
        let history = vis.history(|_| true);
        assert_eq!(history.len(), MAX_WATCHED);
        assert!(history.iter().any(|h| h.table == "t0"));
        assert!(history.iter().all(|h| h.table != "t1"));
    }
}
