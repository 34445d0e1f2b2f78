//! [`SortedScores`]: a profile's scores as sorted vectors, the API's
//! profile JSON written from them by hand, and lookups by binary search
//! (query time reads them without building a [`Profile`]'s maps).

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::hash::Hasher;

use super::accumulator::head;
use super::{cmp_bytes, Profile};
use crate::error::Result;

/// A profile's scores as `(facet, [(value, score)])`, facets and each
/// facet's values sorted (the order of a `BTreeMap`), written as the API's
/// nested `scores` object. The values' text is one string, each value a
/// range of it: a read builds a heavy user's hundreds of values without
/// an allocation each.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SortedScores {
    /// Every value's text, one after the other.
    text: String,
    /// `(start, end, score)` of each value in `text`, facet after facet.
    values: Vec<(u32, u32, u32)>,
    /// Each value's first 8 bytes as a big-endian integer ([`head`]), so
    /// a lookup's binary search compares integers in one array and looks
    /// at the text only where they tie.
    heads: Vec<u64>,
    /// Each facet and the end of its values in `values` (a facet's values
    /// start where the previous one's end).
    facets: Vec<(String, usize)>,
}

/// One facet's `(value, score)` list, in value order.
#[derive(Debug, Clone, Copy)]
pub struct FacetScores<'s> {
    text: &'s str,
    values: &'s [(u32, u32, u32)],
    heads: &'s [u64],
}

impl<'s> FacetScores<'s> {
    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The `(value, score)` pairs, in value order.
    pub fn iter(&self) -> impl Iterator<Item = (&'s str, u32)> + 's {
        let text = self.text;
        self.values
            .iter()
            .map(move |&(a, b, score)| (&text[a as usize..b as usize], score))
    }

    /// The score of `value`.
    pub fn get(&self, value: &str) -> Option<u32> {
        let text = self.text.as_bytes();
        let value = value.as_bytes();
        let h = head(value);
        let (mut lo, mut hi) = (0, self.heads.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let order = self.heads[mid].cmp(&h).then_with(|| {
                let (a, b, _) = self.values[mid];
                cmp_bytes(&text[a as usize..b as usize], value)
            });
            match order {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Some(self.values[mid].2),
            }
        }
        None
    }
}

/// A facet's values hashed, for many lookups in one facet (a
/// re-ranking's hits): one probe or two instead of a binary search each,
/// for one pass over the values to build it.
#[derive(Debug, Clone)]
pub struct FacetIndex<'s> {
    scores: FacetScores<'s>,
    /// Each value's place + 1 in `scores` (0: empty), open addressing.
    slots: Vec<u32>,
    shift: u32,
}

/// What [`FacetIndex`] hashes of a value whose [`head`] is `head`: the
/// head, with the rest of a longer value mixed in. A facet's values often
/// share their first 8 bytes (`"Electronics > ..."`, hierarchical
/// categories), and hashed by their heads alone they would all share one
/// slot and a lookup would pass them all.
#[inline]
fn index_hash(value: &[u8], head: u64) -> u64 {
    match value.get(8..) {
        Some(rest) if !rest.is_empty() => {
            let mut hasher = rustc_hash::FxHasher::default();
            hasher.write(rest);
            head ^ hasher.finish()
        }
        _ => head,
    }
}

