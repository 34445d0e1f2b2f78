//! `affinity demo`: the out-of-the-box walk-through on the embedded store.
//! A generated shop (catalog and a skewed stream of users' events) goes
//! through the real engine; profiles are printed, a candidate strategy is
//! scored for every user by an export (with a progress bar), then set:
//! reads score with it at once, as the export did.

use std::path::PathBuf;
use std::time::Instant;

use affinity_engine::{
    catalog::CatalogObject, AppConfig, Engine, Event, ExportOptions, Progress, Schema, Strategy,
};
use anyhow::Context;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::engine_cmds::{print_profile, with_progress};

#[derive(clap::Args)]
pub struct DemoArgs {
    /// Events to generate.
    #[arg(long, default_value_t = 200_000)]
    events: usize,
    /// Users to generate (a few very active, many light).
    #[arg(long, default_value_t = 5_000)]
    users: usize,
    /// Seed of the generator (the same seed gives the same shop).
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

const APP: &str = "demo-shop";
const DEFAULT_DATA: &str = "affinity-demo-data";
const INDEX: &str = "products";
const MARKER: &str = ".affinity-demo";
const BRANDS: [&str; 12] = [
    "Apple", "Samsung", "Sony", "LG", "Bose", "Dell", "HP", "Lenovo", "Asus", "Canon", "Nikon",
    "Philips",
];
const COLORS: [&str; 8] = [
    "Black", "White", "Silver", "Blue", "Red", "Green", "Gold", "Grey",
];
const CATEGORIES: [&str; 8] = [
    "phones",
    "laptops",
    "audio",
    "tv",
    "cameras",
    "tablets",
    "wearables",
    "accessories",
];
/// What a product of each category is called (in its name, for search).
const NOUNS: [&str; 8] = [
    "smartphone",
    "laptop",
    "wireless headphones",
    "smart tv",
    "camera",
    "tablet",
    "smartwatch",
    "charging cable",
];
const PRODUCTS: usize = 600;
/// What step 7 searches for.
const QUERY: &str = "black wireless";

fn products(rng: &mut StdRng) -> Vec<Value> {
    (0..PRODUCTS)
        .map(|i| {
            let price = rng.random_range(20..2500u32);
            let brand = BRANDS[i % BRANDS.len()];
            let color = COLORS[rng.random_range(0..COLORS.len())];
            let mut p = json!({
                "objectID": format!("p{i:04}"),
                "name": format!("{brand} {} in {}", NOUNS[i % NOUNS.len()], color.to_lowercase()),
                "brand": brand,
                "color": color,
                "category": [CATEGORIES[i % CATEGORIES.len()], "electronics"],
                "price_range": match price { 0..=99 => "under 100", 100..=499 => "100-500", _ => "500+" },
            });
            if i % 5 == 0 {
                // Store pick-up items carry a location (around Portland).
                p["_geoloc"] = json!({"lat": 45.5 + rng.random_range(-0.2..0.2), "lng": -122.6 + rng.random_range(-0.2..0.2)});
            }
            p
        })
        .collect()
}

/// Events with believable skew: user activity follows a power law, and each
/// user favours two brands and a color.
fn events(rng: &mut StdRng, users: usize, count: usize, now_ms: i64) -> Vec<Value> {
    let weights: Vec<f64> = (1..=users).map(|r| 1.0 / (r as f64).powf(1.1)).collect();
    let total: f64 = weights.iter().sum();
    let cumulative: Vec<f64> = weights
        .iter()
        .scan(0.0, |acc, w| {
            *acc += w / total;
            Some(*acc)
        })
        .collect();
    let favourites: Vec<(usize, usize)> = (0..users)
        .map(|_| {
            (
                rng.random_range(0..BRANDS.len()),
                rng.random_range(0..BRANDS.len()),
            )
        })
        .collect();
    (0..count)
        .map(|i| {
            let x: f64 = rng.random();
            let user = cumulative.partition_point(|c| *c < x).min(users - 1);
            let (a, b) = favourites[user];
            let brand = match rng.random_range(0..10) {
                0..=4 => a,
                5..=7 => b,
                _ => rng.random_range(0..BRANDS.len()),
            };
            // A product of that brand.
            let product = brand + BRANDS.len() * rng.random_range(0..PRODUCTS / BRANDS.len());
            let (ty, name) = match rng.random_range(0..100) {
                0..=69 => ("view", "Product Viewed"),
                70..=92 => ("click", "Product Clicked"),
                _ => ("conversion", "Product Purchased"),
            };
            let age_ms = rng.random_range(0..20 * 86_400_000i64);
            json!({
                "eventType": ty,
                "eventName": name,
                "index": INDEX,
                "userToken": format!("user-{user:05}"),
                "timestamp": now_ms - age_ms - i as i64 % 1000,
                "objectIDs": [format!("p{product:04}")],
            })
        })
        .collect()
}

fn strategy(facets: &[(&str, u32)]) -> anyhow::Result<Strategy> {
    let json = json!({
        "eventsScoring": [
            {"eventName": "Product Viewed", "eventType": "view", "score": 10},
            {"eventName": "Product Clicked", "eventType": "click", "score": 30},
            {"eventName": "Product Purchased", "eventType": "conversion", "score": 60},
        ],
        "facetsScoring": facets.iter().map(|(f, s)| json!({"facetName": f, "score": s})).collect::<Vec<_>>(),
        "personalizationImpact": 75,
    });
    Ok(Strategy::from_json(&json)?)
}

/// The demo's data directory: `--data`, else `./affinity-demo-data` (never
/// `AFFINITY_DATA`: the demo replaces what it finds there).
pub fn run(args: DemoArgs, data: Option<PathBuf>) -> anyhow::Result<()> {
    let started = Instant::now();
    let dir = data.unwrap_or_else(|| PathBuf::from(DEFAULT_DATA));
    if dir.exists() {
        anyhow::ensure!(
            dir.join(MARKER).exists(),
            "{} exists and is not an earlier demo's data; choose another --data",
            dir.display()
        );
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("removing the earlier demo in {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(MARKER), "data of `affinity demo`\n")?;
    let store = affinity_embedded::EmbeddedStore::open(&dir)?;
    let engine = Engine::open(std::sync::Arc::new(store))?;
    engine.configure_app(
        APP,
        AppConfig {
            schema: Schema::Wide,
            ..AppConfig::default()
        },
    )?;
    let mut rng = StdRng::seed_from_u64(args.seed);

    println!("1. A shop catalog: {PRODUCTS} products (name, brand, color, category, price range; some with _geoloc)");
    let catalog = products(&mut rng);
    let objects = catalog
        .iter()
        .map(CatalogObject::from_json)
        .collect::<Result<Vec<_>, _>>()?;
    engine.put_objects(APP, INDEX, &objects)?;

    let first = strategy(&[("brand", 100), ("category", 60), ("color", 20)])?;
    engine.set_strategy(APP, &first)?;
    println!("2. A strategy: purchases 60, clicks 30, views 10; brand 100, category 60, color 20");

    let users = args.users.max(1);
    println!(
        "3. Ingesting {} events of {users} users through the streaming path...",
        args.events
    );
    let now_ms = engine.now_millis();
    let limits = engine.retention_limits(APP)?;
    let generated = events(&mut rng, users, args.events, now_ms);
    let ingest_started = Instant::now();
    for batch in generated.chunks(1000) {
        let batch = batch
            .iter()
            .map(|e| Event::from_json(e, &limits))
            .collect::<Result<Vec<_>, _>>()?;
        engine.ingest(APP, &batch)?;
    }
    let secs = ingest_started.elapsed().as_secs_f64();
    println!(
        "   ingested in {secs:.1} s ({:.0} events/s, each acknowledged batch synced to disk)",
        args.events as f64 / secs
    );

    println!("\n4. Profiles of the most active user and of a light one:");
    let (heavy, light) = (
        "user-00000".to_string(),
        format!("user-{:05}", users * 3 / 4),
    );
    for user in [&heavy, &light] {
        if let Some(profile) = engine.profile(APP, user)? {
            print_profile(&profile, 4);
        }
    }

    println!(
        "\n5. A candidate strategy (color now matters most), scored for every user by an \
         export (nothing stored):"
    );
    let second = strategy(&[("color", 100), ("brand", 40)])?;
    let exported = std::sync::Mutex::new(None);
    let sink = |user: &str, json: &[u8]| -> std::io::Result<()> {
        if user == heavy {
            *exported.lock().unwrap_or_else(|p| p.into_inner()) = Some(json.to_vec());
        }
        Ok(())
    };
    let progress = Progress::default();
    let report = with_progress(&progress, || {
        engine.export(
            APP,
            ExportOptions::default(),
            Some(&second),
            &sink,
            &progress,
        )
    })?;
    println!(
        "   exported {} profiles from {} events in {:.2} s",
        report.profiles,
        report.events,
        progress.snapshot().elapsed.as_secs_f64()
    );

    println!("\n6. The candidate set: reads score with it from now on, no batch job:");
    engine.set_strategy(APP, &second)?;
    if let Some(profile) = engine.profile(APP, &heavy)? {
        print_profile(&profile, 4);
    }
    let read = engine.profile_json_with(APP, &heavy, &second)?;
    if read.is_some() && read == exported.into_inner().unwrap_or_else(|p| p.into_inner()) {
        println!("   (the profile the export gave for {heavy}, byte for byte)");
    }

    println!(
        "\n7. A real search engine (tantivy, BM25) searches the catalog for {QUERY:?}; Affinity \
         re-ranks its first 20 hits for two users (the rerank API's blend, impact {}):",
        second.personalization_impact
    );
    let other = "user-00001";
    let index = crate::search::SearchIndex::build(&catalog)?;
    let hits = index.search(QUERY, 20)?;
    let lists = [&heavy, other].map(|user| {
        crate::search::personalize(&engine, APP, user, &second, &hits, crate::search::label)
    });
    let [a, b] = lists;
    let (a, b) = (a?, b?);
    print!(
        "{}",
        crate::search::side_by_side([&heavy, other], [&a, &b], 6, 3)
    );
    println!("   (the same search, two orders: each user's brands and colors come first)");

    let data = dir.display();
    println!(
        "\nDone in {:.0} s. The data is in {data}. Next:\n\
         \n  affinity profile --data {data} --app {APP} {heavy} --json\
         \n  affinity serve --data {data} --listen 127.0.0.1:8080 --app-id {APP} --api-key demo-key\
         \n  curl -H 'x-algolia-application-id: {APP}' -H 'x-algolia-api-key: demo-key' \\\
         \n       -X POST localhost:8080/1/events \\\
         \n       -d '{{\"events\":[{{\"eventType\":\"view\",\"eventName\":\"Product Viewed\",\"index\":\"{INDEX}\",\"userToken\":\"{heavy}\",\"objectIDs\":[\"p0001\"]}}]}}'\
         \n  curl -H 'x-algolia-application-id: {APP}' -H 'x-algolia-api-key: demo-key' \\\
         \n       localhost:8080/1/profiles/personalization/{heavy}\
         \n\nWith that server running, the dashboard of the demo data is at\
         \n  http://127.0.0.1:8080/dashboard/#/explorer/{heavy}\
         \n(log in with application {APP} and admin key demo-key).",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
