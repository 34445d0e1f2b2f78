//! The OpenAPI document says exactly what the server enforces: random
//! request bodies, valid and not, go to a real server, and each answer
//! must agree with the document as a JSON Schema 2020-12 validator reads
//! it (plus the document's `x-affinity-*` rules a schema cannot say):
//! 200 for a body the document allows, 400 or 422 for one it forbids.
//! Bodies go to `POST /1/events`, `/1/indexes/products/objects` and
//! `/1/indexes/products/rerank`; a re-ranking's 200 answer must also
//! match the document's `RerankedHits`.
//!
//! Bodies are made by a seeded generator that knows each field's valid
//! and invalid shapes (boundaries, nulls, wrong types, percent-encodings,
//! conditional fields), so both sides of every rule come up. The run is
//! bounded (cases and 60 s); `AFFINITY_FUZZ_SEED` replays a run and
//! `AFFINITY_FUZZ_CASES` changes its length.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::Method;
use serde_json::{json, Map, Value};

const DAY: i64 = 86_400_000;

/// A validator of one schema of the document.
fn compile(doc: &Value, pointer: &str) -> jsonschema::Validator {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": format!("#{pointer}"),
        "components": doc["components"],
        "paths": doc["paths"],
    });
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(&schema)
        .unwrap_or_else(|e| panic!("the document's {pointer} does not compile: {e}"))
}

/// The document's rules beyond JSON Schema, on one event: the timestamp
/// window and arrays as long as a sibling.
fn extensions_allow(doc: &Value, event: &Value, now: i64) -> bool {
    let props = &doc["components"]["schemas"]["Event"]["properties"];
    let window = &props["timestamp"]["x-affinity-window"];
    let (age, ahead) = (
        window["maxAgeMillis"].as_i64().expect("x-affinity-window"),
        window["maxFutureMillis"]
            .as_i64()
            .expect("x-affinity-window"),
    );
    if let Some(ts) = event["timestamp"].as_f64() {
        if ts < (now - age) as f64 || ts > (now + ahead) as f64 {
            return false;
        }
    }
    let len = |v: &Value| v.as_array().map_or(0, Vec::len);
    props.as_object().unwrap().iter().all(|(name, schema)| {
        match (schema["x-affinity-sameLengthAs"].as_str(), &event[name]) {
            (Some(other), Value::Array(items)) => items.len() == len(&event[other]),
            _ => true,
        }
    })
}

/// One of `items`.
fn pick<T: Clone>(rng: &mut StdRng, items: &[T]) -> T {
    items[rng.random_range(0..items.len())].clone()
}

fn hex(rng: &mut StdRng, n: usize, upper: bool) -> String {
    let digits = if upper {
        "0123456789ABCDEF"
    } else {
        "0123456789abcdef"
    };
    (0..n)
        .map(|_| digits.as_bytes()[rng.random_range(0..16)] as char)
        .collect()
}

/// A filter made of pieces that exercise the decoder: literal and encoded
/// colons, good and broken escapes, multi-byte characters.
fn filter(rng: &mut StdRng) -> String {
    const PIECES: [&str; 16] = [
        "brand",
        "Apple",
        ":",
        "%3A",
        "%3a",
        "%25",
        "%",
        "%C3%A9",
        "%C3",
        "%28",
        "é",
        "%zz",
        "%ED%A0%80",
        "%F0%9F%98%80",
        "+",
        "%2",
    ];
    let n = rng.random_range(1..6);
    (0..n).map(|_| pick(rng, &PIECES)).collect()
}

fn string_list(rng: &mut StdRng, item: impl Fn(&mut StdRng) -> Value) -> Value {
    let n = pick(rng, &[0usize, 1, 1, 2, 3, 20, 21]);
    Value::Array((0..n).map(|_| item(rng)).collect())
}

