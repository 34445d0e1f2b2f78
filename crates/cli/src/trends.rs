//! `affinity trends`: the top facet values of the events on located objects
//! in an area and time window (the engine's `Engine::trends`), as small
//! tables or as the API's JSON.

use affinity_engine::trends::{parse_time, Area, Trends, TrendsQuery};
use affinity_engine::Engine;
use affinity_rowkey::plan::BBox;
use anyhow::{bail, Context};

use crate::backend::BackendArgs;

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("area").required(true).args(["around", "bbox"])))]
pub struct TrendsArgs {
    /// Application id (the tenant).
    #[arg(long)]
    app: String,
    /// Centre of a circle, LAT,LNG (with --radius).
    #[arg(
        long,
        value_name = "LAT,LNG",
        requires = "radius",
        allow_hyphen_values = true
    )]
    around: Option<String>,
    /// Radius of the circle in metres (haversine distance, exact).
    #[arg(long, value_name = "METERS")]
    radius: Option<f64>,
    /// A box instead: MINLNG,MINLAT,MAXLNG,MAXLAT (as `affinity geo query`;
    /// across the antimeridian when MINLNG > MAXLNG).
    #[arg(
        long,
        value_name = "MINLNG,MINLAT,MAXLNG,MAXLAT",
        allow_hyphen_values = true
    )]
    bbox: Option<String>,
    /// Start of the window, included (RFC 3339, `YYYY-MM-DD HH:MM:SS`, or
    /// epoch seconds/milliseconds); default: 7 days before its end.
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    from: Option<String>,
    /// End of the window, excluded; default: now.
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    to: Option<String>,
    /// Facets to rank, comma-separated; default: the strategy's.
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    facets: Option<Vec<String>>,
    /// Values per facet (1..=100).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Print the API's JSON instead of tables.
    #[arg(long)]
    json: bool,
}

fn area(args: &TrendsArgs) -> anyhow::Result<Area> {
    if let Some(text) = &args.bbox {
        return Ok(Area::BBox(BBox::parse(text).context("--bbox")?));
    }
    let (Some(center), Some(radius)) = (&args.around, args.radius) else {
        bail!("give --around LAT,LNG with --radius METERS, or --bbox");
    };
    let parts: Vec<f64> = center
        .split(',')
        .map(|p| p.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .ok()
        .filter(|v: &Vec<f64>| v.len() == 2)
        .with_context(|| format!("--around {center:?} is not LAT,LNG"))?;
    Ok(Area::circle(parts[0], parts[1], radius)?)
}

pub fn run(args: TrendsArgs, backend: &BackendArgs) -> anyhow::Result<()> {
    let mut query = TrendsQuery::new(area(&args)?);
    query.from_millis = args
        .from
        .as_deref()
        .map(|t| parse_time("--from", t))
        .transpose()?;
    query.to_millis = args
        .to
        .as_deref()
        .map(|t| parse_time("--to", t))
        .transpose()?;
    query.facets = args.facets.clone();
    query.limit = args.limit;
    let engine = Engine::open(backend.open()?)?;
    let trends = engine.trends(&args.app, &query)?;
    if engine.strategy(&args.app)?.is_none() {
        eprintln!(
            "application {:?} has no strategy: no event counts",
            args.app
        );
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&trends.to_json())?);
    } else {
        print!("{}", render(&trends));
    }
    Ok(())
}

/// One small table per facet, after a line saying what was read.
fn render(trends: &Trends) -> String {
    let json = trends.to_json();
    let mut out = format!(
        "{} .. {}: {} events counted; {} rows in the area and window of {} scanned in {} ranges\n",
        json["from"].as_str().unwrap_or_default(),
        json["to"].as_str().unwrap_or_default(),
        trends.events_counted,
        trends.rows_matched,
        trends.rows_scanned,
        trends.ranges
    );
    for (facet, values) in &trends.facets {
        out.push_str(&format!("\n{facet}\n"));
        if values.is_empty() {
            out.push_str("  (no values)\n");
            continue;
        }
        let width = values
            .iter()
            .map(|v| v.value.chars().count())
            .max()
            .unwrap_or(0)
            .max(5);
        out.push_str(&format!(
            "  {:>4}  {:<width$}  {:>8}\n",
            "rank", "value", "score"
        ));
        for (i, v) in values.iter().enumerate() {
            out.push_str(&format!(
                "  {:>4}  {:<width$}  {:>8}\n",
                i + 1,
                v.value,
                v.score
            ));
        }
    }
    out
}