impl<'s> FacetIndex<'s> {
    fn slot(&self, h: u64) -> usize {
        (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// The slot where the lookup of value `i` of the facet starts.
    fn home(&self, i: usize) -> usize {
        let (a, b, _) = self.scores.values[i];
        let value = &self.scores.text.as_bytes()[a as usize..b as usize];
        self.slot(index_hash(value, self.scores.heads[i]))
    }

    /// The score of `value`.
    #[inline]
    pub fn get(&self, value: &str) -> Option<u32> {
        let value = value.as_bytes();
        let h = head(value);
        let mask = self.slots.len() - 1;
        let mut at = self.slot(index_hash(value, h));
        loop {
            let i = match self.slots[at] {
                0 => return None,
                i => i as usize - 1,
            };
            let (a, b, score) = self.scores.values[i];
            // Equal heads: the bytes past the first 8 decide (no `memcmp`
            // call for a value of 8 bytes or fewer, as most are).
            if self.scores.heads[i] == h
                && (b - a) as usize == value.len()
                && (value.len() <= 8
                    || self.scores.text.as_bytes()[a as usize + 8..b as usize] == value[8..])
            {
                return Some(score);
            }
            at = (at + 1) & mask;
        }
    }

    /// The most slots a lookup of a value the index holds passes before
    /// its own (0: every value in its home slot).
    #[cfg(test)]
    fn longest_probe(&self) -> usize {
        let mask = self.slots.len() - 1;
        (0..self.slots.len())
            .filter(|at| self.slots[*at] != 0)
            .map(|at| at.wrapping_sub(self.home(self.slots[at] as usize - 1)) & mask)
            .max()
            .unwrap_or(0)
    }
}

impl<'s> FacetScores<'s> {
    /// These values hashed for lookups ([`FacetIndex`]).
    pub fn index(self) -> FacetIndex<'s> {
        // At most half full: at least twice the values, a power of two.
        let bits = (2 * self.values.len())
            .max(2)
            .next_power_of_two()
            .trailing_zeros();
        let mut index = FacetIndex {
            scores: self,
            slots: vec![0; 1 << bits],
            shift: 64 - bits,
        };
        let mask = index.slots.len() - 1;
        for i in 0..self.values.len() {
            let mut at = index.home(i);
            while index.slots[at] != 0 {
                at = (at + 1) & mask;
            }
            index.slots[at] = i as u32 + 1;
        }
        index
    }
}

/// Builds a [`SortedScores`]: facets in order, each facet's values in
/// order.
#[derive(Debug, Default)]
pub(crate) struct SortedScoresBuilder {
    /// The values' bytes, checked as UTF-8 once, by
    /// [`SortedScoresBuilder::build`] (one pass over them all instead of
    /// one call per short value).
    text: Vec<u8>,
    scores: SortedScores,
}

impl SortedScoresBuilder {
    pub(crate) fn with_capacity(values: usize, text: usize) -> SortedScoresBuilder {
        SortedScoresBuilder {
            text: Vec::with_capacity(text),
            scores: SortedScores {
                text: String::new(),
                values: Vec::with_capacity(values),
                heads: Vec::with_capacity(values),
                facets: Vec::new(),
            },
        }
    }

    /// Add `value` with `score` to the facet being built.
    pub(crate) fn value(&mut self, value: &str, score: u32) {
        self.value_with_head(value.as_bytes(), head(value.as_bytes()), score);
    }

    /// [`SortedScoresBuilder::value`] of a value given as its bytes, which
    /// should be UTF-8 (a value that is not is built lossily), whose
    /// [`head`] is known.
    pub(crate) fn value_with_head(&mut self, value: &[u8], head: u64, score: u32) {
        let start = self.text.len() as u32;
        self.text.extend_from_slice(value);
        let end = self.text.len() as u32;
        self.scores.values.push((start, end, score));
        self.scores.heads.push(head);
    }

    /// End the facet `name`, made of the values added since the last.
    pub(crate) fn end_facet(&mut self, name: String) {
        self.scores.facets.push((name, self.scores.values.len()));
    }

    pub(crate) fn build(self) -> SortedScores {
        let SortedScoresBuilder { text, mut scores } = self;
        scores.text = match String::from_utf8(text) {
            Ok(text) => text,
            Err(bad) => {
                // Each value on its own, its invalid bytes replaced.
                let bytes = bad.into_bytes();
                let mut text = String::with_capacity(bytes.len());
                for (start, end, _) in &mut scores.values {
                    let value = &bytes[*start as usize..*end as usize];
                    *start = text.len() as u32;
                    text.push_str(&String::from_utf8_lossy(value));
                    *end = text.len() as u32;
                }
                text
            }
        };
        scores
    }
}

impl SortedScores {
    /// The facets and their `(value, score)` lists, both in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, FacetScores<'_>)> {
        let mut start = 0;
        self.facets.iter().map(move |(name, end)| {
            let (values, heads) = (&self.values[start..*end], &self.heads[start..*end]);
            start = *end;
            (
                name.as_str(),
                FacetScores {
                    text: &self.text,
                    values,
                    heads,
                },
            )
        })
    }

