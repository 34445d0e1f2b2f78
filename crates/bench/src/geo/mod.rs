//! `affinity bench geo`: the same points under Hilbert, Z-order and
//! `lat#long` keys in the embedded store, the same area + time queries
//! (1 km to 5000 km boxes; 10 minutes, one bin, one day), and what each
//! key read. Writes `geo.md` and one SVG chart per data set into `--out`.
//!
//! Submodules: [`datasets`] (the data sets and the fixed query set),
//! [`measure`] (loading and querying under each key), [`report`] (Markdown,
//! chart). Timings depend on the machine; rows scanned and ranges do not.

mod datasets;
mod measure;
mod report;

use std::path::{Path, PathBuf};

use anyhow::Context;

use measure::Settings;

#[derive(clap::Args)]
pub struct GeoBenchArgs {
    /// Directory the report (geo.md) and charts (geo-*.svg) are written to.
    #[arg(long, default_value = "geo-bench")]
    out: PathBuf,
    /// Generated points (0 skips the generated data set).
    #[arg(long, default_value_t = 1_000_000)]
    points: usize,
    /// Seed of the generated points.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Salt values of the keys.
    #[arg(long, default_value_t = 1)]
    salts: u32,
    /// Runs of each query (latency percentiles are over all runs).
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Directory holding the real data sets' `geo/` folder (default: the
    /// repository's `testdata`).
    #[arg(long, value_name = "DIR")]
    testdata: Option<PathBuf>,
    /// Skip the real data sets.
    #[arg(long)]
    no_real: bool,
}

/// `geo/` of the test-data directory, if it is there.
fn geo_testdata(testdata: Option<&Path>) -> Option<PathBuf> {
    let dir = testdata.map_or_else(affinity_testdata::dir, Path::to_path_buf);
    Some(dir.join("geo")).filter(|d| d.is_dir())
}

/// Run the benchmark on the embedded store in `data` (default: a temporary
/// directory, removed afterwards).
pub fn run(args: GeoBenchArgs, data: Option<&Path>) -> anyhow::Result<()> {
    let mut datasets = Vec::new();
    if !args.no_real {
        let dir = geo_testdata(args.testdata.as_deref()).context(
            "the real data sets (testdata/geo) were not found: pass --testdata DIR or --no-real",
        )?;
        datasets = datasets::real_datasets(&dir)
            .with_context(|| format!("reading the real data in {}", dir.display()))?;
    }
    if args.points > 0 {
        eprintln!("generating {} points (seed {})", args.points, args.seed);
        datasets.push(datasets::generated(args.points, args.seed));
    }
    let (dir, _tmp) = crate::data_dir(data)?;
    let store = affinity_embedded::EmbeddedStore::open(&dir)
        .with_context(|| format!("opening the embedded store in {}", dir.display()))?;
    let settings = Settings {
        salts: args.salts,
        repeats: args.repeats,
        ..Settings::default()
    };
    let md = measure::run_report(&store, &datasets, &settings, &args.out, |line| {
        eprintln!("{line}")
    })?;
    print!("{md}");
    eprintln!("wrote {} (geo.md, geo-*.svg)", args.out.display());
    Ok(())
}
