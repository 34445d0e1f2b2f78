//! The engine's commands: catalog, strategy, ingest, export, rebuild,
//! maintain, profile, delete-user, migrate. Each opens the backend, calls
//! one engine function and prints its result.

use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use affinity_engine::{AppConfig, Engine, ExportOptions, JobKind, Progress, Schema, Strategy};
use anyhow::{bail, Context};

use crate::backend::BackendArgs;

/// The flag every engine command shares: the application.
#[derive(clap::Args)]
pub struct AppArgs {
    /// Application id (the tenant).
    #[arg(long)]
    app: String,
}

impl AppArgs {
    pub fn app(&self) -> &str {
        &self.app
    }
}

pub fn open_engine(backend: &BackendArgs) -> anyhow::Result<Engine> {
    Ok(Engine::open(backend.open()?)?)
}

/// `FILE` or `-` for stdin.
fn open_input(path: &PathBuf) -> anyhow::Result<Box<dyn BufRead>> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(BufReader::new(std::io::stdin())));
    }
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    Ok(Box::new(BufReader::new(file)))
}

#[derive(clap::Subcommand)]
pub enum CatalogCommand {
    /// Load objects from JSON lines (`{"objectID":..,"brand":..,..}` a line).
    Load {
        #[command(flatten)]
        app: AppArgs,
        /// Index (catalog) name the objects belong to.
        #[arg(long)]
        index: String,
        /// JSON lines file, or `-` for stdin.
        file: PathBuf,
    },
    /// Delete objects (events already counted keep what they resolved to).
    Delete {
        #[command(flatten)]
        app: AppArgs,
        /// Index (catalog) name the objects belong to.
        #[arg(long)]
        index: String,
        /// The objects' ids.
        #[arg(required = true)]
        object_ids: Vec<String>,
    },
}

pub fn catalog(cmd: CatalogCommand, backend: &BackendArgs) -> anyhow::Result<()> {
    match cmd {
        CatalogCommand::Load { app, index, file } => {
            let engine = open_engine(backend)?;
            let n = engine.load_catalog(&app.app, &index, open_input(&file)?)?;
            println!("loaded {n} objects into index {index} of app {}", app.app);
        }
        CatalogCommand::Delete {
            app,
            index,
            object_ids,
        } => {
            let engine = open_engine(backend)?;
            let ids: Vec<&str> = object_ids.iter().map(String::as_str).collect();
            engine.delete_objects(&app.app, &index, &ids)?;
            println!(
                "deleted {} object ids from index {index} of app {}",
                ids.len(),
                app.app
            );
        }
    }
    Ok(())
}

#[derive(clap::Subcommand)]
pub enum StrategyCommand {
    /// Store a new strategy (the Algolia strategy JSON) from FILE or `-`.
    Set {
        #[command(flatten)]
        app: AppArgs,
        file: PathBuf,
    },
    /// Print the current strategy as JSON.
    Get {
        #[command(flatten)]
        app: AppArgs,
    },
    /// Score users' profiles under a candidate strategy next to the
    /// current ones; nothing is stored.
    Preview(crate::explain::PreviewArgs),
    /// The application's A/B test of strategies.
    #[command(subcommand)]
    Variants(VariantsCommand),
}

#[derive(clap::Subcommand)]
pub enum VariantsCommand {
    /// Start or replace the test: `{"variants": [{"name", "trafficPercentage",
    /// "strategy"?}, ...]}` from FILE or `-` (see docs/api.md).
    Set {
        #[command(flatten)]
        app: AppArgs,
        file: PathBuf,
    },
    /// Print the running test as JSON (`{"variants": []}` when none).
    Get {
        #[command(flatten)]
        app: AppArgs,
    },
    /// End the test: every user is served the application's strategy.
    Clear {
        #[command(flatten)]
        app: AppArgs,
    },
}

