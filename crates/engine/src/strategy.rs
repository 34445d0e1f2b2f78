//! The personalization strategy: event weights x facet weights.
//!
//! The JSON is Algolia's: `eventsScoring`, `facetsScoring` and
//! `personalizationImpact`, all three required and no other field. Scores
//! are integers 0..=100; an `(eventType, eventName)` or a facet appears at
//! most once.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::event::EventType;

/// A validated strategy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Strategy {
    /// `(type, name) -> score`.
    pub events: BTreeMap<(EventType, String), u32>,
    /// `facet -> score`.
    pub facets: BTreeMap<String, u32>,
    pub personalization_impact: u32,
}

/// An integer from 0 to 100; an integral float (`2.0`) counts as an
/// integer, as JSON Schema counts it.
fn integer_0_100(v: &Value) -> Option<u32> {
    let n = match v.as_u64() {
        Some(n) => n,
        None => {
            let f = v.as_f64()?;
            if f.fract() != 0.0 || !(0.0..=100.0).contains(&f) {
                return None;
            }
            f as u64
        }
    };
    (n <= 100).then_some(n as u32)
}

fn score_of(v: &Value, field: &'static str) -> Result<u32> {
    integer_0_100(v).ok_or_else(|| {
        Error::strategy(
            field,
            format!("{field} score must be an integer between 0 and 100"),
        )
    })
}

fn field<'a>(obj: &'a Map<String, Value>, key: &str, field: &'static str) -> Result<&'a Value> {
    obj.get(key)
        .ok_or_else(|| Error::strategy(field, format!("{key} is required")))
}

impl Strategy {
    /// Parse and validate the strategy JSON.
    pub fn from_json(value: &Value) -> Result<Strategy> {
        let obj = value
            .as_object()
            .ok_or_else(|| Error::strategy("strategy", "Strategy must be a JSON object"))?;
        if let Some(extra) = obj.keys().find(|k| {
            !["eventsScoring", "facetsScoring", "personalizationImpact"].contains(&k.as_str())
        }) {
            return Err(Error::strategy(
                "strategy",
                format!("Unknown field {extra}"),
            ));
        }
        let mut events = BTreeMap::new();
        let list = field(obj, "eventsScoring", "eventsScoring")?
            .as_array()
            .ok_or_else(|| Error::strategy("eventsScoring", "eventsScoring must be an array"))?;
        for item in list {
            let (Some(name), Some(ty), Some(score)) = (
                item.get("eventName").and_then(Value::as_str),
                item.get("eventType").and_then(Value::as_str),
                item.get("score"),
            ) else {
                return Err(Error::strategy(
                    "eventsScoring",
                    "eventsScoring items need eventName, eventType and score",
                ));
            };
            let ty = EventType::parse(ty).ok_or_else(|| {
                Error::strategy(
                    "eventsScoring",
                    "EventType must be one of view, click, conversion",
                )
            })?;
            if name.is_empty() || name.chars().count() > 64 {
                return Err(Error::strategy(
                    "eventsScoring",
                    "eventName must be 1 to 64 characters",
                ));
            }
            let score = score_of(score, "eventsScoring")?;
            if events.insert((ty, name.to_string()), score).is_some() {
                return Err(Error::strategy(
                    "eventsScoring",
                    format!("eventsScoring lists {} {name:?} twice", ty.as_str()),
                ));
            }
        }
        let mut facets = BTreeMap::new();
        let list = field(obj, "facetsScoring", "facetsScoring")?
            .as_array()
            .ok_or_else(|| Error::strategy("facetsScoring", "facetsScoring must be an array"))?;
        for item in list {
            let (Some(name), Some(score)) = (
                item.get("facetName").and_then(Value::as_str),
                item.get("score"),
            ) else {
                return Err(Error::strategy(
                    "facetsScoring",
                    "facetsScoring items need facetName and score",
                ));
            };
            if name.is_empty() {
                return Err(Error::strategy(
                    "facetsScoring",
                    "facetName must not be empty",
                ));
            }
            let score = score_of(score, "facetsScoring")?;
            if facets.insert(name.to_string(), score).is_some() {
                return Err(Error::strategy(
                    "facetsScoring",
                    format!("facetsScoring lists {name:?} twice"),
                ));
            }
        }
        let personalization_impact = integer_0_100(field(
            obj,
            "personalizationImpact",
            "personalizationImpact",
        )?)
        .ok_or_else(|| {
            Error::strategy(
                "personalizationImpact",
                "personalizationImpact must be an integer between 0 and 100",
            )
        })?;
        Ok(Strategy {
            events,
            facets,
            personalization_impact,
        })
    }

