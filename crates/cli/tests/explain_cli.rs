//! `affinity profile explain` and `affinity strategy preview` through the
//! real binary on the embedded store.

mod common;

use common::{fails, ok};

const STRATEGY: &str = r#"{"eventsScoring":[{"eventName":"Product Clicked","eventType":"click","score":30},{"eventName":"Purchase","eventType":"conversion","score":60}],"facetsScoring":[{"facetName":"brand","score":100},{"facetName":"color","score":50}],"personalizationImpact":80}"#;

/// alice: two clicks on Apple (30 x 100 each), a purchase of Samsung
/// (60 x 100) in white (60 x 50); bob: a click on Samsung.
fn shop() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    // Within today (UTC), so every event is of one day.
    let t = (now - 3).max(now - now % 86_400_000);
    let line = |ty: &str, name: &str, user: &str, ts: i64, filters: &str| {
        format!(
            r#"{{"eventType":"{ty}","eventName":"{name}","index":"products","userToken":"{user}","timestamp":{ts},"filters":{filters}}}"#
        )
    };
    let events = [
        line("click", "Product Clicked", "alice", t, r#"["brand:Apple"]"#),
        line(
            "click",
            "Product Clicked",
            "alice",
            t + 1,
            r#"["brand:Apple"]"#,
        ),
        line(
            "conversion",
            "Purchase",
            "alice",
            t + 2,
            r#"["brand:Samsung","color:White"]"#,
        ),
        line(
            "click",
            "Product Clicked",
            "bob",
            t + 3,
            r#"["brand:Samsung"]"#,
        ),
    ];
    let file = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    std::fs::write(dir.path().join("events.jsonl"), events.join("\n")).unwrap();
    std::fs::write(dir.path().join("strategy.json"), STRATEGY).unwrap();
    ok(
        &data,
        &["strategy", "set", "--app", "shop", &file("strategy.json")],
    );
    ok(&data, &["ingest", "--app", "shop", &file("events.jsonl")]);
    (dir, data)
}

#[test]
fn profile_explain_adds_up_to_the_profile() {
    let (_dir, data) = shop();
    let args = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut a = vec!["profile", "explain", "--app", "shop", "--user", "alice"];
        a.extend_from_slice(extra);
        a
    };
    let json = ok(
        &data,
        &args(&["--facet", "brand", "--value", "Apple", "--json"]),
    );
    let x: serde_json::Value = serde_json::from_str(&json).unwrap();
    // 2 x 30 x 100 = 6000 of Samsung's 6000: both 20.
    assert_eq!(x["raw"], 6000, "{x}");
    assert_eq!(x["contributions"][0]["events"], 2, "{x}");
    assert_eq!(x["contributions"][0]["contribution"], 6000, "{x}");
    assert_eq!(x["score"], 20, "{x}");
    let profile = ok(&data, &["profile", "--app", "shop", "alice", "--json"]);
    let profile: serde_json::Value = serde_json::from_str(&profile).unwrap();
    assert_eq!(x["score"], profile["scores"]["brand"]["Apple"]);
    // color:White: 60 x 50 = 3000 of 6000 -> 10.
    let table = ok(&data, &args(&["--facet", "color", "--value", "White"]));
    assert!(table.contains("raw = 3000"), "{table}");
    assert!(
        table.contains("max(1, round(20 x 3000 / 6000)) = 10"),
        "{table}"
    );
    assert!(table.contains("next change at"), "{table}");
    assert_eq!(profile["scores"]["color"]["White"], 10);
    // The plain profile command still takes a positional user.
    assert!(ok(&data, &["profile", "--app", "shop", "bob"]).contains("Samsung"));
    let err = fails(&data, &args(&["--facet", "size", "--value", "M"]));
    assert!(err.contains("facet"), "{err}");
    let err = fails(
        &data,
        &[
            "profile", "explain", "--app", "shop", "--user", "carol", "--facet", "brand",
            "--value", "A",
        ],
    );
    assert!(err.contains("no profile"), "{err}");
}

#[test]
fn strategy_preview_scores_a_candidate_and_sets_nothing() {
    let (dir, data) = shop();
    let candidate = dir.path().join("candidate.json");
    std::fs::write(
        &candidate,
        STRATEGY.replace(
            r#"{"facetName":"brand","score":100},{"facetName":"color","score":50}"#,
            r#"{"facetName":"color","score":100}"#,
        ),
    )
    .unwrap();
    let candidate = candidate.to_string_lossy().into_owned();
    let before = ok(&data, &["strategy", "get", "--app", "shop"]);
    let out = ok(
        &data,
        &[
            "strategy", "preview", "--app", "shop", "--file", &candidate, "--user", "alice",
            "--user", "bob",
        ],
    );
    let got: serde_json::Value = serde_json::from_str(&out).unwrap();
    let users = got["users"].as_array().unwrap();
    assert_eq!(users.len(), 2, "{got}");
    assert_eq!(users[0]["userToken"], "alice");
    assert_eq!(users[0]["current"]["scores"]["brand"]["Apple"], 20, "{got}");
    assert_eq!(
        users[0]["candidate"]["scores"],
        serde_json::json!({"color": {"White": 20}})
    );
    assert_eq!(users[1]["candidate"], serde_json::Value::Null);
    // A sample of the application's users, the same twice.
    let args = [
        "strategy", "preview", "--app", "shop", "--file", &candidate, "--sample", "10",
    ];
    let sample = ok(&data, &args);
    assert_eq!(sample, ok(&data, &args));
    let sample: serde_json::Value = serde_json::from_str(&sample).unwrap();
    assert_eq!(sample["users"].as_array().unwrap().len(), 2, "{sample}");
    // Nothing was set.
    assert_eq!(ok(&data, &["strategy", "get", "--app", "shop"]), before);
    // Bad input is named.
    let err = fails(
        &data,
        &["strategy", "preview", "--app", "shop", "--file", &candidate],
    );
    assert!(err.contains("--user"), "{err}");
    let err = fails(
        &data,
        &[
            "strategy", "preview", "--app", "shop", "--file", &candidate, "--sample", "101",
        ],
    );
    assert!(err.contains("sample"), "{err}");
    std::fs::write(dir.path().join("bad.json"), r#"{"eventsScoring":[]}"#).unwrap();
    let bad = dir.path().join("bad.json").to_string_lossy().into_owned();
    let err = fails(
        &data,
        &[
            "strategy", "preview", "--app", "shop", "--file", &bad, "--sample", "1",
        ],
    );
    assert!(err.contains("facetsScoring"), "{err}");
}
