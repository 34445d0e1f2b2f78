//! Personalization: the strategy, profiles and profile deletion.

use std::sync::Arc;

use affinity_engine::Strategy;
use axum::extract::{Path, Query, State as Shared};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::auth::{Acl, Caller};
use crate::body::Body;
use crate::error::{blocking, Error, Result};
use crate::insights::check_user_token;
use crate::state::State;
use crate::time::iso;
use crate::variants;

/// `GET /1/strategies/personalization`.
pub async fn get_strategy(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
) -> Result<Json<Value>> {
    caller.require_any(&[Acl::Profiles, Acl::Search])?;
    let strategy = blocking(move || Ok(state.engine.strategy(&caller.app)?)).await?;
    match strategy {
        Some(s) => Ok(Json(s.to_json())),
        None => Err(Error::not_found(
            "No personalization strategy is set for this application",
        )),
    }
}

/// `POST /1/strategies/personalization`: validate and store. Profiles are
/// scored with the current strategy at every read, so the change shows at
/// the next read, on every server within [`crate::state::STRATEGY_TTL`].
pub async fn post_strategy(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    body: Body,
) -> Result<Json<Value>> {
    caller.require(Acl::Admin)?;
    let shared = Arc::clone(&state);
    let app = caller.app.clone();
    let updated_at = blocking(move || {
        let strategy = Strategy::from_json(&body.json()?)?;
        let updated_at = shared.engine.set_strategy(&app, &strategy)?;
        shared.forget_strategy(&app);
        Ok(updated_at)
    })
    .await?;
    tracing::info!(app = %caller.app, "strategy updated");
    Ok(Json(json!({
        "message": "Strategy was successfully updated.",
        "updatedAt": iso(updated_at),
    })))
}

/// `GET /1/profiles/personalization/{userToken}`: 404 for a user without
/// a profile.
pub async fn get_profile(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    Path(user): Path<String>,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Response> {
    caller.require_any(&[Acl::Profiles, Acl::Search])?;
    check_user_token(&user)?;
    caller.require_user(&user)?;
    let forced = variants::forced(&params)?;
    let inline = state.inline_reads;
    // The JSON written straight from the sorted scores (no maps, no serde
    // per entry): the bytes `Json(profile)` would answer.
    let read = move || match state.serving(&caller.app, &user, forced.as_deref())? {
        Some(serving) => Ok(state
            .engine
            .profile_json_with(&caller.app, &user, &serving.strategy)?
            .map(|json| (json, serving.variant))),
        None => Ok(None),
    };
    let profile = if inline {
        read()?
    } else {
        blocking(read).await?
    };
    match profile {
        Some((json, variant)) => {
            let body = variants::with_variant_field(json, variant.as_deref());
            let response = ([(CONTENT_TYPE, "application/json")], body).into_response();
            Ok(variants::tagged(response, variant.as_deref()))
        }
        None => Err(Error::not_found("User not found")),
    }
}

/// `DELETE /1/profiles/{userToken}`: the user's profile and events.
pub async fn delete_profile(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    Path(user): Path<String>,
) -> Result<Json<Value>> {
    caller.require(Acl::Admin)?;
    check_user_token(&user)?;
    caller.require_user(&user)?;
    let (user, now) = blocking(move || {
        state.engine.delete_user(&caller.app, &user)?;
        Ok((user, state.engine.now_millis()))
    })
    .await?;
    Ok(Json(json!({"userToken": user, "deletedUntil": iso(now)})))
}
