//! Explaining one score of a profile: which events made it, day by day,
//! and when it will next change as days leave the window.
//!
//! The explanation is computed from the events table (every event of the
//! user's identity within the window, as [`Engine::user_events`] reads
//! them), not from the profile state: the state keeps counters per arrival
//! day and folds closed days into a rollup, so it cannot say which event
//! day a count came from, while the events table keys every event by its
//! own time. Both hold the same events (`docs/design/profiles.md`,
//! invariant 5), so the raw score explained here is the raw score a profile
//! read computes; the tests hold the two equal. This reads every event of
//! the user in the window: fine for an explanation, never for a hot path.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::engine::{App, Engine, DAY_MILLIS};
use crate::error::{Error, Result};
use crate::event::EventType;
use crate::scoring::{scale, ScoredEvent, MAX_VALUES_PER_FACET};
use crate::strategy::{Strategy, Weights};

/// Why `raw(facet, value)` of a user's profile is what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    pub user_token: String,
    pub facet: String,
    pub value: String,
    pub retention_days: u32,
    /// The first counted instant: events at or after it count.
    pub window_start_millis: i64,
    /// The scored event kinds that counted `facet:value`, one row per
    /// (day, member token, type, name), oldest day first.
    pub contributions: Vec<Contribution>,
    /// Events within the window that counted `facet:value` but whose
    /// `(type, name)` the strategy does not score: they add nothing.
    pub not_scored: Vec<Unscored>,
    /// `raw(facet, value)`: the sum of the contributions.
    pub raw: i64,
    /// The highest raw score of the profile, which every score is
    /// normalised by, and the first facet value (in facet, value order)
    /// that holds it; `None` when no value has a positive raw score.
    pub max: Option<MaxRaw>,
    /// The value's place among its facet's values with a positive raw
    /// score (1 = highest; ties to the smaller value, as the profile keeps
    /// them); `None` when its raw score is 0.
    pub rank: Option<usize>,
    /// How many values of the facet have a positive raw score.
    pub facet_values: usize,
    /// Whether the value is among the [`MAX_VALUES_PER_FACET`] the profile
    /// keeps of its facet.
    pub kept: bool,
    /// The value's score in the profile, `scale(raw, max)`; `None` when
    /// the profile does not hold the value (raw 0, or not kept).
    pub score: Option<u32>,
    /// The next time the score changes if no event arrives: the first day
    /// whose leaving the window changes it (its events leave, the maximum
    /// may move, identity links of that day end). `None` when no day
    /// leaving changes it (the value is not in the profile and never
    /// enters it).
    pub next_change: Option<NextChange>,
}

/// What events of one kind, of one member token and one event day, added
/// to the raw score: `event_score * facet_score * count`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contribution {
    /// The token the events are stored under: the user asked for, or a
    /// member of their identity (an anonymous token linked to them).
    pub user_token: String,
    /// The UTC event day, days since the epoch.
    pub day: i64,
    pub event_type: EventType,
    pub event_name: String,
    /// How many distinct events of this kind counted the value that day.
    pub events: u32,
    /// How many times the value is among those events' facet values.
    pub count: i64,
    pub event_score: u32,
    pub facet_score: u32,
    pub contribution: i64,
    /// When the day leaves the window: `(day + retention)` days after the
    /// epoch.
    pub leaves_at_millis: i64,
}

/// Events of a kind the strategy does not score that counted the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unscored {
    pub event_type: EventType,
    pub event_name: String,
    pub events: u32,
    pub count: i64,
}

/// The profile's highest raw score and the facet value holding it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaxRaw {
    pub raw: i64,
    pub facet: String,
    pub value: String,
}

/// The value's raw score, the profile's maximum and its score right after
/// a day leaves the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextChange {
    pub at_millis: i64,
    /// The event day leaving.
    pub day: i64,
    pub raw: i64,
    /// The profile's highest raw score then (0 when none is left).
    pub max_raw: i64,
    pub score: Option<u32>,
}

/// `2024-05-21T00:00:00Z`, or empty out of the years 0000-9999.
fn iso(millis: i64) -> String {
    affinity_rowkey::time::format_seconds(millis).unwrap_or_default()
}

