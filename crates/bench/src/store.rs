//! The store benchmark: the same event-shaped workload through the `model`
//! traits on each backend.
//!
//! Rows look like Affinity's events table: key `app,user,timestamp`, family
//! `e`, a handful of `type,name,facet` qualifiers with small values.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use affinity_model::{
    Bytes, GcRule, Mutation, ReadModifyWriteRule, ReadRowsRequest, RowMutations, RowRange, RowSet,
    Store, Table, TableSpec,
};
use anyhow::Context;
use rand::{Rng, SeedableRng};

use crate::quantile;

#[derive(clap::Args)]
pub struct StoreBenchArgs {
    /// Cells to load into the embedded store.
    #[arg(long, default_value_t = 10_000_000)]
    cells: u64,
    /// Cells to load into the emulator (default: as many as `--cells`, so
    /// both backends do the same work; the emulator holds them in memory,
    /// about 3 GiB for 10M cells).
    #[arg(long)]
    emulator_cells: Option<u64>,
    /// Skip the emulator run.
    #[arg(long)]
    no_emulator: bool,
    /// Prefix scans to time.
    #[arg(long, default_value_t = 2_000)]
    prefix_scans: usize,
    /// Increments to time (spread over 2 threads).
    #[arg(long, default_value_t = 20_000)]
    increments: usize,
}

const CELLS_PER_ROW: u64 = 5;
const ROWS_PER_USER: u64 = 20;
const QUALIFIERS: [&str; CELLS_PER_ROW as usize] = [
    "view,Product Viewed,brand",
    "view,Product Viewed,category",
    "view,Product Viewed,color",
    "click,Product Clicked,brand",
    "conversion,Purchase,brand",
];
const TABLE: &str = "bench_events";

/// The figures of one backend.
struct Figures {
    backend: String,
    cells: u64,
    load_cells_per_s: f64,
    settle_secs: f64,
    scan_cells_per_s: f64,
    scan_bytes: u64,
    prefix_p50: Duration,
    prefix_p99: Duration,
    increments_per_s: f64,
}

/// Run the benchmark; the embedded store lives in `data` (default: a
/// temporary directory, removed afterwards).
pub fn run(args: StoreBenchArgs, data: Option<&Path>) -> anyhow::Result<()> {
    let mut results = Vec::new();

    let (dir, _tmp) = crate::data_dir(data)?;
    eprintln!(
        "embedded store in {}: loading {} cells",
        dir.display(),
        args.cells
    );
    let embedded = Arc::new(affinity_embedded::EmbeddedStore::open(&dir)?);
    let flush_target = Arc::clone(&embedded);
    let flush = move || flush_target.flush().map_err(anyhow::Error::from);
    results.push(bench_backend(
        "embedded", embedded, args.cells, &args, &flush,
    )?);

    if !args.no_emulator {
        // Use the emulator named by BIGTABLE_EMULATOR_HOST, or start one.
        let mut _emulator = None;
        let grpc = if std::env::var_os("BIGTABLE_EMULATOR_HOST").is_some() {
            affinity_bigtable::BigtableStore::connect("bench", "bench")?
        } else {
            let emulator = affinity_bigtable::emulator::Emulator::start()
                .context("starting the Bigtable emulator (or pass --no-emulator)")?;
            let store = emulator.store("bench", "bench")?;
            _emulator = Some(emulator);
            store
        };
        let cells = args.emulator_cells.unwrap_or(args.cells);
        eprintln!("Bigtable emulator: loading {cells} cells");
        let no_flush = || Ok(());
        results.push(bench_backend(
            "emulator (gRPC)",
            Arc::new(grpc),
            cells,
            &args,
            &no_flush,
        )?);
    }

    print_table(&results);
    Ok(())
}

