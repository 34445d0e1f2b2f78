//! Profile scoring, implemented once for every path.
//!
//! For user `u` and facet value `(f, v)`:
//!
//! ```text
//! raw(f, v) = sum over u's distinct events e within retention
//!             whose (type, name) is in eventsScoring
//!             of eventScore(e) * facetScore(f) * count_e(f, v)
//! ```
//!
//! where `count_e(f, v)` is how many times `f:v` is among the event's
//! filters (or the facets of its objects). Only facets of `facetsScoring`
//! count. The profile keeps, per facet, the 100 values with the highest raw
//! score (ties: smaller value first), drops values whose raw score is 0, and
//! reports `score = max(1, round(20 * raw / R))` where `R` is the highest
//! raw score of the user, rounding half away from zero (exact integer
//! arithmetic: `(40 * raw + R) / (2 * R)`).
//!
//! A *scoring event* is one whose `(type, name)` is in eventsScoring and
//! which has at least one filter on a facet of facetsScoring. A user has a
//! profile when they have a scoring event within retention; `lastEventAt` is
//! the time of their latest scoring event. (The wide schema's batch reader
//! sees only scoring cells, so this is the definition every path can meet.)
//!
//! Identical events (a retry: same key) count once. "Within retention"
//! is by whole UTC days: an event counts while its day began less than
//! `retention` ago, i.e. `timestamp >= start of day(now - retention) + 1
//! day` (see `docs/design/profiles.md`).
//!
//! [`Accumulator`] is the one implementation; [`reference`](mod@reference) is the naive
//! version over a plain list, for tests.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde_json::Value;

use crate::event::EventType;
use crate::strategy::Weights;

/// Values kept per facet in a profile.
pub const MAX_VALUES_PER_FACET: usize = 100;
/// The highest score.
pub const MAX_SCORE: i64 = 20;

/// `(facet, value, count)` of one event (or of several): each pair once,
/// sorted by facet then value (a flat list: an event names a handful of
/// pairs, and ingestion builds one per event).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FacetCounts(Vec<(String, String, u32)>);

impl FacetCounts {
    fn find(&self, facet: &str, value: &str) -> Result<usize, usize> {
        self.0
            .binary_search_by(|(f, v, _)| (f.as_str(), v.as_str()).cmp(&(facet, value)))
    }

    pub fn add(&mut self, facet: &str, value: &str, n: u32) {
        match self.find(facet, value) {
            Ok(i) => self.0[i].2 += n,
            Err(i) => self.0.insert(i, (facet.to_string(), value.to_string(), n)),
        }
    }

    pub fn get(&self, facet: &str, value: &str) -> u32 {
        self.find(facet, value).map_or(0, |i| self.0[i].2)
    }

    /// Every `(facet, value, count)`, sorted.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, u32)> {
        self.0.iter().map(|(f, v, n)| (f.as_str(), v.as_str(), *n))
    }

    /// Each facet with its `(value, count)`s, sorted.
    pub fn by_facet(&self) -> impl Iterator<Item = (&str, impl Iterator<Item = (&str, u32)>)> {
        self.0.chunk_by(|a, b| a.0 == b.0).map(|run| {
            (
                run[0].0.as_str(),
                run.iter().map(|(_, v, n)| (v.as_str(), *n)),
            )
        })
    }

    /// How many facets have a value.
    pub fn facet_count(&self) -> usize {
        self.0.chunk_by(|a, b| a.0 == b.0).count()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many `(facet, value)` pairs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// From `(facet, value)` pairs, one count each.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = &'a (String, String)>) -> FacetCounts {
        let mut refs: Vec<(&str, &str)> = pairs
            .into_iter()
            .map(|(f, v)| (f.as_str(), v.as_str()))
            .collect();
        refs.sort_unstable();
        let mut out: Vec<(String, String, u32)> = Vec::with_capacity(refs.len());
        for (f, v) in refs {
            match out.last_mut() {
                Some(last) if last.0 == f && last.1 == v => last.2 += 1,
                _ => out.push((f.to_string(), v.to_string(), 1)),
            }
        }
        FacetCounts(out)
    }

    /// From `facet -> value -> count` (the narrow schema's JSON).
    pub fn from_nested(nested: BTreeMap<String, BTreeMap<String, u32>>) -> FacetCounts {
        FacetCounts(
            nested
                .into_iter()
                .flat_map(|(f, values)| values.into_iter().map(move |(v, n)| (f.clone(), v, n)))
                .collect(),
        )
    }
}

