//! Striped per-row locks.
//!
//! Every write reads the rows it touches and stores them back whole, so it
//! holds the stripe of each of its rows for the read and the write: nothing
//! can land in between. Stripes are always taken in ascending order, so a
//! request locking many rows cannot deadlock with another.

use std::hash::{BuildHasher, Hasher};

use parking_lot::{Mutex, MutexGuard};

/// Number of stripes (a power of two).
const STRIPES: usize = 4096;

/// A held stripe.
pub(crate) type Guard<'a> = MutexGuard<'a, ()>;

pub(crate) struct RowLocks {
    stripes: Box<[Mutex<()>]>,
    hasher: std::collections::hash_map::RandomState,
}

impl RowLocks {
    pub fn new() -> RowLocks {
        RowLocks {
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            hasher: std::collections::hash_map::RandomState::new(),
        }
    }

    /// The stripe of a row key (hashed with the table's name so tables do
    /// not share hot stripes).
    pub fn stripe(&self, table: &str, row_key: &[u8]) -> usize {
        let mut h = self.hasher.build_hasher();
        h.write(table.as_bytes());
        h.write(row_key);
        (h.finish() as usize) & (STRIPES - 1)
    }

    /// Lock one stripe.
    pub fn lock(&self, stripe: usize) -> Guard<'_> {
        self.stripes[stripe & (STRIPES - 1)].lock()
    }

    /// Lock several stripes (each once) in ascending order.
    pub fn lock_many(&self, mut wanted: Vec<usize>) -> Vec<Guard<'_>> {
        wanted.sort_unstable();
        wanted.dedup();
        wanted.into_iter().map(|s| self.lock(s)).collect()
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
        assert!(locks.stripes[5].try_lock().is_none());
        drop(guards);
        assert!(locks.stripes[5].try_lock().is_some());
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
