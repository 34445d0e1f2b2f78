//! The figures of `affinity bench schemas`: one [`Record`] per (backend,
//! application profile, schema, facets used, events), written as Markdown
//! tables with per-profile wide/narrow ratios, and as JSON.

use std::fmt::Write;

use serde_json::{json, Value};

/// Which part of the benchmark a record comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    /// Every application profile at `--events`.
    Profiles,
    /// The scaling run: one profile at growing event counts.
    Scaling,
}

impl Run {
    pub fn as_str(self) -> &'static str {
        match self {
            Run::Profiles => "profiles",
            Run::Scaling => "scaling",
        }
    }
}

/// The measurements of one schema under one strategy.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub backend: String,
    pub run: Run,
    /// `narrow` or `wide`.
    pub schema: String,
    pub app_profile: String,
    pub users: usize,
    pub facets_used: usize,
    pub facets_total: usize,
    /// Events loaded.
    pub events: u64,
    /// Events the export read (from its report).
    pub events_read: u64,
    pub threads: usize,
    /// Wall time of each export, in run order.
    pub seconds: Vec<f64>,
    /// Per export (the same every time): what the store returned.
    pub bytes_read: u64,
    pub cells_read: u64,
    /// Per export (the same every time): the profiles handed to the sink
    /// and their JSON bytes (counted, not written).
    pub profiles_exported: u64,
    pub bytes_exported: u64,
    /// The process's peak resident set over the exports (`None` where
    /// `/proc/self/clear_refs` is not available).
    pub peak_rss_bytes: Option<u64>,
    /// For this strategy, in both schemas: every checked user's exported
    /// profile is the scoring reference's (byte for byte), and both
    /// schemas exported the same profiles and bytes.
    pub profiles_match: bool,
    pub users_checked: usize,
    /// Time to bulk-load this schema's events.
    pub load_seconds: f64,
}

impl Record {
    pub fn seconds_min(&self) -> f64 {
        self.seconds.iter().copied().fold(f64::INFINITY, f64::min)
    }

    pub fn seconds_median(&self) -> f64 {
        let mut s = self.seconds.clone();
        s.sort_by(f64::total_cmp);
        match s.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => s[n / 2],
            n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
        }
    }

    /// Events per second at the median time.
    pub fn events_per_s(&self) -> f64 {
        self.events as f64 / self.seconds_median()
    }

    /// Events per second at the best time.
    pub fn events_per_s_best(&self) -> f64 {
        self.events as f64 / self.seconds_min()
    }

    pub fn to_json(&self) -> Value {
        json!({
            "backend": self.backend, "run": self.run.as_str(), "schema": self.schema,
            "app_profile": self.app_profile, "users": self.users,
            "facets_used": self.facets_used, "facets_total": self.facets_total,
            "events": self.events, "events_read": self.events_read, "threads": self.threads,
            "seconds": self.seconds, "seconds_min": self.seconds_min(),
            "seconds_median": self.seconds_median(), "events_per_s": self.events_per_s(),
            "events_per_s_best": self.events_per_s_best(), "bytes_read": self.bytes_read,
            "cells_read": self.cells_read, "profiles_exported": self.profiles_exported,
            "bytes_exported": self.bytes_exported, "peak_rss_bytes": self.peak_rss_bytes,
            "profiles_match": self.profiles_match, "users_checked": self.users_checked,
            "load_seconds": self.load_seconds,
        })
    }
}

/// Every record as a JSON list.
pub fn json(records: &[Record]) -> Value {
    Value::Array(records.iter().map(Record::to_json).collect())
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1u32 << 20)
}

