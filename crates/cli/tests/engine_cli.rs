//! The engine's commands and `affinity serve`, end to end through the real
//! binary on the embedded store.

mod common;

use common::{fails, ok, serve};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

const STRATEGY: &str = r#"{"eventsScoring":[{"eventName":"Product Viewed","eventType":"view","score":10},{"eventName":"Product Clicked","eventType":"click","score":30},{"eventName":"Purchase","eventType":"conversion","score":60}],"facetsScoring":[{"facetName":"brand","score":100},{"facetName":"color","score":50}],"personalizationImpact":80}"#;

fn write_inputs(dir: &Path) {
    std::fs::write(
        dir.join("catalog.jsonl"),
        concat!(
            r#"{"objectID":"p1","brand":"Apple","color":"Black"}"#,
            "\n",
            r#"{"objectID":"p2","brand":"Samsung","color":"White"}"#,
            "\n",
            r#"{"objectID":"p3","brand":"Apple","color":"Silver"}"#,
            "\n"
        ),
    )
    .unwrap();
    std::fs::write(dir.join("strategy.json"), STRATEGY).unwrap();
    let t = now_ms() - 60_000;
    let events = [
        format!(
            r#"{{"eventType":"view","eventName":"Product Viewed","index":"products","userToken":"alice","timestamp":{},"objectIDs":["p1","p3"]}}"#,
            t
        ),
        format!(
            r#"{{"eventType":"click","eventName":"Product Clicked","index":"products","userToken":"alice","timestamp":{},"objectIDs":["p1"]}}"#,
            t + 1
        ),
        format!(
            r#"{{"eventType":"conversion","eventName":"Purchase","index":"products","userToken":"alice","timestamp":{},"objectIDs":["p2","p9"]}}"#,
            t + 2
        ),
        format!(
            r#"{{"eventType":"view","eventName":"Product Viewed","index":"products","userToken":"bob","timestamp":{},"filters":["brand:Samsung"]}}"#,
            t + 3
        ),
    ];
    std::fs::write(dir.join("events.jsonl"), events.join("\n")).unwrap();
}

/// A shop loaded through the CLI in a fresh directory: catalog, strategy
/// and the events (in `schema`). Returns the directory (kept alive by the
/// caller), the data path and the output of the catalog load and ingest.
fn loaded_shop(schema: &str) -> (tempfile::TempDir, std::path::PathBuf, String, String) {
    let dir = tempfile::tempdir().unwrap();
    write_inputs(dir.path());
    let data = dir.path().join("data");
    let file = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let catalog = ok(
        &data,
        &[
            "catalog",
            "load",
            "--app",
            "shop",
            "--index",
            "products",
            &file("catalog.jsonl"),
        ],
    );
    ok(
        &data,
        &["strategy", "set", "--app", "shop", &file("strategy.json")],
    );
    let ingest = ok(
        &data,
        &[
            "ingest",
            "--app",
            "shop",
            "--schema",
            schema,
            // Tables of its own (the test below deletes one whole); the
            // strategy set above created it on the shared tables, without
            // events, so it moves.
            "--dedicated-tables",
            &file("events.jsonl"),
        ],
    );
    (dir, data, catalog, ingest)
}

/// alice: view(10) of p1, p3; click(30) of p1; purchase(60) of p2.
/// brand (100): Apple 10*100*2 + 30*100 = 5000, Samsung 6000;
/// color (50): Black 2000, Silver 500, White 3000; max 6000.
const ALICE: &str =
    r#""scores":{"brand":{"Apple":17,"Samsung":20},"color":{"Black":7,"Silver":2,"White":10}}"#;

