//! Striped per-row locks.
//!
//! Every write holds the stripe of each row it touches: blind writes (puts
//! that read nothing) hold it shared, so they never wait on each other and
//! RocksDB can group-commit them; a read-then-write (check-and-mutate,
//! read-modify-write, deletes that must find the cells they delete, the GC
//! sweeper) holds it exclusively, so nothing can land between its read and
//! its write. Stripes are always taken in ascending order, so a request
//! locking many rows cannot deadlock with another.

use std::hash::{BuildHasher, Hasher};

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Number of stripes (a power of two).
const STRIPES: usize = 4096;

/// How a stripe is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Mode {
    Shared,
    Exclusive,
}

/// A held stripe.
pub(crate) enum Guard<'a> {
    Shared(#[allow(dead_code)] RwLockReadGuard<'a, ()>),
    Exclusive(#[allow(dead_code)] RwLockWriteGuard<'a, ()>),
}

pub(crate) struct RowLocks {
    stripes: Box<[RwLock<()>]>,
    hasher: std::collections::hash_map::RandomState,
}

impl RowLocks {
    pub fn new() -> RowLocks {
        RowLocks {
            stripes: (0..STRIPES).map(|_| RwLock::new(())).collect(),
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
    pub fn lock(&self, stripe: usize, mode: Mode) -> Guard<'_> {
        let lock = &self.stripes[stripe & (STRIPES - 1)];
        match mode {
            Mode::Shared => Guard::Shared(lock.read()),
            Mode::Exclusive => Guard::Exclusive(lock.write()),
        }
    }

    /// Lock several stripes in ascending order; a stripe wanted in both
    /// modes is taken exclusively.
    pub fn lock_many(&self, mut wanted: Vec<(usize, Mode)>) -> Vec<Guard<'_>> {
        // Exclusive sorts after shared, so the last entry of a stripe wins.
        wanted.sort_unstable();
        let mut guards = Vec::with_capacity(wanted.len());
        for (i, &(stripe, mode)) in wanted.iter().enumerate() {
            let next_same = wanted.get(i + 1).is_some_and(|&(s, _)| s == stripe);
            if !next_same {
                guards.push(self.lock(stripe, mode));
            }
        }
        guards
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn lock_many_takes_each_stripe_once_in_the_strongest_mode() {
        let locks = RowLocks::new();
        let guards = locks.lock_many(vec![
            (5, Mode::Shared),
            (3, Mode::Exclusive),
            (5, Mode::Exclusive),
            (3, Mode::Shared),
        ]);
        assert_eq!(guards.len(), 2);
        assert!(guards.iter().all(|g| matches!(g, Guard::Exclusive(_))));
        assert!(locks.stripes[5].try_read().is_none());
        drop(guards);
        assert!(locks.stripes[5].try_write().is_some());
    }

    #[test]
    fn exclusive_holders_exclude_each_other() {
        let locks = Arc::new(RowLocks::new());
        let counter = Arc::new(AtomicUsize::new(0));
        let stripe = locks.stripe("t", b"row");
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (locks, counter) = (locks.clone(), counter.clone());
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        let _g = locks.lock(stripe, Mode::Exclusive);
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
