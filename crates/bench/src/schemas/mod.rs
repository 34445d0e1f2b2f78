//! `affinity bench schemas`: the write-up's schema experiment. For each
//! application profile, the same generated events go into a narrow and a
//! wide application; each schema then exports every profile
//! (`Engine::export`, into a sink that counts profiles and bytes and writes
//! nothing) with strategies using 1, 3, half and all of the 20 facets,
//! `--repeat` times in a row (runs are sequential, so they do not disturb
//! each other), recording wall time, what the store returned (cells,
//! bytes), the process's peak memory, and whether the exported profiles of
//! the checked users are the scoring reference's, in both schemas.
//! `--scaling` adds a run at growing event counts. Writes `schemas.md`,
//! `schemas.svg` (and `--json`) into `--out`, and prints the Markdown.
//!
//! Submodules: [`workload`] (the seeded events), [`measure`] (one case on
//! one backend, reads counted by `affinity_model::counting`), [`report`]
//! (Markdown, JSON), [`chart`] (SVG).

mod chart;
mod measure;
mod report;
mod workload;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use affinity_model::counting::CountingStore;
use affinity_model::Store;
use anyhow::Context;

use measure::{Backend, Case, Settings};
use report::{Record, Run};
use workload::{AppProfile, FACETS};

/// Which backends to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    Embedded,
    Emulator,
    Both,
}

#[derive(clap::Args)]
pub struct SchemasBenchArgs {
    /// Events per application profile on the embedded store (the default
    /// runs in about a minute and a half on an otherwise idle 2-core
    /// machine).
    #[arg(long, default_value_t = 200_000)]
    events: u64,
    /// Events per application profile on the Bigtable emulator (much
    /// slower: every cell crosses gRPC, and the emulator evaluates the wide
    /// schema's qualifier-regex filter at a few hundred rows/s).
    #[arg(long, default_value_t = 2_000)]
    emulator_events: u64,
    /// Application profiles: few-heavy (~5,000 events per user), balanced
    /// (~100), many-light (~5).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "few-heavy,balanced,many-light"
    )]
    profiles: Vec<String>,
    /// Facets the strategies score, out of 20: numbers, `half`, `all`.
    #[arg(long, value_delimiter = ',', default_value = "1,3,half,all")]
    facets: Vec<String>,
    /// Timed exports of each (schema, strategy), one after the other.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Backends to measure.
    #[arg(long, value_enum, default_value_t = BackendChoice::Embedded)]
    backend: BackendChoice,
    /// Directory for schemas.md and schemas.svg (default
    /// bench-results/schemas-<UTC time>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Also write the records as a JSON list to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Add the scaling run (embedded store, `--scaling-profile`, 1 and all
    /// facets) at these event counts.
    #[arg(
        long,
        value_name = "N,N,...",
        num_args = 0..=1,
        default_missing_value = "1000000,2000000,4000000,8000000"
    )]
    scaling: Option<String>,
    /// The application profile of the scaling run.
    #[arg(long, default_value = "balanced")]
    scaling_profile: String,
    /// Scanning threads of each export.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Check the exported profiles of at most this many users against the
    /// scoring reference (spread evenly over all users; 0: every user).
    #[arg(long, default_value_t = 10_000)]
    check_users: usize,
    /// Seed of the generated workloads.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

/// The parsed lists of the arguments.
struct Plan {
    profiles: Vec<AppProfile>,
    facets: Vec<usize>,
    scaling: Vec<u64>,
    scaling_profile: AppProfile,
}

