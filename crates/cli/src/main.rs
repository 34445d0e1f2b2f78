//! `affinity`: the command-line front of Affinity. Glue only: every command
//! parses its flags, opens a backend and calls into the library crates.

mod backend;
mod bench;
mod keys;
mod table;

use clap::{Parser, Subcommand};

/// Affinity: personalization profiles on the Bigtable data model.
#[derive(Parser)]
#[command(name = "affinity", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Look inside any backend, like `cbt`: create tables, write and read cells.
    Table(table::TableArgs),
    /// Row keys: salted keys, Hilbert indexes and area + time range covers.
    #[command(subcommand)]
    Keys(keys::KeysCommand),
    /// Benchmarks that print their figures.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Table(args) => table::run(args),
        Command::Keys(cmd) => keys::run(cmd),
        Command::Bench(cmd) => bench::run(cmd),
    };
    if let Err(err) = result {
        eprintln!("error: {err:#}");
        std::process::exit(1);
    }
}
