//! The reads of a run with history, per user class:
//! - `--readers` clients reading light users only for `--seconds`, then
//!   heavy users only for `--seconds`;
//! - one client reading heavy users for a few seconds: the time of one
//!   read with nothing queued before it;
//! - in process, the rows and cells one profile read takes from
//!   `profiles.<app>`: a second engine on the same store, wrapped in a
//!   [`CountingStore`], reads some users of each class once.

use std::sync::Arc;
use std::time::Instant;

use affinity_engine::Engine;
use affinity_model::counting::{CountingStore, Counts};
use affinity_model::Store;
use anyhow::Context;
use serde_json::{json, Value};

use super::load::{read_profiles, Phase};
use super::mix::{Class, Mix};
use super::{HttpBenchArgs, Target, APP, GOAL_READ_P99_MS};

/// Reads/s each class is held to, at 50 clients.
pub const GOAL_LIGHT_READS_PER_S: f64 = 25_000.0;
pub const GOAL_HEAVY_READS_PER_S: f64 = 10_000.0;
/// One client's read of a heavy user, in µs.
pub const GOAL_SINGLE_US: f64 = 150.0;
/// Seconds of the single-client phase (at most `--seconds`).
const SINGLE_SECONDS: f64 = 3.0;
/// Users of each class the counted engine reads.
const PROBE_USERS: usize = 100;

/// One class's read phase, its figures taken.
pub struct ClassReads {
    pub class: Class,
    pub users: usize,
    pub reads: u64,
    pub reads_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub over_goal: usize,
    pub json: Value,
}

impl ClassReads {
    fn new(class: Class, users: usize, readers: usize, phase: &mut Phase) -> ClassReads {
        let seconds = phase.tally.by_second();
        let (p50_ms, p99_ms) = (phase.tally.ms(0.5), phase.tally.ms(0.99));
        let t = &phase.tally;
        let reads = t.ok + t.not_found;
        let reads_per_s = reads as f64 / phase.seconds;
        let over_goal = seconds.iter().map(|s| s.2).sum();
        let json = json!({
            "users": users, "readers": readers, "reads": reads, "reads_per_s": reads_per_s,
            "p50_ms": p50_ms, "p99_ms": p99_ms, "not_found": t.not_found, "errors": t.errors,
            "seconds": phase.seconds, "over_goal": over_goal,
            "by_second": seconds.iter().map(|(n, p99, over)| json!({"reads": n, "p99_ms": p99, "over_goal": over})).collect::<Vec<_>>(),
        });
        ClassReads {
            class,
            users,
            reads,
            reads_per_s,
            p50_ms,
            p99_ms,
            over_goal,
            json,
        }
    }

    pub fn goal(&self) -> f64 {
        match self.class {
            Class::Light => GOAL_LIGHT_READS_PER_S,
            Class::Heavy => GOAL_HEAVY_READS_PER_S,
        }
    }

    pub fn line(&self, readers: usize) -> String {
        format!(
            "profiles {} ({} users): {readers} clients, {} reads ({} 404) in {:.1} s = {:.0} reads/s; p50 {:.2} ms, p99 {:.2} ms; {} over {GOAL_READ_P99_MS} ms; {} errors (goal: >= {:.0} reads/s, p99 <= {GOAL_READ_P99_MS} ms)",
            self.class.as_str(),
            self.users,
            self.reads,
            self.json["not_found"],
            self.json["seconds"].as_f64().unwrap_or(0.0),
            self.reads_per_s,
            self.p50_ms,
            self.p99_ms,
            self.over_goal,
            self.json["errors"],
            self.goal(),
        )
    }
}

/// Light users, then heavy users (a class without users is skipped);
/// also both phases as one, for the run's `profiles` figures.
pub async fn read_classes(
    args: &HttpBenchArgs,
    target: &Target,
    mix: &Mix,
) -> (Phase, Vec<ClassReads>) {
    let mut all = Phase {
        tally: Default::default(),
        seconds: 0.0,
    };
    let mut out = Vec::new();
    for class in [Class::Light, Class::Heavy] {
        let users: Arc<[u32]> = mix.members(class).into();
        if users.is_empty() {
            continue;
        }
        let mut phase =
            read_profiles(target, args.readers, args.seconds as f64, users.clone()).await;
        let offset = (all.seconds * 1e3).ceil() as u32;
        all.tally.append(phase.tally.clone(), offset);
        all.seconds += phase.seconds;
        out.push(ClassReads::new(
            class,
            users.len(),
            args.readers,
            &mut phase,
        ));
    }
    (all, out)
}

