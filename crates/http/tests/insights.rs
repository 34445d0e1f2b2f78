//! Insights as Algolia's clients send it, over real HTTP: compressed
//! bodies and their limits, any content type, filters decoded as the API
//! defines, credentials in any letter case, CORS for browsers, the events
//! debugger with rejections counted by reason, and catalog deletion.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::*;
use flate2::write::{DeflateEncoder, GzEncoder, ZlibEncoder};
use flate2::Compression;
use reqwest::Method;
use serde_json::{json, Value};

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn batch(events: &[Value]) -> Vec<u8> {
    json!({ "events": events }).to_string().into_bytes()
}

async fn profile(server: &Server, user: &str) -> (u16, Value) {
    let path = format!("/1/profiles/personalization/{user}");
    parts(server.admin(Method::GET, &path).send().await.unwrap()).await
}

async fn debug(server: &Server, query: &str) -> (u16, Value) {
    let path = format!("/1/events/debug{query}");
    parts(server.admin(Method::GET, &path).send().await.unwrap()).await
}

#[tokio::test(flavor = "multi_thread")]
async fn compressed_bodies_under_any_content_type_are_accepted_within_the_limits() {
    let server = Server::embedded().await;
    assert_eq!(parts(server.set_strategy().await).await.0, 200);
    let mut zlib = ZlibEncoder::new(Vec::new(), Compression::default());
    zlib.write_all(&batch(&[click("zlib", "Apple")])).unwrap();
    let mut raw = DeflateEncoder::new(Vec::new(), Compression::default());
    raw.write_all(&batch(&[click("raw", "Apple")])).unwrap();
    let cases = [
        (
            "plain",
            None,
            Some("application/json"),
            batch(&[click("plain", "Apple")]),
        ),
        (
            "beacon",
            None,
            Some("text/plain;charset=UTF-8"),
            batch(&[click("beacon", "Apple")]),
        ),
        ("none", None, None, batch(&[click("none", "Apple")])),
        (
            "form",
            None,
            Some("application/x-www-form-urlencoded"),
            batch(&[click("form", "Apple")]),
        ),
        (
            "gz",
            Some("gzip"),
            Some("application/json"),
            gzip(&batch(&[click("gz", "Apple")])),
        ),
        (
            "zlib",
            Some("deflate"),
            Some("text/plain"),
            zlib.finish().unwrap(),
        ),
        ("raw", Some("Deflate"), None, raw.finish().unwrap()),
    ];
    for (user, encoding, content_type, body) in cases {
        let mut r = server.admin(Method::POST, "/1/events").body(body);
        if let Some(e) = encoding {
            r = r.header("content-encoding", e);
        }
        if let Some(t) = content_type {
            r = r.header("content-type", t);
        }
        let (status, body) = parts(r.send().await.unwrap()).await;
        assert_eq!(status, 200, "{user}: {body}");
        let (status, p) = profile(&server, user).await;
        assert_eq!(
            (status, &p["scores"]["brand"]),
            (200, &json!({"Apple": 20})),
            "{user}"
        );
    }

    // A compressed bomb: 64 MiB of JSON whitespace in about 64 KiB.
    let mut bomb_json = b"{\"events\":[".to_vec();
    bomb_json.resize(64 << 20, b' ');
    let bomb = gzip(&bomb_json);
    assert!(bomb.len() < 100 << 10);
    let started = Instant::now();
    let r = server
        .admin(Method::POST, "/1/events")
        .header("content-encoding", "gzip")
        .body(bomb);
    let (status, body) = parts(r.send().await.unwrap()).await;
    assert_eq!(status, 413, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("decompressed"),
        "{body}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    // Just under the limit once decompressed is fine.
    let mut padded = batch(&[click("padded", "Apple")]);
    padded.resize(2 * 1024 * 1024, b' ');
    let r = server
        .admin(Method::POST, "/1/events")
        .header("content-encoding", "gzip")
        .body(gzip(&padded));
    assert_eq!(parts(r.send().await.unwrap()).await.0, 200);

    let r = server
        .admin(Method::POST, "/1/events")
        .header("content-encoding", "gzip")
        .body(batch(&[click("notgz", "Apple")]));
    let (status, body) = parts(r.send().await.unwrap()).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("gzip"), "{body}");
    let r = server
        .admin(Method::POST, "/1/events")
        .header("content-encoding", "br")
        .body(batch(&[click("br", "Apple")]));
    assert_eq!(parts(r.send().await.unwrap()).await.0, 415);
    for user in ["notgz", "br"] {
        assert_eq!(profile(&server, user).await.0, 404, "{user} stored nothing");
    }
    let text = server.metrics().await;
    for reason in ["too_large", "bad_encoding", "unsupported_encoding"] {
        let line = format!("affinity_events_rejected_total{{reason=\"{reason}\"}} 1\n");
        assert!(text.contains(&line), "{line} in {text}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn filters_are_url_decoded_and_a_malformed_one_is_named() {
    let server = Server::embedded().await;
    assert_eq!(parts(server.set_strategy().await).await.0, 200);
    let mut event = click("f1", "x");
    event["filters"] = json!(["brand%3AApple", "brand:10%25", "color%3Adark%20red"]);
    assert_eq!(
        parts(server.post_events(&[event.clone()]).await).await.0,
        200
    );
    let (_, p) = profile(&server, "f1").await;
    assert_eq!(p["scores"]["brand"], json!({"Apple": 20, "10%": 20}), "{p}");
    assert_eq!(p["scores"]["color"], json!({"dark red": 10}), "{p}");

    event["userToken"] = json!("f2");
    event["filters"] = json!(["brand:Apple", "discount:10%"]);
    let (status, body) = parts(server.post_events(&[event]).await).await;
    assert_eq!(status, 422);
    assert_eq!(
        body["message"],
        "Filters must be URL-encoded: \"discount:10%\" has a malformed percent-encoding"
    );
    assert_eq!(profile(&server, "f2").await.0, 404);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn credentials_match_in_any_letter_case_and_cors_serves_browsers() {
    let server = Server::embedded().await;
    let query = format!("/1/events?X-ALGOLIA-APPLICATION-ID={APP}&x-AlGoLiA-aPi-KeY={EVENTS_KEY}");
    let r = server
        .bare(Method::POST, &query)
        .header("content-type", "text/plain")
        .body(batch(&[click("q1", "Apple")]));
    assert_eq!(parts(r.send().await.unwrap()).await.0, 200);
    let wrong = query.replace(EVENTS_KEY, "wrong");
    let r = server
        .bare(Method::POST, &wrong)
        .body(batch(&[click("q0", "Apple")]));
    assert_eq!(parts(r.send().await.unwrap()).await.0, 401);
    let text = server.metrics().await;
    assert!(
        text.contains("affinity_events_rejected_total{reason=\"unauthorized\"} 1\n"),
        "{text}"
    );
    let r = server
        .bare(Method::POST, "/1/events")
        .header("X-Algolia-Application-Id", APP)
        .header("X-ALGOLIA-API-KEY", EVENTS_KEY)
        .body(batch(&[click("q2", "Apple")]));
    assert_eq!(parts(r.send().await.unwrap()).await.0, 200);

    // A credentialed fetch's preflight from another origin (Chrome asks
    // for private-network access when a public page calls a local server).
    let origin = "https://shop.example";
    let r = server
        .bare(Method::OPTIONS, "/1/events")
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "content-type,x-algolia-application-id,x-algolia-api-key,x-algolia-agent",
        )
        .header("access-control-request-private-network", "true")
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let h = r.headers();
    assert_eq!(h["access-control-allow-origin"], origin);
    assert_eq!(h["access-control-allow-credentials"], "true");
    assert_eq!(h["access-control-allow-private-network"], "true");
    assert!(h["access-control-allow-methods"]
        .to_str()
        .unwrap()
        .contains("POST"));
    let allowed = h["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_lowercase();
    for name in [
        "content-type",
        "x-algolia-application-id",
        "x-algolia-api-key",
        "x-algolia-agent",
    ] {
        assert!(allowed.contains(name), "{name} in {allowed}");
    }
    assert!(h["vary"]
        .to_str()
        .unwrap()
        .to_lowercase()
        .contains("origin"));
    // The request itself, as sendBeacon sends it (credentials included).
    let r = server
        .bare(Method::POST, &query)
        .header("origin", origin)
        .header("content-type", "text/plain;charset=UTF-8")
        .body(batch(&[click("q3", "Apple")]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["access-control-allow-origin"], origin);
    assert_eq!(r.headers()["access-control-allow-credentials"], "true");
    assert_eq!(r.status(), 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_debugger_shows_accepted_and_rejected_events_with_their_origin() {
    let server = Server::embedded().await;
    let mut bad = click("d2", "Apple");
    bad["eventType"] = json!("purchase");
    let r = server
        .admin(Method::POST, "/1/events")
        .header("origin", "https://shop.example")
        .header("referer", "https://shop.example/p/1")
        .header("user-agent", "test-agent/1")
        .body(batch(&[click("d1", "Apple"), bad.clone()]));
    assert_eq!(parts(r.send().await.unwrap()).await.0, 422);
    assert_eq!(
        parts(server.post_events(&[click("d3", "Samsung")]).await)
            .await
            .0,
        200
    );
    let r = server.admin(Method::POST, "/1/events").body("brand=Apple");
    assert_eq!(parts(r.send().await.unwrap()).await.0, 400);
    let r = server
        .as_key(Method::POST, "/1/events", APP, SEARCH_KEY)
        .body(batch(&[click("d4", "Apple")]));
    assert_eq!(parts(r.send().await.unwrap()).await.0, 403);

    let (status, all) = debug(&server, "").await;
    assert_eq!(status, 200, "{all}");
    let events = all["events"].as_array().unwrap();
    assert_eq!(events.len(), 5, "{all}");
    assert_eq!(all["cursor"], 5);
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    // The rejected batch: both events, the reason naming the one at fault.
    for e in &events[..2] {
        assert_eq!(e["status"], "rejected");
        assert_eq!(
            e["rejection"],
            json!({"status": 422, "code": "eventType",
                   "message": "events[1]: EventType must be one of view, click, conversion"})
        );
        assert_eq!(e["request"]["origin"], "https://shop.example");
        assert_eq!(e["request"]["referer"], "https://shop.example/p/1");
        assert_eq!(e["request"]["userAgent"], "test-agent/1");
        assert!(e["request"]["remoteAddr"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:"));
    }
    assert_eq!(events[0]["event"], click("d1", "Apple"));
    assert_eq!(events[1]["event"], bad);
    assert_eq!(events[2]["status"], "accepted");
    assert_eq!(events[2]["rejection"], Value::Null);
    assert_eq!(events[3]["event"], "brand=Apple");
    assert_eq!(events[3]["rejection"]["code"], "invalid_json");
    assert_eq!(events[4]["rejection"]["code"], "forbidden");
    assert!(events[2]["receivedAt"].as_str().unwrap().ends_with('Z'));

    let users = |v: &Value| -> Vec<String> {
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["event"]["userToken"].as_str().unwrap_or("-").to_string())
            .collect()
    };
    assert_eq!(users(&debug(&server, "?status=accepted").await.1), ["d3"]);
    assert_eq!(
        users(&debug(&server, "?status=rejected&limit=2").await.1),
        ["-", "-"]
    );
    assert_eq!(users(&debug(&server, "?userToken=d2").await.1), ["d2"]);
    assert_eq!(
        users(
            &debug(&server, "?eventName=Product%20Clicked&since=1")
                .await
                .1
        ),
        ["d2", "d3"]
    );
    for bad in [
        "?status=ok",
        "?limit=0",
        "?limit=1001",
        "?since=-1",
        "?wait=61",
    ] {
        assert_eq!(debug(&server, bad).await.0, 400, "{bad}");
    }
    let r = server.as_key(Method::GET, "/1/events/debug", APP, EVENTS_KEY);
    assert_eq!(parts(r.send().await.unwrap()).await.0, 403);
    let r = server.as_key(Method::GET, "/1/events/debug", OTHER_APP, OTHER_ADMIN);
    assert_eq!(parts(r.send().await.unwrap()).await.1["events"], json!([]));

    // A long poll answers when an event arrives, not at its deadline.
    let path = "/1/events/debug?since=5&wait=30&status=accepted";
    let poll = server.admin(Method::GET, path).send();
    let poller = tokio::spawn(async move {
        let started = Instant::now();
        (parts(poll.await.unwrap()).await, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        parts(server.post_events(&[click("d5", "Apple")]).await)
            .await
            .0,
        200
    );
    let ((status, answer), elapsed) = poller.await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(users(&answer), ["d5"]);
    assert_eq!(answer["cursor"], 6);
    assert!(elapsed < Duration::from_secs(20), "{elapsed:?}");
    // Nothing new: the poll ends at its deadline, empty, cursor unchanged.
    let (_, answer) = debug(&server, "?since=6&wait=1").await;
    assert_eq!(
        (answer["events"].clone(), answer["cursor"].clone()),
        (json!([]), json!(6))
    );

    let text = server.metrics().await;
    for line in [
        "affinity_events_rejected_total{reason=\"eventType\"} 2\n",
        "affinity_events_rejected_total{reason=\"invalid_json\"} 1\n",
        "affinity_events_rejected_total{reason=\"forbidden\"} 1\n",
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn catalog_objects_are_deleted_and_counted_events_keep_their_facets() {
    let server = Server::embedded().await;
    assert_eq!(parts(server.set_strategy().await).await.0, 200);
    let path = "/1/indexes/products/objects";
    let r = server
        .admin(Method::POST, path)
        .body(json!({"objects": [{"objectID": "p1", "brand": "Apple"}]}).to_string());
    assert_eq!(parts(r.send().await.unwrap()).await.0, 200);
    let clicked = |user: &str| {
        json!({"eventType": "click", "eventName": "Product Clicked", "index": "products",
               "userToken": user, "objectIDs": ["p1"]})
    };
    assert_eq!(
        parts(server.post_events(&[clicked("before")]).await)
            .await
            .0,
        200
    );

    let r = server.as_key(Method::DELETE, &format!("{path}/p1"), APP, EVENTS_KEY);
    assert_eq!(parts(r.send().await.unwrap()).await.0, 403);
    for _ in 0..2 {
        let r = server.admin(Method::DELETE, &format!("{path}/p1"));
        let (status, body) = parts(r.send().await.unwrap()).await;
        assert_eq!((status, &body["objectID"]), (200, &json!("p1")), "{body}");
        assert!(body["deletedAt"].as_str().unwrap().ends_with('Z'));
    }
    let r = server.admin(Method::GET, &format!("{path}/p1"));
    assert_eq!(parts(r.send().await.unwrap()).await.0, 404);
    assert_eq!(
        parts(server.post_events(&[clicked("after")]).await).await.0,
        200
    );
    let (status, p) = profile(&server, "before").await;
    assert_eq!(
        (status, &p["scores"]["brand"]),
        (200, &json!({"Apple": 20}))
    );
    assert_eq!(
        profile(&server, "after").await.0,
        404,
        "p1 resolves to nothing now"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_poll_ends_when_the_server_stops() {
    let server = Server::embedded().await;
    let poll = server
        .admin(Method::GET, "/1/events/debug?since=0&wait=60")
        .send();
    let poller = tokio::spawn(async move { parts(poll.await.unwrap()).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    server.stop().await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let (status, answer) = poller.await.unwrap();
    assert_eq!((status, &answer["events"]), (200, &json!([])), "{answer}");
}
