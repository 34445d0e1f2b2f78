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

use std::borrow::Cow;
use std::sync::Arc;

use affinity_engine::boost::rerank::{self, Hit, HitFacets, MAX_HITS};
use affinity_engine::boost::{self, BoostOptions, MAX_IMPACT};
use affinity_engine::scoring::{eq_bytes, json_string};
use affinity_engine::{Error as EngineError, Strategy};
use axum::extract::{Path, Query, State as Shared};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde_json::error::Category;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::auth::{Acl, Caller};
use crate::body::Body;
use crate::catalog::check_index;
use crate::error::{blocking, Error, Result};
use crate::insights::check_user_token;
use crate::members::{self, Members, Object, Objects};
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
        let scores = state.engine.scores_with(&caller.app, &user, &strategy)?;
        let boosts = boost::boosts(scores.as_ref().map(|(_, s)| s), &strategy, &options)?;
        let mut written = Vec::with_capacity(64 * boosts.len() + 32);
        let name = match query.format {
            Format::Algolia => {
                boost::write_algolia_filters(&mut written, &boosts);
                "optionalFilters"
            }
            Format::Elasticsearch => {
                boost::write_elasticsearch_query(&mut written, &boosts);
                "query"
            }
            Format::List => {
                boost::write_list(&mut written, &boosts);
                "filters"
            }
        };
        let json = |text: &str| {
            let mut out = Vec::with_capacity(text.len() + 2);
            json_string(&mut out, text);
            out
        };
        let mut members = vec![
            (name, written),
            ("format", json(query.format.as_str())),
            (
                "personalizationImpact",
                itoa::Buffer::new().format(options.impact).into(),
            ),
            ("userFound", scores.is_some().to_string().into()),
            ("userToken", json(&user)),
        ];
        if let Some(v) = &serving.variant {
            members.push(("variant", json(v)));
        }
        // In name order, as serde_json writes an object's members.
        members.sort_unstable_by_key(|(name, _)| *name);
        let mut out = Vec::with_capacity(members.iter().map(|(_, v)| v.len() + 32).sum());
        for (i, (name, value)) in members.iter().enumerate() {
            out.push(if i == 0 { b'{' } else { b',' });
            write_name(&mut out, &Cow::Borrowed(name));
            out.push(b':');
            out.extend_from_slice(value);
        }
        out.push(b'}');
        Ok((out, serving.variant))
    })
    .await?;
    let response = ([(CONTENT_TYPE, "application/json")], answer).into_response();
    Ok(variants::tagged(response, variant.as_deref()))
}

/// The fields of a re-ranking body.
const RERANK_FIELDS: [&str; 4] = ["userToken", "hits", "personalizationImpact", "variant"];

/// A re-ranking body, checked: the user, the hits as sent (their text,
/// borrowed from the body), the impact, the variant forced.
struct RerankBody<'a> {
    user: String,
    hits: Hits<'a>,
    impact: Option<u32>,
    variant: Option<String>,
}