    /// The strategy as the API's JSON.
    pub fn to_json(&self) -> Value {
        let events: Vec<Value> = self
            .events
            .iter()
            .map(|((ty, name), score)| serde_json::json!({"eventName": name, "eventType": ty.as_str(), "score": score}))
            .collect();
        let facets: Vec<Value> = self
            .facets
            .iter()
            .map(|(name, score)| serde_json::json!({"facetName": name, "score": score}))
            .collect();
        serde_json::json!({"eventsScoring": events, "facetsScoring": facets,
            "personalizationImpact": self.personalization_impact})
    }

    /// The weight of an event, if it counts.
    pub fn event_score(&self, ty: EventType, name: &str) -> Option<u32> {
        // BTreeMap lookups need an owned key; strategies are small.
        self.events
            .iter()
            .find(|((t, n), _)| *t == ty && n == name)
            .map(|(_, s)| *s)
    }

    /// A lookup table for hot loops.
    pub fn weights(&self) -> Weights {
        let mut events: FxHashMap<EventType, FxHashMap<String, u32>> = FxHashMap::default();
        for ((t, n), s) in &self.events {
            events.entry(*t).or_default().insert(n.clone(), *s);
        }
        Weights {
            events,
            facets: self
                .facets
                .iter()
                .enumerate()
                .map(|(slot, (f, s))| (f.clone(), (slot, *s)))
                .collect(),
            facet_names: self.facets.keys().cloned().collect(),
        }
    }
}

/// Hash-map view of a strategy's weights.
#[derive(Debug, Clone, Default)]
pub struct Weights {
    /// `type -> name -> score` (looked up by `&str`, without allocating;
    /// Fx hashing: these lookups run for every count a batch reads).
    pub events: FxHashMap<EventType, FxHashMap<String, u32>>,
    /// `facet -> (slot, score)`: the slot numbers the strategy's facets
    /// in name order, so a profile being computed keeps a facet's values
    /// at its slot instead of looking the facet up by name per count.
    facets: FxHashMap<String, (usize, u32)>,
    /// The facets' names by slot.
    facet_names: Vec<String>,
}

impl Weights {
    pub fn event(&self, ty: EventType, name: &str) -> Option<u32> {
        self.events.get(&ty).and_then(|m| m.get(name)).copied()
    }

    pub fn facet(&self, facet: &str) -> Option<u32> {
        self.facets.get(facet).map(|(_, score)| *score)
    }

    /// The facet's slot and score.
    pub fn facet_slot(&self, facet: &str) -> Option<(usize, u32)> {
        self.facets.get(facet).copied()
    }

    /// The strategy's facets by slot.
    pub fn facet_names(&self) -> &[String] {
        &self.facet_names
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Value {
        json!({"eventsScoring":[{"eventName":"Product Clicked","eventType":"click","score":10},
                                 {"eventName":"Purchased","eventType":"conversion","score":50}],
               "facetsScoring":[{"facetName":"brand","score":100},{"facetName":"color","score":10}],
               "personalizationImpact":75})
    }

    #[test]
    fn parses_and_round_trips() {
        let s = Strategy::from_json(&sample()).unwrap();
        assert_eq!(s.event_score(EventType::Click, "Product Clicked"), Some(10));
        assert_eq!(s.event_score(EventType::View, "Product Clicked"), None);
        assert_eq!(s.facets["color"], 10);
        assert_eq!(Strategy::from_json(&s.to_json()).unwrap(), s);
    }

    #[test]
    fn all_three_fields_required_and_no_others() {
        for key in ["eventsScoring", "facetsScoring", "personalizationImpact"] {
            let mut v = sample();
            v.as_object_mut().unwrap().remove(key);
            let e = Strategy::from_json(&v).unwrap_err();
            assert_eq!(
                e.field(),
                Some(match key {
                    "eventsScoring" => "eventsScoring",
                    "facetsScoring" => "facetsScoring",
                    _ => "personalizationImpact",
                }),
                "{e}"
            );
        }
        let mut v = sample();
        v.as_object_mut().unwrap().insert("extra".into(), json!(1));
        assert!(Strategy::from_json(&v)
            .unwrap_err()
            .to_string()
            .contains("extra"));
        let mut v = sample();
        v["personalizationImpact"] = json!(101);
        assert_eq!(
            Strategy::from_json(&v).unwrap_err().field(),
            Some("personalizationImpact")
        );
        let mut v = sample();
        v["facetsScoring"][0]["score"] = json!(-1);
        assert_eq!(
            Strategy::from_json(&v).unwrap_err().field(),
            Some("facetsScoring")
        );
        let mut v = sample();
        v["eventsScoring"][0]["eventType"] = json!("buy");
        assert_eq!(
            Strategy::from_json(&v).unwrap_err().field(),
            Some("eventsScoring")
        );
    }
}
