//! Browsers and Algolia's JavaScript clients against a real server.
//!
//! - A page served from another origin (a second HTTP server on another
//!   port) sends events with `fetch`, XHR, `navigator.sendBeacon` and
//!   Algolia's `search-insights` library in headless Chromium (Debian's
//!   `/usr/bin/chromium`, driven by `playwright-core`); the events must
//!   arrive, as the events debugger and the profiles show.
//! - Algolia's Insights client v5 with `compression: 'gzip'` sends a large
//!   batch gzipped and a purchase with `objectData` plainly.
//! - Algolia's Python client 4.x sets the strategy, sends events and reads
//!   and deletes a profile; and generates secured API keys
//!   (`generate_secured_api_key`) whose restrictions the server enforces.
//!
//! - The dashboard (`/dashboard/`), walked page by page by
//!   `tests/browser/dashboard.mjs`: no console error on any page, the
//!   overview shows the rates of traffic the page sends, the
//!   explorer's bars and explanation equal the API's scores for a seeded
//!   user, a strategy slider changes the preview's bars, the A/B test
//!   panel creates a test (a bad share sum shows the server's message and
//!   stores nothing), shows served counts and shares equal to the stats'
//!   and `/metrics`' for users of known buckets, and stops it, a live rejected
//!   event appears in the debugger, a deliberately hot user is the bright
//!   band of the key visualizer, the trends map finds the located events,
//!   no page is wider than a phone, and the admin key is in no URL.
//!   Screenshots of every page go to `CARGO_TARGET_TMPDIR/dashboard/`.
//!
//! The JavaScript side lives in `tests/browser/` at the repository root
//! (its `package.json` and lock; `scripts/test` installs Chromium and runs
//! `npm ci` there), the Python side in `tests/clients/` (`scripts/test`
//! installs its requirements in a venv, `~/.cache/affinity/python`).
//! Without Chromium, Node, Python or those packages the tests are reported
//! as ignored (skipped), never passed; under `CI=true` they fail.
//! The binary has its own `main` (libtest-mimic) to decide that at run time.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use axum::http::header::CONTENT_TYPE;
use axum::routing::get;
use common::*;
use libtest_mimic::{Completion, Trial};
use reqwest::Method;
use serde_json::{json, Value};

fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let trials = [
        (
            "browser_sends_events_from_another_origin_with_fetch_xhr_and_send_beacon",
            browser_prerequisites as fn() -> Result<(), String>,
            browser_sends_events_from_another_origin as fn(),
        ),
        (
            "dashboard_pages_work_in_a_browser",
            browser_prerequisites,
            dashboard_pages_work_in_a_browser,
        ),
        (
            "algolia_js_insights_client_sends_gzip_batches",
            client_prerequisites,
            algolia_js_client_sends_gzip_batches,
        ),
        (
            "algolia_python_client_sends_events_and_reads_profiles",
            python_prerequisites,
            algolia_python_client_works,
        ),
        (
            "algolia_python_client_secured_keys_are_enforced",
            python_prerequisites,
            algolia_python_secured_keys,
        ),
        (
            "algolia_python_client_manages_stored_keys",
            python_prerequisites,
            algolia_python_api_keys,
        ),
    ];
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let tests = trials
        .into_iter()
        .map(|(name, prerequisites, body)| {
            let missing = prerequisites().err();
            let ignored = missing.is_some() && !ci;
            if let (Some(why), true) = (&missing, ignored) {
                eprintln!("skipping {name}: {why}");
            }
            // Run anyway (`--include-ignored`, which scripts/test gives for
            // the emulator tests), a test without its prerequisites reports
            // itself ignored, not passed (nextest, which cannot show that,
            // is told by scripts/test to leave such tests out).
            Trial::ignorable_test(name, move || {
                match prerequisites() {
                    Err(why) if ci => return Err(format!("{why} (required under CI=true)").into()),
                    Err(why) => return Ok(Completion::ignored_with(why)),
                    Ok(()) => {}
                }
                body();
                Ok(Completion::Completed)
            })
            .with_ignored_flag(ignored)
        })
        .collect();
    libtest_mimic::run(&args, tests).exit();
}

/// `tests/browser` at the repository root.
fn js_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/browser")
}

fn chromium() -> PathBuf {
    std::env::var_os("AFFINITY_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"))
}

