//! `affinity hot`: the hot lists, whose users' day rows and events are
//! spread over sub-rows (`affinity_engine::hot`, `docs/design/profiles.md`).

use anyhow::Context;
use serde_json::json;

use affinity_engine::hot::{list_cutoff_millis, list_is_final, next_open_list, MAX_SUB_ROWS};
use affinity_engine::DAY_MILLIS;

use crate::backend::BackendArgs;
use crate::engine_cmds::{open_engine, AppArgs};

#[derive(clap::Subcommand)]
pub enum HotCommand {
    /// Print a day's hot list as JSON: its users and their sub-rows,
    /// when it was fixed, and whether it is final.
    List {
        #[command(flatten)]
        app: AppArgs,
        /// The day, `YYYY-MM-DD` (default: today).
        #[arg(long)]
        day: Option<String>,
    },
    /// Spread users' day rows and events over sub-rows: put them on the hot lists of
    /// `--days` days from `--day` (each refused once it is fixed, 4 hours
    /// before its day).
    Add {
        #[command(flatten)]
        app: AppArgs,
        /// A user token (repeat for several).
        #[arg(long = "user", required = true)]
        users: Vec<String>,
        /// Sub-rows each user's day is spread over (2 to 256).
        #[arg(long)]
        sub_rows: u32,
        /// The day, `YYYY-MM-DD` (default: the next day whose list is
        /// still open).
        #[arg(long)]
        day: Option<String>,
        /// Lists of this many days from `--day`.
        #[arg(long, default_value_t = 1)]
        days: u32,
    },
    /// Take users off a day's hot list (refused once it is fixed, as
    /// adding is).
    Remove {
        #[command(flatten)]
        app: AppArgs,
        /// A user token (repeat for several).
        #[arg(long = "user", required = true)]
        users: Vec<String>,
        /// The day, `YYYY-MM-DD` (default: the next day whose list is
        /// still open).
        #[arg(long)]
        day: Option<String>,
    },
}

/// `--day`, or the next day whose list is still open.
fn day_or_next_open(day: Option<String>, now: i64) -> anyhow::Result<i64> {
    match day {
        Some(text) => parse_day(&text),
        None => Ok(next_open_list(now)),
    }
}

/// `YYYY-MM-DD` as a day number.
fn parse_day(text: &str) -> anyhow::Result<i64> {
    let millis = affinity_rowkey::time::parse_millis(&format!("{text}T00:00:00.000Z"))
        .with_context(|| format!("--day {text:?} must be a date, YYYY-MM-DD"))?;
    Ok(millis.div_euclid(DAY_MILLIS))
}

pub fn run(cmd: HotCommand, backend: &BackendArgs) -> anyhow::Result<()> {
    let engine = open_engine(backend)?;
    let now = engine.now_millis();
    match cmd {
        HotCommand::List { app, day } => {
            let day = match day {
                Some(text) => parse_day(&text)?,
                None => now.div_euclid(DAY_MILLIS),
            };
            let handle = engine.app(app.app())?;
            let list = engine.hot_list(&handle, day)?;
            let users: Vec<_> = list
                .users()
                .into_iter()
                .map(|(user, rows)| json!({"userToken": user, "subRows": rows}))
                .collect();
            println!(
                "{}",
                serde_json::to_string_pretty(&json!({
                    "day": affinity_engine::hot::day_text(day),
                    "fixedAt": affinity_rowkey::time::format_seconds(list_cutoff_millis(day))?,
                    "final": list_is_final(day, now),
                    "users": users,
                }))?
            );
        }
        HotCommand::Add {
            app,
            users,
            sub_rows,
            day,
            days,
        } => {
            let day = day_or_next_open(day, now)?;
            if !(2..=MAX_SUB_ROWS).contains(&sub_rows) {
                anyhow::bail!("--sub-rows {sub_rows}: must be 2 to {MAX_SUB_ROWS}");
            }
            if days == 0 {
                anyhow::bail!("--days must be at least 1");
            }
            let listed: Vec<(String, u32)> = users.iter().map(|u| (u.clone(), sub_rows)).collect();
            let last = day + i64::from(days) - 1;
            for d in day..=last {
                engine.publish_hot_users(app.app(), d, &listed)?;
            }
            eprintln!(
                "{} user(s) on the hot lists of {} to {}: their rows of those days spread over {sub_rows} sub-rows",
                listed.len(),
                affinity_engine::hot::day_text(day),
                affinity_engine::hot::day_text(last)
            );
        }
        HotCommand::Remove { app, users, day } => {
            let day = day_or_next_open(day, now)?;
            engine.unlist_hot_users(app.app(), day, &users)?;
            eprintln!(
                "{} user(s) off the hot list of {}",
                users.len(),
                affinity_engine::hot::day_text(day)
            );
        }
    }
    Ok(())
}