fn parse_rerank_body(bytes: &[u8]) -> Result<RerankBody<'_>> {
    let not_object = || {
        Error::unprocessable(
            "body",
            "The body must be a JSON object with userToken and hits",
        )
    };
    // Nearly always one pass reads the body and its hits; else the body is
    // read the general way, whose checks below name what is wrong.
    let (members, objects) = match members::with_objects(bytes, "hits") {
        Some((members, objects)) => (members, Some(objects)),
        None => match serde_json::from_slice(bytes) {
            Ok(members) => (members, None),
            Err(e) if e.classify() == Category::Data => return Err(not_object()),
            Err(e) => {
                return Err(Error::InvalidJson {
                    reason: e.to_string(),
                })
            }
        },
    };
    // The first in name order, as a reader of the whole object names it.
    if let Some(extra) = members
        .iter()
        .map(|(name, _)| name)
        .filter(|name| !RERANK_FIELDS.contains(name))
        .min()
    {
        return Err(Error::unprocessable(
            "body",
            format!(
                "Unknown field {extra}: the body takes userToken, hits, personalizationImpact and variant"
            ),
        ));
    }
    let value = |name: &str| -> Option<Value> {
        members
            .get(name)
            .and_then(|raw| serde_json::from_str(raw).ok())
    };
    let user = match value("userToken") {
        Some(Value::String(user)) => user,
        _ => {
            return Err(Error::unprocessable(
                "userToken",
                "UserToken is required: a string",
            ))
        }
    };
    check_user_token(&user)?;
    let hits = match objects {
        Some(objects) => Hits::Objects(objects),
        None => match members.get("hits").map(Hits::of) {
            Some(Some(hits)) => hits,
            _ => return Err(Error::unprocessable("hits", "Hits must be an array")),
        },
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
    let impact = match value("personalizationImpact") {
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
    let variant = match value("variant") {
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

/// The hits of a re-ranking body: read into their members in one pass
/// over their text when every hit is an object (as sent by every search
/// engine), else as text, for [`read_hits`] to name the hit at fault
/// after the body's other checks.
enum Hits<'a> {
    Objects(Objects<'a>),
    Raw(Vec<&'a RawValue>),
}

impl<'a> Hits<'a> {
    /// `None` when `raw` is not an array.
    fn of(raw: &'a str) -> Option<Hits<'a>> {
        if let Ok(objects) = serde_json::from_str(raw) {
            return Some(Hits::Objects(objects));
        }
        serde_json::from_str(raw).ok().map(Hits::Raw)
    }

    fn len(&self) -> usize {
        match self {
            Hits::Objects(hits) => hits.len(),
            Hits::Raw(hits) => hits.len(),
        }
    }
}

/// The hits' members and the engine's reading of each (only the values
/// of the facets `strategy` scores are read, strings without escapes
/// borrowed from the body); a hit that is not an object or has no
/// objectID is a 422 naming it.
fn read_hits<'a>(hits: Hits<'a>, strategy: &'a Strategy) -> Result<(Objects<'a>, Vec<Hit<'a>>)> {
    let objects: Objects<'a> = match hits {
        Hits::Objects(objects) => objects,
        Hits::Raw(raw) => {
            let mut objects = Objects::default();
            for (i, raw) in raw.iter().enumerate() {
                let members = Members::of(raw.get()).ok_or_else(|| {
                    Error::unprocessable("hits", format!("Hits[{i}] must be a JSON object"))
                })?;
                objects.push(members);
            }
            objects
        }
    };
    // Hits of one engine repeat their attribute names, mostly in one
    // order: a name at the place the hit before had it takes that one's
    // facet; others sent without escapes are looked up in the strategy
    // once per re-ranking.
    let mut known: Vec<(&'a str, Option<&'a str>)> = Vec::new();
    let (mut before, mut places): (Vec<Option<&'a str>>, Vec<Option<&'a str>>) = Default::default();
    let mut read = Vec::with_capacity(objects.len());
    for (i, members) in objects.iter().enumerate() {
        let object_id = members
            .get("objectID")
            .and_then(json_str)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| {
                Error::unprocessable(
                    "objectID",
                    format!("Hits[{i}].objectID must be a non-empty string"),
                )
            })?;
        std::mem::swap(&mut before, &mut places);
        places.clear();
        // Filled where it stays: a hit holds its first few pairs in place.
        read.push(Hit {
            object_id,
            facets: HitFacets::new(),
        });
        let facets = &mut read[i].facets;
        let alike = objects.alike(i);
        for (place, (name, raw)) in members.iter_read().enumerate() {
            let facet = match name {
                _ if place < alike => before[place],
                Cow::Borrowed(name) => scored_once(&mut known, strategy, name),
                Cow::Owned(name) => rerank::scored_facet(strategy, name),
            };
            places.push(facet);
            let Some(facet) = facet else {
                continue;
            };
            if name == "objectID" {
                continue;
            }
            match json_str(raw) {
                Some(value) => facets.push((facet, value)),
                // Numbers, booleans, arrays (the body was checked as JSON).
                None => {
                    if let Ok(value) = serde_json::from_str::<Value>(raw) {
                        facets.extend(
                            rerank::facet_values(&value)
                                .map(|v| (facet, Cow::Owned(v.into_owned()))),
                        );
                    }
                }
            }
        }
    }
    Ok((objects, read))
}

/// [`rerank::scored_facet`] of `name`, remembered in `known` (a few
/// dozen names at most: a hit list's attribute names repeat).
fn scored_once<'a>(
    known: &mut Vec<(&'a str, Option<&'a str>)>,
    strategy: &'a Strategy,
    name: &'a str,
) -> Option<&'a str> {
    const REMEMBERED: usize = 32;
    if let Some((_, facet)) = known
        .iter()
        .find(|(n, _)| eq_bytes(n.as_bytes(), name.as_bytes()))
    {
        return *facet;
    }
    let facet = rerank::scored_facet(strategy, name);
    if known.len() < REMEMBERED {
        known.push((name, facet));
    }
    facet
}

