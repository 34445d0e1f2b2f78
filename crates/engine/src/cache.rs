//! The profile cache: a user's scores under a strategy, kept between
//! reads and dropped by the first write to any row they were read from.
//!
//! A search engine asks for the profile on every query, and a shopper
//! typing a query sends one per keystroke with no event in between, so
//! the same profile is computed again and again. The cache answers those
//! repeats from memory, and stays exact: an answer is one the store gives
//! at the moment it is returned.
//!
//! **How a write invalidates.** Writes are counted by a clock. Every
//! write to `profiles.<app>` (all of them go through [`Watched`], the
//! table handle the engine's applications hold) first completes in the
//! store, then ticks the clock and stamps the stripe of each user whose
//! rows it wrote with the new time (a stripe is a hash of application and
//! user, one of [`STRIPES`]). A write the handle cannot attribute to users
//! (a table's rows dropped, an application's tables opened anew after its
//! settings changed) stamps every stripe at once ([`ProfileCache::wrote_all`]).
//!
//! **How a read fills.** A read notes the clock before it reads anything,
//! reads the store, and stores its answer with that time and the users
//! whose rows it read (the token asked for, its identity's owner, every
//! candidate member). An entry answers only while none of those users'
//! stripes, nor the everything stamp, is later than its time.
//!
//! **Why that is exact.** A write whose stamp is not later than the read's
//! time ticked the clock before the read began, after its rows were in the
//! store, so the read saw them. A write stamped later invalidates the
//! entry from its stamp on, which comes before the write is acknowledged;
//! until then it is in flight, and the answer before it is a correct one.
//! A stripe shared by two users only costs the other user a recompute.
//!
//! Everything else a profile depends on is in the entry's key: the
//! strategy's weights (a fingerprint), the retention window's first day
//! and the newest day (so entries age out at midnight and when retention
//! changes), and the application handle read through (a read through the
//! handle of settings since replaced never answers for the new one). Only the embedded and memory stores use it: another process
//! writing to Cloud Bigtable would not tick this clock.

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use affinity_model::Mutation;
use affinity_model::{
    ReadModifyWriteRule, ReadRowsRequest, Result as StoreResult, Row, RowFilter, RowMutations,
    RowRef, RowRules, RowStream, SampleRowKey, Table,
};
use rustc_hash::{FxHashMap, FxHasher};

use crate::scoring::SortedScores;
use crate::strategy::Strategy;

/// The budget `affinity serve` gives the cache unless told otherwise.
pub const DEFAULT_BUDGET_MIB: usize = 64;
/// Stripes of users (a power of two): 2 MiB of stamps.
pub const STRIPES: usize = 1 << 18;
/// Independently locked parts of the entries.
const SHARDS: usize = 16;
/// What an entry costs beyond its scores (key, stamps, map slot).
const ENTRY_OVERHEAD: usize = 160;

/// A user's scores as [`crate::Engine::scores_with`] returns them: the
/// latest scoring event's time and the sorted scores, or `None` (no
/// profile state).
pub(crate) type Scores = Option<(i64, SortedScores)>;

/// What an entry is the answer to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub app: String,
    /// The application handle read through (`App::handle`).
    pub handle: u64,
    pub user: String,
    /// [`fingerprint`] of the strategy's weights.
    pub strategy: u64,
    /// The retention window's first day and the newest day at the read.
    pub window: i64,
    pub newest: i64,
}

struct Entry {
    key: Key,
    /// The clock when the read that computed it began.
    since: u64,
    /// The stripes of the users whose rows the read read.
    stripes: Box<[u32]>,
    scores: Scores,
    bytes: usize,
}

#[derive(Default)]
struct Shard {
    entries: FxHashMap<u64, Entry>,
    bytes: usize,
}

/// Hits, misses and size, for `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    /// Entries dropped to stay within the budget.
    pub evictions: u64,
    pub entries: u64,
    pub bytes: u64,
    pub budget: u64,
}

/// See the module docs.
pub struct ProfileCache {
    clock: AtomicU64,
    stripes: Box<[AtomicU64]>,
    /// The stamp of the last write to every stripe at once.
    all: AtomicU64,
    shards: Box<[Mutex<Shard>]>,
    shard_budget: usize,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

impl std::fmt::Debug for ProfileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfileCache")
            .field("stats", &self.stats())
            .finish()
    }
}

