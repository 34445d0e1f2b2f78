//! The key benchmark behind `affinity bench geo`: load the same points
//! under the three key kinds, run the same area + time queries, and record
//! what each read ([`run`]); [`report`] turns the figures into Markdown and
//! an SVG chart. Timings depend on the machine; rows scanned and ranges do
//! not.

pub mod data;
pub mod report;

use std::time::{Duration, Instant};

use affinity_model::Store;

use crate::error::Result;
use crate::layout::{KeyKind, PointLayout};
use crate::load::BATCH;
use crate::table::{PointTable, QueryStats};

pub use data::{generated, queries, read_csv, BenchQuery, Dataset, Window, SIZES};

/// Settings of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub salts: u32,
    /// Position ranges per (salt, bin).
    pub budget: usize,
    /// Times each query runs (latency percentiles are over all runs).
    pub repeats: usize,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            salts: 1,
            budget: crate::table::DEFAULT_BUDGET,
            repeats: 3,
        }
    }
}

/// One query's figures under one key.
#[derive(Debug, Clone)]
pub struct QueryRun {
    pub query: BenchQuery,
    /// Stats of the first run.
    pub stats: QueryStats,
    /// Wall time of each run: plan, scan, decode, filter.
    pub latencies: Vec<Duration>,
    /// Planning time of each run.
    pub plan_times: Vec<Duration>,
}

/// One key kind's figures on one data set.
#[derive(Debug, Clone)]
pub struct KeyRun {
    pub kind: KeyKind,
    pub points: u64,
    pub load_time: Duration,
    pub queries: Vec<QueryRun>,
}

impl KeyRun {
    pub fn load_rate(&self) -> f64 {
        self.points as f64 / self.load_time.as_secs_f64().max(1e-9)
    }
}

/// Load `ds` under every key of `kinds` into `store` (tables
/// `geo_{dataset}_{kind}`, replaced when present) and run its queries;
/// `progress` gets one line per step.
pub fn run(
    store: &dyn Store,
    ds: &Dataset,
    kinds: &[KeyKind],
    settings: &Settings,
    mut progress: impl FnMut(&str),
) -> Result<Vec<KeyRun>> {
    let queries = queries(ds)?;
    let mut out = Vec::new();
    for &kind in kinds {
        let name = format!("geo_{}_{}", ds.name, kind.name());
        if store.list_tables()?.contains(&name) {
            store.delete_table(&name)?;
        }
        let layout = PointLayout::new(kind, ds.bin, settings.salts)?;
        let table = PointTable::create(store, &name, layout)?;
        let started = Instant::now();
        for chunk in ds.points.chunks(BATCH) {
            table.write(chunk)?;
        }
        let load_time = started.elapsed();
        progress(&format!(
            "{}: loaded {} points under {} in {:.1} s",
            ds.name,
            ds.points.len(),
            kind.label(),
            load_time.as_secs_f64()
        ));
        let mut runs = Vec::with_capacity(queries.len());
        for q in &queries {
            let mut latencies = Vec::with_capacity(settings.repeats);
            let mut plan_times = Vec::with_capacity(settings.repeats);
            let mut first = None;
            for _ in 0..settings.repeats.max(1) {
                let started = Instant::now();
                let stats = table.scan(&q.query, settings.budget, |_| {})?;
                latencies.push(started.elapsed());
                plan_times.push(stats.plan_time);
                first.get_or_insert(stats);
            }
            runs.push(QueryRun {
                query: q.clone(),
                stats: first.unwrap_or_default(),
                latencies,
                plan_times,
            });
        }
        progress(&format!(
            "{}: ran {} queries under {}",
            ds.name,
            queries.len(),
            kind.label()
        ));
        out.push(KeyRun {
            kind,
            points: ds.points.len() as u64,
            load_time,
            queries: runs,
        });
    }
    Ok(out)
}
