//! Personalized search with a real full-text engine: the catalog indexed by
//! [tantivy](https://docs.rs/tantivy) (BM25), its hits re-ranked for a user
//! by Affinity's blend of the engine's order and the user's affinities
//! (the same function as `POST /1/indexes/{indexName}/rerank`).
//!
//! `affinity demo` ends with it, and `examples/search_with_tantivy.rs`
//! runs it on any application's catalog: the pattern to copy is *search
//! first, then re-rank the first page of hits by the profile*.

use affinity_engine::boost::rerank::{self, Hit};
use affinity_engine::{Engine, Strategy};
use anyhow::Context;
use serde_json::{json, Value};
use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::schema::{Schema, Value as _, STORED, STRING, TEXT};
use tantivy::{doc, Index, TantivyDocument};

/// A full-text index of catalog objects: `objectID` and the text of every
/// string attribute.
pub struct SearchIndex {
    index: Index,
    id: tantivy::schema::Field,
    text: tantivy::schema::Field,
    /// The objects as indexed, by objectID: their facets go with each hit.
    objects: std::collections::HashMap<String, Value>,
}

/// One line of a result list: where the hit was, what it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    pub object_id: String,
    pub before: usize,
    pub label: String,
}

/// Every string (or list of strings) attribute of an object, as text.
fn text_of(object: &Value) -> String {
    let mut out = Vec::new();
    if let Some(fields) = object.as_object() {
        for (k, v) in fields {
            if k == "objectID" || k.starts_with('_') {
                continue;
            }
            match v {
                Value::String(s) => out.push(s.clone()),
                Value::Array(items) => {
                    out.extend(items.iter().filter_map(|i| i.as_str()).map(String::from))
                }
                _ => {}
            }
        }
    }
    out.join(" ")
}

impl SearchIndex {
    /// Index `objects` in memory.
    pub fn build(objects: &[Value]) -> anyhow::Result<SearchIndex> {
        let mut schema = Schema::builder();
        let id = schema.add_text_field("objectID", STRING | STORED);
        let text = schema.add_text_field("text", TEXT);
        let index = Index::create_in_ram(schema.build());
        let mut writer = index.writer_with_num_threads(1, 15_000_000)?;
        let mut by_id = std::collections::HashMap::with_capacity(objects.len());
        for object in objects {
            let object_id = object["objectID"]
                .as_str()
                .context("a catalog object without objectID")?;
            writer.add_document(doc!(id => object_id, text => text_of(object)))?;
            by_id.insert(object_id.to_string(), object.clone());
        }
        writer.commit()?;
        Ok(SearchIndex {
            index,
            id,
            text,
            objects: by_id,
        })
    }

    /// The first `limit` hits for `query`, best first (BM25), as hits with
    /// their catalog attributes (what a search engine's answer carries).
    pub fn search(&self, query: &str, limit: usize) -> anyhow::Result<Vec<Value>> {
        let searcher = self.index.reader()?.searcher();
        let parsed = QueryParser::for_index(&self.index, vec![self.text])
            .parse_query(query)
            .with_context(|| format!("the query {query:?}"))?;
        let top = searcher.search(&parsed, &TopDocs::with_limit(limit).order_by_score())?;
        let mut hits = Vec::with_capacity(top.len());
        for (_, address) in top {
            let doc: TantivyDocument = searcher.doc(address)?;
            let object_id = doc
                .get_first(self.id)
                .and_then(|v| v.as_str())
                .context("an indexed document without objectID")?;
            hits.push(self.objects[object_id].clone());
        }
        Ok(hits)
    }
}

/// `hits` re-ranked for `user` under `strategy` at its impact: the
/// engine's order blended with the user's affinities (no profile: the
/// engine's order).
pub fn personalize(
    engine: &Engine,
    app: &str,
    user: &str,
    strategy: &Strategy,
    hits: &[Value],
    label: impl Fn(&Value) -> String,
) -> anyhow::Result<Vec<Shown>> {
    let read: Vec<Hit> = hits
        .iter()
        .map(|h| Hit::from_json(h, strategy))
        .collect::<Result<_, _>>()?;
    let scores = engine.scores_with(app, user, strategy)?;
    let ranked = rerank::rerank(
        scores.as_ref().map(|(_, s)| s),
        strategy,
        strategy.personalization_impact,
        &read,
        None,
    )?;
    Ok(ranked
        .iter()
        .map(|r| Shown {
            object_id: read[r.input].object_id.to_string(),
            before: r.input + 1,
            label: label(&hits[r.input]),
        })
        .collect())
}

/// Two users' result lists side by side, `rows` lines.
pub fn side_by_side(users: [&str; 2], lists: [&[Shown]; 2], rows: usize, indent: usize) -> String {
    let pad = " ".repeat(indent);
    let width = 44;
    let first = format!("for {}", users[0]);
    let mut out = format!("{pad}{first:<width$}  for {}\n", users[1]);
    for i in 0..rows {
        let cell = |list: &[Shown]| {
            list.get(i).map_or(String::new(), |s| {
                format!(
                    "{:>2}. {} {} (was {})",
                    i + 1,
                    s.object_id,
                    s.label,
                    s.before
                )
            })
        };
        out.push_str(&format!(
            "{pad}{:<width$}  {}\n",
            cell(lists[0]),
            cell(lists[1])
        ));
    }
    out
}

/// A demo hit's label: brand, color and the first category.
pub fn label(hit: &Value) -> String {
    let s = |k: &str| hit[k].as_str().unwrap_or("").to_string();
    let category = hit["category"]
        .as_array()
        .and_then(|c| c.first())
        .and_then(|c| c.as_str())
        .unwrap_or("");
    json!([s("brand"), s("color"), category])
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str())
                .filter(|v| !v.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_finds_by_text_best_first() {
        let objects = vec![
            json!({"objectID": "a", "name": "black phone", "brand": "Apple"}),
            json!({"objectID": "b", "name": "white phone", "brand": "Sony"}),
            json!({"objectID": "c", "name": "black black speaker", "brand": "Bose", "_geoloc": {"lat": 1, "lng": 2}}),
        ];
        let index = SearchIndex::build(&objects).unwrap();
        let ids = |hits: Vec<Value>| -> Vec<String> {
            hits.iter()
                .map(|h| h["objectID"].as_str().unwrap().to_string())
                .collect()
        };
        let mut phones = ids(index.search("phone", 10).unwrap());
        phones.sort();
        assert_eq!(phones, ["a", "b"]);
        let black = ids(index.search("black", 10).unwrap());
        assert_eq!(black, ["c", "a"]);
        assert_eq!(ids(index.search("sony", 10).unwrap()), ["b"]);
        assert!(index.search("nothing-here", 10).unwrap().is_empty());
    }
}
