//! `affinity bench schemas` end to end through the real binary, at a tiny
//! scale on the embedded store: the JSON records (exported profiles equal
//! to the scoring reference, the same profiles exported by both schemas,
//! every event read, one cell per event in the narrow schema and one per
//! scored facet in the wide one), the Markdown showing the same figures and the
//! ratios worked out from them, and the SVG chart's lines and points.

use std::process::Command;

#[test]
fn bench_schemas_writes_json_markdown_and_chart_with_checked_profiles() {
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
            "profiles_exported",
            "bytes_exported",
            "peak_rss_bytes",
            "profiles_match",
        ] {
            assert!(r.get(field).is_some(), "{field} missing in {r}");
        }
        assert_eq!(r["backend"], "embedded");
        assert_eq!(r["profiles_match"], true, "{r}");
        assert!(r["profiles_exported"].as_u64().unwrap() > 0, "{r}");
        assert!(r["bytes_exported"].as_u64().unwrap() > 0, "{r}");
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
    // Both schemas exported the same profiles.
    for r in records {
        let other = records
            .iter()
            .find(|o| {
                o["schema"] != r["schema"]
                    && o["app_profile"] == r["app_profile"]
                    && o["facets_used"] == r["facets_used"]
            })
            .unwrap();
        assert_eq!(r["profiles_exported"], other["profiles_exported"], "{r}");
        assert_eq!(r["bytes_exported"], other["bytes_exported"], "{r}");
    }

    // The events spread over the users as the profile says (about 100 and
    // about 5 per user), and every user's exported profile was checked.
    for r in records {
        let users = r["users"].as_f64().unwrap();
        let per_user = 20000.0 / users;
        let mean = match r["app_profile"].as_str().unwrap() {
            "balanced" => 100.0,
            "many-light" => 5.0,
            other => panic!("unexpected profile {other}"),
        };
        assert!((per_user / mean - 1.0).abs() < 0.1, "{r}");
        assert_eq!(r["users_checked"], r["users"], "{r}");
    }

    // The Markdown (printed and written) shows the records' figures.
    let md = std::fs::read_to_string(out.join("schemas.md")).unwrap();
    assert_eq!(stdout, md);
    let rows: Vec<Vec<&str>> = md
        .lines()
        .filter(|l| l.starts_with("| embedded |"))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect();
    assert_eq!(rows.len(), records.len(), "{md}");
    for row in &rows {
        let facets: u64 = row[5].split('/').next().unwrap().parse().unwrap();
        let r = records
            .iter()
            .find(|r| {
                r["app_profile"] == row[1] && r["schema"] == row[4] && r["facets_used"] == facets
            })
            .unwrap_or_else(|| panic!("no record for {row:?}"));
        let value = |i: usize| -> f64 { row[i].parse().unwrap() };
        assert_eq!(value(2), r["users"].as_f64().unwrap(), "{row:?}");
        assert_eq!(value(3), 20000.0, "{row:?}");
        let median = r["seconds_median"].as_f64().unwrap();
        assert!(
            (value(7) - r["seconds_min"].as_f64().unwrap()).abs() <= 0.0005,
            "{row:?}"
        );
        assert!((value(8) - median).abs() <= 0.0005, "{row:?}");
        assert!((value(9) - 20000.0 / median).abs() <= 0.5, "{row:?}");
        assert_eq!(value(10), r["cells_read"].as_f64().unwrap(), "{row:?}");
        assert_eq!(
            value(12),
            r["profiles_exported"].as_f64().unwrap(),
            "{row:?}"
        );
        assert_eq!(row[15], format!("yes ({})", r["users_checked"]), "{row:?}");
    }
    // Per profile, the wide/narrow speed of each strategy is the narrow
    // median time over the wide one.
    for profile in ["balanced", "many-light"] {
        let line = md
            .lines()
            .find(|l| l.starts_with(&format!("- embedded {profile} (20000 events)")))
            .unwrap_or_else(|| panic!("no ratios of {profile}: {md}"));
        for (facets, label) in [
            (1, "1 facet "),
            (3, "3 facets "),
            (10, "10 facets "),
            (20, "20 facets "),
        ] {
            let median = |schema: &str| {
                records
                    .iter()
                    .find(|r| {
                        r["app_profile"] == profile
                            && r["schema"] == schema
                            && r["facets_used"] == facets
                    })
                    .and_then(|r| r["seconds_median"].as_f64())
                    .unwrap()
            };
            let at = line
                .find(label)
                .unwrap_or_else(|| panic!("no {label:?} in {line}"));
            let printed: f64 = line[at + label.len()..]
                .split('x')
                .next()
                .and_then(|x| x.parse().ok())
                .unwrap_or_else(|| panic!("no ratio after {label:?} in {line}"));
            let ratio = median("narrow") / median("wide");
            assert!((printed - ratio).abs() <= 0.005 + 1e-9, "{line}: {ratio}");
        }
    }
    assert!(md.contains(
        "Exported profiles equal to the scoring reference, narrow and wide alike: yes, in every run"
    ));
    assert!(md.contains("writes nothing, so they measure the export itself"));
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
