//! A/B tests of strategies: named variants, each serving a fixed share of
//! the users, chosen by a stable hash of the userToken.
//!
//! A user's bucket is `mix(fnv1a64(userToken)) % 100` (FNV-1a over the
//! token's UTF-8 bytes, then the SplitMix64 finaliser so that tokens that
//! differ in one character spread); the variants take consecutive bucket
//! ranges in the order they are listed. The same token lands in the same
//! variant on every server, in every process and release, and changing the
//! shares moves only the users whose bucket changes hands. A variant
//! without a strategy serves the application's current strategy (the
//! control); the others serve their own.
//!
//! The JSON (`PUT /1/strategies/personalization/variants`):
//! `{"variants": [{"name": "control", "trafficPercentage": 50},
//! {"name": "brand-heavy", "trafficPercentage": 50, "strategy": {...}}]}`.

use serde_json::{json, Map, Value};

use crate::error::{Error, Result};
use crate::strategy::Strategy;

/// The most variants one test may have.
pub const MAX_VARIANTS: usize = 10;

/// One arm of the test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// 1 to 64 of `A-Z a-z 0-9 _ - .`.
    pub name: String,
    /// 0 to 100; the shares of a test add up to 100.
    pub traffic_percentage: u32,
    /// `None`: the application's current strategy.
    pub strategy: Option<Strategy>,
}

/// A validated test: 2 to [`MAX_VARIANTS`] variants with distinct names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variants(Vec<Variant>);

fn bad(field: &'static str, message: impl Into<String>) -> Error {
    Error::strategy(field, message)
}

/// Whether `name` is a variant name (also used to check a forced one).
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

impl Variants {
    /// Parse and validate `{"variants": [...]}`.
    pub fn from_json(value: &Value) -> Result<Variants> {
        let obj = value
            .as_object()
            .ok_or_else(|| bad("variants", "The body must be a JSON object"))?;
        if let Some(extra) = obj.keys().find(|k| *k != "variants") {
            return Err(bad("variants", format!("Unknown field {extra}")));
        }
        let list = obj
            .get("variants")
            .ok_or_else(|| bad("variants", "variants is required"))?
            .as_array()
            .ok_or_else(|| bad("variants", "variants must be an array"))?;
        if !(2..=MAX_VARIANTS).contains(&list.len()) {
            return Err(bad(
                "variants",
                format!(
                    "variants must list 2 to {MAX_VARIANTS} variants (DELETE ends a test), not {}",
                    list.len()
                ),
            ));
        }
        let mut out: Vec<Variant> = Vec::with_capacity(list.len());
        for (i, item) in list.iter().enumerate() {
            let variant = Variant::from_json(i, item)?;
            if out.iter().any(|v| v.name == variant.name) {
                return Err(bad(
                    "name",
                    format!("variants[{i}].name {:?} is used twice", variant.name),
                ));
            }
            out.push(variant);
        }
        let total: u32 = out.iter().map(|v| v.traffic_percentage).sum();
        if total != 100 {
            return Err(bad(
                "trafficPercentage",
                format!("the variants' trafficPercentage must add up to 100, not {total}"),
            ));
        }
        Ok(Variants(out))
    }

    /// The test as the API's JSON.
    pub fn to_json(&self) -> Value {
        let list: Vec<Value> = self.0.iter().map(Variant::to_json).collect();
        json!({ "variants": list })
    }

    /// The variants, in their order.
    pub fn list(&self) -> &[Variant] {
        &self.0
    }

    /// The variant named `name`.
    pub fn get(&self, name: &str) -> Option<&Variant> {
        self.0.iter().find(|v| v.name == name)
    }

    /// The index of the variant that serves `user_token`.
    pub fn assign(&self, user_token: &str) -> usize {
        let mut bucket = bucket(user_token);
        for (i, v) in self.0.iter().enumerate() {
            if bucket < v.traffic_percentage {
                return i;
            }
            bucket -= v.traffic_percentage;
        }
        // The shares add up to 100 (checked when parsed).
        self.0.len() - 1
    }
}

