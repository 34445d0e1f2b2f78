//! `GET /1/trends`: the top facet values of the events on located objects
//! in an area and time window (see [`affinity_engine::trends`]).
//!
//! Query parameters (Algolia's geo parameter names where they exist):
//!
//! | parameter | meaning |
//! |---|---|
//! | `aroundLatLng=LAT,LNG` | centre of a circle, with `aroundRadius` (alias `radius`), metres |
//! | `insideBoundingBox=LAT1,LNG1,LAT2,LNG2` | two opposite corners of a box (Algolia's order); it never crosses the antimeridian |
//! | `startDate`, `endDate` | the window `[start, end)`: RFC 3339 or epoch milliseconds (or seconds, up to 11 digits); default: the 7 days before the end, ending now |
//! | `facets=brand,color` | facets to rank; default: the strategy's |
//! | `limit` | values per facet, 1..=100, default 10 |
//!
//! Exactly one of `aroundLatLng` and `insideBoundingBox`. A bad parameter
//! is a 400 naming it. Credentials as for reading profiles (ACL `search`
//! or `profiles`).

use std::sync::Arc;

use affinity_engine::trends::{parse_time, Area, TrendsQuery};
use affinity_engine::Error as EngineError;
use affinity_rowkey::plan::BBox;
use axum::extract::{Query, State as Shared};
use axum::Json;
use serde_json::Value;

use crate::auth::{Acl, Caller};
use crate::error::{blocking, Result};
use crate::state::State;

fn bad(name: &'static str, reason: impl Into<String>) -> EngineError {
    EngineError::InvalidArgument {
        name,
        reason: reason.into(),
    }
}

/// Comma-separated numbers, exactly `n` of them.
fn numbers(name: &'static str, text: &str, n: usize, form: &str) -> Result<Vec<f64>, EngineError> {
    let parsed: Option<Vec<f64>> = text
        .split(',')
        .map(|p| p.trim().parse::<f64>().ok().filter(|v| v.is_finite()))
        .collect();
    match parsed {
        Some(v) if v.len() == n => Ok(v),
        _ => Err(bad(name, format!("{text:?} is not {form}"))),
    }
}

/// The engine query of the request's parameters (unknown ones, such as
/// credentials given as parameters, are ignored; a repeated one counts
/// once, its first value).
pub fn parse_query(params: &[(String, String)]) -> Result<TrendsQuery, EngineError> {
    let get = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let radius = match (get("aroundRadius"), get("radius")) {
        (Some(r), _) => Some(("aroundRadius", r)),
        (None, Some(r)) => Some(("radius", r)),
        (None, None) => None,
    };
    let area = match (get("aroundLatLng"), get("insideBoundingBox")) {
        (Some(_), Some(_)) => {
            return Err(bad(
                "aroundLatLng",
                "give aroundLatLng or insideBoundingBox, not both",
            ))
        }
        (None, None) => {
            return Err(bad(
                "aroundLatLng",
                "give aroundLatLng (with aroundRadius) or insideBoundingBox",
            ))
        }
        (Some(center), None) => {
            let v = numbers("aroundLatLng", center, 2, "LAT,LNG")?;
            let Some((name, r)) = radius else {
                return Err(bad(
                    "aroundRadius",
                    "is required with aroundLatLng (metres)",
                ));
            };
            let r: f64 = r
                .trim()
                .parse()
                .map_err(|_| bad(name, format!("{r:?} is not a number of metres")))?;
            if !(r.is_finite() && r > 0.0) {
                return Err(bad(name, format!("{r} is not a positive number of metres")));
            }
            Area::circle(v[0], v[1], r).map_err(|e| bad("aroundLatLng", e.to_string()))?
        }
        (None, Some(text)) => {
            let v = numbers("insideBoundingBox", text, 4, "LAT1,LNG1,LAT2,LNG2")?;
            let bbox = BBox::new(
                v[1].min(v[3]),
                v[0].min(v[2]),
                v[1].max(v[3]),
                v[0].max(v[2]),
            )
            .map_err(|e| bad("insideBoundingBox", e.to_string()))?;
            Area::BBox(bbox)
        }
    };
    let mut query = TrendsQuery::new(area);
    if let Some(t) = get("startDate") {
        query.from_millis = Some(parse_time("startDate", t)?);
    }
    if let Some(t) = get("endDate") {
        query.to_millis = Some(parse_time("endDate", t)?);
    }
    if let (Some(from), Some(to)) = (query.from_millis, query.to_millis) {
        if from >= to {
            return Err(bad("startDate", "must be before endDate"));
        }
    }
    if let Some(f) = get("facets") {
        let list: Vec<String> = f.split(',').map(|s| s.trim().to_string()).collect();
        if list.iter().any(String::is_empty) {
            return Err(bad(
                "facets",
                format!("{f:?} is not a comma-separated list of facet names"),
            ));
        }
        query.facets = Some(list);
    }
    if let Some(l) = get("limit") {
        let n: usize = l
            .trim()
            .parse()
            .map_err(|_| bad("limit", format!("{l:?} is not a number in 1..=100")))?;
        query.limit = Some(n);
    }
    Ok(query)
}

