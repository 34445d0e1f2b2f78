//! Load driver for the HTTP API, in one process: a server on a fresh
//! embedded store, then concurrent clients sending 1000-event batches, then
//! concurrent profile reads. Prints events/s with p50/p99 batch latency and
//! profile reads/s with p50/p99.
//!
//! `cargo run --release -p affinity-http --example load -- [CLIENTS] [SECONDS] [READERS]`
//! (defaults 4, 10, 50).

use std::sync::Arc;
use std::time::{Duration, Instant};

use affinity_engine::Engine;
use affinity_http::auth::{Acl, Keys};
use serde_json::{json, Value};

/// mimalloc: the allocator-heavy paths (ingest, scans) run measurably
/// faster than on the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const APP: &str = "load";
const KEY: &str = "load-key";
const USERS: usize = 10_000;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn batch(client: usize, n: usize, now: i64) -> String {
    let events: Vec<Value> = (0..1000)
        .map(|i| {
            let user = (client * 7919 + n * 1000 + i) % USERS;
            json!({"eventType": if i % 5 == 0 { "conversion" } else { "click" },
                   "eventName": if i % 5 == 0 { "Bought" } else { "Clicked" },
                   "index": "products", "userToken": format!("user{user}"),
                   "timestamp": now - ((client * 1_000_003 + n * 1000 + i) % 86_400_000) as i64,
                   "filters": [format!("brand:b{}", i % 13), format!("color:c{}", i % 5)]})
        })
        .collect();
    json!({ "events": events }).to_string()
}

#[tokio::main]
async fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let clients = args.first().copied().unwrap_or(4);
    let seconds = args.get(1).copied().unwrap_or(10) as u64;
    let readers = args.get(2).copied().unwrap_or(50);

    let dir = tempfile::tempdir().expect("temporary directory");
    let store = affinity_embedded::EmbeddedStore::open(dir.path()).expect("embedded store");
    let engine = Arc::new(Engine::open(Arc::new(store)).expect("engine"));
    let mut keys = Keys::default();
    keys.add(APP, KEY, [Acl::Admin]).expect("key");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let state = affinity_http::State::new(Arc::clone(&engine), keys);
    tokio::spawn(affinity_http::serve(
        listener,
        state,
        std::future::pending(),
    ));
    let client = reqwest::Client::new();
    let strategy = json!({
        "eventsScoring": [{"eventName": "Clicked", "eventType": "click", "score": 10},
                          {"eventName": "Bought", "eventType": "conversion", "score": 50}],
        "facetsScoring": [{"facetName": "brand", "score": 100}, {"facetName": "color", "score": 40}],
        "personalizationImpact": 50});
    client
        .post(format!("{base}/1/strategies/personalization"))
        .header("x-algolia-application-id", APP)
        .header("x-algolia-api-key", KEY)
        .body(strategy.to_string())
        .send()
        .await
        .expect("strategy");

    let now = engine.now_millis();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let (client, url) = (client.clone(), format!("{base}/1/events"));
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut n = 0;
                while Instant::now() < deadline {
                    let body = batch(c, n, now);
                    let t = Instant::now();
                    let r = client
                        .post(&url)
                        .header("x-algolia-application-id", APP)
                        .header("x-algolia-api-key", KEY)
                        .body(body)
                        .send()
                        .await
                        .expect("events request");
                    assert_eq!(r.status().as_u16(), 200, "{:?}", r.text().await);
                    latencies.push(t.elapsed());
                    n += 1;
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await.expect("client"));
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort();
    let events = latencies.len() * 1000;
    println!(
        "ingest: {clients} clients x 1000-event batches, {events} events in {elapsed:.1} s = {:.0} events/s; batch latency p50 {:.1} ms, p99 {:.1} ms",
        events as f64 / elapsed,
        percentile(&latencies, 0.5).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
    );

    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let tasks: Vec<_> = (0..readers)
        .map(|r| {
            let (client, base) = (client.clone(), base.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut n = r;
                while Instant::now() < deadline {
                    let url = format!("{base}/1/profiles/personalization/user{}", (n * 31) % USERS);
                    let t = Instant::now();
                    let resp = client
                        .get(&url)
                        .header("x-algolia-application-id", APP)
                        .header("x-algolia-api-key", KEY)
                        .send()
                        .await
                        .expect("profile request");
                    let status = resp.status().as_u16();
                    let _ = resp.bytes().await;
                    assert!(status == 200 || status == 404, "{status}");
                    latencies.push(t.elapsed());
                    n += readers;
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await.expect("reader"));
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort();
    println!(
        "profiles: {readers} clients, {} reads in {elapsed:.1} s = {:.0} reads/s; p50 {:.2} ms, p99 {:.2} ms",
        latencies.len(),
        latencies.len() as f64 / elapsed,
        percentile(&latencies, 0.5).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
    );
}
