//! Regional trends equal a brute-force computation over the ingested events,
//! on the in-memory store, the embedded store and the Bigtable emulator.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use affinity_engine::catalog::CatalogObject;
use affinity_engine::trends::{Area, Trends, TrendsQuery, ValueScore};
use affinity_engine::{AppConfig, Engine, Event, Limits, Strategy};
use affinity_model::Store;
use affinity_rowkey::composite::EventKey;
use affinity_rowkey::plan::BBox;
use common::{real_now, FakeClock, DAY};
use serde_json::{json, Value};

const APP: &str = "shop";

/// splitmix64: a small deterministic generator, so every run sees the same
/// cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn strategy() -> Strategy {
    Strategy::from_json(&json!({
        "eventsScoring":[{"eventName":"click","eventType":"click","score":10},
                         {"eventName":"view","eventType":"view","score":1},
                         {"eventName":"buy","eventType":"conversion","score":50}],
        "facetsScoring":[{"facetName":"brand","score":100},{"facetName":"color","score":7}],
        "personalizationImpact":60}))
    .expect("valid strategy")
}

/// Objects around Portland and around the antimeridian near Fiji; some
/// without `_geoloc`.
fn objects(rng: &mut Rng) -> Vec<CatalogObject> {
    (0..60)
        .map(|i| {
            let mut v = json!({"objectID": format!("o{i}"),
                "brand": format!("B{}", rng.below(6)),
                "color": [format!("C{}", rng.below(4)), format!("C{}", rng.below(4))],
                "size": format!("S{}", rng.below(3))});
            match i % 6 {
                5 => {}
                4 => {
                    let lng = rng.range(178.0, 182.0);
                    let lng = if lng > 180.0 { lng - 360.0 } else { lng };
                    v["_geoloc"] = json!({"lat": rng.range(-19.0, -16.0), "lng": lng});
                }
                _ => {
                    v["_geoloc"] =
                        json!({"lat": rng.range(45.3, 45.7), "lng": rng.range(-122.9, -122.4)})
                }
            }
            CatalogObject::from_json(&v).expect("valid object")
        })
        .collect()
}

fn events(rng: &mut Rng, now: i64, n: usize) -> Vec<Event> {
    let limits = Limits {
        now_millis: now,
        max_age_millis: 90 * DAY,
        max_skew_millis: 3_600_000,
    };
    (0..n)
        .map(|_| {
            let (ty, name) = match rng.below(5) {
                0 => ("click", "click"),
                1 => ("view", "view"),
                2 => ("conversion", "buy"),
                3 => ("click", "unscored"),
                _ => ("view", "click"),
            };
            let mut v = json!({"eventType": ty, "eventName": name, "index": "products",
                "userToken": format!("u{}", rng.below(8)),
                "timestamp": now - rng.below(20 * DAY as u64) as i64});
            if rng.below(8) == 0 {
                v["filters"] = json!(["brand:B1"]);
            } else {
                // Unknown ids (o60+) and repeats included.
                let ids: Vec<String> = (0..1 + rng.below(4))
                    .map(|_| format!("o{}", rng.below(64)))
                    .collect();
                v["objectIDs"] = json!(ids);
            }
            Event::from_json(&v, &limits).expect("valid event")
        })
        .collect()
}

fn contains(area: &Area, lat: f64, lng: f64) -> bool {
    match *area {
        Area::BBox(b) if b.min_lng > b.max_lng => {
            (lng >= b.min_lng || lng <= b.max_lng) && b.min_lat <= lat && lat <= b.max_lat
        }
        Area::BBox(b) => {
            b.min_lng <= lng && lng <= b.max_lng && b.min_lat <= lat && lat <= b.max_lat
        }
        Area::Circle {
            lat: clat,
            lng: clng,
            radius_meters,
        } => {
            let (p1, p2) = (clat.to_radians(), lat.to_radians());
            let h = ((p2 - p1) / 2.0).sin().powi(2)
                + p1.cos() * p2.cos() * ((lng - clng).to_radians() / 2.0).sin().powi(2);
            2.0 * 6_371_008.8 * h.sqrt().min(1.0).asin() <= radius_meters
        }
    }
}

