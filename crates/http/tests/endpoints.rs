//! Strategy and jobs, deletions, catalog and the operational endpoints.

mod common;

use std::sync::Arc;
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

/// A job whose worker died mid-job (both shards leased, the leases run
/// out) is taken over by a server that maintains: it finds the job when
/// it starts, finishes it, and every server reports it alike.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_takes_over_a_job_whose_worker_died() {
    use affinity_engine::{JobKind, JOBS_TABLE};
    use affinity_model::{Mutation, Store};

    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(affinity_embedded::EmbeddedStore::open(dir.path()).unwrap());
    let first = Server::maintaining(store.clone(), None).await;
    assert_eq!(parts(first.set_strategy().await).await.0, 200);
    let events: Vec<Value> = (0..30)
        .map(|i| click(&format!("d{}", i % 10), "Apple"))
        .collect();
    assert_eq!(parts(first.post_events(&events).await).await.0, 200);
    first
        .engine
        .create_job(APP, "nightly", JobKind::Maintain, 2)
        .unwrap();
    // Its worker took both shards and died: the leases ran out.
    let expired = first.engine.now_millis() - 1;
    let jobs = store.open_table(JOBS_TABLE).unwrap();
    for shard in 0..2 {
        let lease = Mutation::set_cell(
            "j",
            format!("lease,{shard}"),
            0,
            format!("{expired:016},dead-worker"),
        );
        jobs.mutate_row(format!("{APP},nightly").as_bytes(), &[lease])
            .unwrap();
    }
    let r = first.admin(Method::GET, "/1/jobs/nightly");
    let (status, job) = parts(r.send().await.unwrap()).await;
    assert_eq!(status, 200, "{job}");
    assert_eq!(job["status"], "running", "{job}");
    for shard in job["shards"].as_array().unwrap() {
        assert_eq!(shard["status"], "stalled", "{job}");
        assert_eq!(shard["worker"], "dead-worker", "{job}");
    }
    first.stop().await;

    // A server that maintains (its schedule an hour: only its start-up
    // pass can take the job over).
    let server = Server::maintaining(store.clone(), Some(Duration::from_secs(3600))).await;
    let job = finished_job(&server, "nightly").await;
    assert_eq!(job["status"], "succeeded", "{job}");
    assert_eq!(job["report"]["users"], 10, "{job}");
    for shard in job["shards"].as_array().unwrap() {
        assert_eq!(shard["status"], "succeeded", "{job}");
        assert_ne!(shard["worker"], "dead-worker", "{job}");
    }
    // Another server on the store reads the same record.
    let other = Server::maintaining(store, None).await;
    let r = other.admin(Method::GET, "/1/jobs/nightly");
    let (status, seen) = parts(r.send().await.unwrap()).await;
    assert_eq!(status, 200);
    assert_eq!(seen["shards"], job["shards"]);
    assert_eq!(seen["report"], job["report"]);
    other.stop().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn strategy_updates_apply_at_the_next_read() {
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
    let profile = "/1/profiles/personalization/u7";
    let (status, _) = parts(server.admin(Method::GET, profile).send().await.unwrap()).await;
    assert_eq!(status, 404);
    let response = server.set_strategy().await;
    assert!(response.headers().get("x-affinity-job-id").is_none());
    let (status, body) = parts(response).await;
    assert_eq!(status, 200);
    assert_eq!(body["message"], "Strategy was successfully updated.");
    assert_eq!(body.as_object().unwrap().len(), 2, "{body}");
    assert!(body["updatedAt"].as_str().unwrap().ends_with('Z'));
    let (status, stored) = parts(server.admin(Method::GET, path).send().await.unwrap()).await;
    assert_eq!((status, stored), (200, strategy()));
    // The next read scores with the new strategy: no job to wait for.
    let (status, body) = parts(server.admin(Method::GET, profile).send().await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["scores"], json!({"brand": {"Apple": 20}}));
    let (status, list) = parts(server.admin(Method::GET, "/1/jobs").send().await.unwrap()).await;
    assert_eq!((status, list), (200, json!({"jobs": []})));
    server.stop().await;
}

