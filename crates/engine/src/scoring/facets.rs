//! [`FacetCounts`]: the `(facet, value, count)`s an event resolved to.

use std::collections::BTreeMap;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
