//! Personalization at query time on a real server: optional filters in
//! each format and re-ranking, their weights and orders, impact 0, unknown
//! users, every bad input, and the keys that may call them.

mod common;

use common::*;
use reqwest::Method;
use serde_json::{json, Value};

fn filter_event(user: &str, filters: &[&str]) -> Value {
    json!({"eventType": "click", "eventName": "Product Clicked", "index": "products",
           "userToken": user, "filters": filters})
}

/// The common strategy (click 10; brand 100, color 50; impact 60) and
/// alice: five clicks on Apple, one on Samsung, one on red. Her raw
/// scores 5000, 1000 and 500 make Apple 20, Samsung 4 and red 2. Bob
/// clicked "Hewlett Packard" once. Catalog: `x1`, an Apple.
async fn shop() -> Server {
    shop_on(Server::embedded().await).await
}

/// [`shop`] on `server`.
async fn shop_on(server: Server) -> Server {
    assert_eq!(parts(server.set_strategy().await).await.0, 200);
    let mut events: Vec<Value> = (0..5).map(|_| click("alice", "Apple")).collect();
    events.push(click("alice", "Samsung"));
    events.push(filter_event("alice", &["color:red"]));
    events.push(filter_event("bob", &["brand:Hewlett%20Packard"]));
    // Distinct events (same-millisecond duplicates would be one event).
    for (i, e) in events.iter_mut().enumerate() {
        e["timestamp"] = json!(server.engine.now_millis() - 1000 * i as i64);
    }
    let (status, body) = parts(server.post_events(&events).await).await;
    assert_eq!(status, 200, "{body}");
    let objects = json!({"objects": [{"objectID": "x1", "brand": "Apple", "color": "blue"}]});
    let r = server
        .admin(Method::POST, "/1/indexes/products/objects")
        .body(objects.to_string());
    assert_eq!(parts(r.send().await.unwrap()).await.0, 200);
    server
}

async fn filters(server: &Server, user: &str, query: &str) -> (u16, Value) {
    let path = format!("/1/profiles/personalization/{user}/optionalFilters{query}");
    parts(server.admin(Method::GET, &path).send().await.unwrap()).await
}

async fn rerank(server: &Server, body: &Value) -> (u16, Value) {
    let r = server
        .admin(Method::POST, "/1/indexes/products/rerank")
        .body(body.to_string());
    parts(r.send().await.unwrap()).await
}

