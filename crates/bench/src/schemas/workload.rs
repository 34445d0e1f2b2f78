//! Deterministic, seeded benchmark workloads: the users of an application
//! and their events over a generated catalog, as [`ScoredEvent`]s ready for
//! either events schema.
//!
//! - **Application profiles** ([`AppProfile`]) share the total number of
//!   events and differ in how they spread over users: `few-heavy` (about
//!   5,000 events per user), `balanced` (about 100) and `many-light`
//!   (about 5). Each user gets between half and one and a half times the
//!   mean; the last user takes what is left, so the total is exact.
//! - **Catalog**: [`OBJECTS`] objects, each with all [`FACETS`] (20), some
//!   high-cardinality (`seller`: 5,000 values, `tags`: 2,000), some
//!   multi-valued (`color`, `size`, `material`, `shipping`, `tags`). Value
//!   popularity is skewed toward the first values.
//! - **Events**: six believable names over the three types (70% views, 20%
//!   clicks, 10% conversions), each on one object (an `Order Completed` on
//!   one to three), a user returning mostly to objects near a "home" of
//!   their own; times spread over the last 89 days (inside the default
//!   90-day retention, so nothing expires during a run); each carries its
//!   objects' facet counts.
//! - **Strategies** ([`strategy`]): the same eventsScoring, scoring the
//!   first 1, 3, 10 or 20 facets of [`FACETS`].
//!
//! Everything derives from the seed with splitmix64: the same seed gives
//! the same catalog, users and events, on every machine.

use affinity_engine::scoring::{FacetCounts, ScoredEvent};
use affinity_engine::DAY_MILLIS;
use affinity_engine::{EventType, Strategy};
use anyhow::bail;

/// Objects in the generated catalog.
pub const OBJECTS: usize = 20_000;
/// Events fall within this many days before `now`.
pub const SPREAD_DAYS: i64 = 89;

/// Deterministic pseudo-random numbers (splitmix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`0` when `n == 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// In `0..n`, skewed toward 0 (`n * u^3`): a few popular values.
    pub fn skewed(&mut self, n: u64) -> u64 {
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        ((u * u * u * n as f64) as u64).min(n.saturating_sub(1))
    }
}

/// A number derived from two (a seed and an index).
fn mix(a: u64, b: u64) -> u64 {
    Rng::new(a ^ b.wrapping_mul(0xD6E8_FEB8_6659_FD93)).next_u64()
}

/// How an application's events spread over its users.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AppProfile {
    /// A few users sending very many events (about 5,000 each).
    FewHeavy,
    /// About 100 events per user.
    Balanced,
    /// Very many users sending a few events (about 5 each).
    ManyLight,
}

impl AppProfile {
    pub const ALL: [AppProfile; 3] = [
        AppProfile::FewHeavy,
        AppProfile::Balanced,
        AppProfile::ManyLight,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AppProfile::FewHeavy => "few-heavy",
            AppProfile::Balanced => "balanced",
            AppProfile::ManyLight => "many-light",
        }
    }

    pub fn parse(text: &str) -> anyhow::Result<AppProfile> {
        match AppProfile::ALL.into_iter().find(|p| p.as_str() == text) {
            Some(profile) => Ok(profile),
            None => bail!(
                "invalid application profile: {text:?} is not few-heavy, balanced or many-light"
            ),
        }
    }

    /// The mean number of events per user.
    pub fn mean_events_per_user(self) -> u32 {
        match self {
            AppProfile::FewHeavy => 5_000,
            AppProfile::Balanced => 100,
            AppProfile::ManyLight => 5,
        }
    }
}

/// Where a facet's value names come from.
#[derive(Debug, Clone, Copy)]
enum Names {
    /// A fixed list.
    Words(&'static [&'static str]),
    /// `n` generated names, each followed by a suffix.
    Generated(u32, &'static str),
}

/// One facet of the catalog.
#[derive(Debug, Clone, Copy)]
pub struct FacetSpec {
    pub name: &'static str,
    /// Values per object: `min..=max`.
    pub min_values: u32,
    pub max_values: u32,
    names: Names,
}

const fn facet(name: &'static str, min: u32, max: u32, names: Names) -> FacetSpec {
    FacetSpec {
        name,
        min_values: min,
        max_values: max,
        names,
    }
}

use Names::{Generated, Words};

