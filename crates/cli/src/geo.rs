//! `affinity geo load` and `affinity geo query`: located points in a table
//! keyed for area + time queries (the `affinity-geo` crate).

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use affinity_geo::csv::{Columns, CsvPoints};
use affinity_geo::load::load_points;
use affinity_geo::{Field, KeyKind, Point, PointLayout, PointTable};
use affinity_rowkey::geo::TimeBin;
use affinity_rowkey::plan::{BBox, GeoQuery};
use affinity_rowkey::time::{format_millis, parse_time};
use anyhow::Context;

use crate::backend::BackendArgs;

#[derive(clap::Subcommand)]
pub enum GeoCommand {
    /// Load located points from a CSV file: other columns become the points'
    /// measurements (numbers, or text when not numeric). The whole file is
    /// checked before anything is written.
    Load {
        /// The CSV file (a header row, then one point per row).
        file: PathBuf,
        /// Column of the point's id.
        #[arg(long)]
        id: String,
        /// Column of the time: RFC 3339, `YYYY-MM-DD HH:MM:SS[offset]` (UTC
        /// without one), or epoch seconds / milliseconds.
        #[arg(long)]
        time: String,
        /// Column of the latitude.
        #[arg(long)]
        lat: String,
        /// Column of the longitude (wrapped into [-180, 180]).
        #[arg(long)]
        lng: String,
        /// Table to load into (created when missing).
        #[arg(long, default_value = "points")]
        table: String,
        /// Time bin of the key: hour, day or week.
        #[arg(long, default_value = "hour")]
        bin: String,
        /// Salt values (1 to 256) spreading writes over key ranges.
        #[arg(long, default_value_t = 1)]
        salts: u32,
        /// Position key: hilbert, zorder or latlong.
        #[arg(long, default_value = "hilbert")]
        key: String,
    },
    /// Print the points inside a box and time range, exactly.
    Query {
        /// MINLNG,MINLAT,MAXLNG,MAXLAT (MINLNG > MAXLNG crosses the
        /// antimeridian).
        #[arg(long, allow_hyphen_values = true)]
        bbox: String,
        /// Start of the time range, included (any form `load` accepts).
        #[arg(long)]
        from: String,
        /// End of the time range, excluded.
        #[arg(long)]
        to: String,
        /// Output format: csv or json.
        #[arg(long, default_value = "csv")]
        format: String,
        /// Table to query.
        #[arg(long, default_value = "points")]
        table: String,
    },
}

pub fn run(cmd: GeoCommand, backend: &BackendArgs) -> anyhow::Result<()> {
    match cmd {
        GeoCommand::Load {
            file,
            id,
            time,
            lat,
            lng,
            table,
            bin,
            salts,
            key,
        } => {
            let columns = Columns { id, time, lat, lng };
            let layout = PointLayout::new(KeyKind::parse(&key)?, TimeBin::parse(&bin)?, salts)?;
            load(&file, &columns, &table, layout, backend)
        }
        GeoCommand::Query {
            bbox,
            from,
            to,
            format,
            table,
        } => {
            let query = GeoQuery {
                bbox: BBox::parse(&bbox)?,
                from_millis: parse_time(&from).context("--from")?,
                to_millis: parse_time(&to).context("--to")?,
            };
            let json = match format.as_str() {
                "csv" => false,
                "json" => true,
                other => anyhow::bail!("--format must be csv or json, got {other:?}"),
            };
            query_points(&query, json, &table, backend)
        }
    }
}

fn open_csv(file: &Path, columns: &Columns) -> anyhow::Result<CsvPoints<BufReader<File>>> {
    let input = File::open(file).with_context(|| format!("opening {}", file.display()))?;
    CsvPoints::new(BufReader::new(input), columns)
        .with_context(|| format!("reading {}", file.display()))
}

