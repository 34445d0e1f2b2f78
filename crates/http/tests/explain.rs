//! `GET /1/profiles/personalization/{userToken}/explain` and `POST
//! /1/strategies/personalization/preview` over real HTTP: answers that
//! add up to the profile read, that match the OpenAPI document (and so do
//! its examples), ACLs, errors naming the field, and a preview that
//! stores nothing.

mod common;

use common::*;
use reqwest::Method;
use serde_json::{json, Value};

/// A validator of one schema of the document.
fn compile(doc: &Value, pointer: &str) -> jsonschema::Validator {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": format!("#{pointer}"),
        "components": doc["components"],
    });
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(&schema)
        .unwrap_or_else(|e| panic!("the document's {pointer} does not compile: {e}"))
}

fn assert_valid(validator: &jsonschema::Validator, value: &Value) {
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:?}\n{value}");
}

async fn document(server: &Server) -> Value {
    let r = server.bare(Method::GET, "/openapi.json").send().await;
    parts(r.unwrap()).await.1
}

fn event(user: &str, ty: &str, name: &str, filters: &[&str]) -> Value {
    json!({"eventType": ty, "eventName": name, "index": "products",
           "userToken": user, "filters": filters})
}

/// alice: 3 clicks on Apple (10 x 100 each), a purchase of Samsung
/// (50 x 100), a click on Apple in black (color 50); a view the strategy
/// does not score. bob: one click on Nike.
async fn shop() -> Server {
    let server = Server::embedded().await;
    assert_eq!(server.set_strategy().await.status(), 200);
    // Two clicks at distinct times (the same event twice is a retry).
    let mut earlier = click("alice", "Apple");
    let now = server.engine.now_millis();
    earlier["timestamp"] = json!((now - 1000).max(now - now % 86_400_000));
    let events = vec![
        click("alice", "Apple"),
        earlier,
        event(
            "alice",
            "click",
            "Product Clicked",
            &["brand:Apple", "color:Black"],
        ),
        event("alice", "conversion", "Product Bought", &["brand:Samsung"]),
        event("alice", "view", "Product Viewed", &["brand:Apple"]),
        click("bob", "Nike"),
    ];
    assert_eq!(parts(server.post_events(&events).await).await.0, 200);
    server
}

