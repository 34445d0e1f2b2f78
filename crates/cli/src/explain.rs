//! `affinity profile explain` and `affinity strategy preview`: the CLI
//! forms of the explain and preview endpoints, on the engine directly.

use std::path::PathBuf;

use anyhow::bail;

use crate::backend::BackendArgs;
use crate::engine_cmds::{open_engine, read_strategy, AppArgs};

#[derive(clap::Subcommand)]
pub enum ProfileCommand {
    /// Explain one score of a user's profile: the events, day by day,
    /// that make it, the maximum it is normalised by, and when it next
    /// changes as days leave retention.
    Explain(ExplainArgs),
}

#[derive(clap::Args)]
pub struct ExplainArgs {
    #[command(flatten)]
    app: AppArgs,
    /// The user token (or authenticated user token).
    #[arg(long)]
    user: String,
    /// A facet of the strategy's facetsScoring.
    #[arg(long)]
    facet: String,
    /// The facet value.
    #[arg(long)]
    value: String,
    /// Print exactly the API's JSON.
    #[arg(long)]
    json: bool,
}

pub fn profile(cmd: ProfileCommand, backend: &BackendArgs) -> anyhow::Result<()> {
    let ProfileCommand::Explain(args) = cmd;
    let engine = open_engine(backend)?;
    let app = args.app.app();
    let Some(x) = engine.explain(app, &args.user, &args.facet, &args.value)? else {
        bail!("no profile for user {:?} in app {app:?}", args.user);
    };
    let json = x.to_json();
    if args.json {
        println!("{json}");
        return Ok(());
    }
    println!(
        "{}:{} for user {}  (retention {} days, counting events since {})",
        x.facet,
        x.value,
        x.user_token,
        x.retention_days,
        json["windowStart"].as_str().unwrap_or("?")
    );
    println!(
        "  {:<10} {:<16} {:<12} {:<20} {:>6} {:>6} {:>5} {:>5} {:>12}  leaves at",
        "day", "user", "type", "name", "events", "count", "event", "facet", "contribution"
    );
    for (c, row) in x
        .contributions
        .iter()
        .zip(json["contributions"].as_array().into_iter().flatten())
    {
        println!(
            "  {:<10} {:<16} {:<12} {:<20} {:>6} {:>6} {:>5} {:>5} {:>12}  {}",
            row["day"].as_str().unwrap_or("?"),
            c.user_token,
            c.event_type.as_str(),
            c.event_name,
            c.events,
            c.count,
            c.event_score,
            c.facet_score,
            c.contribution,
            row["leavesAt"].as_str().unwrap_or("?")
        );
    }
    for u in &x.not_scored {
        println!(
            "  (not in the strategy: {} {:?}, {} events, count {})",
            u.event_type.as_str(),
            u.event_name,
            u.events,
            u.count
        );
    }
    println!("  raw = {}", x.raw);
    if let Some(m) = &x.max {
        println!("  max raw = {} ({}:{})", m.raw, m.facet, m.value);
    }
    match (&x.rank, x.kept) {
        (Some(rank), true) => println!(
            "  rank {rank} of {} values of {}, kept",
            x.facet_values, x.facet
        ),
        (Some(rank), false) => println!(
            "  rank {rank} of {} values of {}: not among the {} kept",
            x.facet_values,
            x.facet,
            affinity_engine::scoring::MAX_VALUES_PER_FACET
        ),
        (None, _) => println!("  no scored event counts this value"),
    }
    match json["formula"].as_str() {
        Some(formula) => println!("  score = {formula}"),
        None => println!("  not in the profile"),
    }
    match &json["nextChange"] {
        serde_json::Value::Null => println!("  no day leaving retention changes it"),
        next => println!(
            "  next change at {} (day {} leaves): raw {}, max raw {}, score {}",
            next["at"].as_str().unwrap_or("?"),
            next["day"].as_str().unwrap_or("?"),
            next["raw"],
            next["maxRaw"],
            next["score"]
        ),
    }
    Ok(())
}

#[derive(clap::Args)]
pub struct PreviewArgs {
    #[command(flatten)]
    app: AppArgs,
    /// The candidate strategy (the Algolia strategy JSON), FILE or `-`.
    #[arg(long)]
    file: PathBuf,
    /// A user to score (repeatable; at most 100).
    #[arg(long = "user", value_name = "TOKEN", conflicts_with = "sample")]
    users: Vec<String>,
    /// Score N users sampled from the application (1 to 100; the sample
    /// is deterministic, see docs/api.md).
    #[arg(long, value_name = "N")]
    sample: Option<usize>,
}

/// Print the preview answer's JSON: each user's profile under the current
/// strategy and under the candidate. Nothing is stored.
pub fn preview(args: PreviewArgs, backend: &BackendArgs) -> anyhow::Result<()> {
    let candidate = read_strategy(&args.file)?;
    let engine = open_engine(backend)?;
    let app = args.app.app();
    let users = match args.sample {
        Some(n) => engine.sample_users(app, n)?,
        None if args.users.is_empty() => bail!("give --user TOKEN (repeatable) or --sample N"),
        None => args.users,
    };
    let users: Vec<serde_json::Value> = engine
        .preview(app, &candidate, &users)?
        .iter()
        .map(|p| p.to_json())
        .collect();
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({ "users": users }))?
    );
    eprintln!("nothing was stored: `affinity strategy set` makes a strategy current");
    Ok(())
}
