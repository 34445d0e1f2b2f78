//! Personalization at query time (see [`affinity_engine::boost`] for the
//! formulas):
//!
//! - `GET /1/profiles/personalization/{userToken}/optionalFilters`: the
//!   profile as weighted boosts, as Algolia's scored optional filters
//!   (`format=algolia`, the default), an OpenSearch / Elasticsearch
//!   `bool.should` (`format=elasticsearch`) or a plain list
//!   (`format=list`), with `personalizationImpact`, `facets` and `limit`
//!   query parameters;
//! - `POST /1/indexes/{indexName}/rerank`: a search engine's hits
//!   re-ordered by the blend of their order and the user's affinities,
//!   each hit saying why in `_rankingInfo.personalization`.
//!
//! A user without a profile is no error here (the caller is answering a
//! search): 200 with no boosts, or the hits in their order, and
//! `"userFound": false` (the profile read answers 404 for the same user).
//! An application without a strategy is a 404, as for the strategy read.
//! Bad query parameters are 400s and body rules 422s, naming the field.
//! Each request reads the profile once (inline, as the profile read
//! does); a re-ranking whose hits lack scored attributes also reads the
//! index's catalog (once, then cached by the engine).

use std::sync::Arc;

use affinity_engine::boost::rerank::{self, Hit, MAX_HITS};
use affinity_engine::boost::{self, BoostOptions, MAX_IMPACT};
use affinity_engine::{Error as EngineError, Strategy};
use axum::extract::{Path, Query, State as Shared};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use crate::auth::{Acl, Caller};
use crate::body::Body;
use crate::catalog::check_index;
use crate::error::{blocking, Error, Result};
use crate::insights::check_user_token;
use crate::state::{Serving, State};
use crate::variants;

/// The shapes `optionalFilters` answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `["brand:Nike<score=60>"]`.
    Algolia,
    /// `{"bool": {"should": [{"term": {...}}]}}`.
    Elasticsearch,
    /// `[{"facet", "value", "weight"}]`.
    List,
}

impl Format {
    fn as_str(self) -> &'static str {
        match self {
            Format::Algolia => "algolia",
            Format::Elasticsearch => "elasticsearch",
            Format::List => "list",
        }
    }
}

/// What the `optionalFilters` query parameters ask for (the strategy's
/// defaults are filled in when it is read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoostQuery {
    pub impact: Option<u32>,
    pub facets: Option<Vec<String>>,
    pub limit: Option<usize>,
    pub format: Format,
}

fn bad(name: &'static str, reason: impl Into<String>) -> EngineError {
    EngineError::InvalidArgument {
        name,
        reason: reason.into(),
    }
}

/// `personalizationImpact` as text: digits only, 0..=100.
fn parse_impact(text: &str) -> Result<u32, EngineError> {
    text.trim()
        .parse::<u32>()
        .ok()
        .filter(|p| *p <= MAX_IMPACT)
        .ok_or_else(|| {
            bad(
                "personalizationImpact",
                format!("{text:?} is not an integer within 0 and {MAX_IMPACT}"),
            )
        })
}

/// The query of the request's parameters (others, such as credentials
/// given as parameters, are ignored; a repeated one counts once, its
/// first value).
pub fn parse_boost_query(params: &[(String, String)]) -> Result<BoostQuery, EngineError> {
    let get = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let impact = get("personalizationImpact").map(parse_impact).transpose()?;
    let facets = match get("facets") {
        Some(f) => {
            let list: Vec<String> = f.split(',').map(|s| s.trim().to_string()).collect();
            if list.iter().any(String::is_empty) {
                return Err(bad(
                    "facets",
                    format!("{f:?} is not a comma-separated list of facet names"),
                ));
            }
            Some(list)
        }
        None => None,
    };
    let limit = match get("limit") {
        Some(l) => Some(
            l.trim()
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=boost::MAX_LIMIT).contains(n))
                .ok_or_else(|| {
                    bad(
                        "limit",
                        format!("{l:?} is not an integer within 1 and {}", boost::MAX_LIMIT),
                    )
                })?,
        ),
        None => None,
    };
    let format = match get("format") {
        None | Some("algolia") => Format::Algolia,
        Some("elasticsearch") => Format::Elasticsearch,
        Some("list") => Format::List,
        Some(other) => {
            return Err(bad(
                "format",
                format!("{other:?} is not one of algolia, elasticsearch, list"),
            ))
        }
    };
    Ok(BoostQuery {
        impact,
        facets,
        limit,
        format,
    })
}

/// The strategy serving `user` (see [`State::serving`]), or the 404 the
/// strategy read answers.
fn serving_of(state: &State, app: &str, user: &str, forced: Option<&str>) -> Result<Serving> {
    state
        .serving(app, user, forced)?
        .ok_or_else(|| Error::not_found("No personalization strategy is set for this application"))
}

/// Run `read` inline when the store is local (as profile reads are), else
/// on the blocking pool.
async fn read<T, F>(inline: bool, work: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    if inline {
        work()
    } else {
        blocking(work).await
    }
}

