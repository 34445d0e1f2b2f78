//! The profile cache over real HTTP: a repeated read is answered from it
//! (counted in `/metrics`), and every change a profile can see shows at
//! the next read: a new event, a changed strategy, an anonymous member's
//! event, a deletion.

mod common;

use common::*;
use reqwest::Method;
use serde_json::{json, Value};

async fn profile(server: &Server, user: &str) -> (u16, Value) {
    parts(
        server
            .admin(Method::GET, &format!("/1/profiles/personalization/{user}"))
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// `(hits, misses)` of the answers kept, from `/metrics`.
async fn lookups(server: &Server) -> (u64, u64) {
    lookups_of(server, "profile").await
}

/// `(hits, misses)` of the `kind` cache (`profile`, `rollup`), from
/// `/metrics`.
async fn lookups_of(server: &Server, kind: &str) -> (u64, u64) {
    let text = server.metrics().await;
    let count = |result: &str| -> u64 {
        let line = format!("affinity_{kind}_cache_lookups_total{{result=\"{result}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(line.as_str()))
            .unwrap_or_else(|| panic!("no {line:?} in {text}"))
            .parse()
            .unwrap()
    };
    (count("hit"), count("miss"))
}

fn brand(body: &Value, value: &str) -> Option<u64> {
    body["scores"]["brand"][value].as_u64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_shows_at_the_next_read() {
    every_change_shows(Server::cached_with(false).await).await;
}

/// As `affinity serve` on a local store runs: reads on the async workers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_shows_at_the_next_read_answered_inline() {
    every_change_shows(Server::cached_with(true).await).await;
}

async fn every_change_shows(server: Server) {
    assert_eq!(server.set_strategy().await.status(), 200);
    // A user without a profile: 404, the repeat from the cache too.
    assert_eq!(profile(&server, "nobody").await.0, 404);
    let before = lookups(&server).await;
    assert_eq!(profile(&server, "nobody").await.0, 404);
    assert_eq!(lookups(&server).await.0, before.0 + 1, "a hit");
    assert_eq!(server.post_events(&[click("u1", "A")]).await.status(), 200);

    let (status, first) = profile(&server, "u1").await;
    assert_eq!(status, 200, "{first}");
    assert!(brand(&first, "A").is_some(), "{first}");
    let before = lookups(&server).await;
    let (_, again) = profile(&server, "u1").await;
    assert_eq!(again, first);
    let after = lookups(&server).await;
    assert_eq!(
        after.0,
        before.0 + 1,
        "the repeat is a hit: {before:?} {after:?}"
    );

    // A new event: the answer is computed again, with the rollup row
    // kept (a day row was written, not the rollup row).
    assert_eq!(server.post_events(&[click("u1", "B")]).await.status(), 200);
    let (answers, rollups) = (lookups(&server).await, lookups_of(&server, "rollup").await);
    let (_, read) = profile(&server, "u1").await;
    assert!(brand(&read, "B").is_some(), "{read}");
    assert_eq!(lookups(&server).await.1, answers.1 + 1, "an answer missed");
    assert_eq!(
        lookups_of(&server, "rollup").await.0,
        rollups.0 + 1,
        "its rollup row kept"
    );

    // Another strategy: brand weighs nothing, color alone.
    let color_only = json!({
        "eventsScoring": [{"eventName": "Product Clicked", "eventType": "click", "score": 10}],
        "facetsScoring": [{"facetName": "color", "score": 100}],
        "personalizationImpact": 60
    });
    let r = server
        .admin(Method::POST, "/1/strategies/personalization")
        .body(color_only.to_string())
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let (status, read) = profile(&server, "u1").await;
    assert!(
        status == 404 || brand(&read, "A").is_none(),
        "{status} {read}"
    );
    assert_eq!(server.set_strategy().await.status(), 200);

    // An anonymous token linked to member m1, then an event of the
    // anonymous token alone: m1's joined profile has it.
    let linked = json!({"eventType": "click", "eventName": "Product Clicked", "index": "products",
        "userToken": "anon1", "authenticatedUserToken": "m1", "filters": ["brand:L"]});
    assert_eq!(server.post_events(&[linked]).await.status(), 200);
    let (_, joined) = profile(&server, "m1").await;
    assert!(brand(&joined, "L").is_some(), "{joined}");
    assert!(brand(&joined, "N").is_none(), "{joined}");
    assert_eq!(
        server.post_events(&[click("anon1", "N")]).await.status(),
        200
    );
    let (_, joined) = profile(&server, "m1").await;
    assert!(
        brand(&joined, "N").is_some(),
        "the member's event: {joined}"
    );

    // A deletion.
    let r = server
        .admin(Method::DELETE, "/1/usertokens/u1")
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let (status, _) = profile(&server, "u1").await;
    assert_eq!(status, 404);
    server.stop().await;
}
