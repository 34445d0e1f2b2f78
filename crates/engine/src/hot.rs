//! Hot users: the day row of a user on a day's hot list is spread over
//! sub-rows `user,DDDDDDDD,kk`, so Cloud Bigtable's load-based splitting
//! can divide its writes (`docs/design/profiles.md`, "Hot users").
//!
//! - The hot list of day `D` is the row `~hot,DDDDDDDD` of
//!   `profiles.<app>`: one cell per listed user in family `h`, qualifier
//!   the user, value the number of sub-rows `S` (u32 BE), stamped with the
//!   day's first microsecond (so it expires with the day's rows).
//! - It may be written only before [`list_cutoff_millis`] (4 hours before
//!   the day starts) on the writer's clock, and is final
//!   [`FINAL_AFTER_MILLIS`] later: no add of day `D` exists before then
//!   (events are taken at most an hour ahead, clocks agree within half an
//!   hour), so every writer and reader of day `D` uses the same list.
//! - One event's adds all go to one row: sub-row
//!   `XXH64(event id) mod S` of a listed user, else `user,D` (invariant
//!   8), so an event's `i` versions stay in one cell and the corrections
//!   stay exact.
//! - Readers of a listed user's day read the range
//!   `[user,D, user,D+1)` instead of the point `user,D`; others pay
//!   nothing. Ranges of days cover the sub-rows already.
//! - The user's events of day `D` are keyed in the same sub-row's bucket
//!   (`EventId::row_key`: `app,user,DATE~kkTIME,suffix`), so their writes
//!   divide too; a correction finds an event's bucket from its day's list.
//!
//! Ingestion lists users by itself ([`HotPolicy`]): each process counts
//! the adds of the day per user (a bounded heavy-hitters count), and a
//! user over the policy's share is published on the next day's list whose
//! cut-off has not passed. `affinity hot` lists and publishes by hand.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use affinity_model::{Bytes, Mutation, ReadRowsRequest, RowFilter, RowRange, RowSet};
use affinity_rowkey::composite::event_hash;
use rustc_hash::FxHashMap;

use crate::batch::visit_rows;
use crate::engine::{App, Engine, DAY_MILLIS};
use crate::error::{Error, Result};
use crate::state::{day_micros, state_row_key, EventId};

/// The family of the hot lists' cells.
pub const HOT_FAMILY: &str = "h";
/// Most sub-rows a user's day is spread over (`kk` is two hex digits).
pub const MAX_SUB_ROWS: u32 = 256;
/// A day's list may be written until this long before the day starts.
pub const LIST_CUTOFF_MILLIS: i64 = 4 * 3_600_000;
/// A day's list is final this long after its cut-off: every writer's
/// clock (within half an hour of any other) has passed the cut-off by
/// then, with a margin for the write itself.
pub const FINAL_AFTER_MILLIS: i64 = 2 * 3_600_000;

/// The row of day `day`'s hot list.
pub fn list_key(day: i64) -> String {
    format!("~hot,{day:08}")
}

/// The last moment (milliseconds) day `day`'s list may be written.
pub fn list_cutoff_millis(day: i64) -> i64 {
    day * DAY_MILLIS - LIST_CUTOFF_MILLIS
}

/// Whether day `day`'s list is final at `now_millis`: every process then
/// reads the same one, and may keep it.
pub fn list_is_final(day: i64, now_millis: i64) -> bool {
    now_millis >= list_cutoff_millis(day) + FINAL_AFTER_MILLIS
}

/// The next day whose list may still be written at `now_millis`:
/// tomorrow until its cut-off, then the day after.
pub fn next_open_list(now_millis: i64) -> i64 {
    let today = now_millis.div_euclid(DAY_MILLIS);
    if now_millis < list_cutoff_millis(today + 1) {
        today + 1
    } else {
        today + 2
    }
}