fn plan(args: &SchemasBenchArgs) -> anyhow::Result<Plan> {
    let profiles = args
        .profiles
        .iter()
        .map(|p| AppProfile::parse(p.trim()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut facets = args
        .facets
        .iter()
        .map(|f| workload::parse_facets_used(f.trim()))
        .collect::<Result<Vec<_>, _>>()?;
    facets.sort_unstable();
    facets.dedup();
    let scaling = match &args.scaling {
        None => Vec::new(),
        Some(list) => list
            .split(',')
            .map(|n| {
                n.trim()
                    .replace('_', "")
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .with_context(|| format!("--scaling: {n:?} is not a positive event count"))
            })
            .collect::<anyhow::Result<_>>()?,
    };
    anyhow::ensure!(args.events > 0, "--events must be positive");
    anyhow::ensure!(args.repeat > 0, "--repeat must be positive");
    Ok(Plan {
        profiles,
        facets,
        scaling,
        scaling_profile: AppProfile::parse(&args.scaling_profile)?,
    })
}

fn default_out() -> PathBuf {
    let now = affinity_model::apply::now_micros() / 1000;
    let stamp = affinity_rowkey::time::format_seconds(now)
        .unwrap_or_default()
        .replace(['-', ':'], "");
    PathBuf::from("bench-results").join(format!("schemas-{stamp}"))
}

fn log(line: String) {
    eprintln!("{line}");
}

/// Run the benchmark; the embedded store lives in `data` (default: a
/// temporary directory, removed afterwards), where the benchmark's tables
/// are replaced.
pub fn run(args: SchemasBenchArgs, data: Option<&Path>) -> anyhow::Result<()> {
    let plan = plan(&args)?;
    let out = args.out.clone().unwrap_or_else(default_out);
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let settings = Settings {
        repeat: args.repeat,
        threads: args.threads,
        check_users: args.check_users,
        seed: args.seed,
    };
    let mut records: Vec<Record> = Vec::new();
    let embedded_wanted = args.backend != BackendChoice::Emulator || !plan.scaling.is_empty();
    let (dir, _tmp) = crate::data_dir(data)?;
    if embedded_wanted {
        let mut options = affinity_embedded::EmbeddedOptions::default();
        // Bulk loads unsynced: the benchmark measures reads, not the WAL.
        options.sync_writes = false;
        let embedded = Arc::new(
            affinity_embedded::EmbeddedStore::open_with(&dir, options)
                .with_context(|| format!("opening the embedded store in {}", dir.display()))?,
        );
        let flush_target = Arc::clone(&embedded);
        let backend = Backend {
            name: "embedded".into(),
            store: Arc::new(CountingStore::new(embedded)),
            settle: Box::new(move || flush_target.flush().map_err(anyhow::Error::from)),
        };
        log(format!("embedded store in {}", dir.display()));
        if args.backend != BackendChoice::Emulator {
            for &profile in &plan.profiles {
                let case = Case {
                    run: Run::Profiles,
                    profile,
                    events: args.events,
                    facets: plan.facets.clone(),
                };
                records.extend(measure::measure(&backend, &case, &settings, &log)?);
            }
        }
        for &events in &plan.scaling {
            let case = Case {
                run: Run::Scaling,
                profile: plan.scaling_profile,
                events,
                facets: vec![1, FACETS.len()],
            };
            records.extend(measure::measure(&backend, &case, &settings, &log)?);
        }
    }
    if args.backend != BackendChoice::Embedded {
        // The emulator named by BIGTABLE_EMULATOR_HOST, or one started here.
        let mut _emulator = None;
        let grpc = if std::env::var_os("BIGTABLE_EMULATOR_HOST").is_some() {
            affinity_bigtable::BigtableStore::connect("bench", "schemas")?
        } else {
            let emulator = affinity_bigtable::emulator::Emulator::start()
                .context("starting the Bigtable emulator (or use --backend embedded)")?;
            let store = emulator.store("bench", "schemas")?;
            _emulator = Some(emulator);
            store
        };
        let inner: Arc<dyn Store> = Arc::new(grpc);
        let backend = Backend {
            name: "emulator".into(),
            store: Arc::new(CountingStore::new(inner)),
            settle: Box::new(|| Ok(())),
        };
        for &profile in &plan.profiles {
            let case = Case {
                run: Run::Profiles,
                profile,
                events: args.emulator_events,
                facets: plan.facets.clone(),
            };
            records.extend(measure::measure(&backend, &case, &settings, &log)?);
        }
    }
    let md = report::markdown(&describe(&args, &plan), &records);
    print!("{md}");
    std::fs::write(out.join("schemas.md"), &md)
        .with_context(|| format!("writing {}", out.join("schemas.md").display()))?;
    std::fs::write(out.join("schemas.svg"), chart::chart(&records))
        .with_context(|| format!("writing {}", out.join("schemas.svg").display()))?;
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report::json(&records))?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    log(format!("wrote {} (schemas.md, schemas.svg)", out.display()));
    anyhow::ensure!(
        records.iter().all(|r| r.profiles_match),
        "exported profiles differ from the scoring reference or between narrow and wide \
         (see the log and the table)"
    );
    Ok(())
}

/// The settings paragraph of the report.
fn describe(args: &SchemasBenchArgs, plan: &Plan) -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "Events per profile: {} (embedded), {} (emulator); seed {}; {} exports per (schema, strategy), \
         sequential, {} scanning threads each; {} facets per event, strategies scoring {:?}; \
         exported profiles checked against the scoring reference for up to {} users per strategy \
         and schema (in one more, untimed export); {} CPU cores. Times are wall time of \
         `Engine::export` of every profile into a sink that counts the profiles and their JSON \
         bytes and writes nothing, so they measure the export itself, not disk writes; cells and \
         MiB read are what the store returned to the engine per export (family + qualifier + \
         value), profiles and MiB out what the export handed to the sink; peak RSS is the whole \
         process's (it includes the store's caches and memtables). Scaling profile: {}.",
        args.events,
        args.emulator_events,
        args.seed,
        args.repeat,
        args.threads,
        FACETS.len(),
        plan.facets,
        args.check_users,
        cores,
        plan.scaling_profile.as_str()
    )
}