/// As `{"facet": {"value": count}}`, the narrow schema's JSON (the bytes a
/// `BTreeMap` of `BTreeMap`s gives: both sort by bytes).
impl serde::Serialize for FacetCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        /// One facet's pairs as `{"value": count}`.
        struct Values<'a>(&'a [(String, String, u32)]);
        impl serde::Serialize for Values<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_map(self.0.iter().map(|(_, v, n)| (v, n)))
            }
        }
        let mut map = s.serialize_map(Some(self.facet_count()))?;
        for run in self.0.chunk_by(|a, b| a.0 == b.0) {
            map.serialize_entry(&run[0].0, &Values(run))?;
        }
        map.end()
    }
}

/// An event as the profile paths see it: what it is, when, and the facet
/// counts it resolved to at ingestion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScoredEvent {
    pub event_type: EventType,
    pub event_name: String,
    pub timestamp_millis: i64,
    pub counts: FacetCounts,
}

/// A user's scored profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    pub user_token: String,
    pub last_event_millis: i64,
    /// `facet -> value -> score (1..=20)`.
    pub scores: BTreeMap<String, BTreeMap<String, u32>>,
}

impl Profile {
    /// The API's profile JSON:
    /// `{"userToken","lastEventAt":"2024-05-21T01:15:35Z","scores":{..}}`.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// The API's profile JSON, written without building a `Value` (keys in
/// the order a `Value` sorts them, so both forms give the same bytes).
impl serde::Serialize for Profile {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let last =
            affinity_rowkey::time::format_seconds(self.last_event_millis).unwrap_or_default();
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("lastEventAt", &last)?;
        map.serialize_entry("scores", &self.scores)?;
        map.serialize_entry("userToken", &self.user_token)?;
        map.end()
    }
}

/// Sums raw scores of one user; every path feeds one of these.
#[derive(Debug)]
pub struct Accumulator<'w> {
    weights: &'w Weights,
    /// `raw(facet, value)` by the facet's slot in the weights (empty until
    /// the first count); values are UTF-8, kept as bytes so that a value
    /// read as bytes is checked once, when first met.
    raw: Vec<FxHashMap<Vec<u8>, i64>>,
    last_event_millis: Option<i64>,
}