/// The sub-row of a listed user's day (of `rows` sub-rows) that the adds
/// of event `id` go to.
pub fn sub_row(id: &EventId, rows: u32) -> u32 {
    (event_hash(&id.qualifier()) % u64::from(rows.max(1))) as u32
}

/// The key of sub-row `kk` of a user's day: `user,DDDDDDDD,kk`.
pub fn sub_row_key(user: &str, day: i64, kk: u32) -> String {
    let mut key = String::with_capacity(user.len() + 12);
    push_sub_row_key(&mut key, user, day, kk);
    key
}

/// [`sub_row_key`] written into `out`.
pub(crate) fn push_sub_row_key(out: &mut impl std::fmt::Write, user: &str, day: i64, kk: u32) {
    // Writing to memory cannot fail.
    let _ = write!(out, "{user},{day:08},{kk:02x}");
}

/// The hot lists of the days one batch touches, each read once.
#[derive(Default)]
pub(crate) struct BatchLists {
    days: Vec<(i64, Arc<HotList>)>,
}

impl BatchLists {
    /// Day `day`'s list of `app`.
    pub(crate) fn get(&mut self, engine: &Engine, app: &App, day: i64) -> Result<&HotList> {
        let at = match self.days.iter().position(|(d, _)| *d == day) {
            Some(at) => at,
            None => {
                self.days.push((day, engine.hot_list(app, day)?));
                self.days.len() - 1
            }
        };
        Ok(&self.days[at].1)
    }
}

/// One day's hot list: the users spread, each with its sub-row count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HotList {
    rows: FxHashMap<String, u32>,
}

impl HotList {
    /// The user's sub-row count that day (1: not spread).
    pub fn rows(&self, user: &str) -> u32 {
        self.rows.get(user).copied().unwrap_or(1)
    }

    /// The listed users and their sub-row counts, by user.
    pub fn users(&self) -> Vec<(String, u32)> {
        let mut out: Vec<(String, u32)> = self.rows.iter().map(|(u, s)| (u.clone(), *s)).collect();
        out.sort();
        out
    }
}

/// When ingestion lists a user: at least `min_adds` of the day's events
/// so far, and at least `min_share` of the process's events of the day;
/// spread over `share / share_per_row` sub-rows, rounded up to a power of
/// two, between 2 and `max_rows`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HotPolicy {
    pub min_adds: u64,
    pub min_share: f64,
    pub share_per_row: f64,
    pub max_rows: u32,
    /// Users counted per application (a heavy-hitters count: users below
    /// `1 / tracked` of the adds may be missed, never those above).
    pub tracked: usize,
}

impl Default for HotPolicy {
    fn default() -> HotPolicy {
        HotPolicy {
            min_adds: 10_000,
            min_share: 0.01,
            share_per_row: 0.01,
            max_rows: 16,
            tracked: 1024,
        }
    }
}

impl HotPolicy {
    /// Never list anyone.
    pub fn off() -> HotPolicy {
        HotPolicy {
            min_adds: u64::MAX,
            ..HotPolicy::default()
        }
    }

    /// The sub-rows for a user with `adds` of `total`, if hot.
    pub fn rows_for(&self, adds: u64, total: u64) -> Option<u32> {
        if adds < self.min_adds || total == 0 {
            return None;
        }
        let share = adds as f64 / total as f64;
        if share < self.min_share {
            return None;
        }
        let wanted = (share / self.share_per_row)
            .ceil()
            .clamp(2.0, f64::from(MAX_SUB_ROWS));
        Some(
            (wanted as u32)
                .next_power_of_two()
                .clamp(2, self.max_rows.max(2)),
        )
    }
}

/// How many users ingestion put on hot lists, and how many it failed to
/// (`/metrics`).
#[derive(Debug, Default)]
pub struct ListedCounts {
    pub listed: std::sync::atomic::AtomicU64,
    pub failed: std::sync::atomic::AtomicU64,
}