pub fn strategy(cmd: StrategyCommand, backend: &BackendArgs) -> anyhow::Result<()> {
    match cmd {
        StrategyCommand::Set { app, file } => {
            let strategy = read_strategy(&file)?;
            let updated_at = open_engine(backend)?.set_strategy(&app.app, &strategy)?;
            println!(
                "{}",
                serde_json::json!({
                    "message": "Strategy was successfully updated.",
                    "updatedAt": affinity_rowkey::time::format_seconds(updated_at)?,
                })
            );
            eprintln!("profile reads score with it from now on");
        }
        StrategyCommand::Get { app } => match open_engine(backend)?.strategy(&app.app)? {
            Some(strategy) => println!("{}", serde_json::to_string_pretty(&strategy.to_json())?),
            None => bail!("application {:?} has no strategy", app.app),
        },
        StrategyCommand::Preview(args) => crate::explain::preview(args, backend)?,
        StrategyCommand::Variants(cmd) => variants(cmd, backend)?,
    }
    Ok(())
}

fn variants(cmd: VariantsCommand, backend: &BackendArgs) -> anyhow::Result<()> {
    let updated = |message: &str, updated_at: i64| -> anyhow::Result<()> {
        println!(
            "{}",
            serde_json::json!({
                "message": message,
                "updatedAt": affinity_rowkey::time::format_seconds(updated_at)?,
            })
        );
        Ok(())
    };
    match cmd {
        VariantsCommand::Set { app, file } => {
            let mut text = String::new();
            open_input(&file)?.read_to_string(&mut text)?;
            let json: serde_json::Value = serde_json::from_str(&text)
                .with_context(|| format!("{} is not JSON", file.display()))?;
            let test = affinity_engine::Variants::from_json(&json)?;
            let updated_at = open_engine(backend)?.set_variants(&app.app, &test)?;
            updated("Variants were successfully updated.", updated_at)?;
            eprintln!("servers serve the test within a second");
        }
        VariantsCommand::Get { app } => {
            let json = match open_engine(backend)?.variants(&app.app)? {
                Some(test) => test.to_json(),
                None => serde_json::json!({"variants": []}),
            };
            println!("{}", serde_json::to_string_pretty(&json)?);
        }
        VariantsCommand::Clear { app } => {
            let updated_at = open_engine(backend)?.clear_variants(&app.app)?;
            updated(
                "The A/B test was ended: every user is served the application's strategy.",
                updated_at,
            )?;
        }
    }
    Ok(())
}

/// A strategy (the Algolia strategy JSON) from `FILE` or `-`.
pub fn read_strategy(file: &PathBuf) -> anyhow::Result<Strategy> {
    let mut text = String::new();
    open_input(file)?.read_to_string(&mut text)?;
    let json: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", file.display()))?;
    Ok(Strategy::from_json(&json)?)
}

#[derive(clap::Args)]
pub struct IngestArgs {
    #[command(flatten)]
    app: AppArgs,
    /// Events schema of the application (set on its first use; changing it
    /// later is a migration).
    #[arg(long, value_parser = ["narrow", "wide"])]
    schema: Option<String>,
    /// Retention in days (default 90 for a new application).
    #[arg(long)]
    retention_days: Option<u32>,
    /// Salt a NEW application's events table over N buckets (hot
    /// applications and users); fixed once the application exists.
    #[arg(long, value_name = "N")]
    salt_buckets: Option<u32>,
    /// Give the application tables of its own instead of the shared ones
    /// (isolation); only an application without events can move to them.
    /// A retention other than 90 days gives it its own tables anyway.
    #[arg(long)]
    dedicated_tables: bool,
    /// JSON lines, one Insights event per line, or `-` for stdin.
    file: PathBuf,
}

