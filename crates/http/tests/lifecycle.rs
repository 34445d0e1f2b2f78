//! Graceful shutdown, and two servers sharing one store (the emulator).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use reqwest::Method;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_finishes_requests_in_flight() {
    finishes_requests_in_flight(Server::embedded().await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_finishes_requests_in_flight_on_per_core_threads() {
    finishes_requests_in_flight(Server::embedded_per_core().await).await;
}

/// Stopping `server` with a request half sent: the request is answered,
/// its events stored, and the port closed.
async fn finishes_requests_in_flight(server: Server) {
    assert_eq!(parts(server.set_strategy().await).await.0, 200);
    let engine = Arc::clone(&server.engine);
    let addr = server.base.trim_start_matches("http://").to_string();
    let body = json!({"events": [click("late", "Apple")]}).to_string();
    let head = format!(
        "POST /1/events HTTP/1.1\r\nhost: {addr}\r\nx-algolia-application-id: {APP}\r\n\
         x-algolia-api-key: {ADMIN}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body.as_bytes()[..10]).await.unwrap();
    // Let the server start on the request, then ask it to stop.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stopping = tokio::spawn(server.stop());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!stopping.is_finished(), "stopped with a request in flight");
    stream.write_all(&body.as_bytes()[10..]).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let (_, body) = response.split_once("\r\n\r\n").unwrap();
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(body, json!({"status": 200, "message": "OK"}));
    stopping.await.unwrap();
    assert!(engine.user_row_count(APP, "late").unwrap() > 0);
    assert!(tokio::net::TcpStream::connect(&addr).await.is_err());
}

#[ignore = "needs the Cloud Bigtable emulator (scripts/test runs it)"]
#[tokio::test(flavor = "multi_thread")]
async fn two_servers_on_the_emulator_share_their_data() {
    let store = affinity_bigtable::emulator::test_store();
    let a = Server::on(store.clone()).await;
    let b = Server::on(store).await;
    assert_eq!(parts(a.set_strategy().await).await.0, 200);
    let now = a.engine.now_millis();
    let mut events = vec![
        click("shared", "Apple"),
        click("shared", "Apple"),
        click("shared", "Sony"),
    ];
    for (i, e) in events.iter_mut().enumerate() {
        e["timestamp"] = json!(now - i as i64);
    }
    assert_eq!(parts(a.post_events(&events).await).await.0, 200);
    let path = "/1/profiles/personalization/shared";
    let (status, from_b) = parts(b.admin(Method::GET, path).send().await.unwrap()).await;
    assert_eq!(status, 200, "{from_b}");
    assert_eq!(
        from_b["scores"],
        json!({"brand": {"Apple": 20, "Sony": 10}})
    );
    let (_, from_a) = parts(a.admin(Method::GET, path).send().await.unwrap()).await;
    assert_eq!(from_a, from_b);
    let (status, strategy_b) = parts(
        b.admin(Method::GET, "/1/strategies/personalization")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, strategy_b), (200, strategy()));

    // A deletion through one is seen by the other.
    let r = b
        .admin(Method::DELETE, "/1/usertokens/shared")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    let r = a.admin(Method::GET, path).send().await.unwrap();
    assert_eq!(parts(r).await.0, 404);
    a.stop().await;
    b.stop().await;
}
