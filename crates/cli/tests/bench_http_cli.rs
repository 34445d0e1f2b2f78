//! `affinity bench http` end to end through the real binary: a short run
//! on an in-process server over a temporary embedded store writes its
//! figures as JSON with no errors, the store settled between the phases
//! (or not, with `--no-settle`); `--url` at a port where nothing listens
//! fails with a message naming the address; against a real `affinity
//! serve`, a key that may not send events makes every batch a counted
//! error and the run fails naming the first status and body. With
//! history, the preload, the maintenance, the reads per user class and
//! the rows per profile agree with each other (and against a server
//! elsewhere there is no history, the reads still per class). Every
//! report's figures are checked against each other and against the printed
//! lines.

mod common;

use std::process::Command;

use common::serve;
use serde_json::Value;

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

fn read_report(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn number(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v} is not a number"))
}

/// The number printed just before the word `label` on the line of `stdout`
/// that starts with `prefix`.
fn printed(stdout: &str, prefix: &str, label: &str) -> f64 {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in {stdout}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| *w == label)
        .unwrap_or_else(|| panic!("no {label:?} in {line:?}"));
    words[at - 1]
        .parse()
        .unwrap_or_else(|_| panic!("no number before {label:?} in {line:?}"))
}

/// A report's figures agree with each other and with the printed lines:
/// rates are counts over seconds (with the settle time, when there is one),
/// every answered request carried a whole batch, the reads second by second
/// add up to the reads, percentiles are in order, each phase lasted its
/// `--seconds`.
fn assert_consistent(report: &Value, stdout: &str) {
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
    let (settings, ingest, profiles) =
        (&report["settings"], &report["ingest"], &report["profiles"]);
    let events = number(&ingest["events"]);
    let answered = number(&ingest["requests"]) - number(&ingest["errors"]);
    assert_eq!(events, answered * number(&settings["batch"]), "{report}");
    let seconds = number(&ingest["seconds"]);
    assert!(seconds >= number(&settings["seconds"]) * 0.99, "{report}");
    assert!(close(number(&ingest["events_per_s"]), events / seconds));
    let settle = ingest["settle_seconds"].as_f64().unwrap_or(0.0);
    let with_settle = number(&ingest["events_per_s_with_settle"]);
    assert!(close(with_settle, events / (seconds + settle)), "{report}");
    assert!(number(&ingest["batch_p99_ms"]) >= number(&ingest["batch_p50_ms"]));
    assert_eq!(printed(stdout, "ingest:", "events"), events, "{stdout}");

    let reads = number(&profiles["reads"]);
    let seconds = number(&profiles["seconds"]);
    assert!(seconds >= number(&settings["seconds"]) * 0.99, "{report}");
    assert!(close(number(&profiles["reads_per_s"]), reads / seconds));
    assert!(number(&profiles["p99_ms"]) >= number(&profiles["p50_ms"]));
    assert!(number(&profiles["not_found"]) <= reads, "{report}");
    let by_second = profiles["by_second"].as_array().expect("by_second");
    let sum = |field: &str| by_second.iter().map(|s| number(&s[field])).sum::<f64>();
    assert_eq!(sum("reads"), reads, "{report}");
    assert_eq!(sum("over_goal"), number(&profiles["over_goal"]), "{report}");
    assert_eq!(printed(stdout, "profiles:", "reads"), reads, "{stdout}");

    for (phase, prefix) in [
        ("optional_filters", "optionalFilters ("),
        ("rerank", "rerank of 100 hits ("),
    ] {
        let q = &report["query_time"][phase];
        if q.is_null() {
            // A run without heavy users has no query-time phases.
            continue;
        }
        let requests = number(&q["requests"]);
        assert!(requests > 0.0, "{phase}: {report}");
        assert!(close(number(&q["per_s"]), requests / number(&q["seconds"])));
        let (p50, p90, p99) = (
            number(&q["p50_ms"]),
            number(&q["p90_ms"]),
            number(&q["p99_ms"]),
        );
        assert!(p50 <= p90 && p90 <= p99, "{phase}: {report}");
        // The top 1% are at least the p99, so the mean is at least a
        // hundredth of it.
        let mean = number(&q["mean_ms"]);
        assert!(
            mean >= 0.01 * p99 * 0.999 && mean > 0.0,
            "{phase}: {report}"
        );
        assert_eq!(printed(stdout, prefix, "requests"), requests, "{stdout}");
    }
}

