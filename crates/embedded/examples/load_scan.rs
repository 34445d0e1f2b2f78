//! Load an events-shaped table once (two writers, 1000-row `mutate_rows`),
//! then time full scans and check how evenly `sample_row_keys` splits it.
//! A profiling aid for the engine; the store benchmark is `affinity bench
//! store`.
//!
//! ```text
//! cargo run --release -p affinity-embedded --example load_scan -- DIR [CELLS]
//! ```
//! Run it again on the same DIR to scan without reloading.

use std::ops::Bound;
use std::time::Instant;

use affinity_embedded::EmbeddedStore;
use affinity_model::{
    Bytes, GcRule, Mutation, ReadRowsRequest, Result, RowMutations, RowRange, RowSet, Store, Table,
    TableSpec,
};

const QUALIFIERS: [&str; 5] = [
    "view,Product Viewed,brand",
    "view,Product Viewed,category",
    "view,Product Viewed,color",
    "click,Product Clicked,brand",
    "conversion,Purchase,brand",
];

/// Writer `w` of 2 loads rows `w, w + 2, ...`.
fn load(table: &dyn Table, rows: u64, w: u64) -> Result<()> {
    let mut batch = Vec::with_capacity(1000);
    for row in (w..rows).step_by(2) {
        let ts_ms = 1_716_000_000_000 + (row % 20) as i64 * 60_000;
        let key = format!("app1,user{:08},{ts_ms:013}", row / 20);
        let mutations = QUALIFIERS
            .iter()
            .enumerate()
            .map(|(i, q)| {
                let value = Bytes::from(format!("{{\"v{}\":{}}}", i, row % 97));
                Mutation::set_cell("e", Bytes::from_static(q.as_bytes()), ts_ms * 1000, value)
            })
            .collect();
        batch.push(RowMutations::new(key, mutations));
        if batch.len() == 1000 || row + 2 >= rows {
            for status in table.mutate_rows(&batch)? {
                status?;
            }
            batch.clear();
        }
    }
    Ok(())
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: load_scan DIR [CELLS]")?;
    let cells: u64 = args
        .next()
        .map(|c| c.parse())
        .transpose()?
        .unwrap_or(2_000_000);
    let store = EmbeddedStore::open(&dir)?;
    if !store.list_tables()?.iter().any(|t| t == "events") {
        store.create_table("events", &TableSpec::new().with_family("e", GcRule::None))?;
        let table = store.open_table("events")?;
        let rows = cells / QUALIFIERS.len() as u64;
        let started = Instant::now();
        std::thread::scope(|s| {
            let writers: Vec<_> = (0..2)
                .map(|w| {
                    s.spawn({
                        let table = &table;
                        move || load(table.as_ref(), rows, w)
                    })
                })
                .collect();
            writers.into_iter().try_for_each(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(affinity_model::Error::Internal("writer panicked".into()))
                })
            })
        })?;
        let secs = started.elapsed().as_secs_f64();
        println!(
            "load: {:.0} cells/s",
            (rows * QUALIFIERS.len() as u64) as f64 / secs
        );
        let started = Instant::now();
        store.flush()?;
        println!(
            "flush and compactions: {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    let table = store.open_table("events")?;
    for _ in 0..3 {
        let started = Instant::now();
        let mut n = 0u64;
        for row in table.read_rows(&ReadRowsRequest::all())? {
            n += row?.cells.len() as u64;
        }
        println!(
            "full scan: {n} cells, {:.0} cells/s",
            n as f64 / started.elapsed().as_secs_f64()
        );
    }
    let started = Instant::now();
    let samples = table.sample_row_keys()?;
    println!(
        "sample_row_keys: {} split points in {:?}",
        samples.len(),
        started.elapsed()
    );
    let mut start = Bytes::new();
    let mut counts = Vec::new();
    for sample in &samples {
        let end = match sample.row_key.is_empty() {
            true => Bound::Unbounded,
            false => Bound::Excluded(sample.row_key.clone()),
        };
        let range = RowRange {
            start: Bound::Included(start.clone()),
            end,
        };
        counts.push(
            table
                .read_rows(&ReadRowsRequest::new(RowSet::from_range(range)))?
                .count(),
        );
        start = sample.row_key.clone();
    }
    let (min, max) = (counts.iter().min(), counts.iter().max());
    println!("rows per chunk: min {min:?}, max {max:?}");
    Ok(())
}
