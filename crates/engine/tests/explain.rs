//! Explanations add up: random sequences of events (several kinds, days,
//! late events, logins that join anonymous tokens to an identity), clock
//! moves and maintenance; after every step, for every token and every
//! facet value it touched, the explanation's contributions sum to its raw
//! score, that raw score and the profile's maximum equal a naive
//! computation over the ingested events, its score equals both the
//! engine's profile read and the scoring reference, and at the end the
//! predicted next change happens exactly when it says, and not a
//! millisecond before.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use affinity_engine::scoring::reference::{self, ListedEvent};
use affinity_engine::scoring::{scale, Profile};
use affinity_engine::{AppConfig, Engine, Explanation, MaintainOptions, Progress, Schema};
use common::identity::*;
use common::*;
use proptest::prelude::*;

const APP: &str = "explain";
const RETENTION_DAYS: u32 = 3;

#[derive(Debug, Clone)]
enum Op {
    Ingest(Vec<GenEvent>),
    Advance(u32),
    Maintain,
}

fn op() -> impl Strategy<Value = Op> {
    let event = (
        any::<u8>(),
        0u8..4,
        prop_oneof![3 => Just(None), 1 => (0u8..2).prop_map(Some)],
        // Up to the whole window back: late events of every day.
        0u32..(24 * (RETENTION_DAYS + 1)),
        proptest::collection::vec(any::<u8>(), 1..4),
    );
    prop_oneof![
        4 => proptest::collection::vec(event, 1..8).prop_map(Op::Ingest),
        2 => prop_oneof![1u32..12, 12u32..40].prop_map(Op::Advance),
        1 => Just(Op::Maintain),
    ]
}

/// What only these tests ask of the reference.
impl Reference {
    /// The identity's distinct events within the window, listed under `token`.
    fn listed(&self, token: &str, now: i64) -> Vec<ListedEvent> {
        let start = window_start(now, RETENTION_DAYS);
        let members = self.members(token, start);
        let mut seen = BTreeSet::new();
        listed(APP, &self.events)
            .into_iter()
            .filter(|e| members.contains(&e.user) && e.event.timestamp_millis >= start)
            .filter(|e| seen.insert(e.id.clone()))
            .map(|e| ListedEvent {
                user: token.to_string(),
                ..e
            })
            .collect()
    }

    /// `raw` of every scored facet value of `token`'s identity.
    fn raw(&self, token: &str, now: i64) -> BTreeMap<(String, String), i64> {
        let weights = strategy().weights();
        let mut out = BTreeMap::new();
        for e in self.listed(token, now) {
            let Some(es) = weights.event(e.event.event_type, &e.event.event_name) else {
                continue;
            };
            for (f, v, n) in e.event.counts.iter() {
                if let Some(fs) = weights.facet(f) {
                    *out.entry((f.to_string(), v.to_string())).or_default() +=
                        i64::from(es) * i64::from(fs) * i64::from(n);
                }
            }
        }
        out
    }

    fn profile(&self, token: &str, now: i64) -> Option<Profile> {
        let retention = i64::from(RETENTION_DAYS) * DAY;
        reference::profiles(&self.listed(token, now), &strategy(), now, retention).remove(token)
    }
}