pub fn ingest(args: IngestArgs, backend: &BackendArgs) -> anyhow::Result<()> {
    let engine = open_engine(backend)?;
    let app_id = &args.app.app;
    if args.dedicated_tables {
        engine.isolate_app(app_id)?;
    }
    if args.schema.is_some() || args.retention_days.is_some() {
        let current = engine.app(app_id)?.config;
        let schema = match &args.schema {
            Some(s) => Schema::parse(s)?,
            None => current.schema,
        };
        let config = AppConfig {
            schema,
            retention_days: args.retention_days.unwrap_or(current.retention_days),
        };
        match args.salt_buckets {
            Some(buckets) => {
                engine.configure_salted_app(app_id, config, buckets)?;
            }
            None if config != current => {
                engine.configure_app(app_id, config)?;
            }
            None => {}
        }
    } else if let Some(buckets) = args.salt_buckets {
        let config = engine.app(app_id)?.config;
        engine.configure_salted_app(app_id, config, buckets)?;
    }
    let limits = engine.retention_limits(app_id)?;
    let report = engine.ingest_json_lines(app_id, open_input(&args.file)?, &limits)?;
    println!(
        "ingested {} events: {} stored, {} repeated within the input, {} unknown objects \
         (an event stored before, as by a retried file, still counts once)",
        report.events, report.stored, report.duplicates, report.unknown_objects
    );
    Ok(())
}

#[derive(clap::Args)]
pub struct ExportArgs {
    #[command(flatten)]
    app: AppArgs,
    /// Score under this strategy (the Algolia strategy JSON, or `-`)
    /// instead of the current one: a candidate's effect on everyone,
    /// without setting it.
    #[arg(long, value_name = "FILE")]
    strategy: Option<PathBuf>,
    /// Where the profiles go, one JSON line each (`-`: stdout).
    #[arg(long, value_name = "FILE", default_value = "-")]
    out: PathBuf,
    /// Take only shard I of N (`I/N`, 0-based), so N processes split the
    /// users.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    shard: Option<(usize, usize)>,
    /// Scanning threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
}

fn parse_shard(text: &str) -> Result<(usize, usize), String> {
    let (i, n) = text
        .split_once('/')
        .ok_or_else(|| format!("shard must be I/N, got {text:?}"))?;
    let i: usize = i
        .parse()
        .map_err(|_| format!("shard index {i:?} is not a number"))?;
    let n: usize = n
        .parse()
        .map_err(|_| format!("shard count {n:?} is not a number"))?;
    if n == 0 || i >= n {
        return Err(format!("shard {i}/{n}: need 0 <= I < N"));
    }
    Ok((i, n))
}

pub fn export(args: ExportArgs, backend: &BackendArgs) -> anyhow::Result<()> {
    let engine = open_engine(backend)?;
    let candidate = args.strategy.as_ref().map(read_strategy).transpose()?;
    let to_stdout = args.out.as_os_str() == "-";
    let out: Box<dyn Write + Send> = if to_stdout {
        Box::new(std::io::stdout())
    } else {
        let file = std::fs::File::create(&args.out)
            .with_context(|| format!("creating {}", args.out.display()))?;
        Box::new(file)
    };
    let out = std::sync::Mutex::new(std::io::BufWriter::new(out));
    let sink = |_user: &str, json: &[u8]| -> std::io::Result<()> {
        let mut out = out.lock().unwrap_or_else(|p| p.into_inner());
        out.write_all(json)?;
        out.write_all(b"\n")
    };
    let progress = Progress::default();
    let options = ExportOptions {
        threads: args.threads.max(1),
        shard: args.shard,
    };
    let report = with_progress(&progress, || {
        engine.export(&args.app.app, options, candidate.as_ref(), &sink, &progress)
    })?;
    out.into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .flush()
        .with_context(|| format!("writing {}", args.out.display()))?;
    let secs = progress.snapshot().elapsed.as_secs_f64();
    let strategy = match report.strategy_version {
        Some(v) => format!(
            "the current strategy, updated at {}",
            affinity_rowkey::time::format_seconds(v)?
        ),
        None => "the candidate strategy".to_string(),
    };
    let summary = format!(
        "exported {} profiles from {} events in {secs:.2} s ({:.0} events/s, {} ranges, {strategy})",
        report.profiles,
        report.events,
        report.events as f64 / secs.max(1e-9),
        report.ranges,
    );
    // The profiles alone on stdout, when they go there.
    if to_stdout {
        eprintln!("{summary}");
    } else {
        println!("{summary}");
    }
    Ok(())
}