/// The catalog's facets, in the order strategies take them.
#[rustfmt::skip]
pub const FACETS: [FacetSpec; 20] = [
    facet("brand", 1, 1, Generated(400, "")),
    facet("category", 1, 1, Words(&["Shoes", "Dresses", "Shirts", "Jackets", "Jeans",
        "Bags", "Watches", "Jewelry", "Sunglasses", "Hats", "Skirts", "Sweaters", "Coats",
        "Shorts", "Swimwear", "Socks", "Underwear", "Sportswear", "Sleepwear", "Belts",
        "Scarves", "Gloves", "Boots", "Sandals"])),
    facet("color", 1, 3, Words(&["Black", "White", "Navy", "Grey", "Beige", "Red", "Blue",
        "Green", "Brown", "Pink", "Olive", "Burgundy", "Yellow", "Orange", "Purple", "Teal",
        "Cream", "Silver", "Gold", "Khaki"])),
    facet("size", 1, 4, Words(&["XXS", "XS", "S", "M", "L", "XL", "XXL", "36", "38", "40",
        "42", "44", "46", "One Size"])),
    facet("material", 1, 2, Words(&["Cotton", "Polyester", "Wool", "Linen", "Silk",
        "Leather", "Denim", "Cashmere", "Nylon", "Viscose", "Elastane", "Suede", "Fleece",
        "Canvas", "Rubber", "Bamboo", "Acrylic", "Down"])),
    facet("price_range", 1, 1, Words(&["0-10", "10-25", "25-50", "50-100", "100-250",
        "250-500", "500-1000", "1000+"])),
    facet("seller", 1, 1, Generated(5_000, " Store")),
    facet("gender", 1, 1, Words(&["women", "men", "unisex", "kids"])),
    facet("age_group", 1, 1, Words(&["baby", "kids", "teen", "adult", "senior"])),
    facet("season", 1, 1, Words(&["spring", "summer", "autumn", "winter", "all-season"])),
    facet("style", 1, 1, Words(&["casual", "formal", "sport", "vintage", "minimalist",
        "classic", "outdoor", "business", "streetwear", "bohemian", "luxury", "eco", "retro",
        "modern", "preppy"])),
    facet("pattern", 1, 1, Words(&["solid", "striped", "checked", "floral", "printed",
        "dotted", "camo", "geometric", "paisley", "abstract"])),
    facet("rating", 1, 1, Words(&["1", "2", "3", "4", "5"])),
    facet("shipping", 1, 2, Words(&["standard", "express", "same-day", "pickup",
        "free shipping"])),
    facet("country_of_origin", 1, 1, Words(&["Italy", "Portugal", "China", "Vietnam",
        "Bangladesh", "Turkey", "India", "France", "Spain", "USA", "Germany", "Japan",
        "Mexico", "Morocco", "Romania", "Poland", "Cambodia", "Indonesia", "Peru", "UK"])),
    facet("collection", 1, 1, Generated(1_000, " collection")),
    facet("tags", 2, 6, Generated(2_000, "")),
    facet("discount", 1, 1, Words(&["none", "5%", "10%", "20%", "30%", "50%"])),
    facet("availability", 1, 1, Words(&["in stock", "low stock", "preorder", "backorder"])),
    facet("fit", 1, 1, Words(&["slim", "regular", "relaxed", "oversized", "tailored",
        "skinny", "loose"])),
];

const SYLLABLES: [&str; 20] = [
    "ka", "lo", "mi", "ra", "ven", "tor", "sa", "di", "no", "bel", "fi", "ur", "zen", "pa", "qui",
    "ro", "mar", "te", "vo", "lin",
];

/// A pronounceable name for index `i` (unique below 8,000).
fn generated_name(i: u32, suffix: &str) -> String {
    let n = SYLLABLES.len() as u32;
    let mut name = String::new();
    for k in [i % n, i / n % n, i / (n * n) % n] {
        name.push_str(SYLLABLES[k as usize]);
    }
    let mut chars = name.chars();
    let first = chars.next().map(|c| c.to_ascii_uppercase());
    first.into_iter().chain(chars).collect::<String>() + suffix
}

/// The event kinds, their share of events (percent) and their score in
/// every strategy of [`strategy`].
pub const EVENT_KINDS: [(EventType, &str, u64, u32); 6] = [
    (EventType::View, "Product Viewed", 55, 10),
    (EventType::View, "Category Page Viewed", 15, 5),
    (EventType::Click, "Product Clicked", 14, 30),
    (EventType::Click, "Search Result Clicked", 6, 20),
    (EventType::Conversion, "Product Added to Cart", 7, 60),
    (EventType::Conversion, "Order Completed", 3, 100),
];

/// The event kind at percentile `pick` (0..100) of [`EVENT_KINDS`].
fn pick_kind(mut pick: u64) -> (EventType, &'static str) {
    for (ty, name, share, _) in EVENT_KINDS {
        if pick < share {
            return (ty, name);
        }
        pick -= share;
    }
    (EVENT_KINDS[0].0, EVENT_KINDS[0].1)
}

