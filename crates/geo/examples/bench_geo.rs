//! The key benchmark without the CLI: `cargo run --release -p affinity-geo
//! --example bench_geo -- OUT_DIR [POINTS]` (real data from
//! $AFFINITY_SHARED or ../shared, generated points, embedded store in a
//! temporary directory).

use std::path::PathBuf;

use affinity_geo::bench::{generated, real_datasets, run_report, Settings};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(args.next().unwrap_or_else(|| "geo-bench".into()));
    let points: usize = args.next().map_or(Ok(200_000), |a| a.parse())?;
    let shared = std::env::var_os("AFFINITY_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    let mut datasets = real_datasets(&shared.join("testdata/geo"))?;
    if points > 0 {
        datasets.push(generated(points, 42));
    }
    let dir = tempfile::tempdir()?;
    let store = affinity_embedded::EmbeddedStore::open(dir.path())?;
    let md = run_report(&store, &datasets, &Settings::default(), &out, |l| {
        eprintln!("{l}")
    })?;
    print!("{md}");
    Ok(())
}
