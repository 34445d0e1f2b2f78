//! Hits of any search engine re-ranked by a user's affinities.
//!
//! # Blend
//!
//! For `n` hits in the engine's order (hit `i` at 0-based position `i`),
//! impact `p` (0..=100):
//!
//! ```text
//! affinity(h) = sum of the profile's scores (1..=20) of the distinct
//!               (facet, value) pairs of h, over the facets the strategy scores
//! position(i) = 1 - i / n
//! score(h)    = (1 - p/100) x position(i) + p/100 x affinity(h) / A
//! ```
//!
//! where `A` is the highest affinity among the hits (the affinity term is
//! 0 when no hit has any). Hits are sorted by `score`, highest first;
//! ties keep the engine's order. The comparison is exact: it sorts by
//! `(100 - p) x (n - i) x A + p x affinity x n`, the score times
//! `100 x n x A`, in integers. At `p = 0` the order is the engine's; for
//! a user without a profile every affinity is 0, so the order is the
//! engine's too.
//!
//! # Facets of a hit
//!
//! A hit's attributes are read as a catalog object's (strings, numbers,
//! booleans, or arrays of them; objects such as `_highlightResult` are not
//! facet values). A hit that carries no attribute the strategy scores is
//! looked up by `objectID` in the catalog of the index, when one is given;
//! an id the catalog does not hold has affinity 0.

use std::borrow::Cow;

use serde_json::Value;
use smallvec::SmallVec;

use crate::catalog::{scalar, Catalog};
use crate::error::{Error, Result};
use crate::scoring::{cmp_bytes, eq_bytes, FacetIndex, FacetScores, SortedScores};
use crate::strategy::Strategy;

use super::check_impact;

/// The most hits one re-ranking takes.
pub const MAX_HITS: usize = 1000;

/// A hit as re-ranking reads it: its id and the values it carries of the
/// facets the strategy scores, borrowed from the hit where they can be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit<'a> {
    pub object_id: Cow<'a, str>,
    /// `(facet, value)` pairs of scored facets, in attribute order.
    pub facets: HitFacets<'a>,
}

/// A hit's `(facet, value)` pairs: a strategy scores a few facets and a
/// hit mostly carries one value of each, so up to 4 are held in place
/// (a re-ranking of hundreds of such hits allocates for none of them;
/// a hit with more pairs allocates once).
pub type HitFacets<'a> = SmallVec<[(&'a str, Cow<'a, str>); 4]>;

impl<'a> Hit<'a> {
    /// Read a hit (`{"objectID": "...", attributes...}`), keeping the
    /// values of the facets `strategy` scores.
    pub fn from_json(value: &'a Value, strategy: &'a Strategy) -> Result<Hit<'a>> {
        let obj = value.as_object().ok_or_else(|| Error::InvalidArgument {
            name: "hits",
            reason: "a hit must be a JSON object".into(),
        })?;
        let object_id = match obj.get("objectID") {
            Some(Value::String(s)) if !s.is_empty() => s.as_str(),
            _ => {
                return Err(Error::InvalidArgument {
                    name: "objectID",
                    reason: "objectID must be a non-empty string".into(),
                })
            }
        };
        let mut facets = HitFacets::new();
        for (name, v) in obj {
            if name == "objectID" {
                continue;
            }
            if let Some(facet) = scored_facet(strategy, name) {
                facets.extend(facet_values(v).map(|value| (facet, value)));
            }
        }
        Ok(Hit {
            object_id: Cow::Borrowed(object_id),
            facets,
        })
    }
}

/// The strategy's own name of `name` when it scores that facet: hits
/// borrow it, so they need not copy the name once per value.
pub fn scored_facet<'s>(strategy: &'s Strategy, name: &str) -> Option<&'s str> {
    strategy.facets.get_key_value(name).map(|(k, _)| k.as_str())
}

/// The facet values in `value` (a scalar, or an array of them; anything
/// else is no facet value), as a catalog object's; strings borrowed.
pub fn facet_values(value: &Value) -> impl Iterator<Item = Cow<'_, str>> {
    let items = match value {
        Value::Array(items) => items.as_slice(),
        other => std::slice::from_ref(other),
    };
    items.iter().filter_map(|v| match v {
        Value::String(s) => Some(Cow::Borrowed(s.as_str())),
        other => scalar(other).map(Cow::Owned),
    })
}