#[test]
fn engine_commands_walk_through() {
    let (dir, data, catalog, ingest) = loaded_shop("wide");
    let file = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    assert!(catalog.contains("loaded 3 objects"), "{catalog}");
    assert!(ok(&data, &["strategy", "get", "--app", "shop"]).contains("Product Clicked"));
    // `strategy set` answers what the API's POST answers: the time as ISO-8601.
    let set = ok(
        &data,
        &["strategy", "set", "--app", "shop", &file("strategy.json")],
    );
    let set: serde_json::Value = serde_json::from_str(&set).unwrap();
    assert_eq!(set["message"], "Strategy was successfully updated.");
    let updated_at = set["updatedAt"].as_str().unwrap_or_default();
    let with_millis = updated_at.replace('Z', ".000Z");
    let millis = affinity_rowkey::time::parse_millis(&with_millis).expect("ISO-8601 updatedAt");
    assert!((now_ms() - millis).abs() < 600_000, "{set}");
    assert!(
        ingest.contains("4 events: 4 stored, 0 repeated within the input, 1 unknown objects"),
        "{ingest}"
    );
    // A retried file is stored again and counts nothing twice (the
    // profile below is unchanged).
    let out = ok(&data, &["ingest", "--app", "shop", &file("events.jsonl")]);
    assert!(out.contains("4 events: 4 stored"), "{out}");

    let profile = ok(&data, &["profile", "--app", "shop", "alice", "--json"]);
    assert!(profile.contains(ALICE), "{profile}");
    assert!(profile.contains(r#""userToken":"alice""#), "{profile}");
    let table = ok(&data, &["profile", "--app", "shop", "alice"]);
    assert!(table.contains("Samsung") && table.contains("20"), "{table}");

    // Every profile as JSON lines on stdout: what the reads answer.
    let lines = ok(&data, &["export", "--app", "shop"]);
    let exported: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(exported.len(), 2, "{lines}");
    for value in &exported {
        let user = value["userToken"].as_str().unwrap_or_default();
        let read = ok(&data, &["profile", "--app", "shop", user, "--json"]);
        assert_eq!(
            *value,
            serde_json::from_str::<serde_json::Value>(&read).unwrap()
        );
    }
    // A candidate strategy scored for everyone into a file; nothing is set.
    std::fs::write(
        dir.path().join("candidate.json"),
        STRATEGY.replace(
            r#"{"facetName":"brand","score":100},{"facetName":"color","score":50}"#,
            r#"{"facetName":"color","score":100}"#,
        ),
    )
    .unwrap();
    let out = ok(
        &data,
        &[
            "export",
            "--app",
            "shop",
            "--strategy",
            &file("candidate.json"),
            "--out",
            &file("profiles.jsonl"),
            "--shard",
            "0/1",
            "--threads",
            "1",
        ],
    );
    // Only alice's events name a color; in the wide schema only those are
    // read.
    assert!(
        out.contains("exported 1 profiles from 3 events") && out.contains("candidate"),
        "{out}"
    );
    let written = std::fs::read_to_string(dir.path().join("profiles.jsonl")).unwrap();
    assert_eq!(written.lines().count(), 1, "{written}");
    assert!(
        written.contains(
            r#""scores":{"color":{"Black":13,"Silver":3,"White":20}},"userToken":"alice""#
        ),
        "{written}"
    );
    assert!(ok(&data, &["profile", "--app", "shop", "alice", "--json"]).contains(ALICE));

    // Maintenance and a rebuild, as named jobs: nothing is missing.
    let out = ok(
        &data,
        &["maintain", "--app", "shop", "--job", "m", "--shard", "0/1"],
    );
    assert!(out.contains("maintained 2 users"), "{out}");
    let out = ok(
        &data,
        &["rebuild", "--app", "shop", "--job", "r", "--shard", "0/1"],
    );
    assert!(
        out.contains("rebuilt 2 users from 4 events")
            && out.contains("the state of 0 events restored"),
        "{out}"
    );
    // Both are jobs in the store, newest first; a job reads as the API's.
    let list = ok(&data, &["jobs", "list", "--app", "shop"]);
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 2, "{list}");
    assert!(
        lines.iter().any(|l| l.starts_with("r ")
            && l.contains("rebuild")
            && l.contains("succeeded")
            && l.contains("shards 1/1 done")),
        "{list}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("m ") && l.contains("maintain")),
        "{list}"
    );
    let shown: serde_json::Value =
        serde_json::from_str(&ok(&data, &["jobs", "show", "--app", "shop", "r"])).unwrap();
    assert_eq!(shown["status"], "succeeded", "{shown}");
    assert_eq!(shown["report"]["events"], 4, "{shown}");
    assert!(fails(&data, &["jobs", "show", "--app", "shop", "nope"]).contains("no job \"nope\""));
    // Shards share one job only by name.
    let err = fails(&data, &["maintain", "--app", "shop", "--shard", "0/2"]);
    assert!(err.contains("--shard needs --job"), "{err}");
    let err = fails(&data, &["maintain", "--app", "shop", "--job", "r"]);
    assert!(err.contains("rebuild job of 1 shards"), "{err}");
    let err = fails(&data, &["maintain", "--app", "shop", "--lease", "0s"]);
    assert!(err.contains("need 1s to 60m"), "{err}");
    // The profiles table lost whole: a rebuild brings every profile back.
    ok(&data, &["table", "delete", "profiles.shop"]);
    assert!(fails(&data, &["profile", "--app", "shop", "alice"]).contains("no profile"));
    let out = ok(&data, &["rebuild", "--app", "shop"]);
    assert!(out.contains("the state of 4 events restored"), "{out}");
    assert!(ok(&data, &["profile", "--app", "shop", "alice", "--json"]).contains(ALICE));

    // Bad input names the line and the field, and stores nothing.
    std::fs::write(dir.path().join("bad.jsonl"), r#"{"eventType":"bogus","eventName":"x","index":"products","userToken":"carol","filters":["a:b"]}"#).unwrap();
    let err = fails(&data, &["ingest", "--app", "shop", &file("bad.jsonl")]);
    assert!(err.contains("line 1") && err.contains("EventType"), "{err}");
    let err = fails(&data, &["profile", "--app", "shop", "carol"]);
    assert!(err.contains("no profile"), "{err}");
    let err = fails(
        &data,
        &[
            "ingest",
            "--app",
            "shop",
            "--schema",
            "narrow",
            &file("events.jsonl"),
        ],
    );
    assert!(err.contains("migration"), "{err}");
    for command in ["export", "rebuild", "maintain"] {
        let err = fails(&data, &[command, "--app", "shop", "--shard", "2/2"]);
        assert!(err.contains("0 <= I < N"), "{command}: {err}");
    }

    let out = ok(&data, &["delete-user", "--app", "shop", "alice"]);
    assert!(out.contains("none left"), "{out}");
    assert!(fails(&data, &["profile", "--app", "shop", "alice"]).contains("no profile"));
    assert!(ok(&data, &["profile", "--app", "shop", "bob", "--json"]).contains("Samsung"));
}

#[test]
fn migrate_narrow_to_wide_keeps_profiles() {
    let (_dir, data, _, _) = loaded_shop("narrow");
    ok(
        &data,
        &["migrate", "start", "--app", "shop", "--to", "wide"],
    );
    assert!(ok(&data, &["migrate", "backfill", "--app", "shop"]).contains("complete"));
    assert!(
        ok(&data, &["migrate", "verify", "--app", "shop"]).contains("2 users have equal profiles")
    );
    assert!(ok(&data, &["migrate", "cut-over", "--app", "shop"]).contains("wide"));
    assert!(ok(&data, &["profile", "--app", "shop", "alice", "--json"]).contains(ALICE));
}

#[test]
fn migrate_salt_changes_the_buckets_and_keeps_profiles() {
    let (_dir, data, _, _) = loaded_shop("narrow");
    let before = ok(&data, &["profile", "--app", "shop", "alice", "--json"]);
    let out = ok(
        &data,
        &["migrate", "salt", "--app", "shop", "--buckets", "8"],
    );
    assert!(out.contains("from unsalted to 8 salt buckets"), "{out}");
    assert_eq!(
        ok(&data, &["profile", "--app", "shop", "alice", "--json"]),
        before
    );
    let out = ok(
        &data,
        &["migrate", "salt", "--app", "shop", "--buckets", "3"],
    );
    assert!(out.contains("from 8 buckets to 3 salt buckets"), "{out}");
    assert_eq!(
        ok(&data, &["profile", "--app", "shop", "alice", "--json"]),
        before
    );
    let err = fails(
        &data,
        &["migrate", "salt", "--app", "shop", "--buckets", "0"],
    );
    assert!(err.contains("0 is not between 1 and 256"), "{err}");
    let err = fails(
        &data,
        &["migrate", "salt", "--app", "nosuch", "--buckets", "4"],
    );
    assert!(err.contains("nosuch"), "{err}");
}

#[test]
fn delete_app_removes_one_application_of_the_shared_tables() {
    let (dir, data, _, _) = loaded_shop("narrow");
    let file = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    // Two applications on the shared tables, one a prefix of the other.
    for app in ["sho", "sho2"] {
        ok(
            &data,
            &[
                "catalog",
                "load",
                "--app",
                app,
                "--index",
                "products",
                &file("catalog.jsonl"),
            ],
        );
        ok(
            &data,
            &["strategy", "set", "--app", app, &file("strategy.json")],
        );
        ok(&data, &["ingest", "--app", app, &file("events.jsonl")]);
        assert!(ok(&data, &["profile", "--app", app, "alice", "--json"]).contains(ALICE));
    }
    let tables = ok(&data, &["table", "ls"]);
    let has = |name: &str| tables.lines().any(|t| t.trim() == name);
    assert!(has("events") && has("events.shop"), "{tables}");
    assert!(!has("events.sho") && !has("events.sho2"), "{tables}");
    let out = ok(&data, &["delete-app", "--app", "sho"]);
    assert!(
        out.contains("deleted application sho") && out.contains("shared"),
        "{out}"
    );
    assert!(fails(&data, &["profile", "--app", "sho", "alice"]).contains("no profile"));
    assert!(ok(&data, &["profile", "--app", "sho2", "alice", "--json"]).contains(ALICE));
    assert!(ok(&data, &["profile", "--app", "shop", "alice", "--json"]).contains(ALICE));
    let err = fails(&data, &["delete-app", "--app", "sho"]);
    assert!(err.contains("application \"sho\" does not exist"), "{err}");
    // With events on the shared tables, isolation is refused, naming why.
    let err = fails(
        &data,
        &[
            "ingest",
            "--app",
            "sho2",
            "--retention-days",
            "7",
            &file("events.jsonl"),
        ],
    );
    assert!(
        err.contains("a retention of 7 days needs tables of its own"),
        "{err}"
    );
}

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

#[test]
fn serve_answers_the_insights_and_personalization_api() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &["--app-id", "shop", "--api-key", "secret"]);
    let addr = server.addr.clone();

    let (status, body) = request(
        &addr,
        "POST",
        "/1/strategies/personalization",
        "secret",
        STRATEGY,
    );
    assert_eq!(status, 200, "{body}");
    let event = format!(
        r#"{{"events":[{{"eventType":"conversion","eventName":"Purchase","index":"products","userToken":"alice","timestamp":{},"filters":["brand:Apple"]}}]}}"#,
        now_ms()
    );
    let (status, body) = request(&addr, "POST", "/1/events", "secret", &event);
    assert_eq!(
        (status, body.as_str()),
        (200, r#"{"message":"OK","status":200}"#)
    );
    let (status, body) = request(
        &addr,
        "GET",
        "/1/profiles/personalization/alice",
        "secret",
        "",
    );
    assert_eq!(status, 200);
    assert!(
        body.contains(r#""scores":{"brand":{"Apple":20}}"#),
        "{body}"
    );
    let (status, body) = request(
        &addr,
        "GET",
        "/1/profiles/personalization/alice",
        "wrong",
        "",
    );
    assert_eq!(
        (status, body.as_str()),
        (401, r#"{"message":"Invalid credentials","status":401}"#)
    );
    drop(server);
}

/// A server started under a soft open-file limit of 256 raises it to the
/// hard limit (the embedded store keeps up to half of it in table files).
#[cfg(target_os = "linux")]
#[test]
fn serve_raises_its_open_file_limit() {
    use std::os::unix::process::CommandExt;

    let soft_limit = |pid: u32| -> (u64, u64) {
        let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
        let line = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .unwrap()
            .to_string();
        let numbers: Vec<u64> = line
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        (numbers[0], numbers[1])
    };
    let dir = tempfile::tempdir().unwrap();
    let server = common::serve_with(dir.path(), &["--app-id", "shop", "--api-key", "k"], |c| {
        // SAFETY: only setrlimit, which is async-signal-safe, between
        // fork and exec.
        unsafe {
            c.pre_exec(|| {
                let mut limit = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
                limit.rlim_cur = 256.min(limit.rlim_max);
                libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
                Ok(())
            });
        }
    });
    let (soft, hard) = soft_limit(server.pid());
    assert_eq!(soft, hard.min(1 << 20), "soft {soft}, hard {hard}");
    assert!(soft > 256, "{soft}");
    drop(server);
}

/// Run `affinity serve --listen 127.0.0.1:0 --data DATA ARGS`, which must
/// refuse to start, and return its standard error. A server that starts
/// anyway (it prints its address) is killed and the test fails.
fn serve_refuses(data: &Path, args: &[&str]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_affinity"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(data)
        .args(args)
        .env_remove("AFFINITY_BIGTABLE")
        .env_remove("BIGTABLE_EMULATOR_HOST")
        .env_remove("AFFINITY_CONFIG")
        .env_remove("AFFINITY_APP_ID")
        .env_remove("AFFINITY_API_KEY")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start affinity serve");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("piped stdout"))
        .read_line(&mut first)
        .expect("read the server's output");
    if !first.is_empty() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("affinity serve {args:?} started: {first}");
    }
    let out = child.wait_with_output().expect("wait for affinity serve");
    assert!(!out.status.success(), "affinity serve {args:?} succeeded");
    String::from_utf8(out.stderr).expect("utf-8")
}

#[test]
fn serve_refuses_a_config_that_moves_an_app_with_events_to_another_schema() {
    let (dir, data, _, _) = loaded_shop("wide");
    let config = dir.path().join("affinity.toml");
    let config_arg = config.to_str().expect("utf-8 path");
    let file = |schema: &str| {
        format!(
            "[[apps]]\nid = \"shop\"\nschema = \"{schema}\"\n\
             keys = [{{ value = \"secret\", acl = [\"admin\"] }}]\n"
        )
    };
    std::fs::write(&config, file("narrow")).unwrap();
    let err = serve_refuses(&data, &["--config", config_arg]);
    assert!(
        err.contains(r#"application "shop" already holds wide events"#)
            && err.contains("moving it to narrow is a migration"),
        "{err}"
    );
    // Nothing changed: an export still reads the wide events.
    let out = ok(&data, &["export", "--app", "shop", "--out", "-"]);
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.contains(ALICE), "{out}");
    // Restarted with the stored schema, the server serves the profile.
    std::fs::write(&config, file("wide")).unwrap();
    let server = serve(&data, &["--config", config_arg]);
    let (status, body) = request(
        &server.addr,
        "GET",
        "/1/profiles/personalization/alice",
        "secret",
        "",
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(ALICE), "{body}");
}

#[test]
fn demo_runs_end_to_end_and_refuses_foreign_data() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("demo");
    let run = |data: &Path| {
        Command::new(env!("CARGO_BIN_EXE_affinity"))
            .args(["demo", "--events", "3000", "--users", "50", "--data"])
            .arg(data)
            .output()
            .unwrap()
    };
    let out = run(&data);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("ingested in"), "{text}");
    assert!(text.contains("exported"), "{text}");
    assert!(text.contains("byte for byte"), "{text}");
    assert!(text.contains("user user-00000"), "{text}");
    // The search step: one tantivy search, two users' orders side by side,
    // each a permutation of the same hits, not both the engine's order.
    let (_, search) = text
        .split_once("7. A real search engine")
        .unwrap_or_else(|| panic!("no search step in {text}"));
    let rows: Vec<(String, String)> = search
        .lines()
        .skip(2)
        .take_while(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .map(|l| {
            let (a, b) = l.trim_start().split_at(l.trim_start().len().min(45));
            (a.trim().to_string(), b.trim().to_string())
        })
        .collect();
    assert_eq!(rows.len(), 6, "{search}");
    let was = |cell: &str| -> usize {
        let n = cell.rsplit("(was ").next().unwrap().trim_end_matches(')');
        n.parse().unwrap_or_else(|_| panic!("{cell:?}"))
    };
    let firsts: Vec<usize> = rows.iter().map(|(a, _)| was(a)).collect();
    let seconds: Vec<usize> = rows.iter().map(|(_, b)| was(b)).collect();
    assert!(
        firsts != (1..=6).collect::<Vec<_>>() || seconds != (1..=6).collect::<Vec<_>>(),
        "{search}"
    );
    // Its data is a real store the other commands read.
    let profile = ok(
        &data,
        &["profile", "--app", "demo-shop", "user-00000", "--json"],
    );
    assert!(profile.contains(r#""userToken":"user-00000""#), "{profile}");
    // Rerunning replaces its own earlier data...
    assert!(run(&data).status.success());
    // ...but never a directory that is not a demo's.
    let foreign = dir.path().join("mine");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("precious.txt"), "keep me").unwrap();
    let out = run(&foreign);
    assert!(!out.status.success());
    assert!(foreign.join("precious.txt").exists());
}

/// The backend flags go before or after the subcommand, as `git -C`; a
/// command that has no use for one refuses it instead of ignoring it.
#[test]
fn backend_flags_before_or_after_the_subcommand() {
    let (_dir, data, _, _) = loaded_shop("narrow");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_affinity"))
            .args(args)
            .env_remove("AFFINITY_DATA")
            .env_remove("AFFINITY_BIGTABLE")
            .output()
            .unwrap()
    };
    let data = data.to_str().unwrap();
    let before = run(&[
        "--data", data, "profile", "--app", "shop", "alice", "--json",
    ]);
    let after = run(&[
        "profile", "--app", "shop", "alice", "--json", "--data", data,
    ]);
    assert!(before.status.success(), "{before:?}");
    assert_eq!(before.stdout, after.stdout);
    let profile = String::from_utf8_lossy(&before.stdout);
    assert!(profile.contains(ALICE), "{profile}");
    // Between nested subcommands too.
    let nested = run(&["strategy", "--data", data, "get", "--app", "shop"]);
    assert!(String::from_utf8_lossy(&nested.stdout).contains("Product Clicked"));

    let refused = run(&["--bigtable", "p/i", "demo"]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("--bigtable is not an option of demo"), "{err}");
    let refused = run(&[
        "keys", "hilbert", "--lat", "1", "--lng", "2", "--data", data,
    ]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--data is not an option of keys"));
}

#[test]
fn strategy_variants_set_get_and_clear() {
    let (dir, data, _, _) = loaded_shop("narrow");
    let path = |name: &str| dir.path().join(name);
    let test = serde_json::json!({"variants": [
        {"name": "control", "trafficPercentage": 70},
        {"name": "colors", "trafficPercentage": 30, "strategy": {
            "eventsScoring": [{"eventName": "Product Clicked", "eventType": "click", "score": 30}],
            "facetsScoring": [{"facetName": "color", "score": 100}],
            "personalizationImpact": 90}}]});
    std::fs::write(path("test.json"), test.to_string()).unwrap();
    let none: serde_json::Value = serde_json::from_str(&ok(
        &data,
        &["strategy", "variants", "get", "--app", "shop"],
    ))
    .unwrap();
    assert_eq!(none, serde_json::json!({"variants": []}));
    let set = ok(
        &data,
        &[
            "strategy",
            "variants",
            "set",
            "--app",
            "shop",
            &path("test.json").to_string_lossy(),
        ],
    );
    assert!(set.contains("Variants were successfully updated."), "{set}");
    let got: serde_json::Value = serde_json::from_str(&ok(
        &data,
        &["strategy", "variants", "get", "--app", "shop"],
    ))
    .unwrap();
    assert_eq!(got, test);

    // A bad test names the field and changes nothing.
    std::fs::write(
        path("bad.json"),
        r#"{"variants": [{"name": "a", "trafficPercentage": 60}, {"name": "b", "trafficPercentage": 60}]}"#,
    )
    .unwrap();
    let err = fails(
        &data,
        &[
            "strategy",
            "variants",
            "set",
            "--app",
            "shop",
            &path("bad.json").to_string_lossy(),
        ],
    );
    assert!(
        err.contains("trafficPercentage") && err.contains("120"),
        "{err}"
    );
    let got: serde_json::Value = serde_json::from_str(&ok(
        &data,
        &["strategy", "variants", "get", "--app", "shop"],
    ))
    .unwrap();
    assert_eq!(got, test);

    let cleared = ok(&data, &["strategy", "variants", "clear", "--app", "shop"]);
    assert!(cleared.contains("ended"), "{cleared}");
    let none: serde_json::Value = serde_json::from_str(&ok(
        &data,
        &["strategy", "variants", "get", "--app", "shop"],
    ))
    .unwrap();
    assert_eq!(none, serde_json::json!({"variants": []}));
}
