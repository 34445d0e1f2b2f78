//! A/B tests of strategies over real HTTP: users split by the stable hash
//! of their token, every answer naming its variant (header and field),
//! scores equal to the variant's strategy's, a variant forced per request,
//! bad tests refused without changing anything, the test ended.

mod common;

use affinity_engine::variants::bucket;
use affinity_engine::Strategy;
use common::*;
use reqwest::Method;
use serde_json::{json, Value};

const USERS: usize = 40;

fn color_only() -> Value {
    json!({"eventsScoring": [{"eventName": "Product Clicked", "eventType": "click", "score": 10}],
           "facetsScoring": [{"facetName": "color", "score": 100}],
           "personalizationImpact": 80})
}

fn test_body() -> Value {
    json!({"variants": [
        {"name": "control", "trafficPercentage": 50},
        {"name": "color-only", "trafficPercentage": 50, "strategy": color_only()}]})
}

fn expected(user: &str) -> &'static str {
    if bucket(user) < 50 {
        "control"
    } else {
        "color-only"
    }
}

async fn shop() -> Server {
    let server = Server::embedded().await;
    assert_eq!(server.set_strategy().await.status(), 200);
    let events: Vec<Value> = (0..USERS)
        .map(|i| {
            json!({"eventType": "click", "eventName": "Product Clicked", "index": "products",
                   "userToken": format!("user{i}"),
                   "filters": [format!("brand:B{}", i % 3), format!("color:C{}", i % 5)]})
        })
        .collect();
    assert_eq!(server.post_events(&events).await.status(), 200);
    server
}

async fn get(server: &Server, path: &str) -> (u16, Option<String>, Value) {
    let r = server.admin(Method::GET, path).send().await.unwrap();
    let variant = r
        .headers()
        .get("x-affinity-variant")
        .map(|v| v.to_str().unwrap().to_string());
    let (status, body) = parts(r).await;
    (status, variant, body)
}

/// The profile the engine scores under `strategy`, as the API's JSON.
fn scored(server: &Server, user: &str, strategy: &Value) -> Value {
    let strategy = Strategy::from_json(strategy).unwrap();
    let json = server
        .engine
        .profile_json_with(APP, user, &strategy)
        .unwrap()
        .unwrap();
    serde_json::from_slice(&json).unwrap()
}