/// A value for `field`: valid ones more often than not.
fn value_for(rng: &mut StdRng, field: &str, now: i64, objects: usize) -> Value {
    if rng.random_ratio(1, 12) {
        return Value::Null;
    }
    let upper = rng.random_bool(0.2);
    let hex32 = hex(rng, 32, upper);
    let (hex31, hex33) = (hex(rng, 31, false), hex(rng, 33, false));
    match field {
        "eventType" => pick(
            rng,
            &[
                json!("view"),
                json!("click"),
                json!("conversion"),
                json!("buy"),
                json!(1),
            ],
        ),
        "eventSubtype" => pick(
            rng,
            &[
                json!("addToCart"),
                json!("purchase"),
                json!("buy"),
                json!(true),
            ],
        ),
        "eventName" => pick(
            rng,
            &[
                json!("Product Clicked"),
                json!("x".repeat(64)),
                json!("x".repeat(65)),
                json!(""),
                json!("café"),
                json!("tab\t"),
                json!(" "),
                json!(7),
            ],
        ),
        "index" => pick(rng, &[json!("products"), json!(""), json!(3)]),
        "userToken" | "authenticatedUserToken" => pick(
            rng,
            &[
                json!("user-1"),
                json!("a".repeat(129)),
                json!("a".repeat(130)),
                json!("bad token"),
                json!("a/b+c=d_e-f"),
                json!(""),
                json!("é"),
                json!(1),
            ],
        ),
        "timestamp" => pick(
            rng,
            &[
                json!(now - 60_000),
                json!(now - 29 * DAY),
                json!(now - 31 * DAY),
                json!(now + 2 * 3_600_000),
                json!(now + 60_000),
                json!(0),
                json!(-1),
                json!("soon"),
                json!(1.5),
                json!((now - 60_000) as f64),
                json!(u64::MAX),
            ],
        ),
        "objectIDs" => {
            if rng.random_bool(0.6) {
                Value::Array((0..objects).map(|i| json!(format!("p{i}"))).collect())
            } else {
                string_list(rng, |r| pick(r, &[json!("p1"), json!(""), json!(1)]))
            }
        }
        "filters" => string_list(rng, |r| {
            if r.random_bool(0.5) {
                json!(filter(r))
            } else {
                pick(
                    r,
                    &[
                        json!("brand:Apple"),
                        json!("brand%3AApple"),
                        json!("discount:10%25"),
                    ],
                )
            }
        }),
        "queryID" => pick(
            rng,
            &[
                json!(hex32),
                json!(hex31),
                json!(hex33),
                json!("g".repeat(32)),
                json!(5),
            ],
        ),
        "positions" => {
            if rng.random_bool(0.5) {
                Value::Array((1..=objects as u64).map(|p| json!(p)).collect())
            } else {
                pick(
                    rng,
                    &[
                        json!([1]),
                        json!([1, 2]),
                        json!([0]),
                        json!([]),
                        json!([1.0]),
                        json!([4_294_967_295u64]),
                        json!([4_294_967_296u64]),
                        json!("1"),
                        json!([-1]),
                    ],
                )
            }
        }
        "objectData" => {
            let item = |r: &mut StdRng| {
                pick(
                    r,
                    &[
                        json!({}),
                        json!({"price": 1.5, "quantity": 2}),
                        json!({"price": "3", "discount": 1}),
                        json!({"price": true}),
                        json!({"quantity": 1.5}),
                        json!({"quantity": 2.0}),
                        json!({"quantity": 2_147_483_648u64}),
                        json!({"quantity": -2_147_483_648i64}),
                        json!({"queryID": "bad"}),
                        json!({"queryID": "0123456789abcdef0123456789abcdef"}),
                        json!({"discount": null}),
                        json!({"other": [1]}),
                        json!(3),
                    ],
                )
            };
            if rng.random_bool(0.6) {
                Value::Array((0..objects).map(|_| item(rng)).collect())
            } else {
                pick(
                    rng,
                    &[json!([]), json!({}), json!([{}, {}, {}]), json!("x")],
                )
            }
        }
        "value" => pick(
            rng,
            &[json!(10), json!("10.5"), json!(1.5), json!(true), json!({})],
        ),
        "currency" => pick(
            rng,
            &[
                json!("EUR"),
                json!("eur"),
                json!("EURO"),
                json!(""),
                json!(1),
            ],
        ),
        _ => pick(rng, &[json!("anything"), json!([1, 2]), json!({"a": 1})]),
    }
}