/// An event day as `2024-05-21`.
fn iso_day(day: i64) -> String {
    iso(day * DAY_MILLIS).chars().take(10).collect()
}

impl Explanation {
    /// The API's JSON (`docs/api.md`, "Explaining a score").
    pub fn to_json(&self) -> Value {
        let contributions: Vec<Value> = self
            .contributions
            .iter()
            .map(|c| {
                json!({"userToken": c.user_token, "day": iso_day(c.day),
                    "eventType": c.event_type.as_str(), "eventName": c.event_name,
                    "events": c.events, "count": c.count, "eventScore": c.event_score,
                    "facetScore": c.facet_score, "contribution": c.contribution,
                    "leavesAt": iso(c.leaves_at_millis)})
            })
            .collect();
        let not_scored: Vec<Value> = self
            .not_scored
            .iter()
            .map(|u| {
                json!({"eventType": u.event_type.as_str(), "eventName": u.event_name,
                    "events": u.events, "count": u.count})
            })
            .collect();
        let formula = match (&self.max, self.score) {
            (Some(m), Some(score)) => Value::from(format!(
                "max(1, round({} x {} / {})) = {score}",
                crate::scoring::MAX_SCORE,
                self.raw,
                m.raw
            )),
            _ => Value::Null,
        };
        json!({
            "userToken": self.user_token,
            "facet": self.facet,
            "value": self.value,
            "retentionDays": self.retention_days,
            "windowStart": iso(self.window_start_millis),
            "contributions": contributions,
            "notScored": not_scored,
            "raw": self.raw,
            "maxRaw": self.max.as_ref().map(|m| json!({"raw": m.raw, "facet": m.facet, "value": m.value})),
            "rank": self.rank,
            "facetValues": self.facet_values,
            "maxValuesPerFacet": MAX_VALUES_PER_FACET,
            "kept": self.kept,
            "score": self.score,
            "formula": formula,
            "nextChange": self.next_change.as_ref().map(|n| json!({"at": iso(n.at_millis),
                "day": iso_day(n.day), "raw": n.raw, "maxRaw": n.max_raw, "score": n.score})),
        })
    }
}

/// `raw` of every scored facet value, by `(facet, value)`.
type Totals = BTreeMap<(String, String), i64>;

/// Where a value stands among `totals`.
struct Standing {
    raw: i64,
    max: Option<MaxRaw>,
    rank: Option<usize>,
    facet_values: usize,
    kept: bool,
    score: Option<u32>,
}

fn standing(totals: &Totals, facet: &str, value: &str) -> Standing {
    let raw = totals
        .get(&(facet.to_string(), value.to_string()))
        .copied()
        .unwrap_or(0);
    let mut max: Option<MaxRaw> = None;
    for ((f, v), r) in totals {
        if *r > 0 && max.as_ref().is_none_or(|m| *r > m.raw) {
            max = Some(MaxRaw {
                raw: *r,
                facet: f.clone(),
                value: v.clone(),
            });
        }
    }
    let mut facet_values = 0;
    let mut above = 0;
    for ((f, v), r) in totals {
        if f != facet || *r <= 0 {
            continue;
        }
        facet_values += 1;
        // Ahead of the value: a higher raw, or the same raw and a smaller
        // value (the profile's tie rule).
        if *r > raw || (*r == raw && v.as_str() < value) {
            above += 1;
        }
    }
    let rank = (raw > 0).then_some(above + 1);
    let kept = rank.is_some_and(|r| r <= MAX_VALUES_PER_FACET);
    let score = match &max {
        Some(m) if kept => Some(scale(raw, m.raw)),
        _ => None,
    };
    Standing {
        raw,
        max,
        rank,
        facet_values,
        kept,
        score,
    }
}

