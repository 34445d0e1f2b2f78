//! The background GC sweeper: deletes cells their family's rule hides
//! (version limits, which a compaction filter cannot judge because it does
//! not see a column's newer versions in other levels), and compacts tables
//! that lost families so the compaction filter drops their cells.

use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use affinity_model::{Error, Result};
use parking_lot::{Condvar, Mutex};
use rocksdb::{BoundColumnFamily, ReadOptions, WriteBatch, WriteOptions};

use crate::error::storage;
use affinity_model::apply::now_micros;

use crate::gc::Visibility;
use crate::keys::{component_len, component_successor, push_unescaped};
use crate::locks::Mode;
use crate::meta::TableMeta;
use crate::ranges::KeyRange;
use crate::scan::open_range;
use crate::store::{Db, Inner};

/// A running sweeper thread; stopped (and joined) by [`Sweeper::stop`].
pub(crate) struct Sweeper {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<JoinHandle<()>>,
}

impl Sweeper {
    /// Start sweeping every `every`. The thread holds the store weakly.
    pub fn start(inner: &Arc<Inner>, every: Duration) -> Sweeper {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let weak: Weak<Inner> = Arc::downgrade(inner);
        let signal = stop.clone();
        let handle = std::thread::Builder::new()
            .name("affinity-gc".into())
            .spawn(move || loop {
                {
                    let (stopped, wake) = &*signal;
                    let mut stopped = stopped.lock();
                    if !*stopped {
                        wake.wait_for(&mut stopped, every);
                    }
                    if *stopped {
                        return;
                    }
                }
                let Some(inner) = weak.upgrade() else {
                    return;
                };
                // A failed sweep is retried at the next tick.
                let _ = sweep_all(&inner);
            })
            .ok();
        Sweeper { stop, handle }
    }

    /// Stop the thread and wait for it (an ongoing sweep finishes first).
    pub fn stop(mut self) {
        let (stopped, wake) = &*self.stop;
        *stopped.lock() = true;
        wake.notify_all();
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// Sweep every table once; returns the number of cells deleted. Keeps
/// going past a failing table and reports the first failure.
pub(crate) fn sweep_all(inner: &Inner) -> Result<u64> {
    let mut deleted = 0;
    let mut first_error: Option<Error> = None;
    for name in inner.table_names() {
        let Ok(entry) = inner.entry(&name) else {
            continue;
        };
        let meta = entry.meta();
        let result = inner.cf(&name, &meta).and_then(|cf| {
            if meta.has_gc() {
                deleted += sweep_table(inner, &cf, &name, &meta)?;
            }
            if inner.to_compact.lock().remove(&name) {
                inner.db.compact_range_cf(&cf, None::<&[u8]>, None::<&[u8]>);
            }
            Ok(())
        });
        if let Err(e) = result {
            first_error.get_or_insert(e);
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(deleted),
    }
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