fn json_response(value: &Value) -> Response {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    ([(CONTENT_TYPE, "application/json")], bytes).into_response()
}

/// `GET /1/profiles/personalization/{userToken}/optionalFilters`.
pub async fn get_optional_filters(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    Path(user): Path<String>,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Response> {
    caller.require_any(&[Acl::Profiles, Acl::Search])?;
    check_user_token(&user)?;
    caller.require_user(&user)?;
    let query = parse_boost_query(&params)?;
    let forced = variants::forced(&params)?;
    let inline = state.inline_reads;
    let (answer, variant) = read(inline, move || {
        let serving = serving_of(&state, &caller.app, &user, forced.as_deref())?;
        let strategy = serving.strategy;
        let defaults = BoostOptions::of(&strategy);
        let options = BoostOptions {
            impact: query.impact.unwrap_or(defaults.impact),
            facets: query.facets,
            limit: query.limit.unwrap_or(defaults.limit),
        };
        options.check(&strategy)?;
        let profile = state.engine.profile_with(&caller.app, &user, &strategy)?;
        let boosts = boost::boosts(profile.as_ref(), &strategy, &options)?;
        let (key, value) = match query.format {
            Format::Algolia => (
                "optionalFilters",
                boosts.iter().map(boost::algolia_filter).collect(),
            ),
            Format::Elasticsearch => ("query", boost::elasticsearch_query(&boosts)),
            Format::List => ("filters", boost::list_json(&boosts)),
        };
        let mut out = json!({
            "userToken": user,
            "userFound": profile.is_some(),
            "personalizationImpact": options.impact,
            "format": query.format.as_str(),
        });
        out[key] = value;
        if let Some(v) = &serving.variant {
            out["variant"] = json!(v);
        }
        Ok((out, serving.variant))
    })
    .await?;
    Ok(variants::tagged(json_response(&answer), variant.as_deref()))
}

/// The fields of a re-ranking body.
const RERANK_FIELDS: [&str; 4] = ["userToken", "hits", "personalizationImpact", "variant"];

/// A re-ranking body, checked: the user, the hits as sent, the impact,
/// the variant forced.
struct RerankBody {
    user: String,
    hits: Vec<Value>,
    impact: Option<u32>,
    variant: Option<String>,
}

fn parse_rerank_body(value: Value) -> Result<RerankBody> {
    let Value::Object(mut obj) = value else {
        return Err(Error::unprocessable(
            "body",
            "The body must be a JSON object with userToken and hits",
        ));
    };
    if let Some(extra) = obj.keys().find(|k| !RERANK_FIELDS.contains(&k.as_str())) {
        return Err(Error::unprocessable(
            "body",
            format!(
                "Unknown field {extra}: the body takes userToken, hits, personalizationImpact and variant"
            ),
        ));
    }
    let user = match obj.remove("userToken") {
        Some(Value::String(user)) => user,
        _ => {
            return Err(Error::unprocessable(
                "userToken",
                "UserToken is required: a string",
            ))
        }
    };
    check_user_token(&user)?;
    let hits = match obj.remove("hits") {
        Some(Value::Array(hits)) => hits,
        _ => return Err(Error::unprocessable("hits", "Hits must be an array")),
    };
    if hits.len() > MAX_HITS {
        return Err(Error::unprocessable(
            "hits",
            format!(
                "Cannot re-rank more than {MAX_HITS} hits: {} were sent",
                hits.len()
            ),
        ));
    }
    let impact = match obj.remove("personalizationImpact") {
        None => None,
        Some(v) => {
            let p = v
                .as_u64()
                .or_else(|| {
                    v.as_f64()
                        .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                        .map(|f| f as u64)
                })
                .filter(|p| *p <= u64::from(MAX_IMPACT));
            match p {
                Some(p) => Some(p as u32),
                None => {
                    return Err(Error::unprocessable(
                        "personalizationImpact",
                        format!("PersonalizationImpact must be an integer within 0 and {MAX_IMPACT}, not {v}"),
                    ))
                }
            }
        }
    };
    let variant = match obj.remove("variant") {
        None => None,
        Some(Value::String(v)) => {
            variants::check(&v)?;
            Some(v)
        }
        Some(_) => {
            return Err(Error::unprocessable(
                "variant",
                "variant must be a string naming a variant",
            ))
        }
    };
    Ok(RerankBody {
        user,
        hits,
        impact,
        variant,
    })
}

/// The engine's reading of each hit; a hit that is not an object or has
/// no objectID is a 422 naming it.
fn read_hits(hits: &[Value], strategy: &Strategy) -> Result<Vec<Hit>> {
    hits.iter()
        .enumerate()
        .map(|(i, v)| {
            Hit::from_json(v, strategy).map_err(|e| match e {
                EngineError::InvalidArgument {
                    name: "objectID", ..
                } => Error::unprocessable(
                    "objectID",
                    format!("Hits[{i}].objectID must be a non-empty string"),
                ),
                _ => Error::unprocessable("hits", format!("Hits[{i}] must be a JSON object")),
            })
        })
        .collect()
}

/// `POST /1/indexes/{indexName}/rerank`.
pub async fn post_rerank(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    Path(index): Path<String>,
    body: Body,
) -> Result<Response> {
    caller.require_any(&[Acl::Profiles, Acl::Search])?;
    check_index(&index)?;
    caller.require_index(&index)?;
    let inline = state.inline_reads;
    let (answer, variant) = read(inline, move || {
        let RerankBody {
            user,
            hits,
            impact,
            variant,
        } = parse_rerank_body(body.json()?)?;
        caller.require_user(&user)?;
        let serving = serving_of(&state, &caller.app, &user, variant.as_deref())?;
        let strategy = serving.strategy;
        let impact = impact.unwrap_or(strategy.personalization_impact);
        let read = read_hits(&hits, &strategy)?;
        let catalog = if rerank::needs_catalog(&read) {
            Some(state.engine.catalog(&caller.app, &index)?)
        } else {
            None
        };
        let profile = state.engine.profile_with(&caller.app, &user, &strategy)?;
        let ranked = rerank::rerank(
            profile.as_ref(),
            &strategy,
            impact,
            &read,
            catalog.as_deref(),
        )?;
        let mut slots: Vec<Option<Value>> = hits.into_iter().map(Some).collect();
        let out: Vec<Value> = ranked
            .iter()
            .filter_map(|r| {
                let mut hit = slots[r.input].take()?;
                let why = json!({
                    "affinity": r.affinity,
                    "previousPosition": r.input + 1,
                    "score": r.score,
                    "facetsFrom": r.source.as_str(),
                });
                if let Value::Object(fields) = &mut hit {
                    let info = fields
                        .entry("_rankingInfo")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if !info.is_object() {
                        *info = Value::Object(Map::new());
                    }
                    info["personalization"] = why;
                }
                Some(hit)
            })
            .collect();
        let mut answer = json!({
            "userToken": user,
            "userFound": profile.is_some(),
            "personalizationImpact": impact,
            "hits": out,
        });
        if let Some(v) = &serving.variant {
            answer["variant"] = json!(v);
        }
        Ok((answer, serving.variant))
    })
    .await?;
    Ok(variants::tagged(json_response(&answer), variant.as_deref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_boost_parameters() {
        let q = parse_boost_query(&params(&[
            ("personalizationImpact", "40"),
            ("facets", "brand, color"),
            ("limit", "5"),
            ("format", "list"),
            ("x-algolia-api-key", "k"),
        ]))
        .unwrap();
        assert_eq!(
            q,
            BoostQuery {
                impact: Some(40),
                facets: Some(vec!["brand".into(), "color".into()]),
                limit: Some(5),
                format: Format::List,
            }
        );
        let q = parse_boost_query(&[]).unwrap();
        assert_eq!((q.impact, q.limit, q.format), (None, None, Format::Algolia));
        for (name, value) in [
            ("personalizationImpact", "101"),
            ("personalizationImpact", "-1"),
            ("personalizationImpact", "50.5"),
            ("facets", "brand,,color"),
            ("limit", "0"),
            ("limit", "1001"),
            ("limit", "ten"),
            ("format", "solr"),
        ] {
            match parse_boost_query(&params(&[(name, value)])) {
                Err(EngineError::InvalidArgument { name: got, .. }) => assert_eq!(got, name),
                other => panic!("{name}={value}: {other:?}"),
            }
        }
    }

    #[test]
    fn rerank_bodies_name_the_field_at_fault() {
        let field = |v: Value| match parse_rerank_body(v) {
            Err(e) => e.field().unwrap_or("none"),
            Ok(_) => "accepted",
        };
        let hits = json!([{"objectID": "a"}]);
        assert_eq!(field(json!({"userToken": "u1", "hits": hits})), "accepted");
        assert_eq!(
            field(json!({"userToken": "u1", "hits": hits, "personalizationImpact": 50.0})),
            "accepted"
        );
        assert_eq!(field(json!([])), "body");
        assert_eq!(
            field(json!({"userToken": "u1", "hits": hits, "query": "x"})),
            "body"
        );
        assert_eq!(field(json!({"hits": hits})), "userToken");
        assert_eq!(
            field(json!({"userToken": "a b", "hits": hits})),
            "userToken"
        );
        assert_eq!(field(json!({"userToken": "u1"})), "hits");
        let many: Vec<Value> = (0..=MAX_HITS)
            .map(|i| json!({"objectID": format!("o{i}")}))
            .collect();
        assert_eq!(field(json!({"userToken": "u1", "hits": many})), "hits");
        for p in [json!(101), json!(-1), json!(2.5), json!("50"), Value::Null] {
            assert_eq!(
                field(json!({"userToken": "u1", "hits": hits, "personalizationImpact": p})),
                "personalizationImpact"
            );
        }
    }
}
