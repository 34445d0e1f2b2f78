//! `affinity keys ...`: salted keys, curve indexes and range covers, for
//! people and scripts (glue over `affinity_rowkey`); and API keys: secured
//! API keys and key digests for the configuration file (glue over
//! `affinity_http`).

use std::ops::Bound;

use affinity_http::keystore::{self, parse_acls, KeySpec};
use affinity_http::Restrictions;
use affinity_rowkey::cover::CoverOptions;
use affinity_rowkey::curve::{lat_cell, lng_cell, Curve};
use affinity_rowkey::geo::{GeoLayout, TimeBin};
use affinity_rowkey::latlong::{latlong_cover, latlong_row_ranges};
use affinity_rowkey::plan::{plan, BBox, GeoQuery};
use affinity_rowkey::salt::{SaltScope, Salter};
use affinity_rowkey::time::parse_millis;
use anyhow::{bail, Context};

use crate::backend::BackendArgs;
use crate::engine_cmds::open_engine;

/// Row-key tools.
#[derive(clap::Subcommand, Debug)]
pub enum KeysCommand {
    /// Print the salted form of a logical key.
    Salt {
        /// Number of salt buckets (1 to 256).
        #[arg(long)]
        buckets: u32,
        /// Hash only the first N bytes of the key.
        #[arg(long, conflicts_with = "components")]
        prefix_len: Option<usize>,
        /// Hash only the first N components split by --separator.
        #[arg(long)]
        components: Option<usize>,
        /// Component separator for --components.
        #[arg(long, default_value_t = ',')]
        separator: char,
        /// The logical key.
        key: String,
    },
    /// Print the curve index of a point.
    Hilbert {
        #[arg(long, allow_hyphen_values = true)]
        lat: f64,
        #[arg(long, allow_hyphen_values = true)]
        lng: f64,
        /// Print the Z-order index instead.
        #[arg(long)]
        zorder: bool,
    },
    /// Print the key ranges of an area (+ time) query and their overhead.
    Cover {
        /// MINLNG,MINLAT,MAXLNG,MAXLAT (MINLNG > MAXLNG crosses the antimeridian).
        #[arg(long, allow_hyphen_values = true)]
        bbox: String,
        /// Start of the time range (inclusive): ISO-8601 with milliseconds or epoch milliseconds.
        #[arg(long, requires = "to")]
        from: Option<String>,
        /// End of the time range (exclusive).
        #[arg(long, requires = "from")]
        to: Option<String>,
        /// Time bin: hour, day or week.
        #[arg(long, default_value = "hour")]
        bin: String,
        /// Number of salts of the key layout.
        #[arg(long, default_value_t = 1)]
        salts: u32,
        /// Most curve ranges per time bin and salt.
        #[arg(long, default_value_t = 64)]
        budget: usize,
        /// Key design: hilbert, zorder or latlong.
        #[arg(long, default_value = "hilbert")]
        key: String,
    },
    /// Print a secured API key derived from a parent key, as Algolia's
    /// `generateSecuredApiKey` makes it (for tests and operations; a shop
    /// makes them with Algolia's clients).
    Secure {
        /// The parent key, in plain text: a key of the application
        /// without the admin ACL.
        #[arg(long)]
        parent: String,
        /// Restrict to this user's profile and events.
        #[arg(long)]
        user_token: Option<String>,
        /// Expiry: Unix seconds, or an ISO-8601 time.
        #[arg(long, conflicts_with = "valid_for")]
        valid_until: Option<String>,
        /// Expiry this many seconds from now.
        #[arg(long)]
        valid_for: Option<u64>,
        /// Restrict events and catalog objects to these indices
        /// (comma-separated; `dev_*`, `*_dev` patterns).
        #[arg(long, value_delimiter = ',')]
        restrict_indices: Vec<String>,
        /// Restrict clients to these addresses or CIDR networks
        /// (comma-separated).
        #[arg(long, value_delimiter = ',')]
        restrict_sources: Vec<String>,
    },
    /// Print `sha256:<hex>` of a key, to write in the configuration file
    /// instead of the key itself.
    Hash {
        /// The key.
        key: String,
    },
    /// Make an API key of an application, kept in the store (every server
    /// accepts it within 2 s); prints the key, once.
    Add {
        /// The application.
        #[arg(long)]
        app: String,
        /// Its ACLs, comma-separated: search, events, profiles, admin (or
        /// Algolia's recommendation, which is profiles).
        #[arg(long, value_delimiter = ',', required = true)]
        acl: Vec<String>,
        /// What the key is for.
        #[arg(long, default_value = "")]
        description: String,
        /// Refuse the key this many seconds from now (default: never).
        #[arg(long, value_name = "SECONDS")]
        valid_for: Option<u64>,
        /// Requests an hour one client may make with the key (Algolia's
        /// maxQueriesPerIPPerHour): per IP address, or per user token for
        /// secured keys restricted to one; per server (default: no limit).
        #[arg(long, value_name = "N")]
        max_queries_per_ip_per_hour: Option<u32>,
    },
    /// List an application's API keys kept in the store.
    List {
        /// The application.
        #[arg(long)]
        app: String,
    },
    /// Delete an API key kept in the store (every server refuses it
    /// within 2 s).
    Delete {
        /// The application.
        #[arg(long)]
        app: String,
        /// The key, or `sha256:<hex>` as `keys list` shows a key whose
        /// text is not kept.
        key: String,
    },
}

