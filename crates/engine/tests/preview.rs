//! Previews and samples on the in-memory store: a candidate is scored as
//! a profile read would score it once set, and a sample is a fixed,
//! spread set of the application's users.

mod common;

use affinity_engine::{Engine, MAX_PREVIEW_USERS};
use common::*;
use serde_json::json;

const APP: &str = "preview";

/// 200 users in three groups of tokens (`A000`.., `a000`.., `x00`..),
/// one click each.
fn engine() -> (Engine, Vec<String>) {
    let clock = FakeClock::new(1_700_000_000_000);
    let engine = Engine::with_clock(clock.memory_store(), clock.engine_clock()).unwrap();
    engine.set_strategy(APP, &strategy()).unwrap();
    let mut users: Vec<String> = (0..50).map(|i| format!("A{i:03}")).collect();
    users.extend((0..100).map(|i| format!("a{i:03}")));
    users.extend((0..50).map(|i| format!("x{i:02}")));
    let values: Vec<_> = users
        .iter()
        .map(|u| {
            json!({"eventType": "click", "eventName": "click", "index": "products",
                "userToken": u, "timestamp": clock.now() - 1000, "filters": ["brand:Apple"]})
        })
        .collect();
    engine
        .ingest(APP, &parse_all(&values, clock.now()))
        .unwrap();
    (engine, users)
}

#[test]
fn samples_are_fixed_spread_and_of_the_application() {
    let (engine, users) = engine();
    for n in [1, 5, 37, MAX_PREVIEW_USERS] {
        let sample = engine.sample_users(APP, n).unwrap();
        assert_eq!(sample.len(), n);
        assert!(sample.windows(2).all(|w| w[0] < w[1]), "sorted, distinct");
        assert!(sample.iter().all(|u| users.contains(u)), "{sample:?}");
        assert_eq!(engine.sample_users(APP, n).unwrap(), sample);
    }
    // Spread over the token alphabet: a sample of 5 reaches every group,
    // not only the first five in key order.
    let five = engine.sample_users(APP, 5).unwrap();
    for group in ['A', 'a', 'x'] {
        assert!(five.iter().any(|u| u.starts_with(group)), "{five:?}");
    }
    for n in [0, MAX_PREVIEW_USERS + 1] {
        let err = engine.sample_users(APP, n).unwrap_err();
        assert!(err.to_string().contains("sample"), "{err}");
    }
}

#[test]
fn previews_score_as_reads_would_under_the_candidate() {
    let (engine, users) = engine();
    let candidate = affinity_engine::Strategy::from_json(&json!({
        "eventsScoring": [{"eventName": "click", "eventType": "click", "score": 5}],
        "facetsScoring": [{"facetName": "color", "score": 100}],
        "personalizationImpact": 0}))
    .unwrap();
    let asked = vec![users[0].clone(), "nobody".to_string()];
    let previews = engine.preview(APP, &candidate, &asked).unwrap();
    assert_eq!(previews.len(), 2);
    assert_eq!(previews[0].current, engine.profile(APP, &users[0]).unwrap());
    assert!(previews[0].current.is_some());
    // Only brand was clicked: nothing scores under a color-only candidate.
    assert_eq!(previews[0].candidate, None);
    assert_eq!(
        (previews[1].current.clone(), previews[1].candidate.clone()),
        (None, None)
    );
    let too_many: Vec<String> = users.iter().take(MAX_PREVIEW_USERS + 1).cloned().collect();
    let err = engine.preview(APP, &candidate, &too_many).unwrap_err();
    assert!(err.to_string().contains("userTokens"), "{err}");
    // Nothing was set.
    assert_eq!(engine.strategy(APP).unwrap(), Some(strategy()));
}