/// The stripe of `user` of `app`.
fn stripe(app: &str, user: &[u8]) -> u32 {
    let mut h = FxHasher::default();
    app.hash(&mut h);
    user.hash(&mut h);
    // Fx's low bits are its weakest: take the high ones.
    (h.finish() >> (64 - STRIPES.trailing_zeros())) as u32
}

/// A fingerprint of what scoring takes from a strategy: its event and
/// facet weights (the impact weighs answers, not scores).
pub(crate) fn fingerprint(strategy: &Strategy) -> u64 {
    let mut h = FxHasher::default();
    strategy.events.hash(&mut h);
    strategy.facets.hash(&mut h);
    h.finish()
}

impl ProfileCache {
    /// A cache holding up to about `budget_bytes` of entries.
    pub fn new(budget_bytes: usize) -> ProfileCache {
        ProfileCache {
            clock: AtomicU64::new(0),
            stripes: (0..STRIPES).map(|_| AtomicU64::new(0)).collect(),
            all: AtomicU64::new(0),
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            shard_budget: budget_bytes / SHARDS,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    /// The clock, to note before a read reads anything.
    pub(crate) fn now(&self) -> u64 {
        self.clock.load(Ordering::SeqCst)
    }

    /// After a write to the rows of `users` of `app` completed (or
    /// failed: it may have written some).
    pub(crate) fn wrote<'a>(&self, app: &str, users: impl Iterator<Item = &'a [u8]>) {
        let t = self.clock.fetch_add(1, Ordering::SeqCst) + 1;
        for user in users {
            self.stripes[stripe(app, user) as usize].fetch_max(t, Ordering::SeqCst);
        }
    }

    /// After a write that may have changed any user's rows.
    pub fn wrote_all(&self) {
        let t = self.clock.fetch_add(1, Ordering::SeqCst) + 1;
        self.all.fetch_max(t, Ordering::SeqCst);
    }

    fn shard(&self, hash: u64) -> &Mutex<Shard> {
        &self.shards[(hash % SHARDS as u64) as usize]
    }

    fn hash(key: &Key) -> u64 {
        let mut h = FxHasher::default();
        key.hash(&mut h);
        h.finish()
    }

    /// Whether no write to `stripes`, nor to everything, is stamped
    /// after `since`.
    fn unchanged(&self, since: u64, stripes: &[u32]) -> bool {
        self.all.load(Ordering::SeqCst) <= since
            && stripes
                .iter()
                .all(|s| self.stripes[*s as usize].load(Ordering::SeqCst) <= since)
    }

    /// The cached answer for `key`, if one is still exact (a stale one
    /// is dropped).
    pub(crate) fn get(&self, key: &Key) -> Option<Scores> {
        let hash = Self::hash(key);
        let mut shard = self.shard(hash).lock().unwrap_or_else(|p| p.into_inner());
        let stale = match shard.entries.get(&hash) {
            Some(e) if e.key == *key => {
                if self.unchanged(e.since, &e.stripes) {
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    return Some(e.scores.clone());
                }
                true
            }
            _ => false,
        };
        if stale {
            if let Some(e) = shard.entries.remove(&hash) {
                shard.bytes -= e.bytes;
            }
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// Keep the answer of a read that began at `since` (see
    /// [`ProfileCache::now`]) and read the rows of `users`; nothing is
    /// kept when one of them was written since, or it does not fit.
    pub(crate) fn put(&self, key: Key, since: u64, users: &[&str], scores: &Scores) {
        let stripes: Box<[u32]> = users
            .iter()
            .map(|u| stripe(&key.app, u.as_bytes()))
            .collect();
        if !self.unchanged(since, &stripes) {
            return;
        }
        let bytes = ENTRY_OVERHEAD
            + key.app.len()
            + key.user.len()
            + stripes.len() * 4
            + scores.as_ref().map_or(0, |(_, s)| s.heap_bytes());
        if bytes > self.shard_budget {
            return;
        }
        let hash = Self::hash(&key);
        let mut shard = self.shard(hash).lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = shard.entries.remove(&hash) {
            shard.bytes -= old.bytes;
        }
        if shard.bytes + bytes > self.shard_budget {
            // Over the budget: drop entries (in the map's order, which
            // is its hashes', so as good as random) until this one fits.
            let mut dropped = Vec::new();
            let mut freed = 0;
            for (h, e) in &shard.entries {
                if shard.bytes - freed + bytes <= self.shard_budget {
                    break;
                }
                freed += e.bytes;
                dropped.push(*h);
            }
            for h in &dropped {
                shard.entries.remove(h);
            }
            shard.bytes -= freed;
            self.evictions
                .fetch_add(dropped.len() as u64, Ordering::Relaxed);
        }
        shard.bytes += bytes;
        shard.entries.insert(
            hash,
            Entry {
                key,
                since,
                stripes,
                scores: scores.clone(),
                bytes,
            },
        );
    }

    pub fn stats(&self) -> CacheStats {
        let mut stats = CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            budget: (self.shard_budget * SHARDS) as u64,
            ..CacheStats::default()
        };
        for shard in self.shards.iter() {
            let shard = shard.lock().unwrap_or_else(|p| p.into_inner());
            stats.entries += shard.entries.len() as u64;
            stats.bytes += shard.bytes as u64;
        }
        stats
    }
}

/// The user a `profiles.<app>` row belongs to: its key up to the first
/// comma (`None` for the `~` rows of jobs: no user token has a `~`).
fn row_user(key: &[u8]) -> Option<&[u8]> {
    if key.starts_with(b"~") {
        return None;
    }
    let end = key.iter().position(|b| *b == b',').unwrap_or(key.len());
    Some(&key[..end])
}

/// A `profiles.<app>` handle that tells the cache of every write through
/// it, after the write (see the module docs).
pub(crate) struct Watched {
    inner: Arc<dyn Table>,
    app: String,
    cache: Arc<ProfileCache>,
}

impl Watched {
    pub(crate) fn wrap(
        inner: Arc<dyn Table>,
        app: &str,
        cache: &Arc<ProfileCache>,
    ) -> Arc<dyn Table> {
        Arc::new(Watched {
            inner,
            app: app.to_string(),
            cache: Arc::clone(cache),
        })
    }

    fn wrote<'a>(&self, keys: impl Iterator<Item = &'a [u8]>) {
        self.cache.wrote(&self.app, keys.filter_map(row_user));
    }
}

impl Table for Watched {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn mutate_row(&self, row_key: &[u8], mutations: &[Mutation]) -> StoreResult<()> {
        let out = self.inner.mutate_row(row_key, mutations);
        self.wrote(std::iter::once(row_key));
        out
    }