#[tokio::test]
async fn users_are_split_by_their_token_and_each_answer_names_its_variant() {
    let server = shop().await;
    let r = server
        .admin(Method::PUT, "/1/strategies/personalization/variants")
        .body(test_body().to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(parts(r).await.0, 200);
    let (status, _, listed) = get(&server, "/1/strategies/personalization/variants").await;
    assert_eq!((status, listed), (200, test_body()));

    let mut seen = std::collections::BTreeSet::new();
    for i in 0..USERS {
        let user = format!("user{i}");
        let want = expected(&user);
        seen.insert(want);
        let (status, header, mut body) =
            get(&server, &format!("/1/profiles/personalization/{user}")).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(header.as_deref(), Some(want), "{user}");
        assert_eq!(body["variant"], want, "{user}");
        body.as_object_mut().unwrap().remove("variant");
        let strategy = if want == "control" {
            strategy()
        } else {
            color_only()
        };
        assert_eq!(body, scored(&server, &user, &strategy), "{user}");
        let facets: Vec<&String> = body["scores"].as_object().unwrap().keys().collect();
        if want == "color-only" {
            assert_eq!(facets, ["color"], "{user}");
        } else {
            assert_eq!(facets, ["brand", "color"], "{user}");
        }

        let path = format!("/1/profiles/personalization/{user}/optionalFilters");
        let (status, header, body) = get(&server, &path).await;
        assert_eq!((status, header.as_deref()), (200, Some(want)), "{body}");
        assert_eq!(body["variant"], want);
        let impact = if want == "control" { 60 } else { 80 };
        assert_eq!(body["personalizationImpact"], impact);
    }
    assert_eq!(seen.len(), 2, "40 users all fell in one half: {seen:?}");

    // Forced, for QA: the named variant whatever the bucket.
    let user = (0..USERS)
        .map(|i| format!("user{i}"))
        .find(|u| expected(u) == "control")
        .unwrap();
    let (status, header, mut body) = get(
        &server,
        &format!("/1/profiles/personalization/{user}?variant=color-only"),
    )
    .await;
    assert_eq!((status, header.as_deref()), (200, Some("color-only")));
    body.as_object_mut().unwrap().remove("variant");
    assert_eq!(body, scored(&server, &user, &color_only()));

    let r = server
        .admin(Method::POST, "/1/indexes/products/rerank")
        .body(
            json!({"userToken": user, "variant": "color-only",
                   "hits": [{"objectID": "1", "color": "C9"}, {"objectID": "2", "color": format!("C{}", 0)}]})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    let header = r.headers().get("x-affinity-variant").cloned();
    let (status, body) = parts(r).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header.unwrap(), "color-only");
    assert_eq!(
        (
            body["variant"].clone(),
            body["personalizationImpact"].clone()
        ),
        (json!("color-only"), json!(80))
    );

    let (status, header, body) = get(
        &server,
        &format!(
            "/1/profiles/personalization/{user}/explain?facet=color&value=C0&variant=color-only"
        ),
    )
    .await;
    assert!(status == 200 || status == 404, "{status} {body}");
    if status == 200 {
        assert_eq!(
            (header.as_deref(), body["variant"].clone()),
            (Some("color-only"), json!("color-only"))
        );
    }

    // Unknown, empty or repeated: a 4xx naming the parameter, nothing served.
    for query in [
        "variant=nope",
        "variant=",
        "variant=a&variant=b",
        "variant=a%20b",
    ] {
        let (status, _, body) = get(
            &server,
            &format!("/1/profiles/personalization/{user}?{query}"),
        )
        .await;
        assert!((400..500).contains(&status), "{query}: {status} {body}");
        assert!(
            body["message"].as_str().unwrap().contains("variant"),
            "{query}: {body}"
        );
    }

    // Each variant's traffic is counted.
    let metrics = server.metrics().await;
    for variant in ["control", "color-only"] {
        let line = format!("affinity_variant_served_total{{app=\"{APP}\",variant=\"{variant}\"}} ");
        let n: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .unwrap_or_else(|| panic!("no {line} in\n{metrics}"))
            .parse()
            .unwrap();
        assert!(n > 0, "{line}{n}");
    }

    // Ended: the application's strategy again, no variant named.
    let r = server
        .admin(Method::DELETE, "/1/strategies/personalization/variants")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let other = (0..USERS)
        .map(|i| format!("user{i}"))
        .find(|u| expected(u) == "color-only")
        .unwrap();
    let (status, header, body) =
        get(&server, &format!("/1/profiles/personalization/{other}")).await;
    assert_eq!((status, header), (200, None));
    assert!(body.get("variant").is_none(), "{body}");
    assert_eq!(body, scored(&server, &other, &strategy()));
    let (_, _, listed) = get(&server, "/1/strategies/personalization/variants").await;
    assert_eq!(listed, json!({"variants": []}));
    let (status, _, body) = get(
        &server,
        &format!("/1/profiles/personalization/{other}?variant=control"),
    )
    .await;
    assert!((400..500).contains(&status), "{status} {body}");
    server.stop().await;
}

#[tokio::test]
async fn bad_tests_are_refused_naming_the_field_and_change_nothing() {
    let server = shop().await;
    let put = |body: Value, key: &'static str| {
        server
            .as_key(
                Method::PUT,
                "/1/strategies/personalization/variants",
                APP,
                key,
            )
            .body(body.to_string())
            .send()
    };
    assert_eq!(put(test_body(), ADMIN).await.unwrap().status(), 200);
    let cases = [
        (
            json!({"variants": [{"name": "a", "trafficPercentage": 60},
                             {"name": "b", "trafficPercentage": 30}]}),
            "trafficPercentage",
        ),
        (
            json!({"variants": [{"name": "", "trafficPercentage": 50},
                             {"name": "b", "trafficPercentage": 50}]}),
            "name",
        ),
        (
            json!({"variants": [{"name": "a", "trafficPercentage": 100}]}),
            "variants",
        ),
        (
            json!({"variants": [{"name": "a", "trafficPercentage": 50},
                             {"name": "b", "trafficPercentage": 50,
                              "strategy": {"facetsScoring": []}}]}),
            "strategy",
        ),
    ];
    for (body, field) in cases {
        let (status, answer) = parts(put(body.clone(), ADMIN).await.unwrap()).await;
        assert!((400..500).contains(&status), "{body}: {status}");
        let message = answer["message"].as_str().unwrap();
        assert!(message.contains(field), "{body}: {message}");
    }
    // Only an admin key may change the test.
    let r = put(json!({"variants": []}), SEARCH_KEY).await.unwrap();
    assert_eq!(r.status(), 403);
    let (_, _, listed) = get(&server, "/1/strategies/personalization/variants").await;
    assert_eq!(listed, test_body());
    server.stop().await;
}
