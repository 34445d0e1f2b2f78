//! `affinity bench http` end to end through the real binary: a short run
//! on an in-process server over a temporary embedded store writes its
//! figures as JSON with no errors, the store settled between the phases
//! (or not, with `--no-settle`); `--url` at a port where nothing listens
//! fails with a message naming the address; against a real `affinity
//! serve`, a key that may not send events makes every batch a counted
//! error and the run fails naming the first status and body.

mod common;

use std::process::Command;

use common::serve;

fn affinity() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_affinity"));
    cmd.env_remove("BIGTABLE_EMULATOR_HOST");
    cmd
}

/// A one-second `bench http` on an in-process server with these
/// arguments, its JSON written to `json`; its stdout, once it succeeded.
fn run_in_process(args: &[&str], json: &std::path::Path) -> String {
    let output = affinity()
        .args(["bench", "http", "--seconds", "1"])
        .args(args)
        .arg("--json")
        .arg(json)
        .output()
        .expect("run the affinity binary");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "bench http failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[test]
fn bench_http_runs_both_phases_and_writes_json() {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("http.json");
    let stdout = run_in_process(
        &["--clients", "2", "--readers", "4", "--users", "100"],
        &json_path,
    );
    assert!(
        stdout.contains("ingest: 2 clients x 1000-event batches"),
        "{stdout}"
    );
    assert!(stdout.contains("profiles: 4 clients"), "{stdout}");
    assert!(stdout.contains(">= 100k events/s"), "{stdout}");
    assert!(stdout.contains("p99 <= 5 ms at 50 clients"), "{stdout}");

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(report["backend"], "embedded", "{report}");
    let ingest = &report["ingest"];
    for field in [
        "events",
        "events_per_s",
        "requests",
        "batch_p50_ms",
        "batch_p99_ms",
    ] {
        let value = ingest[field].as_f64();
        assert!(value.is_some_and(|v| v > 0.0), "ingest {field}: {report}");
    }
    assert_eq!(ingest["errors"], 0, "{report}");
    // The store was settled before the reads, and the ingest rate counting
    // that time is the lower one.
    assert!(
        stdout.contains("settle: the store flushed and compacted"),
        "{stdout}"
    );
    let settle = ingest["settle_seconds"].as_f64().expect("settle_seconds");
    let with_settle = ingest["events_per_s_with_settle"].as_f64().unwrap();
    assert!(settle > 0.0, "{report}");
    assert!(with_settle > 0.0 && with_settle < ingest["events_per_s"].as_f64().unwrap());
    // Every request was a full batch.
    assert_eq!(
        ingest["events"].as_u64().unwrap(),
        ingest["requests"].as_u64().unwrap() * 1000
    );
    assert!(ingest["batch_p99_ms"].as_f64() >= ingest["batch_p50_ms"].as_f64());

    let profiles = &report["profiles"];
    for field in ["reads", "reads_per_s", "p50_ms", "p99_ms"] {
        let value = profiles[field].as_f64();
        assert!(value.is_some_and(|v| v > 0.0), "profiles {field}: {report}");
    }
    assert_eq!(profiles["errors"], 0, "{report}");
    // Thousands of events over 100 users: every user read has a profile.
    assert_eq!(profiles["not_found"], 0, "{report}");
}

#[test]
fn bench_http_at_a_closed_port_fails_naming_the_address() {
    // A port that was free a moment ago, with nothing listening now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let output = affinity()
        .args(["bench", "http", "--seconds", "1", "--url", &url])
        .args(["--app-id", "shop", "--api-key", "secret"])
        .output()
        .expect("run the affinity binary");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "succeeded without a server");
    assert!(
        stderr.contains(&format!("cannot reach an affinity server at {url}")),
        "{stderr}"
    );
}

#[test]
fn bench_http_counts_rejected_batches_and_fails_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // A strategy already set, so a key without the admin ACL can run.
    let strategy = dir.path().join("strategy.json");
    std::fs::write(
        &strategy,
        r#"{"eventsScoring": [{"eventName": "Clicked", "eventType": "click", "score": 10}],
            "facetsScoring": [{"facetName": "brand", "score": 100}],
            "personalizationImpact": 50}"#,
    )
    .unwrap();
    let set = affinity()
        .args(["strategy", "set", "--app", "shop", "--data"])
        .arg(&data)
        .arg(&strategy)
        .output()
        .unwrap();
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    let config = dir.path().join("affinity.toml");
    std::fs::write(
        &config,
        "[[apps]]\nid = \"shop\"\nkeys = [{ value = \"reader\", acl = [\"search\"] }]\n",
    )
    .unwrap();
    let server = serve(&data, &["--config", config.to_str().expect("utf-8 path")]);
    let url = format!("http://{}", server.addr);

    let json_path = dir.path().join("http.json");
    let output = affinity()
        .args(["bench", "http", "--seconds", "1", "--clients", "1"])
        .args(["--readers", "2", "--users", "10", "--url", &url])
        .args(["--app-id", "shop", "--api-key", "reader", "--json"])
        .arg(&json_path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "succeeded with rejected batches");
    assert!(
        stderr.contains("the first: POST /1/events answered 403:") && stderr.contains("events ACL"),
        "{stderr}"
    );
    // The figures are written all the same: no event went in, every
    // request was an error, and the profile reads (allowed) were answered.
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let requests = report["ingest"]["requests"].as_u64().unwrap();
    assert!(requests > 0, "{report}");
    assert_eq!(report["ingest"]["errors"].as_u64(), Some(requests));
    assert_eq!(report["ingest"]["events"], 0, "{report}");
    assert_eq!(report["profiles"]["errors"], 0, "{report}");
    assert!(
        report["profiles"]["reads"].as_u64().unwrap() > 0,
        "{report}"
    );
    // A server elsewhere cannot be settled: no settle time, the rate as is.
    assert!(report["ingest"]["settle_seconds"].is_null(), "{report}");
    assert_eq!(
        report["ingest"]["events_per_s_with_settle"],
        report["ingest"]["events_per_s"]
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("settle: none (the server is elsewhere)"),
        "{stdout}"
    );
}

#[test]
fn bench_http_no_settle_reads_as_the_ingest_ends() {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("http.json");
    let stdout = run_in_process(
        &[
            "--clients",
            "1",
            "--readers",
            "2",
            "--users",
            "20",
            "--no-settle",
        ],
        &json_path,
    );
    assert!(stdout.contains("settle: none (--no-settle)"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert!(report["ingest"]["settle_seconds"].is_null(), "{report}");
    assert_eq!(report["profiles"]["not_found"], 0, "{report}");
    assert!(
        report["profiles"]["reads"].as_u64().unwrap() > 0,
        "{report}"
    );
}
