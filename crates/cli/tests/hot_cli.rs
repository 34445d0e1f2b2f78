//! `affinity hot`: hot lists added and listed through the binary, bad
//! input refused with what is wrong and nothing written.

mod common;

use common::{fails, ok};

fn day_text(offset_days: i64) -> String {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        + offset_days * 86_400_000;
    affinity_rowkey::time::format_seconds(millis).unwrap()[..10].to_string()
}

#[test]
fn hot_lists_are_added_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    // Two days from today: open whatever the time of day.
    let (first, second) = (day_text(2), day_text(3));
    ok(
        data,
        &[
            "hot",
            "add",
            "--app",
            "shop",
            "--user",
            "u1",
            "--user",
            "u2",
            "--sub-rows",
            "16",
            "--day",
            &first,
            "--days",
            "2",
        ],
    );
    for day in [&first, &second] {
        let out = ok(data, &["hot", "list", "--app", "shop", "--day", day]);
        let list: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(list["day"], day.as_str(), "{out}");
        assert_eq!(list["final"], false, "{out}");
        assert_eq!(
            list["users"],
            serde_json::json!([{"userToken": "u1", "subRows": 16}, {"userToken": "u2", "subRows": 16}]),
            "{out}"
        );
    }
    let listed = ok(data, &["hot", "list", "--app", "shop"]);
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed["users"], serde_json::json!([]));
    assert_eq!(listed["final"], true);

    let add = |extra: &[&str]| -> Vec<String> {
        ["hot", "add", "--app", "shop", "--user"]
            .iter()
            .chain(extra)
            .map(|a| a.to_string())
            .collect()
    };
    let today = day_text(0);
    for (args, part) in [
        (
            add(&["u3", "--sub-rows", "4", "--day", &today]),
            "was fixed at",
        ),
        (
            add(&["u3", "--sub-rows", "1"]),
            "--sub-rows 1: must be 2 to 256",
        ),
        (
            add(&["u 3", "--sub-rows", "4", "--day", &first]),
            "user token",
        ),
        (
            add(&["u3", "--sub-rows", "4", "--days", "0"]),
            "--days must be at least 1",
        ),
        (
            ["hot", "list", "--app", "shop", "--day", "2026-02-30"]
                .map(String::from)
                .to_vec(),
            "must be a date",
        ),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let err = fails(data, &args);
        assert!(err.contains(part), "{args:?}: {err}");
    }
    // Nothing refused was written.
    let out = ok(data, &["hot", "list", "--app", "shop", "--day", &first]);
    assert!(!out.contains("u3"), "{out}");
    // Taken off one day's list, not the other's; not today's.
    ok(
        data,
        &[
            "hot", "remove", "--app", "shop", "--user", "u1", "--day", &first,
        ],
    );
    let out = ok(data, &["hot", "list", "--app", "shop", "--day", &first]);
    assert!(!out.contains("\"u1\"") && out.contains("\"u2\""), "{out}");
    let out = ok(data, &["hot", "list", "--app", "shop", "--day", &second]);
    assert!(out.contains("\"u1\""), "{out}");
    let err = fails(
        data,
        &[
            "hot", "remove", "--app", "shop", "--user", "u2", "--day", &today,
        ],
    );
    assert!(err.contains("was fixed at"), "{err}");
}
