//! `affinity`: the command-line front of Affinity. Glue only: every command
//! parses its flags, opens a backend and calls into the library crates.

mod backend;
mod demo;
mod engine_cmds;
mod events;
mod explain;
mod fds;
mod geo;
mod heap;
mod hot;
mod jobs;
mod keys;
mod search;
mod serve;
mod signals;
mod table;
mod trends;

use clap::{Parser, Subcommand};

/// mimalloc: the allocator-heavy paths (ingest, scans) run measurably
/// faster than on the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Affinity: personalization profiles on the Bigtable data model.
#[derive(Parser)]
#[command(name = "affinity", version, about, propagate_version = true)]
struct Cli {
    #[command(flatten)]
    backend: backend::BackendArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Look inside any backend, like `cbt`: create tables, write and read cells.
    Table(table::TableArgs),
    /// The walk-through: a generated shop through the real engine on the
    /// embedded store, profiles, a candidate strategy exported, then set.
    Demo(demo::DemoArgs),
    /// Serve the HTTP API (Algolia Insights and Personalization shapes).
    Serve(serve::ServeArgs),
    /// Catalog objects and their facets.
    #[command(subcommand)]
    Catalog(engine_cmds::CatalogCommand),
    /// A running server's events debugger: `affinity events tail`.
    #[command(subcommand)]
    Events(events::EventsCommand),
    /// The application's personalization strategy.
    #[command(subcommand)]
    Strategy(engine_cmds::StrategyCommand),
    /// Ingest Insights events (JSON lines) into the events table and profiles.
    Ingest(engine_cmds::IngestArgs),
    /// Every user's profile scored from the events table, under the current
    /// or a candidate strategy, as JSON lines (a batch job, shardable).
    Export(engine_cmds::ExportArgs),
    /// Re-derive profile state from the events table: restores what is
    /// missing, never double counts (a batch job: shardable, restartable).
    Rebuild(engine_cmds::RebuildArgs),
    /// Fold closed days into every user's rollup and drop expired days from
    /// it, so profile reads stay fast however long the history (a batch
    /// job: shardable, restartable; `affinity serve` runs it on a schedule).
    Maintain(engine_cmds::MaintainArgs),
    /// Batch jobs (maintain, rebuild) recorded in the store: list them,
    /// show one with its shards and progress.
    #[command(subcommand)]
    Jobs(jobs::JobsCommand),
    /// Print a user's profile.
    Profile(engine_cmds::ProfileArgs),
    /// Hot users: list or add the users whose day rows and events are
    /// spread over sub-rows (ingestion lists the busiest by itself).
    #[command(subcommand)]
    Hot(hot::HotCommand),
    /// Delete a user's events and profile (GDPR), verified by a scan.
    DeleteUser(engine_cmds::DeleteUserArgs),
    /// Delete an application: its events, profiles, trends, catalog,
    /// strategy, job records and settings; no other application's rows.
    DeleteApp(engine_cmds::DeleteAppArgs),
    /// Migrate an application between the narrow and wide schemas:
    /// start (dual-write), backfill, verify, cut-over.
    #[command(subcommand)]
    Migrate(engine_cmds::MigrateCommand),
    /// Located points (sensors, vehicles, ships): load a CSV, query an
    /// area and time range, on Hilbert-curve keys.
    #[command(subcommand)]
    Geo(geo::GeoCommand),
    /// Regional trends: the top facet values of events on located objects
    /// in an area and time window, weighted by the strategy.
    Trends(trends::TrendsArgs),
    /// Row keys (salted keys, Hilbert indexes and area + time range
    /// covers) and API keys (secured API keys, key digests).
    #[command(subcommand)]
    Keys(keys::KeysCommand),
    /// Benchmarks that print their figures.
    #[command(subcommand)]
    Bench(affinity_bench::BenchCommand),
}

fn main() {
    heap::limit_arenas();
    fds::raise_open_files();
    let cli = Cli::parse();
    if matches!(cli.command, Command::Serve(_) | Command::Bench(_)) {
        heap::trim_every(heap::TRIM_EVERY);
    }
    let backend = &cli.backend;
    let result = match cli.command {
        Command::Table(args) => table::run(args, backend),
        Command::Demo(args) => backend
            .refuse("demo", false, true)
            .and_then(|()| demo::run(args, backend.data.clone())),
        Command::Serve(args) => serve::run(args, backend),
        Command::Catalog(cmd) => engine_cmds::catalog(cmd, backend),
        Command::Events(cmd) => backend
            .refuse("events", true, true)
            .and_then(|()| events::run(cmd)),
        Command::Strategy(cmd) => engine_cmds::strategy(cmd, backend),
        Command::Hot(cmd) => hot::run(cmd, backend),
        Command::Ingest(args) => engine_cmds::ingest(args, backend),
        Command::Export(args) => engine_cmds::export(args, backend),
        Command::Rebuild(args) => engine_cmds::rebuild(args, backend),
        Command::Maintain(args) => engine_cmds::maintain(args, backend),
        Command::Jobs(cmd) => jobs::jobs(cmd, backend),
        Command::Profile(args) => engine_cmds::profile(args, backend),
        Command::DeleteUser(args) => engine_cmds::delete_user(args, backend),
        Command::DeleteApp(args) => engine_cmds::delete_app(args, backend),
        Command::Migrate(cmd) => engine_cmds::migrate(cmd, backend),
        Command::Geo(cmd) => geo::run(cmd, backend),
        Command::Trends(args) => trends::run(args, backend),
        Command::Keys(cmd) => keys::run(cmd, backend),
        // Only the flags given: a benchmark never writes into the data
        // directory of the environment.
        Command::Bench(cmd) => affinity_bench::run(
            cmd,
            &affinity_bench::BenchBackend {
                data: backend.data.clone(),
                bigtable: backend.bigtable.clone(),
            },
        ),
    };
    if let Err(err) = result {
        eprintln!("error: {err:#}");
        std::process::exit(1);
    }
}