#[tokio::test(flavor = "multi_thread")]
async fn explanations_add_up_to_the_profile_read() {
    let server = shop().await;
    let doc = document(&server).await;
    let schema = compile(&doc, "/components/schemas/Explanation");
    let path = "/1/profiles/personalization/{userToken}/explain";
    assert_valid(
        &schema,
        &doc["components"]["schemas"]["Explanation"]["example"],
    );
    assert_valid(
        &schema,
        &doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["example"],
    );

    let (status, profile) = parts(
        server
            .admin(Method::GET, "/1/profiles/personalization/alice")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{profile}");
    for (facet, value) in [
        ("brand", "Apple"),
        ("brand", "Samsung"),
        ("color", "Black"),
        ("brand", "Nike"),
    ] {
        let url = format!("/1/profiles/personalization/alice/explain?facet={facet}&value={value}");
        let (status, x) = parts(server.admin(Method::GET, &url).send().await.unwrap()).await;
        assert_eq!(status, 200, "{x}");
        assert_valid(&schema, &x);
        let rows = x["contributions"].as_array().unwrap();
        let sum: i64 = rows
            .iter()
            .map(|c| c["contribution"].as_i64().unwrap())
            .sum();
        assert_eq!(json!(sum), x["raw"], "{x}");
        for c in rows {
            let product = c["eventScore"].as_i64().unwrap()
                * c["facetScore"].as_i64().unwrap()
                * c["count"].as_i64().unwrap();
            assert_eq!(json!(product), c["contribution"], "{c}");
        }
        assert_eq!(
            x["score"], profile["scores"][facet][value],
            "{facet}:{value} {x}"
        );
        assert_eq!(
            x["maxRaw"],
            json!({"raw": 5000, "facet": "brand", "value": "Samsung"})
        );
    }
    // By hand: 3 clicks x 10 x 100 = 3000 of 5000 -> 12; the view counts
    // nothing and says so; today's events leave in 90 days.
    let url = "/1/profiles/personalization/alice/explain?facet=brand&value=Apple";
    let (_, x) = parts(server.admin(Method::GET, url).send().await.unwrap()).await;
    assert_eq!(
        (x["raw"].clone(), x["score"].clone()),
        (json!(3000), json!(12))
    );
    assert_eq!(x["contributions"][0]["events"], 3);
    assert_eq!(
        x["notScored"],
        json!([{"eventType": "view", "eventName": "Product Viewed", "events": 1, "count": 1}])
    );
    assert_eq!(x["formula"], "max(1, round(20 x 3000 / 5000)) = 12");
    // Everything is of today: the next change is when today leaves, and
    // then the profile is empty.
    assert_eq!(x["nextChange"]["at"], x["contributions"][0]["leavesAt"]);
    assert_eq!(x["nextChange"]["score"], Value::Null);

    // The profiles ACL (admin passes); a search key may read the profile,
    // not its history.
    let r = server.as_key(Method::GET, url, APP, SEARCH_KEY);
    assert_eq!(parts(r.send().await.unwrap()).await.0, 403);
    // Errors name the field.
    for (url, status, field) in [
        (
            "/1/profiles/personalization/alice/explain?value=Apple",
            422,
            "facet",
        ),
        (
            "/1/profiles/personalization/alice/explain?facet=brand",
            422,
            "value",
        ),
        (
            "/1/profiles/personalization/alice/explain?facet=size&value=M",
            400,
            "facet",
        ),
        (
            "/1/profiles/personalization/a%20b/explain?facet=brand&value=M",
            422,
            "UserToken",
        ),
    ] {
        let (got, body) = parts(server.admin(Method::GET, url).send().await.unwrap()).await;
        assert_eq!(got, status, "{url} {body}");
        assert!(
            body["message"].as_str().unwrap().contains(field),
            "{url} {body}"
        );
    }
    let url = "/1/profiles/personalization/nobody/explain?facet=brand&value=Apple";
    assert_eq!(
        parts(server.admin(Method::GET, url).send().await.unwrap())
            .await
            .0,
        404
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn previews_score_a_candidate_and_store_nothing() {
    let server = shop().await;
    let doc = document(&server).await;
    let answer = compile(&doc, "/components/schemas/Preview");
    let request = compile(&doc, "/components/schemas/PreviewRequest");
    let path = "/1/strategies/personalization/preview";
    assert_valid(&answer, &doc["components"]["schemas"]["Preview"]["example"]);
    for (_, example) in doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]
        ["examples"]
        .as_object()
        .unwrap()
    {
        assert_valid(&request, &example["value"]);
    }

    let strategy_before = parts(
        server
            .admin(Method::GET, "/1/strategies/personalization")
            .send()
            .await
            .unwrap(),
    )
    .await
    .1;
    let rows_before = server.engine.user_row_count(APP, "alice").unwrap();
    // Only color counts in the candidate.
    let candidate = json!({
        "eventsScoring": [{"eventName": "Product Clicked", "eventType": "click", "score": 10}],
        "facetsScoring": [{"facetName": "color", "score": 100}],
        "personalizationImpact": 10
    });
    let body = json!({"strategy": candidate, "userTokens": ["alice", "bob", "nobody"]});
    assert_valid(&request, &body);
    let r = server.admin(Method::POST, path).body(body.to_string());
    let (status, got) = parts(r.send().await.unwrap()).await;
    assert_eq!(status, 200, "{got}");
    assert_valid(&answer, &got);
    let users = got["users"].as_array().unwrap();
    assert_eq!(users.len(), 3);
    for u in users {
        let token = u["userToken"].as_str().unwrap();
        let read = parts(
            server
                .admin(Method::GET, &format!("/1/profiles/personalization/{token}"))
                .send()
                .await
                .unwrap(),
        )
        .await;
        // `current` is what a profile read answers now.
        let want = if read.0 == 200 { read.1 } else { Value::Null };
        assert_eq!(u["current"], want, "{token}");
    }
    assert_eq!(
        users[0]["candidate"]["scores"],
        json!({"color": {"Black": 20}})
    );
    assert_eq!(users[1]["candidate"], Value::Null);
    assert_eq!(users[2]["current"], Value::Null);

    // A sample: deterministic, and every user it names is one of the
    // application's.
    let body = json!({"strategy": candidate, "sample": 100});
    let first = parts(
        server
            .admin(Method::POST, path)
            .body(body.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(first.0, 200, "{}", first.1);
    assert_valid(&answer, &first.1);
    let tokens: Vec<&str> = first.1["users"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["userToken"].as_str().unwrap())
        .collect();
    assert_eq!(tokens, ["alice", "bob"]);
    let again = parts(
        server
            .admin(Method::POST, path)
            .body(body.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(again.1, first.1);

    // The candidate is validated as the strategy POST validates it: the
    // same status and message.
    let mut bad = candidate.clone();
    bad["personalizationImpact"] = json!(101);
    let set = parts(
        server
            .admin(Method::POST, "/1/strategies/personalization")
            .body(bad.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    let previewed = parts(
        server
            .admin(Method::POST, path)
            .body(json!({"strategy": bad, "sample": 1}).to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(set.0, 400);
    assert_eq!(previewed, set);
    let many: Vec<String> = (0..101).map(|i| format!("u{i}")).collect();
    for (body, status, field) in [
        (json!({"userTokens": ["alice"]}), 422, "strategy"),
        (
            json!({"strategy": candidate, "userTokens": []}),
            422,
            "userTokens",
        ),
        (
            json!({"strategy": candidate, "userTokens": many}),
            422,
            "userTokens",
        ),
        (json!({"strategy": candidate}), 422, "userTokens"),
        (json!({"strategy": candidate, "sample": 0}), 422, "sample"),
        (json!({"strategy": candidate, "sample": 101}), 422, "sample"),
        (
            json!({"strategy": candidate, "sample": 1, "extra": 1}),
            422,
            "extra",
        ),
    ] {
        assert!(!request.is_valid(&body), "the document allows {body}");
        let r = server.admin(Method::POST, path).body(body.to_string());
        let (got, answer) = parts(r.send().await.unwrap()).await;
        assert_eq!(got, status, "{body} {answer}");
        assert!(
            answer["message"].as_str().unwrap().contains(field),
            "{body} {answer}"
        );
    }
    // The profiles ACL: a search key may not enumerate users.
    let r = server
        .as_key(Method::POST, path, APP, SEARCH_KEY)
        .body(json!({"strategy": candidate, "sample": 5}).to_string());
    assert_eq!(parts(r.send().await.unwrap()).await.0, 403);

    // Nothing was stored: the strategy and alice's rows are as before.
    let strategy_after = parts(
        server
            .admin(Method::GET, "/1/strategies/personalization")
            .send()
            .await
            .unwrap(),
    )
    .await
    .1;
    assert_eq!(strategy_after, strategy_before);
    assert_eq!(server.engine.strategy_history(APP, 10).unwrap().len(), 1);
    assert_eq!(
        server.engine.user_row_count(APP, "alice").unwrap(),
        rows_before
    );
    server.stop().await;
}