/// Every check of one explanation against the reference and the engine.
fn check(
    engine: &Engine,
    reference: &Reference,
    token: &str,
    facet: &str,
    value: &str,
    now: i64,
) -> Result<Option<Explanation>, TestCaseError> {
    let got = engine.explain(APP, token, facet, value).unwrap();
    let profile = engine.profile(APP, token).unwrap();
    prop_assert_eq!(&profile, &reference.profile(token, now));
    let Some(x) = got else {
        prop_assert!(profile.is_none(), "no explanation of {token}, a profile");
        return Ok(None);
    };
    prop_assert!(profile.is_some(), "an explanation of {token}, no profile");
    let sum: i64 = x.contributions.iter().map(|c| c.contribution).sum();
    prop_assert_eq!(sum, x.raw);
    for c in &x.contributions {
        prop_assert_eq!(
            c.contribution,
            i64::from(c.event_score) * i64::from(c.facet_score) * c.count
        );
        prop_assert!(
            c.day * DAY >= window_start(now, RETENTION_DAYS),
            "{c:?} before the window"
        );
        prop_assert_eq!(
            c.leaves_at_millis,
            (c.day + i64::from(RETENTION_DAYS)) * DAY
        );
    }
    let raw = reference.raw(token, now);
    let want = raw
        .get(&(facet.to_string(), value.to_string()))
        .copied()
        .unwrap_or(0);
    prop_assert_eq!(x.raw, want, "raw of {}:{} for {}", facet, value, token);
    let max = raw.values().copied().filter(|r| *r > 0).max();
    prop_assert_eq!(x.max.as_ref().map(|m| m.raw), max);
    if let Some(m) = &x.max {
        prop_assert_eq!(raw[&(m.facet.clone(), m.value.clone())], m.raw);
    }
    let score = profile
        .as_ref()
        .and_then(|p| p.scores.get(facet))
        .and_then(|vs| vs.get(value))
        .copied();
    prop_assert_eq!(x.score, score, "score of {}:{} for {}", facet, value, token);
    if let (Some(s), Some(m)) = (x.score, &x.max) {
        prop_assert_eq!(s, scale(x.raw, m.raw));
    }
    Ok(Some(x))
}

