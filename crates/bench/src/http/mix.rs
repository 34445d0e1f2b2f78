//! The users of a run with history (`--history-days` > 0): a heavy tail
//! of `--heavy-share` users with about `--heavy-per-day` events a day, the
//! rest with about `--light-per-day`, every count and event drawn from the
//! seed (so a run against `--url` knows the classes too).
//!
//! The live ingest sends first each user's events of today (a day at their
//! rate, or `--today-share` of a day), then the rest of the burst to
//! `--visitors` other users: a burst of a million events over a few
//! thousand users would give each heavy user thousands of events today, a
//! burst's profile rather than a heavy user's.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use affinity_engine::{Event, DAY_MILLIS};

use super::HttpBenchArgs;
use crate::days::{draw, Drawn, FACETS};

/// Keys of the draws, so no two ask the same question of the seed.
const HEAVY: u64 = 1;
const COUNT: u64 = 2;
const EVENT: u64 = 3;
const TIME: u64 = 4;
const VISITOR: u64 = 5;
const SKEW: u64 = 6;
const FAVOURITES: u64 = 7;

/// Facet values drawn by Zipf rank (`--value-skew`, the exponent) instead
/// of uniformly; each user's ranks start at their own values, so users
/// have favourites rather than all sharing the same top values.
struct Skew {
    exponent: f64,
    /// Per facet, the cumulative share of ranks `0..=k`.
    cdf: Vec<Vec<f64>>,
}

impl Skew {
    fn new(exponent: f64) -> Skew {
        let cdf = FACETS
            .iter()
            .map(|(_, _, n)| {
                let weights: Vec<f64> = (1..=*n).map(|k| (k as f64).powf(-exponent)).collect();
                let total: f64 = weights.iter().sum();
                let mut sum = 0.0;
                weights
                    .iter()
                    .map(|w| {
                        sum += w / total;
                        sum
                    })
                    .collect()
            })
            .collect();
        Skew { exponent, cdf }
    }

    /// The value of `facet` at uniform `u` (0..1) for a user whose
    /// favourite is `first`.
    fn value(&self, facet: usize, u: f64, first: u64) -> u64 {
        let cdf = &self.cdf[facet];
        let rank = cdf.partition_point(|c| *c < u).min(cdf.len() - 1) as u64;
        (first + rank) % cdf.len() as u64
    }
}

/// Uniform in 0..1 from a hash's top 53 bits.
fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// A user's class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Light,
    Heavy,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Light => "light",
            Class::Heavy => "heavy",
        }
    }
}

/// The users `user0 .. user{N-1}`, their classes and their events.
pub struct Mix {
    seed: u64,
    heavy: Vec<bool>,
    pub heavy_per_day: f64,
    pub light_per_day: f64,
    pub visitors: usize,
    skew: Option<Skew>,
    /// Before every facet value (`--value-prefix`).
    pub value_prefix: String,
    /// The share of a day's events each user has had today
    /// (`--today-share`).
    today_share: f64,
    /// The share of those still live when the reads start: the others
    /// were digested (`--today-live-hours` of 24).
    live_share: f64,
}

impl Mix {
    pub fn new(args: &HttpBenchArgs) -> Mix {
        let users = args.users();
        // At least one heavy user when the share is not zero, so a small
        // run still reads both classes.
        let heavy_users = ((users as f64 * args.heavy_share).round() as usize)
            .max(usize::from(args.heavy_share > 0.0))
            .min(users);
        let mut order: Vec<usize> = (0..users).collect();
        order.sort_by_key(|u| draw(args.seed, &[HEAVY, *u as u64]));
        let mut heavy = vec![false; users];
        for u in &order[..heavy_users] {
            heavy[*u] = true;
        }
        Mix {
            seed: args.seed,
            heavy,
            heavy_per_day: args.heavy_per_day,
            light_per_day: args.light_per_day,
            visitors: args.visitors,
            skew: (args.value_skew > 0.0).then(|| Skew::new(args.value_skew)),
            value_prefix: args.value_prefix.clone(),
            today_share: args.today_share,
            // A server elsewhere (`--url`) gets no history: every event
            // of today goes to it live.
            live_share: match args.url {
                Some(_) => 1.0,
                None => args.today_live_hours / 24.0,
            },
        }
    }

    /// How facet values are drawn, for the report.
    pub fn values(&self) -> String {
        let drawn = match &self.skew {
            Some(skew) => format!("Zipf {} from each user's favourites", skew.exponent),
            None => "uniform".to_string(),
        };
        match self.value_prefix.as_str() {
            "" => drawn,
            prefix => format!("{drawn}, each after \"{prefix}\""),
        }
    }