fn node_package(name: &str) -> Result<(), String> {
    let ok = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        return Err("node is not installed".into());
    }
    if !js_dir().join("node_modules").join(name).is_dir() {
        return Err(format!(
            "tests/browser/node_modules/{name} is missing (scripts/test runs npm ci there)"
        ));
    }
    Ok(())
}

fn browser_prerequisites() -> Result<(), String> {
    if !chromium().is_file() {
        return Err(format!(
            "{} is missing (Debian package chromium; scripts/test installs it)",
            chromium().display()
        ));
    }
    node_package("playwright-core")?;
    node_package("search-insights")
}

fn client_prerequisites() -> Result<(), String> {
    node_package("@algolia/client-insights")
}

/// The venv `scripts/test` installs Algolia's Python client into.
fn python() -> PathBuf {
    std::env::var_os("AFFINITY_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            let home = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
            Some(home.join("affinity/python/bin/python"))
        })
        .unwrap_or_else(|| PathBuf::from("python3"))
}

fn python_prerequisites() -> Result<(), String> {
    let ok = Command::new(python())
        .args(["-c", "import algoliasearch"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{} cannot import algoliasearch (scripts/test installs tests/clients/requirements.txt)",
            python().display()
        ))
    }
}

/// Run `node SCRIPT ARGS` in `tests/browser` and parse its last line.
fn node(script: &str, args: &[&str]) -> Value {
    run(Command::new("node")
        .arg(script)
        .args(args)
        .current_dir(js_dir()))
}