#[test]
fn bench_http_runs_both_phases_and_writes_json() {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("http.json");
    let stdout = run_in_process(
        &[
            "--clients",
            "2",
            "--readers",
            "4",
            "--users",
            "100",
            "--history-days",
            "0",
        ],
        &json_path,
    );
    let report = read_report(&json_path);
    assert_consistent(&report, &stdout);
    assert_eq!(report["backend"], "embedded", "{report}");
    // The one-day run has none of the figures of history.
    for absent in ["history", "maintenance", "classes", "single_client"] {
        assert!(report.get(absent).is_none(), "{absent}: {report}");
    }
    assert!(!stdout.contains("history:"), "{stdout}");
    let settings = &report["settings"];
    assert_eq!(
        [
            &settings["clients"],
            &settings["readers"],
            &settings["users"]
        ],
        [2, 4, 100],
        "{report}"
    );
    let ingest = &report["ingest"];
    assert_eq!(ingest["errors"], 0, "{report}");
    for field in ["events", "events_per_s", "batch_p50_ms", "batch_p99_ms"] {
        assert!(number(&ingest[field]) > 0.0, "ingest {field}: {report}");
    }
    // The store was settled before the reads, and the ingest rate counting
    // that time is the lower one.
    let settle = ingest["settle_seconds"].as_f64().expect("settle_seconds");
    assert!(settle > 0.0, "{report}");
    assert!(number(&ingest["events_per_s_with_settle"]) < number(&ingest["events_per_s"]));
    assert_eq!(
        report["goals"]["ingest_met"],
        number(&ingest["events_per_s_with_settle"]) >= 100_000.0
    );

    let profiles = &report["profiles"];
    for field in ["reads", "reads_per_s", "p50_ms", "p99_ms"] {
        assert!(number(&profiles[field]) > 0.0, "profiles {field}: {report}");
    }
    assert_eq!(profiles["errors"], 0, "{report}");
    // Thousands of events over 100 users: every user read has a profile.
    assert_eq!(profiles["not_found"], 0, "{report}");
    // 4 readers are fewer than the goal's 50: the read goal is not met.
    assert_eq!(report["goals"]["profiles_met"], false, "{report}");
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
        .args(["--readers", "2", "--users", "10", "--history-days", "0"])
        .args(["--url", &url])
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
    let report = read_report(&json_path);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_consistent(&report, &stdout);
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
            "--history-days",
            "0",
            "--no-settle",
        ],
        &json_path,
    );
    assert!(stdout.contains("settle: none (--no-settle)"), "{stdout}");
    let report = read_report(&json_path);
    assert_consistent(&report, &stdout);
    // Not settled: no settle time, the ingest rate as measured.
    assert!(report["ingest"]["settle_seconds"].is_null(), "{report}");
    assert_eq!(
        report["ingest"]["events_per_s_with_settle"],
        report["ingest"]["events_per_s"]
    );
    assert_eq!(report["ingest"]["errors"], 0, "{report}");
    assert_eq!(report["profiles"]["not_found"], 0, "{report}");
    assert!(
        report["profiles"]["reads"].as_u64().unwrap() > 0,
        "{report}"
    );
}

/// The reads per user class of a run with history add up to the run's
/// reads, each class's figures agree with themselves and with its printed
/// line, and the classes hold every user once.
fn assert_classes_consistent(report: &Value, stdout: &str) {
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
    let (classes, profiles) = (&report["classes"], &report["profiles"]);
    let sum = |field: &str| {
        ["light", "heavy"]
            .iter()
            .map(|c| number(&classes[c][field]))
            .sum::<f64>()
    };
    for field in ["reads", "not_found", "errors", "over_goal"] {
        assert_eq!(sum(field), number(&profiles[field]), "{field}: {report}");
    }
    assert_eq!(
        sum("users"),
        number(&report["settings"]["users"]),
        "{report}"
    );
    for class in ["light", "heavy"] {
        let c = &classes[class];
        let reads = number(&c["reads"]);
        assert!(reads > 0.0, "{class}: {report}");
        assert!(close(
            number(&c["reads_per_s"]),
            reads / number(&c["seconds"])
        ));
        assert!(number(&c["p99_ms"]) >= number(&c["p50_ms"]), "{report}");
        let by_second = c["by_second"].as_array().expect("by_second");
        let total: f64 = by_second.iter().map(|s| number(&s["reads"])).sum();
        assert_eq!(total, reads, "{class}: {report}");
        let prefix = format!("profiles {class} (");
        assert_eq!(printed(stdout, &prefix, "reads"), reads, "{stdout}");
    }
}

