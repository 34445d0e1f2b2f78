//! [`Accumulator`]: the one implementation of the formula (see
//! [`crate::scoring`]), fed by every path.

use std::borrow::Cow;
use std::cmp::Ordering;

use rustc_hash::FxHashMap;

use super::sorted::{SortedScores, SortedScoresBuilder};
use super::{scale, Profile, ScoredEvent, MAX_VALUES_PER_FACET};
use crate::event::EventType;
use crate::strategy::Weights;

/// Sums the raw scores of one user. Whole events go in by
/// [`Accumulator::add_event`]; the batch and profile readers, which resolve
/// a column's facet slot and weight once per scan, add `raw(facet, value)`
/// directly ([`Accumulator::add_at`], [`Accumulator::add_utf8_at`]) and
/// note scoring events' times themselves.
///
/// `'a` bounds the weights and the values the accumulator may borrow
/// instead of copying ([`Accumulator::add_borrowed_sorted_at`]: a
/// rollup's packed counters, read before the accumulator is made).
#[derive(Debug)]
pub(crate) struct Accumulator<'a> {
    weights: &'a Weights,
    /// `raw(facet, value)` by the facet's slot in the weights (empty until
    /// the first count); values are UTF-8, kept as bytes so that a value
    /// read as bytes is checked once, when first met.
    raw: Vec<FxHashMap<Vec<u8>, i64>>,
    /// More of `raw`, added as sorted runs ([`Accumulator::add_sorted_at`]):
    /// by slot, sorted by value, each value once. A rollup's counters come
    /// sorted, so most of a profile is merged here without hashing, and
    /// needs no sort at the end.
    sorted: Vec<RawValues<'a>>,
    last_event_millis: Option<i64>,
}