/// Run a client program and parse the last line it prints.
fn run(command: &mut Command) -> Value {
    let out = command.output().expect("run the client");
    let script = format!("{command:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{script} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|_| panic!("not JSON: {stdout}"))
}

/// The accepted debugger entries, once every user of `users` has one (or
/// after 15 seconds: what arrived by then).
async fn arrived(server: &Server, users: &[&str]) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = server
            .admin(Method::GET, "/1/events/debug?limit=1000")
            .send()
            .await
            .unwrap();
        let (_, body) = parts(r).await;
        let entries = body["events"].as_array().cloned().unwrap_or_default();
        let has = |u: &str| {
            entries
                .iter()
                .any(|e| e["status"] == "accepted" && e["event"]["userToken"] == u)
        };
        if users.iter().all(|u| has(u)) || Instant::now() > deadline {
            return entries;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn brand_scores(server: &Server, user: &str) -> Value {
    let path = format!("/1/profiles/personalization/{user}");
    let (_, p) = parts(server.admin(Method::GET, &path).send().await.unwrap()).await;
    p["scores"]["brand"].clone()
}

/// The page's origin: a second server serving `page.html` and the
/// `search-insights` module.
async fn page_server() -> String {
    let dir = js_dir();
    let page = std::fs::read_to_string(dir.join("page.html")).unwrap();
    let module = std::fs::read_to_string(
        dir.join("node_modules/search-insights/dist/search-insights-browser.mjs"),
    )
    .unwrap();
    let router = axum::Router::new()
        .route(
            "/",
            get(move || async move { ([(CONTENT_TYPE, "text/html")], page) }),
        )
        .route(
            "/search-insights-browser.mjs",
            get(move || async move { ([(CONTENT_TYPE, "text/javascript")], module) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    origin
}

fn browser_sends_events_from_another_origin() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let server = Server::embedded().await;
        assert_eq!(parts(server.set_strategy().await).await.0, 200);
        let origin = page_server().await;
        assert_ne!(origin, server.base, "two origins");
        let url = format!("{origin}/?api={}&app={APP}&key={EVENTS_KEY}", server.base);
        let chromium = chromium();
        let out = tokio::task::spawn_blocking(move || {
            node("run-page.mjs", &[&url, &chromium.to_string_lossy()])
        })
        .await
        .unwrap();
        let results = &out["results"];
        let ok = json!({"status": 200, "body": {"status": 200, "message": "OK"}});
        for call in ["fetchHeaders", "fetchCredentials", "xhr"] {
            assert_eq!(results[call], ok, "{call}: {out}");
        }
        assert_eq!(results["beacon"], true, "{out}");
        assert_eq!(results["searchInsights"], true, "{out}");

        let users = [
            "fetch-headers",
            "fetch-credentials",
            "xhr",
            "beacon",
            "search-insights",
        ];
        let entries = arrived(&server, &users).await;
        for user in users {
            let entry = entries
                .iter()
                .find(|e| e["event"]["userToken"] == user)
                .unwrap_or_else(|| panic!("{user} did not arrive: {entries:?}"));
            assert_eq!(entry["status"], "accepted", "{entry}");
            assert_eq!(entry["request"]["origin"], origin.as_str(), "{entry}");
            assert!(
                entry["request"]["userAgent"]
                    .as_str()
                    .unwrap()
                    .contains("Chrome"),
                "{entry}"
            );
        }
        let beacon = entries
            .iter()
            .find(|e| e["event"]["userToken"] == "beacon")
            .unwrap();
        assert!(beacon["request"]["contentType"]
            .as_str()
            .unwrap()
            .starts_with("text/plain"));
        assert!(
            entries.iter().all(|e| e["status"] == "accepted"),
            "{entries:?}"
        );
        // search-insights encodes each filter whole: brand%3AApple%20Inc.
        let si = entries
            .iter()
            .find(|e| e["event"]["userToken"] == "search-insights")
            .unwrap();
        assert_eq!(si["event"]["filters"], json!(["brand%3AApple%20Inc"]));
        assert_eq!(
            brand_scores(&server, "search-insights").await,
            json!({"Apple Inc": 20})
        );
        assert_eq!(brand_scores(&server, "beacon").await, json!({"Apple": 20}));
        server.stop().await;
    });
}

fn algolia_js_client_sends_gzip_batches() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let server = Server::embedded().await;
        assert_eq!(parts(server.set_strategy().await).await.0, 200);
        let host = server.base.trim_start_matches("http://").to_string();
        let out = tokio::task::spawn_blocking(move || {
            node("algolia-client.mjs", &[&host, APP, EVENTS_KEY])
        })
        .await
        .unwrap();
        let ok = json!({"status": 200, "message": "OK"});
        assert_eq!((&out["big"], &out["small"]), (&ok, &ok), "{out}");
        assert_eq!(out["invalid"]["status"], 422, "{out}");
        let entries = arrived(&server, &["js-gzip-0", "js-small"]).await;
        let gzipped: Vec<&Value> = entries
            .iter()
            .filter(|e| e["request"]["contentEncoding"] == "gzip")
            .collect();
        assert_eq!(gzipped.len(), 40, "{entries:?}");
        assert!(gzipped.iter().all(|e| e["status"] == "accepted"));
        let small = entries
            .iter()
            .find(|e| e["event"]["userToken"] == "js-small" && e["status"] == "accepted")
            .unwrap();
        assert_eq!(small["request"]["contentEncoding"], Value::Null, "{small}");
        assert_eq!(small["event"]["objectData"][0]["price"], 10.5);
        let rejected = entries.iter().find(|e| e["status"] == "rejected").unwrap();
        assert_eq!(rejected["rejection"]["code"], "currency", "{rejected}");
        assert_eq!(
            brand_scores(&server, "js-gzip-0").await,
            json!({"Apple": 20})
        );
        server.stop().await;
    });
}

fn algolia_python_client_works() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let server = Server::embedded().await;
        let objects = json!({"objects": [{"objectID": "p1", "brand": "Apple"}]});
        let r = server
            .admin(Method::POST, "/1/indexes/products/objects")
            .body(objects.to_string());
        assert_eq!(parts(r.send().await.unwrap()).await.0, 200);
        let addr = server.base.trim_start_matches("http://").to_string();
        let (host, port) = addr.rsplit_once(':').unwrap();
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/clients/algolia_client.py");
        let mut command = Command::new(python());
        command.arg(script).args([host, port, APP, ADMIN]);
        let out = tokio::task::spawn_blocking(move || run(&mut command))
            .await
            .unwrap();
        assert!(out["strategy"]["updatedAt"].is_string(), "{out}");
        assert_eq!(
            out["events"],
            json!({"status": 200, "message": "OK"}),
            "{out}"
        );
        assert_eq!(out["invalid"]["status"], 422, "{out}");
        assert!(
            out["invalid"]["message"]
                .as_str()
                .unwrap()
                .contains("malformed percent-encoding"),
            "{out}"
        );
        assert_eq!(out["profile"]["userToken"], "py-buyer", "{out}");
        assert_eq!(
            out["profile"]["scores"]["brand"],
            json!({"Apple": 20}),
            "{out}"
        );
        assert_eq!(out["deleted"]["userToken"], "py-buyer", "{out}");
        let entries = arrived(&server, &["py-buyer"]).await;
        let purchase = entries
            .iter()
            .find(|e| e["event"]["eventSubtype"] == "purchase")
            .unwrap();
        assert_eq!(
            purchase["event"]["objectData"][0]["price"], 9.99,
            "{purchase}"
        );
        assert_eq!(purchase["event"]["currency"], "USD");
        assert!(purchase["request"]["userAgent"]
            .as_str()
            .unwrap()
            .contains("Algolia for Python"));
        server.stop().await;
    });
}