/// The definition, applied to the events themselves.
fn brute_force(
    events: &[Event],
    catalog: &HashMap<String, CatalogObject>,
    query: &TrendsQuery,
    now: i64,
    retention: i64,
) -> (BTreeMap<String, Vec<ValueScore>>, u64, u64) {
    let strategy = strategy();
    let to = query.to_millis.unwrap_or(now);
    let from = query
        .from_millis
        .unwrap_or(to - 7 * DAY)
        .max(now - retention);
    let facets: Vec<String> = query
        .facets
        .clone()
        .unwrap_or_else(|| strategy.facets.keys().cloned().collect());
    let mut scores: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut counted = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut matched = 0;
    for e in events {
        let key = EventKey::for_event(APP, e.identity(), e.timestamp_millis, &e.content())
            .and_then(|k| k.encode())
            .expect("key");
        if !seen.insert(key.clone()) || e.timestamp_millis < from || e.timestamp_millis >= to {
            continue;
        }
        let weight = strategy.event_score(e.event_type, &e.event_name);
        for id in &e.object_ids {
            let Some(o) = catalog.get(id) else { continue };
            let Some((lat, lng)) = o.geoloc else { continue };
            if !contains(&query.area, lat, lng) {
                continue;
            }
            matched += 1;
            let Some(w) = weight else { continue };
            counted.insert(key.clone());
            for (f, v) in &o.facets {
                if facets.contains(f) {
                    *scores
                        .entry(f.clone())
                        .or_default()
                        .entry(v.clone())
                        .or_default() += u64::from(w);
                }
            }
        }
    }
    let limit = query.limit.unwrap_or(10);
    let out = facets
        .iter()
        .map(|f| {
            let mut list: Vec<ValueScore> = scores
                .remove(f)
                .unwrap_or_default()
                .into_iter()
                .map(|(value, score)| ValueScore { value, score })
                .collect();
            list.sort_by(|a, b| b.score.cmp(&a.score).then_with(|| a.value.cmp(&b.value)));
            list.truncate(limit);
            (f.clone(), list)
        })
        .collect();
    (out, counted.len() as u64, matched)
}

fn queries(rng: &mut Rng, now: i64) -> Vec<TrendsQuery> {
    let mut out = vec![
        TrendsQuery::new(Area::circle(45.5, -122.65, 15_000.0).unwrap()),
        TrendsQuery::new(Area::BBox(BBox::new(179.0, -19.0, -179.5, -16.0).unwrap())),
        TrendsQuery::new(Area::BBox(BBox::new(-180.0, -90.0, 180.0, 90.0).unwrap())),
        // Many days: more ranges than one read request carries.
        TrendsQuery {
            from_millis: Some(now - 85 * DAY),
            to_millis: Some(now + DAY),
            ..TrendsQuery::new(Area::circle(45.5, -122.65, 25_000.0).unwrap())
        },
    ];
    for i in 0..25 {
        let area = if i % 2 == 0 {
            Area::circle(
                rng.range(45.3, 45.7),
                rng.range(-122.9, -122.4),
                rng.range(500.0, 30_000.0),
            )
            .unwrap()
        } else {
            let (lat, lng) = (rng.range(45.2, 45.6), rng.range(-123.0, -122.5));
            let bbox = BBox::new(
                lng,
                lat,
                lng + rng.range(0.01, 0.5),
                lat + rng.range(0.01, 0.3),
            );
            Area::BBox(bbox.unwrap())
        };
        let mut q = TrendsQuery::new(area);
        if i % 3 != 0 {
            let from = now - rng.below(25 * DAY as u64) as i64;
            q.from_millis = Some(from);
            q.to_millis = Some(from + 1 + rng.below(10 * DAY as u64) as i64);
        }
        if i % 4 == 1 {
            q.facets = Some(vec!["size".into(), "brand".into(), "nope".into()]);
        }
        if i % 5 == 2 {
            q.limit = Some(1 + rng.below(3) as usize);
        }
        out.push(q);
    }
    out
}

fn setup(store: Arc<dyn Store>, clock: &FakeClock, seed: u64) -> (Engine, Vec<Event>, Rng) {
    let mut rng = Rng(seed);
    let engine = Engine::with_clock(store, clock.engine_clock()).unwrap();
    engine.set_strategy(APP, &strategy()).unwrap();
    let objects = objects(&mut rng);
    engine.put_objects(APP, "products", &objects).unwrap();
    let events = events(&mut rng, clock.now(), 400);
    for batch in events.chunks(50) {
        engine.ingest(APP, batch).unwrap();
    }
    // A retried batch rewrites the same rows.
    engine.ingest(APP, &events[..50]).unwrap();
    (engine, events, rng)
}

fn catalog_map(engine: &Engine) -> HashMap<String, CatalogObject> {
    let catalog = engine.catalog(APP, "products").unwrap();
    (0..64)
        .filter_map(|i| catalog.get(&format!("o{i}")).cloned())
        .map(|o| (o.object_id.clone(), o))
        .collect()
}

