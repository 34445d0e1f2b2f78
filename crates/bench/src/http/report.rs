//! The figures of a run: one printed line per phase (and the reads second
//! by second), and the JSON document.

use std::fmt::Write as _;

use serde_json::{json, Value};

use super::classes::{probe_report, ClassReads, Probe, Single, GOAL_SINGLE_US};
use super::history::Done;
use super::load::Phase;
use super::{HttpBenchArgs, GOAL_EVENTS_PER_S, GOAL_READERS, GOAL_READ_P99_MS};

/// How the store came out of the ingest phase.
pub enum Settled {
    /// Flushed and compacted in this many seconds before the reads.
    After(f64),
    /// Not waited for, and why.
    Not(&'static str),
}

/// The printed lines (one per phase) and the JSON document.
pub fn report(
    args: &HttpBenchArgs,
    mut ingest: Phase,
    settled: &Settled,
    mut reads: Phase,
    described: &str,
    kind: &str,
) -> (String, Value) {
    let batch = u64::from(args.batch);
    let events = ingest.tally.ok * batch;
    let events_per_s = events as f64 / ingest.seconds;
    // The rate the goal is held to: with the flushes and compactions the
    // burst left behind, when the bench waited for them.
    let (settle_line, settle_seconds, events_per_s_settled) = match settled {
        Settled::After(s) => {
            let rate = events as f64 / (ingest.seconds + s);
            (
                format!("settle: the store flushed and compacted what the ingest wrote in {s:.2} s before the reads; counting it, ingest = {rate:.0} events/s"),
                Some(*s),
                rate,
            )
        }
        Settled::Not(why) => (
            format!("settle: none ({why}): the reads start as the ingest ends"),
            None,
            events_per_s,
        ),
    };
    let (batch_p50, batch_p99) = (ingest.tally.ms(0.5), ingest.tally.ms(0.99));
    let answered = reads.tally.ok + reads.tally.not_found;
    let seconds = reads.tally.by_second();
    let reads_per_s = answered as f64 / reads.seconds;
    let (read_p50, read_p99) = (reads.tally.ms(0.5), reads.tally.ms(0.99));
    let ingest_line = format!(
        "ingest: {} clients x {batch}-event batches, {events} events in {:.1} s = {events_per_s:.0} events/s; batch latency p50 {batch_p50:.1} ms, p99 {batch_p99:.1} ms; {} errors (goal: >= 100k events/s)",
        args.clients, ingest.seconds, ingest.tally.errors,
    );
    let read_line = format!(
        "profiles: {} clients, {answered} reads ({} 404) in {:.1} s = {reads_per_s:.0} reads/s; p50 {read_p50:.2} ms, p99 {read_p99:.2} ms; {} errors (goal: profile read p99 <= 5 ms at 50 clients)",
        args.readers, reads.tally.not_found, reads.seconds, reads.tally.errors,
    );
    let slow: usize = seconds.iter().map(|s| s.2).sum();
    let mut by_second = format!(
        "profiles by second (reads, p99 ms, reads over {GOAL_READ_P99_MS} ms; {slow} in all, {:.2}%):",
        100.0 * slow as f64 / answered.max(1) as f64
    );
    for (n, p99, over) in &seconds {
        let _ = write!(by_second, " {n} {p99:.1} {over} |");
    }
    by_second.pop();
    let json = json!({
        "target": described,
        "backend": kind,
        "settings": {"clients": args.clients, "readers": args.readers, "users": args.users(),
                     "batch": batch, "seconds": args.seconds, "history_days": args.history_days},
        "ingest": {"events": events, "events_per_s": events_per_s, "requests": ingest.tally.ok + ingest.tally.errors,
                   "batch_p50_ms": batch_p50, "batch_p99_ms": batch_p99, "errors": ingest.tally.errors,
                   "seconds": ingest.seconds, "settle_seconds": settle_seconds,
                   "events_per_s_with_settle": events_per_s_settled},
        "profiles": {"reads": answered, "reads_per_s": reads_per_s, "p50_ms": read_p50, "p99_ms": read_p99,
                     "not_found": reads.tally.not_found, "errors": reads.tally.errors, "seconds": reads.seconds,
                     "over_goal": slow,
                     "by_second": seconds.iter().map(|(n, p99, over)| json!({"reads": n, "p99_ms": p99, "over_goal": over})).collect::<Vec<_>>()},
        "goals": {"events_per_s": GOAL_EVENTS_PER_S, "profile_p99_ms": GOAL_READ_P99_MS,
                  "profile_readers": GOAL_READERS,
                  "ingest_met": events_per_s_settled >= GOAL_EVENTS_PER_S,
                  "profiles_met": args.readers >= GOAL_READERS && read_p99 <= GOAL_READ_P99_MS},
    });
    (
        format!("{ingest_line}\n{settle_line}\n{read_line}\n{by_second}"),
        json,
    )
}

/// The figures only a run with history has: its preload and maintenance
/// (in process), and the reads per user class.
#[derive(Default)]
pub struct HistoryFigures {
    pub history: Option<Done>,
    /// Why there is no history (with `--url`).
    pub note: Option<&'static str>,
    pub classes: Vec<ClassReads>,
    pub single: Option<Single>,
    pub probes: Option<Vec<Probe>>,
}

impl HistoryFigures {
    /// Add the figures to the lines and JSON of [`report`]: the history
    /// first, the reads per class after the reads of both classes, and
    /// their goals.
    pub fn add_to(self, args: &HttpBenchArgs, lines: &mut String, json: &mut Value) {
        if args.history_days == 0 {
            return;
        }
        let mut first = String::new();
        if let Some(done) = &self.history {
            let (text, history, maintenance) = &done.report;
            first = format!("{text}\n");
            json["history"] = history.clone();
            json["maintenance"] = maintenance.clone();
        } else {
            first = self.note.map_or(first, |n| format!("{n}\n"));
            json["history"] = Value::Null;
            json["maintenance"] = Value::Null;
        }
        json["settings"]["heavy_share"] = json!(args.heavy_share);
        json["settings"]["heavy_per_day"] = json!(args.heavy_per_day);
        json["settings"]["light_per_day"] = json!(args.light_per_day);
        json["settings"]["visitors"] = json!(args.visitors);
        json["settings"]["value_skew"] = json!(args.value_skew);
        json["settings"]["value_prefix"] = json!(args.value_prefix);
        json["settings"]["today_share"] = json!(args.today_share);
        json["settings"]["today_live_hours"] = json!(args.today_live_hours);
        json["settings"]["rollup_cache_mib"] = json!(args.rollup_cache_mib);
        json["settings"]["seed"] = json!(args.seed);
        lines.insert_str(0, &first);
        let mut goals = serde_json::Map::new();
        let mut classes = serde_json::Map::new();
        for c in &self.classes {
            let _ = write!(lines, "\n{}", c.line(args.readers));
            let met = args.readers >= GOAL_READERS
                && c.reads_per_s >= c.goal()
                && c.p99_ms <= GOAL_READ_P99_MS;
            goals.insert(format!("{}_reads_per_s", c.class.as_str()), json!(c.goal()));
            goals.insert(format!("{}_met", c.class.as_str()), json!(met));
            classes.insert(c.class.as_str().to_string(), c.json.clone());
        }
        json["classes"] = Value::Object(classes);
        goals.insert("single_client_us".into(), json!(GOAL_SINGLE_US));
        json["single_client"] = match &self.single {
            Some(single) => {
                let _ = write!(lines, "\n{}", single.line());
                goals.insert(
                    "single_client_met".into(),
                    json!(single.mean_us <= GOAL_SINGLE_US),
                );
                single.json()
            }
            None => Value::Null,
        };
        json["rows_per_profile"] = match (&self.probes, &self.history) {
            (Some(probes), Some(done)) => {
                let goal = 2 + done.maintained.days_behind();
                let (line, value) = probe_report(probes, goal);
                let _ = write!(lines, "\n{line}");
                goals.insert("rows_per_profile".into(), json!(goal));
                let met = probes.iter().all(|p| p.rows <= goal as f64);
                goals.insert("rows_met".into(), json!(met));
                value
            }
            _ => Value::Null,
        };
        if let Value::Object(all) = &mut json["goals"] {
            all.extend(goals);
        }
    }
}
