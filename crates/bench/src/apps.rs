//! `affinity bench apps`: many applications on one store. Creating an
//! application and reading a profile with one application in the store,
//! then again with `--apps` (default 10,000), every application on the
//! shared tables with a few events; on the embedded store and, with
//! `--emulator`, the Bigtable emulator. The goal (issue 25): with 10,000
//! applications both stay within 2x of the one-application figures.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use affinity_engine::{Engine, Event, Limits, Strategy};
use affinity_model::Store;
use anyhow::Context;
use serde_json::json;

/// Flags of `affinity bench apps`.
#[derive(clap::Args, Debug, Clone)]
pub struct AppsBenchArgs {
    /// Applications in the store for the second measurement.
    #[arg(long, default_value_t = 10_000)]
    pub apps: usize,
    /// Events ingested into every application.
    #[arg(long, default_value_t = 5)]
    pub events_per_app: usize,
    /// Applications created per creation measurement.
    #[arg(long, default_value_t = 200)]
    pub creations: usize,
    /// Profile reads per read measurement (one thread).
    #[arg(long, default_value_t = 2_000)]
    pub reads: usize,
    /// Also on the Bigtable emulator (`BIGTABLE_EMULATOR_HOST`, or one
    /// started).
    #[arg(long)]
    pub emulator: bool,
}

/// One measurement: creation and reads at one application count.
struct Figures {
    apps: usize,
    create: Duration,
    read_p50: Duration,
    read_p99: Duration,
    reads_per_second: f64,
}

pub fn run(args: AppsBenchArgs, data: Option<&Path>) -> anyhow::Result<()> {
    if args.apps < 2 || args.creations == 0 || args.reads == 0 || args.events_per_app == 0 {
        anyhow::bail!(
            "--apps must be at least 2, --creations, --reads and --events-per-app positive"
        );
    }
    let (dir, _tmp) = crate::data_dir(data)?;
    let embedded = affinity_embedded::EmbeddedStore::open(&dir)
        .with_context(|| format!("opening the embedded store in {}", dir.display()))?;
    let mut rows = vec![("embedded", measure(Arc::new(embedded), &args)?)];
    if args.emulator {
        let mut _emulator = None;
        let store = if std::env::var_os("BIGTABLE_EMULATOR_HOST").is_some() {
            affinity_bigtable::BigtableStore::connect("bench", "apps")?
        } else {
            let emulator = affinity_bigtable::emulator::Emulator::start()
                .context("starting the Bigtable emulator")?;
            let store = emulator.store("bench", "apps")?;
            _emulator = Some(emulator);
            store
        };
        rows.push(("emulator", measure(Arc::new(store), &args)?));
    }
    println!(
        "| store | apps | create one app (median) | profile read p50 | p99 | reads/s (1 thread) |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, figures) in &rows {
        for f in figures {
            println!(
                "| {name} | {} | {:.2} ms | {:.3} ms | {:.3} ms | {:.0} |",
                f.apps,
                ms(f.create),
                ms(f.read_p50),
                ms(f.read_p99),
                f.reads_per_second
            );
        }
        let (one, many) = (&figures[0], &figures[1]);
        println!(
            "{name}: with {} apps, create {:.2}x and read p50 {:.2}x the 1-app figures \
             (goal: within 2x)",
            many.apps,
            ms(many.create) / ms(one.create),
            ms(many.read_p50) / ms(one.read_p50)
        );
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The figures with one application, then with `args.apps`.
fn measure(store: Arc<dyn Store>, args: &AppsBenchArgs) -> anyhow::Result<[Figures; 2]> {
    let engine = Engine::open(store)?;
    let strategy = Strategy::from_json(&json!({
        "eventsScoring": [{"eventName": "click", "eventType": "click", "score": 10}],
        "facetsScoring": [{"facetName": "brand", "score": 100}],
        "personalizationImpact": 50}))?;
    let limits = Limits::api(engine.now_millis());
    let events = |app: usize| -> anyhow::Result<Vec<Event>> {
        (0..args.events_per_app)
            .map(|i| {
                let e = json!({"eventType": "click", "eventName": "click", "index": "products",
                    "userToken": format!("user-{}", (app + i) % 50),
                    "filters": [format!("brand:b{}", (app * 7 + i) % 13)]});
                Ok(Event::from_json(&e, &limits)?)
            })
            .collect()
    };
    // The application every read goes to, alone in the store.
    engine.app("app0")?;
    engine.set_strategy("app0", &strategy)?;
    for batch in 0..50 {
        engine.ingest("app0", &events(batch)?)?;
    }
    // The median creation: one synced write each, whose fsync follows
    // the machine's load more than the store's size.
    let create = |from: usize| -> anyhow::Result<Duration> {
        let mut samples = Vec::with_capacity(args.creations);
        for i in from..from + args.creations {
            let at = Instant::now();
            engine.app(&format!("new{i}"))?;
            samples.push(at.elapsed());
        }
        samples.sort();
        Ok(crate::quantile(&samples, 0.5).unwrap_or_default())
    };
    let reads = || -> anyhow::Result<(Duration, Duration, f64)> {
        let mut samples = Vec::with_capacity(args.reads);
        let started = Instant::now();
        for i in 0..args.reads {
            let at = Instant::now();
            engine.profile("app0", &format!("user-{}", i % 50))?;
            samples.push(at.elapsed());
        }
        let rate = args.reads as f64 / started.elapsed().as_secs_f64();
        samples.sort();
        let q = |q| crate::quantile(&samples, q).unwrap_or_default();
        Ok((q(0.5), q(0.99), rate))
    };
    let one_create = create(0)?;
    let (p50, p99, rate) = reads()?;
    let one = Figures {
        apps: 1,
        create: one_create,
        read_p50: p50,
        read_p99: p99,
        reads_per_second: rate,
    };
    let started = Instant::now();
    for app in 1..args.apps {
        let id = format!("app{app}");
        engine.app(&id)?;
        engine.ingest(&id, &events(app)?)?;
    }
    eprintln!(
        "{} applications created with {} events each in {:.1} s",
        args.apps - 1,
        args.events_per_app,
        started.elapsed().as_secs_f64()
    );
    let many_create = create(args.creations)?;
    let (p50, p99, rate) = reads()?;
    let many = Figures {
        apps: args.apps + 2 * args.creations,
        create: many_create,
        read_p50: p50,
        read_p99: p99,
        reads_per_second: rate,
    };
    Ok([one, many])
}
