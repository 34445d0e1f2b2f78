//! `affinity trends` end to end through the real binary on the embedded
//! store: catalog with places, strategy, ingest, then trends.

mod common;

use common::{fails, ok};
use std::path::Path;

use serde_json::{json, Value};

const STRATEGY: &str = r#"{"eventsScoring":[{"eventName":"Product Clicked","eventType":"click","score":30},{"eventName":"Purchase","eventType":"conversion","score":60}],"facetsScoring":[{"facetName":"brand","score":100},{"facetName":"color","score":50}],"personalizationImpact":80}"#;

fn load_shop(dir: &Path, data: &Path) {
    let catalog = [
        r#"{"objectID":"p1","brand":"Apple","color":"Black","_geoloc":{"lat":45.52,"lng":-122.68}}"#,
        r#"{"objectID":"p2","brand":"Samsung","color":"White","_geoloc":{"lat":45.53,"lng":-122.67}}"#,
        r#"{"objectID":"p3","brand":"Apple","color":"Red","_geoloc":{"lat":45.46,"lng":9.19}}"#,
    ];
    std::fs::write(dir.join("catalog.jsonl"), catalog.join("\n")).unwrap();
    std::fs::write(dir.join("strategy.json"), STRATEGY).unwrap();
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 60_000;
    let event = |ty: &str, name: &str, user: &str, ids: &[&str], t: i64| {
        json!({"eventType": ty, "eventName": name, "index": "products",
               "userToken": user, "timestamp": t, "objectIDs": ids})
        .to_string()
    };
    let events = [
        event("click", "Product Clicked", "alice", &["p1"], t),
        event("conversion", "Purchase", "bob", &["p1", "p2"], t + 1),
        event("click", "Product Clicked", "carol", &["p3"], t + 2),
        event("click", "Unscored", "dave", &["p2"], t + 3),
    ];
    std::fs::write(dir.join("events.jsonl"), events.join("\n")).unwrap();
    let file = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let catalog = file("catalog.jsonl");
    let strategy = file("strategy.json");
    let events = file("events.jsonl");
    ok(
        data,
        &[
            "catalog", "load", "--app", "shop", "--index", "products", &catalog,
        ],
    );
    ok(data, &["strategy", "set", "--app", "shop", &strategy]);
    ok(data, &["ingest", "--app", "shop", &events]);
}

#[test]
fn trends_rank_facet_values_around_a_place() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    load_shop(dir.path(), &data);
    let around = [
        "trends",
        "--app",
        "shop",
        "--around",
        "45.52,-122.68",
        "--radius",
        "5000",
    ];
    let json_out = ok(&data, &[&around[..], &["--json"]].concat());
    let v: Value = serde_json::from_str(&json_out).expect("json");
    assert_eq!(
        v["facets"],
        json!({"brand": [{"value": "Apple", "score": 90}, {"value": "Samsung", "score": 60}],
               "color": [{"value": "Black", "score": 90}, {"value": "White", "score": 60}]})
    );
    assert_eq!(v["eventsCounted"], 2);

    let table = ok(&data, &around);
    assert!(table.contains("2 events counted"), "{table}");
    // alice's p1, bob's p1 and p2, dave's unscored p2.
    assert!(table.contains("4 rows in the area and window"), "{table}");
    let lines: Vec<&str> = table.lines().map(str::trim).collect();
    let brand = lines
        .iter()
        .position(|l| *l == "brand")
        .expect("brand table");
    assert!(lines[brand + 2].starts_with("1  Apple"), "{table}");
    assert!(lines[brand + 2].ends_with("90"), "{table}");

    // Milan by box, one facet, one value, an explicit window.
    let milan = ok(
        &data,
        &[
            "trends",
            "--app",
            "shop",
            "--bbox",
            "9.1,45.4,9.3,45.5",
            "--facets",
            "color",
            "--limit",
            "1",
            "--from",
            "2020-01-01T00:00:00Z",
            "--to",
            "4102444800000",
            "--json",
        ],
    );
    let v: Value = serde_json::from_str(&milan).expect("json");
    assert_eq!(
        v["facets"],
        json!({"color": [{"value": "Red", "score": 30}]})
    );
}

#[test]
fn bad_flags_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let base = ["trends", "--app", "shop"];
    let err = fails(&data, &base);
    assert!(err.contains("--around") || err.contains("--bbox"), "{err}");
    let err = fails(&data, &[&base[..], &["--around", "45.5"]].concat());
    assert!(err.contains("--radius"), "{err}");
    let err = fails(
        &data,
        &[&base[..], &["--around", "45.5", "--radius", "10"]].concat(),
    );
    assert!(err.contains("--around"), "{err}");
    let err = fails(&data, &[&base[..], &["--bbox", "1,2,3"]].concat());
    assert!(err.contains("bbox"), "{err}");
    let err = fails(
        &data,
        &[&base[..], &["--bbox", "1,2,3,4", "--from", "soon"]].concat(),
    );
    assert!(err.contains("--from"), "{err}");
    let err = fails(
        &data,
        &[&base[..], &["--bbox", "1,2,3,4", "--limit", "0"]].concat(),
    );
    assert!(err.contains("limit"), "{err}");
}