    /// The `(value, score)` list of `facet`, in value order.
    pub fn facet(&self, facet: &str) -> Option<FacetScores<'_>> {
        let i = self
            .facets
            .binary_search_by(|(f, _)| cmp_bytes(f.as_bytes(), facet.as_bytes()))
            .ok()?;
        let start = if i == 0 { 0 } else { self.facets[i - 1].1 };
        let end = self.facets[i].1;
        Some(FacetScores {
            text: &self.text,
            values: &self.values[start..end],
            heads: &self.heads[start..end],
        })
    }

    /// The score (1..=20) of `value` of `facet`.
    pub fn get(&self, facet: &str, value: &str) -> Option<u32> {
        self.facet(facet)?.get(value)
    }

    /// About the bytes of the profile JSON of these scores.
    pub(crate) fn json_size_hint(&self) -> usize {
        64 + self.text.len()
            + 8 * self.values.len()
            + self.facets.iter().map(|(f, _)| f.len() + 6).sum::<usize>()
    }

    /// The bytes its buffers hold (what a cached copy costs).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.text.capacity()
            + self.values.capacity() * std::mem::size_of::<(u32, u32, u32)>()
            + self.heads.capacity() * 8
            + self
                .facets
                .iter()
                .map(|(f, _)| f.capacity() + std::mem::size_of::<(String, usize)>())
                .sum::<usize>()
    }

    /// `(facet, [(value, score)])`, as owned lists.
    #[cfg(test)]
    pub(crate) fn to_vec(&self) -> Vec<(String, Vec<(String, u32)>)> {
        self.iter()
            .map(|(f, vs)| {
                let values = vs.iter().map(|(v, n)| (v.to_string(), n)).collect();
                (f.to_string(), values)
            })
            .collect()
    }

    /// The API's profile JSON (`lastEventAt`, `scores`, `userToken`) of
    /// these scores, appended to `out`: the bytes serde_json writes for
    /// [`Profile`] (tests), written by hand, without building maps or
    /// serde's per-entry machinery (profile reads answer with it, and an
    /// export of many light users writes one profile per few events).
    pub(crate) fn write_profile_json(
        &self,
        out: &mut Vec<u8>,
        user_token: &str,
        last_event_millis: i64,
    ) -> Result<()> {
        let mut number = itoa::Buffer::new();
        out.extend_from_slice(b"{\"lastEventAt\":");
        let last = affinity_rowkey::time::format_seconds(last_event_millis).unwrap_or_default();
        json_string(out, &last);
        out.extend_from_slice(b",\"scores\":{");
        for (i, (facet, values)) in self.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            json_string(out, facet);
            out.extend_from_slice(b":{");
            for (j, (value, score)) in values.iter().enumerate() {
                if j > 0 {
                    out.push(b',');
                }
                json_string(out, value);
                out.push(b':');
                out.extend_from_slice(number.format(score).as_bytes());
            }
            out.push(b'}');
        }
        out.push(b'}');
        out.extend_from_slice(b",\"userToken\":");
        json_string(out, user_token);
        out.push(b'}');
        Ok(())
    }

    /// The profile of `user_token` with these scores.
    pub(crate) fn into_profile(self, user_token: &str, last_event_millis: i64) -> Profile {
        Profile {
            user_token: user_token.to_string(),
            last_event_millis,
            scores: self.into_map(),
        }
    }

    pub(crate) fn into_map(self) -> BTreeMap<String, BTreeMap<String, u32>> {
        self.iter()
            .map(|(facet, values)| {
                let values = values.iter().map(|(v, n)| (v.to_string(), n)).collect();
                (facet.to_string(), values)
            })
            .collect()
    }
}

impl From<&Profile> for SortedScores {
    fn from(profile: &Profile) -> SortedScores {
        let mut built = SortedScoresBuilder::default();
        for (facet, values) in &profile.scores {
            for (value, score) in values {
                built.value(value, *score);
            }
            built.end_facet(facet.clone());
        }
        built.build()
    }
}