    pub fn users(&self) -> usize {
        self.heavy.len()
    }

    pub fn class(&self, user: usize) -> Class {
        if self.heavy[user] {
            Class::Heavy
        } else {
            Class::Light
        }
    }

    /// The users of a class, in order.
    pub fn members(&self, class: Class) -> Vec<u32> {
        (0..self.users())
            .filter(|u| self.class(*u) == class)
            .map(|u| u as u32)
            .collect()
    }

    /// The user's events on `day`: their class's rate, varied by up to a
    /// quarter either way, at least one.
    pub fn events_on(&self, user: usize, day: i64) -> usize {
        let rate = match self.class(user) {
            Class::Heavy => self.heavy_per_day,
            Class::Light => self.light_per_day,
        };
        let h = draw(self.seed, &[COUNT, user as u64, day as u64]);
        let spread = 0.75 + 0.5 * unit(h);
        ((rate * spread).round() as usize).max(1)
    }

    /// The user's `j`th event of `day`, its time within the first `span`
    /// milliseconds of the day.
    pub fn event(&self, user: usize, day: i64, j: usize, span: i64) -> (Drawn, i64) {
        let key = [user as u64, day as u64, j as u64];
        let mut drawn = Drawn::from_hash(draw(self.seed, &[EVENT, key[0], key[1], key[2]]));
        if let Some(skew) = &self.skew {
            for (f, value) in drawn.values.iter_mut().enumerate() {
                let u = unit(draw(self.seed, &[SKEW, key[0], key[1], key[2], f as u64]));
                let first = draw(self.seed, &[FAVOURITES, key[0], f as u64]);
                *value = skew.value(f, u, first);
            }
        }
        let offset = draw(self.seed, &[TIME, key[0], key[1], key[2]]) % span.max(1) as u64;
        (drawn, day * DAY_MILLIS + offset as i64)
    }

    /// Prefix sums of the users' events on `day`: user `u`'s are numbers
    /// `sums[u] .. sums[u + 1]`.
    pub fn day_sums(&self, day: i64) -> Vec<usize> {
        self.sums(day, |events| events)
    }

    /// [`Mix::day_sums`] of today's live events: of each user's first
    /// `--today-share` of the day's events (rounded, so none at 0), the
    /// share still live when the reads start (rounded). They are the
    /// user's events `0 .. live` of today.
    pub fn today_sums(&self, today: i64) -> Vec<usize> {
        self.sums(today, |events| self.today_split(events).0)
    }

    /// [`Mix::day_sums`] of today's digested events: the rest of each
    /// user's share, its events `live .. live + digested` of today.
    pub fn digested_sums(&self, today: i64) -> Vec<usize> {
        self.sums(today, |events| self.today_split(events).1)
    }

    /// Of a user's `events` on a day: those of today still live, and
    /// those digested.
    fn today_split(&self, events: usize) -> (usize, usize) {
        let today = (events as f64 * self.today_share).round() as usize;
        let live = ((today as f64 * self.live_share).round() as usize).min(today);
        (live, today - live)
    }

    /// Digested event number `i` of `today` (numbered by
    /// [`Mix::digested_sums`]), with a time within `span` of the day's
    /// start.
    pub fn digested_event(&self, sums: &[usize], today: i64, i: usize, span: i64) -> Event {
        let user = sums.partition_point(|s| *s <= i) - 1;
        let live = self.today_split(self.events_on(user, today)).0;
        let (drawn, ts) = self.event(user, today, live + i - sums[user], span);
        drawn.event(format!("user{user}"), ts, &self.value_prefix)
    }

    /// Prefix sums of `take(events)` for each user's events on `day`.
    fn sums(&self, day: i64, take: impl Fn(usize) -> usize) -> Vec<usize> {
        let mut sums = Vec::with_capacity(self.users() + 1);
        sums.push(0);
        for u in 0..self.users() {
            sums.push(sums[u] + take(self.events_on(u, day)));
        }
        sums
    }

    /// Event number `i` of `day` (numbered by [`Mix::day_sums`]), as the
    /// engine takes it.
    pub fn day_event(&self, sums: &[usize], day: i64, i: usize, span: i64) -> Event {
        let user = sums.partition_point(|s| *s <= i) - 1;
        let (drawn, ts) = self.event(user, day, i - sums[user], span);
        drawn.event(format!("user{user}"), ts, &self.value_prefix)
    }
}