impl<'w> Accumulator<'w> {
    pub fn new(weights: &'w Weights) -> Accumulator<'w> {
        Accumulator {
            weights,
            raw: Vec::new(),
            last_event_millis: None,
        }
    }

    /// Whether an event of this kind with these counts is a scoring event.
    pub fn is_scoring(&self, ty: EventType, name: &str, counts: &FacetCounts) -> bool {
        self.weights.event(ty, name).is_some()
            && counts
                .iter()
                .any(|(f, _, n)| n > 0 && self.weights.facet(f).is_some())
    }

    /// Add `multiplicity` copies of `count` occurrences of `facet:value` in
    /// events of `(ty, name)` (negative to take them back).
    pub fn add_count(&mut self, ty: EventType, name: &str, facet: &str, value: &str, count: i64) {
        let (Some(es), Some(fs)) = (self.weights.event(ty, name), self.weights.facet(facet)) else {
            return;
        };
        self.add_weighted(facet, value, i64::from(es) * i64::from(fs) * count);
    }

    /// Add `eventScore * facetScore * count`, computed by the caller, to
    /// `raw(facet, value)` (the batch reader resolves the weights of a
    /// column once per scan, not once per count).
    /// `facet` must be one of the strategy's (another has no score).
    pub fn add_weighted(&mut self, facet: &str, value: &str, add: i64) {
        if let Some((slot, _)) = self.weights.facet_slot(facet) {
            self.add_at(slot, value, add);
        }
    }

    /// [`Accumulator::add_weighted`] to the facet of slot `slot`
    /// ([`Weights::facet_slot`]).
    pub fn add_at(&mut self, slot: usize, value: &str, add: i64) {
        // Text already: nothing to check.
        let Ok(()) = self.add_new_checked(slot, value.as_bytes(), add, |_| {
            Ok::<(), std::convert::Infallible>(())
        });
    }

    /// [`Accumulator::add_at`] of a value given as bytes, which must be
    /// UTF-8: checked only the first time the value is met (a scan meets
    /// a heavy user's values thousands of times each).
    pub fn add_utf8_at(
        &mut self,
        slot: usize,
        value: &[u8],
        add: i64,
    ) -> Result<(), std::str::Utf8Error> {
        self.add_new_checked(slot, value, add, |v| std::str::from_utf8(v).map(drop))
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

    /// Note that a scoring event happened at `millis`.
    pub fn note_event_time(&mut self, millis: i64) {
        self.last_event_millis = Some(self.last_event_millis.map_or(millis, |l| l.max(millis)));
    }

    /// Add one event's counts `multiplicity` times (negative to take them
    /// back). Its time is not noted: see [`Accumulator::note_event_time`].
    pub fn add_event(&mut self, event: &ScoredEvent, multiplicity: i64) {
        for (f, v, n) in event.counts.iter() {
            self.add_count(
                event.event_type,
                &event.event_name,
                f,
                v,
                i64::from(n) * multiplicity,
            );
        }
    }

    /// The profile, `None` without a scoring event.
    pub fn finish(self, user_token: &str) -> Option<Profile> {
        let (last_event_millis, scores) = self.finish_sorted()?;
        Some(scores.into_profile(user_token, last_event_millis))
    }

    /// The time of the latest scoring event and the scores, `None` without
    /// a scoring event: [`Accumulator::finish`] without building maps.
    pub fn finish_sorted(mut self) -> Option<(i64, SortedScores)> {
        self.take_sorted()
    }

    /// [`Accumulator::finish_sorted`] that leaves the accumulator empty and
    /// keeps its maps' room, for the next user of a scan.
    pub fn take_sorted(&mut self) -> Option<(i64, SortedScores)> {
        let Some(last_event_millis) = self.last_event_millis.take() else {
            self.raw.iter_mut().for_each(FxHashMap::clear);
            return None;
        };
        let names = self.weights.facet_names();
        let mut kept: Vec<(String, RawValues)> = Vec::with_capacity(names.len());
        for (facet, values) in names.iter().zip(&mut self.raw) {
            let mut taken: RawValues = Vec::with_capacity(values.len());
            taken.extend(values.drain().filter(|(_, r)| *r > 0));
            if values.capacity() > 4096 {
                // A heavy user's room would make every later user's drain
                // walk it.
                *values = FxHashMap::default();
            }
            if taken.len() > MAX_VALUES_PER_FACET {
                // The kept values: the highest scores, ties to the smaller
                // value (values are distinct: one order; bytes sort as
                // their text does).
                taken.select_nth_unstable_by(MAX_VALUES_PER_FACET - 1, |a, b| {
                    b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0))
                });
                taken.truncate(MAX_VALUES_PER_FACET);
            }
            if !taken.is_empty() {
                taken.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                kept.push((facet.clone(), taken));
            }
        }
        kept.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let max = kept
            .iter()
            .flat_map(|(_, vs)| vs.iter().map(|v| v.1))
            .max()
            .unwrap_or(0);
        let scores = kept
            .into_iter()
            .map(|(facet, values)| {
                let values = values
                    .into_iter()
                    .map(|(v, r)| (utf8_string(v), scale(r, max)))
                    .collect();
                (facet, values)
            })
            .collect();
        Some((last_event_millis, SortedScores(scores)))
    }
}

/// `text` as a JSON string, as serde_json writes it: as is when nothing in
/// it needs escaping (a quote, a backslash, a control character), else
/// through serde_json.
fn json_string(out: &mut Vec<u8>, text: &str) -> crate::error::Result<()> {
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, text)?;
    }
    Ok(())
}

/// One facet's values as the accumulator holds them: `(value as UTF-8
/// bytes, raw score)`.
type RawValues = Vec<(Vec<u8>, i64)>;

