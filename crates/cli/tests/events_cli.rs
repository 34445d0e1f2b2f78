//! `affinity events tail` against a real `affinity serve`, and
//! `affinity catalog delete`, through the real binary.

mod common;

use common::{ok, serve};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn post_events(addr: &str, body: &str) -> u16 {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST /1/events HTTP/1.1\r\nHost: {addr}\r\nx-algolia-application-id: shop\r\n\
         x-algolia-api-key: secret\r\norigin: https://shop.example\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response[9..12].parse().unwrap()
}

fn click(user: &str, event_type: &str) -> String {
    format!(
        r#"{{"eventType":"{event_type}","eventName":"Product Clicked","index":"products","userToken":"{user}","filters":["brand%3AApple"]}}"#
    )
}

fn tail(addr: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_affinity"));
    cmd.args([
        "events",
        "tail",
        "--app",
        "shop",
        "--api-key",
        "secret",
        "--url",
    ])
    .arg(format!("http://{addr}"))
    .args(args)
    .env_remove("AFFINITY_DATA")
    .env_remove("AFFINITY_BIGTABLE");
    cmd
}

#[test]
fn events_tail_prints_recent_events_then_follows_new_ones() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &["--app-id", "shop", "--api-key", "secret"]);
    let addr = server.addr.clone();
    assert_eq!(
        post_events(
            &addr,
            &format!(r#"{{"events":[{}]}}"#, click("t1", "click"))
        ),
        200
    );

    let mut child = tail(&addr, &["--json", "--count", "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(
        (&first["status"], &first["event"]["userToken"]),
        (&"accepted".into(), &"t1".into())
    );
    // Posted while tail waits on its long poll: it prints them as they come.
    let batch = format!(
        r#"{{"events":[{},{}]}}"#,
        click("t2", "click"),
        click("t3", "buy")
    );
    assert_eq!(post_events(&addr, &batch), 422);
    for user in ["t2", "t3"] {
        let line = lines.next().unwrap().unwrap();
        let entry: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(entry["status"], "rejected", "{line}");
        assert_eq!(entry["event"]["userToken"], user, "{line}");
        assert_eq!(entry["rejection"]["code"], "eventType", "{line}");
        assert_eq!(entry["request"]["origin"], "https://shop.example", "{line}");
    }
    // --count 3 reached: tail exits by itself.
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "tail did not exit"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success());

    let out = tail(&addr, &["--no-follow"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].contains(" accepted click \"Product Clicked\" user=t1 about=brand%3AApple from=https://shop.example"), "{text}");
    assert!(
        lines[2].contains(" rejected buy ")
            && lines[2].contains(
                "[422 eventType] events[1]: EventType must be one of view, click, conversion"
            ),
        "{text}"
    );
    let out = tail(&addr, &["--no-follow", "--status", "rejected", "-n", "1"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("user=t3"), "{text}");
    let out = tail(&addr, &["--no-follow", "--user-token", "t2"])
        .output()
        .unwrap();
    assert!(String::from_utf8(out.stdout).unwrap().contains("user=t2"));

    let out = tail(&addr, &["--no-follow"])
        .arg("--api-key")
        .arg("wrong")
        .output();
    let out = out.unwrap();
    assert!(!out.status.success());
    drop(server);
}

#[test]
fn catalog_delete_removes_objects_and_leaves_counted_events() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let catalog = dir.path().join("catalog.jsonl");
    std::fs::write(
        &catalog,
        "{\"objectID\":\"p1\",\"brand\":\"Apple\"}\n{\"objectID\":\"p2\",\"brand\":\"Samsung\"}\n",
    )
    .unwrap();
    let strategy = dir.path().join("strategy.json");
    std::fs::write(
        &strategy,
        r#"{"eventsScoring":[{"eventName":"Product Clicked","eventType":"click","score":10}],"facetsScoring":[{"facetName":"brand","score":100}],"personalizationImpact":50}"#,
    )
    .unwrap();
    let app = ["--app", "shop"];
    ok(
        &data,
        &[
            &["catalog", "load"],
            &app[..],
            &["--index", "products", catalog.to_str().unwrap()],
        ]
        .concat(),
    );
    ok(
        &data,
        &[
            &["strategy", "set"],
            &app[..],
            &[strategy.to_str().unwrap()],
        ]
        .concat(),
    );
    let events = dir.path().join("events.jsonl");
    let write_events = |user: &str| {
        std::fs::write(
            &events,
            format!(r#"{{"eventType":"click","eventName":"Product Clicked","index":"products","userToken":"{user}","objectIDs":["p1"]}}"#),
        )
        .unwrap();
    };
    write_events("before");
    ok(
        &data,
        &[&["ingest"], &app[..], &[events.to_str().unwrap()]].concat(),
    );
    let out = ok(
        &data,
        &[
            &["catalog", "delete"],
            &app[..],
            &["--index", "products", "p1", "p9"],
        ]
        .concat(),
    );
    assert!(
        out.contains("deleted 2 object ids from index products of app shop"),
        "{out}"
    );
    write_events("after");
    ok(
        &data,
        &[&["ingest"], &app[..], &[events.to_str().unwrap()]].concat(),
    );
    let before = ok(
        &data,
        &[&["profile"], &app[..], &["before", "--json"]].concat(),
    );
    assert!(before.contains("\"Apple\":20"), "{before}");
    let after = common::affinity(&data, &[&["profile"], &app[..], &["after"]].concat());
    assert!(!after.status.success(), "p1 resolves to nothing now");
}