/// An event: a coherent one of a random kind, then up to three fields set
/// to random values or removed.
fn event(rng: &mut StdRng, now: i64) -> Value {
    let objects = rng.random_range(1..4);
    let kind = pick(rng, &["view", "click", "conversion"]);
    let mut e = Map::new();
    e.insert("eventType".into(), json!(kind));
    e.insert("eventName".into(), json!("Product Clicked"));
    e.insert("index".into(), json!("products"));
    e.insert(
        "userToken".into(),
        json!(format!("u{}", rng.random_range(0..50))),
    );
    if rng.random_bool(0.5) {
        e.insert(
            "timestamp".into(),
            json!(now - rng.random_range(1_000..20 * DAY)),
        );
    }
    let on_objects = rng.random_bool(0.6);
    if on_objects {
        let ids: Vec<String> = (0..objects).map(|i| format!("p{i}")).collect();
        e.insert("objectIDs".into(), json!(ids));
    } else {
        e.insert("filters".into(), json!(["brand%3AApple", "discount:10%25"]));
    }
    if on_objects && kind == "click" && rng.random_bool(0.5) {
        e.insert("queryID".into(), json!(hex(rng, 32, false)));
        e.insert("positions".into(), json!((1..=objects).collect::<Vec<_>>()));
    }
    if kind == "conversion" && rng.random_bool(0.6) {
        e.insert(
            "eventSubtype".into(),
            json!(pick(rng, &["addToCart", "purchase"])),
        );
        if on_objects {
            let data: Vec<Value> = (0..objects)
                .map(|_| json!({"price": 2.5, "quantity": 1}))
                .collect();
            e.insert("objectData".into(), json!(data));
        }
        e.insert("value".into(), json!(9.5));
        e.insert("currency".into(), json!("USD"));
    }
    if rng.random_bool(0.2) {
        e.insert("authenticatedUserToken".into(), json!("auth-1"));
    }
    const FIELDS: [&str; 16] = [
        "eventType",
        "eventSubtype",
        "eventName",
        "index",
        "userToken",
        "authenticatedUserToken",
        "timestamp",
        "objectIDs",
        "filters",
        "queryID",
        "positions",
        "objectData",
        "value",
        "currency",
        "unknownField",
        "objectIDsWithInferredQueryID",
    ];
    for _ in 0..pick(rng, &[0, 0, 1, 1, 1, 2, 3]) {
        let field = pick(rng, &FIELDS);
        if rng.random_ratio(1, 5) {
            e.remove(field);
        } else {
            e.insert(field.into(), value_for(rng, field, now, objects));
        }
    }
    Value::Object(e)
}

/// A `POST /1/events` body: mostly 1 to 3 events, sometimes a malformed
/// batch.
fn events_body(rng: &mut StdRng, now: i64) -> Value {
    match rng.random_range(0..40) {
        0 => json!({"events": []}),
        1 => json!({"events": event(rng, now)}),
        2 => json!([event(rng, now)]),
        3 => json!({"other": 1}),
        4 => json!({"events": (0..1001).map(|_| json!({"eventType": "view", "eventName": "x",
            "index": "i", "userToken": "u", "filters": ["a:b"]})).collect::<Vec<_>>()}),
        _ => {
            let n = rng.random_range(1..4);
            let events: Vec<Value> = (0..n).map(|_| event(rng, now)).collect();
            json!({ "events": events, "extra": rng.random_bool(0.1) })
        }
    }
}

/// A catalog object: mostly valid, sometimes without an id or with a
/// `_geoloc` out of range or of the wrong shape.
fn object(rng: &mut StdRng) -> Value {
    let mut o = Map::new();
    let id = pick(
        rng,
        &[
            json!("p1"),
            json!("p2"),
            json!("p1"),
            json!(""),
            json!(1),
            Value::Null,
        ],
    );
    if !rng.random_ratio(1, 15) {
        o.insert("objectID".into(), id);
    }
    o.insert(
        "brand".into(),
        pick(
            rng,
            &[json!("Apple"), json!(["a", "b"]), json!(3), json!({"x": 1})],
        ),
    );
    if rng.random_bool(0.4) {
        let geo = pick(
            rng,
            &[
                json!({"lat": 45.5, "lng": -122.6}),
                json!({"lat": -90, "lng": 180}),
                json!({"lat": 91, "lng": 0}),
                json!({"lat": 0, "lng": -180.0001}),
                json!({"lat": "45", "lng": 0}),
                json!({"lat": 45}),
                json!("x"),
                Value::Null,
                json!({"lat": 1, "lng": 2, "alt": 3}),
            ],
        );
        o.insert("_geoloc".into(), geo);
    }
    Value::Object(o)
}