/// `text` as a JSON string, as serde_json writes it: as is when nothing in
/// it needs escaping (a quote, a backslash, a control character), else
/// through serde_json.
pub fn json_string(out: &mut Vec<u8>, text: &str) {
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else {
        // Writing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, text);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    /// Values that share their first 8 bytes (hierarchical categories)
    /// spread over the index's slots, each found near its home slot.
    #[test]
    fn values_sharing_their_head_are_hashed_apart() {
        let values: BTreeMap<String, u32> = (0..1000u32)
            .map(|i| (format!("Electronics > Phones > {i}"), i % 20 + 1))
            .chain((0..200u32).map(|i| (format!("Electron{i}"), 7)))
            .collect();
        let sorted = sorted(&BTreeMap::from([("f".to_string(), values.clone())]));
        let index = sorted.facet("f").expect("the facet").index();
        for (value, score) in &values {
            assert_eq!(index.get(value), Some(*score), "{value}");
        }
        for absent in ["Electronics > Phones > 1000", "Electron", "Electronics > "] {
            assert_eq!(index.get(absent), None, "{absent}");
        }
        // 1,200 values in 4,096 slots; hashed by their heads they would
        // have made one run of 1,200.
        assert!(index.longest_probe() < 40, "{}", index.longest_probe());
    }

    fn sorted(scores: &BTreeMap<String, BTreeMap<String, u32>>) -> SortedScores {
        SortedScores::from(&Profile {
            user_token: String::new(),
            last_event_millis: 0,
            scores: scores.clone(),
        })
    }

    fn written(user: &str, millis: i64, scores: &SortedScores) -> String {
        let mut out = Vec::new();
        scores
            .write_profile_json(&mut out, user, millis)
            .expect("writes");
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn profile_json_escapes_what_json_needs_escaped() {
        let scores = BTreeMap::from([
            (
                "brand".to_string(),
                BTreeMap::from([("Apple".to_string(), 20), ("\"Q\"\\\n".to_string(), 3)]),
            ),
            (
                "color".to_string(),
                BTreeMap::from([("Black".to_string(), 1)]),
            ),
        ]);
        assert_eq!(
            written("u1", 1_700_000_000_123, &sorted(&scores)),
            r#"{"lastEventAt":"2023-11-14T22:13:20Z","scores":{"brand":{"\"Q\"\\\n":3,"Apple":20},"color":{"Black":1}},"userToken":"u1"}"#
        );
        assert_eq!(sorted(&scores).into_map(), scores);
    }

    #[test]
    fn a_value_that_is_not_utf8_is_built_lossily_in_its_place() {
        let mut built = SortedScoresBuilder::default();
        built.value("a", 1);
        built.value_with_head(b"b\xff", head(b"b\xff"), 2);
        built.value("c\u{e9}", 3);
        built.end_facet("brand".to_string());
        let scores = built.build();
        let brand = scores.facet("brand").expect("the facet");
        let values: Vec<(&str, u32)> = brand.iter().collect();
        assert_eq!(values, [("a", 1), ("b\u{fffd}", 2), ("c\u{e9}", 3)]);
        assert_eq!(brand.get("c\u{e9}"), Some(3));
    }

    proptest! {
        /// Any text (quotes, backslashes, control characters, non-ASCII)
        /// and numbers: the bytes serde_json writes for the profile.
        #[test]
        fn profile_json_is_written_as_serde_json_writes_it(
            user in "\\PC{0,8}",
            scores in prop::collection::btree_map(
                "\\PC{0,6}|[\"\\\\\\x00-\\x1f\\x7f]{1,3}",
                prop::collection::btree_map("\\PC{0,6}|[\"\\\\\\x00-\\x1f]{1,3}", 1u32..=20, 1..4),
                0..4,
            ),
            millis in 0i64..253_402_300_799_999,
        ) {
            let sorted = sorted(&scores);
            for (facet, values) in &scores {
                for (value, score) in values {
                    prop_assert_eq!(sorted.get(facet, value), Some(*score));
                    prop_assert_eq!(sorted.get(facet, &format!("{value}\u{0}")), values.get(&format!("{value}\u{0}")).copied());
                }
                prop_assert_eq!(sorted.facet(facet).map(|f| f.len()), Some(values.len()));
            }
            prop_assert_eq!(sorted.get("\u{10ffff}facet", "x"), None);
            let written = written(&user, millis, &sorted);
            let profile = Profile { user_token: user.clone(), last_event_millis: millis, scores };
            prop_assert_eq!(written.into_bytes(), serde_json::to_vec(&profile).expect("serializes"));
        }

        /// Lookups among values that share their first bytes (ties of the
        /// 8-byte heads, zero bytes and padding alike) find what a map does,
        /// by binary search and through the hashed index.
        #[test]
        fn lookups_find_what_a_map_holds(
            values in prop::collection::btree_map("(|a|ab|category|categoryv)[\\x00ab]{0,3}", 1u32..=20, 0..24),
            probes in prop::collection::vec("(|a|ab|category|categoryv)[\\x00ab]{0,3}", 0..24),
        ) {
            let sorted = sorted(&BTreeMap::from([("f".to_string(), values.clone())]));
            let index = sorted.facet("f").expect("the facet").index();
            for probe in values.keys().chain(&probes) {
                prop_assert_eq!(sorted.get("f", probe), values.get(probe).copied(), "{:?}", probe);
                prop_assert_eq!(index.get(probe), values.get(probe).copied(), "{:?}", probe);
            }
        }
    }
}