/// The string the JSON `text` holds, borrowed when it has no escapes;
/// `None` when `text` is not a string.
fn json_str(text: &str) -> Option<Cow<'_, str>> {
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    if inner.contains('\\') {
        return serde_json::from_str(text).ok().map(Cow::Owned);
    }
    Some(Cow::Borrowed(inner))
}

/// `hit` as sent, with `_rankingInfo.personalization` saying why it is
/// where it is (other `_rankingInfo` members kept; one that is not an
/// object replaced); `text` is the hit's text when its members are its
/// text's, one for one.
fn write_ranked_hit(out: &mut Vec<u8>, hit: Object, text: Option<&str>, ranked: &rerank::Ranked) {
    let why = |out: &mut Vec<u8>| {
        out.extend_from_slice(b"\"personalization\":{\"affinity\":");
        out.extend_from_slice(itoa::Buffer::new().format(ranked.affinity).as_bytes());
        out.extend_from_slice(b",\"facetsFrom\":\"");
        // The sources' names need no escaping.
        out.extend_from_slice(ranked.source.as_str().as_bytes());
        out.extend_from_slice(b"\",\"previousPosition\":");
        out.extend_from_slice(itoa::Buffer::new().format(ranked.input + 1).as_bytes());
        out.extend_from_slice(b",\"score\":");
        write_score(out, ranked.score);
        out.push(b'}');
    };
    // A `_rankingInfo` member after the hit's members.
    let add_info = |out: &mut Vec<u8>| {
        if !hit.is_empty() {
            out.push(b',');
        }
        // Borrowed: the name needs no escaping.
        write_name(out, &Cow::Borrowed(RANKING_INFO));
        out.extend_from_slice(b":{");
        why(out);
        out.push(b'}');
    };
    if let Some(text) = text.filter(|_| hit.get(RANKING_INFO).is_none()) {
        // Copied as sent, up to its closing brace (the text is an object).
        let open = text.trim_end().strip_suffix('}').unwrap_or(text);
        out.extend_from_slice(open.as_bytes());
        add_info(out);
        out.push(b'}');
        return;
    }
    out.push(b'{');
    let mut info_written = false;
    for (i, (name, raw)) in hit.iter_read().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_name(out, name);
        out.push(b':');
        if name != RANKING_INFO {
            out.extend_from_slice(raw.as_bytes());
            continue;
        }
        info_written = true;
        out.push(b'{');
        let info = Members::of(raw);
        for (name, raw) in info.iter().flat_map(|info| info.object().iter_read()) {
            if name != "personalization" {
                write_name(out, name);
                out.push(b':');
                out.extend_from_slice(raw.as_bytes());
                out.push(b',');
            }
        }
        why(out);
        out.push(b'}');
    }
    if !info_written {
        add_info(out);
    }
    out.push(b'}');
}

/// A member's name as JSON: a borrowed one as it was sent (it had no
/// escapes then), one read from escapes escaped again.
// The `Cow` itself, not its text: its variant says whether the name had
// escapes.
#[allow(clippy::ptr_arg)]
fn write_name(out: &mut Vec<u8>, name: &Cow<str>) {
    match name {
        Cow::Borrowed(name) => {
            out.push(b'"');
            out.extend_from_slice(name.as_bytes());
            out.push(b'"');
        }
        Cow::Owned(name) => json_string(out, name),
    }
}

