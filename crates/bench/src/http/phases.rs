//! The phases of a run, in order: the history and its maintenance (with
//! `--history-days`, in process), the live ingest, the settle, the reads
//! (per user class with history), the query-time requests (optional
//! filters and re-rankings of heavy users), then the report.

use std::sync::Arc;
use std::time::Instant;

use affinity_engine::Engine;
use affinity_model::Store;
use anyhow::{bail, Context};
use serde_json::json;

use super::classes::{self, read_classes, single_client};
use super::history;
use super::load::{ingest, read_profiles, uniform_bodies, Bodies};
use super::mix::{Class, Live, Mix};
use super::query::query_phases;
use super::report::{report, HistoryFigures, Settled};
use super::{clip, HttpBenchArgs, Settle, Target, GOAL_READ_P99_MS};
use crate::wire::Answer;

/// The store and engine of the server in this process.
pub struct Local {
    pub store: Arc<dyn Store>,
    pub engine: Arc<Engine>,
    /// Flushes the store and waits for its compactions (embedded only).
    pub settle: Option<Settle>,
}

/// Check the server, set a strategy if the application has none, run the
/// phases, print and write the figures; fail if any request failed.
pub async fn bench(
    args: &HttpBenchArgs,
    target: Target,
    described: &str,
    kind: &str,
    local: Option<Local>,
) -> anyhow::Result<()> {
    prepare(&target).await?;
    let settle = local.as_ref().and_then(|l| l.settle.clone());
    let mix = (args.history_days > 0).then(|| Arc::new(Mix::new(args)));
    let settling = if settle.is_some() && !args.no_settle {
        ", the store settled,"
    } else {
        ""
    };
    let (history, reading) = match (&mix, &local) {
        (Some(_), Some(_)) => (
            format!(
                "{} days of history and a maintenance, then ",
                args.history_days
            ),
            "of profile reads per user class",
        ),
        (Some(_), None) => (String::new(), "of profile reads per user class"),
        (None, _) => (String::new(), "of profile reads"),
    };
    let today = match &mix {
        Some(_) if args.url.is_none() && args.today_live_hours < 24.0 => format!(
            " (first the users' events of today's last {} hours, of {} of a day's each; the earlier ones digested in the history)",
            args.today_live_hours, args.today_share
        ),
        Some(_) if args.today_share != 1.0 => format!(
            " (first the users' events of today, {} of a day's each)",
            args.today_share
        ),
        _ => String::new(),
    };
    eprintln!(
        "affinity bench http: {described}; {history}{} s of ingest{today}{settling} then {} s {reading}",
        args.seconds, args.seconds
    );
    let mut figures = HistoryFigures::default();
    if let Some(mix) = &mix {
        match &local {
            Some(local) => figures.history = Some(history_phases(args, mix, local).await?),
            None => figures.note = Some("history: none (the server at --url has its own store: past days can only be ingested in process, on their own clock); maintenance: none"),
        }
    }
    let bodies: Bodies = match &mix {
        Some(mix) => {
            let live = Live::new(Arc::clone(mix), system_millis(), usize::from(args.batch));
            Arc::new(move |_, _| live.body())
        }
        None => uniform_bodies(args),
    };
    let ingest = ingest(args, &target, bodies).await;
    let settled = match settle {
        _ if args.no_settle => Settled::Not("--no-settle"),
        None if kind == "remote" => Settled::Not("the server is elsewhere"),
        None => Settled::Not("Cloud Bigtable compacts on its own"),
        Some(settle) => {
            let started = Instant::now();
            tokio::task::spawn_blocking(move || settle())
                .await
                .context("the settle task")?
                .context("flushing and compacting the store after the ingest")?;
            Settled::After(started.elapsed().as_secs_f64())
        }
    };
    let reads = match &mix {
        Some(mix) => {
            let (reads, classes) = read_classes(args, &target, mix).await;
            figures.classes = classes;
            figures.single = single_client(args, &target, mix).await;
            if let Some(local) = &local {
                let (store, mix) = (Arc::clone(&local.store), Arc::clone(mix));
                let probes = tokio::task::spawn_blocking(move || classes::probe(store, &mix))
                    .await
                    .context("the rows-per-profile task")??;
                figures.probes = Some(probes);
            }
            reads
        }
        None => {
            let users: Arc<[u32]> = (0..args.users() as u32).collect();
            read_profiles(&target, args.readers, args.seconds as f64, users).await
        }
    };
    let (query_users, who): (Arc<[u32]>, _) = match &mix {
        Some(mix) => (mix.members(Class::Heavy).into(), "heavy users"),
        None => ((0..args.users() as u32).collect(), "users"),
    };
    let query = if query_users.is_empty() {
        Vec::new()
    } else {
        query_phases(
            &target,
            args.readers,
            args.seconds as f64,
            query_users,
            who,
            &args.value_prefix,
        )
        .await
    };
    let (ingest_errors, read_errors) = (
        ingest.tally.errors,
        reads.tally.errors
            + figures.single.as_ref().map_or(0, |s| s.errors)
            + query.iter().map(|q| q.errors).sum::<u64>(),
    );
    let first_error = ingest
        .tally
        .first_error
        .clone()
        .or_else(|| reads.tally.first_error.clone())
        .or_else(|| figures.single.as_ref().and_then(|s| s.first_error.clone()))
        .or_else(|| query.iter().find_map(|q| q.first_error.clone()));
    let (mut lines, mut json) = report(args, ingest, &settled, reads, described, kind);
    figures.add_to(args, &mut lines, &mut json);
    for q in &query {
        lines.push('\n');
        lines.push_str(&q.line());
    }
    json["query_time"] = json!({
        "optional_filters": query.first().map(|q| q.json()),
        "rerank": query.get(1).map(|q| q.json()),
        "rerank_hits": super::query::RERANK_HITS,
    });
    json["goals"]["query_time_p99_ms"] = json!(GOAL_READ_P99_MS);
    json["goals"]["query_time_met"] = json!(!query.is_empty() && query.iter().all(|q| q.met()));
    println!("{lines}");
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&json)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if ingest_errors + read_errors > 0 {
        bail!(
            "{} requests failed (ingest {ingest_errors}, profile reads and query-time requests {read_errors}); the first: {}",
            ingest_errors + read_errors,
            first_error.unwrap_or_default()
        );
    }
    Ok(())
}