/// Secured keys made by Algolia's Python client (`tests/clients/
/// secured_keys.py`), restricted to `py-alice` and the `products` index.
fn algolia_python_secured_keys() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let server = Server::embedded().await;
        assert_eq!(server.set_strategy().await.status(), 200);
        let addr = server.base.trim_start_matches("http://").to_string();
        let (host, port) = addr.rsplit_once(':').unwrap();
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/clients/secured_keys.py");
        let mut command = Command::new(python());
        command.arg(script).args([host, port, APP, BROWSER_KEY]);
        let out = tokio::task::spawn_blocking(move || run(&mut command))
            .await
            .unwrap();
        let refused = |name: &str, words: &str| {
            assert_eq!(out[name]["status"], 403, "{name}: {out}");
            let message = out[name]["message"].as_str().unwrap_or_default();
            assert!(message.contains(words), "{name}: {out}");
        };
        assert_eq!(
            out["own_events"],
            json!({"status": 200, "message": "OK"}),
            "{out}"
        );
        refused("other_user_events", "userToken \"py-alice\"");
        refused("other_index_events", "restrictIndices");
        assert_eq!(out["own_profile"]["userToken"], "py-alice", "{out}");
        assert_eq!(
            out["own_profile"]["scores"]["brand"],
            json!({"Apple": 20}),
            "{out}"
        );
        refused("other_profile", "userToken \"py-alice\"");
        refused("expired", "expired");
        refused("tampered", "Invalid secured API key");
        let remaining = out["remaining_validity"].as_i64().unwrap();
        assert!((3000..=3600).contains(&remaining), "{out}");
        // Nothing of the refused events was stored.
        let r = server.admin(Method::GET, "/1/profiles/personalization/py-bobby");
        assert_eq!(r.send().await.unwrap().status(), 404);
        server.stop().await;
    });
}

