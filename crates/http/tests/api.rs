//! Every endpoint over real HTTP against a server on an embedded store.

mod common;

use common::*;
use reqwest::Method;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread")]
async fn credentials_are_checked_and_scoped_to_the_application() {
    let server = Server::embedded().await;
    let invalid = json!({"status": 401, "message": "Invalid credentials"});
    let path = "/1/strategies/personalization";
    let (status, body) = parts(server.bare(Method::GET, path).send().await.unwrap()).await;
    assert_eq!((status, body), (401, invalid.clone()));
    for (app, key) in [
        (APP, "wrong"),
        (APP, OTHER_ADMIN),
        ("nope", ADMIN),
        (OTHER_APP, ADMIN),
    ] {
        let r = server
            .as_key(Method::GET, path, app, key)
            .send()
            .await
            .unwrap();
        assert_eq!(parts(r).await, (401, invalid.clone()), "{app}/{key}");
    }
    // Wrong credentials are refused before the body is looked at.
    let r = server
        .as_key(Method::POST, "/1/events", APP, "wrong")
        .body("not json");
    assert_eq!(parts(r.send().await.unwrap()).await, (401, invalid));

    // Query parameters work like headers.
    assert_eq!(parts(server.set_strategy().await).await.0, 200);
    let url = format!("{path}?x-algolia-application-id={APP}&x-algolia-api-key={ADMIN}");
    let (status, body) = parts(server.bare(Method::GET, &url).send().await.unwrap()).await;
    assert_eq!((status, body), (200, strategy()));
    // As the search-insights browser library spells them.
    let url = format!("{path}?X-Algolia-Application-Id={APP}&X-Algolia-API-Key={ADMIN}");
    let (status, _) = parts(server.bare(Method::GET, &url).send().await.unwrap()).await;
    assert_eq!(status, 200);
    let url = format!("{path}?x-algolia-application-id={APP}&x-algolia-api-key=nope");
    let (status, _) = parts(server.bare(Method::GET, &url).send().await.unwrap()).await;
    assert_eq!(status, 401);

    // Another application's admin sees none of app1's data.
    assert_eq!(
        parts(server.post_events(&[click("u1", "Apple")]).await)
            .await
            .0,
        200
    );
    let r = server.as_key(
        Method::GET,
        "/1/profiles/personalization/u1",
        OTHER_APP,
        OTHER_ADMIN,
    );
    assert_eq!(parts(r.send().await.unwrap()).await.0, 404);
    let r = server.as_key(Method::GET, path, OTHER_APP, OTHER_ADMIN);
    assert_eq!(parts(r.send().await.unwrap()).await.0, 404);

    // ACLs: an events key cannot read profiles, a search key cannot send events.
    let r = server.as_key(
        Method::GET,
        "/1/profiles/personalization/u1",
        APP,
        EVENTS_KEY,
    );
    assert_eq!(parts(r.send().await.unwrap()).await.0, 403);
    let r = server.as_key(
        Method::GET,
        "/1/profiles/personalization/u1",
        APP,
        SEARCH_KEY,
    );
    assert_eq!(parts(r.send().await.unwrap()).await.0, 200);
    let r = server
        .as_key(Method::POST, "/1/events", APP, SEARCH_KEY)
        .body(json!({"events": [click("u2", "Apple")]}).to_string());
    assert_eq!(parts(r.send().await.unwrap()).await.0, 403);
    assert_eq!(server.engine.user_row_count(APP, "u2").unwrap(), 0);
    let r = server
        .as_key(Method::POST, "/1/events", APP, EVENTS_KEY)
        .body(json!({"events": [click("u2", "Apple")]}).to_string());
    assert_eq!(parts(r.send().await.unwrap()).await.0, 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn events_become_profiles() {
    let server = Server::embedded().await;
    // Without a strategy there is no profile; a strategy set through this
    // server applies to the next read (no stale cached strategy).
    assert_eq!(
        parts(server.post_events(&[click("u0", "Apple")]).await)
            .await
            .0,
        200
    );
    let r = server
        .admin(Method::GET, "/1/profiles/personalization/u0")
        .send()
        .await
        .unwrap();
    assert_eq!(parts(r).await.0, 404);
    assert_eq!(parts(server.set_strategy().await).await.0, 200);
    let r = server
        .admin(Method::GET, "/1/profiles/personalization/u0")
        .send()
        .await
        .unwrap();
    assert_eq!(parts(r).await.0, 200);
    // Identical events in one millisecond are one event (a retry): vary the times.
    let now = server.engine.now_millis();
    let mut events = [
        click("u1", "Apple"),
        click("u1", "Apple"),
        click("u1", "Samsung"),
    ];
    for (i, e) in events.iter_mut().enumerate() {
        e["timestamp"] = json!(now - i as i64);
    }
    let (status, body) = parts(server.post_events(&events).await).await;
    assert_eq!(
        (status, body),
        (200, json!({"status": 200, "message": "OK"}))
    );
    let r = server
        .admin(Method::GET, "/1/profiles/personalization/u1")
        .send()
        .await
        .unwrap();
    let (status, profile) = parts(r).await;
    assert_eq!(status, 200);
    assert_eq!(profile["userToken"], "u1");
    assert_eq!(
        profile["scores"],
        json!({"brand": {"Apple": 20, "Samsung": 10}})
    );
    let last = profile["lastEventAt"].as_str().unwrap();
    assert!(last.len() == 20 && last.ends_with('Z'), "{last}");

    let r = server
        .admin(Method::GET, "/1/profiles/personalization/nobody")
        .send()
        .await
        .unwrap();
    let (status, body) = parts(r).await;
    assert_eq!((status, body["status"].clone()), (404, json!(404)));
    let r = server
        .admin(Method::GET, "/1/profiles/personalization/bad%20token")
        .send()
        .await;
    let (status, body) = parts(r.unwrap()).await;
    assert_eq!(status, 422);
    assert!(
        body["message"].as_str().unwrap().contains("UserToken"),
        "{body}"
    );
    server.stop().await;
}

/// Posts `events`, expects 422 with a message naming `field`, and checks
/// that no user of the batch has anything stored.
async fn rejected(server: &Server, events: Vec<Value>, field: &str) {
    let users: Vec<String> = events
        .iter()
        .filter_map(|e| e["userToken"].as_str().map(str::to_string))
        .collect();
    let (status, body) = parts(server.post_events(&events).await).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["status"], 422);
    let message = body["message"].as_str().unwrap();
    assert!(
        message.to_lowercase().contains(&field.to_lowercase()),
        "{field}: {message}"
    );
    for user in users {
        assert_eq!(
            server.engine.user_row_count(APP, &user).unwrap(),
            0,
            "{user} stored"
        );
        let r = server.admin(Method::GET, &format!("/1/profiles/personalization/{user}"));
        let status = parts(r.send().await.unwrap()).await.0;
        assert!(status == 404 || status == 422, "{user}: {status}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_events_name_the_field_and_store_nothing() {
    let server = Server::embedded().await;
    assert_eq!(parts(server.set_strategy().await).await.0, 200);
    let mut bad_type = click("v2", "Apple");
    bad_type["eventType"] = json!("purchase");
    rejected(&server, vec![click("v1", "Apple"), bad_type], "eventType").await;
    let mut both = click("v3", "Apple");
    both["objectIDs"] = json!(["p1"]);
    rejected(&server, vec![click("v3", "Apple"), both], "objectIDs").await;
    let mut old = click("v4", "Apple");
    old["timestamp"] = json!(server.engine.now_millis() - 31 * 86_400_000);
    rejected(&server, vec![click("v5", "Apple"), old], "timestamp").await;
    let mut token = click("v6", "Apple");
    token["userToken"] = json!("has space");
    rejected(&server, vec![click("v6", "Apple"), token], "userToken").await;
    let mut name = click("v7", "Apple");
    name["eventName"] = json!("x".repeat(65));
    rejected(&server, vec![click("v7", "Apple"), name], "eventName").await;

    // The batch limit is checked before any event is.
    let mut many: Vec<Value> = (0..1001)
        .map(|i| click(&format!("w{i}"), "Apple"))
        .collect();
    many[0]["eventType"] = json!("bogus");
    let (status, body) = parts(server.post_events(&many).await).await;
    assert_eq!(status, 422);
    assert_eq!(
        body["message"],
        "Cannot process more than 1000 events in a batch"
    );
    assert_eq!(server.engine.user_row_count(APP, "w1").unwrap(), 0);
    rejected(&server, vec![], "events").await;

    let r = server
        .admin(Method::POST, "/1/events")
        .body("{not json")
        .send()
        .await
        .unwrap();
    let (status, body) = parts(r).await;
    assert_eq!((status, body["status"].clone()), (400, json!(400)));

    // 1000 is fine.
    many.truncate(1000);
    many[0] = click("w0", "Apple");
    assert_eq!(parts(server.post_events(&many).await).await.0, 200);
    assert!(server.engine.user_row_count(APP, "w999").unwrap() > 0);
    server.stop().await;
}

/// Send `head` (request line and headers) and `body` over a raw connection
/// and return the response's status. The server may answer and close
/// before the whole body is sent (it refuses oversized bodies early), so a
/// failed write is not an error here: the answer is what counts.
async fn raw_status(base: &str, head: &str, body: &[u8]) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    for chunk in body.chunks(64 * 1024) {
        if stream.write_all(chunk).await.is_err() {
            break;
        }
    }
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response).await;
    let text = String::from_utf8_lossy(&response);
    text.get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {text:?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn bodies_over_two_megabytes_are_refused() {
    let server = Server::embedded().await;
    let filler = "x".repeat(2 * 1024 * 1024);
    let body = json!({"events": [click("big", "Apple")], "pad": filler}).to_string();
    let headers = format!(
        "Host: test\r\nx-algolia-application-id: {APP}\r\nx-algolia-api-key: {ADMIN}\r\n\
         content-type: application/json\r\nconnection: close\r\n"
    );
    // Declared too large: refused from the headers alone, before the body.
    let head = format!(
        "POST /1/events HTTP/1.1\r\n{headers}content-length: {}\r\n\r\n",
        body.len()
    );
    assert_eq!(raw_status(&server.base, &head, b"").await, 413);
    // Streamed without a length (chunked): refused once past the limit.
    let mut chunked = Vec::new();
    for chunk in body.as_bytes().chunks(64 * 1024) {
        chunked.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        chunked.extend_from_slice(chunk);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let head = format!("POST /1/events HTTP/1.1\r\n{headers}transfer-encoding: chunked\r\n\r\n");
    assert_eq!(raw_status(&server.base, &head, &chunked).await, 413);
    assert_eq!(server.engine.user_row_count(APP, "big").unwrap(), 0);
    server.stop().await;
}