fn bench_backend(
    name: &str,
    store: Arc<dyn Store>,
    cells: u64,
    args: &StoreBenchArgs,
    flush: &dyn Fn() -> anyhow::Result<()>,
) -> anyhow::Result<Figures> {
    if store.list_tables()?.iter().any(|t| t == TABLE) {
        store.delete_table(TABLE)?;
    }
    store.create_table(
        TABLE,
        &TableSpec::new()
            .with_family("c", GcRule::MaxVersions(1))
            .with_family("e", GcRule::None),
    )?;
    let table = store.open_table(TABLE)?;
    let rows = cells.div_ceil(CELLS_PER_ROW);
    let users = rows.div_ceil(ROWS_PER_USER);

    // Load: two writers, 1000 rows per mutate_rows call.
    let started = Instant::now();
    std::thread::scope(|s| -> anyhow::Result<()> {
        let handles: Vec<_> = (0..2u64)
            .map(|w| {
                let table = &table;
                s.spawn(move || load_rows(table.as_ref(), rows, w, 2))
            })
            .collect();
        for h in handles {
            h.join()
                .map_err(|_| anyhow::anyhow!("loader thread panicked"))??;
        }
        Ok(())
    })?;
    let load_secs = started.elapsed().as_secs_f64();
    eprintln!("  loaded {} rows in {load_secs:.2} s", rows);
    // Let the store settle (embedded: flush memtables and wait for
    // background compactions) so the scan measures steady state; timed and
    // reported on its own.
    let started = Instant::now();
    flush()?;
    let settle_secs = started.elapsed().as_secs_f64();

    // Full scan.
    let started = Instant::now();
    let (mut scanned_cells, mut scan_bytes) = (0u64, 0u64);
    for row in table.read_rows(&ReadRowsRequest::all())? {
        let row = row?;
        scan_bytes += row.key.len() as u64;
        for cell in &row.cells {
            scanned_cells += 1;
            scan_bytes += (cell.qualifier.len() + cell.value.len()) as u64;
        }
    }
    let scan_secs = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        scanned_cells == rows * CELLS_PER_ROW,
        "{name}: full scan returned {scanned_cells} cells, expected {}",
        rows * CELLS_PER_ROW
    );
    eprintln!("  scanned {scanned_cells} cells in {scan_secs:.2} s");

    // Prefix scans: all rows of one user.
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut latencies = Vec::with_capacity(args.prefix_scans);
    for _ in 0..args.prefix_scans {
        let user = rng.random_range(0..users);
        let request = ReadRowsRequest::new(RowSet::from_range(RowRange::prefix(user_prefix(user))));
        let started = Instant::now();
        let n = table.read_rows(&request)?.count();
        latencies.push(started.elapsed());
        anyhow::ensure!(n > 0, "{name}: prefix scan of user {user} found nothing");
    }
    latencies.sort();

    // Increments: two threads on 1000 counters.
    let started = Instant::now();
    std::thread::scope(|s| -> anyhow::Result<()> {
        let handles: Vec<_> = (0..2u64)
            .map(|w| {
                let table = &table;
                let n = args.increments / 2;
                s.spawn(move || -> anyhow::Result<()> {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(w);
                    for _ in 0..n {
                        let key = format!("counter,{:04}", rng.random_range(0..1000u32));
                        table.read_modify_write_row(
                            key.as_bytes(),
                            &[ReadModifyWriteRule::increment("c", "n", 1)],
                        )?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join()
                .map_err(|_| anyhow::anyhow!("increment thread panicked"))??;
        }
        Ok(())
    })?;
    let incr_secs = started.elapsed().as_secs_f64();

    store.delete_table(TABLE)?;
    Ok(Figures {
        backend: name.to_string(),
        cells: rows * CELLS_PER_ROW,
        load_cells_per_s: (rows * CELLS_PER_ROW) as f64 / load_secs,
        settle_secs,
        scan_cells_per_s: scanned_cells as f64 / scan_secs,
        scan_bytes,
        prefix_p50: quantile(&latencies, 0.50).unwrap_or_default(),
        prefix_p99: quantile(&latencies, 0.99).unwrap_or_default(),
        increments_per_s: (args.increments / 2 * 2) as f64 / incr_secs,
    })
}

fn user_prefix(user: u64) -> String {
    format!("app1,user{user:08},")
}

/// Writer `w` of `writers` loads every row whose index is `w` mod `writers`,
/// in batches of 1000 rows.
fn load_rows(table: &dyn Table, rows: u64, w: u64, writers: u64) -> anyhow::Result<()> {
    let base_ms: i64 = 1_716_000_000_000;
    let mut batch = Vec::with_capacity(1000);
    let mut row = w;
    while row < rows {
        let user = row / ROWS_PER_USER;
        let ts_ms = base_ms + (row % ROWS_PER_USER) as i64 * 60_000;
        let key = format!("{}{ts_ms:013}", user_prefix(user));
        let mutations = QUALIFIERS
            .iter()
            .enumerate()
            .map(|(i, q)| {
                Mutation::set_cell(
                    "e",
                    Bytes::from_static(q.as_bytes()),
                    ts_ms * 1000,
                    Bytes::from(format!("{{\"v{}\":{}}}", i, row % 97)),
                )
            })
            .collect();
        batch.push(RowMutations::new(key, mutations));
        if batch.len() == 1000 {
            flush(table, &mut batch)?;
        }
        row += writers;
    }
    flush(table, &mut batch)
}

fn flush(table: &dyn Table, batch: &mut Vec<RowMutations>) -> anyhow::Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    for (i, status) in table.mutate_rows(batch)?.into_iter().enumerate() {
        status.with_context(|| format!("writing row {:?}", batch[i].row_key))?;
    }
    batch.clear();
    Ok(())
}

fn print_table(results: &[Figures]) {
    println!();
    print!("| operation |");
    for r in results {
        print!(" {} |", r.backend);
    }
    println!();
    print!("|---|");
    for _ in results {
        print!("---:|");
    }
    println!();
    let row = |label: &str, f: &dyn Fn(&Figures) -> String| {
        print!("| {label} |");
        for r in results {
            print!(" {} |", f(r));
        }
        println!();
    };
    row("cells loaded", &|r| format!("{}", r.cells));
    row("load (synced, acknowledged), cells/s", &|r| {
        format!("{:.0}", r.load_cells_per_s)
    });
    row("settle after load (flush + compactions)", &|r| {
        format!("{:.1} s", r.settle_secs)
    });
    row("full scan, cells/s", &|r| {
        format!("{:.0}", r.scan_cells_per_s)
    });
    row("full scan, MiB/s", &|r| {
        format!(
            "{:.1}",
            r.scan_bytes as f64 / (1 << 20) as f64 * r.scan_cells_per_s / r.cells as f64
        )
    });
    row("prefix scan p50", &|r| {
        format!("{:.0} us", r.prefix_p50.as_secs_f64() * 1e6)
    });
    row("prefix scan p99", &|r| {
        format!("{:.0} us", r.prefix_p99.as_secs_f64() * 1e6)
    });
    row("increments/s (2 threads)", &|r| {
        format!("{:.0}", r.increments_per_s)
    });
    if let [embedded, emulator, ..] = results {
        println!();
        println!(
            "embedded scan rate / emulator scan rate: {:.1}x (goal >= 10x)",
            embedded.scan_cells_per_s / emulator.scan_cells_per_s
        );
        println!(
            "embedded goals: full scan >= 3M cells/s: {:.2}M; load >= 500k cells/s: {:.0}k",
            embedded.scan_cells_per_s / 1e6,
            embedded.load_cells_per_s / 1e3
        );
    }
}