/// A value the accumulator holds as text: every one was checked as it went
/// in (by `&str` or by [`Accumulator::add_utf8_at`]), so the lossy branch
/// never runs.
fn utf8_string(value: Vec<u8>) -> String {
    String::from_utf8(value).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// A profile's scores as `(facet, [(value, score)])`, facets and each
/// facet's values sorted (the order of a `BTreeMap`), serialized as the
/// API's nested `scores` object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SortedScores(pub Vec<(String, Vec<(String, u32)>)>);

impl SortedScores {
    /// The API's profile JSON (`lastEventAt`, `scores`, `userToken`) of
    /// these scores, appended to `out`: the bytes serde_json writes for
    /// [`Profile`] (tests), written by hand, without building maps or
    /// serde's per-entry machinery (profile reads answer with it, and a
    /// many-light batch writes one profile per five events). With
    /// `stored_version`, as a batch stores it: plus `lastEventMillis` and
    /// `strategyVersion`, keys still in sorted order (as a
    /// `serde_json::Value` writes them).
    pub fn write_profile_json(
        &self,
        out: &mut Vec<u8>,
        user_token: &str,
        last_event_millis: i64,
        stored_version: Option<i64>,
    ) -> crate::error::Result<()> {
        let mut number = itoa::Buffer::new();
        out.extend_from_slice(b"{\"lastEventAt\":");
        let last = affinity_rowkey::time::format_seconds(last_event_millis).unwrap_or_default();
        json_string(out, &last)?;
        if stored_version.is_some() {
            out.extend_from_slice(b",\"lastEventMillis\":");
            out.extend_from_slice(number.format(last_event_millis).as_bytes());
        }
        out.extend_from_slice(b",\"scores\":{");
        for (i, (facet, values)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            json_string(out, facet)?;
            out.extend_from_slice(b":{");
            for (j, (value, score)) in values.iter().enumerate() {
                if j > 0 {
                    out.push(b',');
                }
                json_string(out, value)?;
                out.push(b':');
                out.extend_from_slice(number.format(*score).as_bytes());
            }
            out.push(b'}');
        }
        out.push(b'}');
        if let Some(version) = stored_version {
            out.extend_from_slice(b",\"strategyVersion\":");
            out.extend_from_slice(number.format(version).as_bytes());
        }
        out.extend_from_slice(b",\"userToken\":");
        json_string(out, user_token)?;
        out.push(b'}');
        Ok(())
    }

    /// The profile of `user_token` with these scores.
    pub fn into_profile(self, user_token: &str, last_event_millis: i64) -> Profile {
        Profile {
            user_token: user_token.to_string(),
            last_event_millis,
            scores: self.into_map(),
        }
    }

    pub fn into_map(self) -> BTreeMap<String, BTreeMap<String, u32>> {
        self.0
            .into_iter()
            .map(|(facet, values)| (facet, values.into_iter().collect()))
            .collect()
    }
}

impl serde::Serialize for SortedScores {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        /// One facet's `{"value": score}`.
        struct Values<'a>(&'a [(String, u32)]);
        impl serde::Serialize for Values<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_map(self.0.iter().map(|(v, n)| (v, n)))
            }
        }
        s.collect_map(self.0.iter().map(|(f, values)| (f, Values(values))))
    }
}

/// `max(1, round(20 * raw / max))`, half away from zero, for `0 < raw <= max`.
pub fn scale(raw: i64, max: i64) -> u32 {
    let (raw, max) = (i128::from(raw), i128::from(max.max(1)));
    let s = (2 * MAX_SCORE as i128 * raw + max) / (2 * max);
    s.clamp(1, MAX_SCORE as i128) as u32
}

/// The naive reference: profiles straight from a list of events, for tests.
pub mod reference {
    use std::collections::{BTreeMap, BTreeSet};

    use super::{Accumulator, Profile, ScoredEvent};
    use crate::strategy::Strategy;

