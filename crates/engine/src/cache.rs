//! The profile cache: a user's scores under a strategy, kept between
//! reads and dropped by the first write to any row they were read from;
//! and users' rollup rows, kept until the row is written.
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
//!
//! **Rollup rows.** An active user's answer is dropped at each of their
//! events, and the read that follows reads the rollup row again, though
//! only a fold, a late event's marker, a link or a deletion changes it.
//! So the cache also keeps rollup rows as read (within a budget of their
//! own), by application, handle and user, by the same clock: a write of a
//! rollup row (`user,!`) stamps a second set of stripes besides the
//! first, and a kept row answers while its user's stripe there, nor the
//! everything stamp, is later than its read's time. A profile read takes
//! the rollups of its identity's members from here and reads only the
//! rows it misses. Maintenance, deletions and explanations read the
//! store. (A rollup row's read costs less than it seems to: the user's
//! day rows are in the same block of the store, which the day rows'
//! read then fetches instead.) Beside a kept rollup the cache also keeps
//! its counters weighed under the strategy last read with
//! ([`ProfileCache::put_weighed`], in the rollup's budget): they are made
//! from the rollup alone, so they are as fresh as it is, and the next
//! read under that strategy copies them instead of weighing the counters
//! again. It keeps them also merged with the digest (family `g`) of one
//! day row, the first a read met ([`ProfileCache::put_digested`]), under
//! that digest's row key, cells and timestamps: a read that meets the
//! same bytes takes the merged runs instead of weighing the digest and
//! merging it in. A digest changes once an hour at most, where the row's
//! other cells change at every event, so it is the part of today's row
//! worth keeping whole.

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use affinity_model::Mutation;
use affinity_model::{
    ReadModifyWriteRule, ReadRowsRequest, Result as StoreResult, Row, RowFilter, RowMutations,
    RowRef, RowRules, RowStream, SampleRowKey, Table,
};
use rustc_hash::{FxHashMap, FxHasher};

use crate::rollup::Rollup;
use crate::scoring::{SortedRuns, SortedScores};
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

/// A kept answer.
struct Entry {
    key: Key,
    /// The clock when the read that computed it began.
    since: u64,
    /// The stripes of the users whose rows the read read.
    stripes: Box<[u32]>,
    scores: Scores,
    bytes: usize,
}

/// A kept rollup row: `user`'s of application `app`, read through
/// handle `handle`.
struct RollupEntry {
    app: String,
    handle: u64,
    user: String,
    /// The clock when its read began.
    since: u64,
    stripe: u32,
    rollup: Arc<Rollup>,
    /// The rollup's by-facet counters weighed under one strategy (its
    /// [`fingerprint`]), once a read has weighed them.
    weighed: Option<(u64, Arc<SortedRuns>)>,
    /// Those runs merged with one day row's digest, once a read has.
    digested: Option<Digested>,
    bytes: usize,
}

/// A rollup row the cache gave: `user`'s of application `app`, read
/// through handle `handle`; what runs kept beside it are found by.
#[derive(Clone, Copy)]
pub(crate) struct KeptRollup<'r> {
    pub(crate) app: &'r str,
    pub(crate) handle: u64,
    pub(crate) user: &'r str,
    pub(crate) rollup: &'r Arc<Rollup>,
}

impl KeptRollup<'_> {
    fn hash(self) -> u64 {
        rollup_hash(self.app, self.handle, self.user)
    }
}

/// A rollup's weighed runs merged with a day row's digest.
#[derive(Clone)]
struct Digested {
    /// The strategy's [`fingerprint`].
    strategy: u64,
    /// The digest as read: its row key, cells and timestamps.
    digest: Box<[u8]>,
    runs: Arc<SortedRuns>,
}

impl Digested {
    fn bytes(&self) -> usize {
        self.digest.len() + self.runs.heap_bytes()
    }
}

/// What an entry costs the budget.
trait Weighed {
    fn bytes(&self) -> usize;
}

impl Weighed for Entry {
    fn bytes(&self) -> usize {
        self.bytes
    }
}