/// A server maintaining on a schedule folds closed days into rollups; its
/// jobs are listed per application, and profiles read the same after.
#[tokio::test(flavor = "multi_thread")]
async fn maintenance_runs_on_a_schedule_and_changes_no_profile() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(affinity_embedded::EmbeddedStore::open(dir.path()).unwrap());
    // A first server without maintenance takes the events (two days old:
    // their arrival day closes only tomorrow, so they are late events).
    let first = Server::maintaining(store.clone(), None).await;
    assert_eq!(parts(first.set_strategy().await).await.0, 200);
    let now = first.engine.now_millis();
    let events: Vec<Value> = (0..30)
        .map(|i| {
            let mut e = click(
                &format!("m{}", i % 10),
                if i % 3 == 0 { "Apple" } else { "Sony" },
            );
            e["timestamp"] = json!(now - 2 * 86_400_000 - i);
            e
        })
        .collect();
    assert_eq!(parts(first.post_events(&events).await).await.0, 200);
    let path = "/1/profiles/personalization/m3";
    let (status, before) = parts(first.admin(Method::GET, path).send().await.unwrap()).await;
    assert_eq!(status, 200, "{before}");
    first.stop().await;

    let server = Server::maintaining(store, Some(Duration::from_secs(3600))).await;
    let job = loop {
        let (status, list) =
            parts(server.admin(Method::GET, "/1/jobs").send().await.unwrap()).await;
        assert_eq!(status, 200);
        if let Some(job) = list["jobs"].as_array().and_then(|l| l.first()) {
            break job.clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(job["type"], "maintain");
    let id = job["jobID"].as_str().unwrap().to_string();
    let job = finished_job(&server, &id).await;
    assert_eq!(job["status"], "succeeded", "{job}");
    // The events arrived today, whose day is not closed yet: nothing is
    // folded, every user is visited.
    assert_eq!(job["report"]["users"], 10, "{job}");
    let (status, after) = parts(server.admin(Method::GET, path).send().await.unwrap()).await;
    assert_eq!((status, &after), (200, &before));
    // Another application does not see the job.
    let r = server.as_key(
        Method::GET,
        &format!("/1/jobs/{id}"),
        OTHER_APP,
        OTHER_ADMIN,
    );
    assert_eq!(parts(r.send().await.unwrap()).await.0, 404);
    let r = server
        .admin(Method::GET, "/1/jobs/999")
        .send()
        .await
        .unwrap();
    assert_eq!(parts(r).await.0, 404);
    let metrics = server.metrics().await;
    assert!(
        metrics.contains(&format!(
            "affinity_job_users{{app=\"app1\",job=\"{id}\"}} 10"
        )),
        "{metrics}"
    );
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
        text.contains("affinity_events_rejected_total{reason=\"eventType\"} 2\n"),
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
        ("/1/events/debug", "get"),
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
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://shop.example"
    );

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

/// A user with all of a day's events (10,000, the default policy's least)
/// goes on the next open hot list, counted in `/metrics`; its profile
/// reads as before.
#[tokio::test(flavor = "multi_thread")]
async fn a_busy_user_is_listed_hot_and_counted() {
    let server = Server::embedded().await;
    assert_eq!(parts(server.set_strategy().await).await.0, 200);
    let now = server.engine.now_millis();
    for batch in 0..10i64 {
        let events: Vec<Value> = (0..1000i64)
            .map(|i| {
                let mut e = click("busy", if i % 2 == 0 { "A" } else { "B" });
                e["timestamp"] = json!(now - 60_000 - (batch * 1000 + i) * 10);
                e
            })
            .collect();
        assert_eq!(parts(server.post_events(&events).await).await.0, 200);
    }
    let text = server.metrics().await;
    assert!(
        text.contains("affinity_hot_users_listed_total{result=\"listed\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("affinity_hot_users_listed_total{result=\"failed\"} 0\n"),
        "{text}"
    );
    // Tomorrow's list, or the day after's from 20:00 UTC (the list the
    // last batch saw open).
    let today = now.div_euclid(affinity_engine::DAY_MILLIS);
    let app = server.engine.app(APP).unwrap();
    let lists: Vec<_> = [today + 1, today + 2]
        .map(|day| server.engine.hot_list(&app, day).unwrap().users())
        .into_iter()
        .filter(|users| !users.is_empty())
        .collect();
    assert_eq!(lists, vec![vec![("busy".to_string(), 16)]]);
    let (status, profile) = parts(
        server
            .admin(Method::GET, "/1/profiles/personalization/busy")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{profile}");
}
