//! Profiles at query time: a user's scores ([`SortedScores`], a profile
//! without its maps) turned into the boosts a
//! search engine takes, weighted by the strategy's `personalizationImpact`
//! (or the caller's), and hits re-ranked by the user's affinities
//! ([`rerank`]).
//!
//! # Weights
//!
//! For a profile value `(facet, value)` with score `s` (1..=20) and impact
//! `p` (0..=100):
//!
//! ```text
//! weight = round(s x p / 20)        (0..=100, half away from zero)
//! ```
//!
//! so a top value at full impact weighs 100 and impact scales every weight
//! alike. Values whose weight rounds to 0 are left out (impact 0 gives no
//! boost at all). The profile's scores already carry the strategy's facet
//! scores (a value's raw score is `eventScore x facetScore x count`), so
//! the facet score is not applied a second time. Boosts are ordered by
//! weight, highest first, then facet and value (byte order), and the
//! `limit` highest are kept. Every output form ([`push_algolia_filter`],
//! [`write_elasticsearch_query`], [`write_list`]) carries the same
//! weights.
//!
//! Nothing here reads the store: the caller reads the scores once (the
//! hot path, [`crate::Engine::scores_with`]) and hands them over.

pub mod rerank;

use crate::error::{Error, Result};
use crate::scoring::{json_string, SortedScores, MAX_SCORE};
use crate::strategy::Strategy;

/// The most boosts one answer may hold (`limit`).
pub const MAX_LIMIT: usize = 1000;
/// Boosts in an answer when no `limit` is given.
pub const DEFAULT_LIMIT: usize = 100;
/// The highest `personalizationImpact`.
pub const MAX_IMPACT: u32 = 100;

/// What goes into a profile's boosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoostOptions {
    /// 0..=100; 0 gives no boost.
    pub impact: u32,
    /// Only these facets (each one the strategy scores); `None`: all.
    pub facets: Option<Vec<String>>,
    /// At most this many boosts, 1..=[`MAX_LIMIT`].
    pub limit: usize,
}

impl BoostOptions {
    /// Every facet, the strategy's impact, [`DEFAULT_LIMIT`] boosts.
    pub fn of(strategy: &Strategy) -> BoostOptions {
        BoostOptions {
            impact: strategy.personalization_impact,
            facets: None,
            limit: DEFAULT_LIMIT,
        }
    }

    /// Refuse options the strategy cannot honour: an impact over 100, a
    /// limit outside 1..=1000, a facet the strategy does not score.
    pub fn check(&self, strategy: &Strategy) -> Result<()> {
        check_impact(self.impact)?;
        if !(1..=MAX_LIMIT).contains(&self.limit) {
            return Err(Error::InvalidArgument {
                name: "limit",
                reason: format!("{} is not within 1 and {MAX_LIMIT}", self.limit),
            });
        }
        for facet in self.facets.iter().flatten() {
            if !strategy.facets.contains_key(facet) {
                let scored: Vec<&str> = strategy.facets.keys().map(String::as_str).collect();
                return Err(Error::InvalidArgument {
                    name: "facets",
                    reason: format!(
                        "{facet:?} is not a facet the strategy scores (facetsScoring: {})",
                        scored.join(", ")
                    ),
                });
            }
        }
        Ok(())
    }
}

/// Refuse an impact over [`MAX_IMPACT`].
pub fn check_impact(impact: u32) -> Result<()> {
    if impact > MAX_IMPACT {
        return Err(Error::InvalidArgument {
            name: "personalizationImpact",
            reason: format!("{impact} is not an integer within 0 and {MAX_IMPACT}"),
        });
    }
    Ok(())
}

/// One boost: a profile's facet value and its weight (1..=100).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Boost<'p> {
    pub facet: &'p str,
    pub value: &'p str,
    pub weight: u32,
}

/// `round(score x impact / 20)`, half away from zero, in integers.
pub fn weight(score: u32, impact: u32) -> u32 {
    let max = MAX_SCORE as u32;
    (2 * score * impact + max) / (2 * max)
}