/// How a batch job over an application runs: `rebuild` and `maintain`.
/// Every run is a job recorded in the store (`affinity jobs`).
#[derive(clap::Args)]
pub struct JobArgs {
    /// Take shard I of N (`I/N`, 0-based) first, so N processes split the
    /// work; give them the same `--job`. Each then takes over shards whose
    /// worker died, and exits once every shard is done.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    pub(crate) shard: Option<(usize, usize)>,
    /// Parallel threads.
    #[arg(long, default_value_t = 2)]
    pub(crate) threads: usize,
    /// The job's id: every process given the same id works on one job
    /// (one split, one record); a rerun skips the ranges already done.
    /// Default: a new id.
    #[arg(long, value_name = "NAME")]
    pub(crate) job: Option<String>,
    /// How long a shard stays this process's without renewal: a shard
    /// whose process died is taken over this long after (`15s`, `2m`).
    #[arg(long, default_value = "15s", value_parser = crate::jobs::parse_lease)]
    pub(crate) lease: Duration,
}

#[derive(clap::Args)]
pub struct RebuildArgs {
    #[command(flatten)]
    app: AppArgs,
    #[command(flatten)]
    job: JobArgs,
}

pub fn rebuild(args: RebuildArgs, backend: &BackendArgs) -> anyhow::Result<()> {
    let engine = open_engine(backend)?;
    let progress = Progress::default();
    let job = with_progress(&progress, || {
        crate::jobs::run(
            &engine,
            &args.app.app,
            JobKind::Rebuild,
            &args.job,
            &progress,
        )
    })?;
    let count = |field| crate::jobs::report_count(&engine, &job, field);
    let secs = progress.snapshot().elapsed.as_secs_f64();
    println!(
        "rebuilt {} users from {} events in {secs:.2} s: the state of {} events restored, \
         {} days marked for reads ({:.0} events/s, {} ranges; job {})",
        count("users"),
        count("events"),
        count("restored"),
        count("markers"),
        count("events") as f64 / secs.max(1e-9),
        count("ranges"),
        job.id,
    );
    Ok(())
}

#[derive(clap::Args)]
pub struct MaintainArgs {
    #[command(flatten)]
    app: AppArgs,
    #[command(flatten)]
    job: JobArgs,
}

pub fn maintain(args: MaintainArgs, backend: &BackendArgs) -> anyhow::Result<()> {
    let engine = open_engine(backend)?;
    let progress = Progress::default();
    let job = with_progress_of(&progress, "day rows", || {
        crate::jobs::run(
            &engine,
            &args.app.app,
            JobKind::Maintain,
            &args.job,
            &progress,
        )
    })?;
    let count = |field| crate::jobs::report_count(&engine, &job, field);
    let secs = progress.snapshot().elapsed.as_secs_f64();
    let conflicts = count("conflicts");
    println!(
        "maintained {} users in {secs:.2} s: {} rollups rewritten from {} day rows, {} users' closed hours of today digested ({:.0} users/s, {} ranges{}; job {})",
        count("users"),
        count("folded"),
        count("rowsRead"),
        count("digested"),
        count("users") as f64 / secs.max(1e-9),
        count("ranges"),
        if conflicts > 0 {
            format!(", {conflicts} users left to the next run: another fold, digest or deletion came first")
        } else {
            String::new()
        },
        job.id,
    );
    Ok(())
}

/// Run `work` while a progress line for `progress` is shown on stderr.
pub fn with_progress<T>(progress: &Progress, work: impl FnOnce() -> T) -> T {
    with_progress_of(progress, "events", work)
}

/// [`with_progress`] counting `unit` (what `Progress::events` counts).
pub fn with_progress_of<T>(progress: &Progress, unit: &str, work: impl FnOnce() -> T) -> T {
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| show_progress(progress, unit, &done));
        let result = work();
        done.store(true, Ordering::Relaxed);
        result
    })
}