fn objects_body(rng: &mut StdRng) -> Value {
    match rng.random_range(0..30) {
        0 => json!({"objects": object(rng)}),
        1 => json!({}),
        2 => {
            json!({"objects": (0..1001).map(|i| json!({"objectID": format!("b{i}")})).collect::<Vec<_>>()})
        }
        3 => json!({"objects": [1]}),
        _ => {
            let n = rng.random_range(0..4);
            json!({ "objects": (0..n).map(|_| object(rng)).collect::<Vec<_>>() })
        }
    }
}

/// The document's uniqueness rule (`x-affinity-uniqueBy`) on the
/// strategy's two lists.
fn strategy_extensions_allow(doc: &Value, body: &Value) -> bool {
    let props = &doc["components"]["schemas"]["Strategy"]["properties"];
    ["eventsScoring", "facetsScoring"].iter().all(|list| {
        let keys: Vec<&str> = props[list]["x-affinity-uniqueBy"]
            .as_array()
            .expect("x-affinity-uniqueBy")
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        let Some(items) = body[list].as_array() else {
            return true;
        };
        let mut seen = std::collections::HashSet::new();
        items
            .iter()
            .all(|item| seen.insert(keys.iter().map(|k| item[k].to_string()).collect::<Vec<_>>()))
    })
}

/// A score, valid or not: bounds, integral and other floats, wrong types.
fn score(rng: &mut StdRng) -> Value {
    pick(
        rng,
        &[
            json!(0),
            json!(100),
            json!(37),
            json!(2.0),
            json!(101),
            json!(-1),
            json!(2.5),
            json!("2"),
            Value::Null,
        ],
    )
}

fn strategy_body(rng: &mut StdRng) -> Value {
    let names = [
        json!("click"),
        json!("buy"),
        json!(""),
        json!("e".repeat(64)),
        json!("e".repeat(65)),
        json!("é".repeat(64)),
        json!(7),
    ];
    let events: Vec<Value> = (0..rng.random_range(0..4))
        .map(|_| {
            let mut e = Map::new();
            for (key, value) in [
                ("eventName", pick(rng, &names)),
                (
                    "eventType",
                    pick(rng, &[json!("click"), json!("conversion"), json!("search")]),
                ),
                ("score", score(rng)),
            ] {
                if !rng.random_ratio(1, 20) {
                    e.insert(key.into(), value);
                }
            }
            Value::Object(e)
        })
        .collect();
    let facets: Vec<Value> = (0..rng.random_range(0..4))
        .map(|_| {
            let mut f = Map::new();
            let name = pick(rng, &[json!("brand"), json!("color"), json!(""), json!(1)]);
            if !rng.random_ratio(1, 20) {
                f.insert("facetName".into(), name);
            }
            if !rng.random_ratio(1, 20) {
                f.insert("score".into(), score(rng));
            }
            Value::Object(f)
        })
        .collect();
    let mut body = Map::new();
    for (key, value) in [
        ("eventsScoring", json!(events)),
        ("facetsScoring", json!(facets)),
        ("personalizationImpact", score(rng)),
    ] {
        if !rng.random_ratio(1, 25) {
            body.insert(key.into(), value);
        }
    }
    if rng.random_ratio(1, 25) {
        body.insert("extra".into(), json!(1));
    }
    Value::Object(body)
}

/// A hit as a search engine returns it: mostly valid, sometimes without
/// an id or not an object.
fn hit(rng: &mut StdRng) -> Value {
    if rng.random_ratio(1, 25) {
        return pick(rng, &[json!("p1"), json!(7), Value::Null]);
    }
    let mut h = Map::new();
    let id = pick(
        rng,
        &[
            json!("p1"),
            json!("p2"),
            json!("zz"),
            json!(""),
            json!(1),
            Value::Null,
        ],
    );
    if !rng.random_ratio(1, 20) {
        h.insert("objectID".into(), id);
    }
    if rng.random_bool(0.7) {
        h.insert(
            "brand".into(),
            pick(
                rng,
                &[
                    json!("Apple"),
                    json!(["Apple", "Sony"]),
                    json!(3),
                    json!({"x": 1}),
                ],
            ),
        );
    }
    if rng.random_bool(0.2) {
        h.insert(
            "_rankingInfo".into(),
            pick(rng, &[json!({"nbTypos": 0}), json!(1)]),
        );
    }
    Value::Object(h)
}