fn load(
    file: &Path,
    columns: &Columns,
    table: &str,
    layout: PointLayout,
    backend: &BackendArgs,
) -> anyhow::Result<()> {
    // First pass: check every row, so bad input changes nothing.
    let mut total = 0u64;
    for row in open_csv(file, columns)? {
        row.with_context(|| format!("in {}", file.display()))?;
        total += 1;
    }
    eprintln!("{}: {total} points, all valid", file.display());
    let store = backend.open()?;
    let points = PointTable::create(store.as_ref(), table, layout)
        .with_context(|| format!("creating table {table:?}"))?;
    let started = Instant::now();
    let mut last_report = Instant::now();
    let written = load_points(&points, open_csv(file, columns)?, |n| {
        if last_report.elapsed().as_millis() >= 500 || n == total {
            last_report = Instant::now();
            eprint!(
                "\rloaded {n}/{total} points ({:.0}%)",
                n as f64 * 100.0 / total.max(1) as f64
            );
        }
    })
    .with_context(|| format!("loading {}", file.display()))?;
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "\nloaded {written} points into {table} ({layout}) on the {} in {secs:.2} s ({:.0} points/s)",
        backend.describe(),
        written as f64 / secs.max(1e-9)
    );
    Ok(())
}

fn query_points(
    query: &GeoQuery,
    json: bool,
    table: &str,
    backend: &BackendArgs,
) -> anyhow::Result<()> {
    let store = backend.open()?;
    let points = PointTable::open(store.as_ref(), table)?;
    let started = Instant::now();
    let mut found = Vec::new();
    let stats = points.scan(query, affinity_geo::table::DEFAULT_BUDGET, |p| {
        found.push(p)
    })?;
    let elapsed = started.elapsed();
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let written = if json {
        write_json(&mut out, &found)
    } else {
        write_csv(&mut out, &found)
    }
    .and_then(|()| Ok(out.flush()?));
    if let Err(err) = written {
        // A reader that stopped early (`| head`) is not an error.
        let closed = err
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe);
        if !closed {
            return Err(err);
        }
    }
    eprintln!(
        "{} points; scanned {} rows in {} ranges ({} per bin, {} bins) in {:.1} ms",
        stats.rows_returned,
        stats.rows_scanned,
        stats.ranges,
        stats.ranges_per_bin,
        stats.bins,
        elapsed.as_secs_f64() * 1e3
    );
    Ok(())
}

fn time_text(millis: i64) -> String {
    format_millis(millis).unwrap_or_else(|_| millis.to_string())
}

fn write_json(out: &mut impl Write, points: &[Point]) -> anyhow::Result<()> {
    let rows: Vec<serde_json::Value> = points
        .iter()
        .map(|p| {
            let fields: serde_json::Map<String, serde_json::Value> = p
                .fields
                .iter()
                .map(|(name, f)| {
                    let v = match f {
                        Field::Number(n) => serde_json::json!(n),
                        Field::Text(t) => serde_json::json!(t),
                    };
                    (name.clone(), v)
                })
                .collect();
            serde_json::json!({
                "id": p.id,
                "time": time_text(p.time_millis),
                "lng": p.lng,
                "lat": p.lat,
                "fields": fields,
            })
        })
        .collect();
    serde_json::to_writer_pretty(&mut *out, &rows).map_err(std::io::Error::from)?;
    writeln!(out)?;
    Ok(())
}

fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

fn write_csv(out: &mut impl Write, points: &[Point]) -> anyhow::Result<()> {
    let mut names: Vec<&str> = Vec::new();
    for p in points {
        for (name, _) in &p.fields {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
    }
    let mut header = vec!["id", "time", "lng", "lat"];
    header.extend(&names);
    let header: Vec<String> = header.iter().map(|h| csv_field(h)).collect();
    writeln!(out, "{}", header.join(","))?;
    for p in points {
        let mut row = vec![
            csv_field(&p.id),
            time_text(p.time_millis),
            p.lng.to_string(),
            p.lat.to_string(),
        ];
        for name in &names {
            row.push(match p.field(name) {
                Some(Field::Number(n)) => n.to_string(),
                Some(Field::Text(t)) => csv_field(t),
                None => String::new(),
            });
        }
        writeln!(out, "{}", row.join(","))?;
    }
    Ok(())
}
