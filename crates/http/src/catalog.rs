//! Affinity's catalog endpoints: the objects of an index and their facet
//! attributes, so `objectIDs` events resolve to facet filters.
//!
//! - `POST /1/indexes/{indexName}/objects` `{"objects":[...]}`: add or
//!   replace up to 1000 objects (all validated before any is stored);
//! - `PUT /1/indexes/{indexName}/objects/{objectID}`: add or replace one;
//! - `GET /1/indexes/{indexName}/objects/{objectID}`;
//! - `DELETE /1/indexes/{indexName}/objects/{objectID}`: delete one (an
//!   event resolves its objects when ingested, so counted events keep
//!   what they resolved to).

use std::sync::Arc;

use affinity_engine::catalog::CatalogObject;
use axum::extract::{Path, State as Shared};
use axum::Json;
use serde_json::{json, Value};

use crate::auth::{Acl, Caller};
use crate::body::Body;
use crate::error::{blocking, Error, Result, MAX_BATCH_EVENTS};
use crate::state::State;
use crate::time::iso;

pub(crate) fn check_index(index: &str) -> Result<()> {
    if (1..=256).contains(&index.len()) {
        Ok(())
    } else {
        Err(Error::unprocessable(
            "indexName",
            "IndexName must be 1 to 256 bytes",
        ))
    }
}

fn parse_object(value: &Value, at: usize) -> Result<CatalogObject> {
    CatalogObject::from_json(value)
        .map_err(|e| Error::unprocessable("objects", format!("Objects[{at}] is invalid: {e}")))
}

/// `POST /1/indexes/{indexName}/objects`.
pub async fn post_objects(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    Path(index): Path<String>,
    body: Body,
) -> Result<Json<Value>> {
    caller.require(Acl::Admin)?;
    check_index(&index)?;
    caller.require_index(&index)?;
    blocking(move || {
        let value = body.json()?;
        let list = value
            .get("objects")
            .and_then(Value::as_array)
            .ok_or_else(|| Error::unprocessable("objects", "Objects must be an array"))?;
        if list.len() > MAX_BATCH_EVENTS {
            return Err(Error::unprocessable(
                "objects",
                "Cannot process more than 1000 objects in a batch",
            ));
        }
        let objects = list
            .iter()
            .enumerate()
            .map(|(i, v)| parse_object(v, i))
            .collect::<Result<Vec<_>>>()?;
        state.engine.put_objects(&caller.app, &index, &objects)?;
        let ids: Vec<&str> = objects.iter().map(|o| o.object_id.as_str()).collect();
        Ok(Json(
            json!({"objectIDs": ids, "updatedAt": iso(state.engine.now_millis())}),
        ))
    })
    .await
}

/// `PUT /1/indexes/{indexName}/objects/{objectID}`.
pub async fn put_object(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    Path((index, object_id)): Path<(String, String)>,
    body: Body,
) -> Result<Json<Value>> {
    caller.require(Acl::Admin)?;
    check_index(&index)?;
    caller.require_index(&index)?;
    blocking(move || {
        let mut value = body.json()?;
        let obj = value
            .as_object_mut()
            .ok_or_else(|| Error::unprocessable("object", "Object must be a JSON object"))?;
        match obj.get("objectID") {
            None => {
                obj.insert("objectID".into(), Value::from(object_id.as_str()));
            }
            Some(Value::String(id)) if *id == object_id => {}
            Some(_) => {
                return Err(Error::unprocessable(
                    "objectID",
                    format!("ObjectID of the body must be the path's {object_id:?}"),
                ))
            }
        }
        let object = parse_object(&value, 0)?;
        state.engine.put_objects(&caller.app, &index, &[object])?;
        Ok(Json(
            json!({"objectID": object_id, "updatedAt": iso(state.engine.now_millis())}),
        ))
    })
    .await
}

/// `GET /1/indexes/{indexName}/objects/{objectID}`.
pub async fn get_object(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    Path((index, object_id)): Path<(String, String)>,
) -> Result<Json<Value>> {
    caller.require_any(&[Acl::Profiles, Acl::Search])?;
    check_index(&index)?;
    caller.require_index(&index)?;
    blocking(move || {
        let catalog = state.engine.catalog(&caller.app, &index)?;
        match catalog.get(&object_id) {
            Some(o) => Ok(Json(o.to_json())),
            None => Err(Error::not_found(format!(
                "ObjectID {object_id:?} does not exist in index {index:?}"
            ))),
        }
    })
    .await
}

/// `DELETE /1/indexes/{indexName}/objects/{objectID}`: deleted (or
/// already absent); events already counted keep what they resolved to.
pub async fn delete_object(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    Path((index, object_id)): Path<(String, String)>,
) -> Result<Json<Value>> {
    caller.require(Acl::Admin)?;
    check_index(&index)?;
    caller.require_index(&index)?;
    blocking(move || {
        state
            .engine
            .delete_objects(&caller.app, &index, &[object_id.as_str()])?;
        Ok(Json(
            json!({"objectID": object_id, "deletedAt": iso(state.engine.now_millis())}),
        ))
    })
    .await
}