impl RollupEntry {
    /// Whether this entry (found by its key's hash) holds `kept.rollup`
    /// itself, as read through `kept.handle`.
    fn holds(&self, kept: KeptRollup<'_>) -> bool {
        self.handle == kept.handle && Arc::ptr_eq(&self.rollup, kept.rollup)
    }

    /// What the runs kept beside the rollup take.
    fn beside_bytes(&self) -> usize {
        self.weighed.as_ref().map_or(0, |(_, r)| r.heap_bytes())
            + self.digested.as_ref().map_or(0, Digested::bytes)
    }

    /// The entry without the runs beside the rollup.
    fn copy(&self) -> RollupEntry {
        RollupEntry {
            app: self.app.clone(),
            handle: self.handle,
            user: self.user.clone(),
            since: self.since,
            stripe: self.stripe,
            rollup: Arc::clone(&self.rollup),
            weighed: None,
            digested: None,
            bytes: self.bytes,
        }
    }
}

impl Weighed for RollupEntry {
    fn bytes(&self) -> usize {
        self.bytes
    }
}

struct Shard<E> {
    entries: FxHashMap<u64, E>,
    bytes: usize,
}

impl<E> Default for Shard<E> {
    fn default() -> Self {
        Shard {
            entries: FxHashMap::default(),
            bytes: 0,
        }
    }
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

/// Entries of one kind within a budget, in independently locked shards.
struct Part<E> {
    shards: Box<[Mutex<Shard<E>>]>,
    shard_budget: usize,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

impl<E: Weighed> Part<E> {
    fn new(budget_bytes: usize) -> Part<E> {
        Part {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            shard_budget: budget_bytes / SHARDS,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    fn keeps(&self) -> bool {
        self.shard_budget > 0
    }

    fn shard(&self, hash: u64) -> std::sync::MutexGuard<'_, Shard<E>> {
        self.shards[(hash % SHARDS as u64) as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// `answer` of the entry of `hash` that `is_it` accepts, while
    /// `fresh` holds for it (a stale one is dropped).
    fn get<T>(
        &self,
        hash: u64,
        is_it: impl Fn(&E) -> bool,
        fresh: impl Fn(&E) -> bool,
        answer: impl Fn(&E) -> T,
    ) -> Option<T> {
        let mut shard = self.shard(hash);
        let stale = match shard.entries.get(&hash) {
            Some(e) if is_it(e) => {
                if fresh(e) {
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    return Some(answer(e));
                }
                true
            }
            _ => false,
        };
        if stale {
            if let Some(e) = shard.entries.remove(&hash) {
                shard.bytes -= e.bytes();
            }
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// `answer` of the entry of `hash`, if any, as it is: no freshness
    /// check, not counted in the figures (a second look at an entry just
    /// taken).
    fn peek<T>(&self, hash: u64, answer: impl FnOnce(&E) -> Option<T>) -> Option<T> {
        self.shard(hash).entries.get(&hash).and_then(answer)
    }

    /// Keep `entry` under `hash` (in place of the entry there), unless it
    /// alone is over a shard's budget.
    fn put(&self, hash: u64, entry: E) {
        let bytes = entry.bytes();
        if bytes > self.shard_budget {
            return;
        }
        let mut shard = self.shard(hash);
        if let Some(old) = shard.entries.remove(&hash) {
            shard.bytes -= old.bytes();
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
                freed += e.bytes();
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
        shard.entries.insert(hash, entry);
    }

    fn stats(&self) -> CacheStats {
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

/// See the module docs.
pub struct ProfileCache {
    clock: AtomicU64,
    /// Per stripe, the stamp of the last write to any row of its users.
    stripes: Box<[AtomicU64]>,
    /// Per stripe, the stamp of the last write to its users' rollup rows.
    rollup_stripes: Box<[AtomicU64]>,
    /// The stamp of the last write to every stripe at once.
    all: AtomicU64,
    answers: Part<Entry>,
    rollups: Part<RollupEntry>,
}

impl std::fmt::Debug for ProfileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfileCache")
            .field("stats", &self.stats())
            .field("rollup_stats", &self.rollup_stats())
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

fn rollup_hash(app: &str, handle: u64, user: &str) -> u64 {
    let mut h = FxHasher::default();
    (app, handle, user).hash(&mut h);
    h.finish()
}

impl ProfileCache {
    /// A cache keeping up to about `answers_bytes` of answers and
    /// `rollups_bytes` of rollup rows (0: none of that kind).
    pub fn new(answers_bytes: usize, rollups_bytes: usize) -> ProfileCache {
        let stamps = || (0..STRIPES).map(|_| AtomicU64::new(0)).collect();
        ProfileCache {
            clock: AtomicU64::new(0),
            stripes: stamps(),
            rollup_stripes: stamps(),
            all: AtomicU64::new(0),
            answers: Part::new(answers_bytes),
            rollups: Part::new(rollups_bytes),
        }
    }

    /// The budgets given to [`ProfileCache::new`], as kept (rounded down
    /// to a multiple of the shards).
    pub fn budgets(&self) -> (usize, usize) {
        (
            self.answers.shard_budget * SHARDS,
            self.rollups.shard_budget * SHARDS,
        )
    }

    pub(crate) fn keeps_answers(&self) -> bool {
        self.answers.keeps()
    }

    pub(crate) fn keeps_rollups(&self) -> bool {
        self.rollups.keeps()
    }

    /// The clock, to note before a read reads anything.
    pub(crate) fn now(&self) -> u64 {
        self.clock.load(Ordering::SeqCst)
    }

    /// After a write to `rows` of `app` completed (or failed: it may have
    /// written some): each is its user and whether it is the user's
    /// rollup row.
    pub(crate) fn wrote<'a>(&self, app: &str, rows: impl Iterator<Item = (&'a [u8], bool)>) {
        let t = self.clock.fetch_add(1, Ordering::SeqCst) + 1;
        for (user, rollup) in rows {
            let s = stripe(app, user) as usize;
            self.stripes[s].fetch_max(t, Ordering::SeqCst);
            if rollup {
                self.rollup_stripes[s].fetch_max(t, Ordering::SeqCst);
            }
        }
    }

    /// After a write that may have changed any user's rows.
    pub fn wrote_all(&self) {
        let t = self.clock.fetch_add(1, Ordering::SeqCst) + 1;
        self.all.fetch_max(t, Ordering::SeqCst);
    }

    fn hash(key: &Key) -> u64 {
        let mut h = FxHasher::default();
        key.hash(&mut h);
        h.finish()
    }

    /// Whether no write to `stripes` of `stamps`, nor to everything, is
    /// stamped after `since`.
    fn unchanged(&self, stamps: &[AtomicU64], since: u64, stripes: &[u32]) -> bool {
        self.all.load(Ordering::SeqCst) <= since
            && stripes
                .iter()
                .all(|s| stamps[*s as usize].load(Ordering::SeqCst) <= since)
    }

    /// The cached answer for `key`, if one is still exact (a stale one
    /// is dropped).
    pub(crate) fn get(&self, key: &Key) -> Option<Scores> {
        self.answers.get(
            Self::hash(key),
            |e| e.key == *key,
            |e| self.unchanged(&self.stripes, e.since, &e.stripes),
            |e| e.scores.clone(),
        )
    }

    /// Keep the answer of a read that began at `since` (see
    /// [`ProfileCache::now`]) and read the rows of `users`; nothing is
    /// kept when one of them was written since, or it does not fit.
    pub(crate) fn put(&self, key: Key, since: u64, users: &[&str], scores: &Scores) {
        if !self.answers.keeps() {
            return;
        }
        let stripes: Box<[u32]> = users
            .iter()
            .map(|u| stripe(&key.app, u.as_bytes()))
            .collect();
        if !self.unchanged(&self.stripes, since, &stripes) {
            return;
        }
        let bytes = ENTRY_OVERHEAD
            + key.app.len()
            + key.user.len()
            + stripes.len() * 4
            + scores.as_ref().map_or(0, |(_, s)| s.heap_bytes());
        let hash = Self::hash(&key);
        self.answers.put(
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

    /// `user`'s rollup row of `app` read through `handle`, if the one kept
    /// is still what the store holds (a stale one is dropped).
    pub(crate) fn rollup(&self, app: &str, handle: u64, user: &str) -> Option<Arc<Rollup>> {
        self.rollups.get(
            rollup_hash(app, handle, user),
            |e| e.handle == handle && e.app == app && e.user == user,
            |e| self.unchanged(&self.rollup_stripes, e.since, &[e.stripe]),
            |e| Arc::clone(&e.rollup),
        )
    }

    /// Keep `user`'s rollup row of `app` as a read through `handle` that
    /// began at `since` found it; nothing is kept when the row was
    /// written since, or it does not fit.
    pub(crate) fn put_rollup(
        &self,
        app: &str,
        handle: u64,
        user: &str,
        since: u64,
        rollup: &Arc<Rollup>,
    ) {
        if !self.rollups.keeps() {
            return;
        }
        let stripe = stripe(app, user.as_bytes());
        if !self.unchanged(&self.rollup_stripes, since, &[stripe]) {
            return;
        }
        let bytes = ENTRY_OVERHEAD + app.len() + user.len() + rollup.heap_bytes();
        self.rollups.put(
            rollup_hash(app, handle, user),
            RollupEntry {
                app: app.to_string(),
                handle,
                user: user.to_string(),
                since,
                stripe,
                rollup: Arc::clone(rollup),
                weighed: None,
                digested: None,
                bytes,
            },
        );
    }

    /// The runs [`ProfileCache::put_weighed`] kept beside `kept.rollup`
    /// (the very rollup this cache gave for the user) for the strategy of
    /// fingerprint `strategy`. The runs are made from the rollup alone, so
    /// they are as fresh as it is; only the rollup's lookup counts in the
    /// figures.
    pub(crate) fn weighed(&self, kept: KeptRollup<'_>, strategy: u64) -> Option<Arc<SortedRuns>> {
        self.rollups.peek(kept.hash(), |e| {
            let (fp, runs) = e.weighed.as_ref()?;
            (*fp == strategy && e.holds(kept)).then(|| Arc::clone(runs))
        })
    }

    /// Keep `runs`, the rollup's by-facet counters weighed under the
    /// strategy of fingerprint `strategy`, beside the rollup, in place of
    /// runs of another strategy; nothing when the entry no longer holds
    /// this rollup, or does not fit with them.
    pub(crate) fn put_weighed(&self, kept: KeptRollup<'_>, strategy: u64, runs: &Arc<SortedRuns>) {
        self.replace_beside(kept, |e| RollupEntry {
            weighed: Some((strategy, Arc::clone(runs))),
            digested: e.digested.clone(),
            ..e.copy()
        });
    }

    /// The runs [`ProfileCache::put_digested`] kept beside `kept.rollup`
    /// for the strategy of fingerprint `strategy` and the day row's digest
    /// `digest` (its row key, cells and timestamps, as
    /// [`ProfileCache::put_digested`] took them). Not counted in the
    /// figures.
    pub(crate) fn digested(
        &self,
        kept: KeptRollup<'_>,
        strategy: u64,
        digest: &[u8],
    ) -> Option<Arc<SortedRuns>> {
        self.rollups.peek(kept.hash(), |e| {
            let d = e.digested.as_ref()?;
            (d.strategy == strategy && e.holds(kept) && *d.digest == *digest)
                .then(|| Arc::clone(&d.runs))
        })
    }

    /// Keep `runs`, the rollup's by-facet counters weighed under the
    /// strategy of fingerprint `strategy` and merged with the day row's
    /// digest `digest`, beside the rollup, in place of others; nothing
    /// when the entry no longer holds this rollup, or does not fit with
    /// them.
    pub(crate) fn put_digested(
        &self,
        kept: KeptRollup<'_>,
        strategy: u64,
        digest: &[u8],
        runs: &Arc<SortedRuns>,
    ) {
        self.replace_beside(kept, |e| RollupEntry {
            weighed: e.weighed.clone(),
            digested: Some(Digested {
                strategy,
                digest: digest.into(),
                runs: Arc::clone(runs),
            }),
            ..e.copy()
        });
    }

    /// Replace the entry holding `kept.rollup` by what `with` makes of
    /// it, its size counted again; put as a new entry, with the read time
    /// of the rollup, so that it stays exactly as fresh as before.
    fn replace_beside(&self, kept: KeptRollup<'_>, with: impl FnOnce(&RollupEntry) -> RollupEntry) {
        let hash = kept.hash();
        let entry = self.rollups.peek(hash, |e| {
            e.holds(kept).then(|| {
                let mut entry = with(e);
                entry.bytes = e.bytes - e.beside_bytes() + entry.beside_bytes();
                entry
            })
        });
        if let Some(entry) = entry {
            self.rollups.put(hash, entry);
        }
    }

    /// The answers' figures.
    pub fn stats(&self) -> CacheStats {
        self.answers.stats()
    }

    /// The rollup rows' figures.
    pub fn rollup_stats(&self) -> CacheStats {
        self.rollups.stats()
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

/// [`row_user`] of a row key, and whether the row is the user's rollup
/// row (`user,!`, [`crate::rollup::rollup_key`]).
fn row_of(key: &[u8]) -> Option<(&[u8], bool)> {
    let user = row_user(key)?;
    Some((user, &key[user.len()..] == b",!"))
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
        self.cache.wrote(&self.app, keys.filter_map(row_of));
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
        let cache = ProfileCache::new(1 << 20, 1 << 20);
        let since = cache.now();
        cache.put(key("u"), since, &["u", "member"], &scores(1));
        assert_eq!(cache.get(&key("u")), Some(scores(1)));
        cache.wrote("shop", [(b"other".as_slice(), false)].into_iter());
        assert_eq!(cache.get(&key("u")), Some(scores(1)), "another user");
        cache.wrote("other-app", [(b"member".as_slice(), false)].into_iter());
        assert_eq!(cache.get(&key("u")), Some(scores(1)), "another app");
        cache.wrote("shop", [(b"member".as_slice(), false)].into_iter());
        assert_eq!(cache.get(&key("u")), None, "a member was written");
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses, stats.entries), (3, 1, 0));
    }

    #[test]
    fn a_read_overtaken_by_a_write_is_not_kept() {
        let cache = ProfileCache::new(1 << 20, 1 << 20);
        let since = cache.now();
        // The write lands while the read runs.
        cache.wrote("shop", [(b"u".as_slice(), false)].into_iter());
        cache.put(key("u"), since, &["u"], &scores(1));
        assert_eq!(cache.get(&key("u")), None);
        // A read that began after it is kept.
        let since = cache.now();
        cache.put(key("u"), since, &["u"], &scores(2));
        assert_eq!(cache.get(&key("u")), Some(scores(2)));
    }

    #[test]
    fn writes_to_everything_and_other_keys() {
        let cache = ProfileCache::new(1 << 20, 1 << 20);
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
        let cache = ProfileCache::new(SHARDS * 4 * ENTRY_OVERHEAD, 0);
        for i in 0..1000 {
            let since = cache.now();
            cache.put(key(&format!("user-{i}")), since, &["u"], &scores(i));
        }
        let stats = cache.stats();
        assert!(stats.bytes <= stats.budget, "{stats:?}");
        assert!(stats.entries > 0 && stats.evictions > 0, "{stats:?}");
    }

    fn rollup(watermark: i64) -> Arc<Rollup> {
        Arc::new(Rollup {
            watermark: Some(crate::rollup::Watermark {
                h: watermark,
                lo: 1,
            }),
            by_facet: vec![(b"brand".to_vec(), vec![1, 2, 3])],
            ..Rollup::default()
        })
    }

    #[test]
    fn a_rollup_is_kept_until_its_row_is_written() {
        let cache = ProfileCache::new(0, 1 << 20);
        assert!(!cache.keeps_answers() && cache.keeps_rollups());
        let since = cache.now();
        cache.put_rollup("shop", 1, "u", since, &rollup(5));
        assert_eq!(cache.rollup("shop", 1, "u"), Some(rollup(5)));
        assert_eq!(cache.rollup("shop", 2, "u"), None, "another handle");
        assert_eq!(cache.rollup("other", 1, "u"), None, "another app");
        assert_eq!(cache.rollup("shop", 1, "v"), None, "another user");
        // A day row of the user: the rollup row is as it was.
        cache.wrote("shop", [(b"u".as_slice(), false)].into_iter());
        assert_eq!(cache.rollup("shop", 1, "u"), Some(rollup(5)), "a day row");
        cache.wrote("shop", [(b"u".as_slice(), true)].into_iter());
        assert_eq!(cache.rollup("shop", 1, "u"), None, "its rollup row");
        // A read overtaken by a write of the row is not kept.
        let since = cache.now();
        cache.wrote("shop", [(b"u".as_slice(), true)].into_iter());
        cache.put_rollup("shop", 1, "u", since, &rollup(6));
        assert_eq!(cache.rollup("shop", 1, "u"), None);
        let since = cache.now();
        cache.put_rollup("shop", 1, "u", since, &rollup(7));
        assert_eq!(cache.rollup("shop", 1, "u"), Some(rollup(7)));
        cache.wrote_all();
        assert_eq!(cache.rollup("shop", 1, "u"), None, "everything written");
        let stats = cache.rollup_stats();
        assert_eq!((stats.hits, stats.entries), (3, 0), "{stats:?}");
        // No answers are kept without their budget.
        let key = key("u");
        let since = cache.now();
        cache.put(key.clone(), since, &["u"], &scores(1));
        assert_eq!(cache.get(&key), None);
        assert_eq!(cache.stats().entries, 0);
    }

    /// The rollup `rollup` of user `user` of "shop", through `handle`.
    fn at<'r>(handle: u64, user: &'r str, rollup: &'r Arc<Rollup>) -> KeptRollup<'r> {
        KeptRollup {
            app: "shop",
            handle,
            user,
            rollup,
        }
    }

    fn runs(value: &str) -> Arc<SortedRuns> {
        let mut runs = SortedRuns::default();
        let run = [Ok::<_, ()>((value.as_bytes(), 1))];
        runs.push_run(0, 1, run, |_| ()).unwrap();
        Arc::new(runs)
    }

    #[test]
    fn weighed_runs_are_kept_beside_their_rollup() {
        let cache = ProfileCache::new(0, 1 << 20);
        let since = cache.now();
        let kept = rollup(5);
        cache.put_rollup("shop", 1, "u", since, &kept);
        let bytes = cache.rollup_stats().bytes;
        assert!(cache.weighed(at(1, "u", &kept), 7).is_none());
        let (a, b) = (runs("a"), runs("b"));
        cache.put_weighed(at(1, "u", &kept), 7, &a);
        let got = cache.weighed(at(1, "u", &kept), 7).unwrap();
        assert!(Arc::ptr_eq(&got, &a));
        assert_eq!(
            cache.rollup_stats().bytes,
            bytes + a.heap_bytes() as u64,
            "the runs count in the budget"
        );
        assert!(
            cache.weighed(at(1, "u", &kept), 8).is_none(),
            "another strategy"
        );
        assert!(
            cache.weighed(at(2, "u", &kept), 7).is_none(),
            "another handle"
        );
        assert!(
            cache.weighed(at(1, "v", &kept), 7).is_none(),
            "another user"
        );
        // Only for the very rollup kept: not for an equal one read anew.
        assert!(cache.weighed(at(1, "u", &rollup(5)), 7).is_none());
        cache.put_weighed(at(1, "u", &rollup(5)), 8, &b);
        assert!(cache.weighed(at(1, "u", &kept), 8).is_none());
        // Another strategy's runs take the place of the first's.
        cache.put_weighed(at(1, "u", &kept), 8, &b);
        assert!(cache.weighed(at(1, "u", &kept), 7).is_none());
        assert!(Arc::ptr_eq(
            &cache.weighed(at(1, "u", &kept), 8).unwrap(),
            &b
        ));
        assert_eq!(cache.rollup_stats().bytes, bytes + b.heap_bytes() as u64);
        // The rollup stays as fresh as it was, and goes with its runs.
        assert_eq!(cache.rollup("shop", 1, "u"), Some(rollup(5)));
        cache.wrote("shop", [(b"u".as_slice(), true)].into_iter());
        assert_eq!(cache.rollup("shop", 1, "u"), None);
        assert!(cache.weighed(at(1, "u", &kept), 8).is_none());
        assert_eq!(cache.rollup_stats().bytes, 0);
    }

    #[test]
    fn digested_runs_are_kept_beside_their_rollup_for_one_digest() {
        let cache = ProfileCache::new(0, 1 << 20);
        let since = cache.now();
        let kept = rollup(5);
        cache.put_rollup("shop", 1, "u", since, &kept);
        let bytes = cache.rollup_stats().bytes;
        let (a, b, w) = (runs("a"), runs("b"), runs("w"));
        assert!(cache.digested(at(1, "u", &kept), 7, b"g1").is_none());
        cache.put_digested(at(1, "u", &kept), 7, b"g1", &a);
        let got = cache.digested(at(1, "u", &kept), 7, b"g1").unwrap();
        assert!(Arc::ptr_eq(&got, &a));
        assert_eq!(
            cache.rollup_stats().bytes,
            bytes + (a.heap_bytes() + 2) as u64,
            "the runs and the digest count in the budget"
        );
        for (handle, user, strategy, digest, what) in [
            (1, "u", 8, &b"g1"[..], "another strategy"),
            (1, "u", 7, b"g2", "another digest"),
            (1, "u", 7, b"g", "a digest's prefix"),
            (2, "u", 7, b"g1", "another handle"),
            (1, "v", 7, b"g1", "another user"),
        ] {
            assert!(
                cache
                    .digested(at(handle, user, &kept), strategy, digest)
                    .is_none(),
                "{what}"
            );
        }
        assert!(cache.digested(at(1, "u", &rollup(5)), 7, b"g1").is_none());
        // The weighed runs and the digested ones are kept side by side.
        cache.put_weighed(at(1, "u", &kept), 7, &w);
        assert!(Arc::ptr_eq(
            &cache.weighed(at(1, "u", &kept), 7).unwrap(),
            &w
        ));
        assert!(cache.digested(at(1, "u", &kept), 7, b"g1").is_some());
        // A new digest takes the old one's place.
        cache.put_digested(at(1, "u", &kept), 7, b"g22", &b);
        assert!(cache.digested(at(1, "u", &kept), 7, b"g1").is_none());
        let got = cache.digested(at(1, "u", &kept), 7, b"g22").unwrap();
        assert!(Arc::ptr_eq(&got, &b));
        assert!(Arc::ptr_eq(
            &cache.weighed(at(1, "u", &kept), 7).unwrap(),
            &w
        ));
        assert_eq!(
            cache.rollup_stats().bytes,
            bytes + (w.heap_bytes() + b.heap_bytes() + 3) as u64
        );
        // They go with the rollup.
        cache.wrote("shop", [(b"u".as_slice(), true)].into_iter());
        assert_eq!(cache.rollup("shop", 1, "u"), None);
        assert!(cache.digested(at(1, "u", &kept), 7, b"g22").is_none());
        assert_eq!(cache.rollup_stats().bytes, 0);
    }

    #[test]
    fn a_rollup_write_also_drops_answers() {
        let cache = ProfileCache::new(1 << 20, 1 << 20);
        let since = cache.now();
        cache.put(key("u"), since, &["u"], &scores(1));
        cache.wrote("shop", [(b"u".as_slice(), true)].into_iter());
        assert_eq!(cache.get(&key("u")), None);
    }

    #[test]
    fn rows_belong_to_the_user_before_the_first_comma() {
        assert_eq!(row_user(b"alice,!"), Some(b"alice".as_slice()));
        assert_eq!(row_user(b"alice,2026-11-27~03"), Some(b"alice".as_slice()));
        assert_eq!(row_user(b"alice"), Some(b"alice".as_slice()));
        assert_eq!(row_user(b"~jobs,maintain"), None);
        assert_eq!(row_of(b"alice,!"), Some((b"alice".as_slice(), true)));
        assert_eq!(row_of(b"alice,20421"), Some((b"alice".as_slice(), false)));
        assert_eq!(
            row_of(b"alice,20421,03"),
            Some((b"alice".as_slice(), false))
        );
        assert_eq!(row_of(b"alice,!x"), Some((b"alice".as_slice(), false)));
        assert_eq!(row_of(b"~hot,20421"), None);
        assert_eq!(
            row_of(crate::rollup::rollup_key("alice").as_bytes()),
            Some((b"alice".as_slice(), true))
        );
    }
}