fn run(clock: FakeClock, ops: &[Op]) -> Result<(), TestCaseError> {
    let engine = Engine::with_clock(clock.memory_store(), clock.engine_clock()).unwrap();
    let config = AppConfig {
        schema: Schema::Narrow,
        retention_days: RETENTION_DAYS,
    };
    engine.configure_app(APP, config).unwrap();
    engine.set_strategy(APP, &strategy()).unwrap();
    let mut reference = Reference::default();
    let tokens = tokens();
    let mut last: Option<(String, Explanation)> = None;
    for op in ops {
        let now = clock.now();
        match op {
            Op::Ingest(list) => {
                if !reference.ingest(&engine, APP, list, now, RETENTION_DAYS) {
                    continue;
                }
            }
            Op::Advance(hours) => clock.set(now + i64::from(*hours) * 3_600_000),
            Op::Maintain => {
                engine
                    .maintain(APP, MaintainOptions::default(), &Progress::default())
                    .unwrap();
            }
        }
        let now = clock.now();
        // Every value any event names, and one no event names.
        let mut values: BTreeSet<(String, String)> = listed(APP, &reference.events)
            .iter()
            .flat_map(|e| {
                e.event
                    .counts
                    .iter()
                    .map(|(f, v, _)| (f.to_string(), v.to_string()))
                    .collect::<Vec<_>>()
            })
            .filter(|(f, _)| f == "brand" || f == "color")
            .collect();
        values.insert(("brand".into(), "Never".into()));
        for token in &tokens {
            for (f, v) in &values {
                if let Some(x) = check(&engine, &reference, token, f, v, now)? {
                    if x.next_change.is_some() {
                        last = Some((token.clone(), x));
                    }
                }
            }
        }
    }
    // The last prediction, checked by moving the clock: the score holds
    // until the instant given, and is the one predicted from then on.
    if let Some((token, x)) = last {
        let next = x.next_change.clone().expect("kept only with a change");
        let score_at = |engine: &Engine| {
            engine.profile(APP, &token).unwrap().and_then(|p| {
                p.scores
                    .get(&x.facet)
                    .and_then(|vs| vs.get(&x.value).copied())
            })
        };
        let now = clock.now();
        // Only a prediction that still holds at this instant is checked.
        let fresh = engine.explain(APP, &token, &x.facet, &x.value).unwrap();
        if fresh.as_ref() == Some(&x) {
            prop_assert!(next.at_millis > now);
            clock.set(next.at_millis - 1);
            prop_assert_eq!(score_at(&engine), x.score);
            clock.set(next.at_millis);
            prop_assert_eq!(score_at(&engine), next.score, "at {:?}", next);
            check(
                &engine,
                &reference,
                &token,
                &x.facet,
                &x.value,
                next.at_millis,
            )?;
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn explanations_add_up_to_the_profile_and_the_reference(
        ops in proptest::collection::vec(op(), 1..16),
        hour in 0i64..24,
    ) {
        let start = 1_700_000_000_000 - 1_700_000_000_000 % DAY + hour * 3_600_000;
        run(FakeClock::new(start), &ops)?;
    }
}

/// A worked example, every number by hand: retention 3 days, brand
/// weighs 100, clicks 10, views 1, "buy, now" conversions 50.
#[test]
fn worked_example() {
    let day0 = 1_700_000_000_000 - 1_700_000_000_000 % DAY;
    let clock = FakeClock::new(day0 + 2 * DAY + 12 * 3_600_000);
    let engine = Engine::with_clock(clock.memory_store(), clock.engine_clock()).unwrap();
    let config = AppConfig {
        schema: Schema::Narrow,
        retention_days: RETENTION_DAYS,
    };
    engine.configure_app(APP, config).unwrap();
    engine.set_strategy(APP, &strategy()).unwrap();
    let now = clock.now();
    let ev = |ty: &str, name: &str, day: i64, filters: &[&str]| {
        serde_json::json!({"eventType": ty, "eventName": name, "index": "products",
            "userToken": "alice", "timestamp": day0 + day * DAY + 1000, "filters": filters})
    };
    let events = parse_all(
        &[
            // Day 0: two clicks on Apple (one late: ingested on day 2).
            ev("click", "click", 0, &["brand:Apple"]),
            ev("click", "click", 0, &["brand:Apple", "color:Black"]),
            // Day 1: a view of Apple, a purchase of Samsung.
            ev("view", "view", 1, &["brand:Apple"]),
            ev("conversion", "buy, now", 1, &["brand:Samsung"]),
            // Day 2: a click the strategy does not score.
            ev("click", "other", 2, &["brand:Apple"]),
        ],
        now,
    );
    engine.ingest(APP, &events).unwrap();
    let x = engine
        .explain(APP, "alice", "brand", "Apple")
        .unwrap()
        .unwrap();
    let rows: Vec<(i64, &str, u32, i64, i64)> = x
        .contributions
        .iter()
        .map(|c| {
            (
                c.day - day0 / DAY,
                c.event_name.as_str(),
                c.events,
                c.count,
                c.contribution,
            )
        })
        .collect();
    assert_eq!(rows, [(0, "click", 2, 2, 2000), (1, "view", 1, 1, 100)]);
    assert_eq!(x.not_scored.len(), 1);
    assert_eq!(
        (x.not_scored[0].event_name.as_str(), x.not_scored[0].count),
        ("other", 1)
    );
    // raw 2100 of a maximum 5000 (Samsung): round(20 * 0.42) = 8.
    assert_eq!(x.raw, 2100);
    let max = x.max.as_ref().unwrap();
    assert_eq!(
        (max.raw, max.facet.as_str(), max.value.as_str()),
        (5000, "brand", "Samsung")
    );
    assert_eq!(
        (x.rank, x.facet_values, x.kept, x.score),
        (Some(2), 2, true, Some(8))
    );
    assert_eq!(
        engine.profile(APP, "alice").unwrap().unwrap().scores["brand"]["Apple"],
        8
    );
    // Day 0 leaves at the start of day 3: raw 100 of 5000 -> max(1, 0.4) = 1.
    let next = x.next_change.unwrap();
    assert_eq!(next.at_millis, day0 + 3 * DAY);
    assert_eq!((next.raw, next.max_raw, next.score), (100, 5000, Some(1)));
    // A facet the strategy does not score is an error naming it.
    let err = engine.explain(APP, "alice", "size", "M").unwrap_err();
    assert!(err.to_string().contains("facet"), "{err}");
    // A user without a profile has no explanation.
    assert_eq!(engine.explain(APP, "bob", "brand", "Apple").unwrap(), None);
}
