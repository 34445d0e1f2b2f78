//! The background GC sweeper: deletes cells their family's rule hides
//! (version limits, which a compaction filter cannot judge because it does
//! not see a column's newer versions and deletions in other levels) in the
//! tables that have such limits, and compacts tables that lost families so
//! the compaction filter drops their cells. Each row is re-read and cleaned
//! under its exclusive lock, so the sweeper never races a writer.

use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use affinity_model::{Error, Result};
use parking_lot::{Condvar, Mutex};
use rocksdb::{BoundColumnFamily, ReadOptions, WriteBatch, WriteOptions};

use affinity_model::apply::now_micros;

use crate::error::storage;
use crate::gc::Visibility;
use crate::keys::{component_len, component_successor, push_unescaped};
use crate::locks::Mode;
use crate::meta::TableMeta;
use crate::ranges::KeyRange;
use crate::scan::open_range;
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
                        let _ = sweep_versions(&inner);
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
    let swept = sweep_versions(inner);
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

/// Delete the cells hidden by version limits in every table that has one.
fn sweep_versions(inner: &Inner) -> Result<u64> {
    let mut deleted = 0;
    for_each_table(inner, |name, meta| {
        if meta.has_version_gc() {
            let cf = inner.cf(name, meta)?;
            deleted += sweep_table(inner, &cf, name, meta)?;
        }
        Ok(())
    })
    .map(|()| deleted)
}

pub(crate) fn sweep_table(
    inner: &Inner,
    cf: &Arc<BoundColumnFamily<'_>>,
    table: &str,
    meta: &TableMeta,
) -> Result<u64> {
    let mut opts = ReadOptions::default();
    opts.set_total_order_seek(true);
    opts.fill_cache(false);
    let mut iter = inner.db.raw_iterator_cf_opt(cf, opts);
    iter.seek_to_first();
    let mut visibility = Visibility::new(meta, now_micros());
    let mut deleted = 0;
    while let Some(first) = iter.key() {
        let Some(prefix_len) = component_len(first) else {
            iter.next();
            continue;
        };
        let prefix = first[..prefix_len].to_vec();
        visibility.start_row();
        let mut any_hidden = false;
        while let Some(key) = iter.key() {
            if !key.starts_with(&prefix) {
                break;
            }
            any_hidden |= visibility.hidden(key, prefix_len);
            iter.next();
        }
        if any_hidden {
            deleted += clean_row(inner, cf, table, meta, &prefix)?;
        }
    }
    iter.status().map_err(storage)?;
    Ok(deleted)
}

/// Delete the hidden cells of one row, re-read under its exclusive lock.
fn clean_row(
    inner: &Inner,
    cf: &Arc<BoundColumnFamily<'_>>,
    table: &str,
    meta: &TableMeta,
    prefix: &[u8],
) -> Result<u64> {
    let mut row_key = Vec::with_capacity(prefix.len());
    push_unescaped(&mut row_key, &prefix[..prefix.len() - 2]);
    let stripe = inner.locks.stripe(table, &row_key);
    let _guard = inner.locks.lock(stripe, Mode::Exclusive);
    let db: &Db = &inner.db;
    let range = KeyRange {
        lower: Some(prefix.to_vec()),
        upper: Some(component_successor(prefix)),
        single_row: true,
    };
    let (mut iter, _) = open_range(db, cf, &range, false);
    let mut visibility = Visibility::new(meta, now_micros());
    let mut batch = WriteBatch::default();
    while let Some(key) = iter.key() {
        if visibility.hidden(key, prefix.len()) {
            batch.delete_cf(cf, key);
        }
        iter.next();
    }
    iter.status().map_err(storage)?;
    let count = batch.len() as u64;
    if count > 0 {
        // GC needs no durability: a lost delete is redone by the next sweep.
        db.write_opt(batch, &WriteOptions::default())
            .map_err(storage)?;
    }
    Ok(count)
}
