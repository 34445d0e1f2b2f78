//! Affinity's benchmarks: everything behind `affinity bench ...`, with the
//! workloads they generate and the reports and charts they write.
//!
//! - `store`: the storage layer through the `model` traits, embedded store
//!   and Bigtable emulator side by side;
//! - `keys`: curve encoding and range-cover planning of row keys;
//! - `geo`: located points under Hilbert, Z-order and `lat#long` keys;
//! - `schemas`: the narrow and wide events schemas under the batch export
//!   of every profile, on a seeded workload (`schemas::workload`);
//! - `http`: the HTTP API under load, through a minimal keep-alive client
//!   (`wire`);
//! - `overload`: the server's limits under twice the sustainable ingest,
//!   reads alongside; `soak`: the same server over minutes, with
//!   maintenance, memory and file descriptors per minute;
//! - `engine`: batch export, streaming ingest and maintenance without
//!   HTTP;
//! - `svg`: the one chart writer the reports share.
//!
//! The public surface is the clap [`BenchCommand`] and [`run`]; the `affinity`
//! binary only parses its command line and calls [`run`]. It is not a library
//! of the engine: no other crate depends on it, and benchmarks are not tests
//! (their figures are printed, never asserted against a speed).
//!
//! ```no_run
//! use affinity_bench::{run, BenchBackend, BenchCommand};
//!
//! run(BenchCommand::Keys, &BenchBackend::default())?;
//! # Ok::<(), anyhow::Error>(())
//! ```

mod apps;
mod days;
mod engine;
mod geo;
mod hotkeys;
mod http;
mod keys;
mod overload;
mod schemas;
mod soak;
mod store;
mod svg;
mod wire;

use std::path::{Path, PathBuf};

use anyhow::bail;

/// The benchmarks, one subcommand each (`affinity bench NAME`).
#[derive(clap::Subcommand)]
pub enum BenchCommand {
    /// The storage layer through the `model` traits: load, full scan, prefix
    /// scans and increments, on the embedded store and on the Bigtable
    /// emulator, side by side.
    Store(store::StoreBenchArgs),
    /// Row keys: curve encode speed, and for Hilbert, Z-order and `lat#long`
    /// keys the planning time, ranges per query and cover overhead for boxes
    /// from 1 km to a continent.
    Keys,
    /// Location + time keys: the same points under Hilbert, Z-order and
    /// `lat#long` keys, a fixed set of area + time queries; rows scanned per
    /// row returned, ranges, latency, load rate; Markdown and SVG charts.
    Geo(geo::GeoBenchArgs),
    /// The write-up's schema experiment: the same generated events in the
    /// narrow and wide schemas, a batch export of every profile with
    /// strategies using 1, 3, half and all facets, per application profile;
    /// time, cells and bytes read, peak memory, profiles checked against the
    /// scoring reference; Markdown, SVG chart, JSON.
    Schemas(schemas::SchemasBenchArgs),
    /// The HTTP API under load: concurrent clients sending event batches,
    /// then concurrent profile reads, on an in-process server (embedded
    /// store or `--bigtable`) or a running one (`--url`); events/s, reads/s,
    /// p50/p99 latency and errors, next to the goals.
    Http(http::HttpBenchArgs),
    /// The engine without HTTP on the embedded store: batch export of every
    /// profile from bulk-loaded events (default 10M), streaming ingest from
    /// concurrent clients, or maintenance folding a day into the rollups;
    /// figures next to the goals.
    Engine(engine::EngineBenchArgs),
    /// Hot keys: the share of writes the busiest key range takes under
    /// Zipf-distributed users, for the events table and the profile-state
    /// rows, unsalted and salted by `app,user` (a model of tablet splits,
    /// no store).
    Hotkeys(hotkeys::HotKeysArgs),
    /// The server's limits under overload: the sustainable ingest
    /// calibrated, then twice it offered by paced senders while 50 clients
    /// read profiles; batches acknowledged and shed (503/429), read p99.
    Overload(overload::OverloadBenchArgs),
    /// The server over minutes: half the sustainable ingest and 50 profile
    /// readers with maintenance on; RSS, open files, read p99 and errors
    /// per minute.
    Soak(soak::SoakBenchArgs),
    /// Many applications on one store: creating one and reading a profile
    /// with 1 application, then with `--apps` (10,000) on the shared
    /// tables, on the embedded store (and `--emulator`).
    Apps(apps::AppsBenchArgs),
}

/// The backend flags of the command line (`--data DIR`, `--bigtable
/// PROJECT/INSTANCE`), `None` when not given: each benchmark then uses its
/// own default (a temporary directory for the embedded store).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BenchBackend {
    pub data: Option<PathBuf>,
    pub bigtable: Option<String>,
}

impl BenchBackend {
    /// Fail naming the flag when one was given to benchmark `bench` that
    /// has no use for it, rather than ignore it.
    fn check(&self, bench: &str, takes_data: bool, takes_bigtable: bool) -> anyhow::Result<()> {
        if self.data.is_some() && !takes_data {
            bail!("--data is not an option of bench {bench}");
        }
        if self.bigtable.is_some() && !takes_bigtable {
            bail!("--bigtable is not an option of bench {bench}");
        }
        Ok(())
    }
}

/// Run one `affinity bench` command.
pub fn run(cmd: BenchCommand, backend: &BenchBackend) -> anyhow::Result<()> {
    let data = backend.data.as_deref();
    match cmd {
        BenchCommand::Store(args) => {
            backend.check("store", true, false)?;
            store::run(args, data)
        }
        BenchCommand::Hotkeys(args) => {
            backend.check("hotkeys", false, false)?;
            hotkeys::run(args)
        }
        BenchCommand::Keys => {
            backend.check("keys", false, false)?;
            keys::run()
        }
        BenchCommand::Geo(args) => {
            backend.check("geo", true, false)?;
            geo::run(args, data)
        }
        BenchCommand::Schemas(args) => {
            backend.check("schemas", true, false)?;
            schemas::run(args, data)
        }
        BenchCommand::Http(args) => http::run(args, backend),
        BenchCommand::Engine(args) => {
            backend.check("engine", true, false)?;
            engine::run(args, data)
        }
        BenchCommand::Overload(args) => {
            backend.check("overload", true, false)?;
            overload::run(args, backend)
        }
        BenchCommand::Soak(args) => {
            backend.check("soak", true, false)?;
            soak::run(args, backend)
        }
        BenchCommand::Apps(args) => {
            backend.check("apps", true, false)?;
            apps::run(args, data)
        }
    }
}

/// Where a benchmark keeps its embedded store: `given`, or a temporary
/// directory removed when the returned guard drops.
fn data_dir(given: Option<&Path>) -> anyhow::Result<(PathBuf, Option<tempfile::TempDir>)> {
    match given {
        Some(dir) => Ok((dir.to_path_buf(), None)),
        None => {
            let tmp =
                anyhow::Context::context(tempfile::tempdir(), "creating a temporary directory")?;
            Ok((tmp.path().to_path_buf(), Some(tmp)))
        }
    }
}

/// The value at quantile `q` (0..=1) of sorted samples.
fn quantile<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let idx = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted.get(idx).copied()
}
