//! Prometheus metrics: events ingested and rejected, requests and their
//! latency per route, and the progress of maintenance jobs, rendered in the
//! Prometheus text format at `/metrics`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::jobs::Jobs;

/// Upper bounds (seconds) of the latency histogram buckets.
pub const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, secs: f64) {
        if let Some(i) = BUCKETS.iter().position(|b| secs <= *b) {
            self.counts[i] += 1;
        }
        self.count += 1;
        self.sum += secs;
    }
}

/// The requests of one method on one route.
#[derive(Debug, Default)]
struct RouteRequests {
    /// `status -> count`.
    statuses: BTreeMap<u16, u64>,
    latency: Histogram,
}

/// The server's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    pub events_ingested: AtomicU64,
    /// Events of rejected `POST /1/events` requests, by reason code.
    rejected: Mutex<BTreeMap<String, u64>>,
    /// `method -> route -> requests`: nested so that counting a request
    /// looks its method and route up as they are, allocating only the
    /// first time a pair is seen.
    requests: Mutex<BTreeMap<String, BTreeMap<String, RouteRequests>>>,
    /// `application -> A/B test variant -> requests it served`.
    served: Mutex<BTreeMap<String, BTreeMap<String, u64>>>,
}

/// Escape a label value.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Metrics {
    /// Count a request served by `variant` of `app`'s A/B test.
    pub fn served(&self, app: &str, variant: &str) {
        let mut served = self.served.lock().unwrap_or_else(|p| p.into_inner());
        let per_app = match served.get_mut(app) {
            Some(m) => m,
            None => served.entry(app.to_string()).or_default(),
        };
        match per_app.get_mut(variant) {
            Some(n) => *n += 1,
            None => {
                per_app.insert(variant.to_string(), 1);
            }
        }
    }

    /// Requests each variant of `app`'s A/B tests served so far (every
    /// variant name this server has served, current test or not).
    pub fn served_by(&self, app: &str) -> BTreeMap<String, u64> {
        self.served
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(app)
            .cloned()
            .unwrap_or_default()
    }

    /// Count `events` rejected for `reason` (see [`crate::debug::Rejection`]).
    pub fn reject(&self, reason: &str, events: u64) {
        *self
            .rejected
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(reason.to_string())
            .or_default() += events;
    }

    /// Count a finished request.
    pub fn observe(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        let mut requests = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        let routes = match requests.get_mut(method) {
            Some(routes) => routes,
            None => requests.entry(method.to_string()).or_default(),
        };
        let this = match routes.get_mut(route) {
            Some(this) => this,
            None => routes.entry(route.to_string()).or_default(),
        };
        *this.statuses.entry(status).or_default() += 1;
        this.latency.observe(elapsed.as_secs_f64());
    }

    /// Events of rejected requests so far, by reason.
    pub fn rejected(&self) -> BTreeMap<String, u64> {
        self.rejected
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Requests of `method` on `route` so far, with any status: how many,
    /// and the sum of their latencies in seconds.
    pub fn route_totals(&self, method: &str, route: &str) -> (u64, f64) {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(method)
            .and_then(|routes| routes.get(route))
            .map_or((0, 0.0), |r| (r.latency.count, r.latency.sum))
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self, jobs: &Jobs) -> String {
        let mut out = String::new();
        let counter = |out: &mut String, name: &str, help: &str, value: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
            );
        };
        counter(
            &mut out,
            "affinity_events_ingested_total",
            "Events acknowledged (stored durably).",
            self.events_ingested.load(Ordering::Relaxed),
        );
        let name = "affinity_events_rejected_total";
        let _ = writeln!(
            out,
            "# HELP {name} Events of rejected POST /1/events requests, by reason (a body that \
             cannot be read counts one).\n# TYPE {name} counter"
        );
        for (reason, n) in self
            .rejected
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            let _ = writeln!(out, "{name}{{reason=\"{}\"}} {n}", label(reason));
        }
        let name = "affinity_variant_served_total";
        let _ = writeln!(
            out,
            "# HELP {name} Profile, optionalFilters, rerank and explain answers per A/B test \
             variant.\n# TYPE {name} counter"
        );
        for (app, variants) in self.served.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            for (variant, n) in variants {
                let _ = writeln!(
                    out,
                    "{name}{{app=\"{}\",variant=\"{}\"}} {n}",
                    label(app),
                    label(variant)
                );
            }
        }
        out.push_str("# HELP affinity_http_requests_total HTTP requests by route and status.\n");
        out.push_str("# TYPE affinity_http_requests_total counter\n");
        let requests = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        let by_route = || {
            requests.iter().flat_map(|(method, routes)| {
                routes.iter().map(move |(route, r)| (method, route, r))
            })
        };
        for (method, route, r) in by_route() {
            for (status, n) in &r.statuses {
                let _ = writeln!(
                    out,
                    "affinity_http_requests_total{{method=\"{method}\",route=\"{}\",status=\"{status}\"}} {n}",
                    label(route)
                );
            }
        }
        let name = "affinity_http_request_duration_seconds";
        let _ = writeln!(out, "# HELP {name} HTTP request latency by route.");
        let _ = writeln!(out, "# TYPE {name} histogram");
        for (method, route, r) in by_route() {
            let h = &r.latency;
            let labels = format!("method=\"{method}\",route=\"{}\"", label(route));
            let mut cumulative = 0;
            for (bound, n) in BUCKETS.iter().zip(h.counts) {
                cumulative += n;
                let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
            }
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", h.count);
            let _ = writeln!(out, "{name}_sum{{{labels}}} {}", h.sum);
            let _ = writeln!(out, "{name}_count{{{labels}}} {}", h.count);
        }
        drop(requests);
        jobs.render_metrics(&mut out);
        out
    }
}