/// A re-ranking body: its three fields valid or not, sometimes missing,
/// sometimes a field too many.
fn rerank_body(rng: &mut StdRng) -> Value {
    let mut b = Map::new();
    if !rng.random_ratio(1, 15) {
        let user = pick(
            rng,
            &[
                json!("u1"),
                json!("u2"),
                json!("a b"),
                json!(""),
                json!(5),
                Value::Null,
            ],
        );
        b.insert("userToken".into(), user);
    }
    if !rng.random_ratio(1, 15) {
        let hits = match rng.random_range(0..30) {
            0 => json!((0..1001)
                .map(|i| json!({"objectID": format!("h{i}")}))
                .collect::<Vec<_>>()),
            1 => hit(rng),
            _ => {
                let n = rng.random_range(0..5);
                json!((0..n).map(|_| hit(rng)).collect::<Vec<_>>())
            }
        };
        b.insert("hits".into(), hits);
    }
    if rng.random_bool(0.4) {
        let impact = pick(
            rng,
            &[
                json!(0),
                json!(60),
                json!(100),
                json!(50.0),
                json!(101),
                json!(-1),
                json!(2.5),
                json!("50"),
                Value::Null,
            ],
        );
        b.insert("personalizationImpact".into(), impact);
    }
    if rng.random_ratio(1, 15) {
        b.insert("query".into(), json!("phone"));
    }
    Value::Object(b)
}

#[tokio::test(flavor = "multi_thread")]
async fn random_bodies_are_accepted_exactly_when_the_document_allows_them() {
    let server = Server::embedded().await;
    let (_, doc) = parts(
        server
            .bare(Method::GET, "/openapi.json")
            .send()
            .await
            .unwrap(),
    )
    .await;
    let batch = compile(&doc, "/components/schemas/EventsBatch");
    let objects = compile(&doc, "/components/schemas/ObjectsBatch");
    let strategy = compile(&doc, "/components/schemas/Strategy");
    let rerank = compile(&doc, "/components/schemas/RerankRequest");
    let reranked = compile(&doc, "/components/schemas/RerankedHits");
    // Re-ranking needs a strategy (and its hits a catalog to fall back on).
    assert_eq!(parts(server.set_strategy().await).await.0, 200);
    let seed: u64 = std::env::var("AFFINITY_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    let cases: usize = std::env::var("AFFINITY_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    eprintln!("AFFINITY_FUZZ_SEED={seed} AFFINITY_FUZZ_CASES={cases}");
    let mut rng = StdRng::seed_from_u64(seed);
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut allowed, mut forbidden) = (0, 0);
    for case in 0..cases {
        if Instant::now() > deadline {
            break;
        }
        let now = server.engine.now_millis();
        let (path, body, allows) = if case % 8 == 5 {
            let body = strategy_body(&mut rng);
            let allows = strategy.is_valid(&body) && strategy_extensions_allow(&doc, &body);
            ("/1/strategies/personalization", body, allows)
        } else if case % 4 == 3 {
            let body = objects_body(&mut rng);
            let allows = objects.is_valid(&body);
            ("/1/indexes/products/objects", body, allows)
        } else if case % 4 == 2 {
            let body = rerank_body(&mut rng);
            let allows = rerank.is_valid(&body);
            ("/1/indexes/products/rerank", body, allows)
        } else {
            let body = events_body(&mut rng, now);
            let allows = batch.is_valid(&body)
                && body["events"]
                    .as_array()
                    .is_some_and(|list| list.iter().all(|e| extensions_allow(&doc, e, now)));
            ("/1/events", body, allows)
        };
        let r = server.admin(Method::POST, path).body(body.to_string());
        let (status, answer) = parts(r.send().await.unwrap()).await;
        let agrees = if allows {
            status == 200
        } else {
            status == 400 || status == 422
        };
        assert!(
            agrees,
            "case {case} (AFFINITY_FUZZ_SEED={seed}): the document {} it, the server answered \
             {status} {answer}\nPOST {path} {body}",
            if allows { "allows" } else { "forbids" }
        );
        if allows && path.ends_with("/rerank") {
            assert!(
                reranked.is_valid(&answer),
                "case {case} (AFFINITY_FUZZ_SEED={seed}): the answer breaks RerankedHits: {answer}"
            );
        }
        if allows {
            allowed += 1;
        } else {
            forbidden += 1;
        }
    }
    eprintln!("{allowed} bodies allowed and accepted, {forbidden} forbidden and rejected");
    // Both sides of the rules came up often enough to mean something.
    assert!(
        allowed >= 100 && forbidden >= 100,
        "{allowed} / {forbidden}"
    );
    server.stop().await;
}