/// Keys kept in the store, managed by Algolia's Python client
/// (`tests/clients/api_keys.py`).
fn algolia_python_api_keys() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let server = Server::embedded().await;
        let addr = server.base.trim_start_matches("http://").to_string();
        let (host, port) = addr.rsplit_once(':').unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/clients/api_keys.py");
        let mut command = Command::new(python());
        command.arg(script).args([host, port, APP, ADMIN]);
        let out = tokio::task::spawn_blocking(move || run(&mut command))
            .await
            .unwrap();
        let key = out["added"]["key"].as_str().unwrap();
        assert!(out["added"]["createdAt"].is_string(), "{out}");
        let listed = out["listed"]["keys"].as_array().unwrap();
        assert_eq!(listed.len(), 1, "{out}");
        assert_eq!(listed[0]["value"], key, "{out}");
        assert_eq!(listed[0]["acl"], json!(["search"]), "{out}");
        assert_eq!(listed[0]["description"], "py front", "{out}");
        let validity = listed[0]["validity"].as_i64().unwrap();
        assert!((3000..=3600).contains(&validity), "{out}");
        assert_eq!(out["got"], listed[0], "{out}");
        // A search key may not send events.
        assert_eq!(out["search_key_sends_events"]["status"], 403, "{out}");
        assert_eq!(out["updated"]["key"], key, "{out}");
        assert_eq!(
            out["got_after_update"]["description"], "py changed",
            "{out}"
        );
        assert_eq!(out["got_after_update"]["validity"], 0, "{out}");
        assert_eq!(out["unknown_acl"]["status"], 400, "{out}");
        assert!(out["deleted"]["deletedAt"].is_string(), "{out}");
        assert_eq!(out["got_after_delete"]["status"], 404, "{out}");
        assert_eq!(out["deleted_key_sends_events"]["status"], 401, "{out}");
        assert_eq!(out["got_limited"]["maxQueriesPerIPPerHour"], 2, "{out}");
        // A search key's events are refused (403) but count.
        assert_eq!(out["limited_sends"], json!([403, 403, 429]), "{out}");
        assert!(out["limited_deleted"]["deletedAt"].is_string(), "{out}");
        // Algolia's `recommendation`: kept and listed as given, so the
        // client reads the key back; it reads profiles and the strategy
        // and may not change the strategy.
        let recs = out["recommendation"]["key"].as_str().unwrap();
        assert_eq!(
            out["got_recommendation"]["acl"],
            json!(["search", "recommendation"]),
            "{out}"
        );
        let listed = out["listed_recommendation"]["keys"].as_array().unwrap();
        assert_eq!(listed.len(), 1, "{out}");
        assert_eq!(listed[0]["value"], recs, "{out}");
        assert!(out["admin_sets_strategy"]["updatedAt"].is_string(), "{out}");
        assert_eq!(out["admin_sends_event"]["status"], 200, "{out}");
        assert_eq!(
            out["recommendation_reads_strategy"]["personalizationImpact"], 50,
            "{out}"
        );
        let profile = &out["recommendation_reads_profile"];
        assert_eq!(profile["userToken"], "py-keys", "{out}");
        assert_eq!(profile["scores"]["brand"]["Apple"], 20, "{out}");
        assert_eq!(out["recommendation_sets_strategy"]["status"], 403, "{out}");
        assert!(
            out["recommendation_deleted"]["deletedAt"].is_string(),
            "{out}"
        );
        assert!(server.engine.api_keys(APP).unwrap().is_empty());
        server.stop().await;
    });
}

/// Catalog objects placed in Portland and Paris, brands and colours.
fn located_objects() -> Value {
    let objects: Vec<Value> = (1..=12)
        .map(|i| {
            let (lat, lng) = if i <= 6 {
                (45.5, -122.6)
            } else {
                (48.85, 2.35)
            };
            let brand = ["Apple", "Samsung", "Nokia"][i % 3];
            let color = ["red", "blue"][i % 2];
            json!({"objectID": format!("p{i}"), "brand": brand, "color": color,
                   "_geoloc": {"lat": lat, "lng": lng}})
        })
        .collect();
    json!({ "objects": objects })
}

fn event(kind: &str, user: &str, object: &str) -> Value {
    let (ty, name) = match kind {
        "buy" => ("conversion", "Product Bought"),
        _ => ("click", "Product Clicked"),
    };
    json!({"eventType": ty, "eventName": name, "index": "products",
           "userToken": user, "objectIDs": [object]})
}

/// Slots the key visualizer holds for `table`.
fn slots_of<'a>(vis: &'a Value, table: &str) -> &'a [Value] {
    vis["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == table)
        .and_then(|t| t["slots"].as_array())
        .map_or(&[], |s| s.as_slice())
}

/// Whether the range `[from, to)` (`""`: the table's start or end) holds
/// `key`, the whole table (before ranges are cut) not counting.
fn holds(from: &str, to: &str, key: &str) -> bool {
    !(from.is_empty() && to.is_empty()) && from <= key && (to.is_empty() || key < to)
}

/// `affinity_variant_served_total{app="APP",variant=...}` of `/metrics`.
async fn served_in_metrics(server: &Server) -> Value {
    let text = server.metrics().await;
    let prefix = format!("affinity_variant_served_total{{app=\"{APP}\",variant=\"");
    let mut served = serde_json::Map::new();
    for rest in text.lines().filter_map(|l| l.strip_prefix(&prefix)) {
        let (variant, n) = rest.split_once("\"} ").unwrap();
        served.insert(variant.into(), json!(n.parse::<u64>().unwrap()));
    }
    Value::Object(served)
}

