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
//! `limit` highest are kept. Every output form ([`algolia_filter`],
//! [`elasticsearch_query`], the plain list) carries the same weights.
//!
//! Nothing here reads the store: the caller reads the scores once (the
//! hot path, [`crate::Engine::scores_with`]) and hands them over.

pub mod rerank;

use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::scoring::{SortedScores, MAX_SCORE};
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

/// One boost: a facet value and its weight (1..=100).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Boost {
    pub facet: String,
    pub value: String,
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
pub fn boosts(
    profile: Option<&SortedScores>,
    strategy: &Strategy,
    options: &BoostOptions,
) -> Result<Vec<Boost>> {
    options.check(strategy)?;
    let Some(profile) = profile else {
        return Ok(Vec::new());
    };
    let wanted = |facet: &str| match &options.facets {
        Some(list) => list.iter().any(|f| f == facet),
        None => true,
    };
    // Weights first, with borrowed names; only the kept boosts are copied.
    let mut weighted: Vec<(u32, &str, &str)> = profile
        .iter()
        .filter(|(facet, _)| wanted(facet))
        .flat_map(|(facet, values)| {
            values.iter().filter_map(move |(value, score)| {
                let weight = weight(score, options.impact);
                (weight > 0).then_some((weight, facet, value))
            })
        })
        .collect();
    // Facets then values come in order, so a stable sort by weight leaves
    // ties in (facet, value) order.
    weighted.sort_by_key(|b| std::cmp::Reverse(b.0));
    weighted.truncate(options.limit);
    Ok(weighted
        .into_iter()
        .map(|(weight, facet, value)| Boost {
            facet: facet.to_string(),
            value: value.to_string(),
            weight,
        })
        .collect())
}

/// Whether `text` must be quoted in Algolia's filter syntax: empty, a
/// keyword, or holding a character the syntax gives a meaning to.
fn needs_quotes(text: &str) -> bool {
    text.is_empty()
        || ["AND", "OR", "NOT", "TO"]
            .iter()
            .any(|k| text.eq_ignore_ascii_case(k))
        || text.chars().any(|c| {
            c.is_whitespace()
                || matches!(
                    c,
                    '"' | '\'' | '\\' | ':' | '<' | '>' | '=' | '!' | '(' | ')' | '[' | ']' | ','
                )
        })
}

/// `text` as an operand of Algolia's filter syntax: as is when it is
/// plain, else in double quotes with `"` and `\` escaped by a backslash;
/// a leading `-` (which would negate the filter) is escaped as `\-`.
pub fn algolia_quote(text: &str) -> String {
    let quoted = if needs_quotes(text) {
        let mut out = String::with_capacity(text.len() + 4);
        out.push('"');
        for c in text.chars() {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
        out
    } else {
        text.to_string()
    };
    match quoted.strip_prefix('-') {
        Some(rest) => format!("\\-{rest}"),
        None => quoted,
    }
}

/// The boost as an Algolia scored optional filter:
/// `facet:value<score=weight>` (`brand:Nike<score=60>`).
pub fn algolia_filter(boost: &Boost) -> String {
    format!(
        "{}:{}<score={}>",
        algolia_quote(&boost.facet),
        algolia_quote(&boost.value),
        boost.weight
    )
}

/// The boosts as an OpenSearch / Elasticsearch query: a `bool` whose
/// `should` clauses are `term` queries with the weight as `boost`, to
/// put next to the query's `must` (a `term` matches the exact value, as
/// on a `keyword` field).
pub fn elasticsearch_query(boosts: &[Boost]) -> Value {
    let should: Vec<Value> = boosts
        .iter()
        .map(|b| json!({"term": {b.facet.as_str(): {"value": b.value, "boost": b.weight}}}))
        .collect();
    json!({"bool": {"should": should}})
}

/// The boosts as `[{"facet", "value", "weight"}]`.
pub fn list_json(boosts: &[Boost]) -> Value {
    boosts
        .iter()
        .map(|b| json!({"facet": b.facet, "value": b.value, "weight": b.weight}))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scoring::Profile;
    use std::collections::BTreeMap;

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
        let got: Vec<(&str, &str, u32)> = all
            .iter()
            .map(|b| (b.facet.as_str(), b.value.as_str(), b.weight))
            .collect();
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
            list_json(&some),
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
        let f = |facet: &str, value: &str| {
            algolia_filter(&Boost {
                facet: facet.into(),
                value: value.into(),
                weight: 7,
            })
        };
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
    fn elasticsearch_query_is_a_bool_of_boosted_terms() {
        let b = [Boost {
            facet: "brand".into(),
            value: "Hewlett \"HP\" Packard".into(),
            weight: 60,
        }];
        assert_eq!(
            elasticsearch_query(&b),
            json!({"bool": {"should": [
                {"term": {"brand": {"value": "Hewlett \"HP\" Packard", "boost": 60}}}]}})
        );
    }
}