    fn mutate_rows(&self, entries: &[RowMutations]) -> StoreResult<Vec<StoreResult<()>>> {
        let out = self.inner.mutate_rows(entries);
        self.wrote(entries.iter().map(|e| e.row_key.as_ref()));
        out
    }

    fn mutate_rows_unsynced(&self, entries: &[RowMutations]) -> StoreResult<Vec<StoreResult<()>>> {
        let out = self.inner.mutate_rows_unsynced(entries);
        self.wrote(entries.iter().map(|e| e.row_key.as_ref()));
        out
    }

    fn check_and_mutate_row(
        &self,
        row_key: &[u8],
        predicate: Option<&RowFilter>,
        true_mutations: &[Mutation],
        false_mutations: &[Mutation],
    ) -> StoreResult<bool> {
        let out =
            self.inner
                .check_and_mutate_row(row_key, predicate, true_mutations, false_mutations);
        self.wrote(std::iter::once(row_key));
        out
    }

    fn check_and_mutate_row_unsynced(
        &self,
        row_key: &[u8],
        predicate: Option<&RowFilter>,
        true_mutations: &[Mutation],
        false_mutations: &[Mutation],
    ) -> StoreResult<bool> {
        let out = self.inner.check_and_mutate_row_unsynced(
            row_key,
            predicate,
            true_mutations,
            false_mutations,
        );
        self.wrote(std::iter::once(row_key));
        out
    }

    fn read_modify_write_row(
        &self,
        row_key: &[u8],
        rules: &[ReadModifyWriteRule],
    ) -> StoreResult<Row> {
        let out = self.inner.read_modify_write_row(row_key, rules);
        self.wrote(std::iter::once(row_key));
        out
    }

