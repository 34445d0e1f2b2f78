//! `affinity bench ...`: benchmarks that print their figures.

mod engine;
mod geo;
mod http;
mod schemas;
mod store;
mod wire;

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
    /// narrow and wide schemas, batch recompute with strategies using 1, 3,
    /// half and all facets, per application profile; time, cells and bytes
    /// read, peak memory, equal profiles; Markdown, SVG chart, JSON.
    Schemas(schemas::SchemasBenchArgs),
    /// The HTTP API under load: concurrent clients sending event batches,
    /// then concurrent profile reads, on an in-process server (embedded
    /// store or `--bigtable`) or a running one (`--url`); events/s, reads/s,
    /// p50/p99 latency and errors, next to the goals.
    Http(http::HttpBenchArgs),
    /// The engine without HTTP on the embedded store: batch recompute of
    /// bulk-loaded events (default 10M), or streaming ingest from
    /// concurrent clients; events/s next to the goals.
    Engine(engine::EngineBenchArgs),
}

pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Store(args) => store::run(args),
        BenchCommand::Keys => crate::keys::bench(),
        BenchCommand::Geo(args) => geo::run(args),
        BenchCommand::Schemas(args) => schemas::run(args),
        BenchCommand::Http(args) => http::run(args),
        BenchCommand::Engine(args) => engine::run(args),
    }
}

/// Where a benchmark keeps its embedded store: `given`, or a temporary
/// directory removed when the returned guard drops.
pub fn data_dir(
    given: Option<&std::path::Path>,
) -> anyhow::Result<(std::path::PathBuf, Option<tempfile::TempDir>)> {
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
pub fn quantile<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let idx = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted.get(idx).copied()
}
