//! Days of history, for the benchmarks that need a store as weeks of
//! traffic leave it (`bench http` with `--history-days`, `bench engine
//! maintain`).
//!
//! Maintenance folds only *closed arrival days* (see
//! `docs/design/profiles.md`), and an event ingested on the real clock
//! arrives today whatever its timestamp. So a past day's events are
//! ingested by a second engine on the same store whose clock shows that
//! day ([`DayClock`]): their profile state is stamped with it, exactly as
//! if they had arrived then. Maintenance then runs on an engine with the
//! real clock.
//!
//! Also here: the four facets both workloads draw filters from, the events
//! built from one hash, and what the rollups of an application hold once
//! maintenance ran ([`folded`]).

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;

use affinity_engine::rollup::{totals_sum, FACET_TOTALS_FAMILY, TOTALS_FAMILY};
use affinity_engine::{App, Engine, Event, EventType, DAY_MILLIS};
use affinity_model::{ReadRowsRequest, RowFilter, Store};

/// The facets of every event: name, value prefix and number of values.
pub const FACETS: [(&str, &str, u64); 4] = [
    ("brand", "b", 300),
    ("category", "k", 60),
    ("color", "c", 30),
    ("size", "s", 20),
];

/// An engine on `store` whose clock is moved from day to day.
pub struct DayClock {
    at: Arc<AtomicI64>,
    pub engine: Engine,
}

impl DayClock {
    pub fn open(store: Arc<dyn Store>) -> affinity_engine::Result<DayClock> {
        let at = Arc::new(AtomicI64::new(0));
        let clock = Arc::clone(&at);
        let engine = Engine::with_clock(store, Arc::new(move || clock.load(Ordering::Relaxed)))?;
        Ok(DayClock { at, engine })
    }

    /// Set the clock to the last minute of `day`: every event of the day
    /// is then in its past, and what it writes arrives on that day.
    pub fn set_day(&self, day: i64) {
        self.at.store(day_end(day), Ordering::Relaxed);
    }

    /// Set the clock to `millis`.
    pub fn set_at(&self, millis: i64) {
        self.at.store(millis, Ordering::Relaxed);
    }

    /// Set the clock to an hour and a half into `day`: the day before is
    /// closed, the day itself is not.
    pub fn set_after_close(&self, day: i64) {
        self.at
            .store(day * DAY_MILLIS + 5_400_000, Ordering::Relaxed);
    }
}

/// Ingest events `0 .. total` (`event(i)` builds number `i`) into `app`
/// in batches of 1000 from `threads` threads, each building its own
/// batches; returns the events stored.
pub fn ingest_all(
    engine: &Engine,
    app: &str,
    total: usize,
    threads: usize,
    event: impl Fn(usize) -> Event + Sync,
) -> anyhow::Result<usize> {
    const BATCH: usize = 1000;
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                s.spawn(|| -> anyhow::Result<usize> {
                    let mut stored = 0;
                    let mut batch = Vec::with_capacity(BATCH);
                    loop {
                        let start = next.fetch_add(BATCH, Ordering::Relaxed);
                        if start >= total {
                            return Ok(stored);
                        }
                        batch.clear();
                        batch.extend((start..total.min(start + BATCH)).map(&event));
                        stored += engine.ingest(app, &batch)?.stored;
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("an ingest thread panicked")))
            })
            .sum()
    })
}

/// The last minute of `day`, in milliseconds.
pub fn day_end(day: i64) -> i64 {
    day * DAY_MILLIS + DAY_MILLIS - 60_000
}

/// Deterministic pseudo-random bits from a key (splitmix64 over its
/// parts).
pub fn draw(seed: u64, parts: &[u64]) -> u64 {
    parts.iter().fold(splitmix(seed), |h, p| splitmix(h ^ *p))
}

pub fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What one hash makes of an event: its kind and name, and one value of
/// each facet (uniform over the facet's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drawn {
    pub kind: EventType,
    pub name: &'static str,
    pub values: [u64; 4],
}

impl Drawn {
    /// One conversion in ten, three clicks, six views, as the live
    /// traffic of `bench http` always had.
    pub fn from_hash(h: u64) -> Drawn {
        let (kind, name) = match h % 10 {
            0 => (EventType::Conversion, "Bought"),
            1..=3 => (EventType::Click, "Clicked"),
            _ => (EventType::View, "Viewed"),
        };
        let mut rest = h / 10;
        let values = FACETS.map(|(_, _, n)| {
            let v = rest % n;
            rest /= n;
            v
        });
        Drawn { kind, name, values }
    }

    /// The filters as `(facet, value)` texts, each value after
    /// `value_prefix` (`bench http --value-prefix`; empty elsewhere).
    pub fn filters<'s>(
        &'s self,
        value_prefix: &'s str,
    ) -> impl Iterator<Item = (&'static str, String)> + 's {
        FACETS
            .iter()
            .zip(self.values)
            .map(move |((facet, prefix, _), v)| (*facet, format!("{value_prefix}{prefix}{v}")))
    }

    /// The event, built as `Event::from_json` would from its JSON (the
    /// validation is not what these benchmarks time), its values after
    /// `value_prefix`.
    pub fn event(&self, user: String, timestamp_millis: i64, value_prefix: &str) -> Event {
        Event {
            event_type: self.kind,
            event_subtype: None,
            event_name: self.name.to_string(),
            index: "products".to_string(),
            user_token: user,
            authenticated_user_token: None,
            timestamp_millis,
            object_ids: Vec::new(),
            filters: self
                .filters(value_prefix)
                .map(|(f, v)| (f.to_string(), v))
                .collect(),
            positions: Vec::new(),
            query_id: None,
            object_data: None,
            value: None,
            currency: None,
        }
    }
}

/// What the rollups of an application hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Folded {
    /// Rollup rows with counters.
    pub rollups: u64,
    /// Events counted in them: the sum of their counters over the four
    /// filters each event has.
    pub events: i64,
}

/// Scan the rollups' counters (families `f` and `r`, only rollup rows
/// have them).
pub fn folded(app: &App) -> anyhow::Result<Folded> {
    let request = ReadRowsRequest::all().with_filter(RowFilter::interleave(vec![
        RowFilter::exact_family(FACET_TOTALS_FAMILY),
        RowFilter::exact_family(TOTALS_FAMILY),
    ]));
    let (mut rollups, mut sum) = (0u64, 0i64);
    let mut bad = None;
    app.profiles.visit_rows(&request, &mut |row| {
        rollups += 1;
        for cell in row.cells {
            match totals_sum(cell.family, cell.qualifier, cell.value) {
                Ok(n) => sum += n,
                Err(e) => bad = Some(format!("{:?}: {e}", String::from_utf8_lossy(row.key))),
            }
        }
        Ok(true)
    })?;
    if let Some(key) = bad {
        anyhow::bail!("rollup row {key}");
    }
    Ok(Folded {
        rollups,
        events: sum / FACETS.len() as i64,
    })
}
