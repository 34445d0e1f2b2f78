//! Striped per-row locks.
//!
//! A write that reads the rows it touches and stores them back whole
//! (check-and-mutate, read-modify-write, the sweeper) holds the stripe of
//! each of its rows exclusively for the read and the write: nothing can
//! land in between. A blind write (a merge operand, see [`crate::merge`])
//! holds its stripes shared until its batch is in the memtable, so blind
//! writes run side by side but never inside another request's
//! read-then-write. Stripes are always taken in ascending order, so a
//! request locking many rows cannot deadlock with another.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Number of stripes (a power of two).
const STRIPES: usize = 4096;

/// A held stripe.
pub(crate) enum Guard<'a> {
    Exclusive(#[allow(dead_code)] RwLockWriteGuard<'a, ()>),
    Shared(#[allow(dead_code)] RwLockReadGuard<'a, ()>),
}

pub(crate) struct RowLocks {
    stripes: Box<[RwLock<()>]>,
    /// Per stripe: the sequence number after its last write.
    last_write: Box<[AtomicU64]>,
    hasher: std::collections::hash_map::RandomState,
}

impl RowLocks {
    pub fn new() -> RowLocks {
        RowLocks {
            stripes: (0..STRIPES).map(|_| RwLock::new(())).collect(),
            last_write: (0..STRIPES).map(|_| AtomicU64::new(0)).collect(),
            hasher: std::collections::hash_map::RandomState::new(),
        }
    }

    /// Record that rows of `stripes` were written, the database's sequence
    /// number being `sequence` after the write. Called while the stripes
    /// are held (shared or exclusive).
    pub fn note_write(&self, stripes: impl IntoIterator<Item = usize>, sequence: u64) {
        for stripe in stripes {
            self.last_write[stripe & (STRIPES - 1)].fetch_max(sequence, Ordering::AcqRel);
        }
    }

    /// The sequence number after the last write to a row of `stripe`
    /// (0: none since the store opened). Exact only while the stripe is
    /// held exclusively.
    pub fn last_write(&self, stripe: usize) -> u64 {
        self.last_write[stripe & (STRIPES - 1)].load(Ordering::Acquire)
    }

    /// The stripe of a row key (hashed with the table's name so tables do
    /// not share hot stripes).
    pub fn stripe(&self, table: &str, row_key: &[u8]) -> usize {
        let mut h = self.hasher.build_hasher();
        h.write(table.as_bytes());
        h.write(row_key);
        (h.finish() as usize) & (STRIPES - 1)
    }

    /// Lock one stripe exclusively.
    pub fn lock(&self, stripe: usize) -> Guard<'_> {
        Guard::Exclusive(self.stripes[stripe & (STRIPES - 1)].write())
    }

    /// Lock several stripes (each once) in ascending order, exclusively.
    pub fn lock_many(&self, wanted: Vec<usize>) -> Vec<Guard<'_>> {
        self.lock_mixed(wanted.into_iter().map(|s| (s, true)).collect())
    }

    /// Lock several stripes (each once) exclusively if none of them is
    /// held now; `None` (and nothing held) when one is. For work that is
    /// only worth doing when it waits for no one.
    pub fn try_lock_many(&self, mut wanted: Vec<usize>) -> Option<Vec<Guard<'_>>> {
        let mask = STRIPES - 1;
        wanted.iter_mut().for_each(|s| *s &= mask);
        wanted.sort_unstable();
        wanted.dedup();
        wanted
            .into_iter()
            .map(|s| self.stripes[s].try_write().map(Guard::Exclusive))
            .collect()
    }

    /// Lock several stripes in ascending order, each exclusively when any
    /// of its requests `(stripe, exclusive)` asks so, else shared.
    pub fn lock_mixed(&self, mut wanted: Vec<(usize, bool)>) -> Vec<Guard<'_>> {
        let mask = STRIPES - 1;
        // Exclusive requests sort after shared ones of the same stripe, so
        // the last of each stripe decides.
        wanted.sort_unstable_by_key(|&(s, exclusive)| (s & mask, exclusive));
        let mut out = Vec::with_capacity(wanted.len());
        for (i, &(stripe, exclusive)) in wanted.iter().enumerate() {
            if wanted
                .get(i + 1)
                .is_some_and(|next| next.0 & mask == stripe & mask)
            {
                continue;
            }
            let lock = &self.stripes[stripe & mask];
            out.push(if exclusive {
                Guard::Exclusive(lock.write())
            } else {
                Guard::Shared(lock.read())
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn lock_many_takes_each_stripe_once() {
        let locks = RowLocks::new();
        let guards = locks.lock_many(vec![5, 3, 5, 3]);
        assert_eq!(guards.len(), 2);
        assert!(locks.stripes[5].try_read().is_none());
        drop(guards);
        assert!(locks.stripes[5].try_write().is_some());
    }

    #[test]
    fn mixed_requests_take_each_stripe_once_exclusive_wins() {
        let locks = RowLocks::new();
        let guards = locks.lock_mixed(vec![
            (9, false),
            (4, true),
            (9, true),
            (4, false),
            (1, false),
        ]);
        assert_eq!(guards.len(), 3);
        assert!(locks.stripes[9].try_read().is_none());
        assert!(locks.stripes[4].try_read().is_none());
        assert!(locks.stripes[1].try_read().is_some());
        assert!(locks.stripes[1].try_write().is_none());
    }

    #[test]
    fn trying_takes_all_stripes_or_none() {
        let locks = RowLocks::new();
        let held = locks.try_lock_many(vec![8, 3, 8]).expect("free stripes");
        assert_eq!(held.len(), 2);
        assert!(locks.try_lock_many(vec![1, 3]).is_none(), "3 is held");
        assert!(
            locks.stripes[1].try_write().is_some(),
            "1 was let go when 3 was not free"
        );
        drop(held);
        let shared = locks.lock_mixed(vec![(5, false)]);
        assert!(locks.try_lock_many(vec![5]).is_none(), "a shared holder");
        drop(shared);
        assert!(locks.try_lock_many(vec![5, 3]).is_some());
    }

    #[test]
    fn shared_holders_exclude_only_exclusive_ones() {
        let locks = RowLocks::new();
        let a = locks.lock_mixed(vec![(7, false), (2, false)]);
        let b = locks.lock_mixed(vec![(7, false)]);
        assert!(locks.stripes[7].try_write().is_none());
        drop((a, b));
        let _x = locks.lock_many(vec![7]);
        assert!(locks.stripes[7].try_read().is_none());
    }

    #[test]
    fn holders_exclude_each_other() {
        let locks = Arc::new(RowLocks::new());
        let counter = Arc::new(AtomicUsize::new(0));
        let stripe = locks.stripe("t", b"row");
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (locks, counter) = (locks.clone(), counter.clone());
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        let _g = locks.lock(stripe);
                        // A non-atomic read-modify-write made safe by the lock.
                        let v = counter.load(Ordering::Relaxed);
                        std::hint::black_box(v);
                        counter.store(v + 1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert_eq!(counter.load(Ordering::Relaxed), 4000);
    }
}
