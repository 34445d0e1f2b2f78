//! A/B tests of strategies (see [`affinity_engine::variants`]): the test's
//! routes, and how an answer names the variant that served it.

use std::sync::Arc;

use affinity_engine::variants::valid_name;
use affinity_engine::Variants;
use axum::extract::State as Shared;
use axum::http::{HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::auth::{Acl, Caller};
use crate::body::Body;
use crate::error::{blocking, Error, Result};
use crate::explain::optional_param;
use crate::state::State;
use crate::time::iso;

/// The response header naming the variant that served a request.
pub const VARIANT_HEADER: HeaderName = HeaderName::from_static("x-affinity-variant");

/// The variant a request forces (`variant=NAME`, for QA): `None` when not
/// given; empty, repeated or malformed is a 400 naming `variant`.
pub fn forced(params: &[(String, String)]) -> Result<Option<String>> {
    optional_param(params, "variant")?
        .map(|v| check(v).map(|()| v.to_string()))
        .transpose()
}

/// A forced variant's name, checked.
pub fn check(name: &str) -> Result<()> {
    if valid_name(name) {
        Ok(())
    } else {
        Err(Error::unprocessable(
            "variant",
            format!("variant must be 1 to 64 of A-Z a-z 0-9 _ - ., not {name:?}"),
        ))
    }
}

/// `response` with the [`VARIANT_HEADER`] of `variant`, if any.
pub fn tagged(mut response: Response, variant: Option<&str>) -> Response {
    if let Some(v) = variant.and_then(|v| HeaderValue::from_str(v).ok()) {
        response.headers_mut().insert(VARIANT_HEADER, v);
    }
    response
}

/// A profile's JSON bytes (an object) with `"variant": NAME` added last:
/// variant names need no escaping.
pub fn with_variant_field(mut json: Vec<u8>, variant: Option<&str>) -> Vec<u8> {
    if let (Some(v), Some(b'}')) = (variant, json.last()) {
        json.pop();
        let empty = json.last() == Some(&b'{');
        if !empty {
            json.push(b',');
        }
        json.extend_from_slice(b"\"variant\":\"");
        json.extend_from_slice(v.as_bytes());
        json.extend_from_slice(b"\"}");
    }
    json
}

/// `GET /1/strategies/personalization/variants`: the running test, or
/// `{"variants": []}`.
pub async fn get_variants(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
) -> Result<Json<Value>> {
    caller.require_any(&[Acl::Profiles, Acl::Search])?;
    let test = blocking(move || Ok(state.engine.variants(&caller.app)?)).await?;
    Ok(Json(match test {
        Some(t) => t.to_json(),
        None => json!({"variants": []}),
    }))
}

/// `PUT /1/strategies/personalization/variants`: start or replace the
/// test; every server serves it within [`crate::state::STRATEGY_TTL`].
pub async fn put_variants(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    body: Body,
) -> Result<Json<Value>> {
    caller.require(Acl::Admin)?;
    let app = caller.app.clone();
    let updated_at = blocking(move || {
        let test = Variants::from_json(&body.json()?)?;
        let updated_at = state.engine.set_variants(&app, &test)?;
        state.forget_strategy(&app);
        Ok(updated_at)
    })
    .await?;
    tracing::info!(app = %caller.app, "A/B test of strategies set");
    Ok(Json(json!({
        "message": "Variants were successfully updated.",
        "updatedAt": iso(updated_at),
    })))
}

/// `DELETE /1/strategies/personalization/variants`: end the test.
pub async fn delete_variants(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
) -> Result<Response> {
    caller.require(Acl::Admin)?;
    let app = caller.app.clone();
    let updated_at = blocking(move || {
        let updated_at = state.engine.clear_variants(&app)?;
        state.forget_strategy(&app);
        Ok(updated_at)
    })
    .await?;
    Ok(Json(json!({
        "message": "The A/B test was ended: every user is served the application's strategy.",
        "updatedAt": iso(updated_at),
    }))
    .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variant_field_goes_last() {
        let json = br#"{"userToken":"u","scores":{}}"#.to_vec();
        assert_eq!(
            with_variant_field(json.clone(), Some("b")),
            br#"{"userToken":"u","scores":{},"variant":"b"}"#.to_vec()
        );
        assert_eq!(with_variant_field(json.clone(), None), json);
        assert_eq!(
            with_variant_field(b"{}".to_vec(), Some("a")),
            br#"{"variant":"a"}"#.to_vec()
        );
    }

    #[test]
    fn forced_variants_are_checked() {
        let p = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        assert_eq!(forced(&p(&[])).unwrap(), None);
        assert_eq!(forced(&p(&[("variant", "b")])).unwrap(), Some("b".into()));
        for bad in [
            vec![("variant", "")],
            vec![("variant", "a b")],
            vec![("variant", "a"), ("variant", "b")],
        ] {
            let e = forced(&p(&bad)).unwrap_err();
            assert!(e.to_string().contains("variant"), "{e}");
        }
    }
}
