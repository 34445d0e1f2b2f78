//! Secured API keys over real HTTP. The keys are made here by a generator
//! written from Algolia's client code (the Python client 4.x's
//! `generate_secured_api_key`: parameters sorted, lists joined by commas,
//! values percent-encoded, `base64(hex(HMAC-SHA256(parent, query)) +
//! query)`), not by the server's own `Restrictions::generate`, so a
//! mistake shared by the server's encoder and decoder cannot hide.
//! `tests/browser.rs` repeats the essentials with Algolia's Python client.

mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use common::*;
use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{json, Value};

/// Algolia's `generateSecuredApiKey(parent, restrictions)`, with
/// `restrictions` as (name, value) pairs already joined.
fn secured_key(parent: &str, restrictions: &[(&str, &str)]) -> String {
    let mut pairs = restrictions.to_vec();
    pairs.sort();
    let query = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
        .replace('+', "%20");
    base64::engine::general_purpose::STANDARD.encode(format!("{}{query}", hmac_hex(parent, &query)))
}

fn hmac_hex(parent: &str, query: &str) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(parent.as_bytes()).unwrap();
    mac.update(query.as_bytes());
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

async fn send(server: &Server, key: &str, events: &[Value]) -> (u16, Value) {
    let r = server
        .as_key(Method::POST, "/1/events", APP, key)
        .body(json!({ "events": events }).to_string());
    parts(r.send().await.unwrap()).await
}

async fn profile(server: &Server, key: &str, user: &str) -> (u16, Value) {
    let path = format!("/1/profiles/personalization/{user}");
    parts(
        server
            .as_key(Method::GET, &path, APP, key)
            .send()
            .await
            .unwrap(),
    )
    .await
}

