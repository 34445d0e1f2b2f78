//! Personalized search with a real full-text engine, on any application's
//! catalog and profiles: search with tantivy first, then re-rank the first
//! page of hits for each user with Affinity (the blend `POST
//! /1/indexes/{indexName}/rerank` applies).
//!
//! On the data `affinity demo` leaves:
//!
//! ```sh
//! affinity demo
//! cargo run --release -p affinity-cli --example search_with_tantivy -- \
//!     --data affinity-demo-data --app demo-shop --index products \
//!     "black wireless" user-00000 user-00001
//! ```
//!
//! In a service of your own the re-ranking is one HTTP call per query:
//! send the search engine's hits (objectID plus facet attributes) and the
//! userToken to `/1/indexes/{indexName}/rerank`, or ask for the user's
//! boosts up front (`/1/profiles/personalization/{userToken}/optionalFilters`)
//! and give them to the engine's query.

#[path = "../crates/cli/src/search.rs"]
#[allow(dead_code)]
mod search;

use std::sync::Arc;

use anyhow::{bail, Context};

const USAGE: &str =
    "usage: search_with_tantivy --data DIR --app APP --index INDEX QUERY USER_A USER_B";

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (mut data, mut app, mut index, mut rest) = (None, None, None, Vec::new());
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--data" => data = args.next(),
            "--app" => app = args.next(),
            "--index" => index = args.next(),
            _ => rest.push(arg),
        }
    }
    let (Some(data), Some(app), Some(index), [query, a, b]) = (data, app, index, rest.as_slice())
    else {
        bail!("{USAGE}");
    };
    let store = affinity_embedded::EmbeddedStore::open(&data)
        .with_context(|| format!("opening the store in {data}"))?;
    let engine = affinity_engine::Engine::open(Arc::new(store))?;
    let strategy = engine
        .strategy(&app)?
        .with_context(|| format!("application {app:?} has no strategy"))?;
    let catalog: Vec<serde_json::Value> = engine
        .catalog(&app, &index)?
        .objects()
        .into_iter()
        .map(|o| o.to_json())
        .collect();
    if catalog.is_empty() {
        bail!("index {index:?} of {app:?} has no catalog objects to search");
    }
    let engine_index = search::SearchIndex::build(&catalog)?;
    let hits = engine_index.search(query, 20)?;
    println!(
        "{} hits for {query:?}; the first 10 re-ranked for each user (impact {}):",
        hits.len(),
        strategy.personalization_impact
    );
    let a_list = search::personalize(&engine, &app, a, &strategy, &hits, search::label)?;
    let b_list = search::personalize(&engine, &app, b, &strategy, &hits, search::label)?;
    print!(
        "{}",
        search::side_by_side([a, b], [&a_list, &b_list], 10, 0)
    );
    Ok(())
}
