//! API keys kept in the store (`/1/keys`, docs/design/keys.md): a key made
//! through one server works on another sharing the store, a deleted or
//! changed one stops working there within the refresh bound, expiry and
//! ACLs are enforced, secured API keys derive from stored keys, bad input
//! changes nothing, and a flood of wrong keys does not become a flood of
//! store reads. Run on the embedded store, and on the Bigtable emulator.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use affinity_http::keystore::{KEYS_REFRESH, MISS_REFRESH};
use affinity_http::{Restrictions, State};
use common::*;
use reqwest::Method;
use serde_json::{json, Value};

/// How long the tests wait for what must happen within
/// [`KEYS_REFRESH`]: far more, as the machine may be loaded (the bound is
/// a correctness property; its timing is not asserted).
const PATIENCE: Duration = Duration::from_secs(30);

/// The document's schema `name`, compiled.
fn schema(name: &str) -> jsonschema::Validator {
    let doc: Value = serde_json::from_str(include_str!("../src/openapi.json")).unwrap();
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": format!("#/components/schemas/{name}"),
        "components": doc["components"],
    });
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(&schema)
        .unwrap()
}

fn conforms(name: &str, body: &Value) {
    let errors: Vec<String> = schema(name)
        .iter_errors(body)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{name}: {body}: {errors:?}");
}

async fn call(server: &Server, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut r = server.admin(method, path);
    if let Some(body) = body {
        r = r.body(body.to_string());
    }
    parts(r.send().await.unwrap()).await
}

/// The status of sending one event for `user` with `key`.
async fn send_event(server: &Server, key: &str, user: &str) -> (u16, Value) {
    let body = json!({"events": [click(user, "Apple")]}).to_string();
    let r = server
        .as_key(Method::POST, "/1/events", APP, key)
        .body(body);
    parts(r.send().await.unwrap()).await
}