/// A strategy scoring the first `facets_used` facets of [`FACETS`] (facet
/// scores 100, 96, 92, ...), with the same eventsScoring every time.
pub fn strategy(facets_used: usize) -> anyhow::Result<Strategy> {
    let events: Vec<serde_json::Value> = EVENT_KINDS
        .iter()
        .map(|(ty, name, _, score)| {
            serde_json::json!({"eventType": ty.as_str(), "eventName": name, "score": score})
        })
        .collect();
    let facets: Vec<serde_json::Value> = FACETS
        .iter()
        .take(facets_used)
        .enumerate()
        .map(|(i, f)| serde_json::json!({"facetName": f.name, "score": 100 - 4 * i}))
        .collect();
    Ok(Strategy::from_json(
        &serde_json::json!({"eventsScoring": events,
        "facetsScoring": facets, "personalizationImpact": 75}),
    )?)
}

/// `1..=20`, `half` (10) or `all` (20): how many facets a strategy uses.
pub fn parse_facets_used(text: &str) -> anyhow::Result<usize> {
    let n = match text {
        "all" => FACETS.len(),
        "half" => FACETS.len() / 2,
        other => other.parse().unwrap_or(0),
    };
    if !(1..=FACETS.len()).contains(&n) {
        bail!(
            "invalid facets used: {text:?} is not 1..={}, half or all",
            FACETS.len()
        );
    }
    Ok(n)
}

/// One generated event and whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedEvent {
    /// The user's index (its token is [`Workload::user_token`]).
    pub user: usize,
    /// Unique within the workload; [`Workload::key_content`] turns it into
    /// the bytes that make the event's key unique.
    pub seq: u64,
    pub event: ScoredEvent,
}

/// A generated application: catalog, users and events.
#[derive(Debug, Clone)]
pub struct Workload {
    pub seed: u64,
    /// Events end one minute before this time.
    pub now_millis: i64,
    /// `facet -> value names`.
    values: Vec<Vec<String>>,
    /// Per object, `(facet index, value index)` pairs.
    objects: Vec<Vec<(u8, u32)>>,
    /// Events of each user.
    user_sizes: Vec<u32>,
}

impl Workload {
    /// `events` events of `profile`, from `seed`.
    pub fn new(profile: AppProfile, events: u64, seed: u64, now_millis: i64) -> Workload {
        let values: Vec<Vec<String>> = FACETS
            .iter()
            .map(|f| match f.names {
                Words(words) => words.iter().map(|w| w.to_string()).collect(),
                Generated(n, suffix) => (0..n).map(|i| generated_name(i, suffix)).collect(),
            })
            .collect();
        let mut rng = Rng::new(mix(seed, 1));
        let objects = (0..OBJECTS)
            .map(|_| {
                let mut pairs = Vec::new();
                for (f, spec) in FACETS.iter().enumerate() {
                    let n = spec.min_values
                        + rng.below(u64::from(spec.max_values - spec.min_values + 1)) as u32;
                    let card = values[f].len() as u64;
                    for _ in 0..n {
                        let v = rng.skewed(card) as u32;
                        if !pairs.contains(&(f as u8, v)) {
                            pairs.push((f as u8, v));
                        }
                    }
                }
                pairs
            })
            .collect();
        let mean = u64::from(profile.mean_events_per_user());
        let mut rng = Rng::new(mix(seed, 2));
        let mut user_sizes = Vec::new();
        let mut left = events;
        while left > 0 {
            // Uniform over mean +- mean/2.
            let size = (mean - mean / 2 + rng.below(2 * (mean / 2) + 1)).clamp(1, left);
            user_sizes.push(size as u32);
            left -= size;
        }
        Workload {
            seed,
            now_millis,
            values,
            objects,
            user_sizes,
        }
    }

    pub fn events(&self) -> u64 {
        self.user_sizes.iter().map(|n| u64::from(*n)).sum()
    }

    pub fn users(&self) -> usize {
        self.user_sizes.len()
    }

    /// The token of user `user`.
    pub fn user_token(&self, user: usize) -> String {
        format!("user{user:08}")
    }

    /// The bytes that make event `seq`'s row key unique.
    pub fn key_content(&self, seq: u64) -> [u8; 8] {
        mix(self.seed, seq).to_be_bytes()
    }

    fn add_object(&self, counts: &mut FacetCounts, object: usize) {
        for &(f, v) in &self.objects[object % self.objects.len()] {
            let f = usize::from(f);
            counts.add(FACETS[f].name, &self.values[f][v as usize], 1);
        }
    }