impl<'a> Accumulator<'a> {
    pub(crate) fn new(weights: &'a Weights) -> Accumulator<'a> {
        Accumulator {
            weights,
            raw: Vec::new(),
            sorted: Vec::new(),
            last_event_millis: None,
        }
    }

    /// Count one distinct event, and note its time when it is a scoring
    /// event.
    pub(crate) fn add_event(&mut self, event: &ScoredEvent) {
        self.add_counts(event, 1);
        if event.is_scoring(self.weights) {
            self.note_event_time(event.timestamp_millis);
        }
    }

    /// Add an event's counts `times` times (negative to take them back)
    /// without noting its time: the correction of an event counted other
    /// than once.
    pub(crate) fn add_counts(&mut self, event: &ScoredEvent, times: i64) {
        for (f, v, n) in event.counts.iter() {
            self.add_count(
                event.event_type,
                &event.event_name,
                f,
                v,
                i64::from(n) * times,
            );
        }
    }

    /// Add `count` occurrences of `facet:value` in events of `(ty, name)`.
    fn add_count(&mut self, ty: EventType, name: &str, facet: &str, value: &str, count: i64) {
        let (Some(es), Some((slot, fs))) =
            (self.weights.event(ty, name), self.weights.facet_slot(facet))
        else {
            return;
        };
        self.add_at(slot, value, i64::from(es) * i64::from(fs) * count);
    }

    /// Add `eventScore * facetScore * count`, computed by the caller, to
    /// `raw(facet, value)` of the facet of slot `slot`
    /// ([`Weights::facet_slot`]).
    pub(crate) fn add_at(&mut self, slot: usize, value: &str, add: i64) {
        // Text already: nothing to check.
        let Ok(()) = self.add_new_checked(slot, value.as_bytes(), add, |_| {
            Ok::<(), std::convert::Infallible>(())
        });
    }

    /// [`Accumulator::add_at`] of a value given as bytes, which must be
    /// UTF-8: checked only the first time the value is met (a scan meets
    /// a heavy user's values thousands of times each).
    pub(crate) fn add_utf8_at(
        &mut self,
        slot: usize,
        value: &[u8],
        add: i64,
    ) -> Result<(), std::str::Utf8Error> {
        self.add_new_checked(slot, value, add, |v| std::str::from_utf8(v).map(drop))
    }

    /// `raw(slot, value) += weight * count` for each `(value, count)` of
    /// `run`, whose values must be strictly increasing (bytewise) and
    /// UTF-8: each is checked as it goes in. After an error (from `run` or
    /// a bad value) part of the run may have been added: the caller drops
    /// the accumulator with the read that failed.
    pub(crate) fn add_sorted_at<'v, E>(
        &mut self,
        slot: usize,
        weight: i64,
        run: impl IntoIterator<Item = Result<(&'v [u8], i64), E>>,
        bad_value: impl Fn(&[u8]) -> E,
    ) -> Result<(), E> {
        self.merge_run(slot, weight, run, bad_value, |v| Cow::Owned(v.to_vec()))
    }

    /// [`Accumulator::add_sorted_at`] of values that outlive the
    /// accumulator: kept as borrowed, so a rollup's values are copied only
    /// when they make it into the profile.
    pub(crate) fn add_borrowed_sorted_at<E>(
        &mut self,
        slot: usize,
        weight: i64,
        run: impl IntoIterator<Item = Result<(&'a [u8], i64), E>>,
        bad_value: impl Fn(&[u8]) -> E,
    ) -> Result<(), E> {
        self.merge_run(slot, weight, run, bad_value, Cow::Borrowed)
    }

    fn merge_run<'v, E>(
        &mut self,
        slot: usize,
        weight: i64,
        run: impl IntoIterator<Item = Result<(&'v [u8], i64), E>>,
        bad_value: impl Fn(&[u8]) -> E,
        keep: impl Fn(&'v [u8]) -> Cow<'a, [u8]>,
    ) -> Result<(), E> {
        if self.sorted.is_empty() {
            self.sorted
                .resize_with(self.weights.facet_names().len(), Vec::new);
        }
        let base = &mut self.sorted[slot];
        // The run's values the list lacks, with their place in it: nearly
        // always few or none (a rollup's runs and a day's count mostly the
        // same values), so the list is updated where it is and rebuilt
        // only to take those in.
        let mut new: Vec<(usize, Entry<'a>)> = Vec::new();
        let mut last: Option<(u64, &[u8])> = None;
        let mut i = 0;
        for item in run {
            let (value, count) = item?;
            let h = head(value);
            if !rises(&mut last, h, value) {
                return Err(bad_value(value));
            }
            // The run rises, so the list's values before `i` are below
            // `value`.
            let (at, found) = seek(base, i, h, value);
            i = at;
            if found {
                base[i].raw += weight * count;
                i += 1;
                continue;
            }
            if !is_utf8(h, value) {
                return Err(bad_value(value));
            }
            let entry = Entry {
                head: h,
                value: keep(value),
                raw: weight * count,
            };
            if i == base.len() {
                // Past the list's end (an empty list, say): appended.
                base.push(entry);
                i += 1;
            } else {
                new.push((i, entry));
            }
        }
        if !new.is_empty() {
            let old = std::mem::take(base);
            let mut merged = Vec::with_capacity(old.len() + new.len());
            let mut old = old.into_iter();
            let mut taken = 0;
            for (at, entry) in new {
                merged.extend(old.by_ref().take(at - taken));
                taken = at;
                merged.push(entry);
            }
            merged.extend(old);
            *base = merged;
        }
        Ok(())
    }

    /// Add `runs` (built under this accumulator's weights): a slot with
    /// nothing sorted yet takes its run as it is, borrowing its values,
    /// without the checks a run read from the store goes through (the
    /// run went through them when it was built); others merge it.
    pub(crate) fn add_runs(&mut self, runs: &'a SortedRuns) {
        if self.sorted.is_empty() {
            self.sorted
                .resize_with(self.weights.facet_names().len(), Vec::new);
        }
        for (slot, run) in &runs.runs {
            let Some(base) = self.sorted.get_mut(*slot) else {
                continue;
            };
            if base.is_empty() {
                base.reserve_exact(run.len());
                base.extend(run.iter().map(|e| Entry {
                    head: e.head,
                    value: Cow::Borrowed(runs.value(e)),
                    raw: e.raw,
                }));
                continue;
            }
            let merged = self.merge_run(
                *slot,
                1,
                run.iter().map(|e| Ok((runs.value(e), e.raw))),
                |_| (),
                Cow::Borrowed,
            );
            debug_assert!(merged.is_ok(), "a built run is sorted and UTF-8");
        }
    }

    /// `raw(slot, value) += add`; a value not met before is kept only if
    /// `check` passes it.
    fn add_new_checked<E>(
        &mut self,
        slot: usize,
        value: &[u8],
        add: i64,
        check: impl FnOnce(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let m = self.values_at(slot);
        if let Some(r) = m.get_mut(value) {
            *r += add;
        } else {
            check(value)?;
            m.insert(value.to_vec(), add);
        }
        Ok(())
    }

    /// The values of slot `slot` (every slot's map made on first use).
    fn values_at(&mut self, slot: usize) -> &mut FxHashMap<Vec<u8>, i64> {
        if self.raw.is_empty() {
            self.raw
                .resize_with(self.weights.facet_names().len(), FxHashMap::default);
        }
        &mut self.raw[slot]
    }

    /// Whether a scoring event at `millis` would be the latest noted so
    /// far (a reader skips parsing what could not change the answer).
    #[inline]
    pub(crate) fn later_than_noted(&self, millis: i64) -> bool {
        self.last_event_millis.is_none_or(|l| millis > l)
    }

    /// Note that a scoring event happened at `millis`.
    pub(crate) fn note_event_time(&mut self, millis: i64) {
        self.last_event_millis = Some(self.last_event_millis.map_or(millis, |l| l.max(millis)));
    }

    /// The profile, `None` without a scoring event.
    pub(crate) fn finish(mut self, user_token: &str) -> Option<Profile> {
        let (last_event_millis, scores) = self.take_sorted()?;
        Some(scores.into_profile(user_token, last_event_millis))
    }

    /// The time of the latest scoring event and the scores, `None` without
    /// a scoring event; leaves the accumulator empty, its maps' room kept,
    /// for the next user of a scan.
    pub(crate) fn take_sorted(&mut self) -> Option<(i64, SortedScores)> {
        let Some(last_event_millis) = self.last_event_millis.take() else {
            self.raw.iter_mut().for_each(FxHashMap::clear);
            self.sorted.iter_mut().for_each(Vec::clear);
            return None;
        };
        let names = self.weights.facet_names();
        let mut kept: Vec<(String, RawValues)> = Vec::with_capacity(names.len());
        for (slot, facet) in names.iter().enumerate() {
            let mut taken = self
                .sorted
                .get_mut(slot)
                .map(std::mem::take)
                .unwrap_or_default();
            if let Some(values) = self.raw.get_mut(slot) {
                // The hashed adds: into the sorted ones where the value is
                // there, the rest sorted and merged in.
                let mut extra: RawValues<'a> = Vec::new();
                for (value, add) in values.drain() {
                    let h = head(&value);
                    match taken.binary_search_by(|e| e.cmp_to(h, &value)) {
                        Ok(i) => taken[i].raw += add,
                        Err(_) => extra.push(Entry {
                            head: h,
                            value: Cow::Owned(value),
                            raw: add,
                        }),
                    }
                }
                if values.capacity() > 4096 {
                    // A heavy user's room would make every later user's
                    // drain walk it.
                    *values = FxHashMap::default();
                }
                if !extra.is_empty() {
                    extra.sort_unstable_by(|a, b| a.cmp_to(b.head, &b.value));
                    taken = merge_sorted(taken, extra);
                }
            }
            taken.retain(|e| e.raw > 0);
            if taken.len() > MAX_VALUES_PER_FACET {
                keep_highest(&mut taken, MAX_VALUES_PER_FACET);
            }
            if !taken.is_empty() {
                kept.push((facet.clone(), taken));
            }
        }
        kept.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let max = kept
            .iter()
            .flat_map(|(_, vs)| vs.iter().map(|e| e.raw))
            .max()
            .unwrap_or(0);
        let count: usize = kept.iter().map(|(_, vs)| vs.len()).sum();
        let bytes: usize = kept
            .iter()
            .flat_map(|(_, vs)| vs.iter().map(|e| e.value.len()))
            .sum();
        let mut scores = SortedScoresBuilder::with_capacity(count, bytes);
        for (facet, values) in kept {
            for e in values {
                scores.value_with_head(&e.value, e.head, scale(e.raw, max));
            }
            scores.end_facet(facet);
        }
        Some((last_event_millis, scores.build()))
    }
}

/// Sorted runs of values with their raw scores, at most one per facet
/// slot, owning their values: a rollup's counters weighed under one
/// strategy, kept beside the rollup (`crate::cache`) so that the next
/// read under that strategy takes the runs
/// ([`Accumulator::add_runs`]) instead of weighing the counters again.
#[derive(Debug, Default)]
pub(crate) struct SortedRuns {
    /// Every run's values, one after another.
    text: Vec<u8>,
    runs: Vec<(usize, Vec<RunEntry>)>,
}

#[derive(Debug, Clone, Copy)]
struct RunEntry {
    head: u64,
    start: u32,
    end: u32,
    raw: i64,
}

impl SortedRuns {
    /// Add the run of `slot` (one not added before): each `(value,
    /// count)` of `run` as `weight * count`, values strictly increasing
    /// (bytewise) and UTF-8, as [`Accumulator::add_sorted_at`] takes
    /// them; an error (from `run` or a bad value) leaves the runs unfit
    /// for use.
    pub(crate) fn push_run<'v, E>(
        &mut self,
        slot: usize,
        weight: i64,
        run: impl IntoIterator<Item = Result<(&'v [u8], i64), E>>,
        bad_value: impl Fn(&[u8]) -> E,
    ) -> Result<(), E> {
        debug_assert!(self.runs.iter().all(|(s, _)| *s != slot));
        let mut entries = Vec::new();
        let mut last: Option<(u64, &[u8])> = None;
        for item in run {
            let (value, count) = item?;
            let h = head(value);
            if !rises(&mut last, h, value) || !is_utf8(h, value) {
                return Err(bad_value(value));
            }
            let Some(entry) = self.entry(value, h, weight * count) else {
                return Err(bad_value(value));
            };
            entries.push(entry);
        }
        if !entries.is_empty() {
            self.runs.push((slot, entries));
        }
        Ok(())
    }

    /// `base` (built under `weights`) with what `add` adds through an
    /// accumulator under `weights` that took `base` first, as runs of
    /// their own: what an accumulator holds after taking `base` and then
    /// the same adds. `add` must add sorted runs only
    /// ([`Accumulator::add_sorted_at`]). `None` when the runs' text would
    /// not fit their offsets.
    pub(crate) fn merged<E>(
        weights: &Weights,
        base: &SortedRuns,
        add: impl FnOnce(&mut Accumulator<'_>) -> Result<(), E>,
    ) -> Result<Option<SortedRuns>, E> {
        let mut acc = Accumulator::new(weights);
        acc.add_runs(base);
        add(&mut acc)?;
        debug_assert!(acc.raw.iter().all(FxHashMap::is_empty), "sorted adds only");
        let mut merged = SortedRuns::default();
        for (slot, list) in acc.sorted.iter().enumerate() {
            if list.is_empty() {
                continue;
            }
            let mut entries = Vec::with_capacity(list.len());
            for e in list {
                let Some(entry) = merged.entry(&e.value, e.head, e.raw) else {
                    return Ok(None);
                };
                entries.push(entry);
            }
            merged.runs.push((slot, entries));
        }
        Ok(Some(merged))
    }

    /// The entry of `value` (whose head is `head`) with raw score `raw`,
    /// its bytes appended to the runs' text; `None` when they would not
    /// fit the entries' offsets.
    fn entry(&mut self, value: &[u8], head: u64, raw: i64) -> Option<RunEntry> {
        let start = u32::try_from(self.text.len()).ok()?;
        let end = u32::try_from(self.text.len() + value.len()).ok()?;
        self.text.extend_from_slice(value);
        Some(RunEntry {
            head,
            start,
            end,
            raw,
        })
    }

    /// About what the runs take on the heap, in bytes.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.text.capacity()
            + self
                .runs
                .iter()
                .map(|(_, r)| 32 + r.capacity() * std::mem::size_of::<RunEntry>())
                .sum::<usize>()
    }

    fn value(&self, e: &RunEntry) -> &[u8] {
        &self.text[e.start as usize..e.end as usize]
    }
}

/// One facet's values as the accumulator holds them, sorted by value.
type RawValues<'a> = Vec<Entry<'a>>;

/// A value (UTF-8 bytes) and its raw score, with the value's [`head`]
/// kept so that merges and searches compare integers and look at the
/// bytes only on ties.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry<'a> {
    head: u64,
    value: Cow<'a, [u8]>,
    raw: i64,
}

impl Entry<'_> {
    /// The order of this entry's value to `value`, whose head is `h`.
    #[inline]
    fn cmp_to(&self, h: u64, value: &[u8]) -> Ordering {
        cmp_headed(self.head, &self.value, h, value)
    }
}

/// The first place at or after `from` in `list` whose value is not below
/// `value` (head `h`), and whether it is `value`. One comparison when the
/// list and the run advance together (a rollup's runs into each other);
/// when the run skips much of the list (a day's few values into a long
/// rollup), steps that double, then a binary search within the last one.
#[inline]
fn seek(list: &[Entry<'_>], from: usize, h: u64, value: &[u8]) -> (usize, bool) {
    match list.get(from).map(|e| e.cmp_to(h, value)) {
        Some(Ordering::Less) => {}
        order => return (from, order == Some(Ordering::Equal)),
    }
    // `list[lo - 1]` is below `value`; the answer is in `lo..=hi`.
    let (mut lo, mut step) = (from + 1, 1);
    let (hi, hi_found) = loop {
        let probe = from + step;
        match list.get(probe).map(|e| e.cmp_to(h, value)) {
            None => break (list.len(), false),
            Some(Ordering::Less) => {
                lo = probe + 1;
                step *= 2;
            }
            Some(order) => break (probe, order == Ordering::Equal),
        }
    };
    let at = lo + list[lo..hi].partition_point(|e| e.cmp_to(h, value) == Ordering::Less);
    if at == hi {
        (at, hi_found)
    } else {
        (at, list[at].cmp_to(h, value) == Ordering::Equal)
    }
}

/// Whether `value` (head `h`) comes after `last`, a run's value before it
/// (none: the run's first); `value` is then `last`.
#[inline]
fn rises<'v>(last: &mut Option<(u64, &'v [u8])>, h: u64, value: &'v [u8]) -> bool {
    let rises = last.is_none_or(|(lh, lv)| cmp_headed(lh, lv, h, value) == Ordering::Less);
    *last = Some((h, value));
    rises
}

/// Whether `value` (head `h`) is UTF-8: up to 8 ASCII bytes are seen in
/// the head alone, longer ASCII values (most facet values) a word at a
/// time, without a call into the UTF-8 validator.
#[inline]
fn is_utf8(h: u64, value: &[u8]) -> bool {
    const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
    if h & HIGH_BITS == 0 && (value.len() <= 8 || value[8..].is_ascii()) {
        return true;
    }
    std::str::from_utf8(value).is_ok()
}

/// The first 8 bytes of `v` as a big-endian integer, zeros past its end:
/// bytewise order of slices, up to ties (a shorter slice ties with itself
/// padded with zero bytes).
#[inline]
pub(crate) fn head(v: &[u8]) -> u64 {
    match v.first_chunk::<8>() {
        Some(h) => u64::from_be_bytes(*h),
        None => v
            .iter()
            .enumerate()
            .fold(0, |h, (i, b)| h | u64::from(*b) << (56 - 8 * i)),
    }
}

/// Bytewise order (as `<[u8]>::cmp`), without a call into `memcmp` when
/// the first eight bytes decide, which they do for most facet values.
#[inline]
pub(crate) fn cmp_bytes(a: &[u8], b: &[u8]) -> Ordering {
    cmp_headed(head(a), a, head(b), b)
}

/// Whether `a` and `b` are the same bytes, without a call into `memcmp`
/// when they are at most 16 bytes long (as most names and facet values
/// are): compared as their first and last 8 bytes (4 when shorter; first,
/// middle and last byte when shorter still), which overlap or meet.
#[inline]
pub fn eq_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word =
        |s: &[u8], at: usize| u64::from_ne_bytes(s[at..at + 8].try_into().unwrap_or_default());
    let half =
        |s: &[u8], at: usize| u32::from_ne_bytes(s[at..at + 4].try_into().unwrap_or_default());
    match n {
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=7 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        _ => {
            word(a, 0) == word(b, 0)
                && word(a, n - 8) == word(b, n - 8)
                && (n <= 16 || a[8..n - 8] == b[8..n - 8])
        }
    }
}

/// [`cmp_bytes`] of `a` and `b` whose heads are `ha` and `hb`.
#[inline]
fn cmp_headed(ha: u64, a: &[u8], hb: u64, b: &[u8]) -> Ordering {
    match ha.cmp(&hb) {
        Ordering::Equal if a.len() > 8 && b.len() > 8 => a[8..].cmp(&b[8..]),
        // Equal heads and one slice within them: it is a prefix of the
        // other (which has only zero bytes past it there), so the shorter
        // is first.
        Ordering::Equal => a.len().cmp(&b.len()),
        order => order,
    }
}

/// Keep the `n` highest scores of `values` (sorted by value, distinct),
/// ties to the smaller value (bytes sort as their text does), in value
/// order: the `n`-th highest score found among the scores alone, then one
/// pass in order.
fn keep_highest(values: &mut RawValues<'_>, n: usize) {
    let mut scores: Vec<i64> = values.iter().map(|e| e.raw).collect();
    let (_, &mut threshold, _) = scores.select_nth_unstable_by(n - 1, |a, b| b.cmp(a));
    let above = scores.iter().filter(|r| **r > threshold).count();
    // Values at the threshold: the first ones in value order.
    let mut ties = n - above;
    values.retain(|e| {
        if e.raw > threshold {
            true
        } else if e.raw == threshold && ties > 0 {
            ties -= 1;
            true
        } else {
            false
        }
    });
}

/// Two lists sorted by value, with distinct values between them, as one.
fn merge_sorted<'a>(a: RawValues<'a>, b: RawValues<'a>) -> RawValues<'a> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => x.cmp_to(y.head, &y.value) != Ordering::Greater,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return out,
        };
        out.extend(if take_a { a.next() } else { b.next() });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scoring::FacetCounts;
    use crate::strategy::Strategy;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn strategy() -> Strategy {
        Strategy::from_json(
            &json!({"eventsScoring":[{"eventName":"click","eventType":"click","score":10},
            {"eventName":"buy","eventType":"conversion","score":50}],
            "facetsScoring":[{"facetName":"brand","score":100},{"facetName":"color","score":10}],
            "personalizationImpact":50}),
        )
        .unwrap()
    }

    /// An event of `(ty, name)` at `millis` with one count of each pair.
    fn event(ty: EventType, name: &str, millis: i64, pairs: &[(&str, &str)]) -> ScoredEvent {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(f, v)| (f.to_string(), v.to_string()))
            .collect();
        ScoredEvent {
            event_type: ty,
            event_name: name.into(),
            timestamp_millis: millis,
            counts: FacetCounts::from_pairs(&pairs),
        }
    }

    #[test]
    fn an_accumulator_taken_from_starts_the_next_user_empty() {
        let strategy = strategy();
        let weights = strategy.weights();
        let mut reused = Accumulator::new(&weights);
        // A scoring user, then one with only an unscored count.
        let apple = event(EventType::Click, "click", 100, &[("brand", "Apple")]);
        reused.add_counts(&apple, 3);
        reused.add_event(&event(
            EventType::Click,
            "click",
            100,
            &[("color", "Black")],
        ));
        assert!(reused.take_sorted().is_some());
        reused.add_counts(
            &event(EventType::Click, "click", 150, &[("brand", "Samsung")]),
            0,
        );
        assert_eq!(reused.take_sorted(), None);
        // The next user sees neither.
        let mut fresh = Accumulator::new(&weights);
        let samsung = event(EventType::Conversion, "buy", 200, &[("brand", "Samsung")]);
        for acc in [&mut reused, &mut fresh] {
            acc.add_event(&samsung);
        }
        let taken = reused.take_sorted();
        assert_eq!(taken, fresh.take_sorted());
        let (last, scores) = taken.unwrap();
        assert_eq!(last, 200);
        assert_eq!(
            scores.to_vec(),
            vec![("brand".to_string(), vec![("Samsung".to_string(), 20)])]
        );
    }

    #[test]
    fn events_note_their_time_only_when_they_score() {
        let strategy = strategy();
        let weights = strategy.weights();
        let mut acc = Accumulator::new(&weights);
        // Scored type, unscored facet; unscored type, scored facet.
        acc.add_event(&event(EventType::Click, "click", 300, &[("size", "L")]));
        acc.add_event(&event(EventType::View, "view", 400, &[("brand", "Apple")]));
        assert_eq!(acc.take_sorted(), None);
        acc.add_event(&event(
            EventType::Click,
            "click",
            100,
            &[("brand", "Apple")],
        ));
        acc.add_event(&event(EventType::Click, "click", 300, &[("size", "L")]));
        // A correction counts but is not an event of its own.
        acc.add_counts(
            &event(EventType::Click, "click", 500, &[("brand", "Apple")]),
            -1,
        );
        acc.add_counts(
            &event(EventType::Click, "click", 500, &[("brand", "Apple")]),
            2,
        );
        let (last, scores) = acc.take_sorted().unwrap();
        assert_eq!(last, 100);
        assert_eq!(
            scores.to_vec(),
            vec![("brand".to_string(), vec![("Apple".to_string(), 20)])]
        );
    }

    /// The shortcuts for ASCII agree with the UTF-8 validator, short and
    /// long, wherever the byte that decides is.
    #[test]
    fn a_value_is_utf8_as_the_validator_says() {
        let mut values: Vec<Vec<u8>> = vec![Vec::new(), b"Apple".to_vec()];
        for len in [1, 7, 8, 9, 16, 17, 40] {
            for at in 0..len {
                for odd in [&b"\xff"[..], b"\xc3\xa9", b"\xc3", b"\xe2\x82\xac", b"\x80"] {
                    let mut v = vec![b'e'; len];
                    v.splice(at..(at + odd.len()).min(len), odd.iter().copied());
                    values.push(v);
                }
            }
        }
        for v in &values {
            let valid = std::str::from_utf8(v).is_ok();
            assert_eq!(is_utf8(head(v), v), valid, "{v:?}");
        }
        assert!(values
            .iter()
            .any(|v| v.len() > 8 && std::str::from_utf8(v).is_ok() && !v.is_ascii()));
    }

    #[test]
    fn values_given_as_bytes_must_be_utf8_and_count_as_text() {
        let strategy = strategy();
        let weights = strategy.weights();
        let (slot, _) = weights.facet_slot("brand").unwrap();
        let mut acc = Accumulator::new(&weights);
        assert!(acc.add_utf8_at(slot, b"Caf\xc3\xa9", 10).is_ok());
        assert!(acc.add_utf8_at(slot, b"Caf\xc3\xa9", 5).is_ok());
        assert!(acc.add_utf8_at(slot, b"bad \xff", 5).is_err());
        acc.add_at(slot, "Café", 5);
        acc.note_event_time(1);
        let (_, scores) = acc.take_sorted().unwrap();
        assert_eq!(
            scores.to_vec(),
            vec![("brand".to_string(), vec![("Café".to_string(), 20)])]
        );
    }

    proptest::proptest! {
        /// Sorted runs and hashed adds, in any mix, score as hashed adds
        /// alone do, long lists and short runs into them included (values
        /// that tie on their first 8 bytes, and non-ASCII ones, too).
        #[test]
        fn sorted_runs_count_as_single_adds(
            runs in proptest::collection::vec(
                (
                    0usize..2,
                    1i64..4,
                    proptest::prop_oneof![
                        proptest::collection::btree_map("(aaaaaaaa)?[a-eé]{0,2}", -3i64..6, 0..8),
                        proptest::collection::btree_map("(aaaaaaaa)?[a-fé]{1,2}", -3i64..6, 20..40),
                    ],
                    proptest::bool::ANY,
                ),
                0..8,
            )
        ) {
            let strategy = strategy();
            let weights = strategy.weights();
            let mut runs_acc = Accumulator::new(&weights);
            let mut single = Accumulator::new(&weights);
            for (slot, weight, values, as_run) in &runs {
                if *as_run {
                    let run = values.iter().map(|(v, n)| Ok::<_, ()>((v.as_bytes(), *n)));
                    runs_acc.add_sorted_at(*slot, *weight, run, |_| ()).unwrap();
                } else {
                    for (v, n) in values {
                        runs_acc.add_at(*slot, v, weight * n);
                    }
                }
                for (v, n) in values {
                    single.add_at(*slot, v, weight * n);
                }
            }
            runs_acc.note_event_time(1);
            single.note_event_time(1);
            proptest::prop_assert_eq!(runs_acc.take_sorted(), single.take_sorted());
        }
    }

    proptest::proptest! {
        /// Runs built once and added by [`Accumulator::add_runs`] score
        /// as the same runs added from the store do, into empty slots and
        /// into slots holding values already (another member's), and
        /// with runs added after them (today's rows).
        #[test]
        fn built_runs_count_as_the_runs_they_hold(
            before in proptest::collection::vec(
                (0usize..2, proptest::collection::btree_map("(aaaaaaaa)?[a-eé]{0,2}", -3i64..6, 0..8)),
                0..2,
            ),
            built in proptest::collection::btree_map(
                0usize..2,
                (1i64..4, proptest::collection::btree_map("(aaaaaaaa)?[a-fé]{1,2}", -3i64..6, 0..40)),
                0..3,
            ),
            after in proptest::collection::vec(
                (0usize..2, proptest::collection::btree_map("(aaaaaaaa)?[a-eé]{0,2}", -3i64..6, 0..8)),
                0..3,
            ),
        ) {
            let strategy = strategy();
            let weights = strategy.weights();
            let mut runs = SortedRuns::default();
            for (slot, (weight, values)) in &built {
                let run = values.iter().map(|(v, n)| Ok::<_, ()>((v.as_bytes(), *n)));
                runs.push_run(*slot, *weight, run, |_| ()).unwrap();
            }
            let mut kept = Accumulator::new(&weights);
            let mut read = Accumulator::new(&weights);
            let add = |acc: &mut Accumulator<'_>, slot: usize, weight: i64, values: &BTreeMap<String, i64>| {
                let run = values.iter().map(|(v, n)| Ok::<_, ()>((v.as_bytes(), *n)));
                acc.add_sorted_at(slot, weight, run, |_| ()).unwrap();
            };
            for (slot, values) in &before {
                add(&mut kept, *slot, 1, values);
                add(&mut read, *slot, 1, values);
            }
            kept.add_runs(&runs);
            for (slot, (weight, values)) in &built {
                add(&mut read, *slot, *weight, values);
            }
            for (slot, values) in &after {
                add(&mut kept, *slot, 1, values);
                add(&mut read, *slot, 1, values);
            }
            kept.note_event_time(1);
            read.note_event_time(1);
            proptest::prop_assert_eq!(kept.take_sorted(), read.take_sorted());
        }
    }

    #[test]
    fn a_built_run_refuses_disorder_and_bad_text() {
        let mut runs = SortedRuns::default();
        let run = [Ok::<_, ()>((&b"b"[..], 1)), Ok((&b"a"[..], 1))];
        assert!(runs.push_run(0, 1, run, |_| ()).is_err());
        let mut runs = SortedRuns::default();
        let run = [Ok::<_, ()>((&b"bad \xff"[..], 1))];
        assert!(runs.push_run(0, 1, run, |_| ()).is_err());
        let mut runs = SortedRuns::default();
        let run = [Ok::<_, ()>((&b"a"[..], 2)), Ok((&b"b"[..], 3))];
        runs.push_run(1, 5, run, |_| ()).unwrap();
        assert!(runs.heap_bytes() >= 2 + 2 * std::mem::size_of::<RunEntry>());
    }

    #[test]
    fn a_sorted_run_refuses_disorder_and_bad_text() {
        let strategy = strategy();
        let weights = strategy.weights();
        let mut acc = Accumulator::new(&weights);
        let run = [Ok::<_, ()>((&b"b"[..], 1)), Ok((&b"a"[..], 1))];
        assert!(acc.add_sorted_at(0, 1, run, |_| ()).is_err());
        let run = [Ok::<_, ()>((&b"bad \xff"[..], 1))];
        assert!(acc.add_sorted_at(0, 1, run, |_| ()).is_err());
        // The same checks for a short run into a long list.
        let mut acc = Accumulator::new(&weights);
        let long: Vec<String> = (0..40).map(|i| format!("v{i:02}")).collect();
        let run = long.iter().map(|v| Ok::<_, ()>((v.as_bytes(), 1)));
        acc.add_sorted_at(0, 1, run, |_| ()).unwrap();
        let run = [Ok::<_, ()>((&b"v05"[..], 1)), Ok((&b"v01"[..], 1))];
        assert!(acc.add_sorted_at(0, 1, run, |_| ()).is_err());
        let run = [Ok::<_, ()>((&b"v01"[..], 1)), Ok((&b"v01"[..], 1))];
        assert!(acc.add_sorted_at(0, 1, run, |_| ()).is_err());
        let run = [Ok::<_, ()>((&b"bad \xff"[..], 1))];
        assert!(acc.add_sorted_at(0, 1, run, |_| ()).is_err());
    }

    proptest::proptest! {
        /// The quick comparison and equality are the bytewise ones, zero
        /// bytes and shared eight-byte heads included.
        #[test]
        fn cmp_bytes_is_bytewise_order(
            a in proptest::collection::vec(proptest::prop_oneof![proptest::strategy::Just(0u8), proptest::strategy::Just(b'a'), proptest::prelude::any::<u8>()], 0..14),
            b in proptest::collection::vec(proptest::prop_oneof![proptest::strategy::Just(0u8), proptest::strategy::Just(b'a'), proptest::prelude::any::<u8>()], 0..14),
        ) {
            proptest::prop_assert_eq!(cmp_bytes(&a, &b), a.cmp(&b));
            proptest::prop_assert_eq!(eq_bytes(&a, &b), a == b);
            proptest::prop_assert!(eq_bytes(&a, &a.clone()));
            // A byte changed anywhere in a slice of any length up to 40.
            let mut long = a.clone();
            long.extend_from_slice(&b);
            long.extend_from_slice(&a);
            for at in 0..long.len() {
                let mut other = long.clone();
                other[at] ^= 0x20;
                proptest::prop_assert!(!eq_bytes(&long, &other), "{long:?} at {at}");
                proptest::prop_assert!(eq_bytes(&long[..at], &other[..at]));
            }
            let mut c = a.clone();
            c.extend_from_slice(&b);
            proptest::prop_assert_eq!(cmp_bytes(&a, &c), a.as_slice().cmp(&c));
        }

        /// The values kept of a long facet: the highest scores, ties to the
        /// smaller value, in value order.
        #[test]
        fn keep_highest_is_a_sort_by_score_then_value(
            values in proptest::collection::btree_map("[a-f]{1,3}", 1i64..6, 0..40),
            n in 1usize..12,
        ) {
            let entry = |(v, r): (&String, &i64)| Entry {
                head: head(v.as_bytes()),
                value: Cow::Owned(v.as_bytes().to_vec()),
                raw: *r,
            };
            let mut kept: RawValues = values.iter().map(entry).collect();
            if kept.len() > n {
                keep_highest(&mut kept, n);
            }
            let mut want: RawValues = values.iter().map(entry).collect();
            want.sort_by(|a, b| b.raw.cmp(&a.raw).then_with(|| a.value.cmp(&b.value)));
            want.truncate(n);
            want.sort_by(|a, b| a.value.cmp(&b.value));
            proptest::prop_assert_eq!(kept, want);
        }
    }
}