/// Unix seconds from `--valid-until` (seconds, or an ISO-8601 time) or
/// `--valid-for` (seconds from now).
fn valid_until(until: Option<&str>, valid_for: Option<u64>) -> anyhow::Result<Option<u64>> {
    if let Some(seconds) = valid_for {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .context("the system clock is before 1970")?;
        return Ok(Some(now.as_secs() + seconds));
    }
    let Some(text) = until else {
        return Ok(None);
    };
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Some(seconds));
    }
    let millis = parse_millis(text)
        .with_context(|| format!("--valid-until {text:?}: not Unix seconds or an ISO-8601 time"))?;
    u64::try_from(millis / 1000)
        .map(Some)
        .with_context(|| format!("--valid-until {text:?} is before 1970"))
}

fn parse_time(name: &str, text: &str) -> anyhow::Result<i64> {
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    parse_millis(text).with_context(|| format!("--{name}"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn bound(b: &Bound<affinity_model::Bytes>) -> String {
    match b {
        Bound::Included(k) => format!("[{}", hex(k)),
        Bound::Excluded(k) => format!("({}", hex(k)),
        Bound::Unbounded => "*".to_string(),
    }
}

/// Run one `affinity keys` command; only `add`, `list` and `delete` use
/// the store.
pub fn run(cmd: KeysCommand, backend: &BackendArgs) -> anyhow::Result<()> {
    match cmd {
        KeysCommand::Add {
            app,
            acl,
            description,
            valid_for,
            max_queries_per_ip_per_hour,
        } => {
            if valid_for == Some(0) {
                bail!("--valid-for 0: give a number of seconds above 0, or leave it out for a key that never expires");
            }
            if max_queries_per_ip_per_hour == Some(0) {
                bail!("--max-queries-per-ip-per-hour 0: give a number of requests above 0, or leave it out for no limit");
            }
            let spec = KeySpec::new(parse_acls(&acl)?, description, valid_for.unwrap_or(0))?
                .with_max_queries_per_ip_per_hour(max_queries_per_ip_per_hour.unwrap_or(0));
            let engine = open_engine(backend)?;
            let (key, _) = keystore::create(&engine, &app, &spec)?;
            println!("{key}");
            return Ok(());
        }
        KeysCommand::List { app } => {
            let engine = open_engine(backend)?;
            let now = engine.now_millis();
            println!(
                "{:<71}  {:<24}  {:<20}  {:>10}  {:>11}  description",
                "key", "acl", "createdAt", "validity", "per IP/hour"
            );
            for key in keystore::list(&engine, &app)? {
                let json = keystore::key_json(&key, now);
                let validity = match json["validity"].as_i64() {
                    Some(0) | None => "never".to_string(),
                    Some(s) => format!("{s}s"),
                };
                let per_ip = key
                    .max_queries_per_ip_per_hour
                    .map_or("-".to_string(), |n| n.to_string());
                println!(
                    "{:<71}  {:<24}  {:<20}  {:>10}  {:>11}  {}",
                    json["value"].as_str().unwrap_or_default(),
                    key.acl.join(","),
                    affinity_rowkey::time::format_seconds(key.created_at).unwrap_or_default(),
                    validity,
                    per_ip,
                    key.description
                );
            }
            return Ok(());
        }
        KeysCommand::Delete { app, key } => {
            let engine = open_engine(backend)?;
            keystore::delete(&engine, &affinity_http::Keys::default(), &app, &key)?;
            println!("deleted");
            return Ok(());
        }
        _ => backend.refuse("keys", true, true)?,
    }
    match cmd {
        KeysCommand::Add { .. } | KeysCommand::List { .. } | KeysCommand::Delete { .. } => {}
        KeysCommand::Secure {
            parent,
            user_token,
            valid_until: until,
            valid_for,
            restrict_indices,
            restrict_sources,
        } => {
            let sources = restrict_sources
                .iter()
                .map(|s| {
                    s.parse::<ipnet::IpNet>()
                        .or_else(|_| s.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                        .with_context(|| {
                            format!("--restrict-sources {s:?}: not an IP address or CIDR network")
                        })
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let restrictions = Restrictions {
                user_token,
                valid_until: valid_until(until.as_deref(), valid_for)?,
                restrict_indices: (!restrict_indices.is_empty()).then_some(restrict_indices),
                restrict_sources: (!sources.is_empty()).then_some(sources),
            };
            println!("{}", restrictions.generate(&parent));
        }
        KeysCommand::Hash { key } => println!("{}", affinity_http::hash_key(&key)),
        KeysCommand::Salt {
            buckets,
            prefix_len,
            components,
            separator,
            key,
        } => {
            let mut salter = Salter::new(buckets)?;
            if let Some(n) = prefix_len {
                salter = salter.with_scope(SaltScope::Bytes(n));
            }
            if let Some(count) = components {
                let Ok(separator) = u8::try_from(separator) else {
                    bail!("--separator {separator:?} must be a single-byte character");
                };
                salter = salter.with_scope(SaltScope::Components { separator, count });
            }
            println!("{}", String::from_utf8_lossy(&salter.salt(key.as_bytes())));
        }
        KeysCommand::Hilbert { lat, lng, zorder } => {
            let curve = if zorder {
                Curve::ZOrder
            } else {
                Curve::Hilbert
            };
            let index = curve.encode(lng_cell(lng)?, lat_cell(lat)?);
            println!("{index}");
        }
        KeysCommand::Cover {
            bbox,
            from,
            to,
            bin,
            salts,
            budget,
            key,
        } => {
            let bbox = BBox::parse(&bbox)?;
            let curve = match key.as_str() {
                "hilbert" => Curve::Hilbert,
                "zorder" | "z-order" => Curve::ZOrder,
                "latlong" | "lat#long" => {
                    let cover = latlong_cover(&bbox, budget)?;
                    for r in latlong_row_ranges(&cover) {
                        println!("{} {}", bound(&r.start), bound(&r.end));
                    }
                    println!(
                        "# lat#long: {} ranges, overhead {:.4}",
                        cover.ranges.len(),
                        cover.overhead()
                    );
                    return Ok(());
                }
                other => bail!("--key {other:?} is not hilbert, zorder or latlong"),
            };
            let options = CoverOptions::with_budget(budget);
            match (from, to) {
                (Some(from), Some(to)) => {
                    let layout = GeoLayout::new(curve, TimeBin::parse(&bin)?, salts)?;
                    let query = GeoQuery {
                        bbox,
                        from_millis: parse_time("from", &from)?,
                        to_millis: parse_time("to", &to)?,
                    };
                    let p = plan(&layout, &query, &options)?;
                    for r in &p.ranges {
                        println!("{} {}", bound(&r.start), bound(&r.end));
                    }
                    println!(
                        "# {}: {} key ranges ({} curve ranges x {} bins x {salts} salts, touching ranges joined), overhead {:.4}",
                        curve.name(),
                        p.ranges.len(),
                        p.cover.ranges.len(),
                        p.bins,
                        p.cover.overhead()
                    );
                }
                _ => {
                    let cover = affinity_rowkey::cover::cover(curve, &bbox.rects()?, &options);
                    for (lo, hi) in &cover.ranges {
                        println!("{lo:016x} {hi:016x}");
                    }
                    println!(
                        "# {}: {} curve ranges, overhead {:.4}",
                        curve.name(),
                        cover.ranges.len(),
                        cover.overhead()
                    );
                }
            }
        }
    }
    Ok(())
}