/// A progress line on stderr while `done` is false, redrawn in place on a
/// terminal, once every 5 s otherwise.
fn show_progress(progress: &Progress, unit: &str, done: &AtomicBool) {
    let tty = std::io::stderr().is_terminal();
    let every = if tty {
        Duration::from_millis(200)
    } else {
        Duration::from_secs(5)
    };
    let mut waited = Duration::ZERO;
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        waited += Duration::from_millis(50);
        if waited < every {
            continue;
        }
        waited = Duration::ZERO;
        let s = progress.snapshot();
        let width = 30;
        let filled = (width * s.ranges_done)
            .checked_div(s.ranges_total)
            .unwrap_or(0);
        let eta = s
            .eta
            .map_or_else(|| "?".to_string(), |d| format!("{}s", d.as_secs()));
        let line = format!(
            "[{}{}] {}/{} ranges, {} {unit}, {} users, {:.0} {unit}/s, ETA {eta}",
            "#".repeat(filled),
            "-".repeat(width - filled),
            s.ranges_done,
            s.ranges_total,
            s.events,
            s.users,
            s.rate
        );
        let mut err = std::io::stderr().lock();
        let _ = if tty {
            write!(err, "\r{line}\x1b[K")
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
    }
    if tty {
        eprintln!();
    }
}

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ProfileArgs {
    #[command(subcommand)]
    command: Option<crate::explain::ProfileCommand>,
    /// Application id (the tenant).
    #[arg(long, required = true)]
    app: Option<String>,
    /// The user token (or authenticated user token).
    #[arg(required = true)]
    user: Option<String>,
    /// Print exactly the API's profile JSON.
    #[arg(long)]
    json: bool,
}

pub fn profile(args: ProfileArgs, backend: &BackendArgs) -> anyhow::Result<()> {
    let json = args.json;
    let (app, user) = match (args.command, args.app, args.user) {
        (Some(cmd), _, _) => return crate::explain::profile(cmd, backend),
        (None, Some(app), Some(user)) => (app, user),
        _ => bail!("give --app APP and a user token"),
    };
    let engine = open_engine(backend)?;
    let Some(profile) = engine.profile(&app, &user)? else {
        bail!("no profile for user {user:?} in app {app:?}");
    };
    if json {
        println!("{}", profile.to_json());
    } else {
        print_profile(&profile, 10);
    }
    Ok(())
}

/// A profile as a readable table: the top `top` values of each facet.
pub fn print_profile(profile: &affinity_engine::Profile, top: usize) {
    let json = profile.to_json();
    println!(
        "user {}  (last event {})",
        profile.user_token,
        json["lastEventAt"].as_str().unwrap_or("?")
    );
    for (facet, values) in &profile.scores {
        let mut values: Vec<_> = values.iter().collect();
        values.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
        println!("  {facet}");
        for (value, score) in values.iter().take(top) {
            println!(
                "    {:<28} {:>2} {}",
                value,
                score,
                "█".repeat(**score as usize)
            );
        }
        if values.len() > top {
            println!("    ... {} more", values.len() - top);
        }
    }
}

#[derive(clap::Args)]
pub struct DeleteUserArgs {
    #[command(flatten)]
    app: AppArgs,
    user: String,
}

pub fn delete_user(args: DeleteUserArgs, backend: &BackendArgs) -> anyhow::Result<()> {
    let engine = open_engine(backend)?;
    let deleted = engine.delete_user(&args.app.app, &args.user)?;
    let left = engine.user_row_count(&args.app.app, &args.user)?;
    if left != 0 {
        bail!(
            "{left} rows of user {:?} remain after the delete",
            args.user
        );
    }
    println!(
        "deleted user {}: {} event rows, {} profile rows (verified by a scan: none left)",
        args.user, deleted.event_rows, deleted.profile_rows
    );
    Ok(())
}

#[derive(clap::Args)]
pub struct DeleteAppArgs {
    #[command(flatten)]
    app: AppArgs,
}