    /// The events of one user, in generation order (not time order).
    pub fn user_events(&self, user: usize) -> Vec<GeneratedEvent> {
        let Some(&size) = self.user_sizes.get(user) else {
            return Vec::new();
        };
        let mut rng = Rng::new(mix(self.seed, 1_000 + user as u64));
        let objects = self.objects.len() as u64;
        let home = rng.below(objects);
        let spread = (SPREAD_DAYS * DAY_MILLIS) as u64;
        (0..size)
            .map(|i| {
                let (ty, name) = pick_kind(rng.below(100));
                let n_objects = if name == "Order Completed" {
                    1 + rng.below(3)
                } else {
                    1
                };
                let mut counts = FacetCounts::default();
                for _ in 0..n_objects {
                    let object = if rng.below(10) < 6 {
                        (home + rng.skewed(200)) % objects
                    } else {
                        rng.skewed(objects)
                    };
                    self.add_object(&mut counts, object as usize);
                }
                let timestamp_millis = self.now_millis - 60_000 - rng.below(spread) as i64;
                GeneratedEvent {
                    user,
                    seq: ((user as u64) << 32) | u64::from(i),
                    event: ScoredEvent {
                        event_type: ty,
                        event_name: name.to_string(),
                        timestamp_millis,
                        counts,
                    },
                }
            })
            .collect()
    }

    /// Every event, user after user (users in token order).
    pub fn iter(&self) -> impl Iterator<Item = GeneratedEvent> + '_ {
        (0..self.users()).flat_map(move |u| self.user_events(u))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_780_000_000_000;

    #[test]
    fn same_seed_same_events_other_seed_other_events() {
        let a: Vec<_> = Workload::new(AppProfile::Balanced, 3_000, 7, NOW)
            .iter()
            .collect();
        let b: Vec<_> = Workload::new(AppProfile::Balanced, 3_000, 7, NOW)
            .iter()
            .collect();
        let c: Vec<_> = Workload::new(AppProfile::Balanced, 3_000, 8, NOW)
            .iter()
            .collect();
        assert_eq!(a.len(), 3_000);
        assert_eq!(a, b);
        assert_ne!(a, c);
        let w = Workload::new(AppProfile::Balanced, 3_000, 7, NOW);
        assert_eq!(w.key_content(5), w.key_content(5));
        assert_ne!(w.key_content(5), w.key_content(6));
    }

    #[test]
    fn profiles_share_the_total_and_differ_in_users() {
        let n = 200_000;
        let users: Vec<usize> = AppProfile::ALL
            .iter()
            .map(|p| {
                let w = Workload::new(*p, n, 1, NOW);
                assert_eq!(w.events(), n, "{}", p.as_str());
                let mean = n as f64 / w.users() as f64;
                let expected = f64::from(p.mean_events_per_user());
                assert!(
                    (mean / expected - 1.0).abs() < 0.1,
                    "{}: mean {mean}",
                    p.as_str()
                );
                w.users()
            })
            .collect();
        assert!(
            users[0] < 60 && users[0] >= 30,
            "few-heavy users {}",
            users[0]
        );
        assert!(users[0] < users[1] && users[1] < users[2], "{users:?}");
        assert_eq!(
            AppProfile::parse("many-light").unwrap(),
            AppProfile::ManyLight
        );
        assert!(AppProfile::parse("heavy").is_err());
    }

    #[test]
    fn events_carry_every_facet_within_the_window() {
        let w = Workload::new(AppProfile::ManyLight, 5_000, 3, NOW);
        let mut kinds = std::collections::BTreeSet::new();
        let mut multi = false;
        let mut sellers = std::collections::BTreeSet::new();
        for e in w.iter() {
            let ev = &e.event;
            assert_eq!(ev.counts.facet_count(), FACETS.len());
            assert!(ev.timestamp_millis < NOW && ev.timestamp_millis > NOW - 90 * DAY_MILLIS);
            multi |= ev.counts.iter().filter(|(f, _, _)| *f == "tags").count() > 1;
            sellers.extend(
                ev.counts
                    .iter()
                    .filter(|(f, _, _)| *f == "seller")
                    .map(|(_, v, _)| v.to_string()),
            );
            kinds.insert(ev.event_name.clone());
        }
        assert!(multi, "tags are multi-valued");
        assert!(
            sellers.len() > 500,
            "seller is high-cardinality: {}",
            sellers.len()
        );
        assert_eq!(kinds.len(), EVENT_KINDS.len());
    }

    #[test]
    fn strategies_take_the_first_facets_with_the_same_event_scores() {
        let all = strategy(parse_facets_used("all").unwrap()).unwrap();
        assert_eq!(all.facets.len(), 20);
        for (text, n) in [("1", 1), ("3", 3), ("half", 10)] {
            let s = strategy(parse_facets_used(text).unwrap()).unwrap();
            assert_eq!(s.facets.len(), n);
            assert_eq!(s.events, all.events);
            assert!(s.facets.contains_key("brand"));
        }
        assert!(parse_facets_used("0").is_err());
        assert!(parse_facets_used("21").is_err());
        assert_eq!(generated_name(0, " Store"), "Kakaka Store");
    }
}
