//! Profile scoring, implemented once for every path.
//!
//! For user `u` and facet value `(f, v)`:
//!
//! ```text
//! raw(f, v) = sum over u's distinct events e within retention
//!             whose (type, name) is in eventsScoring
//!             of eventScore(e) * facetScore(f) * count_e(f, v)
//! ```
//!
//! where `count_e(f, v)` is how many times `f:v` is among the event's
//! filters (or the facets of its objects). Only facets of `facetsScoring`
//! count. The profile keeps, per facet, the 100 values with the highest raw
//! score (ties: smaller value first), drops values whose raw score is 0, and
//! reports `score = max(1, round(20 * raw / R))` where `R` is the highest
//! raw score of the user, rounding half away from zero (exact integer
//! arithmetic: `(40 * raw + R) / (2 * R)`).
//!
//! A *scoring event* is one whose `(type, name)` is in eventsScoring and
//! which has at least one filter on a facet of facetsScoring. A user has a
//! profile when they have a scoring event within retention; `lastEventAt` is
//! the time of their latest scoring event. (The wide schema's batch reader
//! sees only scoring cells, so this is the definition every path can meet.)
//!
//! Identical events (a retry: same key) count once. "Within retention"
//! is by whole UTC days: an event counts while its day began less than
//! `retention` ago, i.e. `timestamp >= start of day(now - retention) + 1
//! day` (see `docs/design/profiles.md`).
//!
//! `Accumulator` (crate-private) is the one implementation, fed by every
//! path; [`reference`](mod@reference) is the naive version over a plain
//! list, for tests.

mod accumulator;
mod facets;
pub mod reference;
mod sorted;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::event::EventType;
use crate::strategy::Weights;

pub use accumulator::eq_bytes;
pub(crate) use accumulator::{cmp_bytes, Accumulator, SortedRuns};
pub use facets::FacetCounts;
pub use sorted::{json_string, FacetIndex, FacetScores, SortedScores};

/// Values kept per facet in a profile.
pub const MAX_VALUES_PER_FACET: usize = 100;
/// The highest score.
pub const MAX_SCORE: i64 = 20;

/// An event as the profile paths see it: what it is, when, and the facet
/// counts it resolved to at ingestion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScoredEvent {
    pub event_type: EventType,
    pub event_name: String,
    pub timestamp_millis: i64,
    pub counts: FacetCounts,
}

impl ScoredEvent {
    /// Whether this is a scoring event under `weights`: its `(type, name)`
    /// is scored and it counts a value of a scored facet.
    pub fn is_scoring(&self, weights: &Weights) -> bool {
        weights.event(self.event_type, &self.event_name).is_some()
            && self
                .counts
                .iter()
                .any(|(f, _, n)| n > 0 && weights.facet(f).is_some())
    }
}

/// A user's scored profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    pub user_token: String,
    pub last_event_millis: i64,
    /// `facet -> value -> score (1..=20)`.
    pub scores: BTreeMap<String, BTreeMap<String, u32>>,
}

impl Profile {
    /// The API's profile JSON:
    /// `{"userToken","lastEventAt":"2024-05-21T01:15:35Z","scores":{..}}`.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// The API's profile JSON, written without building a `Value` (keys in
/// the order a `Value` sorts them, so both forms give the same bytes).
impl serde::Serialize for Profile {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let last =
            affinity_rowkey::time::format_seconds(self.last_event_millis).unwrap_or_default();
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("lastEventAt", &last)?;
        map.serialize_entry("scores", &self.scores)?;
        map.serialize_entry("userToken", &self.user_token)?;
        map.end()
    }
}

/// `max(1, round(20 * raw / max))`, half away from zero, for `0 < raw <= max`.
pub fn scale(raw: i64, max: i64) -> u32 {
    let max = max.max(1);
    let twice = 2 * MAX_SCORE;
    // In 64 bits when it fits (it always does but for sums near 2^58): a
    // profile scales hundreds of values, and 128-bit division is a call.
    let s = match (
        raw.checked_mul(twice).and_then(|r| r.checked_add(max)),
        max.checked_mul(2),
    ) {
        (Some(n), Some(d)) => i128::from(n / d),
        _ => {
            let (raw, max) = (i128::from(raw), i128::from(max));
            (i128::from(twice) * raw + max) / (2 * max)
        }
    };
    s.clamp(1, i128::from(MAX_SCORE)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_rounds_half_away_from_zero() {
        assert_eq!(scale(10, 10), 20);
        assert_eq!(scale(1, 40), 1); // 0.5 -> 1
        assert_eq!(scale(3, 40), 2); // 1.5 -> 2
        assert_eq!(scale(5, 40), 3); // 2.5 -> 3
        assert_eq!(scale(1, 1000), 1); // 0.02 -> max(1, 0)
        assert_eq!(scale(13, 40), 7); // 6.5 -> 7

        // Past 64 bits: the 128-bit path, the same rounding.
        assert_eq!(scale(i64::MAX, i64::MAX), 20);
        assert_eq!(scale(i64::MAX / 40, i64::MAX), 1);
        assert_eq!(scale(i64::MAX / 2, i64::MAX), 10);
        assert_eq!(scale(-5, 40), 1);
    }
}
