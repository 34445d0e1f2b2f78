//! The benchmark's figures as Markdown and as an SVG bar chart.

use std::fmt::Write;
use std::time::Duration;

use affinity_geo::KeyKind;

use super::datasets::{Dataset, Window, SIZES};
use super::measure::KeyRun;
use crate::svg::bars::{log_bar_chart, Bars};

/// Aggregated figures of one (key, box size, window) class of queries.
#[derive(Debug, Clone)]
pub struct Summary {
    pub kind: KeyKind,
    pub size: usize,
    pub window: Window,
    pub queries: usize,
    pub scanned: u64,
    pub returned: u64,
    pub mean_ranges: f64,
    pub max_ranges_per_bin: usize,
    pub latency_p50: Duration,
    pub latency_p99: Duration,
    /// p99 over the class's queries of each one's best planning time.
    pub plan_p99: Duration,
}

impl Summary {
    /// Rows scanned per row returned (`None` when nothing was returned).
    pub fn ratio(&self) -> Option<f64> {
        (self.returned > 0).then(|| self.scanned as f64 / self.returned as f64)
    }
}

/// The value at quantile `q` of samples (sorted here).
pub fn quantile(samples: &mut [Duration], q: f64) -> Duration {
    samples.sort_unstable();
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples[((samples.len() - 1) as f64 * q).round() as usize]
}