/// What `dashboard.mjs` saw of the strategy editor's A/B test panel.
async fn check_variants_panel(server: &Server, out: &Value) {
    let v = &out["pages"]["variants"];
    // A new test starts as control and a variant with the sliders'
    // strategy, half each.
    assert_eq!(
        v["form"],
        json!([{"name": "control", "share": "50", "kind": "control"},
               {"name": "candidate", "share": "50", "kind": "own"}]),
        "{out}"
    );
    // A share sum of 90: the server's message, verbatim, and nothing stored.
    let bad = json!({"variants": [{"name": "control", "trafficPercentage": 50},
                                  {"name": "candidate", "trafficPercentage": 40}]});
    let r = server
        .admin(Method::PUT, "/1/strategies/personalization/variants")
        .body(bad.to_string());
    let (status, refused) = parts(r.send().await.unwrap()).await;
    assert!((400..500).contains(&status), "{status} {refused}");
    assert_eq!(v["bad"]["message"], refused["message"], "{out}");
    assert!(v["bad"]["total"].as_str().unwrap().contains("90%"), "{out}");
    assert_eq!(v["bad"]["stored"], json!({"variants": []}), "{out}");
    // The saved test: the control without a strategy, the candidate with
    // the sliders' (the second facet moved to 0).
    let saved = &v["saved"]["variants"];
    assert_eq!(
        saved[0],
        json!({"name": "control", "trafficPercentage": 50})
    );
    assert_eq!(saved[1]["name"], "candidate");
    assert_eq!(
        saved[1]["strategy"]["facetsScoring"][1]["score"], 0,
        "{out}"
    );
    // Each known user was answered by the variant of its bucket, and the
    // panel's counts and shares are those answers, as the stats and
    // /metrics count them.
    let mut want = [0u64; 2];
    for user in v["users"].as_array().unwrap() {
        let user = user.as_str().unwrap();
        let i = usize::from(affinity_engine::variants::bucket(user) >= 50);
        want[i] += 1;
        assert_eq!(v["answered"][user], ["control", "candidate"][i], "{user}");
    }
    assert!(
        want.iter().all(|n| *n > 0),
        "40 users in one half: {want:?}"
    );
    let total = want.iter().sum::<u64>() as f64;
    let panel = v["panel"].as_array().unwrap();
    assert_eq!(panel.len(), 2, "{out}");
    for (row, (name, n)) in panel
        .iter()
        .zip(["control", "candidate"].into_iter().zip(want))
    {
        assert_eq!(row["name"], name);
        assert_eq!(row["configured"], 50);
        assert_eq!(row["served"], n, "{out}");
        assert_eq!(row["servedText"], n.to_string());
        assert_eq!(
            row["share"],
            format!("{:.1}%", 100.0 * n as f64 / total),
            "{out}"
        );
    }
    assert!(panel[0]["strategy"]
        .as_str()
        .unwrap()
        .starts_with("Control"));
    assert!(panel[1]["strategy"].as_str().unwrap().contains("color 0"));
    let want = json!({"control": want[0], "candidate": want[1]});
    assert_eq!(v["stats"], want, "{out}");
    assert_eq!(served_in_metrics(server).await, want);
    // Stopped after a confirmation: plain answers again.
    assert_eq!(v["confirmFocused"], "ab-stop-yes");
    let stopped = &v["stopped"];
    assert_eq!(stopped["variants"], json!({"variants": []}), "{out}");
    assert_eq!(stopped["variant"], Value::Null, "{out}");
    assert_eq!(stopped["header"], Value::Null, "{out}");
    assert!(stopped["status"]
        .as_str()
        .unwrap()
        .starts_with("stopped at"));
}