/// Where a hit's facet values came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FacetSource {
    /// Its own attributes.
    Hit,
    /// The catalog object of its id.
    Catalog,
    /// Neither: no scored attribute, and the catalog does not hold it.
    None,
}

impl FacetSource {
    pub fn as_str(self) -> &'static str {
        match self {
            FacetSource::Hit => "hit",
            FacetSource::Catalog => "catalog",
            FacetSource::None => "none",
        }
    }
}

/// One hit's place in the new order and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked {
    /// Its 0-based position in the input.
    pub input: usize,
    /// The sum of its facet values' profile scores.
    pub affinity: u64,
    /// The blended score, 0..=1.
    pub score: f64,
    pub source: FacetSource,
}

/// Whether re-ranking `hits` needs the catalog: some hit carries no value
/// of a scored facet.
pub fn needs_catalog(hits: &[Hit]) -> bool {
    hits.iter().any(|h| h.facets.is_empty())
}

/// A profile's facet as a re-ranking looks its values up.
enum Lookup<'p> {
    /// Hashed: many lookups for the facet's size.
    Hashed(FacetIndex<'p>),
    /// Binary searches: few lookups in a large facet (a few hits), where
    /// hashing every value would cost more than the searches.
    Sorted(FacetScores<'p>),
}

impl<'p> Lookup<'p> {
    /// How to look up `scores` for about `lookups` values: hashed when
    /// binary searches would pass more values than the facet holds.
    fn new(scores: FacetScores<'p>, lookups: usize) -> Lookup<'p> {
        let n = scores.len();
        let search = (usize::BITS - n.leading_zeros()) as usize;
        if lookups.saturating_mul(search) >= n {
            Lookup::Hashed(scores.index())
        } else {
            Lookup::Sorted(scores)
        }
    }

    #[inline]
    fn get(&self, value: &str) -> Option<u32> {
        match self {
            Lookup::Hashed(index) => index.get(value),
            Lookup::Sorted(scores) => scores.get(value),
        }
    }
}

/// The sum of `profile`'s scores of the distinct `(facet, value)` pairs in
/// `pairs` (deduplicated here); `facets` keeps the facets
/// looked up so far, `hits` how many hits the re-ranking has.
fn affinity<'x, 'p>(
    profile: &'p SortedScores,
    hits: usize,
    pairs: &mut Vec<(&'x str, &'x str)>,
    facets: &mut Vec<(&'x str, Option<Lookup<'p>>)>,
) -> u64 {
    let same_facet = |a: &str, b: &str| std::ptr::eq(a, b) || eq_bytes(a.as_bytes(), b.as_bytes());
    // Most hits carry one value for each of a few facets: no pair can
    // repeat then (checked pair by pair only for a few).
    let repeats = pairs.len() > 8
        || pairs
            .iter()
            .enumerate()
            .any(|(i, a)| pairs[..i].iter().any(|b| same_facet(a.0, b.0)));
    if repeats {
        // Bytewise as `str` order, without a `memcmp` call per short value.
        pairs.sort_unstable_by(|a, b| {
            cmp_bytes(a.0.as_bytes(), b.0.as_bytes())
                .then_with(|| cmp_bytes(a.1.as_bytes(), b.1.as_bytes()))
        });
        pairs.dedup_by(|a, b| same_facet(a.0, b.0) && eq_bytes(a.1.as_bytes(), b.1.as_bytes()));
    }
    let mut sum = 0;
    for &(f, v) in pairs.iter() {
        let known = facets.iter().find(|(name, _)| same_facet(name, f));
        let scores = match known {
            Some((_, scores)) => scores,
            None => {
                facets.push((f, profile.facet(f).map(|s| Lookup::new(s, hits))));
                &facets[facets.len() - 1].1
            }
        };
        sum += scores.as_ref().and_then(|s| s.get(v)).map_or(0, u64::from);
    }
    sum
}

/// The hits' affinities under `profile`, and where their facets came from.
fn affinities(
    profile: Option<&SortedScores>,
    strategy: &Strategy,
    hits: &[Hit],
    catalog: Option<&Catalog>,
) -> Vec<(u64, FacetSource)> {
    // One buffer for every hit's pairs.
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    // Each facet looked up (and hashed) once per re-ranking: hits read
    // from a body borrow the strategy's own names, so most finds compare
    // pointers.
    let mut facets = Vec::new();
    let mut score = |pairs: &mut Vec<_>| match profile {
        Some(profile) => affinity(profile, hits.len(), pairs, &mut facets),
        None => 0,
    };
    hits.iter()
        .map(|hit| {
            pairs.clear();
            if !hit.facets.is_empty() {
                pairs.extend(hit.facets.iter().map(|(f, v)| (*f, v.as_ref())));
                return (score(&mut pairs), FacetSource::Hit);
            }
            match catalog.and_then(|c| c.get(&hit.object_id)) {
                Some(object) => {
                    pairs.extend(
                        object
                            .facets
                            .iter()
                            .filter(|(f, _)| strategy.facets.contains_key(f))
                            .map(|(f, v)| (f.as_str(), v.as_str())),
                    );
                    (score(&mut pairs), FacetSource::Catalog)
                }
                None => (0, FacetSource::None),
            }
        })
        .collect()
}

/// `hits` re-ordered by the blend of their order and `profile`'s
/// affinities at `impact` (see the module's formula); `catalog` resolves
/// hits without scored attributes.
pub fn rerank(
    profile: Option<&SortedScores>,
    strategy: &Strategy,
    impact: u32,
    hits: &[Hit],
    catalog: Option<&Catalog>,
) -> Result<Vec<Ranked>> {
    check_impact(impact)?;
    if hits.len() > MAX_HITS {
        return Err(Error::InvalidArgument {
            name: "hits",
            reason: format!("{} hits, the most is {MAX_HITS}", hits.len()),
        });
    }
    let found = affinities(profile, strategy, hits, catalog);
    let n = hits.len() as u128;
    let top = found.iter().map(|(a, _)| *a).max().unwrap_or(0).max(1);
    let p = u128::from(impact);
    // Each hit's key (at most 2 x 100 x MAX_HITS x top < 2^82) above its
    // place counted from the end: one integer per hit, sorted highest
    // first, with equal keys in the engine's order.
    const PLACE_BITS: u32 = 10;
    const _: () = assert!(MAX_HITS < 1 << PLACE_BITS);
    let last = (1 << PLACE_BITS) - 1;
    let mut order: Vec<u128> = found
        .iter()
        .enumerate()
        .map(|(i, (affinity, _))| {
            let key = (100 - p) * (n - i as u128) * u128::from(top) + p * u128::from(*affinity) * n;
            key << PLACE_BITS | (last - i as u128)
        })
        .collect();
    order.sort_unstable_by(|a, b| b.cmp(a));
    Ok(order
        .into_iter()
        .map(|k| {
            let input = (last - (k & last)) as usize;
            let (affinity, source) = found[input];
            let score = (k >> PLACE_BITS) as f64 / (100.0 * n as f64 * top as f64);
            Ranked {
                input,
                affinity,
                score: (score * 1e6).round() / 1e6,
                source,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::{profile, strategy};
    use super::*;
    use crate::catalog::CatalogObject;

    fn hits<'a>(list: &'a [Value], s: &'a Strategy) -> Vec<Hit<'a>> {
        list.iter().map(|v| Hit::from_json(v, s).unwrap()).collect()
    }

    fn order(ranked: &[Ranked]) -> Vec<usize> {
        ranked.iter().map(|r| r.input).collect()
    }

    #[test]
    fn reads_scored_attributes_only() {
        let s = strategy(50);
        let hit = json!({"objectID": "p1", "brand": "Apple", "color": ["red", 3, {"x": 1}],
                         "name": "Phone", "_highlightResult": {"brand": {"value": "x"}}});
        let h = Hit::from_json(&hit, &s).unwrap();
        assert_eq!(h.object_id, "p1");
        let mut facets = h.facets.clone();
        facets.sort();
        let pair = |f: &'static str, v: &'static str| (f, Cow::Borrowed(v));
        assert_eq!(
            facets[..],
            [
                pair("brand", "Apple"),
                pair("color", "3"),
                pair("color", "red")
            ]
        );
        for bad in [
            json!({"brand": "Apple"}),
            json!({"objectID": ""}),
            json!({"objectID": 7}),
        ] {
            match Hit::from_json(&bad, &s) {
                Err(Error::InvalidArgument { name, .. }) => assert_eq!(name, "objectID"),
                other => panic!("{bad}: {other:?}"),
            }
        }
        assert!(Hit::from_json(&json!("p1"), &s).is_err());
    }

    #[test]
    fn blends_position_and_affinity() {
        let p = profile(&[
            ("brand", "Apple", 20),
            ("brand", "Sony", 10),
            ("color", "red", 5),
        ]);
        let s = strategy(50);
        let list = [
            json!({"objectID": "a", "brand": "Nokia"}),
            json!({"objectID": "b", "brand": "Sony"}),
            json!({"objectID": "c", "brand": "Apple", "color": ["red", "red"]}),
            json!({"objectID": "d", "brand": "Nokia"}),
        ];
        let h = hits(&list, &s);
        // n = 4, A = 25 (c: 20 + 5, red counted once).
        // impact 50: a 0.5, b 0.375 + 0.2 = 0.575, c 0.25 + 0.5 = 0.75, d 0.125.
        let r = rerank(Some(&p), &s, 50, &h, None).unwrap();
        assert_eq!(order(&r), [2, 1, 0, 3]);
        assert_eq!(r[0].affinity, 25);
        assert_eq!(r[0].score, 0.75);
        assert_eq!(r[1].score, 0.575);
        assert_eq!(r[2].score, 0.5);
        assert_eq!(r[0].source, FacetSource::Hit);
        // impact 100: by affinity alone, ties (a, d: 0) in input order.
        assert_eq!(
            order(&rerank(Some(&p), &s, 100, &h, None).unwrap()),
            [2, 1, 0, 3]
        );
        // impact 20: a 0.8, b 0.6 + 0.08, c 0.4 + 0.2 = 0.6, d 0.2.
        assert_eq!(
            order(&rerank(Some(&p), &s, 20, &h, None).unwrap()),
            [0, 1, 2, 3]
        );
        // impact 0 and no profile: the input order.
        for (prof, impact) in [(Some(&p), 0), (None, 100)] {
            let r = rerank(prof, &s, impact, &h, None).unwrap();
            assert_eq!(order(&r), [0, 1, 2, 3]);
        }
    }

    #[test]
    fn a_value_sent_twice_counts_once() {
        let p = profile(&[
            ("brand", "Apple", 20),
            ("color", "red", 5),
            ("color", "blue", 3),
        ]);
        let s = strategy(100);
        let few = json!({"objectID": "a", "brand": "Apple", "color": ["red", "red"]});
        let mut colors: Vec<Value> = ["red", "blue", "green"]
            .iter()
            .cycle()
            .take(11)
            .map(|c| json!(c))
            .collect();
        colors.push(json!("red"));
        let many = json!({"objectID": "b", "brand": "Apple", "color": colors});
        let list = [few, many];
        let h = hits(&list, &s);
        assert_eq!(h[1].facets.len(), 13);
        let r = rerank(Some(&p), &s, 100, &h, None).unwrap();
        let affinity = |input| r.iter().find(|x| x.input == input).unwrap().affinity;
        assert_eq!(affinity(0), 25);
        assert_eq!(affinity(1), 28);
    }

    #[test]
    fn affinities_are_the_same_hashed_or_searched() {
        // 120 brands scored 1..=20; a few hits search, many hash.
        let names: Vec<String> = (0..120).map(|i| format!("brand-{i:03}")).collect();
        let scored: Vec<(&str, &str, u32)> = names
            .iter()
            .enumerate()
            .map(|(i, b)| ("brand", b.as_str(), i as u32 % 20 + 1))
            .collect();
        let p = profile(&scored);
        let s = strategy(100);
        let brands = p.facet("brand").unwrap();
        assert!(matches!(Lookup::new(brands, 2), Lookup::Sorted(_)));
        assert!(matches!(Lookup::new(brands, 100), Lookup::Hashed(_)));
        for n in [1, 2, 3, 300] {
            let list: Vec<Value> = (0..n)
                .map(|i| json!({"objectID": format!("o{i}"), "brand": format!("brand-{:03}", (i * 7) % 130)}))
                .collect();
            let h = hits(&list, &s);
            let r = rerank(Some(&p), &s, 100, &h, None).unwrap();
            for ranked in &r {
                let i = ranked.input;
                let expected = if (i * 7) % 130 < 120 {
                    (i * 7) % 130 % 20 + 1
                } else {
                    0
                };
                assert_eq!(ranked.affinity, expected as u64, "{n} hits, hit {i}");
            }
        }
    }

    #[test]
    fn ties_keep_the_engines_order() {
        let p = profile(&[
            ("brand", "Apple", 20),
            ("brand", "Sony", 10),
            ("color", "red", 10),
        ]);
        let s = strategy(50);
        let list = [
            json!({"objectID": "a", "brand": "Nokia"}),
            json!({"objectID": "b", "brand": "Sony"}),
            json!({"objectID": "c", "brand": "Apple", "color": "red"}),
        ];
        let h = hits(&list, &s);
        // n = 3, A = 30, impact 50: a 1/2, b 1/3 + 1/6 = 1/2 exactly,
        // c 1/6 + 1/2 = 2/3. a and b tie: a stays before b.
        let r = rerank(Some(&p), &s, 50, &h, None).unwrap();
        assert_eq!(order(&r), [2, 0, 1]);
        assert_eq!((r[1].score, r[2].score), (0.5, 0.5));
        assert_eq!(r[0].score, 0.666667);
    }

    #[test]
    fn hits_without_scored_attributes_are_read_from_the_catalog() {
        let mut catalog = Catalog::new();
        catalog.insert(
            CatalogObject::from_json(&json!({"objectID": "c", "brand": "Apple", "size": "L"}))
                .unwrap(),
        );
        let p = profile(&[("brand", "Apple", 20)]);
        let s = strategy(100);
        let list = [
            json!({"objectID": "a", "name": "only a name"}),
            json!({"objectID": "b", "brand": "Nokia"}),
            json!({"objectID": "c"}),
        ];
        let h = hits(&list, &s);
        assert!(needs_catalog(&h));
        let r = rerank(Some(&p), &s, 100, &h, Some(&catalog)).unwrap();
        assert_eq!(order(&r), [2, 0, 1]);
        let sources: Vec<&str> = r.iter().map(|r| r.source.as_str()).collect();
        assert_eq!(sources, ["catalog", "none", "hit"]);
        assert_eq!(r[0].affinity, 20);
        // Without the catalog, c has nothing to match.
        let r = rerank(Some(&p), &s, 100, &h, None).unwrap();
        assert_eq!(order(&r), [0, 1, 2]);
    }

    #[test]
    fn refuses_too_many_hits_and_impacts_over_100() {
        let s = strategy(50);
        let h: Vec<Hit> = (0..=MAX_HITS)
            .map(|i| Hit {
                object_id: Cow::Owned(format!("o{i}")),
                facets: HitFacets::new(),
            })
            .collect();
        let name = |r: Result<Vec<Ranked>>| match r {
            Err(Error::InvalidArgument { name, .. }) => name,
            other => panic!("{other:?}"),
        };
        assert_eq!(name(rerank(None, &s, 50, &h, None)), "hits");
        assert_eq!(
            name(rerank(None, &s, 101, &h[..3], None)),
            "personalizationImpact"
        );
        assert_eq!(
            rerank(None, &s, 50, &h[..MAX_HITS], None).unwrap().len(),
            MAX_HITS
        );
        assert!(rerank(None, &s, 50, &[], None).unwrap().is_empty());
    }
}