/// One summary per (key, size, window) with queries.
pub fn summarize(runs: &[KeyRun]) -> Vec<Summary> {
    let mut out = Vec::new();
    for run in runs {
        for window in Window::ALL {
            for size in 0..SIZES.len() {
                let qs: Vec<_> = run
                    .queries
                    .iter()
                    .filter(|q| q.query.size == size && q.query.window == window)
                    .collect();
                if qs.is_empty() {
                    continue;
                }
                let mut lat: Vec<Duration> = qs.iter().flat_map(|q| q.latencies.clone()).collect();
                let mut plan: Vec<Duration> = qs.iter().map(|q| q.plan_best).collect();
                out.push(Summary {
                    kind: run.kind,
                    size,
                    window,
                    queries: qs.len(),
                    scanned: qs.iter().map(|q| q.stats.rows_scanned).sum(),
                    returned: qs.iter().map(|q| q.stats.rows_returned).sum(),
                    mean_ranges: qs.iter().map(|q| q.stats.ranges as f64).sum::<f64>()
                        / qs.len() as f64,
                    max_ranges_per_bin: qs
                        .iter()
                        .map(|q| q.stats.ranges_per_bin)
                        .max()
                        .unwrap_or(0),
                    latency_p50: quantile(&mut lat, 0.5),
                    latency_p99: quantile(&mut lat, 0.99),
                    plan_p99: quantile(&mut plan, 0.99),
                });
            }
        }
    }
    out
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn ratio_text(r: Option<f64>) -> String {
    r.map_or("-".to_string(), |r| format!("{r:.2}"))
}

/// The figures of one data set as Markdown.
pub fn markdown(ds: &Dataset, runs: &[KeyRun]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## {}\n\n{}; time bin {:?}.\n",
        ds.name, ds.description, ds.bin
    );
    let _ = writeln!(
        out,
        "| key | points | load time | load rate |\n|---|---:|---:|---:|"
    );
    for r in runs {
        let _ = writeln!(
            out,
            "| {} | {} | {:.2} s | {:.0} points/s |",
            r.kind.label(),
            r.points,
            r.load_time.as_secs_f64(),
            r.load_rate()
        );
    }
    let _ = writeln!(
        out,
        "\n| window | box | key | queries | rows scanned | rows returned | scanned / returned | ranges / query | ranges / bin (max) | latency p50 | latency p99 | plan p99 (best of 5) |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let summaries = summarize(runs);
    for window in Window::ALL {
        for (size, &(_, label)) in SIZES.iter().enumerate() {
            for s in summaries
                .iter()
                .filter(|s| s.window == window && s.size == size)
            {
                let _ = writeln!(
                    out,
                    "| {} | {label} | {} | {} | {} | {} | {} | {:.1} | {} | {} | {} | {} |",
                    window.label(),
                    s.kind.label(),
                    s.queries,
                    s.scanned,
                    s.returned,
                    ratio_text(s.ratio()),
                    s.mean_ranges,
                    s.max_ranges_per_bin,
                    ms(s.latency_p50),
                    ms(s.latency_p99),
                    ms(s.plan_p99),
                );
            }
        }
    }
    out.push_str(&goals(runs));
    out
}

/// The goals, measured: per key, the scan ratio on queries at least
/// one bin long, the most ranges per bin, and planning p99.
pub fn goals(runs: &[KeyRun]) -> String {
    let mut out = String::from(
        "\n| key | scanned / returned, queries >= 1 bin (all) | worst class (box, window) | ranges / bin (max) | plan p99 (best of 5 per query) | plan p99 (every run) |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for r in runs {
        let long: Vec<_> = r
            .queries
            .iter()
            .filter(|q| q.query.window != Window::TenMinutes)
            .collect();
        let scanned: u64 = long.iter().map(|q| q.stats.rows_scanned).sum();
        let returned: u64 = long.iter().map(|q| q.stats.rows_returned).sum();
        let worst = summarize(std::slice::from_ref(r))
            .into_iter()
            .filter(|s| s.window != Window::TenMinutes)
            .filter_map(|s| s.ratio().map(|x| (x, s)))
            .max_by(|a, b| a.0.total_cmp(&b.0));
        let worst = worst.map_or("-".to_string(), |(x, s)| {
            format!("{x:.2} ({}, {})", SIZES[s.size].1, s.window.label())
        });
        let max_bin = r
            .queries
            .iter()
            .map(|q| q.stats.ranges_per_bin)
            .max()
            .unwrap_or(0);
        let mut best: Vec<Duration> = r.queries.iter().map(|q| q.plan_best).collect();
        let mut every: Vec<Duration> = r
            .queries
            .iter()
            .flat_map(|q| q.plan_times.clone())
            .collect();
        let _ = writeln!(
            out,
            "| {} | {} | {worst} | {max_bin} | {} | {} |",
            r.kind.label(),
            ratio_text((returned > 0).then(|| scanned as f64 / returned as f64)),
            ms(quantile(&mut best, 0.99)),
            ms(quantile(&mut every, 0.99)),
        );
    }
    out
}

/// Key colours of the chart.
fn colour(kind: KeyKind) -> &'static str {
    match kind {
        KeyKind::Hilbert => "#1b9e77",
        KeyKind::ZOrder => "#7570b3",
        KeyKind::LatLong => "#d95f02",
    }
}

/// A bar chart of rows scanned per row returned (log scale) by box size and
/// key, over the queries at least one bin long.
pub fn svg(ds: &Dataset, runs: &[KeyRun]) -> String {
    let summaries = summarize(runs);
    let ratio = |kind: KeyKind, size: usize| {
        let (mut s, mut r) = (0u64, 0u64);
        for x in summaries
            .iter()
            .filter(|x| x.kind == kind && x.size == size && x.window != Window::TenMinutes)
        {
            s += x.scanned;
            r += x.returned;
        }
        (r > 0).then(|| s as f64 / r as f64)
    };
    let groups: Vec<&str> = SIZES.iter().map(|(_, label)| *label).collect();
    let series: Vec<Bars<'_>> = runs
        .iter()
        .map(|r| Bars {
            label: r.kind.label(),
            colour: colour(r.kind),
            values: (0..SIZES.len()).map(|size| ratio(r.kind, size)).collect(),
        })
        .collect();
    let title = format!(
        "{}: rows scanned per row returned (queries of 1 bin or more, log scale)",
        ds.name
    );
    log_bar_chart(&title, &groups, &series)
}