/// Add `times` times an event's contribution to every scored value into
/// `totals`.
fn add_event(totals: &mut Totals, weights: &Weights, event: &ScoredEvent, times: i64) {
    let Some(es) = weights.event(event.event_type, &event.event_name) else {
        return;
    };
    for (f, v, n) in event.counts.iter() {
        if let Some(fs) = weights.facet(f) {
            *totals.entry((f.to_string(), v.to_string())).or_default() +=
                i64::from(es) * i64::from(fs) * i64::from(n) * times;
        }
    }
}

/// Each member token's events within the window at the time of the
/// explanation, read once however many later windows use them.
#[derive(Default)]
struct MemberEvents(BTreeMap<String, Vec<ScoredEvent>>);

impl MemberEvents {
    /// The members of `user`'s identity when the window starts on day
    /// `window`, their events read if not yet.
    fn load(
        &mut self,
        engine: &Engine,
        app: &App,
        user: &str,
        window: i64,
        now: i64,
    ) -> Result<Vec<String>> {
        let mut members = Vec::new();
        for (member, _) in engine.identity(app, user, window, None)? {
            if !self.0.contains_key(&member) {
                // Events are at most an hour ahead of the clock.
                let events =
                    engine.user_events(app, &member, window * DAY_MILLIS, now + DAY_MILLIS)?;
                self.0.insert(member.clone(), events);
            }
            members.push(member);
        }
        Ok(members)
    }

    /// `member`'s loaded events of days `window` and later.
    fn events<'a>(
        &'a self,
        member: &str,
        window: i64,
    ) -> impl Iterator<Item = &'a ScoredEvent> + 'a {
        self.0
            .get(member)
            .into_iter()
            .flatten()
            .filter(move |e| e.timestamp_millis >= window * DAY_MILLIS)
    }
}

impl Engine {
    /// Explain `raw(facet, value)` of `user`'s profile under the current
    /// strategy (see the module docs). `None` when the application has no
    /// strategy or the user no profile; an error naming `facet` when the
    /// strategy does not score it.
    pub fn explain(
        &self,
        app: &str,
        user: &str,
        facet: &str,
        value: &str,
    ) -> Result<Option<Explanation>> {
        let Some(strategy) = self.strategy(app)? else {
            return Ok(None);
        };
        self.explain_with(app, user, facet, value, &strategy)
    }