/// `GET /1/trends`.
pub async fn get_trends(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Json<Value>> {
    caller.require_any(&[Acl::Profiles, Acl::Search])?;
    let query = parse_query(&params)?;
    let trends = blocking(move || Ok(state.engine.trends(&caller.app, &query)?)).await?;
    Ok(Json(trends.to_json()))
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
    fn parses_circles_boxes_and_options() {
        let q = parse_query(&params(&[
            ("aroundLatLng", "45.5,-122.6"),
            ("radius", "1500"),
            ("startDate", "2024-05-01T00:00:00Z"),
            ("endDate", "1714608000000"),
            ("facets", "brand, color"),
            ("limit", "3"),
        ]))
        .unwrap();
        assert_eq!(q.area, Area::circle(45.5, -122.6, 1500.0).unwrap());
        assert_eq!(q.from_millis, Some(1_714_521_600_000));
        assert_eq!(q.to_millis, Some(1_714_608_000_000));
        assert_eq!(q.facets, Some(vec!["brand".into(), "color".into()]));
        assert_eq!(q.limit, Some(3));
        let q = parse_query(&params(&[("insideBoundingBox", "47.34,5.02,47.31,4.96")])).unwrap();
        assert_eq!(
            q.area,
            Area::BBox(BBox::new(4.96, 47.31, 5.02, 47.34).unwrap())
        );
    }

    #[test]
    fn bad_parameters_are_named() {
        for (list, name) in [
            (vec![], "aroundLatLng"),
            (vec![("aroundLatLng", "45.5")], "aroundLatLng"),
            (vec![("aroundLatLng", "45.5,1")], "aroundRadius"),
            (
                vec![("aroundLatLng", "45.5,1"), ("aroundRadius", "-3")],
                "aroundRadius",
            ),
            (vec![("aroundLatLng", "45.5,1"), ("radius", "x")], "radius"),
            (vec![("insideBoundingBox", "1,2,3")], "insideBoundingBox"),
            (vec![("insideBoundingBox", "1,2,93,4")], "insideBoundingBox"),
            (
                vec![("insideBoundingBox", "1,2,3,4"), ("startDate", "yesterday")],
                "startDate",
            ),
            (
                vec![("insideBoundingBox", "1,2,3,4"), ("endDate", "")],
                "endDate",
            ),
            (
                vec![("insideBoundingBox", "1,2,3,4"), ("facets", "a,,b")],
                "facets",
            ),
            (
                vec![("insideBoundingBox", "1,2,3,4"), ("limit", "ten")],
                "limit",
            ),
        ] {
            let err = parse_query(&params(&list)).unwrap_err();
            assert!(
                matches!(&err, EngineError::InvalidArgument { name: n, .. } if *n == name),
                "{list:?}: {err}"
            );
        }
    }
}
