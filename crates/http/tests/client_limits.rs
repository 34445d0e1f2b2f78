//! Per-client limits of API keys (Algolia's `maxQueriesPerIPPerHour`,
//! `clients.rs`): a stored key allows each client address its requests
//! an hour, then 429 with `Retry-After`; another address, or a secured
//! key restricted to another user token, has its own; the limit is
//! listed, changed and refused when bad like the key's other fields.
//! Behind trusted proxies the client is the address they forwarded; an
//! untrusted peer's `X-Forwarded-For` is ignored.

mod common;

use std::net::IpAddr;

use affinity_http::Restrictions;
use common::*;
use reqwest::Method;
use serde_json::{json, Value};

/// A client whose connections come from `source` (any 127/8 address
/// reaches the loopback server).
fn client_from(source: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(source.parse::<IpAddr>().unwrap())
        .build()
        .unwrap()
}

/// Send one event for `user` with `key` through `client`, with
/// `forwarded` as `X-Forwarded-For`; the status, `Retry-After` and body.
async fn event(
    server: &Server,
    client: &reqwest::Client,
    key: &str,
    user: &str,
    forwarded: Option<&str>,
) -> (u16, Option<u64>, Value) {
    let mut r = client
        .post(format!("{}/1/events", server.base))
        .header("x-algolia-application-id", APP)
        .header("x-algolia-api-key", key)
        .body(json!({"events": [click(user, "Apple")]}).to_string());
    if let Some(f) = forwarded {
        r = r.header("x-forwarded-for", f);
    }
    let response = r.send().await.unwrap();
    let retry = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let (status, body) = parts(response).await;
    (status, retry, body)
}

async fn call(server: &Server, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut r = server.admin(method, path);
    if let Some(body) = body {
        r = r.body(body.to_string());
    }
    parts(r.send().await.unwrap()).await
}