/// The single-client phase's figures.
pub struct Single {
    pub reads: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub seconds: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// One client reading heavy users (`None` without heavy users).
pub async fn single_client(args: &HttpBenchArgs, target: &Target, mix: &Mix) -> Option<Single> {
    let users: Arc<[u32]> = mix.members(Class::Heavy).into();
    if users.is_empty() {
        return None;
    }
    let seconds = SINGLE_SECONDS.min(args.seconds as f64);
    let mut phase = read_profiles(target, 1, seconds, users).await;
    let mean_us = phase.tally.mean().as_secs_f64() * 1e6;
    Some(Single {
        reads: phase.tally.ok + phase.tally.not_found,
        errors: phase.tally.errors,
        first_error: phase.tally.first_error.clone(),
        seconds: phase.seconds,
        mean_us,
        p50_us: phase.tally.ms(0.5) * 1e3,
        p99_us: phase.tally.ms(0.99) * 1e3,
    })
}

impl Single {
    pub fn line(&self) -> String {
        format!(
            "single client, heavy users: {} reads in {:.1} s; mean {:.0} µs, p50 {:.0} µs, p99 {:.0} µs per read (goal: <= {GOAL_SINGLE_US:.0} µs)",
            self.reads, self.seconds, self.mean_us, self.p50_us, self.p99_us
        )
    }

    pub fn json(&self) -> Value {
        json!({"class": "heavy", "reads": self.reads, "errors": self.errors, "seconds": self.seconds,
               "mean_us": self.mean_us, "p50_us": self.p50_us, "p99_us": self.p99_us})
    }
}

/// What one class's profile reads took from the store, per profile.
pub struct Probe {
    pub class: Class,
    pub profiles: usize,
    /// Profiles found (the others have no scoring event).
    pub found: usize,
    pub rows: f64,
    pub cells: f64,
    /// Rows of the events table (corrections), per profile.
    pub event_rows: f64,
    /// The engine's time per read, counted store and all.
    pub micros: f64,
}

/// Read up to [`PROBE_USERS`] users of each class once through a counting
/// engine on `store` (blocking).
pub fn probe(store: Arc<dyn Store>, mix: &Mix) -> anyhow::Result<Vec<Probe>> {
    let counting = Arc::new(CountingStore::new(store));
    let engine = Engine::open(Arc::clone(&counting) as Arc<dyn Store>)?;
    let strategy = engine
        .strategy(APP)?
        .context("the application has no strategy to read profiles with")?;
    // Reads are counted per physical table: the shared ones hold only
    // this application in the benchmark's store.
    let (profiles, events) = match engine.app(APP)?.tables {
        affinity_engine::Tables::Shared => ("profiles".to_string(), "events".to_string()),
        affinity_engine::Tables::Dedicated => (format!("profiles.{APP}"), format!("events.{APP}")),
    };
    let mut out = Vec::new();
    for class in [Class::Light, Class::Heavy] {
        let members = mix.members(class);
        if members.is_empty() {
            continue;
        }
        let step = members.len().div_ceil(PROBE_USERS);
        let users: Vec<u32> = members.into_iter().step_by(step).collect();
        let before: (Counts, Counts) = (counting.counts(&profiles), counting.counts(&events));
        let started = Instant::now();
        let mut found = 0;
        for u in &users {
            let user = format!("user{u}");
            found += usize::from(engine.profile_json_with(APP, &user, &strategy)?.is_some());
        }
        let micros = started.elapsed().as_secs_f64() * 1e6;
        let read = counting.counts(&profiles).since(before.0);
        let event_rows = counting.counts(&events).since(before.1).rows;
        let n = users.len() as f64;
        out.push(Probe {
            class,
            profiles: users.len(),
            found,
            rows: read.rows as f64 / n,
            cells: read.cells as f64 / n,
            event_rows: event_rows as f64 / n,
            micros: micros / n,
        });
    }
    Ok(out)
}

/// The printed line and the JSON of the probe, with the rows goal.
pub fn probe_report(probes: &[Probe], goal_rows: i64) -> (String, Value) {
    let mut line = format!("rows per profile (profiles.{APP}, each user read once in process):");
    let mut json = serde_json::Map::new();
    for p in probes {
        line.push_str(&format!(
            " {} {:.2} rows, {:.0} cells, {:.2} event rows, {:.0} µs per read ({} users, {} found);",
            p.class.as_str(),
            p.rows,
            p.cells,
            p.event_rows,
            p.micros,
            p.profiles,
            p.found
        ));
        json.insert(
            p.class.as_str().to_string(),
            json!({"profiles": p.profiles, "found": p.found, "rows": p.rows, "cells": p.cells,
                   "event_rows": p.event_rows, "engine_us": p.micros}),
        );
    }
    line.pop();
    line.push_str(&format!(
        " (goal: <= {goal_rows} rows: the rollup, today and the days not yet folded)"
    ));
    json.insert("goal_rows".to_string(), json!(goal_rows));
    (line, Value::Object(json))
}