/// Per application: the final lists read so far, and the adds counted
/// for the automatic listing.
#[derive(Default)]
pub(crate) struct HotLists {
    finals: Mutex<FxHashMap<i64, Arc<HotList>>>,
    counts: Mutex<Counts>,
}

/// The adds of one arrival day per user, and what this process
/// published. A heavy-hitters count in at most `2 * tracked` users: when
/// full, every count drops by the `tracked`-th largest and users at or
/// below it leave, so a user's count is short by at most `total /
/// tracked` (each drop takes as much from `tracked` other users).
#[derive(Default)]
struct Counts {
    day: i64,
    total: u64,
    users: FxHashMap<String, u64>,
    /// `(list day, user) -> rows` published by this process.
    published: FxHashMap<(i64, String), u32>,
}

impl Counts {
    fn add(&mut self, day: i64, user: &str, n: u64, tracked: usize) {
        if self.day != day {
            self.day = day;
            self.total = 0;
            self.users.clear();
            self.published.retain(|(d, _), _| *d > day);
        }
        self.total += n;
        if let Some(c) = self.users.get_mut(user) {
            *c += n;
            return;
        }
        self.users.insert(user.to_string(), n);
        let tracked = tracked.max(1);
        if self.users.len() >= 2 * tracked {
            let mut counts: Vec<u64> = self.users.values().copied().collect();
            let at = counts.len() - tracked;
            let (_, drop, _) = counts.select_nth_unstable(at);
            let drop = *drop;
            self.users.retain(|_, c| *c > drop);
            self.users.values_mut().for_each(|c| *c -= drop);
        }
    }
}

fn decode_rows(user: &[u8], value: &[u8]) -> Result<(String, u32)> {
    let bad = || Error::corrupt("hot list cell", String::from_utf8_lossy(user).into_owned());
    let rows = u32::from_be_bytes(value.try_into().map_err(|_| bad())?);
    let user = std::str::from_utf8(user).map_err(|_| bad())?;
    if !(2..=MAX_SUB_ROWS).contains(&rows) {
        return Err(bad());
    }
    Ok((user.to_string(), rows))
}

fn check_user(user: &str) -> Result<()> {
    if crate::event::user_token_ok(user) {
        return Ok(());
    }
    Err(Error::InvalidArgument {
        name: "user",
        reason: format!("{user:?}: a user token matches [a-zA-Z0-9_=/+-]{{1,129}}"),
    })
}

/// A day as `2024-05-21`.
pub fn day_text(day: i64) -> String {
    let text = affinity_rowkey::time::format_seconds(day * DAY_MILLIS).unwrap_or_default();
    text.chars().take(10).collect()
}

