//! `GET /1/trends` on a real server: results, every 400, 401 and 403.

mod common;

use common::*;
use reqwest::Method;
use serde_json::{json, Value};

fn event(ty: &str, name: &str, user: &str, objects: &[&str]) -> Value {
    json!({"eventType": ty, "eventName": name, "index": "products",
           "userToken": user, "objectIDs": objects})
}

/// Two objects in Portland, one in Milan (same latitude), one without a
/// place; scored and unscored events on them.
async fn shop() -> Server {
    let server = Server::embedded().await;
    let objects = json!({"objects": [
        {"objectID": "p1", "brand": "Apple", "color": "Black", "_geoloc": {"lat": 45.52, "lng": -122.68}},
        {"objectID": "p2", "brand": "Samsung", "color": "White", "_geoloc": {"lat": 45.53, "lng": -122.67}},
        {"objectID": "p3", "brand": "Apple", "color": "Red", "_geoloc": {"lat": 45.46, "lng": 9.19}},
        {"objectID": "p4", "brand": "Sony"}
    ]});
    let r = server
        .admin(Method::POST, "/1/indexes/products/objects")
        .body(objects.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(parts(r).await.0, 200);
    assert_eq!(parts(server.set_strategy().await).await.0, 200);
    let events = [
        event("click", "Product Clicked", "u1", &["p1"]),
        event("conversion", "Product Bought", "u2", &["p1", "p2"]),
        event("click", "Product Clicked", "u3", &["p3"]),
        event("click", "Not Scored", "u4", &["p2"]),
        event("click", "Product Clicked", "u6", &["p4"]),
        click("u5", "Apple"),
    ];
    let (status, body) = parts(server.post_events(&events).await).await;
    assert_eq!(status, 200, "{body}");
    server
}

async fn get(server: &Server, query: &str) -> (u16, Value) {
    let r = server
        .admin(Method::GET, &format!("/1/trends?{query}"))
        .send()
        .await
        .unwrap();
    parts(r).await
}

#[tokio::test(flavor = "multi_thread")]
async fn trends_rank_facet_values_around_a_place() {
    let server = shop().await;
    let portland = json!({
        "brand": [{"value": "Apple", "score": 60}, {"value": "Samsung", "score": 50}],
        "color": [{"value": "Black", "score": 60}, {"value": "White", "score": 50}]
    });
    let (status, body) = get(&server, "aroundLatLng=45.52,-122.68&aroundRadius=5000").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["facets"], portland);
    assert_eq!(body["eventsCounted"], 2);
    // u1's p1, u2's p1 and p2, u4's unscored p2.
    assert_eq!(body["rowsMatched"], 4);
    assert!(body["rowsScanned"].as_u64().unwrap() >= 3, "{body}");
    assert!(body["from"].as_str().unwrap().ends_with('Z'));
    // The same box, corners in Algolia's order; `radius` is an alias.
    let (_, boxed) = get(&server, "insideBoundingBox=45.6,-122.5,45.4,-122.8").await;
    assert_eq!(boxed["facets"], portland);
    let (_, alias) = get(&server, "aroundLatLng=45.52,-122.68&radius=5000").await;
    assert_eq!(alias["facets"], portland);
    // Milan shares Portland's latitude, not its trends.
    let (_, milan) = get(&server, "aroundLatLng=45.46,9.19&aroundRadius=1000").await;
    assert_eq!(
        milan["facets"],
        json!({"brand": [{"value": "Apple", "score": 10}], "color": [{"value": "Red", "score": 10}]})
    );
    let (_, one) = get(
        &server,
        "aroundLatLng=45.52,-122.68&aroundRadius=5000&facets=brand&limit=1",
    )
    .await;
    assert_eq!(
        one["facets"],
        json!({"brand": [{"value": "Apple", "score": 60}]})
    );
    // A window that ends before the events (epoch ms and RFC 3339).
    let (status, empty) = get(
        &server,
        "aroundLatLng=45.52,-122.68&aroundRadius=5000&startDate=1577836800000&endDate=2020-01-02T00:00:00Z",
    )
    .await;
    assert_eq!(status, 200, "{empty}");
    assert_eq!(empty["eventsCounted"], 0);
    assert_eq!(empty["facets"], json!({"brand": [], "color": []}));
    assert_eq!(empty["from"], "2020-01-01T00:00:00.000Z");
    // A search key may read trends.
    let r = server.as_key(
        Method::GET,
        "/1/trends?aroundLatLng=45.52,-122.68&aroundRadius=5000",
        APP,
        SEARCH_KEY,
    );
    let (status, body) = parts(r.send().await.unwrap()).await;
    assert_eq!((status, body["facets"].clone()), (200, portland));
    // Another application sees none of this one's events.
    let r = server.as_key(
        Method::GET,
        "/1/trends?aroundLatLng=45.52,-122.68&aroundRadius=5000&facets=brand",
        OTHER_APP,
        OTHER_ADMIN,
    );
    let (status, body) = parts(r.send().await.unwrap()).await;
    assert_eq!((status, body["eventsCounted"].clone()), (200, json!(0)));
    // The OpenAPI document lists the endpoint.
    let (_, doc) = parts(
        server
            .bare(Method::GET, "/openapi.json")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(doc["paths"]["/1/trends"]["get"].is_object());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_parameters_are_400s_naming_them() {
    let server = shop().await;
    let around = "aroundLatLng=45.5,-122.6&aroundRadius=1000";
    for (query, name) in [
        (String::new(), "aroundLatLng"),
        (
            format!("{around}&insideBoundingBox=1,2,3,4"),
            "aroundLatLng",
        ),
        ("aroundLatLng=45.5".into(), "aroundLatLng"),
        ("aroundLatLng=95,1&aroundRadius=10".into(), "aroundLatLng"),
        ("aroundLatLng=45.5,-122.6".into(), "aroundRadius"),
        (
            "aroundLatLng=45.5,-122.6&aroundRadius=0".into(),
            "aroundRadius",
        ),
        ("aroundLatLng=45.5,-122.6&radius=far".into(), "radius"),
        ("insideBoundingBox=1,2,3".into(), "insideBoundingBox"),
        ("insideBoundingBox=1,200,3,4".into(), "insideBoundingBox"),
        (format!("{around}&startDate=yesterday"), "startDate"),
        (format!("{around}&endDate=2024-13-01T00:00:00Z"), "endDate"),
        (
            format!("{around}&startDate=1714608000000&endDate=1714521600000"),
            "startDate",
        ),
        (format!("{around}&facets=brand,,color"), "facets"),
        (format!("{around}&limit=ten"), "limit"),
        (format!("{around}&limit=0"), "limit"),
        (format!("{around}&limit=101"), "limit"),
    ] {
        let (status, body) = get(&server, &query).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["status"], 400);
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(name), "{query}: {message}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn trends_need_credentials_with_a_read_acl() {
    let server = Server::embedded().await;
    let path = "/1/trends?aroundLatLng=45.5,-122.6&aroundRadius=1000";
    let (status, body) = parts(server.bare(Method::GET, path).send().await.unwrap()).await;
    assert_eq!(status, 401);
    assert_eq!(
        body,
        json!({"status": 401, "message": "Invalid credentials"})
    );
    let r = server.as_key(Method::GET, path, APP, "wrong");
    assert_eq!(parts(r.send().await.unwrap()).await.0, 401);
    let r = server.as_key(Method::GET, path, APP, EVENTS_KEY);
    assert_eq!(parts(r.send().await.unwrap()).await.0, 403);
    server.stop().await;
}