/// A Markdown table of `records`.
pub fn table(records: &[Record]) -> String {
    let mut out = String::from(
        "| backend | profile | users | events | schema | facets | load s | min s | median s | events/s (median) | cells read | MiB read | profiles | MiB out | peak RSS MiB | profiles = reference |\n\
         |---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for r in records {
        let rss = r
            .peak_rss_bytes
            .map_or("-".to_string(), |b| format!("{:.0}", mib(b)));
        let equal = if r.profiles_match {
            format!("yes ({})", r.users_checked)
        } else {
            format!("**NO** ({} checked)", r.users_checked)
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {}/{} | {:.1} | {:.3} | {:.3} | {:.0} | {} | {:.1} | {} | {:.1} | {rss} | {equal} |",
            r.backend,
            r.app_profile,
            r.users,
            r.events,
            r.schema,
            r.facets_used,
            r.facets_total,
            r.load_seconds,
            r.seconds_min(),
            r.seconds_median(),
            r.events_per_s(),
            r.cells_read,
            mib(r.bytes_read),
            r.profiles_exported,
            mib(r.bytes_exported),
        );
    }
    out
}

/// The median time of the record matching the fields, if any.
fn median_of(records: &[Record], like: &Record, schema: &str) -> Option<f64> {
    records
        .iter()
        .find(|r| {
            r.schema == schema
                && r.backend == like.backend
                && r.app_profile == like.app_profile
                && r.facets_used == like.facets_used
                && r.events == like.events
        })
        .map(Record::seconds_median)
}

/// One line per (backend, profile, events): the wide/narrow speed ratio
/// (narrow median time / wide median time) per number of facets used.
pub fn ratios(records: &[Record]) -> String {
    let mut out = String::new();
    let mut seen: Vec<(&str, &str, u64)> = Vec::new();
    for r in records {
        let group = (r.backend.as_str(), r.app_profile.as_str(), r.events);
        if seen.contains(&group) {
            continue;
        }
        seen.push(group);
        let mut parts = Vec::new();
        let mut facets: Vec<usize> = records
            .iter()
            .filter(|x| (x.backend.as_str(), x.app_profile.as_str(), x.events) == group)
            .map(|x| x.facets_used)
            .collect();
        facets.sort_unstable();
        facets.dedup();
        for f in facets {
            let like = Record {
                facets_used: f,
                ..r.clone()
            };
            if let (Some(n), Some(w)) = (
                median_of(records, &like, "narrow"),
                median_of(records, &like, "wide"),
            ) {
                let plural = if f == 1 { "" } else { "s" };
                parts.push(format!("{f} facet{plural} {:.2}x", n / w));
            }
        }
        let _ = writeln!(
            out,
            "- {} {} ({} events): wide/narrow speed: {}",
            group.0,
            group.1,
            group.2,
            parts.join(", ")
        );
    }
    out
}

