//! `affinity bench schemas` end to end through the real binary, at a tiny
//! scale on the embedded store: the JSON records, equal profiles, and the
//! Markdown and SVG files.

use std::process::Command;

#[test]
fn bench_schemas_writes_json_markdown_and_chart_with_equal_profiles() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let json_path = dir.path().join("schemas.json");
    let output = Command::new(env!("CARGO_BIN_EXE_affinity"))
        .args(["bench", "schemas", "--events", "20000", "--repeat", "1"])
        .args(["--backend", "embedded", "--profiles", "balanced,many-light"])
        .arg("--data")
        .arg(dir.path().join("data"))
        .arg("--out")
        .arg(&out)
        .arg("--json")
        .arg(&json_path)
        .env_remove("BIGTABLE_EMULATOR_HOST")
        .output()
        .expect("run the affinity binary");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "bench schemas failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );

    let records: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let records = records.as_array().expect("a JSON list");
    // 2 profiles x 4 strategies x 2 schemas.
    assert_eq!(records.len(), 16);
    let mut facets_seen = std::collections::BTreeSet::new();
    for r in records {
        for field in [
            "backend",
            "schema",
            "app_profile",
            "facets_used",
            "facets_total",
            "events",
            "seconds_min",
            "seconds_median",
            "events_per_s",
            "bytes_read",
            "cells_read",
            "peak_rss_bytes",
            "profiles_equal",
        ] {
            assert!(r.get(field).is_some(), "{field} missing in {r}");
        }
        assert_eq!(r["backend"], "embedded");
        assert_eq!(r["profiles_equal"], true, "{r}");
        assert_eq!(r["events"], 20000);
        assert_eq!(r["events_read"], 20000);
        assert_eq!(r["facets_total"], 20);
        assert!(r["seconds_min"].as_f64().unwrap() > 0.0);
        assert!(r["seconds_median"].as_f64().unwrap() >= r["seconds_min"].as_f64().unwrap());
        assert!(r["bytes_read"].as_u64().unwrap() > 0);
        assert!(r["peak_rss_bytes"].as_u64().unwrap() > 1 << 20);
        let facets = r["facets_used"].as_u64().unwrap();
        facets_seen.insert(facets);
        // Narrow reads one cell per event; wide one per scored facet.
        let cells = r["cells_read"].as_u64().unwrap();
        match r["schema"].as_str().unwrap() {
            "narrow" => assert_eq!(cells, 20000),
            "wide" => assert_eq!(cells, 20000 * facets),
            other => panic!("unexpected schema {other}"),
        }
    }
    assert_eq!(
        facets_seen.into_iter().collect::<Vec<_>>(),
        vec![1, 3, 10, 20]
    );
    let wide_bytes = |f: u64| {
        records
            .iter()
            .find(|r| r["schema"] == "wide" && r["facets_used"] == f)
            .and_then(|r| r["bytes_read"].as_u64())
            .unwrap()
    };
    assert!(
        wide_bytes(1) * 5 < wide_bytes(20),
        "a 1-facet strategy reads less"
    );

    let md = std::fs::read_to_string(out.join("schemas.md")).unwrap();
    assert!(md.contains("| embedded | many-light |"), "{md}");
    assert!(md.contains("wide/narrow speed"));
    assert!(md.contains("yes, in every run"));
    assert!(stdout.contains("| embedded | balanced |"));
    let svg = std::fs::read_to_string(out.join("schemas.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(
        svg.matches("<polyline").count(),
        4,
        "2 profiles x 2 schemas"
    );
    assert_eq!(svg.matches("<circle").count(), 16);
}

#[test]
fn bench_schemas_rejects_bad_lists() {
    for (flag, value, message) in [("--profiles", "heavy", "heavy"), ("--facets", "21", "21")] {
        let output = Command::new(env!("CARGO_BIN_EXE_affinity"))
            .args(["bench", "schemas", "--events", "10", flag, value])
            .arg("--out")
            .arg(std::env::temp_dir().join("affinity-bench-schemas-never-written"))
            .output()
            .expect("run the affinity binary");
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(message), "{stderr}");
    }
}