/// The preload and the maintenance, on blocking threads.
async fn history_phases(
    args: &HttpBenchArgs,
    mix: &Arc<Mix>,
    local: &Local,
) -> anyhow::Result<history::Done> {
    let (store, engine, settle) = (
        Arc::clone(&local.store),
        Arc::clone(&local.engine),
        local.settle.clone(),
    );
    let (mix, days, threads) = (Arc::clone(mix), args.history_days, args.clients);
    tokio::task::spawn_blocking(move || {
        let preload = history::preload(store, &mix, days, threads, settle.as_ref())?;
        let maintained = history::maintain(&engine, &mix, &preload)?;
        Ok(history::Done {
            report: history::report(&mix, &preload, &maintained),
            maintained,
        })
    })
    .await
    .context("the history task")?
}

pub fn system_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The server answers `/health`, and the application has a strategy (ours
/// is set when it has none, so an existing one is never replaced).
async fn prepare(target: &Target) -> anyhow::Result<()> {
    let mut conn = target
        .endpoint
        .connect()
        .await
        .with_context(|| format!("cannot reach an affinity server at {}", target.base))?;
    let health = conn.send("GET", "/health", b"").await?;
    expect(&health, 200, "GET /health")?;
    let path = "/1/strategies/personalization";
    let current = conn
        .send("GET", path, b"")
        .await
        .with_context(|| format!("GET {path}"))?;
    if current.status == 404 {
        let strategy = json!({
            "eventsScoring": [
                {"eventName": "Viewed", "eventType": "view", "score": 5},
                {"eventName": "Clicked", "eventType": "click", "score": 10},
                {"eventName": "Bought", "eventType": "conversion", "score": 50}],
            "facetsScoring": [
                {"facetName": "brand", "score": 100}, {"facetName": "category", "score": 80},
                {"facetName": "color", "score": 40}, {"facetName": "size", "score": 20}],
            "personalizationImpact": 50});
        let set = conn
            .send("POST", path, strategy.to_string().as_bytes())
            .await
            .with_context(|| format!("POST {path}"))?;
        expect(&set, 200, "POST /1/strategies/personalization")
    } else {
        expect(&current, 200, "GET /1/strategies/personalization")
    }
}

/// Fail naming the status and body unless the answer is `want`.
fn expect(answer: &Answer, want: u16, what: &str) -> anyhow::Result<()> {
    if answer.status != want {
        bail!(
            "{what} answered {}: {}",
            answer.status,
            clip(&String::from_utf8_lossy(&answer.body))
        );
    }
    Ok(())
}