/// The profile's boosts under `options` (checked against `strategy`
/// first); none for a user without a profile. Ordered by weight, ties in
/// (facet, value) order.
pub fn boosts<'p>(
    profile: Option<&'p SortedScores>,
    strategy: &Strategy,
    options: &BoostOptions,
) -> Result<Vec<Boost<'p>>> {
    options.check(strategy)?;
    let Some(profile) = profile else {
        return Ok(Vec::new());
    };
    let wanted = |facet: &str| match &options.facets {
        Some(list) => list.iter().any(|f| f == facet),
        None => true,
    };
    let weighted: Vec<Boost<'p>> = profile
        .iter()
        .filter(|(facet, _)| wanted(facet))
        .flat_map(|(facet, values)| {
            values.iter().filter_map(move |(value, score)| {
                let weight = weight(score, options.impact);
                (weight > 0).then_some(Boost {
                    facet,
                    value,
                    weight,
                })
            })
        })
        .collect();
    // Heaviest first, ties in the profile's (facet, value) order: a
    // counting sort, stable, as weights are few (at most 100) and ties
    // many (hundreds of values for 100 boosts in a heavy profile).
    let top = weighted.iter().map(|b| b.weight).max().unwrap_or(0) as usize;
    let mut next = vec![0usize; top + 1];
    for b in &weighted {
        next[b.weight as usize] += 1;
    }
    // Each weight's first place: the count of the heavier ones.
    let mut heavier = 0;
    for place in next.iter_mut().rev() {
        let count = *place;
        *place = heavier;
        heavier += count;
    }
    let kept = weighted.len().min(options.limit);
    let mut sorted = vec![
        Boost {
            facet: "",
            value: "",
            weight: 0
        };
        kept
    ];
    for b in weighted {
        let place = &mut next[b.weight as usize];
        if *place < kept {
            sorted[*place] = b;
        }
        *place += 1;
    }
    Ok(sorted)
}

/// The characters Algolia's filter syntax gives a meaning to.
const SYNTAX: &[u8] = b"\"'\\:<>=!()[],";

/// Whether `c` is one of [`SYNTAX`] or white space.
fn special(c: char) -> bool {
    c.is_whitespace() || u8::try_from(c).is_ok_and(|b| SYNTAX.contains(&b))
}

/// [`special`] of each ASCII character, a bit each.
const SPECIAL_ASCII: u128 = {
    // `char::is_whitespace` is not const; its ASCII white space is tab to
    // carriage return and the space.
    let mut mask = 1u128 << b' ';
    let mut c = b'\t';
    while c <= b'\r' {
        mask |= 1 << c;
        c += 1;
    }
    let mut i = 0;
    while i < SYNTAX.len() {
        mask |= 1 << SYNTAX[i];
        i += 1;
    }
    mask
};

/// Whether `text` must be quoted in Algolia's filter syntax: empty, a
/// keyword, or holding a [`special`] character.
fn needs_quotes(text: &str) -> bool {
    text.is_empty()
        || (text.len() <= 3
            && ["AND", "OR", "NOT", "TO"]
                .iter()
                .any(|k| text.eq_ignore_ascii_case(k)))
        || if text.is_ascii() {
            text.bytes().any(|b| SPECIAL_ASCII >> b & 1 == 1)
        } else {
            text.chars().any(special)
        }
}

/// `text` as an operand of Algolia's filter syntax, appended to `out`: as
/// is when it is plain, else in double quotes with `"` and `\` escaped by a
/// backslash; a leading `-` (which would negate the filter) is escaped as
/// `\-`.
pub fn push_algolia_quoted(out: &mut String, text: &str) {
    if needs_quotes(text) {
        out.push('"');
        for c in text.chars() {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
    } else {
        if text.starts_with('-') {
            out.push('\\');
        }
        out.push_str(text);
    }
}

/// The boost as an Algolia scored optional filter,
/// `facet:value<score=weight>` (`brand:Nike<score=60>`), appended to
/// `out`.
pub fn push_algolia_filter(out: &mut String, boost: &Boost) {
    push_algolia_quoted(out, boost.facet);
    out.push(':');
    push_algolia_quoted(out, boost.value);
    out.push_str("<score=");
    out.push_str(itoa::Buffer::new().format(boost.weight));
    out.push('>');
}

/// A JSON array of what `write` writes of each boost.
fn write_array(out: &mut Vec<u8>, boosts: &[Boost], mut write: impl FnMut(&mut Vec<u8>, &Boost)) {
    out.push(b'[');
    for (i, boost) in boosts.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(out, boost);
    }
    out.push(b']');
}