pub fn delete_app(args: DeleteAppArgs, backend: &BackendArgs) -> anyhow::Result<()> {
    let engine = open_engine(backend)?;
    let app = &args.app.app;
    let tables = engine
        .stored_settings(app)?
        .map(|s| s.tables)
        .unwrap_or_default();
    engine.delete_app(app)?;
    println!(
        "deleted application {app}: settings, strategy, catalog, job records and its {} tables' rows",
        tables.as_str()
    );
    Ok(())
}

#[derive(clap::Subcommand)]
pub enum MigrateCommand {
    /// Start dual-writing new events in the target schema as well.
    Start {
        #[command(flatten)]
        app: AppArgs,
        #[arg(long, value_parser = ["narrow", "wide"])]
        to: String,
    },
    /// Copy the retention window into the target schema (resumable: run
    /// it again after an interruption).
    Backfill {
        #[command(flatten)]
        app: AppArgs,
    },
    /// Check that profiles computed from both schemas are equal.
    Verify {
        #[command(flatten)]
        app: AppArgs,
    },
    /// Switch reads and writes to the target schema (after a verified,
    /// completed backfill).
    CutOver {
        #[command(flatten)]
        app: AppArgs,
    },
    /// Change the salt bucket count of an application's events while it
    /// holds events and serves (exact throughout; run it again with the
    /// same count to resume after an interruption).
    Salt {
        #[command(flatten)]
        app: AppArgs,
        /// The new bucket count (1..=256).
        #[arg(long)]
        buckets: u32,
    },
}

/// How long `migrate start` waits past the settings refresh for ingest
/// requests in flight with the old settings.
const MIGRATE_MARGIN: std::time::Duration = std::time::Duration::from_secs(1);

pub fn migrate(cmd: MigrateCommand, backend: &BackendArgs) -> anyhow::Result<()> {
    match cmd {
        MigrateCommand::Start { app, to } => {
            let settings = open_engine(backend)?.start_migration(&app.app, Schema::parse(&to)?)?;
            // Running servers read the new settings within SETTINGS_REFRESH;
            // the margin covers ingest requests that took the old ones.
            std::thread::sleep(affinity_engine::SETTINGS_REFRESH + MIGRATE_MARGIN);
            println!(
                "app {} now writes {} events and dual-writes {}; next: affinity migrate backfill",
                app.app,
                settings.config.schema.as_str(),
                to
            );
        }
        MigrateCommand::Backfill { app } => {
            let engine = open_engine(backend)?;
            let progress = Progress::default();
            let finished = with_progress(&progress, || engine.backfill(&app.app, &progress, None))?;
            let snap = progress.snapshot();
            println!(
                "backfilled {} events of app {} in {:.1} s{}",
                snap.events,
                app.app,
                snap.elapsed.as_secs_f64(),
                if finished {
                    "; complete"
                } else {
                    "; not complete, run it again"
                }
            );
        }
        MigrateCommand::Verify { app } => {
            let v = open_engine(backend)?.verify_migration(&app.app)?;
            if !v.mismatched.is_empty() {
                bail!(
                    "{} of {} users have different profiles in the two schemas, e.g. {:?}",
                    v.mismatched.len(),
                    v.users,
                    &v.mismatched[..v.mismatched.len().min(5)]
                );
            }
            println!(
                "verified: {} users have equal profiles in both schemas",
                v.users
            );
        }
        MigrateCommand::Salt { app, buckets } => {
            let engine = open_engine(backend)?;
            let progress = Progress::default();
            let report = with_progress(&progress, || {
                engine.migrate_salt(&app.app, buckets, affinity_engine::SALT_SETTLE, &progress)
            })?;
            let from = report
                .from
                .map_or("unsalted".to_string(), |b| format!("{b} buckets"));
            println!(
                "app {} moved from {from} to {} salt buckets: {} rows copied, {} old rows deleted",
                app.app, report.to, report.copied, report.deleted
            );
        }
        MigrateCommand::CutOver { app } => {
            let settings = open_engine(backend)?.cut_over(&app.app)?;
            println!(
                "app {} now uses the {} schema",
                app.app,
                settings.config.schema.as_str()
            );
        }
    }
    Ok(())
}