impl Variant {
    fn from_json(i: usize, item: &Value) -> Result<Variant> {
        let obj: &Map<String, Value> = item
            .as_object()
            .ok_or_else(|| bad("variants", format!("variants[{i}] must be an object")))?;
        if let Some(extra) = obj
            .keys()
            .find(|k| !["name", "trafficPercentage", "strategy"].contains(&k.as_str()))
        {
            return Err(bad(
                "variants",
                format!("variants[{i}] has an unknown field {extra}"),
            ));
        }
        let name = obj
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("name", format!("variants[{i}].name is required (a string)")))?;
        if !valid_name(name) {
            return Err(bad(
                "name",
                format!("variants[{i}].name must be 1 to 64 of A-Z a-z 0-9 _ - ., not {name:?}"),
            ));
        }
        let traffic_percentage = obj
            .get("trafficPercentage")
            .and_then(Value::as_u64)
            .filter(|p| *p <= 100)
            .ok_or_else(|| {
                bad(
                    "trafficPercentage",
                    format!("variants[{i}].trafficPercentage must be an integer from 0 to 100"),
                )
            })? as u32;
        let strategy = match obj.get("strategy") {
            None | Some(Value::Null) => None,
            Some(s) => Some(
                Strategy::from_json(s)
                    .map_err(|e| bad("strategy", format!("variants[{i}].strategy: {e}")))?,
            ),
        };
        Ok(Variant {
            name: name.to_string(),
            traffic_percentage,
            strategy,
        })
    }

    fn to_json(&self) -> Value {
        let mut out = json!({"name": self.name, "trafficPercentage": self.traffic_percentage});
        if let Some(s) = &self.strategy {
            out["strategy"] = s.to_json();
        }
        out
    }
}

/// The user's bucket, 0 to 99 (see the module docs).
pub fn bucket(user_token: &str) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in user_token.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // SplitMix64's finaliser.
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    (h % 100) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strategy(impact: u32) -> Value {
        json!({"eventsScoring": [{"eventName": "buy", "eventType": "conversion", "score": 50}],
               "facetsScoring": [{"facetName": "brand", "score": 100}],
               "personalizationImpact": impact})
    }

    #[test]
    fn buckets_are_stable_and_spread() {
        // Pinned: a user's variant must not move between releases.
        let pinned: Vec<u32> = ["user-1", "user-2", "alice", ""]
            .into_iter()
            .map(bucket)
            .collect();
        assert_eq!(pinned, vec![PINNED[0], PINNED[1], PINNED[2], PINNED[3]]);
        let mut counts = [0u32; 100];
        for i in 0..100_000 {
            counts[bucket(&format!("user{i}")) as usize] += 1;
        }
        // 1,000 expected per bucket; a fair hash stays well within 20%.
        assert!(counts.iter().all(|c| (800..1200).contains(c)), "{counts:?}");
    }

    // Computed by an independent implementation of the documented formula.
    const PINNED: [u32; 4] = [24, 95, 72, 3];

    #[test]
    fn shares_are_consecutive_bucket_ranges() {
        let test = Variants::from_json(&json!({"variants": [
            {"name": "control", "trafficPercentage": 30},
            {"name": "b", "trafficPercentage": 70, "strategy": strategy(80)}]}))
        .unwrap();
        let mut served = [0u32; 2];
        for i in 0..10_000 {
            let token = format!("u{i}");
            let v = &test.list()[test.assign(&token)];
            assert_eq!(v.name == "control", bucket(&token) < 30);
            served[usize::from(v.name == "b")] += 1;
        }
        assert!((2700..3300).contains(&served[0]), "{served:?}");
        assert_eq!(
            test.get("b")
                .unwrap()
                .strategy
                .as_ref()
                .unwrap()
                .personalization_impact,
            80
        );
        assert!(test.get("c").is_none());
        assert_eq!(Variants::from_json(&test.to_json()).unwrap(), test);
    }

    #[test]
    fn bad_tests_name_the_field() {
        let cases = [
            (json!([]), "variants"),
            (
                json!({"variants": [{"name": "a", "trafficPercentage": 100}]}),
                "variants",
            ),
            (
                json!({"variants": [{"name": "a", "trafficPercentage": 50},
                                 {"name": "a", "trafficPercentage": 50}]}),
                "name",
            ),
            (
                json!({"variants": [{"name": "", "trafficPercentage": 50},
                                 {"name": "b", "trafficPercentage": 50}]}),
                "name",
            ),
            (
                json!({"variants": [{"name": "a b", "trafficPercentage": 50},
                                 {"name": "b", "trafficPercentage": 50}]}),
                "name",
            ),
            (
                json!({"variants": [{"name": "a", "trafficPercentage": 50},
                                 {"name": "b", "trafficPercentage": 40}]}),
                "trafficPercentage",
            ),
            (
                json!({"variants": [{"name": "a", "trafficPercentage": 150},
                                 {"name": "b", "trafficPercentage": -50}]}),
                "trafficPercentage",
            ),
            (
                json!({"variants": [{"name": "a", "trafficPercentage": 50},
                                 {"name": "b", "trafficPercentage": 50, "strategy": {"x": 1}}]}),
                "strategy",
            ),
            (
                json!({"variants": [{"name": "a", "trafficPercentage": 50, "weight": 1},
                                 {"name": "b", "trafficPercentage": 50}]}),
                "variants",
            ),
        ];
        for (body, want) in cases {
            match Variants::from_json(&body) {
                Err(Error::InvalidStrategy { field, .. }) => assert_eq!(field, want, "{body}"),
                other => panic!("{body}: {other:?}"),
            }
        }
    }
}