fn dashboard_pages_work_in_a_browser() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        // The application on the shared tables, as new ones are; its key
        // visualizer asked for first, which starts the counting.
        let server = Server::key_visualized(Duration::from_secs(1), false).await;
        server.key_vis(1000).await;
        assert_eq!(parts(server.set_strategy().await).await.0, 200);
        let r = server
            .admin(Method::POST, "/1/indexes/products/objects")
            .body(located_objects().to_string());
        assert_eq!(parts(r.send().await.unwrap()).await.0, 200);
        // Background traffic: 120 users, so the key ranges have keys to
        // be cut at.
        for part in 0..4 {
            let events: Vec<Value> = (0..30)
                .flat_map(|u| {
                    let user = format!("user-{:03}", part * 30 + u);
                    (0..3).map(move |k| event("click", &user, &format!("p{}", 1 + (u + k) % 12)))
                })
                .collect();
            assert_eq!(parts(server.post_events(&events).await).await.0, 200);
        }
        // The hot user: one event and one profile read per request, for
        // four slots once ranges were cut (the page shows 120).
        let profiles = format!("profiles.{APP}");
        let slots = |vis: &Value| slots_of(vis, &profiles).len();
        let start = slots(&server.key_vis(1000).await);
        while slots(&server.key_vis(1000).await) < start + 2 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let start = slots(&server.key_vis(1000).await);
        while slots(&server.key_vis(1000).await) < start + 4 {
            for _ in 0..10 {
                let r = server
                    .post_events(&[event("click", "hot-user", "p2")])
                    .await;
                assert_eq!(r.status(), 200);
                let r = server.admin(Method::GET, "/1/profiles/personalization/hot-user");
                assert_eq!(r.send().await.unwrap().status(), 200);
            }
        }
        // The seeded user's events last, so the events debugger's ring
        // (1000 per application) still holds them for the timeline.
        let seeded = "seeded-alice";
        let events = [
            event("click", seeded, "p3"),
            event("click", seeded, "p3"),
            event("buy", seeded, "p1"),
            event("click", seeded, "p8"),
        ];
        assert_eq!(parts(server.post_events(&events).await).await.0, 200);
        let day = server.engine.now_millis().div_euclid(86_400_000);
        let hot_key = affinity_engine::state::state_row_key("hot-user", day);
        // The API's view: the brightest range of the profiles table (once
        // ranges are cut) holds the hot user's row.
        let vis = server.key_vis(1000).await;
        let (mut best, mut best_range) = (0, (String::new(), String::new()));
        let cut = |s: &&Value| !s["bounds"].as_array().unwrap().is_empty();
        for slot in slots_of(&vis, &profiles).iter().filter(cut) {
            let bounds: Vec<&str> = slot["bounds"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b.as_str().unwrap())
                .collect();
            for (i, w) in slot["writes"].as_array().unwrap().iter().enumerate() {
                let n = w.as_u64().unwrap() + slot["reads"][i].as_u64().unwrap();
                if n > best {
                    let from = if i == 0 { "" } else { bounds[i - 1] };
                    let to = bounds.get(i).copied().unwrap_or("");
                    (best, best_range) = (n, (from.to_string(), to.to_string()));
                }
            }
        }
        assert!(
            holds(&best_range.0, &best_range.1, &hot_key),
            "brightest {best_range:?} ({best}) misses {hot_key}"
        );

        let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
        let base = server.base.clone();
        let chromium = chromium();
        let dir = out_dir.to_string_lossy().into_owned();
        let out = tokio::task::spawn_blocking(move || {
            node(
                "dashboard.mjs",
                &[&base, APP, ADMIN, seeded, &dir, &chromium.to_string_lossy()],
            )
        })
        .await
        .unwrap();
        eprintln!("dashboard screenshots: {}", out_dir.display());
        assert_eq!(out["errors"], json!([]), "console errors: {out}");
        let urls = out["urls"].as_array().unwrap();
        assert!(urls.len() > 10, "{out}");
        assert!(
            urls.iter().all(|u| !u.as_str().unwrap().contains(ADMIN)),
            "the key in a URL: {urls:?}"
        );
        let pages = &out["pages"];
        assert!(out["wrongKey"]["message"]
            .as_str()
            .unwrap()
            .contains("not accepted"));
        assert_eq!(out["wrongKey"]["navHidden"], true);

        // Overview.
        let tables = pages["overview"]["tables"].as_array().unwrap();
        for kind in ["events", "profiles", "trends"] {
            assert!(tables.contains(&json!(format!("{kind}.{APP}"))), "{out}");
        }
        assert_eq!(pages["overview"]["sessionKey"], true);
        // The page's own traffic shows as rates and a rejection reason.
        assert!(
            pages["overview"]["accepted"].as_f64().unwrap() > 0.0,
            "{out}"
        );
        assert!(pages["overview"]["reads"].as_f64().unwrap() > 0.0, "{out}");
        assert_eq!(pages["overview"]["reasons"], json!(["eventType"]), "{out}");
        assert_eq!(pages["overview"]["focused"], "Overview", "{out}");

        // Explorer: the same scores as the API.
        let path = format!("/1/profiles/personalization/{seeded}");
        let (_, profile) = parts(server.admin(Method::GET, &path).send().await.unwrap()).await;
        let mut api: Vec<(String, String, i64)> = Vec::new();
        for (facet, values) in profile["scores"].as_object().unwrap() {
            for (value, score) in values.as_object().unwrap() {
                api.push((facet.clone(), value.clone(), score.as_i64().unwrap()));
            }
        }
        let mut shown: Vec<(String, String, i64)> = pages["explorer"]["bars"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                (
                    b[0].as_str().unwrap().to_string(),
                    b[1].as_str().unwrap().to_string(),
                    b[2].as_i64().unwrap(),
                )
            })
            .collect();
        api.sort();
        shown.sort();
        assert!(api.len() >= 4, "{profile}");
        assert_eq!(shown, api);
        let explained = &pages["explorer"]["explained"];
        let facet = explained["facet"].as_str().unwrap();
        let value = explained["value"].as_str().unwrap();
        assert_eq!(explained["score"], profile["scores"][facet][value], "{out}");
        assert!(!pages["explorer"]["filters"].as_array().unwrap().is_empty());
        // The sample hit list: up to 6 of the user's values and one other.
        assert_eq!(
            pages["explorer"]["rerankRows"],
            api.len().min(6) + 1,
            "{out}"
        );
        assert_eq!(pages["explorer"]["timeline"], 4, "{out}");
        let users = pages["explorer"]["users"].as_array().unwrap();
        assert!(users.contains(&json!("hot-user")), "{out}");

        // Strategy: the slider (color to 0) changed the previewed bars.
        let strategy = &pages["strategy"];
        let sliders = strategy["sliders"].as_array().unwrap();
        assert!(sliders.contains(&json!("color score")), "{out}");
        assert!(sliders.contains(&json!("impact score")), "{out}");
        let before = strategy["before"].as_array().unwrap();
        let after = strategy["after"].as_array().unwrap();
        assert!(before
            .iter()
            .any(|b| b.as_str().unwrap().contains(" color:")));
        assert_ne!(before, after, "{out}");
        assert!(after
            .iter()
            .filter(|b| b.as_str().unwrap().contains(" color:"))
            .all(|b| b.as_str().unwrap().ends_with("=0")));
        // Nothing was saved.
        let (_, current) = parts(
            server
                .admin(Method::GET, "/1/strategies/personalization")
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(current["facetsScoring"][1]["score"], 50);

        // The A/B test panel.
        check_variants_panel(&server, &out).await;

        // Events debugger.
        let events = &pages["events"];
        assert!(
            events["live"].as_str().unwrap().contains("eventType"),
            "{out}"
        );
        let filtered = events["filtered"].as_array().unwrap();
        assert!(!filtered.is_empty() && filtered.iter().all(|s| s == "rejected"));

        // Key visualizer: the hot user is the brightest range of most
        // slots of the profiles table.
        let keys = pages["keys"].as_array().unwrap();
        let table = keys
            .iter()
            .find(|t| t["table"] == profiles.as_str())
            .unwrap_or_else(|| panic!("{out}"));
        let columns = table["columns"].as_array().unwrap();
        let hot = columns
            .iter()
            .filter(|c| {
                holds(
                    c["from"].as_str().unwrap(),
                    c["to"].as_str().unwrap(),
                    &hot_key,
                )
            })
            .count();
        assert!(hot >= 3, "a band of {hot} slots: {columns:?}");
        let brightest = columns
            .iter()
            .max_by_key(|c| c["value"].as_u64().unwrap())
            .unwrap();
        assert!(holds(
            brightest["from"].as_str().unwrap(),
            brightest["to"].as_str().unwrap(),
            &hot_key
        ));

        // Trends: the busiest area has the located events' values.
        let trends = &pages["trends"];
        assert!(trends["busiest"]["events"].as_u64().unwrap() > 0, "{out}");
        assert!(
            trends["values"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v.as_str().unwrap().starts_with("brand:")),
            "{out}"
        );

        // A phone's width: no page scrolls sideways.
        for (page, width) in out["phone"]["widths"].as_object().unwrap() {
            assert!(width.as_u64().unwrap() <= 390, "{page} is {width} wide");
        }
        for page in [
            "overview",
            "explorer",
            "strategy",
            "events",
            "keys",
            "trends",
            "explorer-phone",
        ] {
            assert!(out_dir.join(format!("{page}.png")).is_file(), "{page}.png");
        }
        server.stop().await;
    });
}