/// Today's traffic for the live ingest: requests take consecutive event
/// numbers from one counter; the first ones are the users' events of
/// today, the rest go to the visitors.
pub struct Live {
    mix: Arc<Mix>,
    today: i64,
    sums: Vec<usize>,
    /// Timestamps are spread over today until this time.
    now: i64,
    next: AtomicUsize,
    batch: usize,
}

impl Live {
    pub fn new(mix: Arc<Mix>, now: i64, batch: usize) -> Live {
        let today = now.div_euclid(DAY_MILLIS);
        Live {
            sums: mix.today_sums(today),
            mix,
            today,
            now,
            next: AtomicUsize::new(0),
            batch,
        }
    }

    /// The users' events of today, sent before the visitors'.
    pub fn user_events(&self) -> usize {
        self.sums.last().copied().unwrap_or(0)
    }

    /// The next request's body.
    pub fn body(&self) -> String {
        let start = self.next.fetch_add(self.batch, Ordering::Relaxed);
        let span = self.now - self.today * DAY_MILLIS + 1;
        let mut body = String::with_capacity(self.batch * 220 + 16);
        body.push_str(r#"{"events":["#);
        for i in start..start + self.batch {
            let (user, drawn, ts) = if i < self.user_events() {
                let u = self.sums.partition_point(|s| *s <= i) - 1;
                let (drawn, ts) = self.mix.event(u, self.today, i - self.sums[u], span);
                (format!("user{u}"), drawn, ts)
            } else {
                let h = draw(self.mix.seed, &[VISITOR, i as u64]);
                let v = h % self.mix.visitors.max(1) as u64;
                let drawn = Drawn::from_hash(draw(self.mix.seed, &[VISITOR, i as u64, 1]));
                let ts = self.today * DAY_MILLIS + (h >> 20) as i64 % span;
                (format!("visitor{v}"), drawn, ts)
            };
            if i > start {
                body.push(',');
            }
            let _ = write!(
                body,
                r#"{{"eventType":"{}","eventName":"{}","index":"products","userToken":"{user}","timestamp":{ts},"filters":["#,
                drawn.kind.as_str(),
                drawn.name,
            );
            for (k, (facet, value)) in drawn.filters(&self.mix.value_prefix).enumerate() {
                let comma = if k > 0 { "," } else { "" };
                let _ = write!(body, r#"{comma}"{facet}:{value}""#);
            }
            body.push_str("]}");
        }
        body.push_str("]}");
        body
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use serde_json::Value;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: HttpBenchArgs,
    }

    fn mix(flags: &[&str]) -> Mix {
        let cli = Cli::parse_from(std::iter::once("bench").chain(flags.iter().copied()));
        Mix::new(&cli.args)
    }

    const DAY: i64 = 20_000;

    #[test]
    fn the_heavy_tail_is_drawn_from_the_seed() {
        let m = mix(&[]);
        assert_eq!(m.users(), 2000);
        let heavy = m.members(Class::Heavy);
        assert_eq!((heavy.len(), m.members(Class::Light).len()), (40, 1960));
        assert_eq!(mix(&[]).members(Class::Heavy), heavy);
        assert_ne!(mix(&["--seed", "7"]).members(Class::Heavy), heavy);
        // A small run keeps one heavy user; a zero share has none.
        assert_eq!(mix(&["--users", "10"]).members(Class::Heavy).len(), 1);
        assert!(mix(&["--heavy-share", "0"])
            .members(Class::Heavy)
            .is_empty());
        // A day's events: within a quarter of the class's rate, about the
        // rate on average.
        for (class, rate) in [(Class::Light, 5.0f64), (Class::Heavy, 100.0)] {
            let counts: Vec<usize> = m
                .members(class)
                .iter()
                .map(|u| m.events_on(*u as usize, DAY))
                .collect();
            let (low, high) = (
                (rate * 0.75).round() as usize,
                (rate * 1.25).round() as usize,
            );
            assert!(
                counts.iter().all(|n| (low..=high).contains(n)),
                "{counts:?}"
            );
            let mean = counts.iter().sum::<usize>() as f64 / counts.len() as f64;
            assert!((mean - rate).abs() < rate * 0.1, "{class:?}: {mean}");
        }
    }

    #[test]
    fn skewed_values_are_each_users_favourites() {
        // A heavy user's brands over ten days: uniform, nearly all 300 of
        // them, none above 2%; Zipf 1, fewer, the favourite above 10%.
        let brands = |m: &Mix| {
            let user = m.members(Class::Heavy)[0] as usize;
            let mut counts = std::collections::BTreeMap::new();
            for day in DAY..DAY + 10 {
                for j in 0..m.events_on(user, day) {
                    *counts
                        .entry(m.event(user, day, j, 1000).0.values[0])
                        .or_insert(0) += 1;
                }
            }
            let total: usize = counts.values().sum();
            let top = *counts.values().max().unwrap() as f64 / total as f64;
            (counts.len(), top, counts.keys().max().copied())
        };
        let (uniform, top, last) = brands(&mix(&[]));
        assert!(uniform > 280 && top < 0.02, "{uniform} {top}");
        assert!(last < Some(300));
        let (skewed, top, last) = brands(&mix(&["--value-skew", "1"]));
        assert!(skewed + 50 < uniform && top > 0.1, "{skewed} {top}");
        assert!(last < Some(300));
        // Two heavy users' favourites differ.
        let m = mix(&["--value-skew", "1"]);
        let favourite = |user: u32| {
            let mut counts = [0; 300];
            for j in 0..m.events_on(user as usize, DAY) {
                counts[m.event(user as usize, DAY, j, 1000).0.values[0] as usize] += 1;
            }
            (0..300).max_by_key(|v| counts[*v]).unwrap()
        };
        let heavy = m.members(Class::Heavy);
        assert_ne!(favourite(heavy[0]), favourite(heavy[1]));
    }

    #[test]
    fn a_days_events_are_each_users_within_the_day() {
        let m = mix(&["--users", "30"]);
        let sums = m.day_sums(DAY);
        let span = DAY_MILLIS - 60_000;
        let mut per_user = vec![0; 30];
        for i in 0..sums[30] {
            let e = m.day_event(&sums, DAY, i, span);
            let user: usize = e.user_token["user".len()..].parse().unwrap();
            per_user[user] += 1;
            let start = DAY * DAY_MILLIS;
            assert!((start..start + span).contains(&e.timestamp_millis), "{e:?}");
            let facets: Vec<&str> = e.filters.iter().map(|(f, _)| f.as_str()).collect();
            assert_eq!(facets, ["brand", "category", "color", "size"]);
        }
        let expected: Vec<usize> = (0..30).map(|u| m.events_on(u, DAY)).collect();
        assert_eq!(per_user, expected);
    }

    #[test]
    fn a_value_prefix_goes_before_every_value() {
        const PREFIX: &str = "Electronics > ";
        let (plain, long) = (
            mix(&["--users", "30"]),
            mix(&["--users", "30", "--value-prefix", PREFIX]),
        );
        let sums = plain.day_sums(DAY);
        for i in 0..sums[30] {
            let (a, b) = (
                plain.day_event(&sums, DAY, i, 1000),
                long.day_event(&sums, DAY, i, 1000),
            );
            assert_eq!(b.filters.len(), 4);
            for ((fa, va), (fb, vb)) in a.filters.iter().zip(&b.filters) {
                assert_eq!((fa, format!("{PREFIX}{va}")), (fb, vb.clone()));
            }
        }
        let live = Live::new(Arc::new(long), DAY * DAY_MILLIS + 3_600_000, 50);
        let body: Value = serde_json::from_str(&live.body()).unwrap();
        for e in body["events"].as_array().unwrap() {
            for filter in e["filters"].as_array().unwrap() {
                let (_, value) = filter.as_str().unwrap().split_once(':').unwrap();
                assert!(value.starts_with(PREFIX), "{e}");
            }
        }
        for bad in ["a\"b", "a\\b", "a\nb"] {
            let parsed = Cli::try_parse_from(["bench", "--value-prefix", bad]);
            let error = parsed.err().expect("refused").to_string();
            assert!(
                error.contains("--value-prefix") && error.contains("cannot be in a value prefix"),
                "{error}"
            );
        }
    }

    #[test]
    fn todays_share_of_a_day_is_what_the_users_get_today() {
        let full = mix(&["--users", "200", "--today-live-hours", "24"]);
        let full_sums = full.day_sums(DAY);
        assert_eq!(full.today_sums(DAY), full_sums);
        assert_eq!(full.digested_sums(DAY), vec![0; 201]);
        let none = mix(&["--users", "200", "--today-share", "0"]);
        assert_eq!(none.today_sums(DAY), vec![0; 201]);
        let live = Live::new(Arc::new(none), DAY * DAY_MILLIS + 3_600_000, 100);
        assert_eq!(live.user_events(), 0);
        let body: Value = serde_json::from_str(&live.body()).unwrap();
        for e in body["events"].as_array().unwrap() {
            assert!(
                e["userToken"].as_str().unwrap().starts_with("visitor"),
                "{e}"
            );
        }
        // An hour's share: each user's day times a 24th, rounded (a light
        // user's 5 a day make none, a heavy user's 100 about 4).
        let hour = mix(&[
            "--users",
            "200",
            "--today-share",
            "0.0417",
            "--today-live-hours",
            "24",
        ]);
        let sums = hour.today_sums(DAY);
        for u in 0..200 {
            let (day, today) = (full.events_on(u, DAY), sums[u + 1] - sums[u]);
            assert_eq!(today, (day as f64 * 0.0417).round() as usize);
            match hour.class(u) {
                Class::Heavy => assert!((3..=5).contains(&today), "{u}: {today}"),
                Class::Light => assert_eq!(today, 0),
            }
        }
        // By default the last 2 hours' share is live, the rest digested:
        // the user's first events live, the next ones digested, none twice.
        let split = mix(&["--users", "200"]);
        let (live, digested) = (split.today_sums(DAY), split.digested_sums(DAY));
        for u in 0..200 {
            let day = full.events_on(u, DAY);
            let (l, d) = (live[u + 1] - live[u], digested[u + 1] - digested[u]);
            let expected = (day as f64 * (2.0 / 24.0)).round() as usize;
            assert_eq!((l + d, l), (day, expected), "{u}");
            let mut seen = std::collections::BTreeSet::new();
            for i in live[u]..live[u + 1] {
                let e = split.day_event(&live, DAY, i, 1000);
                assert!(seen.insert(format!("{e:?}")), "{u}");
            }
            for i in digested[u]..digested[u + 1] {
                let e = split.digested_event(&digested, DAY, i, 1000);
                assert_eq!(e.user_token, format!("user{u}"));
                assert!(
                    seen.insert(format!("{e:?}")),
                    "{u}: an event live and digested"
                );
            }
            assert_eq!(seen.len(), day);
        }
        // Refused before anything starts, naming the flag.
        let refused = |flags: &[&str]| {
            let cli = Cli::parse_from(std::iter::once("bench").chain(flags.iter().copied()));
            super::super::run(cli.args, &crate::BenchBackend::default())
                .expect_err("refused")
                .to_string()
        };
        for bad in ["1.5", "NaN"] {
            assert_eq!(
                refused(&["--today-share", bad]),
                "--today-share must be within 0 and 1"
            );
        }
        for bad in ["25", "-0.5", "NaN"] {
            assert_eq!(
                refused(&[&format!("--today-live-hours={bad}")]),
                "--today-live-hours must be within 0 and 24"
            );
        }
        assert_eq!(
            refused(&["--today-share", "0.5", "--history-days", "0"]),
            "--today-share needs history (--history-days 1 or more)"
        );
    }

    #[test]
    fn live_traffic_is_the_users_day_then_visitors_all_today() {
        let m = Arc::new(mix(&[
            "--users",
            "20",
            "--visitors",
            "7",
            "--today-live-hours",
            "24",
        ]));
        let now = DAY * DAY_MILLIS + 5 * 3_600_000;
        let live = Live::new(Arc::clone(&m), now, 100);
        let today = live.user_events();
        let mut events = Vec::new();
        while events.len() < today + 300 {
            let body: Value = serde_json::from_str(&live.body()).unwrap();
            events.extend(body["events"].as_array().unwrap().iter().cloned());
        }
        let mut per_user = vec![0; 20];
        for (i, e) in events.iter().enumerate() {
            let token = e["userToken"].as_str().unwrap();
            let ts = e["timestamp"].as_i64().unwrap();
            assert!((DAY * DAY_MILLIS..=now).contains(&ts), "{e}");
            assert_eq!(e["filters"].as_array().unwrap().len(), 4, "{e}");
            match token.strip_prefix("user") {
                Some(u) if i < today => per_user[u.parse::<usize>().unwrap()] += 1,
                _ => {
                    assert!(i >= today, "{i}: {e}");
                    let v: usize = token.strip_prefix("visitor").unwrap().parse().unwrap();
                    assert!(v < 7, "{e}");
                }
            }
        }
        let expected: Vec<usize> = (0..20).map(|u| m.events_on(u, DAY)).collect();
        assert_eq!(per_user, expected);
    }
}