/// Per (backend, schema, facets) of the scaling run: the median time per
/// million events at each size (constant when growth is linear).
pub fn linearity(records: &[Record]) -> String {
    let mut out = String::new();
    let mut seen: Vec<(&str, &str, usize)> = Vec::new();
    for r in records.iter().filter(|r| r.run == Run::Scaling) {
        let key = (r.backend.as_str(), r.schema.as_str(), r.facets_used);
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let points: Vec<String> = records
            .iter()
            .filter(|x| {
                x.run == Run::Scaling
                    && (x.backend.as_str(), x.schema.as_str(), x.facets_used) == key
            })
            .map(|x| {
                format!(
                    "{:.1}M: {:.2} s/M",
                    x.events as f64 / 1e6,
                    x.seconds_median() / (x.events as f64 / 1e6)
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "- {} {} {} facets: {}",
            key.0,
            key.1,
            key.2,
            points.join(", ")
        );
    }
    out
}

/// The whole report: settings, the profiles table and ratios, and the
/// scaling table when there is one.
pub fn markdown(settings: &str, records: &[Record]) -> String {
    let mut out = format!("# affinity bench schemas\n\n{settings}\n");
    let main: Vec<Record> = records
        .iter()
        .filter(|r| r.run == Run::Profiles)
        .cloned()
        .collect();
    let scaling: Vec<Record> = records
        .iter()
        .filter(|r| r.run == Run::Scaling)
        .cloned()
        .collect();
    if !main.is_empty() {
        out.push_str("\n## Application profiles\n\n");
        out.push_str(&table(&main));
        out.push_str("\nWide/narrow speed (narrow median time / wide median time):\n\n");
        out.push_str(&ratios(&main));
    }
    if !scaling.is_empty() {
        out.push_str("\n## Scaling\n\n");
        out.push_str(&table(&scaling));
        out.push_str("\nWide/narrow speed:\n\n");
        out.push_str(&ratios(&scaling));
        out.push_str("\nMedian seconds per million events (flat = linear growth):\n\n");
        out.push_str(&linearity(&scaling));
    }
    let unequal = records.iter().filter(|r| !r.profiles_match).count();
    let _ = writeln!(
        out,
        "\nExported profiles equal to the scoring reference, narrow and wide alike: {}",
        if unequal == 0 {
            "yes, in every run".to_string()
        } else {
            format!("NO, in {unequal} records")
        }
    );
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn record(schema: &str, facets: usize, seconds: &[f64], run: Run) -> Record {
        Record {
            backend: "embedded".into(),
            run,
            schema: schema.into(),
            app_profile: "balanced".into(),
            users: 10,
            facets_used: facets,
            facets_total: 20,
            events: 1_000_000,
            events_read: 1_000_000,
            threads: 2,
            seconds: seconds.to_vec(),
            bytes_read: 3 << 20,
            cells_read: 20_000,
            profiles_exported: 10,
            bytes_exported: 5_000,
            peak_rss_bytes: Some(100 << 20),
            profiles_match: true,
            users_checked: 10,
            load_seconds: 1.0,
        }
    }

    #[test]
    fn min_median_and_rates() {
        let r = record("wide", 1, &[3.0, 1.0, 2.0, 10.0], Run::Profiles);
        assert_eq!(r.seconds_min(), 1.0);
        assert_eq!(r.seconds_median(), 2.5);
        assert_eq!(r.events_per_s(), 400_000.0);
        assert_eq!(r.events_per_s_best(), 1_000_000.0);
        let j = r.to_json();
        for field in [
            "backend",
            "schema",
            "app_profile",
            "facets_used",
            "facets_total",
            "events",
            "seconds_min",
            "seconds_median",
            "events_per_s",
            "bytes_read",
            "cells_read",
            "profiles_exported",
            "bytes_exported",
            "peak_rss_bytes",
            "profiles_match",
        ] {
            assert!(!j[field].is_null(), "{field} missing");
        }
        assert_eq!(j["seconds_median"], json!(2.5));
    }

    #[test]
    fn markdown_has_rows_ratios_and_linearity() {
        let records = vec![
            record("narrow", 1, &[3.0], Run::Profiles),
            record("wide", 1, &[1.0], Run::Profiles),
            record("narrow", 20, &[3.0], Run::Profiles),
            record("wide", 20, &[3.0], Run::Profiles),
            record("wide", 20, &[2.0], Run::Scaling),
            Record {
                events: 2_000_000,
                ..record("wide", 20, &[4.0], Run::Scaling)
            },
        ];
        let md = markdown("settings here", &records);
        assert!(md.contains("settings here"));
        assert_eq!(md.matches("| embedded | balanced |").count(), 6);
        assert!(md.contains("1 facet 3.00x, 20 facets 1.00x"), "{md}");
        assert!(
            md.contains("wide 20 facets: 1.0M: 2.00 s/M, 2.0M: 2.00 s/M"),
            "{md}"
        );
        assert!(md.contains("yes, in every run"));
        let bad = vec![Record {
            profiles_match: false,
            ..record("wide", 1, &[1.0], Run::Profiles)
        }];
        assert!(markdown("", &bad).contains("NO, in 1 records"));
        assert_eq!(json(&records).as_array().map(Vec::len), Some(6));
    }
}