fn check_exact(store: Arc<dyn Store>, clock: &FakeClock, seed: u64) {
    let (engine, events, mut rng) = setup(store, clock, seed);
    let catalog = catalog_map(&engine);
    let retention = AppConfig::default().retention_millis();
    let mut counted_any = false;
    let mut most_ranges = 0;
    for q in queries(&mut rng, clock.now()) {
        let got: Trends = engine.trends(APP, &q).unwrap();
        let (facets, counted, matched) = brute_force(&events, &catalog, &q, clock.now(), retention);
        assert_eq!(got.facets, facets, "query {q:?}");
        assert_eq!(got.events_counted, counted, "query {q:?}");
        assert_eq!(got.rows_matched, matched, "query {q:?}");
        assert!(got.rows_scanned >= matched);
        counted_any |= counted > 0;
        most_ranges = most_ranges.max(got.ranges);
    }
    assert!(most_ranges > 1024, "{most_ranges} ranges at most");
    assert!(counted_any, "the cases must count something");
}

#[test]
fn memory_store_trends_equal_brute_force() {
    for seed in 1..=3 {
        let clock = FakeClock::new(1_700_000_000_000);
        check_exact(clock.memory_store(), &clock, seed);
    }
}

#[test]
fn embedded_store_trends_equal_brute_force() {
    // The embedded store collects garbage on the real clock.
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(affinity_embedded::EmbeddedStore::open(dir.path()).unwrap());
    check_exact(store, &FakeClock::new(real_now()), 7);
}

#[ignore = "needs the Cloud Bigtable emulator (scripts/test runs it)"]
#[test]
fn emulator_trends_equal_brute_force() {
    let store = affinity_bigtable::emulator::test_store();
    check_exact(store, &FakeClock::new(real_now()), 11);
}

#[test]
fn a_small_area_reads_a_fraction_of_the_rows() {
    let clock = FakeClock::new(1_700_000_000_000);
    let (engine, _, _) = setup(clock.memory_store(), &clock, 5);
    let everything = TrendsQuery {
        from_millis: Some(clock.now() - 30 * DAY),
        to_millis: Some(clock.now() + DAY),
        ..TrendsQuery::new(Area::BBox(BBox::new(-180.0, -90.0, 180.0, 90.0).unwrap()))
    };
    let all = engine.trends(APP, &everything).unwrap().rows_scanned;
    let small = TrendsQuery {
        area: Area::circle(45.5, -122.65, 2_000.0).unwrap(),
        ..everything
    };
    let few = engine.trends(APP, &small).unwrap();
    assert!(all > 0);
    assert!(few.rows_scanned * 4 < all, "{} of {all}", few.rows_scanned);
}

#[test]
fn expired_events_never_count() {
    let clock = FakeClock::new(1_700_000_000_000);
    let (engine, events, _) = setup(clock.memory_store(), &clock, 9);
    let q = TrendsQuery {
        from_millis: Some(clock.now() - 30 * DAY),
        to_millis: Some(clock.now() + DAY),
        ..TrendsQuery::new(Area::BBox(BBox::new(-180.0, -90.0, 180.0, 90.0).unwrap()))
    };
    let before = engine.trends(APP, &q).unwrap();
    assert!(before.events_counted > 0);
    // 80 days later, events older than 10 days before the first `now`
    // are past the 90-day retention.
    clock.set(clock.now() + 80 * DAY);
    let after = engine.trends(APP, &q).unwrap();
    let catalog = catalog_map(&engine);
    let (facets, counted, matched) = brute_force(&events, &catalog, &q, clock.now(), 90 * DAY);
    assert_eq!(
        (after.facets, after.events_counted, after.rows_matched),
        (facets, counted, matched)
    );
    assert!(counted < before.events_counted);
}

#[test]
fn bad_queries_name_the_parameter() {
    let clock = FakeClock::new(1_700_000_000_000);
    let engine = Engine::with_clock(clock.memory_store(), clock.engine_clock()).unwrap();
    let area = Area::circle(45.5, -122.6, 1000.0).unwrap();
    let err = |q: TrendsQuery| engine.trends(APP, &q).unwrap_err().to_string();
    assert!(err(TrendsQuery {
        limit: Some(101),
        ..TrendsQuery::new(area)
    })
    .contains("limit"));
    assert!(err(TrendsQuery {
        from_millis: Some(5),
        to_millis: Some(5),
        ..TrendsQuery::new(area)
    })
    .contains("time range"));
    assert!(err(TrendsQuery {
        facets: Some(vec![" ".into()]),
        ..TrendsQuery::new(area)
    })
    .contains("facets"));
    // No strategy: nothing counts, every asked facet is listed empty.
    let none = engine
        .trends(
            APP,
            &TrendsQuery {
                facets: Some(vec!["brand".into()]),
                ..TrendsQuery::new(area)
            },
        )
        .unwrap();
    assert_eq!(none.events_counted, 0);
    assert_eq!(none.facets.get("brand"), Some(&Vec::new()));
    let value: Value = none.to_json();
    assert_eq!(value["facets"], json!({"brand": []}));
}