/// The boosts as Algolia scored optional filters, a JSON array of
/// strings ([`push_algolia_filter`]).
pub fn write_algolia_filters(out: &mut Vec<u8>, boosts: &[Boost]) {
    let mut filter = String::with_capacity(64);
    write_array(out, boosts, |out, boost| {
        filter.clear();
        push_algolia_filter(&mut filter, boost);
        json_string(out, &filter);
    });
}

/// The boosts as an OpenSearch / Elasticsearch query, JSON: a `bool`
/// whose `should` clauses are `term` queries with the weight as `boost`,
/// to put next to the query's `must` (a `term` matches the exact value,
/// as on a `keyword` field).
pub fn write_elasticsearch_query(out: &mut Vec<u8>, boosts: &[Boost]) {
    out.extend_from_slice(b"{\"bool\":{\"should\":");
    write_array(out, boosts, |out, boost| {
        out.extend_from_slice(b"{\"term\":{");
        json_string(out, boost.facet);
        out.extend_from_slice(b":{\"boost\":");
        out.extend_from_slice(itoa::Buffer::new().format(boost.weight).as_bytes());
        out.extend_from_slice(b",\"value\":");
        json_string(out, boost.value);
        out.extend_from_slice(b"}}}");
    });
    out.extend_from_slice(b"}}");
}