    /// [`Engine::explain`] under `strategy` (an A/B test's variant).
    pub fn explain_with(
        &self,
        app: &str,
        user: &str,
        facet: &str,
        value: &str,
        strategy: &Strategy,
    ) -> Result<Option<Explanation>> {
        let weights = strategy.weights();
        let Some(facet_score) = weights.facet(facet) else {
            return Err(Error::InvalidArgument {
                name: "facet",
                reason: format!("{facet:?} is not among the strategy's facetsScoring"),
            });
        };
        let app = self.app(app)?;
        let now = self.now_millis();
        let window = app.config.window_start_day(now);
        let retention = i64::from(app.config.retention_days);
        let mut cache = MemberEvents::default();
        let members = cache.load(self, &app, user, window, now)?;
        let events: Vec<(&str, &ScoredEvent)> = members
            .iter()
            .flat_map(|m| cache.events(m, window).map(move |e| (m.as_str(), e)))
            .collect();
        if !events.iter().any(|(_, e)| e.is_scoring(&weights)) {
            return Ok(None);
        }

        let mut totals = Totals::new();
        type Kind = (i64, String, EventType, String);
        let mut rows: BTreeMap<Kind, (u32, i64)> = BTreeMap::new();
        let mut unscored: BTreeMap<(EventType, String), (u32, i64)> = BTreeMap::new();
        for (member, e) in &events {
            add_event(&mut totals, &weights, e, 1);
            let count = i64::from(e.counts.get(facet, value));
            if count == 0 {
                continue;
            }
            let day = e.timestamp_millis.div_euclid(DAY_MILLIS);
            let slot = if weights.event(e.event_type, &e.event_name).is_some() {
                rows.entry((day, member.to_string(), e.event_type, e.event_name.clone()))
                    .or_default()
            } else {
                unscored
                    .entry((e.event_type, e.event_name.clone()))
                    .or_default()
            };
            slot.0 += 1;
            slot.1 += count;
        }
        drop(events);
        let contributions: Vec<Contribution> = rows
            .into_iter()
            .map(|((day, member, ty, name), (n, count))| {
                let event_score = weights.event(ty, &name).unwrap_or(0);
                Contribution {
                    user_token: member,
                    day,
                    event_type: ty,
                    event_name: name,
                    events: n,
                    count,
                    event_score,
                    facet_score,
                    contribution: i64::from(event_score) * i64::from(facet_score) * count,
                    leaves_at_millis: (day + retention) * DAY_MILLIS,
                }
            })
            .collect();
        let now_standing = standing(&totals, facet, value);

        // Days leave oldest first. Each day leaving takes its events out
        // and may end links (a link lasts while its event is in the
        // window), which changes the identity's members: the profile is
        // recomputed at each later window start until the score differs
        // or no event of today is left.
        let mut next_change = None;
        let last_day = (now + DAY_MILLIS).div_euclid(DAY_MILLIS);
        for later in window + 1..=last_day + 1 {
            let members = cache.load(self, &app, user, later, now)?;
            let mut totals = Totals::new();
            for m in &members {
                for e in cache.events(m, later) {
                    add_event(&mut totals, &weights, e, 1);
                }
            }
            let then = standing(&totals, facet, value);
            if then.score != now_standing.score {
                next_change = Some(NextChange {
                    at_millis: (later - 1 + retention) * DAY_MILLIS,
                    day: later - 1,
                    raw: then.raw,
                    max_raw: then.max.map_or(0, |m| m.raw),
                    score: then.score,
                });
                break;
            }
        }
        Ok(Some(Explanation {
            user_token: user.to_string(),
            facet: facet.to_string(),
            value: value.to_string(),
            retention_days: app.config.retention_days,
            window_start_millis: window * DAY_MILLIS,
            contributions,
            not_scored: unscored
                .into_iter()
                .map(|((event_type, event_name), (events, count))| Unscored {
                    event_type,
                    event_name,
                    events,
                    count,
                })
                .collect(),
            raw: now_standing.raw,
            max: now_standing.max,
            rank: now_standing.rank,
            facet_values: now_standing.facet_values,
            kept: now_standing.kept,
            score: now_standing.score,
            next_change,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(list: &[(&str, &str, i64)]) -> Totals {
        list.iter()
            .map(|(f, v, r)| ((f.to_string(), v.to_string()), *r))
            .collect()
    }

    #[test]
    fn standing_ranks_ties_to_the_smaller_value_and_scales_by_the_max() {
        let t = totals(&[
            ("brand", "Apple", 500),
            ("brand", "Nike", 500),
            ("brand", "Zara", 0),
            ("color", "Red", 1000),
        ]);
        let s = standing(&t, "brand", "Nike");
        assert_eq!((s.raw, s.rank, s.facet_values), (500, Some(2), 2));
        assert_eq!(
            s.max.map(|m| (m.facet, m.value)),
            Some(("color".into(), "Red".into()))
        );
        assert_eq!((s.kept, s.score), (true, Some(10)));
        let s = standing(&t, "brand", "Zara");
        assert_eq!((s.raw, s.rank, s.kept, s.score), (0, None, false, None));
    }

    #[test]
    fn standing_drops_values_past_the_kept_count() {
        let mut list: Vec<(String, i64)> = (0..=MAX_VALUES_PER_FACET)
            .map(|i| (format!("v{i:03}"), 10))
            .collect();
        list.push(("w".into(), 20));
        let t: Totals = list
            .into_iter()
            .map(|(v, r)| (("brand".to_string(), v), r))
            .collect();
        // 102 values: "w" first, then v000.. by value; v100 is 102nd.
        let last = format!("v{MAX_VALUES_PER_FACET:03}");
        let s = standing(&t, "brand", &last);
        assert_eq!(s.rank, Some(MAX_VALUES_PER_FACET + 2));
        assert_eq!((s.kept, s.score), (false, None));
        let s = standing(&t, "brand", "v098");
        assert_eq!((s.rank, s.kept, s.score), (Some(100), true, Some(10)));
    }
}
