//! The dashboard's files and its two endpoints over real HTTP (the pages
//! themselves run in Chromium in `browser.rs`).

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use affinity_engine::variants::bucket;
use common::*;
use reqwest::Method;
use serde_json::{json, Value};

#[tokio::test]
async fn the_dashboard_files_are_served_without_credentials() {
    let server = Server::embedded().await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = client
        .get(format!("{}/dashboard", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 308);
    assert_eq!(r.headers()["location"], "/dashboard/");
    let r = server
        .bare(Method::GET, "/dashboard/")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let page = r.text().await.unwrap();
    assert!(page.contains(r#"<script type="module" src="app.js">"#));
    for (file, kind) in [("app.js", "text/javascript"), ("style.css", "text/css")] {
        let r = server
            .bare(Method::GET, &format!("/dashboard/{file}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{file}");
        assert!(r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with(kind));
    }
    // Every module the page imports is served.
    let app = server
        .bare(Method::GET, "/dashboard/app.js")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let imports: Vec<&str> = app
        .lines()
        .filter_map(|l| l.split("from './").nth(1))
        .map(|rest| rest.trim_end_matches("';"))
        .collect();
    assert!(imports.len() >= 7, "{imports:?}");
    for module in imports {
        let r = server
            .bare(Method::GET, &format!("/dashboard/{module}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{module}");
    }
    let (status, body) = parts(
        server
            .bare(Method::GET, "/dashboard/secrets.toml")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, &body["status"]), (404, &json!(404)));
    server.stop().await;
}

#[tokio::test]
async fn stats_count_events_reads_and_tables_for_admins_only() {
    let server = Server::embedded().await;
    assert_eq!(server.set_strategy().await.status(), 200);
    let (status, before) = parts(
        server
            .admin(Method::GET, "/1/dashboard/stats")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{before}");
    assert_eq!(before["keyVisualizer"], false);
    assert_eq!(
        server
            .post_events(&[click("alice", "Apple")])
            .await
            .status(),
        200
    );
    let bad = json!({"eventType": "buy", "eventName": "x", "index": "i", "userToken": "bob"});
    assert_eq!(server.post_events(&[bad]).await.status(), 422);
    for _ in 0..3 {
        let r = server.admin(Method::GET, "/1/profiles/personalization/alice");
        assert_eq!(r.send().await.unwrap().status(), 200);
    }
    let (_, after) = parts(
        server
            .admin(Method::GET, "/1/dashboard/stats")
            .send()
            .await
            .unwrap(),
    )
    .await;
    let n = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    assert_eq!(
        n(&after, "/eventsAccepted") - n(&before, "/eventsAccepted"),
        1
    );
    assert_eq!(n(&after, "/eventsRejected/eventType"), 1, "{after}");
    assert_eq!(
        n(&after, "/profileReads/count") - n(&before, "/profileReads/count"),
        3
    );
    assert!(after["profileReads"]["seconds"].as_f64().unwrap() > 0.0);
    let tables: Vec<&str> = after["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["table"].as_str().unwrap())
        .collect();
    assert_eq!(tables, ["events.app1", "profiles.app1", "trends.app1"]);
    assert_eq!(after["jobs"], json!([]));
    // Admin only: the dashboard logs in with an admin key.
    for path in ["/1/dashboard/stats", "/1/dashboard/keyvis"] {
        let r = server.as_key(Method::GET, path, APP, SEARCH_KEY);
        assert_eq!(r.send().await.unwrap().status(), 403, "{path}");
        let r = server.bare(Method::GET, path);
        assert_eq!(r.send().await.unwrap().status(), 401, "{path}");
    }
    // A server that does not count says so.
    let (status, body) = parts(
        server
            .admin(Method::GET, "/1/dashboard/keyvis")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 404);
    assert!(body["message"].as_str().unwrap().contains("key visualizer"));
    server.stop().await;
}

/// `affinity_variant_served_total{app="APP",variant=...}` of `/metrics`.
async fn served_in_metrics(server: &Server) -> BTreeMap<String, u64> {
    let text = server.metrics().await;
    let prefix = format!("affinity_variant_served_total{{app=\"{APP}\",variant=\"");
    text.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|rest| {
            let (variant, n) = rest.split_once("\"} ").unwrap();
            (variant.to_string(), n.parse().unwrap())
        })
        .collect()
}

#[tokio::test]
async fn stats_count_the_answers_of_each_variant_as_metrics_do() {
    let server = Server::embedded().await;
    assert_eq!(server.set_strategy().await.status(), 200);
    let events: Vec<Value> = (0..20).map(|i| click(&format!("u{i}"), "Apple")).collect();
    assert_eq!(server.post_events(&events).await.status(), 200);
    let stats = || async {
        let r = server.admin(Method::GET, "/1/dashboard/stats");
        let (status, body) = parts(r.send().await.unwrap()).await;
        assert_eq!(status, 200, "{body}");
        body
    };
    assert_eq!(stats().await["variantsServed"], json!({}));
    let test = json!({"variants": [
        {"name": "control", "trafficPercentage": 30},
        {"name": "b", "trafficPercentage": 70, "strategy": strategy()}]});
    let r = server
        .admin(Method::PUT, "/1/strategies/personalization/variants")
        .body(test.to_string());
    assert_eq!(parts(r.send().await.unwrap()).await.0, 200);
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for i in 0..20 {
        let user = format!("u{i}");
        let variant = if bucket(&user) < 30 { "control" } else { "b" };
        *want.entry(variant.to_string()).or_default() += 1;
        let r = server.admin(Method::GET, &format!("/1/profiles/personalization/{user}"));
        assert_eq!(r.send().await.unwrap().status(), 200);
    }
    // A forced answer counts for the variant forced.
    let r = server.admin(Method::GET, "/1/profiles/personalization/u0?variant=b");
    assert_eq!(r.send().await.unwrap().status(), 200);
    *want.entry("b".into()).or_default() += 1;
    assert_eq!(want.len(), 2, "20 users all in one variant: {want:?}");
    let served: BTreeMap<String, u64> =
        serde_json::from_value(stats().await["variantsServed"].clone()).unwrap();
    assert_eq!(served, want);
    assert_eq!(served_in_metrics(&server).await, want);
    // Other applications' tests are not this one's.
    let other = server.as_key(Method::GET, "/1/dashboard/stats", OTHER_APP, OTHER_ADMIN);
    let (status, body) = parts(other.send().await.unwrap()).await;
    assert_eq!(
        (status, &body["variantsServed"]),
        (200, &json!({})),
        "{body}"
    );
    server.stop().await;
}

/// Rows written to `table` in the slots of `vis`.
fn written(vis: &Value, table: &str) -> u64 {
    vis["tables"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["table"] == table)
        .flat_map(|t| t["slots"].as_array().unwrap())
        .flat_map(|s| s["writes"].as_array().unwrap())
        .map(|w| w.as_u64().unwrap())
        .sum()
}

/// The key visualizer of an application with tables of its own
/// (`dedicated`) or on the shared tables: its own tables, counted from
/// the first ask, with its own keys only.
async fn key_visualizer_shows_the_apps_own_keys(dedicated: bool) {
    let server = Server::key_visualized(Duration::from_millis(200), dedicated).await;
    assert_eq!(server.set_strategy().await.status(), 200);
    // Not counted: nobody asked yet.
    let r = server.post_events(&[click("early", "Apple")]).await;
    assert_eq!(r.status(), 200);
    let first = server.key_vis(5).await;
    assert_eq!(first["slotSeconds"], 0.2);
    let names: Vec<&str> = first["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["table"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["events.app1", "profiles.app1", "trends.app1"]);
    let since = first["tables"][0]["sinceMillis"].as_i64().unwrap();
    assert!(first["untilMillis"].as_i64().unwrap() >= since + 86_400_000);
    // 40 events (of 40 users: one events row each) of this application,
    // 200 of another one (which shares
    // the physical tables unless this one has its own).
    let events: Vec<Value> = (0..40)
        .map(|i| click(&format!("user{i:02}"), "Apple"))
        .collect();
    assert_eq!(server.post_events(&events).await.status(), 200);
    let others: Vec<Value> = (0..200)
        .map(|i| click(&format!("zed{i:03}"), "Nokia"))
        .collect();
    let r = server
        .as_key(Method::POST, "/1/events", OTHER_APP, OTHER_ADMIN)
        .body(json!({ "events": others }).to_string());
    assert_eq!(r.send().await.unwrap().status(), 200);
    // Every row written by this application's 40 events, none of the
    // other's, once their slot ended.
    let vis = loop {
        let vis = server.key_vis(1000).await;
        if written(&vis, "events.app1") >= 40 {
            break vis;
        }

        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(written(&vis, "events.app1"), 40, "{vis}");
    let tables = vis["tables"].as_array().unwrap();
    assert_eq!(tables.len(), 3);
    for table in tables {
        assert_eq!(table["sinceMillis"].as_i64().unwrap(), since);
        for slot in table["slots"].as_array().unwrap() {
            let ranges = slot["bounds"].as_array().unwrap().len() + 1;
            assert_eq!(slot["reads"].as_array().unwrap().len(), ranges);
            assert_eq!(slot["writes"].as_array().unwrap().len(), ranges);
            // Keys as the application sees them: no shared-table prefix,
            // no other application's user.
            for bound in slot["bounds"].as_array().unwrap() {
                let bound = bound.as_str().unwrap();
                assert!(
                    !bound.starts_with("app1#") && !bound.contains("zed"),
                    "{bound}"
                );
            }
        }
    }
    let (_, stats) = parts(
        server
            .admin(Method::GET, "/1/dashboard/stats")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(stats["keyVisualizer"], true);
    for bad in ["0", "1001", "x"] {
        let r = server.admin(Method::GET, &format!("/1/dashboard/keyvis?slots={bad}"));
        let (status, body) = parts(r.send().await.unwrap()).await;
        assert_eq!(status, 422, "{bad}");
        assert!(body["message"].as_str().unwrap().contains("slots"));
    }
    server.stop().await;
}

#[tokio::test]
async fn the_key_visualizer_counts_an_app_on_the_shared_tables_alone() {
    key_visualizer_shows_the_apps_own_keys(false).await;
}

#[tokio::test]
async fn the_key_visualizer_counts_an_app_with_its_own_tables() {
    key_visualizer_shows_the_apps_own_keys(true).await;
}
