//! The background GC sweeper: rewrites the rows holding cells their
//! family's rule hides (cells that aged out in rows nobody writes; a
//! write collects its row itself) in the tables that have rules, and
//! compacts tables that lost families so the compaction filter drops
//! their cells. Each row is re-read and rewritten under its exclusive
//! lock, so the sweeper never races a writer.

use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use affinity_model::{Error, Result};
use parking_lot::{Condvar, Mutex};
use rocksdb::{BoundColumnFamily, ReadOptions, WriteBatch, WriteOptions};

use affinity_model::apply::now_micros;

use crate::error::storage;
use crate::gc::{collect_stored, Collected};
use crate::meta::TableMeta;
use crate::row::cell_count;
use crate::store::{Db, Inner};

/// Wakes or stops the sweeper thread.
#[derive(Default)]
pub(crate) struct SweepSignal {
    state: Mutex<SignalState>,
    changed: Condvar,
}

#[derive(Default)]
struct SignalState {
    stop: bool,
    wake: bool,
}

impl SweepSignal {
    /// Ask the sweeper to compact the tables waiting for it now.
    pub fn wake(&self) {
        self.state.lock().wake = true;
        self.changed.notify_all();
    }

    fn stop(&self) {
        self.state.lock().stop = true;
        self.changed.notify_all();
    }

    /// Wait until a full sweep is due (`Some(true)`), a wake-up
    /// (`Some(false)`) or a stop (`None`).
    fn wait(&self, sweep_at: Instant) -> Option<bool> {
        let mut state = self.state.lock();
        loop {
            if state.stop {
                return None;
            }
            if std::mem::take(&mut state.wake) {
                return Some(false);
            }
            if Instant::now() >= sweep_at {
                return Some(true);
            }
            self.changed.wait_until(&mut state, sweep_at);
        }
    }
}

/// A running sweeper thread; stopped (and joined) by [`Sweeper::stop`].
pub(crate) struct Sweeper {
    signal: Arc<SweepSignal>,
    handle: Option<JoinHandle<()>>,
}

impl Sweeper {
    /// Start sweeping every `every`; compactions of tables that lost
    /// families run as soon as the signal wakes the thread. The thread holds
    /// the store weakly.
    pub fn start(inner: &Arc<Inner>, every: Duration) -> Sweeper {
        let signal = inner.sweep_signal.clone();
        let weak: Weak<Inner> = Arc::downgrade(inner);
        let thread_signal = signal.clone();
        let handle = std::thread::Builder::new()
            .name("affinity-gc".into())
            .spawn(move || {
                let mut sweep_at = Instant::now() + every;
                while let Some(full) = thread_signal.wait(sweep_at) {
                    let Some(inner) = weak.upgrade() else {
                        return;
                    };
                    // Failures are retried at the next tick.
                    let _ = compact_pending(&inner);
                    if full {
                        let _ = sweep_rows(&inner);
                        sweep_at = Instant::now() + every;
                    }
                }
            })
            .ok();
        Sweeper { signal, handle }
    }

    /// Stop the thread and wait for it (an ongoing sweep finishes first).
    pub fn stop(mut self) {
        self.signal.stop();
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// Compact the tables that lost families, then sweep every table with a
/// version limit; returns the number of cells deleted. Keeps going past a
/// failing table and reports the first failure.
pub(crate) fn sweep_all(inner: &Inner) -> Result<u64> {
    let compacted = compact_pending(inner);
    let swept = sweep_rows(inner);
    compacted.and(swept)
}

/// Run `each` on every table, reporting the first failure.
fn for_each_table(
    inner: &Inner,
    mut each: impl FnMut(&str, &Arc<TableMeta>) -> Result<()>,
) -> Result<()> {
    let mut first_error: Option<Error> = None;
    for name in inner.table_names() {
        let Ok(entry) = inner.entry(&name) else {
            continue;
        };
        if let Err(e) = each(&name, &entry.meta()) {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Fully compact the tables that lost families, so the compaction filter
/// drops those families' cells.
fn compact_pending(inner: &Inner) -> Result<()> {
    for_each_table(inner, |name, meta| {
        if inner.to_compact.lock().remove(name) {
            let cf = inner.cf(name, meta)?;
            inner.db.compact_range_cf(&cf, None::<&[u8]>, None::<&[u8]>);
        }
        Ok(())
    })
}

/// Rewrite the rows holding hidden cells in every table with a GC rule.
fn sweep_rows(inner: &Inner) -> Result<u64> {
    let mut deleted = 0;
    for_each_table(inner, |name, meta| {
        if meta.has_gc() {
            let cf = inner.cf(name, meta)?;
            deleted += sweep_table(inner, &cf, name, meta)?;
        }
        Ok(())
    })
    .map(|()| deleted)
}

/// Rewrite every row of a table that holds cells GC hides (past a version
/// limit, too old, or of a dropped family); returns the cells removed.
pub(crate) fn sweep_table(
    inner: &Inner,
    cf: &Arc<BoundColumnFamily<'_>>,
    table: &str,
    meta: &TableMeta,
) -> Result<u64> {
    let mut opts = ReadOptions::default();
    opts.fill_cache(false);
    let mut iter = inner.db.raw_iterator_cf_opt(cf, opts);
    iter.seek_to_first();
    let now = now_micros();
    let mut deleted = 0;
    while let Some((key, value)) = iter.item() {
        if collect_stored(meta, value, now) != Collected::Unchanged {
            deleted += clean_row(inner, cf, table, meta, key, now)?;
        }
        iter.next();
    }
    iter.status().map_err(storage)?;
    Ok(deleted)
}

/// Collect one row, re-read under its exclusive lock.
fn clean_row(
    inner: &Inner,
    cf: &Arc<BoundColumnFamily<'_>>,
    table: &str,
    meta: &TableMeta,
    key: &[u8],
    now: i64,
) -> Result<u64> {
    let stripe = inner.locks.stripe(table, key);
    let _guard = inner.locks.lock(stripe);
    let db: &Db = &inner.db;
    let Some(value) = db.get_pinned_cf(cf, key).map_err(storage)? else {
        return Ok(0);
    };
    let mut batch = WriteBatch::default();
    let removed = match collect_stored(meta, &value, now) {
        Collected::Unchanged => return Ok(0),
        Collected::Empty => {
            batch.delete_cf(cf, key);
            cell_count(&value)
        }
        Collected::Rewritten(row, removed) => {
            batch.put_cf(cf, key, row);
            removed
        }
    };
    // GC needs no durability: a lost rewrite is redone by the next sweep.
    db.write_opt(batch, &WriteOptions::default())
        .map_err(storage)?;
    inner
        .locks
        .note_write([stripe], db.latest_sequence_number());
    Ok(removed)
}