#[tokio::test]
async fn a_stored_key_limits_each_client_per_hour() {
    let server = Server::embedded().await;
    assert_eq!(server.set_strategy().await.status(), 200);
    let (status, made) = call(
        &server,
        Method::POST,
        "/1/keys",
        Some(json!({"acl": ["events", "search"], "maxQueriesPerIPPerHour": 3})),
    )
    .await;
    assert_eq!(status, 200, "{made}");
    let key = made["key"].as_str().unwrap().to_string();
    let (status, shown) = call(&server, Method::GET, &format!("/1/keys/{key}"), None).await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["maxQueriesPerIPPerHour"], 3, "{shown}");

    let (one, two) = (client_from("127.0.0.1"), client_from("127.0.0.2"));
    for i in 0..3 {
        let (status, _, body) = event(&server, &one, &key, "u1", None).await;
        assert_eq!(status, 200, "request {i}: {body}");
    }
    let (status, retry, body) = event(&server, &one, &key, "u1", None).await;
    assert_eq!(status, 429, "{body}");
    // One request every 20 minutes once the hour is spent.
    assert!(
        retry.is_some_and(|s| (1190..=1200).contains(&s)),
        "{retry:?}"
    );
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("3 requests an hour from one IP address"),
        "{message}"
    );
    // Another address has its own hour.
    assert_eq!(event(&server, &two, &key, "u1", None).await.0, 200);
    // Not behind a trusted proxy: X-Forwarded-For changes nothing.
    assert_eq!(
        event(&server, &one, &key, "u1", Some("198.51.100.7"))
            .await
            .0,
        429
    );

    // Secured keys restricted to a user token count per token, even
    // from the address that spent its hour.
    let secured = |user: &str| {
        Restrictions {
            user_token: Some(user.into()),
            ..Restrictions::default()
        }
        .generate(&key)
    };
    let (s1, s2) = (secured("u1"), secured("u2"));
    for _ in 0..3 {
        assert_eq!(event(&server, &one, &s1, "u1", None).await.0, 200);
    }
    let (status, _, body) = event(&server, &one, &s1, "u1", None).await;
    assert_eq!(status, 429, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("one user token"),
        "{body}"
    );
    assert_eq!(event(&server, &one, &s2, "u2", None).await.0, 200);
    let metrics = server.metrics().await;
    assert!(
        metrics.contains(&format!(
            "affinity_http_rate_limited_total{{app=\"{APP}\",limit=\"client\"}} 3"
        )),
        "{metrics}"
    );

    // Bad limits: 400 naming the field, the key unchanged.
    for bad in [json!(-1), json!("ten"), json!(1.5), json!(5_000_000_000u64)] {
        let (status, body) = call(
            &server,
            Method::PUT,
            &format!("/1/keys/{key}"),
            Some(json!({"acl": ["events", "search"], "maxQueriesPerIPPerHour": bad})),
        )
        .await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains("maxQueriesPerIPPerHour"),
            "{body}"
        );
    }
    let (_, shown) = call(&server, Method::GET, &format!("/1/keys/{key}"), None).await;
    assert_eq!(shown["maxQueriesPerIPPerHour"], 3, "{shown}");
    assert_eq!(event(&server, &one, &key, "u1", None).await.0, 429);

    // 0 lifts the limit (as in Algolia), at once on this server.
    let (status, body) = call(
        &server,
        Method::PUT,
        &format!("/1/keys/{key}"),
        Some(json!({"acl": ["events", "search"], "maxQueriesPerIPPerHour": 0})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (_, shown) = call(&server, Method::GET, &format!("/1/keys/{key}"), None).await;
    assert_eq!(shown["maxQueriesPerIPPerHour"], 0, "{shown}");
    assert_eq!(event(&server, &one, &key, "u1", None).await.0, 200);
    server.stop().await;
}

#[tokio::test]
async fn behind_trusted_proxies_the_client_is_the_forwarded_address() {
    let server = Server::configured(
        r#"
trusted_proxies = ["127.0.0.1"]

[[apps]]
id = "app1"
keys = [
  { value = "admin-secret", acl = ["admin"] },
  { value = "page-key", acl = ["events"], max_queries_per_ip_per_hour = 2 },
]
"#,
    )
    .await;
    assert_eq!(APP, "app1");
    let r = server
        .as_key(
            Method::POST,
            "/1/strategies/personalization",
            APP,
            "admin-secret",
        )
        .body(strategy().to_string());
    assert_eq!(r.send().await.unwrap().status(), 200);
    let (proxy, direct) = (client_from("127.0.0.1"), client_from("127.0.0.2"));
    let key = "page-key";
    // Through the proxy: each forwarded address has its own two.
    for _ in 0..2 {
        let (status, _, body) = event(&server, &proxy, key, "u1", Some("198.51.100.1")).await;
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(
        event(&server, &proxy, key, "u1", Some("198.51.100.1"))
            .await
            .0,
        429
    );
    // A forged entry left of the proxy's is not believed.
    assert_eq!(
        event(
            &server,
            &proxy,
            key,
            "u1",
            Some("198.51.100.9, 198.51.100.1")
        )
        .await
        .0,
        429
    );
    assert_eq!(
        event(&server, &proxy, key, "u1", Some("198.51.100.2"))
            .await
            .0,
        200
    );
    // A peer that is not a trusted proxy is the client, whatever it
    // forwards.
    for forwarded in ["203.0.113.1", "203.0.113.2"] {
        assert_eq!(
            event(&server, &direct, key, "u1", Some(forwarded)).await.0,
            200
        );
    }
    let (status, retry, _) = event(&server, &direct, key, "u1", Some("203.0.113.3")).await;
    assert_eq!(status, 429);
    assert!(
        retry.is_some_and(|s| (1790..=1800).contains(&s)),
        "{retry:?}"
    );
    // The admin key has no such limit.
    for _ in 0..5 {
        assert_eq!(
            event(&server, &direct, "admin-secret", "u1", None).await.0,
            200
        );
    }
    server.stop().await;
}

#[test]
fn bad_trusted_proxies_are_refused_naming_the_entry() {
    let config = affinity_http::Config::parse(
        r#"
trusted_proxies = ["10.0.0.0/8", "10.0.0.0/40"]

[[apps]]
id = "shop"
keys = [{ value = "admin-secret", acl = ["admin"] }]
"#,
    )
    .unwrap();
    let err = config.limiter().unwrap_err();
    assert!(err.to_string().contains("\"10.0.0.0/40\""), "{err}");
}