/// Wait until `check` holds of the status `request` answers; the time it
/// took.
async fn until<F, Fut>(what: &str, mut request: F, check: impl Fn(u16, &Value) -> bool) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = (u16, Value)>,
{
    let started = Instant::now();
    loop {
        let (status, body) = request().await;
        if check(status, &body) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{what}: still {status} {body} after {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Keys made, changed and deleted through `a` take effect on `b`.
async fn keys_follow_across(a: &Server, b: &Server) {
    assert_eq!(parts(a.set_strategy().await).await.0, 200);
    let body = json!({"acl": ["events", "search"], "description": "shop front"});
    let (status, made) = call(a, Method::POST, "/1/keys", Some(body)).await;
    assert_eq!(status, 200, "{made}");
    conforms("ApiKeyCreated", &made);
    let key = made["key"].as_str().unwrap().to_string();

    // Through B: the key works (events), within the bound.
    let took = until(
        "a new key on B",
        || send_event(b, &key, "u1"),
        |s, _| s == 200,
    )
    .await;
    eprintln!("a key made on A worked on B after {took:?} (bound {KEYS_REFRESH:?})");
    let (status, listed) = call(b, Method::GET, "/1/keys", None).await;
    assert_eq!(status, 200);
    conforms("ApiKeyList", &listed);
    assert_eq!(listed["keys"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["keys"][0]["value"], key.as_str());
    assert_eq!(
        listed["keys"][0]["acl"],
        json!(["events", "search"]),
        "listed as given"
    );
    assert_eq!(listed["keys"][0]["description"], "shop front");
    assert_eq!(listed["keys"][0]["validity"], 0);
    let (status, one) = call(b, Method::GET, &format!("/1/keys/{key}"), None).await;
    assert_eq!(status, 200);
    conforms("ApiKey", &one);
    assert_eq!(one, listed["keys"][0]);

    // Wrong ACL: 403, on both.
    for server in [a, b] {
        let r = server.as_key(Method::DELETE, "/1/profiles/u1", APP, &key);
        let (status, body) = parts(r.send().await.unwrap()).await;
        assert_eq!(status, 403, "{body}");
        assert!(
            body["message"].as_str().unwrap().contains("admin"),
            "{body}"
        );
        let r = server.as_key(Method::GET, "/1/keys", APP, &key);
        assert_eq!(parts(r.send().await.unwrap()).await.0, 403);
    }

    // A secured key derived from the stored key, restricted to u1.
    let secured = Restrictions {
        user_token: Some("u1".into()),
        ..Restrictions::default()
    }
    .generate(&key);
    assert_eq!(send_event(b, &secured, "u1").await.0, 200);
    let (status, body) = send_event(b, &secured, "u2").await;
    assert_eq!(status, 403, "{body}");
    let r = b.as_key(Method::GET, "/1/profiles/personalization/u1", APP, &secured);
    let (status, profile) = parts(r.send().await.unwrap()).await;
    assert_eq!(status, 200, "{profile}");
    assert_eq!(profile["userToken"], "u1");

    // Changed on A (events only): B stops granting search.
    let (status, updated) = call(
        a,
        Method::PUT,
        &format!("/1/keys/{key}"),
        Some(json!({"acl": ["events"], "description": "events only"})),
    )
    .await;
    assert_eq!(status, 200, "{updated}");
    conforms("ApiKeyUpdated", &updated);
    assert_eq!(updated["key"], key.as_str());
    let strategy = || async {
        let r = b.as_key(Method::GET, "/1/strategies/personalization", APP, &key);
        parts(r.send().await.unwrap()).await
    };
    until("a changed ACL on B", strategy, |s, _| s == 403).await;
    assert_eq!(send_event(b, &key, "u1").await.0, 200);

    // Deleted on A: refused on B, and so are its secured keys.
    let (status, deleted) = call(a, Method::DELETE, &format!("/1/keys/{key}"), None).await;
    assert_eq!(status, 200, "{deleted}");
    conforms("ApiKeyDeleted", &deleted);
    let took = until(
        "a deleted key on B",
        || send_event(b, &key, "u1"),
        |s, _| s == 401,
    )
    .await;
    eprintln!("a key deleted on A was refused on B after {took:?} (bound {KEYS_REFRESH:?})");
    let (status, body) = send_event(b, &secured, "u1").await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("signed by no key"),
        "{body}"
    );
    let (status, listed) = call(b, Method::GET, "/1/keys", None).await;
    assert_eq!((status, listed), (200, json!({"keys": []})));
}

#[tokio::test(flavor = "multi_thread")]
async fn keys_made_on_one_server_work_on_another() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn affinity_model::Store> =
        Arc::new(affinity_embedded::EmbeddedStore::open(dir.path()).unwrap());
    let a = Server::on(Arc::clone(&store)).await;
    let b = Server::on(store).await;
    keys_follow_across(&a, &b).await;
    a.stop().await;
    b.stop().await;
}

#[ignore = "needs the Cloud Bigtable emulator (scripts/test runs it)"]
#[tokio::test(flavor = "multi_thread")]
async fn keys_made_on_one_server_work_on_another_on_the_emulator() {
    let store = affinity_bigtable::emulator::test_store();
    let a = Server::on(store.clone()).await;
    let b = Server::on(store).await;
    keys_follow_across(&a, &b).await;
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_key_is_refused() {
    let server = Server::embedded().await;
    let body = json!({"acl": ["events"], "validity": 1});
    let (status, made) = call(&server, Method::POST, "/1/keys", Some(body)).await;
    assert_eq!(status, 200, "{made}");
    let key = made["key"].as_str().unwrap().to_string();
    let (_, listed) = call(&server, Method::GET, "/1/keys", None).await;
    assert_eq!(listed["keys"][0]["validity"], 1, "{listed}");
    let secured = Restrictions::default().generate(&key);
    until(
        "the key expires",
        || send_event(&server, &key, "u1"),
        |s, _| s != 200,
    )
    .await;
    let (status, body) = send_event(&server, &key, "u1").await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("expired"),
        "{body}"
    );
    let (status, body) = send_event(&server, &secured, "u1").await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("expired"),
        "{body}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_key_requests_change_nothing() {
    let server = Server::embedded().await;
    let generation = server.engine.api_keys_generation().unwrap();
    let refused = [
        (json!({"acl": ["addObject"]}), 400, "\"addObject\""),
        (json!({"acl": []}), 400, "at least one ACL"),
        (json!({"acl": "search"}), 400, "list of ACL names"),
        (json!({"description": "no acl"}), 400, "acl"),
        (json!({"acl": ["search"], "validity": -1}), 400, "validity"),
        (json!({"acl": ["search"], "validity": 1.5}), 400, "validity"),
        (
            json!({"acl": ["search"], "validity": 4_000_000_000u64}),
            400,
            "100 years",
        ),
        (
            json!({"acl": ["search"], "description": "x".repeat(1025)}),
            400,
            "1024",
        ),
        (
            json!({"acl": ["search"], "indexes": ["products"]}),
            400,
            "\"indexes\"",
        ),
        (json!({"acl": ["search"], "color": "red"}), 400, "\"color\""),
        (json!(["search"]), 400, "JSON object"),
    ];
    for (body, want, words) in refused {
        let (status, answer) = call(&server, Method::POST, "/1/keys", Some(body.clone())).await;
        assert_eq!(status, want, "{body}: {answer}");
        let message = answer["message"].as_str().unwrap();
        assert!(message.contains(words), "{body}: {message}");
    }
    let r = server.admin(Method::POST, "/1/keys").body("{not json");
    assert_eq!(parts(r.send().await.unwrap()).await.0, 400);
    // A configured key cannot be changed or deleted here.
    for method in [Method::DELETE, Method::PUT, Method::GET] {
        let body = (method == Method::PUT).then(|| json!({"acl": ["search"]}));
        let (status, answer) = call(
            &server,
            method.clone(),
            &format!("/1/keys/{SEARCH_KEY}"),
            body,
        )
        .await;
        assert_eq!(status, 400, "{method} {answer}");
        assert!(
            answer["message"].as_str().unwrap().contains("configured"),
            "{answer}"
        );
    }
    // Unknown keys.
    for method in [Method::DELETE, Method::PUT, Method::GET] {
        let body = (method == Method::PUT).then(|| json!({"acl": ["search"]}));
        let (status, answer) = call(&server, method.clone(), "/1/keys/nosuchkey", body).await;
        assert_eq!(status, 404, "{method} {answer}");
        assert!(answer["message"]
            .as_str()
            .unwrap()
            .contains("does not exist"));
    }
    let (status, answer) = call(&server, Method::DELETE, "/1/keys/sha256:12", None).await;
    assert_eq!(status, 400, "{answer}");
    // Only admin keys manage keys.
    for key in [SEARCH_KEY, EVENTS_KEY, BROWSER_KEY] {
        let r = server
            .as_key(Method::POST, "/1/keys", APP, key)
            .body(json!({"acl": ["admin"]}).to_string());
        assert_eq!(parts(r.send().await.unwrap()).await.0, 403);
    }
    // Nothing was written.
    assert_eq!(server.engine.api_keys_generation().unwrap(), generation);
    assert!(server.engine.api_keys(APP).unwrap().is_empty());
    // Another application's admin sees none of this application's keys.
    let (_, made) = call(
        &server,
        Method::POST,
        "/1/keys",
        Some(json!({"acl": ["search"]})),
    )
    .await;
    let key = made["key"].as_str().unwrap();
    let r = server.as_key(
        Method::GET,
        &format!("/1/keys/{key}"),
        OTHER_APP,
        OTHER_ADMIN,
    );
    assert_eq!(parts(r.send().await.unwrap()).await.0, 404);
    let r = server.as_key(Method::POST, "/1/events", OTHER_APP, key);
    assert_eq!(parts(r.send().await.unwrap()).await.0, 401);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_admin_key_is_shown_once_and_named_by_its_digest() {
    let server = Server::embedded().await;
    let (status, made) = call(
        &server,
        Method::POST,
        "/1/keys",
        Some(json!({"acl": ["admin"]})),
    )
    .await;
    assert_eq!(status, 200, "{made}");
    let key = made["key"].as_str().unwrap().to_string();
    let r = server.as_key(Method::GET, "/1/keys", APP, &key);
    let (status, listed) = parts(r.send().await.unwrap()).await;
    assert_eq!(status, 200, "{listed}");
    let value = listed["keys"][0]["value"].as_str().unwrap().to_string();
    assert_eq!(value, affinity_http::hash_key(&key));
    // Its text is not in the store.
    let stored = server.engine.api_keys(APP).unwrap();
    assert_eq!(stored[0].plain, None);
    // A secured key derived from it is refused.
    let secured = Restrictions::default().generate(&key);
    assert_eq!(send_event(&server, &secured, "u1").await.0, 403);
    // Deleted by its digest.
    let (status, _) = call(&server, Method::DELETE, &format!("/1/keys/{value}"), None).await;
    assert_eq!(status, 200);
    let r = server.as_key(Method::GET, "/1/keys", APP, &key);
    assert_eq!(parts(r.send().await.unwrap()).await.0, 401);
    server.stop().await;
}

/// Rows read from the `keys` table so far.
fn keys_rows_read(store: &affinity_model::counting::CountingStore) -> u64 {
    store.counts("keys").rows
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_keys_do_not_turn_into_store_reads() {
    let dir = tempfile::tempdir().unwrap();
    let embedded = affinity_embedded::EmbeddedStore::open(dir.path()).unwrap();
    let counted = Arc::new(affinity_model::counting::CountingStore::new(Arc::new(
        embedded,
    )));
    let server = Server::on(counted.clone()).await;
    for _ in 0..3 {
        let (status, _) = call(
            &server,
            Method::POST,
            "/1/keys",
            Some(json!({"acl": ["events"]})),
        )
        .await;
        assert_eq!(status, 200);
    }
    let key = server.engine.api_keys(APP).unwrap()[0]
        .plain
        .clone()
        .unwrap();
    let before = keys_rows_read(&counted);
    let started = Instant::now();
    // Spread over more than a second, so misses do re-read (and the
    // count shows the reads are seen at all).
    let requests = 400;
    for i in 0..requests {
        tokio::time::sleep(Duration::from_millis(4)).await;
        let wrong = format!("wrong-key-{i}");
        let used = if i % 2 == 0 {
            wrong.as_str()
        } else {
            key.as_str()
        };
        let r = server.as_key(Method::GET, "/1/strategies/personalization", APP, used);
        let status = r.send().await.unwrap().status().as_u16();
        assert!(status == 401 || status == 403 || status == 200, "{status}");
    }
    let elapsed = started.elapsed();
    let read = keys_rows_read(&counted) - before;
    // A re-read starts at most once per MISS_REFRESH, and reads the
    // counter's row (and, had it moved, the three keys): the bound does
    // not depend on the number of requests.
    let rereads = (elapsed.as_millis() / MISS_REFRESH.as_millis()) as u64 + 2;
    eprintln!(
        "{requests} requests in {elapsed:?}: {read} rows read from keys (at most {})",
        rereads * 4
    );
    assert!(
        read <= rereads * 4,
        "{read} rows read for {requests} requests in {elapsed:?}"
    );
    assert!(
        read > 0,
        "no re-read in {elapsed:?}: the counting store saw none"
    );
    assert!(
        read < requests / 2,
        "{read} rows read for {requests} requests"
    );
    server.stop().await;
}

/// A `State` without `serve` (no refresh task) re-reads keys on its own:
/// the first request after the bound, and misses.
#[tokio::test(flavor = "multi_thread")]
async fn a_state_without_its_refresh_task_sees_other_servers_keys() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn affinity_model::Store> =
        Arc::new(affinity_embedded::EmbeddedStore::open(dir.path()).unwrap());
    let engine = Arc::new(affinity_engine::Engine::open(Arc::clone(&store)).unwrap());
    let state = State::new(Arc::clone(&engine), keys());
    let other = affinity_engine::Engine::open(store).unwrap();
    let spec = affinity_http::keystore::KeySpec::from_json(&json!({"acl": ["search"]})).unwrap();
    let (key, _) = affinity_http::keystore::create(&other, APP, &spec).unwrap();
    let access = state
        .stored_keys
        .authenticate(&state, APP, &key)
        .await
        .unwrap();
    assert!(access.acl.contains(&affinity_http::Acl::Search));
    affinity_http::keystore::delete(&other, &state.keys, APP, &key).unwrap();
    let started = Instant::now();
    loop {
        match state.stored_keys.authenticate(&state, APP, &key).await {
            Err(affinity_http::Error::Unauthorized) => break,
            Ok(_) => assert!(started.elapsed() < PATIENCE, "still accepted"),
            Err(e) => panic!("{e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("deleted key refused after {:?}", started.elapsed());
}

/// Deleting an application deletes its stored keys (a re-created
/// application never inherits them), and no other application's.
#[tokio::test(flavor = "multi_thread")]
async fn deleting_an_application_deletes_its_keys() {
    let server = Server::embedded().await;
    let spec = affinity_http::keystore::KeySpec::from_json(&json!({"acl": ["events"]})).unwrap();
    let engine = &server.engine;
    let (key, _) = affinity_http::keystore::create(engine, APP, &spec).unwrap();
    affinity_http::keystore::create(engine, OTHER_APP, &spec).unwrap();
    until(
        "a key made beside the server",
        || send_event(&server, &key, "u1"),
        |s, _| s == 200,
    )
    .await;
    engine.delete_app(APP).unwrap();
    assert!(engine.api_keys(APP).unwrap().is_empty());
    assert_eq!(engine.api_keys(OTHER_APP).unwrap().len(), 1);
    until(
        "the deleted application's key",
        || send_event(&server, &key, "u1"),
        |s, _| s == 401,
    )
    .await;
    server.stop().await;
}
