//! [`Recent`]: the last few values made from keys, kept to be found again.
//!
//! Reads repeat a little work with the same few inputs: a profile read
//! compiles the same two or three [`RowFilter`](crate::RowFilter)s and
//! derives the same strategy's weights every time. A thread keeps what it
//! made last in a `Recent` (in a `thread_local!`) and compares the key
//! instead of making the value again. A handful of keys is searched
//! faster by comparing them in turn than by hashing one.

use std::convert::Infallible;

/// The values made from the last `capacity` distinct keys, the latest
/// used first; the least recently used is dropped for a new one.
#[derive(Debug)]
pub struct Recent<K, V> {
    kept: Vec<(K, V)>,
    capacity: usize,
}

impl<K: PartialEq + Clone, V: Clone> Recent<K, V> {
    /// Room for `capacity` keys (at least one).
    pub const fn new(capacity: usize) -> Recent<K, V> {
        Recent {
            kept: Vec::new(),
            capacity: if capacity == 0 { 1 } else { capacity },
        }
    }

    /// The value kept for `key`, or the one `make` makes of it, kept
    /// then. A value `make` fails to make is not kept: the next call
    /// tries again (and fails the same way for the same key).
    pub fn get_or_try_make<E>(
        &mut self,
        key: &K,
        make: impl FnOnce(&K) -> Result<V, E>,
    ) -> Result<V, E> {
        if let Some(i) = self.kept.iter().position(|(k, _)| k == key) {
            // The latest used first.
            self.kept[..=i].rotate_right(1);
            return Ok(self.kept[0].1.clone());
        }
        let value = make(key)?;
        self.kept.truncate(self.capacity - 1);
        self.kept.insert(0, (key.clone(), value.clone()));
        Ok(value)
    }

    /// [`Recent::get_or_try_make`] for values made without failing.
    pub fn get_or_make(&mut self, key: &K, make: impl FnOnce(&K) -> V) -> V {
        let Ok(value) = self.get_or_try_make(key, |k| Ok::<_, Infallible>(make(k)));
        value
    }

    /// How many keys are kept.
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use super::*;

    /// `key` from `recent`, counting in `made` the values made.
    fn get(recent: &mut Recent<u32, String>, key: u32, made: &mut u32) -> String {
        recent
            .get_or_try_make(&key, |k| {
                *made += 1;
                Ok::<_, Infallible>(format!("v{k}"))
            })
            .unwrap()
    }

    #[test]
    fn keeps_the_latest_used_and_drops_the_least_recent() {
        let mut recent = Recent::new(3);
        let mut made = 0;
        for key in [1, 2, 3] {
            assert_eq!(get(&mut recent, key, &mut made), format!("v{key}"));
        }
        assert_eq!((made, recent.len()), (3, 3));
        // Found again, not made: 1 becomes the latest used.
        assert_eq!(get(&mut recent, 1, &mut made), "v1");
        assert_eq!(made, 3);
        // A fourth key drops the least recently used, 2.
        assert_eq!(get(&mut recent, 4, &mut made), "v4");
        assert_eq!((made, recent.len()), (4, 3));
        for key in [1, 3, 4] {
            get(&mut recent, key, &mut made);
        }
        assert_eq!(made, 4);
        assert_eq!(get(&mut recent, 2, &mut made), "v2");
        assert_eq!(made, 5);
    }

    #[test]
    fn a_value_not_made_is_not_kept() {
        let mut recent: Recent<u32, u32> = Recent::new(2);
        let mut tries = 0;
        for _ in 0..3 {
            let got = recent.get_or_try_make(&7, |_| {
                tries += 1;
                Err::<u32, _>("bad key")
            });
            assert_eq!(got, Err("bad key"));
        }
        assert_eq!((tries, recent.len()), (3, 0));
        assert_eq!(recent.get_or_try_make(&8, |k| Ok::<_, ()>(k * 2)), Ok(16));
        assert_eq!(recent.get_or_try_make(&8, |_| Err(())), Ok(16));
    }

    #[test]
    fn values_made_without_failing_are_kept_alike() {
        let mut recent = Recent::new(2);
        let mut made = 0;
        for key in [1, 2, 1, 2] {
            let value = recent.get_or_make(&key, |k| {
                made += 1;
                k * 10
            });
            assert_eq!(value, key * 10);
        }
        assert_eq!(made, 2);
    }

    #[test]
    fn a_capacity_of_zero_keeps_one() {
        let mut recent = Recent::new(0);
        let mut made = 0;
        get(&mut recent, 1, &mut made);
        get(&mut recent, 1, &mut made);
        assert_eq!((made, recent.len()), (1, 1));
    }
}
