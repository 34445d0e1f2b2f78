//! `affinity keys add/list/delete`: API keys kept in the store, used by
//! `affinity serve` with no change to its configuration.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::*;

fn request(addr: &str, method: &str, path: &str, key: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nx-algolia-application-id: shop\r\n\
         x-algolia-api-key: {key}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

const EVENT: &str = r#"{"events":[{"eventType":"click","eventName":"Product Clicked","index":"products","userToken":"u1","filters":["brand:Apple"]}]}"#;

#[test]
fn keys_added_by_the_cli_work_on_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let key = ok(
        data,
        &[
            "keys",
            "add",
            "--app",
            "shop",
            "--acl",
            "events,search",
            "--description",
            "shop front",
            "--valid-for",
            "3600",
            "--max-queries-per-ip-per-hour",
            "500",
        ],
    )
    .trim()
    .to_string();
    assert_eq!(key.len(), 32, "{key}");
    assert!(key.bytes().all(|b| b.is_ascii_hexdigit()), "{key}");
    let admin = ok(data, &["keys", "add", "--app", "shop", "--acl", "admin"])
        .trim()
        .to_string();
    let listed = ok(data, &["keys", "list", "--app", "shop"]);
    let line = listed
        .lines()
        .find(|l| l.starts_with(&key))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(
        line.contains("events,search") && line.contains(" 500  shop front"),
        "{line}"
    );
    // The admin key's text is not kept: listed by its digest.
    let hashed = listed
        .lines()
        .find_map(|l| l.strip_prefix("sha256:"))
        .and_then(|rest| rest.split_whitespace().next())
        .map(|hex| format!("sha256:{hex}"))
        .unwrap_or_else(|| panic!("no admin key by digest in {listed}"));
    assert!(!listed.contains(&admin), "{listed}");

    // Bad input: a clear error, nothing stored.
    let err = fails(
        data,
        &["keys", "add", "--app", "shop", "--acl", "addObject"],
    );
    assert!(err.contains("\"addObject\""), "{err}");
    let err = fails(
        data,
        &[
            "keys",
            "add",
            "--app",
            "shop",
            "--acl",
            "search",
            "--valid-for",
            "0",
        ],
    );
    assert!(err.contains("--valid-for 0"), "{err}");
    let err = fails(
        data,
        &[
            "keys",
            "add",
            "--app",
            "shop",
            "--acl",
            "search",
            "--valid-for",
            "-5",
        ],
    );
    assert!(err.contains("-5"), "{err}");
    let err = fails(data, &["keys", "delete", "--app", "shop", "nosuchkey"]);
    assert!(err.contains("does not exist"), "{err}");
    let err = fails(
        data,
        &["keys", "add", "--app", "bad app", "--acl", "search"],
    );
    assert!(err.contains("bad app"), "{err}");
    assert_eq!(ok(data, &["keys", "list", "--app", "shop"]), listed);

    // The server knows no key of its own for `shop` but the stored ones.
    {
        let server = serve(data, &["--app-id", "other", "--api-key", "other-admin"]);
        let (status, body) = request(&server.addr, "POST", "/1/events", &key, EVENT);
        assert_eq!(status, 200, "{body}");
        let (status, body) = request(&server.addr, "GET", "/1/keys", &key, "");
        assert_eq!(status, 403, "{body}");
        let (status, body) = request(&server.addr, "GET", "/1/keys", &admin, "");
        assert_eq!(status, 200, "{body}");
        assert!(body.contains(&key), "{body}");
    }
    // Deleted by the CLI (the admin key by its digest): refused.
    ok(data, &["keys", "delete", "--app", "shop", &key]);
    ok(data, &["keys", "delete", "--app", "shop", &hashed]);
    assert!(!ok(data, &["keys", "list", "--app", "shop"]).contains(&key));
    let server = serve(data, &["--app-id", "other", "--api-key", "other-admin"]);
    let (status, body) = request(&server.addr, "POST", "/1/events", &key, EVENT);
    assert_eq!(status, 401, "{body}");
}