#[test]
fn bench_http_with_history_folds_it_and_reads_per_class() {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("http.json");
    let stdout = run_in_process(
        &[
            "--clients",
            "2",
            "--readers",
            "4",
            "--users",
            "50",
            "--history-days",
            "3",
        ],
        &json_path,
    );
    let report = read_report(&json_path);
    assert_consistent(&report, &stdout);
    assert_classes_consistent(&report, &stdout);
    assert_eq!(report["settings"]["history_days"], 3, "{report}");

    // The preload: three days, every user every day, heavy users among them.
    let history = &report["history"];
    let per_day = history["events_per_day"]
        .as_array()
        .expect("events_per_day");
    assert_eq!(per_day.len(), 3, "{report}");
    let loaded: f64 = per_day.iter().map(number).sum();
    assert_eq!(number(&history["events"]), loaded, "{report}");
    assert!(per_day.iter().all(|n| number(n) >= 50.0), "{report}");
    assert_eq!(history["users"], 50, "{report}");
    let heavy = number(&history["heavy_users"]);
    assert!(heavy >= 1.0, "{report}");
    assert_eq!(
        number(&report["classes"]["heavy"]["users"]),
        heavy,
        "{report}"
    );
    assert_eq!(printed(&stdout, "history:", "events"), loaded, "{stdout}");
    // Today's events of the hours before the last two came in the history,
    // digested (`--today-live-hours 2`, the default).
    let digested = number(&history["today_digested_events"]);
    assert!(digested > 0.0, "{report}");
    let line = stdout.lines().find(|l| l.starts_with("history:")).unwrap();
    assert!(
        line.contains(&format!("today: {digested} events of its closed hours")),
        "{line}"
    );

    // The maintenance folded every user with history, and the rollups
    // hold exactly the events of the closed days loaded.
    let m = &report["maintenance"];
    assert_eq!(m["users"], 50, "{report}");
    assert_eq!(m["folded"], 50, "{report}");
    assert_eq!(m["expected_users"], 50, "{report}");
    assert_eq!(m["rollups"], 50, "{report}");
    assert_eq!(m["conflicts"], 0, "{report}");
    let folded = number(&m["events_folded"]);
    assert_eq!(folded, number(&m["expected_events"]), "{report}");
    assert!(folded > 0.0 && folded <= loaded, "{report}");
    // Folded from scratch: each user's closed days, one row each.
    assert!(number(&m["rows_read"]) >= 100.0, "{report}");
    assert_eq!(printed(&stdout, "maintenance:", "users,"), 50.0, "{stdout}");

    // The reads: every user has a profile; one client read heavy users.
    for class in ["light", "heavy"] {
        assert_eq!(report["classes"][class]["not_found"], 0, "{report}");
        assert_eq!(report["classes"][class]["errors"], 0, "{report}");
    }
    let single = &report["single_client"];
    assert!(number(&single["reads"]) > 0.0, "{report}");
    assert_eq!(single["errors"], 0, "{report}");
    assert!(
        number(&single["p99_us"]) >= number(&single["p50_us"]),
        "{report}"
    );
    assert!(number(&single["mean_us"]) > 0.0, "{report}");

    // Rows per profile: the rollup, today's live row, and any closed day
    // maintenance has not folded yet; nothing read from the events.
    let rows = &report["rows_per_profile"];
    let goal = number(&rows["goal_rows"]);
    assert!((2.0..=3.0).contains(&goal), "{report}");
    for class in ["light", "heavy"] {
        let r = &rows[class];
        assert_eq!(number(&r["rows"]), goal, "{class}: {report}");
        assert_eq!(number(&r["event_rows"]), 0.0, "{class}: {report}");
        assert_eq!(r["found"], r["profiles"], "{class}: {report}");
        assert!(number(&r["cells"]) > 0.0, "{class}: {report}");
    }
    assert!(
        number(&rows["heavy"]["cells"]) > number(&rows["light"]["cells"]),
        "{report}"
    );
    assert_eq!(report["goals"]["rows_met"], true, "{report}");
    assert_eq!(report["goals"]["rows_per_profile"], rows["goal_rows"]);
}

#[test]
fn bench_http_with_history_at_a_url_reads_per_class_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("affinity.toml");
    std::fs::write(
        &config,
        "[[apps]]\nid = \"shop\"\nkeys = [{ value = \"admin\", acl = [\"admin\"] }]\n",
    )
    .unwrap();
    let server = serve(&data, &["--config", config.to_str().expect("utf-8 path")]);
    let url = format!("http://{}", server.addr);
    let json_path = dir.path().join("http.json");
    let output = affinity()
        .args(["bench", "http", "--seconds", "1", "--clients", "1"])
        .args(["--readers", "2", "--users", "30", "--history-days", "3"])
        .args([
            "--url",
            &url,
            "--app-id",
            "shop",
            "--api-key",
            "admin",
            "--json",
        ])
        .arg(&json_path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.starts_with("history: none (the server at --url"),
        "{stdout}"
    );
    let report = read_report(&json_path);
    assert_consistent(&report, &stdout);
    assert_classes_consistent(&report, &stdout);
    for absent in ["history", "maintenance", "rows_per_profile"] {
        assert!(report[absent].is_null(), "{absent}: {report}");
    }
    // The live ingest sent each user's events of today first: every user
    // read has a profile.
    assert_eq!(report["profiles"]["not_found"], 0, "{report}");
    assert_eq!(report["ingest"]["errors"], 0, "{report}");
    assert!(number(&report["single_client"]["reads"]) > 0.0, "{report}");
}