#[tokio::test(flavor = "multi_thread")]
async fn optional_filters_weigh_the_profile_by_impact_in_every_format() {
    let server = shop().await;
    let (status, profile) = parts(
        server
            .admin(Method::GET, "/1/profiles/personalization/alice")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        profile["scores"],
        json!({"brand": {"Apple": 20, "Samsung": 4}, "color": {"red": 2}})
    );
    // weight = round(score x 60 / 20): 60, 12, 6.
    let (status, body) = filters(&server, "alice", "").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"userToken": "alice", "userFound": true, "personalizationImpact": 60,
               "format": "algolia",
               "optionalFilters": ["brand:Apple<score=60>", "brand:Samsung<score=12>",
                                   "color:red<score=6>"]})
    );
    // The caller's impact: 20 x 10 / 20 = 10, 4 -> 2, 2 -> 1.
    let (_, body) = filters(&server, "alice", "?personalizationImpact=10").await;
    assert_eq!(
        body["optionalFilters"],
        json!([
            "brand:Apple<score=10>",
            "brand:Samsung<score=2>",
            "color:red<score=1>"
        ])
    );
    assert_eq!(body["personalizationImpact"], 10);
    // 2 x 5 / 20 = 0.5 rounds up; 4 x 2 / 20 = 0.4 is dropped.
    let (_, body) = filters(&server, "alice", "?personalizationImpact=2").await;
    assert_eq!(body["optionalFilters"], json!(["brand:Apple<score=2>"]));
    let (status, body) = filters(&server, "alice", "?personalizationImpact=0").await;
    assert_eq!((status, &body["optionalFilters"]), (200, &json!([])));
    assert_eq!(body["userFound"], true);
    let (_, body) = filters(&server, "alice", "?facets=color").await;
    assert_eq!(body["optionalFilters"], json!(["color:red<score=6>"]));
    let (_, body) = filters(&server, "alice", "?facets=brand,color&limit=2").await;
    assert_eq!(
        body["optionalFilters"],
        json!(["brand:Apple<score=60>", "brand:Samsung<score=12>"])
    );
    let (status, body) = filters(&server, "alice", "?format=elasticsearch&limit=2").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["format"], "elasticsearch");
    assert_eq!(
        body["query"],
        json!({"bool": {"should": [
            {"term": {"brand": {"value": "Apple", "boost": 60}}},
            {"term": {"brand": {"value": "Samsung", "boost": 12}}}]}})
    );
    let (_, body) = filters(&server, "alice", "?format=list&personalizationImpact=100").await;
    assert_eq!(
        body["filters"],
        json!([{"facet": "brand", "value": "Apple", "weight": 100},
               {"facet": "brand", "value": "Samsung", "weight": 20},
               {"facet": "color", "value": "red", "weight": 10}])
    );
    // A value with a space is quoted for Algolia's syntax.
    let (_, body) = filters(&server, "bob", "").await;
    assert_eq!(
        body["optionalFilters"],
        json!(["brand:\"Hewlett Packard\"<score=60>"])
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_users_get_no_filters_and_the_profile_read_a_404() {
    let server = shop().await;
    for format in ["algolia", "elasticsearch", "list"] {
        let (status, body) = filters(&server, "nobody", &format!("?format={format}")).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["userFound"], false, "{body}");
        let empty = match format {
            "algolia" => &body["optionalFilters"],
            "elasticsearch" => &body["query"]["bool"]["should"],
            _ => &body["filters"],
        };
        assert_eq!(empty, &json!([]), "{body}");
    }
    let r = server.admin(Method::GET, "/1/profiles/personalization/nobody");
    assert_eq!(parts(r.send().await.unwrap()).await.0, 404);
    // Parameters are checked for unknown users too.
    let (status, _) = filters(&server, "nobody", "?facets=size").await;
    assert_eq!(status, 400);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_optional_filters_parameters_are_400s_naming_them() {
    let server = shop().await;
    for (query, name) in [
        ("personalizationImpact=101", "personalizationImpact"),
        ("personalizationImpact=-1", "personalizationImpact"),
        ("personalizationImpact=ten", "personalizationImpact"),
        ("personalizationImpact=50.5", "personalizationImpact"),
        ("facets=size", "facets"),
        ("facets=brand,,color", "facets"),
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=many", "limit"),
        ("format=solr", "format"),
    ] {
        let (status, body) = filters(&server, "alice", &format!("?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["status"], 400);
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(name), "{query}: {message}");
    }
    // The user token is checked like the profile read's.
    let (status, body) = filters(&server, "not%20valid", "").await;
    assert_eq!(status, 422, "{body}");
    assert!(body["message"].as_str().unwrap().contains("UserToken"));
    server.stop().await;
}

/// Hits as a search engine returned them: `n1` Nokia, `s1` Samsung, `a1`
/// Apple, `x1` only an id (the catalog holds an Apple).
fn engine_hits() -> Value {
    json!([
        {"objectID": "n1", "brand": "Nokia", "name": "3310"},
        {"objectID": "s1", "brand": ["Samsung"], "_rankingInfo": {"nbTypos": 0}},
        {"objectID": "a1", "brand": "Apple", "color": "red",
         "_highlightResult": {"brand": {"value": "<em>Apple</em>"}}},
        {"objectID": "x1"}
    ])
}

fn ids(body: &Value) -> Vec<&str> {
    body["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["objectID"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn rerank_blends_the_engines_order_with_affinity() {
    let server = shop().await;
    let (status, body) = rerank(
        &server,
        &json!({"userToken": "alice", "hits": engine_hits()}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (&body["userFound"], &body["personalizationImpact"]),
        (&json!(true), &json!(60))
    );
    // n = 4, top affinity A = 22 (a1: Apple 20 + red 2), impact 0.6:
    // n1 0.4 x 1 = 0.4; s1 0.4 x 0.75 + 0.6 x 4/22 = 0.409091;
    // a1 0.4 x 0.5 + 0.6 = 0.8; x1 (catalog: Apple, blue) 0.1 + 0.6 x 20/22 = 0.645455.
    assert_eq!(ids(&body), ["a1", "x1", "s1", "n1"]);
    let why: Vec<Value> = body["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["_rankingInfo"]["personalization"].clone())
        .collect();
    assert_eq!(
        why,
        [
            json!({"affinity": 22, "previousPosition": 3, "score": 0.8, "facetsFrom": "hit"}),
            json!({"affinity": 20, "previousPosition": 4, "score": 0.645455, "facetsFrom": "catalog"}),
            json!({"affinity": 4, "previousPosition": 2, "score": 0.409091, "facetsFrom": "hit"}),
            json!({"affinity": 0, "previousPosition": 1, "score": 0.4, "facetsFrom": "hit"}),
        ]
    );
    // The hits come back whole, ranking info merged.
    let s1 = &body["hits"][2];
    assert_eq!(s1["brand"], json!(["Samsung"]));
    assert_eq!(s1["_rankingInfo"]["nbTypos"], 0);
    assert_eq!(
        body["hits"][0]["_highlightResult"]["brand"]["value"],
        "<em>Apple</em>"
    );
    // At impact 100 affinity alone: a1, x1, s1, then n1.
    let (_, body) = rerank(
        &server,
        &json!({"userToken": "alice", "hits": engine_hits(), "personalizationImpact": 100}),
    )
    .await;
    assert_eq!(ids(&body), ["a1", "x1", "s1", "n1"]);
    // At impact 10: n1 0.9, s1 0.675 + 0.018, a1 0.45 + 0.1, x1 0.225 + 0.09.
    let (_, body) = rerank(
        &server,
        &json!({"userToken": "alice", "hits": engine_hits(), "personalizationImpact": 10}),
    )
    .await;
    assert_eq!(ids(&body), ["n1", "s1", "a1", "x1"]);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn per_core_threads_give_the_same_answers() {
    let (shared, per_core) = (
        shop().await,
        shop_on(Server::embedded_per_core().await).await,
    );
    let body = json!({"userToken": "alice", "hits": engine_hits()});
    let (status, expected) = rerank(&shared, &body).await;
    assert_eq!(status, 200, "{expected}");
    let expected_filters = filters(&shared, "alice", "").await;
    assert_eq!(expected_filters.0, 200, "{}", expected_filters.1);
    // Eight clients at once: connections on both threads.
    let answers = futures::future::join_all((0..8).map(|_| async {
        let ranked = rerank(&per_core, &body).await;
        let filtered = filters(&per_core, "alice", "").await;
        (ranked, filtered)
    }))
    .await;
    for (ranked, filtered) in answers {
        assert_eq!(ranked, (200, expected.clone()));
        assert_eq!(filtered, expected_filters);
    }
    shared.stop().await;
    per_core.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn impact_0_and_unknown_users_keep_the_engines_order() {
    let server = shop().await;
    for body in [
        json!({"userToken": "alice", "hits": engine_hits(), "personalizationImpact": 0}),
        json!({"userToken": "nobody", "hits": engine_hits()}),
    ] {
        let (status, answer) = rerank(&server, &body).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(ids(&answer), ["n1", "s1", "a1", "x1"], "{body}");
        let positions: Vec<&Value> = answer["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| &h["_rankingInfo"]["personalization"]["previousPosition"])
            .collect();
        assert_eq!(positions, [&json!(1), &json!(2), &json!(3), &json!(4)]);
        assert_eq!(
            answer["userFound"],
            json!(body["userToken"] == "alice"),
            "{answer}"
        );
    }
    let (_, answer) = rerank(
        &server,
        &json!({"userToken": "nobody", "hits": engine_hits()}),
    )
    .await;
    assert_eq!(
        answer["hits"][3]["_rankingInfo"]["personalization"]["affinity"],
        0
    );
    // No hits: nothing to order.
    let (status, answer) = rerank(&server, &json!({"userToken": "alice", "hits": []})).await;
    assert_eq!((status, &answer["hits"]), (200, &json!([])));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_rerank_bodies_are_refused_naming_the_field() {
    let server = shop().await;
    let many: Vec<Value> = (0..1001)
        .map(|i| json!({"objectID": format!("o{i}")}))
        .collect();
    let thousand: Vec<Value> = many[..1000].to_vec();
    let (status, body) = rerank(&server, &json!({"userToken": "alice", "hits": thousand})).await;
    assert_eq!(
        (status, body["hits"].as_array().map(Vec::len)),
        (200, Some(1000))
    );
    for (body, name) in [
        (json!({"userToken": "alice", "hits": many}), "1000 hits"),
        (
            json!({"userToken": "alice", "hits": [{"objectID": "a"}, {"brand": "Apple"}]}),
            "Hits[1].objectID",
        ),
        (
            json!({"userToken": "alice", "hits": [{"objectID": ""}]}),
            "Hits[0].objectID",
        ),
        (json!({"userToken": "alice", "hits": ["a1"]}), "Hits[0]"),
        (
            json!({"userToken": "alice", "hits": {"objectID": "a"}}),
            "Hits",
        ),
        (json!({"userToken": "alice"}), "Hits"),
        (json!({"hits": []}), "UserToken"),
        (json!({"userToken": "a b", "hits": []}), "UserToken"),
        (
            json!({"userToken": "alice", "hits": [], "personalizationImpact": 101}),
            "PersonalizationImpact",
        ),
        (
            json!({"userToken": "alice", "hits": [], "personalizationImpact": 0.5}),
            "PersonalizationImpact",
        ),
        (
            json!({"userToken": "alice", "hits": [], "personalizationImpact": "50"}),
            "PersonalizationImpact",
        ),
        (
            json!({"userToken": "alice", "hits": [], "userTokn": "x"}),
            "userTokn",
        ),
    ] {
        let (status, answer) = rerank(&server, &body).await;
        assert_eq!(status, 422, "{body}: {answer}");
        let message = answer["message"].as_str().unwrap();
        assert!(message.contains(name), "{name}: {message}");
    }
    let r = server
        .admin(Method::POST, "/1/indexes/products/rerank")
        .body("{not json");
    assert_eq!(parts(r.send().await.unwrap()).await.0, 400);
    // Not UTF-8 inside a hit: a 400 naming the JSON error.
    let r = server
        .admin(Method::POST, "/1/indexes/products/rerank")
        .body(&b"{\"userToken\":\"alice\",\"hits\":[{\"objectID\":\"a\xff\"}]}"[..]);
    let (status, answer) = parts(r.send().await.unwrap()).await;
    assert_eq!(status, 400, "{answer}");
    assert!(answer.to_string().contains("unicode"), "{answer}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn query_time_routes_need_a_read_key_and_a_strategy() {
    let server = shop().await;
    let path = "/1/profiles/personalization/alice/optionalFilters";
    let body = json!({"userToken": "alice", "hits": engine_hits()}).to_string();
    let rerank_path = "/1/indexes/products/rerank";
    let r = server.as_key(Method::GET, path, APP, SEARCH_KEY);
    assert_eq!(parts(r.send().await.unwrap()).await.0, 200);
    let r = server
        .as_key(Method::POST, rerank_path, APP, SEARCH_KEY)
        .body(body.clone());
    assert_eq!(parts(r.send().await.unwrap()).await.0, 200);
    let r = server.as_key(Method::GET, path, APP, EVENTS_KEY);
    assert_eq!(parts(r.send().await.unwrap()).await.0, 403);
    let r = server
        .as_key(Method::POST, rerank_path, APP, EVENTS_KEY)
        .body(body.clone());
    assert_eq!(parts(r.send().await.unwrap()).await.0, 403);
    assert_eq!(
        parts(server.bare(Method::GET, path).send().await.unwrap())
            .await
            .0,
        401
    );
    // Another application has no strategy: nothing to weigh with.
    let r = server.as_key(Method::GET, path, OTHER_APP, OTHER_ADMIN);
    let (status, answer) = parts(r.send().await.unwrap()).await;
    assert_eq!(status, 404, "{answer}");
    assert!(answer["message"].as_str().unwrap().contains("strategy"));
    let r = server
        .as_key(Method::POST, rerank_path, OTHER_APP, OTHER_ADMIN)
        .body(body);
    assert_eq!(parts(r.send().await.unwrap()).await.0, 404);
    // Both routes are in the OpenAPI document.
    let (_, doc) = parts(
        server
            .bare(Method::GET, "/openapi.json")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(
        doc["paths"]["/1/profiles/personalization/{userToken}/optionalFilters"]["get"].is_object()
    );
    assert!(doc["paths"]["/1/indexes/{indexName}/rerank"]["post"].is_object());
    server.stop().await;
}