/// A re-ranked hit's score (0 to 1, rounded to 6 decimals by
/// [`rerank::rerank`]) as serde_json writes it: from 0.001 below 1, as
/// `0.` and its digits without trailing zeros, without the float
/// formatting (a re-ranking writes one per hit); the rest through
/// serde_json.
fn write_score(out: &mut Vec<u8>, score: f64) {
    let micros = (score * 1e6).round();
    if (1e3..1e6).contains(&micros) && micros / 1e6 == score {
        let mut text = *b"0.000000";
        let mut rest = micros as u32;
        for digit in text[2..].iter_mut().rev() {
            *digit = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        // Not all zeros: at least 1,000 millionths.
        let end = text.iter().rposition(|b| *b != b'0').unwrap_or(0) + 1;
        out.extend_from_slice(&text[..end]);
    } else {
        // Writing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, &score);
    }
}

/// The member of a hit where search engines say how it ranked.
const RANKING_INFO: &str = "_rankingInfo";

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
        let bytes = body.decoded()?;
        let RerankBody {
            user,
            hits,
            impact,
            variant,
        } = parse_rerank_body(&bytes)?;
        caller.require_user(&user)?;
        let serving = serving_of(&state, &caller.app, &user, variant.as_deref())?;
        let strategy = serving.strategy;
        let impact = impact.unwrap_or(strategy.personalization_impact);
        let (members, read) = read_hits(hits, &strategy)?;
        let catalog = if rerank::needs_catalog(&read) {
            Some(state.engine.catalog(&caller.app, &index)?)
        } else {
            None
        };
        let scores = state.engine.scores_with(&caller.app, &user, &strategy)?;
        let ranked = rerank::rerank(
            scores.as_ref().map(|(_, s)| s),
            &strategy,
            impact,
            &read,
            catalog.as_deref(),
        )?;
        // The answer's members in name order, as before hits were copied
        // as text: hits, personalizationImpact, userFound, userToken,
        // variant.
        let mut out = Vec::with_capacity(bytes.len() + 128 * ranked.len() + 128);
        out.extend_from_slice(b"{\"hits\":[");
        for (i, r) in ranked.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_ranked_hit(&mut out, members.get(r.input), members.text(r.input), r);
        }
        out.extend_from_slice(b"],\"personalizationImpact\":");
        out.extend_from_slice(itoa::Buffer::new().format(impact).as_bytes());
        out.extend_from_slice(if scores.is_some() {
            b",\"userFound\":true,\"userToken\":"
        } else {
            b",\"userFound\":false,\"userToken\":"
        });
        json_string(&mut out, &user);
        if let Some(v) = &serving.variant {
            out.extend_from_slice(b",\"variant\":");
            json_string(&mut out, v);
        }
        out.push(b'}');
        Ok((out, serving.variant))
    })
    .await?;
    let response = ([(CONTENT_TYPE, "application/json")], answer).into_response();
    Ok(variants::tagged(response, variant.as_deref()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

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
        let field = |v: Value| match parse_rerank_body(&serde_json::to_vec(&v).unwrap()) {
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
        assert!(matches!(
            parse_rerank_body(b"{\"userToken\": \"u1\", \"hits\": [}"),
            Err(Error::InvalidJson { .. })
        ));
    }

    #[test]
    fn scores_are_written_as_serde_json_writes_them() {
        // Every score a re-ranking gives (millionths from 0 to 1), and a
        // few it does not.
        let mut scores: Vec<f64> = (0..=1_000_000).map(|m| f64::from(m) / 1e6).collect();
        scores.extend([0.1 + 0.2, 1.5, 1e-9, 0.999_999_5, 0.000_999]);
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for score in scores {
            ours.clear();
            theirs.clear();
            write_score(&mut ours, score);
            serde_json::to_writer(&mut theirs, &score).unwrap();
            assert_eq!(ours, theirs, "{score}");
        }
    }

    #[test]
    fn ranked_hits_are_sent_back_as_sent_with_why() {
        let strategy = Strategy::from_json(&json!({
            "eventsScoring": [{"eventName": "Clicked", "eventType": "click", "score": 10}],
            "facetsScoring": [{"facetName": "brand", "score": 100}],
            "personalizationImpact": 50}))
        .unwrap();
        let ranked = rerank::Ranked {
            input: 2,
            affinity: 7,
            score: 0.5,
            source: rerank::FacetSource::Hit,
        };
        let why = json!({"affinity": 7, "facetsFrom": "hit", "previousPosition": 3, "score": 0.5});
        let cases = [
            (
                r#"{"objectID":"a","brand":["X",1],"n\u00e9":{"deep":[1,2]},"brand":"Y"}"#,
                false,
                json!({"objectID": "a", "brand": "Y", "né": {"deep": [1, 2]},
                       "_rankingInfo": {"personalization": why}}),
            ),
            (
                r#"{"_rankingInfo":{"nbTypos":0,"personalization":1},"objectID":"b"}"#,
                true,
                json!({"objectID": "b", "_rankingInfo": {"nbTypos": 0, "personalization": why}}),
            ),
            (
                r#"{"objectID":"c","_rankingInfo":[1]}"#,
                true,
                json!({"objectID": "c", "_rankingInfo": {"personalization": why}}),
            ),
            (
                r#"{"objectID":"d","brand":["X",1],"img":"a.png","n":{"deep":[1,2]}}"#,
                true,
                json!({"objectID": "d", "brand": ["X", 1], "img": "a.png", "n": {"deep": [1, 2]},
                       "_rankingInfo": {"personalization": why}}),
            ),
            (
                "{ \"objectID\" : \"e\" ,\n \"brand\":\"Z\" }\n",
                true,
                json!({"objectID": "e", "brand": "Z", "_rankingInfo": {"personalization": why}}),
            ),
            (
                r#"{"objectID":"f","brand":"X","brand":"Y"}"#,
                false,
                json!({"objectID": "f", "brand": "Y", "_rankingInfo": {"personalization": why}}),
            ),
            (
                "{}",
                true,
                json!({"_rankingInfo": {"personalization": why}}),
            ),
        ];
        for (sent, copied, expected) in cases {
            // Read by serde_json (members written one by one), and by the
            // scanner (a hit whose members are its text's is copied).
            let array = format!("[{sent}]");
            let raw: &RawValue = serde_json::from_str(&array).unwrap();
            assert!(
                matches!(Hits::of(raw.get()), Some(Hits::Objects(_))),
                "{sent}"
            );
            let objects: Objects = serde_json::from_str(raw.get()).unwrap();
            assert_eq!(objects.text(0), None);
            let body = format!(r#"{{"hits":{array}}}"#);
            let (_, scanned) = members::with_objects(body.as_bytes(), "hits").unwrap();
            assert_eq!(scanned.text(0).is_some(), copied, "{sent}");
            for (objects, how) in [(objects, "serde_json"), (scanned, "scanner")] {
                let mut out = Vec::new();
                write_ranked_hit(&mut out, objects.get(0), objects.text(0), &ranked);
                let got: Value = serde_json::from_slice(&out).expect("JSON");
                assert_eq!(got, expected, "{sent} read by {how}");
            }
        }
        let raw: &RawValue =
            serde_json::from_str(r#"[{"objectID":"a","brand":["X",1,{"z":1}]}]"#).unwrap();
        let (_, read) = read_hits(Hits::of(raw.get()).unwrap(), &strategy).unwrap();
        let pairs = |hit: &Hit| -> Vec<(String, String)> {
            hit.facets
                .iter()
                .map(|(f, v)| (f.to_string(), v.to_string()))
                .collect()
        };
        let pair = |f: &str, v: &str| (f.to_string(), v.to_string());
        assert_eq!(pairs(&read[0]), [pair("brand", "X"), pair("brand", "1")]);
        // Strings are read as JSON: escapes decoded, plain text borrowed.
        let raw: &RawValue = serde_json::from_str(
            r#"[{"objectID":"a\u0062","brand":"X\"Y\\","n":"brand"},{"objectID":"c","brand":"Z"}]"#,
        )
        .unwrap();
        let (_, read) = read_hits(Hits::of(raw.get()).unwrap(), &strategy).unwrap();
        assert_eq!(read[0].object_id, "ab");
        assert_eq!(pairs(&read[0]), [pair("brand", "X\"Y\\")]);
        assert_eq!(read[1].object_id, "c");
        assert!(matches!(
            read[1].facets[..],
            [("brand", Cow::Borrowed("Z"))]
        ));
        // A hit that is not an object is named by its place, after the
        // objects before it; the hits are then read from their text.
        for (bad, field, message) in [
            (
                r#"[{"objectID":"a"},[1]]"#,
                "hits",
                "Hits[1] must be a JSON object",
            ),
            (
                r#"[{"objectID":"a"},"b"]"#,
                "hits",
                "Hits[1] must be a JSON object",
            ),
            (
                r#"[{"objectID":"a"},{"objectID":""}]"#,
                "objectID",
                "Hits[1].objectID",
            ),
            (r#"[{"objectID":7}]"#, "objectID", "Hits[0].objectID"),
        ] {
            let raw: &RawValue = serde_json::from_str(bad).unwrap();
            let err = read_hits(Hits::of(raw.get()).unwrap(), &strategy).unwrap_err();
            assert_eq!(err.field(), Some(field), "{bad}");
            assert!(err.to_string().contains(message), "{bad}: {err}");
        }
        for not_array in [r#"{"objectID":"a"}"#, "7", "null"] {
            let raw: &RawValue = serde_json::from_str(not_array).unwrap();
            assert!(Hits::of(raw.get()).is_none(), "{not_array}");
        }
    }
}
