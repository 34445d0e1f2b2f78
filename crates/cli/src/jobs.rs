//! Batch jobs as shared records: `maintain` and `rebuild` run as jobs any
//! process on the store can list (`affinity jobs list|show`, `GET
//! /1/jobs`), their shards under leases (see the engine's `jobs` module).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use affinity_engine::{Engine, JobKind, JobStatus, Progress, WorkOptions};
use anyhow::bail;

use crate::backend::BackendArgs;
use crate::engine_cmds::{open_engine, AppArgs, JobArgs};

/// `--lease`: a length such as `15s` or `2m`.
pub fn parse_lease(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?} is not a lease length such as 15s or 2m");
    let (number, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let n: u64 = number.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => n,
        "m" => n.saturating_mul(60),
        _ => return Err(bad()),
    };
    if !(1..=3600).contains(&secs) {
        return Err(format!("lease {text:?}: need 1s to 60m"));
    }
    Ok(Duration::from_secs(secs))
}

/// Create (or join) the job `args` name and work on it until every shard
/// is done; fails when a shard failed.
pub fn run(
    engine: &Engine,
    app: &str,
    kind: JobKind,
    args: &JobArgs,
    progress: &Progress,
) -> anyhow::Result<JobStatus> {
    let (index, shards) = args.shard.unwrap_or((0, 1));
    let id = match (&args.job, args.shard) {
        (Some(id), _) => id.clone(),
        (None, None) => engine.new_job_id(),
        (None, Some(_)) => {
            bail!("--shard needs --job NAME: every shard process gives the same name")
        }
    };
    engine.create_job(app, &id, kind, shards)?;
    let stop = crate::signals::on_stop_request();
    eprintln!("job {id} ({} of app {app}, {shards} shards)", kind.as_str());
    let options = WorkOptions {
        lease: args.lease,
        ..WorkOptions::this_process(args.threads.max(1))
    };
    let done = AtomicBool::new(false);
    let worked = std::thread::scope(|s| {
        // SIGTERM or ctrl-c: hand the shard back (a second one ends the
        // process at once). The wait wakes as the signal arrives; its
        // timeout only bounds how long this thread outlives the work.
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if stop.wait(Duration::from_millis(20)) {
                    progress.release.store(true, Ordering::Relaxed);
                    return;
                }
            }
        });
        let worked = engine.work_on_job(app, &id, Some(index), &options, progress);
        done.store(true, Ordering::Relaxed);
        worked
    });
    let job = match worked {
        Err(affinity_engine::Error::Stopped) => {
            // Stopped before this process took a shard (the signal came
            // first, or other workers held them): nothing ran here, and
            // nothing was handed back.
            let never_taken = engine.job(app, &id).ok().flatten().is_some_and(|job| {
                job.shards
                    .iter()
                    .all(|s| s.worker.as_deref() != Some(options.worker.as_str()))
            });
            let what = if never_taken {
                format!(
                    "left as it was (this process had not taken shard {index} yet: nothing ran here); \
                     any worker runs it"
                )
            } else {
                format!(
                    "handed back (shard {index} given up at once, its finished ranges kept); \
                     any worker resumes it"
                )
            };
            bail!(
                "stopped: job {id} {what}: `affinity {} --app {app} --job {id}`, or a server",
                kind.as_str()
            )
        }
        other => other?,
    };
    if job.state() == "failed" {
        let json = job.to_json(engine.now_millis());
        bail!("job {id} failed: {}", json["error"].as_str().unwrap_or(""));
    }
    Ok(job)
}

/// A number from a finished job's summed report.
pub fn report_count(engine: &Engine, job: &JobStatus, field: &str) -> u64 {
    job.to_json(engine.now_millis())["report"][field]
        .as_u64()
        .unwrap_or(0)
}

#[derive(clap::Subcommand)]
pub enum JobsCommand {
    /// The application's jobs, newest first, one line each.
    List {
        #[command(flatten)]
        app: AppArgs,
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// One job as `GET /1/jobs/{jobID}` shows it (JSON).
    Show {
        #[command(flatten)]
        app: AppArgs,
        /// The job's id.
        id: String,
    },
}

pub fn jobs(cmd: JobsCommand, backend: &BackendArgs) -> anyhow::Result<()> {
    let engine = open_engine(backend)?;
    match cmd {
        JobsCommand::List { app, limit } => {
            let now = engine.now_millis();
            for job in engine.jobs(app.app(), limit)? {
                let json = job.to_json(now);
                let done = job.shards.iter().filter(|s| s.state.finished()).count();
                println!(
                    "{}  {:8}  {:9}  {}  shards {done}/{} done",
                    job.id,
                    job.kind.as_str(),
                    job.state(),
                    json["createdAt"].as_str().unwrap_or(""),
                    job.shards.len()
                );
            }
        }
        JobsCommand::Show { app, id } => match engine.job(app.app(), &id)? {
            Some(job) => println!(
                "{}",
                serde_json::to_string_pretty(&job.to_json(engine.now_millis()))?
            ),
            None => bail!("no job {id:?} in application {:?}", app.app()),
        },
    }
    Ok(())
}
