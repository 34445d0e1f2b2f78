//! Loading the same points under each key kind and running the same area +
//! time queries ([`measure`]), recording what each read; [`run_report`]
//! does it for every data set and writes the report.

use std::path::Path;
use std::time::{Duration, Instant};

use affinity_geo::load::BATCH;
use affinity_geo::{KeyKind, PointLayout, PointTable, QueryStats};
use affinity_model::Store;
use anyhow::Context;

use super::datasets::{queries, BenchQuery, Dataset};
use super::report;

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
            budget: affinity_geo::table::DEFAULT_BUDGET,
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
    /// Planning time of each run (includes any preemption of the thread).
    pub plan_times: Vec<Duration>,
    /// Fastest of [`PLAN_RUNS`] plannings alone: the planner's own cost on
    /// a shared machine.
    pub plan_best: Duration,
}

/// Plannings per query for [`QueryRun::plan_best`].
pub const PLAN_RUNS: usize = 5;

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
pub fn measure(
    store: &dyn Store,
    ds: &Dataset,
    kinds: &[KeyKind],
    settings: &Settings,
    mut progress: impl FnMut(&str),
) -> anyhow::Result<Vec<KeyRun>> {
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
            let mut plan_best = Duration::MAX;
            for _ in 0..PLAN_RUNS {
                let started = Instant::now();
                std::hint::black_box(layout.plan(&q.query, settings.budget)?);
                plan_best = plan_best.min(started.elapsed());
            }
            runs.push(QueryRun {
                query: q.clone(),
                stats: first.unwrap_or_default(),
                latencies,
                plan_times,
                plan_best,
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

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Run every data set under the three keys and write `geo.md` and one
/// `geo-{dataset}.svg` chart each into `out` (created if missing); returns
/// the Markdown.
pub fn run_report(
    store: &dyn Store,
    datasets: &[Dataset],
    settings: &Settings,
    out: &Path,
    mut progress: impl FnMut(&str),
) -> anyhow::Result<String> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut md = format!(
        "# Location + time keys: Hilbert, Z-order and lat#long\n\n\
         `affinity bench geo`: the same points under three keys \
         (`[salt][time bin][position][time within bin][id]`, position = Hilbert index, \
         Z-order index or the `lat#long` string) in one store; {} salt(s), at most {} \
         position ranges per (salt, bin); each query run {} times. Rows scanned = rows \
         the planned ranges returned; rows returned = points inside the box and time \
         range after the exact filter (the same for every key). Windows: 10 min (less \
         than a bin), the centre's time bin, the centre's UTC day. Latency = plan + scan \
         + decode + filter.\n\n\
         Reading the figures: the key puts the position before the time within the bin, \
         so a 10-minute window reads its whole hour bin under every key (about 6x); \
         from one bin up, the curve keys read little more than they return, while \
         `lat#long` reads whole latitude bands (Portland's band holds Milan and \
         Venice) once a box has more latitude rows (1e-5 degree) than the range budget.\n\n",
        settings.salts, settings.budget, settings.repeats
    );
    for ds in datasets {
        progress(&format!("{}: {} points", ds.name, ds.points.len()));
        let runs = measure(store, ds, &KeyKind::ALL, settings, &mut progress)?;
        md.push_str(&report::markdown(ds, &runs));
        let svg_name = format!("geo-{}.svg", ds.name);
        write(&out.join(&svg_name), &report::svg(ds, &runs))?;
        md.push_str(&format!("\n![{}]({svg_name})\n\n", ds.name));
    }
    write(&out.join("geo.md"), &md)?;
    Ok(md)
}

#[cfg(test)]
mod tests {
    use affinity_model::MemoryStore;

    use super::*;
    use crate::geo::datasets::generated;
    use crate::geo::report::summarize;

    #[test]
    fn every_key_returns_the_same_points_and_reads_at_least_as_many() {
        let ds = generated(3_000, 5);
        let settings = Settings {
            repeats: 2,
            ..Settings::default()
        };
        let mut steps = 0;
        let runs = measure(&MemoryStore::new(), &ds, &KeyKind::ALL, &settings, |_| {
            steps += 1
        })
        .unwrap();
        assert_eq!(
            steps,
            2 * KeyKind::ALL.len(),
            "a load and a query line per key"
        );
        assert_eq!(runs.len(), KeyKind::ALL.len());
        let queries = queries(&ds).unwrap().len();
        for run in &runs {
            assert_eq!(run.points, 3_000);
            assert_eq!(run.queries.len(), queries);
            for q in &run.queries {
                assert_eq!(q.latencies.len(), 2);
                assert!(q.stats.rows_scanned >= q.stats.rows_returned, "{q:?}");
                assert!(q.stats.ranges_per_bin <= settings.budget, "{q:?}");
            }
        }
        for i in 0..queries {
            let returned: Vec<u64> = runs
                .iter()
                .map(|r| r.queries[i].stats.rows_returned)
                .collect();
            assert!(
                returned.windows(2).all(|w| w[0] == w[1]),
                "query {i}: {returned:?}"
            );
        }
        let found: u64 = runs[0].queries.iter().map(|q| q.stats.rows_returned).sum();
        assert!(found > 0);
        // The report's classes add up to the same totals under every key.
        let summaries = summarize(&runs);
        for run in &runs {
            let returned: u64 = summaries
                .iter()
                .filter(|s| s.kind == run.kind)
                .map(|s| s.returned)
                .sum();
            assert_eq!(returned, found, "{:?}", run.kind);
        }
    }
}
