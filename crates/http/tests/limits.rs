//! The limits of a public endpoint, over real HTTP: rate limits per
//! application and per key (429 and `Retry-After`, then recovery), caps on
//! requests and writes in flight (503, reads kept), and clients that send
//! their headers or body slowly (closed or 408, other clients served).

mod common;

use std::time::{Duration, Instant};

use common::{Server, APP};
use reqwest::{Method, Response};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a test waits for something the server does on its own (a
/// request reaching a handler, a timeout firing) before failing.
const PATIENCE: Duration = Duration::from_secs(30);

fn config(limits: &str, app_extra: &str, key_extra: &str) -> String {
    format!(
        r#"
        [limits]
        {limits}

        [[apps]]
        id = "{APP}"
        {app_extra}
        keys = [
          {{ value = "admin-key", acl = ["admin"] }},
          {{ value = "browser-key", acl = ["events", "search"] {key_extra} }},
        ]

        [[apps]]
        id = "app2"
        keys = [{{ value = "other-admin", acl = ["admin"] }}]
        "#
    )
}

async fn strategy_read(server: &Server, app: &str, key: &str) -> Response {
    server
        .as_key(Method::GET, "/1/strategies/personalization", app, key)
        .send()
        .await
        .unwrap()
}

/// The error body of a refused request: its status and message.
async fn refusal(response: Response) -> (u16, Option<String>, String) {
    let status = response.status().as_u16();
    let retry = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let body: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert_eq!(body["status"], status, "{body}");
    (status, retry, body["message"].as_str().unwrap().to_string())
}

/// The value of the metric line starting with `name` (labels included).
async fn metric(server: &Server, name: &str) -> u64 {
    let text = server.metrics().await;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn an_application_over_its_rate_gets_429_then_recovers() {
    let server = Server::configured(&config(
        "",
        "rate_limit = { per_second = 1, burst = 3 }",
        "",
    ))
    .await;
    for _ in 0..3 {
        // No strategy yet: 404, but served.
        assert_eq!(strategy_read(&server, APP, "admin-key").await.status(), 404);
    }
    let (status, retry, message) = refusal(strategy_read(&server, APP, "admin-key").await).await;
    assert_eq!(status, 429);
    assert_eq!(retry.as_deref(), Some("1"));
    assert!(message.contains("\"app1\""), "{message}");
    assert!(message.contains("1 requests per second"), "{message}");
    // Events are refused alike, and counted as rejected for the reason.
    let events = json!({"events": [{"eventType": "view", "eventName": "Viewed",
        "index": "products", "userToken": "u1", "objectIDs": ["o1"]}]});
    let refused = server
        .admin(Method::POST, "/1/events")
        .body(events.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    // Another application has its own limits (none).
    for _ in 0..5 {
        assert_eq!(
            strategy_read(&server, "app2", "other-admin").await.status(),
            404
        );
    }
    let text = server.metrics().await;
    assert!(
        text.contains("affinity_http_rate_limited_total{app=\"app1\",limit=\"application\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("affinity_events_rejected_total{reason=\"rate_limited\"} 1"),
        "{text}"
    );
    // After the wait the client was told, the bucket has a token again.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(strategy_read(&server, APP, "admin-key").await.status(), 404);
    let stored = server.engine.app(APP).unwrap();
    let none = server
        .engine
        .user_events(&stored, "u1", 0, server.engine.now_millis() + 1)
        .unwrap();
    assert!(none.is_empty(), "a refused batch stored nothing");
    server.stop().await;
}

#[tokio::test]
async fn a_key_over_its_rate_gets_429_and_its_secured_keys_count_with_it() {
    let server = Server::configured(&config(
        "",
        "",
        ", rate_limit = { per_second = 0.5, burst = 2 }",
    ))
    .await;
    let secured = affinity_http::Restrictions {
        user_token: Some("u1".into()),
        ..Default::default()
    }
    .generate("browser-key");
    assert_eq!(
        strategy_read(&server, APP, "browser-key").await.status(),
        404
    );
    assert_eq!(strategy_read(&server, APP, &secured).await.status(), 404);
    let (status, retry, message) = refusal(strategy_read(&server, APP, &secured).await).await;
    assert_eq!(status, 429);
    assert_eq!(retry.as_deref(), Some("2"), "a token every 2 s");
    assert!(message.contains("this API key"), "{message}");
    assert_eq!(
        strategy_read(&server, APP, "browser-key").await.status(),
        429
    );
    // The application's other keys are not limited.
    for _ in 0..4 {
        assert_eq!(strategy_read(&server, APP, "admin-key").await.status(), 404);
    }
    assert_eq!(
        metric(
            &server,
            "affinity_http_rate_limited_total{app=\"app1\",limit=\"key\"}"
        )
        .await,
        2
    );
    server.stop().await;
}

/// A raw connection that sent a request's headers and part of its body,
/// and holds the rest: the request is in flight until the body ends.
struct Held(TcpStream);

impl Held {
    async fn post(server: &Server, path: &str) -> Held {
        let addr = server.base.trim_start_matches("http://");
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: {addr}\r\nx-algolia-application-id: {APP}\r\n\
             x-algolia-api-key: admin-key\r\ncontent-length: 1000\r\n\r\n{{\"events\""
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        Held(stream)
    }

    /// The status line's code of the answer, once it comes.
    async fn status(mut self) -> u16 {
        let mut answer = Vec::new();
        let mut buf = [0u8; 1024];
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = tokio::time::timeout(PATIENCE, self.0.read(&mut buf))
                .await
                .expect("an answer came")
                .unwrap();
            assert!(n > 0, "the server closed without answering");
            answer.extend_from_slice(&buf[..n]);
        }
        let line = String::from_utf8_lossy(&answer);
        line.split(' ').nth(1).unwrap().parse().unwrap()
    }
}

/// Wait until `/metrics` shows `n` requests in flight (the held ones: the
/// metrics request itself is not counted).
async fn wait_in_flight(server: &Server, n: u64) {
    let start = Instant::now();
    while metric(server, "affinity_http_in_flight").await != n {
        assert!(start.elapsed() < PATIENCE, "never {n} requests in flight");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn over_the_caps_writes_are_shed_first_and_reads_still_served() {
    let server = Server::configured(&config(
        "max_in_flight = 2\nmax_writes_in_flight = 1",
        "",
        "",
    ))
    .await;
    assert_eq!(server.set_strategy().await.status(), 200);
    let write = Held::post(&server, "/1/events").await;
    wait_in_flight(&server, 1).await;
    // A second write is shed...
    let event = json!({"eventType": "view", "eventName": "Viewed", "index": "products",
        "userToken": "u1", "objectIDs": ["o1"]});
    let (status, retry, message) =
        refusal(server.post_events(std::slice::from_ref(&event)).await).await;
    assert_eq!(status, 503);
    assert_eq!(retry.as_deref(), Some("1"));
    assert!(message.contains("1 writes in flight"), "{message}");
    // ...while reads are served.
    let read = server
        .admin(Method::GET, "/1/profiles/personalization/u1")
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 404);
    // A re-ranking is a read sent with POST: held, it takes the last place.
    let rerank = Held::post(&server, "/1/indexes/products/rerank").await;
    wait_in_flight(&server, 2).await;
    let (status, _, message) = refusal(
        server
            .admin(Method::GET, "/1/profiles/personalization/u1")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 503);
    assert!(message.contains("2 requests in flight"), "{message}");
    // Health and metrics are never refused.
    assert_eq!(
        server
            .bare(Method::GET, "/health")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let text = server.metrics().await;
    assert!(text.contains("affinity_http_shed_total{reason=\"writes_in_flight\"} 1"));
    assert!(text.contains("affinity_http_shed_total{reason=\"in_flight\"} 1"));
    // The held requests end (their clients gone): writes get in again.
    drop((write, rerank));
    let start = Instant::now();
    loop {
        let response = server.post_events(std::slice::from_ref(&event)).await;
        if response.status() == 200 {
            break;
        }
        assert_eq!(response.status(), 503);
        assert!(start.elapsed() < PATIENCE, "writes never got in again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stored = server.engine.app(APP).unwrap();
    let events = server
        .engine
        .user_events(&stored, "u1", 0, server.engine.now_millis() + 1)
        .unwrap();
    assert_eq!(events.len(), 1, "only the acknowledged event is stored");
    server.stop().await;
}

#[tokio::test]
async fn a_body_sent_too_slowly_gets_408_while_others_are_served() {
    let server = Server::configured(&config("body_timeout_secs = 1", "", "")).await;
    let mut slow = Held::post(&server, "/1/events").await;
    // One byte every 100 ms: the body would take 100 s.
    let trickle = tokio::spawn(async move {
        for _ in 0..1000 {
            if slow.0.write_all(b" ").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            let mut peek = [0u8; 1];
            if let Ok(Ok(_)) =
                tokio::time::timeout(Duration::from_millis(1), slow.0.peek(&mut peek)).await
            {
                break; // the answer is there
            }
        }
        slow.status().await
    });
    // Meanwhile, other clients are served.
    let mut served = 0;
    while !trickle.is_finished() {
        assert_eq!(strategy_read(&server, APP, "admin-key").await.status(), 404);
        served += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(served > 0);
    assert_eq!(trickle.await.unwrap(), 408);
    assert_eq!(
        metric(&server, "affinity_http_shed_total{reason=\"body_timeout\"}").await,
        1
    );
    server.stop().await;
}

#[tokio::test]
async fn headers_sent_too_slowly_close_the_connection_while_others_are_served() {
    let server = Server::configured(&config("header_timeout_secs = 1", "", "")).await;
    let addr = server.base.trim_start_matches("http://").to_string();
    let mut slow = TcpStream::connect(&addr).await.unwrap();
    slow.write_all(b"GET /health HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    // A header of one more byte every 100 ms, never finished.
    let trickle = tokio::spawn(async move {
        let started = Instant::now();
        let mut peek = [0u8; 64];
        while started.elapsed() < PATIENCE {
            if slow.write_all(b"x-slow: y\r\n").await.is_err() {
                return true;
            }
            match tokio::time::timeout(Duration::from_millis(100), slow.read(&mut peek)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return true, // closed by the server
                Ok(Ok(_)) => return false,             // answered: the headers were taken
                Err(_) => {}
            }
        }
        false
    });
    let mut served = 0;
    while !trickle.is_finished() {
        assert_eq!(strategy_read(&server, APP, "admin-key").await.status(), 404);
        served += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(served > 0);
    assert!(
        trickle.await.unwrap(),
        "the server closed the connection of the slow client"
    );
    server.stop().await;
}

#[tokio::test]
async fn bad_limits_in_the_file_are_refused_naming_them() {
    let zero = affinity_http::Config::parse(&config("max_in_flight = 0", "", "")).unwrap();
    let err = zero.limiter().unwrap_err().to_string();
    assert!(err.contains("max_in_flight"), "{err}");
    let rate =
        affinity_http::Config::parse(&config("", "rate_limit = { per_second = 0 }", "")).unwrap();
    let err = rate.limiter().unwrap_err().to_string();
    assert!(
        err.contains("\"app1\"") && err.contains("per_second"),
        "{err}"
    );
    let unknown = affinity_http::Config::parse(&config("max_in_fligth = 3", "", ""));
    assert!(unknown.unwrap_err().to_string().contains("max_in_fligth"));
}

/// Event batches are stored on the ingest threads at any `ingest_nice`,
/// at the reads' priority (0) as at the lowest (19), and on one thread as
/// on the default: acknowledged, then in the profile. A value out of
/// range is refused naming it.
#[tokio::test]
async fn event_batches_are_stored_at_any_ingest_nice() {
    for (nice, threads) in [(0, ""), (19, ""), (5, "ingest_threads = 1")] {
        let limits = format!("ingest_nice = {nice}\n{threads}");
        let server = Server::configured(&config(&limits, "", "")).await;
        let strategy = server
            .as_key(
                Method::POST,
                "/1/strategies/personalization",
                APP,
                "admin-key",
            )
            .body(common::strategy().to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(strategy.status(), 200, "ingest_nice {nice}");
        let events: Vec<Value> = (0..20).map(|_| common::click("u1", "nike")).collect();
        let sent = server
            .as_key(Method::POST, "/1/events", APP, "browser-key")
            .body(json!({ "events": events }).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(sent.status(), 200, "ingest_nice {nice}");
        let profile = server
            .as_key(
                Method::GET,
                "/1/profiles/personalization/u1",
                APP,
                "admin-key",
            )
            .send()
            .await
            .unwrap();
        let (status, body) = common::parts(profile).await;
        assert_eq!(status, 200, "ingest_nice {nice}: {body}");
        assert_eq!(
            body["scores"]["brand"]["nike"], 20,
            "ingest_nice {nice}: {body}"
        );
        assert_eq!(metric(&server, "affinity_events_ingested_total").await, 20);
        server.stop().await;
    }
    let bad = affinity_http::Config::parse(&config("ingest_nice = 20", "", "")).unwrap();
    let err = bad.limiter().unwrap_err().to_string();
    assert!(err.contains("ingest_nice") && err.contains("20"), "{err}");
    let none = affinity_http::Config::parse(&config("ingest_threads = 0", "", "")).unwrap();
    let err = none.limiter().unwrap_err().to_string();
    assert!(err.contains("ingest_threads"), "{err}");
}
