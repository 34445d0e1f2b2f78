//! The naive reference: profiles straight from a list of events, for tests.

use std::collections::{BTreeMap, BTreeSet};

use super::accumulator::Accumulator;
use super::{Profile, ScoredEvent};
use crate::strategy::Strategy;

/// One event of the list: its user, its identity (the row key: equal
/// for a retry) and what it scores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedEvent {
    pub user: String,
    pub id: String,
    pub event: ScoredEvent,
}

/// Every user's profile: drop duplicates by id and events of days that
/// left the window (see the module docs of [`crate::scoring`]), then score
/// each user's events one by one.
pub fn profiles(
    events: &[ListedEvent],
    strategy: &Strategy,
    now_millis: i64,
    retention_millis: i64,
) -> BTreeMap<String, Profile> {
    let weights = strategy.weights();
    let mut seen = BTreeSet::new();
    let mut by_user: BTreeMap<&str, Vec<&ScoredEvent>> = BTreeMap::new();
    let day = crate::engine::DAY_MILLIS;
    let window_start = ((now_millis - retention_millis).div_euclid(day) + 1) * day;
    for e in events {
        if e.event.timestamp_millis < window_start {
            continue;
        }
        if seen.insert((e.user.as_str(), e.id.as_str())) {
            by_user.entry(&e.user).or_default().push(&e.event);
        }
    }
    let mut out = BTreeMap::new();
    for (user, list) in by_user {
        let mut acc = Accumulator::new(&weights);
        for e in list {
            acc.add_event(e);
        }
        if let Some(p) = acc.finish(user) {
            out.insert(user.to_string(), p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventType;
    use crate::scoring::FacetCounts;
    use serde_json::json;

    fn strategy() -> Strategy {
        Strategy::from_json(
            &json!({"eventsScoring":[{"eventName":"click","eventType":"click","score":10},
            {"eventName":"buy","eventType":"conversion","score":50}],
            "facetsScoring":[{"facetName":"brand","score":100},{"facetName":"color","score":10}],
            "personalizationImpact":50}),
        )
        .unwrap()
    }

    fn ev(
        user: &str,
        id: &str,
        ty: EventType,
        name: &str,
        ts: i64,
        filters: &[(&str, &str)],
    ) -> ListedEvent {
        let pairs: Vec<(String, String)> = filters
            .iter()
            .map(|(f, v)| (f.to_string(), v.to_string()))
            .collect();
        ListedEvent {
            user: user.into(),
            id: id.into(),
            event: ScoredEvent {
                event_type: ty,
                event_name: name.into(),
                timestamp_millis: ts,
                counts: FacetCounts::from_pairs(&pairs),
            },
        }
    }

    #[test]
    fn worked_example() {
        // Ten days in, a one-day retention: the window is day 10.
        const T: i64 = 10 * crate::engine::DAY_MILLIS;
        let events = vec![
            ev(
                "u",
                "1",
                EventType::Click,
                "click",
                T + 100,
                &[("brand", "Apple"), ("color", "Black")],
            ),
            ev(
                "u",
                "2",
                EventType::Conversion,
                "buy",
                T + 200,
                &[("brand", "Samsung")],
            ),
            ev(
                "u",
                "2",
                EventType::Conversion,
                "buy",
                T + 200,
                &[("brand", "Samsung")],
            ), // retry
            ev(
                "u",
                "3",
                EventType::View,
                "view",
                T + 300,
                &[("brand", "Apple")],
            ), // not in strategy
            ev(
                "u",
                "4",
                EventType::Click,
                "click",
                T - 1,
                &[("brand", "Old")],
            ), // expired
            ev(
                "v",
                "5",
                EventType::Click,
                "click",
                T + 150,
                &[("size", "L")],
            ), // no scored facet
        ];
        let out = profiles(&events, &strategy(), T + 1000, crate::engine::DAY_MILLIS);
        assert_eq!(out.len(), 1);
        let p = &out["u"];
        // raw: Apple 10*100 = 1000, Black 10*10 = 100, Samsung 50*100 = 5000.
        assert_eq!(p.scores["brand"]["Samsung"], 20);
        assert_eq!(p.scores["brand"]["Apple"], 4);
        assert_eq!(p.scores["color"]["Black"], 1); // 0.4 -> max(1, 0)
        assert!(!p.scores["brand"].contains_key("Old"));
        assert_eq!(p.last_event_millis, T + 200);
        assert_eq!(p.to_json()["lastEventAt"], "1970-01-11T00:00:00Z");
        // Serialized directly, the same bytes as through a `Value`.
        let value = serde_json::json!({"userToken": p.user_token,
            "lastEventAt": "1970-01-11T00:00:00Z", "scores": p.scores});
        assert_eq!(
            serde_json::to_string(&p).expect("serializes"),
            value.to_string()
        );
    }

    #[test]
    fn keeps_top_100_values_per_facet() {
        let mut events = Vec::new();
        for i in 0..150 {
            let value = format!("v{i:03}");
            for k in 0..=(i / 10) {
                events.push(ev(
                    "u",
                    &format!("{i}-{k}"),
                    EventType::Click,
                    "click",
                    10,
                    &[("brand", &value)],
                ));
            }
        }
        let p = &profiles(&events, &strategy(), 100, 1000)["u"];
        assert_eq!(p.scores["brand"].len(), 100);
        assert!(p.scores["brand"].contains_key("v149"));
        assert!(!p.scores["brand"].contains_key("v000"));
        // Ties at the cut keep the smaller values: 50..=149 have the top counts.
        assert!(p.scores["brand"].contains_key("v050"));
        assert!(!p.scores["brand"].contains_key("v049"));
    }
}