    /// One event of the list: its user, its identity (the row key: equal
    /// for a retry) and what it scores.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ListedEvent {
        pub user: String,
        pub id: String,
        pub event: ScoredEvent,
    }

    /// Every user's profile: drop duplicates by id and events of days that
    /// left the window (see the module docs), then score each user's
    /// events one by one.
    pub fn profiles(
        events: &[ListedEvent],
        strategy: &Strategy,
        now_millis: i64,
        retention_millis: i64,
    ) -> BTreeMap<String, Profile> {
        let weights = strategy.weights();
        let mut seen = BTreeSet::new();
        let mut by_user: BTreeMap<&str, Vec<&ScoredEvent>> = BTreeMap::new();
        let day = crate::engine::DAY_MILLIS;
        let window_start = ((now_millis - retention_millis).div_euclid(day) + 1) * day;
        for e in events {
            if e.event.timestamp_millis < window_start {
                continue;
            }
            if seen.insert((e.user.as_str(), e.id.as_str())) {
                by_user.entry(&e.user).or_default().push(&e.event);
            }
        }
        let mut out = BTreeMap::new();
        for (user, list) in by_user {
            let mut acc = Accumulator::new(&weights);
            for e in list {
                acc.add_event(e, 1);
                if acc.is_scoring(e.event_type, &e.event_name, &e.counts) {
                    acc.note_event_time(e.timestamp_millis);
                }
            }
            if let Some(p) = acc.finish(user) {
                out.insert(user.to_string(), p);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::reference::{profiles, ListedEvent};
    use super::*;
    use crate::strategy::Strategy;
    use serde_json::json;

    #[test]
    fn facet_counts_sort_sum_and_serialize_as_nested_maps() {
        let pairs: Vec<(String, String)> = [
            ("color", "Red"),
            ("brand", "b,c"),
            ("color", "Red"),
            ("brand", "A"),
            ("é", "x"),
        ]
        .iter()
        .map(|(f, v)| (f.to_string(), v.to_string()))
        .collect();
        let counts = FacetCounts::from_pairs(&pairs);
        let mut added = FacetCounts::default();
        let mut nested: BTreeMap<String, BTreeMap<String, u32>> = BTreeMap::new();
        for (f, v) in &pairs {
            added.add(f, v, 1);
            *nested
                .entry(f.clone())
                .or_default()
                .entry(v.clone())
                .or_default() += 1;
        }
        assert_eq!(counts, added);
        assert_eq!(counts, FacetCounts::from_nested(nested.clone()));
        assert_eq!(
            counts.iter().collect::<Vec<_>>(),
            [
                ("brand", "A", 1),
                ("brand", "b,c", 1),
                ("color", "Red", 2),
                ("é", "x", 1)
            ]
        );
        assert_eq!(counts.get("color", "Red"), 2);
        assert_eq!(counts.get("color", "Blue"), 0);
        assert_eq!(counts.facet_count(), 3);
        // The narrow schema's stored JSON: the same bytes as the maps give.
        assert_eq!(
            serde_json::to_vec(&counts).unwrap(),
            serde_json::to_vec(&nested).unwrap()
        );
    }

    fn strategy() -> Strategy {
        Strategy::from_json(
            &json!({"eventsScoring":[{"eventName":"click","eventType":"click","score":10},
            {"eventName":"buy","eventType":"conversion","score":50}],
            "facetsScoring":[{"facetName":"brand","score":100},{"facetName":"color","score":10}],
            "personalizationImpact":50}),
        )
        .unwrap()
    }

    fn ev(
        user: &str,
        id: &str,
        ty: EventType,
        name: &str,
        ts: i64,
        filters: &[(&str, &str)],
    ) -> ListedEvent {
        let pairs: Vec<(String, String)> = filters
            .iter()
            .map(|(f, v)| (f.to_string(), v.to_string()))
            .collect();
        ListedEvent {
            user: user.into(),
            id: id.into(),
            event: ScoredEvent {
                event_type: ty,
                event_name: name.into(),
                timestamp_millis: ts,
                counts: FacetCounts::from_pairs(&pairs),
            },
        }
    }

    #[test]
    fn an_accumulator_taken_from_starts_the_next_user_empty() {
        let strategy = strategy();
        let weights = strategy.weights();
        let mut reused = Accumulator::new(&weights);
        // A scoring user, then one with only an unscored count.
        reused.add_count(EventType::Click, "click", "brand", "Apple", 3);
        reused.add_count(EventType::Click, "click", "color", "Black", 1);
        reused.note_event_time(100);
        assert!(reused.take_sorted().is_some());
        reused.add_count(EventType::Click, "click", "brand", "Samsung", 0);
        assert_eq!(reused.take_sorted(), None);
        // The next user sees neither.
        let mut fresh = Accumulator::new(&weights);
        for acc in [&mut reused, &mut fresh] {
            acc.add_count(EventType::Conversion, "buy", "brand", "Samsung", 1);
            acc.note_event_time(200);
        }
        let taken = reused.take_sorted();
        assert_eq!(taken, fresh.finish_sorted());
        let (_, scores) = taken.unwrap();
        assert_eq!(
            scores.0,
            vec![("brand".to_string(), vec![("Samsung".to_string(), 20)])]
        );
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
            scores.0,
            vec![("brand".to_string(), vec![("Café".to_string(), 20)])]
        );
    }

    #[test]
    fn scale_rounds_half_away_from_zero() {
        assert_eq!(scale(10, 10), 20);
        assert_eq!(scale(1, 40), 1); // 0.5 -> 1
        assert_eq!(scale(3, 40), 2); // 1.5 -> 2
        assert_eq!(scale(5, 40), 3); // 2.5 -> 3
        assert_eq!(scale(1, 1000), 1); // 0.02 -> max(1, 0)
        assert_eq!(scale(13, 40), 7); // 6.5 -> 7
    }

    #[test]
    fn worked_example() {
        // Ten days in, a one-day retention: the window is day 10.
        const T: i64 = 10 * crate::engine::DAY_MILLIS;
        let events = vec![
            ev(
                "u",
                "1",
                EventType::Click,
                "click",
                T + 100,
                &[("brand", "Apple"), ("color", "Black")],
            ),
            ev(
                "u",
                "2",
                EventType::Conversion,
                "buy",
                T + 200,
                &[("brand", "Samsung")],
            ),
            ev(
                "u",
                "2",
                EventType::Conversion,
                "buy",
                T + 200,
                &[("brand", "Samsung")],
            ), // retry
            ev(
                "u",
                "3",
                EventType::View,
                "view",
                T + 300,
                &[("brand", "Apple")],
            ), // not in strategy
            ev("u", "4", EventType::Click, "click", T - 1, &[("brand", "Old")]), // expired
            ev("v", "5", EventType::Click, "click", T + 150, &[("size", "L")]),  // no scored facet
        ];
        let out = profiles(&events, &strategy(), T + 1000, crate::engine::DAY_MILLIS);
        assert_eq!(out.len(), 1);
        let p = &out["u"];
        // raw: Apple 10*100 = 1000, Black 10*10 = 100, Samsung 50*100 = 5000.
        assert_eq!(p.scores["brand"]["Samsung"], 20);
        assert_eq!(p.scores["brand"]["Apple"], 4);
        assert_eq!(p.scores["color"]["Black"], 1); // 0.4 -> max(1, 0)
        assert!(!p.scores["brand"].contains_key("Old"));
        assert_eq!(p.last_event_millis, T + 200);
        assert_eq!(p.to_json()["lastEventAt"], "1970-01-11T00:00:00Z");
        // Serialized directly, the same bytes as through a `Value`.
        let value = serde_json::json!({"userToken": p.user_token,
            "lastEventAt": "1970-01-11T00:00:00Z", "scores": p.scores});
        assert_eq!(
            serde_json::to_string(&p).expect("serializes"),
            value.to_string()
        );
    }

    #[test]
    fn keeps_top_100_values_per_facet() {
        let mut events = Vec::new();
        for i in 0..150 {
            let value = format!("v{i:03}");
            for k in 0..=(i / 10) {
                events.push(ev(
                    "u",
                    &format!("{i}-{k}"),
                    EventType::Click,
                    "click",
                    10,
                    &[("brand", &value)],
                ));
            }
        }
        let p = &profiles(&events, &strategy(), 100, 1000)["u"];
        assert_eq!(p.scores["brand"].len(), 100);
        assert!(p.scores["brand"].contains_key("v149"));
        assert!(!p.scores["brand"].contains_key("v000"));
        // Ties at the cut keep the smaller values: 50..=149 have the top counts.
        assert!(p.scores["brand"].contains_key("v050"));
        assert!(!p.scores["brand"].contains_key("v049"));
    }
}