impl Engine {
    /// Day `day`'s hot list of the application: read from the store, and
    /// kept once final.
    pub fn hot_list(&self, app: &App, day: i64) -> Result<Arc<HotList>> {
        if let Some(list) = app
            .hot
            .finals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&day)
        {
            return Ok(list.clone());
        }
        let mut list = HotList::default();
        let request = ReadRowsRequest::new(RowSet::from_keys([Bytes::from(list_key(day))]))
            .with_filter(RowFilter::Chain(vec![
                RowFilter::exact_family(HOT_FAMILY),
                RowFilter::CellsPerColumnLimit(1),
            ]));
        visit_rows(app.profiles.as_ref(), &request, |row| {
            for cell in row.cells {
                let (user, rows) = decode_rows(cell.qualifier, cell.value)?;
                list.rows.insert(user, rows);
            }
            Ok(())
        })?;
        let list = Arc::new(list);
        let now = self.now_millis();
        if list_is_final(day, now) {
            let mut finals = app.hot.finals.lock().unwrap_or_else(|p| p.into_inner());
            // Days past the retention and its slack are read no more.
            let oldest = now.div_euclid(DAY_MILLIS) - i64::from(app.config.retention_days) - 10;
            finals.retain(|d, _| *d >= oldest);
            finals.insert(day, list.clone());
        }
        Ok(list)
    }

    /// Add the rows of `user`'s days `days` to `rows`: the point
    /// `user,DDDDDDDD`, or the range of the day and its sub-rows when the
    /// user is on the day's hot list.
    pub(crate) fn push_day_rows(
        &self,
        app: &App,
        user: &str,
        days: impl IntoIterator<Item = i64>,
        rows: &mut RowSet,
    ) -> Result<()> {
        for day in days {
            if self.hot_list(app, day)?.rows(user) > 1 {
                rows.ranges.push(RowRange::closed_open(
                    state_row_key(user, day),
                    state_row_key(user, day + 1),
                ));
            } else {
                rows.keys.push(Bytes::from(state_row_key(user, day)));
            }
        }
        Ok(())
    }

    /// Users ingestion put on hot lists since the engine opened, and
    /// users it failed to put on one (tried again after the next batch).
    pub fn hot_listed(&self) -> (u64, u64) {
        (
            self.hot_listed.listed.load(Ordering::Relaxed),
            self.hot_listed.failed.load(Ordering::Relaxed),
        )
    }

    /// Put `users` (each with its sub-row count, 2 to [`MAX_SUB_ROWS`]) on
    /// day `day`'s hot list of the application. Refused from the day's
    /// cut-off on ([`list_cutoff_millis`]): after it the list is fixed.
    pub fn publish_hot_users(&self, app: &str, day: i64, users: &[(String, u32)]) -> Result<()> {
        let app = self.app(app)?;
        self.publish_hot(&app, day, users)
    }

    pub(crate) fn publish_hot(&self, app: &App, day: i64, users: &[(String, u32)]) -> Result<()> {
        for (user, rows) in users {
            check_user(user)?;
            if !(2..=MAX_SUB_ROWS).contains(rows) {
                return Err(Error::InvalidArgument {
                    name: "rows",
                    reason: format!("{rows} sub-rows for {user}: must be 2 to {MAX_SUB_ROWS}"),
                });
            }
        }
        self.check_open(day)?;
        if users.is_empty() {
            return Ok(());
        }
        let mutations: Vec<Mutation> = users
            .iter()
            .map(|(user, rows)| {
                Mutation::set_cell(
                    HOT_FAMILY,
                    user.clone(),
                    day_micros(day),
                    rows.to_be_bytes().to_vec(),
                )
            })
            .collect();
        app.profiles
            .mutate_row(list_key(day).as_bytes(), &mutations)?;
        Ok(())
    }

    /// Take `users` off day `day`'s hot list of the application (their
    /// rows of that day then stay whole). Refused from the day's cut-off
    /// on, as adding is.
    pub fn unlist_hot_users(&self, app: &str, day: i64, users: &[String]) -> Result<()> {
        for user in users {
            check_user(user)?;
        }
        self.check_open(day)?;
        let app = self.app(app)?;
        if users.is_empty() {
            return Ok(());
        }
        let mutations: Vec<Mutation> = users
            .iter()
            .map(|user| Mutation::delete_column(HOT_FAMILY, user.clone()))
            .collect();
        app.profiles
            .mutate_row(list_key(day).as_bytes(), &mutations)?;
        Ok(())
    }

    /// Day `day`'s list may still change.
    fn check_open(&self, day: i64) -> Result<()> {
        let cutoff = list_cutoff_millis(day);
        if self.now_millis() < cutoff {
            return Ok(());
        }
        Err(Error::InvalidArgument {
            name: "day",
            reason: format!(
                "the hot list of {} was fixed at {} (4 hours before the day): \
                 change the list of a later day",
                day_text(day),
                affinity_rowkey::time::format_seconds(cutoff).unwrap_or_default()
            ),
        })
    }

    /// Count a batch's adds (`(user, events)` of arrival day `arrival`,
    /// today) and publish users who became hot on the next list still
    /// open.
    /// Best effort: the list only spreads writes, and a failed publish
    /// leaves a user unspread.
    pub(crate) fn note_hot_adds<'u>(
        &self,
        app: &App,
        arrival: i64,
        adds: impl Iterator<Item = (&'u str, u64)>,
    ) {
        let policy = self.hot_policy;
        if policy.min_adds == u64::MAX {
            return;
        }
        let day = next_open_list(self.now_millis());
        let mut publish = Vec::new();
        {
            let mut counts = app.hot.counts.lock().unwrap_or_else(|p| p.into_inner());
            let mut touched = Vec::new();
            for (user, n) in adds {
                counts.add(arrival, user, n, policy.tracked);
                touched.push(user);
            }
            touched.dedup();
            for user in touched {
                let adds = counts.users.get(user).copied().unwrap_or(0);
                let Some(rows) = policy.rows_for(adds, counts.total) else {
                    continue;
                };
                let key = (day, user.to_string());
                if counts.published.get(&key).is_some_and(|r| *r >= rows) {
                    continue;
                }
                counts.published.insert(key, rows);
                publish.push((user.to_string(), rows));
            }
        }
        if publish.is_empty() {
            return;
        }
        let n = publish.len() as u64;
        if self.publish_hot(app, day, &publish).is_ok() {
            self.hot_listed.listed.fetch_add(n, Ordering::Relaxed);
            return;
        }
        self.hot_listed.failed.fetch_add(n, Ordering::Relaxed);
        // Tried again after the next batch (for a later day, if this one's
        // list closed meanwhile).
        let mut counts = app.hot.counts.lock().unwrap_or_else(|p| p.into_inner());
        for (user, _) in publish {
            counts.published.remove(&(day, user));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_rows_sort_between_the_day_and_the_next() {
        let day = 20_000;
        let row = state_row_key("u1", day);
        let next = state_row_key("u1", day + 1);
        for kk in [0, 1, 15, 255] {
            let sub = sub_row_key("u1", day, kk);
            assert!(row < sub && sub < next, "{sub}");
        }
        assert_eq!(sub_row_key("u1", day, 10), "u1,00020000,0a");
    }

    #[test]
    fn an_event_keeps_its_sub_row() {
        let id = EventId {
            timestamp_millis: 1_764_000_000_000,
            suffix: 0x0123_4567_89ab_cdef,
        };
        // XXH64 of the id: the same on every process and version.
        assert_eq!(sub_row(&id, 64), sub_row(&id, 64));
        assert_eq!(sub_row(&id, 1), 0);
        let spread: std::collections::BTreeSet<u32> = (0..1000)
            .map(|s| {
                sub_row(
                    &EventId {
                        timestamp_millis: 1,
                        suffix: s,
                    },
                    16,
                )
            })
            .collect();
        assert_eq!(spread.len(), 16);
    }

    #[test]
    fn the_policy_lists_a_large_share_over_more_rows() {
        let p = HotPolicy::default();
        assert_eq!(p.rows_for(9_999, 10_000), None);
        assert_eq!(p.rows_for(9_999, 1_000_000), None);
        assert_eq!(p.rows_for(10_000, 1_000_000), Some(2));
        assert_eq!(p.rows_for(50_000, 1_000_000), Some(8));
        assert_eq!(p.rows_for(135_000, 1_000_000), Some(16));
        assert_eq!(p.rows_for(500_000, 1_000_000), Some(16));
    }

    #[test]
    fn counts_keep_the_heavy_hitters() {
        let mut c = Counts::default();
        for i in 0..10_000u64 {
            c.add(5, &format!("light-{i}"), 1, 16);
            if i % 4 == 0 {
                c.add(5, "heavy", 1, 16);
            }
        }
        assert_eq!(c.total, 12_500);
        // Undercounted by at most total / tracked.
        let heavy = c.users["heavy"];
        assert!((2_500 - 12_500 / 16..=2_500).contains(&heavy), "{heavy}");
        c.add(6, "x", 1, 16);
        assert_eq!((c.total, c.users.len()), (1, 1));
    }
}