fn message(body: &Value) -> &str {
    body["message"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_user_token_key_reads_and_writes_only_its_user() {
    let server = Server::embedded().await;
    assert_eq!(server.set_strategy().await.status(), 200);
    let key = secured_key(BROWSER_KEY, &[("userToken", "alice")]);

    assert_eq!(send(&server, &key, &[click("alice", "Apple")]).await.0, 200);
    let (status, body) = profile(&server, &key, "alice").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["scores"]["brand"]["Apple"], 20, "{body}");

    // Another user's profile, and a batch with one event of another user:
    // 403 naming the restriction, and nothing of the batch stored.
    assert_eq!(
        server.post_events(&[click("bob", "Apple")]).await.status(),
        200
    );
    let (status, body) = profile(&server, &key, "bob").await;
    assert_eq!(status, 403, "{body}");
    assert!(message(&body).contains("userToken \"alice\""), "{body}");
    let (status, body) = send(
        &server,
        &key,
        &[click("alice", "Samsung"), click("bob", "Samsung")],
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(message(&body).starts_with("events[1]: "), "{body}");
    assert!(message(&body).contains("userToken \"alice\""), "{body}");
    let (_, alice) = profile(&server, ADMIN, "alice").await;
    assert_eq!(alice["scores"]["brand"], json!({"Apple": 20}), "{alice}");
    let (_, bob) = profile(&server, ADMIN, "bob").await;
    assert_eq!(bob["scores"]["brand"], json!({"Apple": 20}), "{bob}");

    // After login the event is stored under its authenticatedUserToken,
    // which must be the key's user; the anonymous token of the browser
    // comes along. Claiming to be another authenticated user is refused.
    let mut login = click("anon-1", "Apple");
    login["authenticatedUserToken"] = json!("alice");
    assert_eq!(send(&server, &key, &[login]).await.0, 200);
    let mut other = click("alice", "Apple");
    other["authenticatedUserToken"] = json!("bob");
    assert_eq!(send(&server, &key, &[other]).await.0, 403);
    server.stop().await;
}

#[tokio::test]
async fn expired_tampered_and_foreign_keys_get_403_and_garbage_401() {
    let server = Server::embedded().await;
    let valid = (now_secs() + 3600).to_string();
    let expired = (now_secs() - 10).to_string();
    let ok = secured_key(BROWSER_KEY, &[("validUntil", &valid)]);
    assert_eq!(send(&server, &ok, &[click("u1", "Apple")]).await.0, 200);

    let old = secured_key(BROWSER_KEY, &[("validUntil", &expired)]);
    let (status, body) = send(&server, &old, &[click("u1", "Apple")]).await;
    assert_eq!(status, 403, "{body}");
    assert!(message(&body).contains("expired"), "{body}");

    // The same HMAC over another user: the signature no longer matches.
    let real = secured_key(BROWSER_KEY, &[("userToken", "alice")]);
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(&real)
        .unwrap();
    let forged = String::from_utf8(decoded)
        .unwrap()
        .replace("userToken=alice", "userToken=bob");
    let forged = base64::engine::general_purpose::STANDARD.encode(forged);
    for (key, why) in [
        (forged, "tampered"),
        (secured_key("unknown-parent", &[]), "unknown parent"),
        (secured_key(OTHER_ADMIN, &[]), "another application's key"),
    ] {
        let (status, body) = profile(&server, &key, "bob").await;
        assert_eq!(status, 403, "{why}: {body}");
        assert!(
            message(&body).contains("Invalid secured API key"),
            "{why}: {body}"
        );
    }
    let (status, body) = profile(&server, &secured_key(ADMIN, &[]), "bob").await;
    assert_eq!(status, 403, "{body}");
    assert!(message(&body).contains("admin"), "{body}");

    // Restrictions the server cannot read: 403 naming them.
    let unreadable = secured_key(BROWSER_KEY, &[("validUntil", "tomorrow")]);
    let (status, body) = profile(&server, &unreadable, "bob").await;
    assert_eq!(status, 403, "{body}");
    assert!(message(&body).contains("validUntil"), "{body}");

    // Not base64, or base64 of something else: a wrong key like any other.
    for garbage in ["not a key!", "c2hvcnQ=", &"A".repeat(120)] {
        let (status, _) = profile(&server, garbage, "bob").await;
        assert_eq!(status, 401, "{garbage}");
    }
    server.stop().await;
}

#[tokio::test]
async fn restrict_indices_and_sources_are_enforced() {
    let server = Server::embedded().await;
    let key = secured_key(BROWSER_KEY, &[("restrictIndices", "products,dev_*")]);
    let mut dev = click("u1", "Apple");
    dev["index"] = json!("dev_products");
    let mut blog = click("u1", "Apple");
    blog["index"] = json!("blog");
    assert_eq!(
        send(&server, &key, &[click("u1", "Apple"), dev]).await.0,
        200
    );
    let (status, body) = send(&server, &key, &[blog]).await;
    assert_eq!(status, 403, "{body}");
    assert!(message(&body).contains("restrictIndices"), "{body}");
    assert!(message(&body).contains("\"blog\""), "{body}");
    let objects = json!({"objects": [{"objectID": "p1", "brand": "Apple"}]});
    let r = server
        .admin(Method::POST, "/1/indexes/blog/objects")
        .body(objects.to_string());
    assert_eq!(r.send().await.unwrap().status(), 200);
    let r = server.as_key(Method::GET, "/1/indexes/blog/objects/p1", APP, &key);
    assert_eq!(r.send().await.unwrap().status(), 403);

    // The test client connects from 127.0.0.1.
    let here = secured_key(BROWSER_KEY, &[("restrictSources", "127.0.0.0/8")]);
    assert_eq!(send(&server, &here, &[click("u1", "Apple")]).await.0, 200);
    let elsewhere = secured_key(BROWSER_KEY, &[("restrictSources", "192.168.1.0/24")]);
    let (status, body) = send(&server, &elsewhere, &[click("u1", "Apple")]).await;
    assert_eq!(status, 403, "{body}");
    assert!(message(&body).contains("127.0.0.1"), "{body}");
    server.stop().await;
}

#[tokio::test]
async fn search_parameters_are_ignored_and_query_credentials_work() {
    let server = Server::embedded().await;
    assert_eq!(server.set_strategy().await.status(), 200);
    // `filters` and `hitsPerPage` apply to searches, which Affinity does
    // not serve: the key is accepted and its userToken still holds.
    let key = secured_key(
        BROWSER_KEY,
        &[
            ("filters", "brand:Apple AND color:red"),
            ("hitsPerPage", "5"),
            ("userToken", "alice"),
        ],
    );
    // As search-insights sends credentials: in the query string.
    let r = server
        .bare(Method::POST, "/1/events")
        .query(&[
            ("X-Algolia-Application-Id", APP),
            ("X-Algolia-API-Key", &key),
        ])
        .body(json!({"events": [click("alice", "Apple")]}).to_string());
    assert_eq!(r.send().await.unwrap().status(), 200);
    assert_eq!(profile(&server, &key, "alice").await.0, 200);
    assert_eq!(profile(&server, &key, "bob").await.0, 403);

    // A secured key has its parent's ACLs: a `search` parent's key may
    // not read the events debugger (`profiles`).
    let search_parent = secured_key(SEARCH_KEY, &[("userToken", "alice")]);
    let r = server.as_key(Method::GET, "/1/events/debug", APP, &search_parent);
    assert_eq!(r.send().await.unwrap().status(), 403);
    server.stop().await;
}

#[tokio::test]
async fn the_debugger_shows_a_user_token_key_its_user_only() {
    let mut keys = keys();
    keys.add(APP, "ops-key", [affinity_http::Acl::Profiles])
        .unwrap();
    let server = Server::with_keys(keys).await;
    let events = [click("alice", "Apple"), click("bob", "Apple")];
    assert_eq!(server.post_events(&events).await.status(), 200);
    let key = secured_key("ops-key", &[("userToken", "alice")]);
    let r = server.as_key(Method::GET, "/1/events/debug", APP, &key);
    let (status, body) = parts(r.send().await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    let users: Vec<&Value> = body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["event"]["userToken"])
        .collect();
    assert_eq!(users, [&json!("alice")], "{body}");
    let r = server.as_key(Method::GET, "/1/events/debug?userToken=bob", APP, &key);
    assert_eq!(r.send().await.unwrap().status(), 403);
    server.stop().await;
}

#[tokio::test]
async fn a_key_configured_as_its_digest_authenticates() {
    let mut keys = keys();
    keys.add(
        APP,
        &affinity_http::hash_key("hashed-secret"),
        [affinity_http::Acl::Search],
    )
    .unwrap();
    let server = Server::with_keys(keys).await;
    assert_eq!(server.set_strategy().await.status(), 200);
    assert_eq!(
        server.post_events(&[click("u1", "Apple")]).await.status(),
        200
    );
    assert_eq!(profile(&server, "hashed-secret", "u1").await.0, 200);
    assert_eq!(
        profile(&server, &affinity_http::hash_key("hashed-secret"), "u1")
            .await
            .0,
        401
    );
    // Its secured keys cannot be verified without the key itself.
    let (status, body) = profile(&server, &secured_key("hashed-secret", &[]), "u1").await;
    assert_eq!(status, 403, "{body}");
    assert!(message(&body).contains("plain text"), "{body}");
    server.stop().await;
}

#[tokio::test]
async fn per_user_endpoints_answer_a_user_token_key_for_its_user_only() {
    let mut keys = keys();
    keys.add(
        APP,
        "page-key",
        [affinity_http::Acl::Search, affinity_http::Acl::Profiles],
    )
    .unwrap();
    let server = Server::with_keys(keys).await;
    assert_eq!(server.set_strategy().await.status(), 200);
    let events = [click("alice", "Apple"), click("bob", "Apple")];
    assert_eq!(server.post_events(&events).await.status(), 200);
    let key = secured_key("page-key", &[("userToken", "alice")]);
    let status = |method: Method, path: String, body: Option<Value>| {
        let mut r = server.as_key(method, &path, APP, &key);
        if let Some(body) = body {
            r = r.body(body.to_string());
        }
        async move { r.send().await.unwrap().status().as_u16() }
    };
    for user in ["alice", "bob"] {
        let want = if user == "alice" { 200 } else { 403 };
        let boosts = format!("/1/profiles/personalization/{user}/optionalFilters");
        assert_eq!(status(Method::GET, boosts, None).await, want, "{user}");
        let explain = format!("/1/profiles/personalization/{user}/explain?facet=brand&value=Apple");
        assert_eq!(status(Method::GET, explain, None).await, want, "{user}");
        let rerank = json!({"userToken": user, "hits": [{"objectID": "p1", "brand": "Apple"}]});
        let path = "/1/indexes/products/rerank".to_string();
        assert_eq!(
            status(Method::POST, path, Some(rerank)).await,
            want,
            "{user}"
        );
    }
    // A preview reads other users' profiles: never with a restricted key.
    let preview = json!({"strategy": strategy(), "userTokens": ["alice"]});
    let path = "/1/strategies/personalization/preview".to_string();
    assert_eq!(status(Method::POST, path, Some(preview)).await, 403);
    server.stop().await;
}
