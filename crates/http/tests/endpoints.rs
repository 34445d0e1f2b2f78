//! Strategy and jobs, deletions, catalog and the operational endpoints.

mod common;

use std::time::Duration;

use common::*;
use reqwest::Method;
use serde_json::{json, Value};

/// Poll a job until it is no longer running (bounded, not a timing assert).
async fn finished_job(server: &Server, id: &str) -> Value {
    for _ in 0..600 {
        let r = server
            .admin(Method::GET, &format!("/1/jobs/{id}"))
            .send()
            .await
            .unwrap();
        let (status, job) = parts(r).await;
        assert_eq!(status, 200, "{job}");
        if job["status"] != "running" {
            return job;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("job {id} still running after 30 s");
}

#[tokio::test(flavor = "multi_thread")]
async fn strategy_updates_start_a_recompute_job() {
    let server = Server::embedded().await;
    let path = "/1/strategies/personalization";
    let (status, body) = parts(server.admin(Method::GET, path).send().await.unwrap()).await;
    assert_eq!((status, body["status"].clone()), (404, json!(404)));

    let mut missing = strategy();
    missing.as_object_mut().unwrap().remove("facetsScoring");
    let r = server
        .admin(Method::POST, path)
        .body(missing.to_string())
        .send()
        .await
        .unwrap();
    let (status, body) = parts(r).await;
    assert_eq!(status, 400);
    assert!(
        body["message"].as_str().unwrap().contains("facetsScoring"),
        "{body}"
    );
    let mut extra = strategy();
    extra["bogus"] = json!(1);
    let r = server
        .admin(Method::POST, path)
        .body(extra.to_string())
        .send()
        .await
        .unwrap();
    let (status, body) = parts(r).await;
    assert_eq!(status, 400);
    assert!(
        body["message"].as_str().unwrap().contains("bogus"),
        "{body}"
    );
    // Nothing was stored by the rejected updates.
    let (status, _) = parts(server.admin(Method::GET, path).send().await.unwrap()).await;
    assert_eq!(status, 404);
    // An events-only key cannot change the strategy.
    let r = server
        .as_key(Method::POST, path, APP, EVENTS_KEY)
        .body(strategy().to_string());
    assert_eq!(parts(r.send().await.unwrap()).await.0, 403);

    let events: Vec<Value> = (0..50).map(|i| click(&format!("u{i}"), "Apple")).collect();
    // Events before any strategy are stored; profiles appear with one.
    assert_eq!(parts(server.post_events(&events).await).await.0, 200);
    let response = server.set_strategy().await;
    let job_id = response.headers()["x-affinity-job-id"]
        .to_str()
        .unwrap()
        .to_string();
    let (status, body) = parts(response).await;
    assert_eq!(status, 200);
    assert_eq!(body["message"], "Strategy was successfully updated.");
    assert_eq!(body.as_object().unwrap().len(), 2, "{body}");
    assert!(body["updatedAt"].as_str().unwrap().ends_with('Z'));
    let (status, stored) = parts(server.admin(Method::GET, path).send().await.unwrap()).await;
    assert_eq!((status, stored), (200, strategy()));

    let job = finished_job(&server, &job_id).await;
    assert_eq!(job["status"], "succeeded", "{job}");
    assert_eq!(job["report"]["profiles"], 50, "{job}");
    assert_eq!(
        job["progress"]["rangesDone"],
        job["progress"]["rangesTotal"]
    );
    let (profile, _) = server.engine.batch_profile(APP, "u7").unwrap().unwrap();
    assert_eq!(profile.to_json()["scores"], json!({"brand": {"Apple": 20}}));

    let (status, list) = parts(server.admin(Method::GET, "/1/jobs").send().await.unwrap()).await;
    assert_eq!(status, 200);
    assert_eq!(list["jobs"][0]["jobID"], job_id.as_str());
    let r = server
        .admin(Method::GET, "/1/jobs/999")
        .send()
        .await
        .unwrap();
    assert_eq!(parts(r).await.0, 404);
    // Another application does not see the job.
    let r = server.as_key(
        Method::GET,
        &format!("/1/jobs/{job_id}"),
        OTHER_APP,
        OTHER_ADMIN,
    );
    assert_eq!(parts(r.send().await.unwrap()).await.0, 404);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn users_are_deleted() {
    let server = Server::embedded().await;
    assert_eq!(parts(server.set_strategy().await).await.0, 200);
    let events = [
        click("gone", "Apple"),
        click("kept", "Apple"),
        click("p1", "Apple"),
    ];
    assert_eq!(parts(server.post_events(&events).await).await.0, 200);
    assert!(server.engine.user_row_count(APP, "gone").unwrap() > 0);

    let r = server
        .admin(Method::DELETE, "/1/usertokens/gone")
        .send()
        .await
        .unwrap();
    let (status, body) = parts(r).await;
    assert_eq!((status, body), (204, Value::Null));
    assert_eq!(server.engine.user_row_count(APP, "gone").unwrap(), 0);
    let r = server
        .admin(Method::GET, "/1/profiles/personalization/gone")
        .send()
        .await
        .unwrap();
    assert_eq!(parts(r).await.0, 404);
    let r = server
        .admin(Method::GET, "/1/profiles/personalization/kept")
        .send()
        .await
        .unwrap();
    assert_eq!(parts(r).await.0, 200);

    let r = server
        .admin(Method::DELETE, "/1/profiles/p1")
        .send()
        .await
        .unwrap();
    let (status, body) = parts(r).await;
    assert_eq!(status, 200);
    assert_eq!(body["userToken"], "p1");
    assert!(
        body["deletedUntil"].as_str().unwrap().ends_with('Z'),
        "{body}"
    );
    assert_eq!(server.engine.user_row_count(APP, "p1").unwrap(), 0);

    // Deletion needs the admin ACL.
    let r = server.as_key(Method::DELETE, "/1/usertokens/kept", APP, EVENTS_KEY);
    assert_eq!(parts(r.send().await.unwrap()).await.0, 403);
    assert!(server.engine.user_row_count(APP, "kept").unwrap() > 0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn catalog_objects_resolve_object_events() {
    let server = Server::embedded().await;
    assert_eq!(parts(server.set_strategy().await).await.0, 200);
    let objects = json!({"objects": [
        {"objectID": "p1", "brand": "Apple", "color": ["red", "blue"]},
        {"objectID": "p2", "brand": "Samsung", "_geoloc": {"lat": 45.5, "lng": -122.6}},
    ]});
    let path = "/1/indexes/products/objects";
    let r = server
        .admin(Method::POST, path)
        .body(objects.to_string())
        .send()
        .await
        .unwrap();
    let (status, body) = parts(r).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["objectIDs"], json!(["p1", "p2"]));

    let r = server
        .admin(Method::GET, &format!("{path}/p1"))
        .send()
        .await
        .unwrap();
    let (status, body) = parts(r).await;
    assert_eq!(
        (status, body["color"].clone()),
        (200, json!(["red", "blue"]))
    );
    let r = server
        .admin(Method::GET, &format!("{path}/p2"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        parts(r).await.1["_geoloc"],
        json!({"lat": 45.5, "lng": -122.6})
    );
    let r = server
        .admin(Method::PUT, &format!("{path}/p3"))
        .body(r#"{"brand":"Apple"}"#);
    assert_eq!(parts(r.send().await.unwrap()).await.0, 200);
    let r = server.as_key(Method::GET, &format!("{path}/p3"), APP, SEARCH_KEY);
    assert_eq!(
        parts(r.send().await.unwrap()).await.1["brand"],
        json!(["Apple"])
    );
    let r = server
        .admin(Method::GET, &format!("{path}/nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(parts(r).await.0, 404);
    let r = server
        .admin(Method::PUT, &format!("{path}/p4"))
        .body(r#"{"objectID":"p5"}"#);
    let (status, body) = parts(r.send().await.unwrap()).await;
    assert_eq!(status, 422);
    assert!(
        body["message"].as_str().unwrap().contains("ObjectID"),
        "{body}"
    );
    // One invalid object: nothing of the batch is stored.
    let bad = json!({"objects": [{"objectID": "p6", "brand": "Apple"}, {"brand": "x"}]});
    let r = server
        .admin(Method::POST, path)
        .body(bad.to_string())
        .send()
        .await
        .unwrap();
    let (status, body) = parts(r).await;
    assert_eq!(status, 422);
    assert!(
        body["message"].as_str().unwrap().contains("Objects[1]"),
        "{body}"
    );
    let r = server
        .admin(Method::GET, &format!("{path}/p6"))
        .send()
        .await
        .unwrap();
    assert_eq!(parts(r).await.0, 404);
    let r = server
        .admin(Method::DELETE, &format!("{path}/p1"))
        .send()
        .await
        .unwrap();
    assert_eq!(parts(r).await.0, 501);

    let event = json!({"eventType": "conversion", "eventSubtype": "purchase",
        "eventName": "Product Bought", "index": "products", "userToken": "buyer",
        "objectIDs": ["p1", "p3"]});
    assert_eq!(parts(server.post_events(&[event]).await).await.0, 200);
    let r = server
        .admin(Method::GET, "/1/profiles/personalization/buyer")
        .send()
        .await
        .unwrap();
    let (status, profile) = parts(r).await;
    assert_eq!(status, 200);
    assert_eq!(profile["scores"]["brand"], json!({"Apple": 20}));
    assert!(
        profile["scores"]["color"]["red"].as_u64().unwrap() > 0,
        "{profile}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn health_metrics_openapi_cors_and_unknown_routes() {
    let server = Server::embedded().await;
    let (status, body) = parts(server.bare(Method::GET, "/health").send().await.unwrap()).await;
    assert_eq!((status, body), (200, json!({"status": "ok"})));

    assert_eq!(parts(server.set_strategy().await).await.0, 200);
    assert_eq!(
        parts(
            server
                .post_events(&[click("m1", "A"), click("m2", "B")])
                .await
        )
        .await
        .0,
        200
    );
    let mut bad = click("m3", "A");
    bad["eventType"] = json!("nope");
    assert_eq!(
        parts(server.post_events(&[click("m4", "A"), bad]).await)
            .await
            .0,
        422
    );
    let r = server.bare(Method::GET, "/metrics").send().await.unwrap();
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let text = r.text().await.unwrap();
    assert!(
        text.contains("affinity_events_ingested_total 2\n"),
        "{text}"
    );
    assert!(
        text.contains("affinity_events_rejected_total 2\n"),
        "{text}"
    );
    assert!(
        text.contains(
            r#"affinity_http_requests_total{method="POST",route="/1/events",status="422"} 1"#
        ),
        "{text}"
    );
    assert!(
        text.contains(
            r#"affinity_http_request_duration_seconds_count{method="POST",route="/1/events"} 2"#
        ),
        "{text}"
    );
    assert!(
        text.contains("affinity_job_ranges_total{app=\"app1\",job=\"1\"}"),
        "{text}"
    );

    let (status, doc) = parts(
        server
            .bare(Method::GET, "/openapi.json")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let paths = doc["paths"].as_object().unwrap();
    for (path, method) in [
        ("/1/events", "post"),
        ("/1/usertokens/{userToken}", "delete"),
        ("/1/strategies/personalization", "get"),
        ("/1/strategies/personalization", "post"),
        ("/1/profiles/personalization/{userToken}", "get"),
        ("/1/profiles/{userToken}", "delete"),
        ("/1/indexes/{indexName}/objects", "post"),
        ("/1/indexes/{indexName}/objects/{objectID}", "get"),
        ("/1/indexes/{indexName}/objects/{objectID}", "put"),
        ("/1/indexes/{indexName}/objects/{objectID}", "delete"),
        ("/1/jobs", "get"),
        ("/1/jobs/{jobID}", "get"),
        ("/health", "get"),
        ("/metrics", "get"),
        ("/openapi.json", "get"),
    ] {
        assert!(paths[path][method].is_object(), "{method} {path} missing");
    }

    // A browser's preflight.
    let r = server
        .bare(Method::OPTIONS, "/1/events")
        .header("origin", "https://shop.example")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "x-algolia-api-key,content-type",
        )
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    assert_eq!(r.headers()["access-control-allow-origin"], "*");

    let (status, body) = parts(
        server
            .admin(Method::GET, "/1/nothing")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, body["status"].clone()), (404, json!(404)));
    let (status, body) = parts(server.admin(Method::GET, "/1/events").send().await.unwrap()).await;
    assert_eq!((status, body["status"].clone()), (405, json!(405)));
    server.stop().await;
}