/// The boosts as JSON `[{"facet", "value", "weight"}]`.
pub fn write_list(out: &mut Vec<u8>, boosts: &[Boost]) {
    write_array(out, boosts, |out, boost| {
        out.extend_from_slice(b"{\"facet\":");
        json_string(out, boost.facet);
        out.extend_from_slice(b",\"value\":");
        json_string(out, boost.value);
        out.extend_from_slice(b",\"weight\":");
        out.extend_from_slice(itoa::Buffer::new().format(boost.weight).as_bytes());
        out.push(b'}');
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scoring::Profile;
    use proptest::prelude::{prop_assert_eq, prop_oneof, proptest, Just};
    use serde_json::{json, Value};
    use std::collections::BTreeMap;

    /// What `write` writes, read back.
    fn written(write: impl FnOnce(&mut Vec<u8>)) -> Value {
        let mut out = Vec::new();
        write(&mut out);
        serde_json::from_slice(&out).unwrap()
    }

    fn filter(facet: &str, value: &str) -> String {
        let mut out = String::new();
        push_algolia_filter(
            &mut out,
            &Boost {
                facet,
                value,
                weight: 7,
            },
        );
        out
    }

    pub(crate) fn strategy(impact: u32) -> Strategy {
        Strategy::from_json(&json!({
            "eventsScoring": [{"eventName": "Clicked", "eventType": "click", "score": 10}],
            "facetsScoring": [{"facetName": "brand", "score": 100},
                              {"facetName": "color", "score": 50}],
            "personalizationImpact": impact}))
        .unwrap()
    }

    pub(crate) fn profile(scores: &[(&str, &str, u32)]) -> SortedScores {
        let mut map: BTreeMap<String, BTreeMap<String, u32>> = BTreeMap::new();
        for (f, v, s) in scores {
            map.entry(f.to_string())
                .or_default()
                .insert(v.to_string(), *s);
        }
        SortedScores::from(&Profile {
            user_token: "u1".into(),
            last_event_millis: 0,
            scores: map,
        })
    }

    #[test]
    fn weight_scales_score_by_impact_and_rounds_half_up() {
        assert_eq!(weight(20, 100), 100);
        assert_eq!(weight(20, 60), 60);
        assert_eq!(weight(4, 60), 12);
        assert_eq!(weight(1, 10), 1); // 0.5 -> 1
        assert_eq!(weight(1, 9), 0); // 0.45 -> 0
        assert_eq!(weight(3, 50), 8); // 7.5 -> 8
        assert_eq!(weight(20, 0), 0);
    }

    #[test]
    fn boosts_are_weighted_ordered_filtered_and_limited() {
        let p = profile(&[
            ("brand", "Apple", 20),
            ("brand", "Sony", 4),
            ("color", "red", 10),
            ("color", "blue", 4),
            ("color", "grey", 1),
        ]);
        let s = strategy(60);
        let all = boosts(Some(&p), &s, &BoostOptions::of(&s)).unwrap();
        let got: Vec<(&str, &str, u32)> =
            all.iter().map(|b| (b.facet, b.value, b.weight)).collect();
        // Ties (12) in facet then value order; grey (1 x 60 / 20 = 3) kept.
        assert_eq!(
            got,
            [
                ("brand", "Apple", 60),
                ("color", "red", 30),
                ("brand", "Sony", 12),
                ("color", "blue", 12),
                ("color", "grey", 3),
            ]
        );
        let options = BoostOptions {
            impact: 5,
            facets: Some(vec!["color".into()]),
            limit: 2,
        };
        let some = boosts(Some(&p), &s, &options).unwrap();
        // 10 x 5 / 20 = 2.5 -> 3; 4 -> 1; 1 x 5 / 20 = 0.25 -> dropped.
        assert_eq!(
            written(|out| write_list(out, &some)),
            json!([
            {"facet": "color", "value": "red", "weight": 3},
            {"facet": "color", "value": "blue", "weight": 1}])
        );
        let none = BoostOptions {
            impact: 0,
            ..BoostOptions::of(&s)
        };
        assert!(boosts(Some(&p), &s, &none).unwrap().is_empty());
        assert!(boosts(None, &s, &BoostOptions::of(&s)).unwrap().is_empty());
    }

    #[test]
    fn bad_options_name_their_field() {
        let s = strategy(60);
        let p = profile(&[("brand", "Apple", 20)]);
        let name = |o: BoostOptions| match boosts(Some(&p), &s, &o) {
            Err(Error::InvalidArgument { name, reason }) => (name, reason),
            other => panic!("{other:?}"),
        };
        let (n, reason) = name(BoostOptions {
            facets: Some(vec!["size".into()]),
            ..BoostOptions::of(&s)
        });
        assert_eq!(n, "facets");
        assert!(reason.contains("\"size\"") && reason.contains("brand, color"));
        for limit in [0, MAX_LIMIT + 1] {
            let o = BoostOptions {
                limit,
                ..BoostOptions::of(&s)
            };
            assert_eq!(name(o).0, "limit");
        }
        let o = BoostOptions {
            impact: 101,
            ..BoostOptions::of(&s)
        };
        assert_eq!(name(o).0, "personalizationImpact");
        // Checked even for a user without a profile.
        assert!(boosts(
            None,
            &s,
            &BoostOptions {
                limit: 0,
                ..BoostOptions::of(&s)
            }
        )
        .is_err());
    }

    #[test]
    fn algolia_filters_quote_what_the_syntax_would_read() {
        let f = filter;
        assert_eq!(f("brand", "Nike"), "brand:Nike<score=7>");
        assert_eq!(
            f("brand", "Hewlett Packard"),
            "brand:\"Hewlett Packard\"<score=7>"
        );
        assert_eq!(f("url", "http://x"), "url:\"http://x\"<score=7>");
        assert_eq!(f("size", "12\" \\ 3"), "size:\"12\\\" \\\\ 3\"<score=7>");
        assert_eq!(f("tag", "a<score=9>"), "tag:\"a<score=9>\"<score=7>");
        assert_eq!(f("tag", "OR"), "tag:\"OR\"<score=7>");
        assert_eq!(f("tag", "-movie"), "tag:\\-movie<score=7>");
        assert_eq!(f("my facet", "é"), "\"my facet\":é<score=7>");
    }

    #[test]
    fn the_ascii_mask_is_the_char_test() {
        for b in 0..128u8 {
            assert_eq!(SPECIAL_ASCII >> b & 1 == 1, special(char::from(b)), "{b}");
        }
    }

    #[test]
    fn elasticsearch_query_is_a_bool_of_boosted_terms() {
        let b = [Boost {
            facet: "brand",
            value: "Hewlett \"HP\" Packard",
            weight: 60,
        }];
        assert_eq!(
            written(|out| write_elasticsearch_query(out, &b)),
            json!({"bool": {"should": [
                {"term": {"brand": {"value": "Hewlett \"HP\" Packard", "boost": 60}}}]}})
        );
    }

    fn text() -> impl proptest::strategy::Strategy<Value = String> {
        prop_oneof![
            "[a-c]{0,3}",
            "[ -~]{0,6}",
            Just("OR".to_string()),
            Just("-x".to_string()),
            "[a\\u{0}\\u{a0}é\"\\\\]{0,4}",
        ]
    }

    proptest! {
        /// The boosts are the weighted values sorted stably by weight
        /// (the profile's order breaks ties), the first `limit` kept; every
        /// form writes what serde_json writes of the same JSON, byte for
        /// byte.
        #[test]
        fn boosts_are_the_stable_sort_and_forms_write_serde_json(
            scores in proptest::collection::vec(
                (prop_oneof![Just("brand"), Just("color"), Just("size")], text(), 1u32..=20),
                0..40,
            ),
            impact in 0u32..=100,
            limit in 1usize..=30,
        ) {
            let s = strategy(impact);
            let p = profile(
                &scores.iter().map(|(f, v, n)| (*f, v.as_str(), *n)).collect::<Vec<_>>(),
            );
            let options = BoostOptions { impact, facets: None, limit };
            let got = boosts(Some(&p), &s, &options).unwrap();
            let mut expected: Vec<(u32, &str, &str)> = p
                .iter()
                .flat_map(|(f, values)| values.iter().map(move |(v, n)| (weight(n, impact), f, v)))
                .filter(|b| b.0 > 0)
                .collect();
            expected.sort_by_key(|b| std::cmp::Reverse(b.0));
            expected.truncate(limit);
            let got_tuples: Vec<(u32, &str, &str)> =
                got.iter().map(|b| (b.weight, b.facet, b.value)).collect();
            prop_assert_eq!(&got_tuples, &expected);

            let reference = |v: Value| serde_json::to_vec(&v).unwrap();
            let mut out = Vec::new();
            write_list(&mut out, &got);
            prop_assert_eq!(&out, &reference(got
                .iter()
                .map(|b| json!({"facet": b.facet, "value": b.value, "weight": b.weight}))
                .collect()));
            out.clear();
            write_elasticsearch_query(&mut out, &got);
            let should: Vec<Value> = got
                .iter()
                .map(|b| json!({"term": {b.facet: {"value": b.value, "boost": b.weight}}}))
                .collect();
            prop_assert_eq!(&out, &reference(json!({"bool": {"should": should}})));
            out.clear();
            write_algolia_filters(&mut out, &got);
            let filters: Vec<String> = got.iter().map(|b| {
                let mut f = String::new();
                push_algolia_filter(&mut f, b);
                f
            }).collect();
            prop_assert_eq!(&out, &reference(json!(filters)));
        }

        /// A value is quoted exactly when the old char-by-char test said
        /// so, ASCII or not.
        #[test]
        fn quoting_matches_the_char_test(t in text()) {
            let by_chars = t.is_empty()
                || ["AND", "OR", "NOT", "TO"].iter().any(|k| t.eq_ignore_ascii_case(k))
                || t.chars().any(|c| c.is_whitespace() || "\"'\\:<>=!()[],".contains(c));
            prop_assert_eq!(needs_quotes(&t), by_chars);
        }
    }
}