    fn read_modify_write_rows(&self, entries: &[RowRules]) -> StoreResult<Vec<StoreResult<Row>>> {
        let out = self.inner.read_modify_write_rows(entries);
        self.wrote(entries.iter().map(|e| e.row_key.as_ref()));
        out
    }

    fn sample_row_keys(&self) -> StoreResult<Vec<SampleRowKey>> {
        self.inner.sample_row_keys()
    }

    fn read_rows(&self, request: &ReadRowsRequest) -> StoreResult<RowStream<'_>> {
        self.inner.read_rows(request)
    }

    fn visit_rows(
        &self,
        request: &ReadRowsRequest,
        visit: &mut dyn FnMut(RowRef<'_>) -> StoreResult<bool>,
    ) -> StoreResult<()> {
        self.inner.visit_rows(request, visit)
    }

    fn read_row(&self, row_key: &[u8], filter: Option<&RowFilter>) -> StoreResult<Option<Row>> {
        self.inner.read_row(row_key, filter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(user: &str) -> Key {
        Key {
            app: "shop".into(),
            handle: 1,
            user: user.into(),
            strategy: 7,
            window: 100,
            newest: 190,
        }
    }

    fn scores(t: i64) -> Scores {
        Some((t, SortedScores::default()))
    }

    #[test]
    fn an_entry_answers_until_a_user_it_read_is_written() {
        let cache = ProfileCache::new(1 << 20);
        let since = cache.now();
        cache.put(key("u"), since, &["u", "member"], &scores(1));
        assert_eq!(cache.get(&key("u")), Some(scores(1)));
        cache.wrote("shop", [b"other".as_slice()].into_iter());
        assert_eq!(cache.get(&key("u")), Some(scores(1)), "another user");
        cache.wrote("other-app", [b"member".as_slice()].into_iter());
        assert_eq!(cache.get(&key("u")), Some(scores(1)), "another app");
        cache.wrote("shop", [b"member".as_slice()].into_iter());
        assert_eq!(cache.get(&key("u")), None, "a member was written");
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses, stats.entries), (3, 1, 0));
    }

    #[test]
    fn a_read_overtaken_by_a_write_is_not_kept() {
        let cache = ProfileCache::new(1 << 20);
        let since = cache.now();
        // The write lands while the read runs.
        cache.wrote("shop", [b"u".as_slice()].into_iter());
        cache.put(key("u"), since, &["u"], &scores(1));
        assert_eq!(cache.get(&key("u")), None);
        // A read that began after it is kept.
        let since = cache.now();
        cache.put(key("u"), since, &["u"], &scores(2));
        assert_eq!(cache.get(&key("u")), Some(scores(2)));
    }

    #[test]
    fn writes_to_everything_and_other_keys() {
        let cache = ProfileCache::new(1 << 20);
        let since = cache.now();
        cache.put(key("u"), since, &["u"], &None);
        assert_eq!(
            cache.get(&key("u")),
            Some(None),
            "no profile is an answer too"
        );
        let mut other_day = key("u");
        other_day.newest += 1;
        assert_eq!(cache.get(&other_day), None, "another day");
        let mut other_strategy = key("u");
        other_strategy.strategy += 1;
        assert_eq!(cache.get(&other_strategy), None, "another strategy");
        let mut other_handle = key("u");
        other_handle.handle += 1;
        assert_eq!(cache.get(&other_handle), None, "another handle");
        cache.wrote_all();
        assert_eq!(cache.get(&key("u")), None);
    }

    #[test]
    fn the_budget_holds() {
        let cache = ProfileCache::new(SHARDS * 4 * ENTRY_OVERHEAD);
        for i in 0..1000 {
            let since = cache.now();
            cache.put(key(&format!("user-{i}")), since, &["u"], &scores(i));
        }
        let stats = cache.stats();
        assert!(stats.bytes <= stats.budget, "{stats:?}");
        assert!(stats.entries > 0 && stats.evictions > 0, "{stats:?}");
    }

    #[test]
    fn rows_belong_to_the_user_before_the_first_comma() {
        assert_eq!(row_user(b"alice,!"), Some(b"alice".as_slice()));
        assert_eq!(row_user(b"alice,2026-11-27~03"), Some(b"alice".as_slice()));
        assert_eq!(row_user(b"alice"), Some(b"alice".as_slice()));
        assert_eq!(row_user(b"~jobs,maintain"), None);
    }
}
