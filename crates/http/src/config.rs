//! The server configuration file (TOML): applications, their keys and
//! ACLs, schema and retention.
//!
//! ```toml
//! # proxies (load balancers) whose X-Forwarded-For names the client
//! # (per-client limits, restrictSources); addresses or blocks
//! trusted_proxies = ["10.0.0.0/8"]
//!
//! [limits]                 # the server's own (every field optional)
//! max_in_flight = 1024     # requests served at once; more get 503
//! max_writes_in_flight = 16  # writes served at once; more get 503, reads still pass
//! header_timeout_secs = 30 # to send a request's headers; the connection closes after
//! body_timeout_secs = 60   # to send a request's body; 408 after
//! ingest_nice = 5          # CPU priority of event batches below the reads' (0 to 19)
//! ingest_threads = 4       # event batches stored at once (default: twice the cores, at most
//!                          # max_writes_in_flight; max_writes_in_flight on Cloud Bigtable)
//!
//! [[apps]]
//! id = "shop"
//! schema = "wide"          # or "narrow" (default: what is stored, else narrow)
//! retention_days = 90     # another than 90 gives the application tables of its own
//! dedicated_tables = true  # tables of its own whatever the retention (default: shared)
//! rate_limit = { per_second = 1000, burst = 2000 }  # the application's requests (429 over it)
//! keys = [
//!   { value = "admin-secret", acl = ["admin"] },
//!   { value = "browser-key", acl = ["events", "search"], rate_limit = { per_second = 100 } },
//!   # Algolia's maxQueriesPerIPPerHour: per client (IP address, or the
//!   # user token of a secured key derived from it), per server
//!   { value = "page-key", acl = ["search"], max_queries_per_ip_per_hour = 600 },
//!   # the SHA-256 of a key (`affinity keys hash KEY`): the key itself is
//!   # not in the file, and it cannot be the parent of secured API keys
//!   { value = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", acl = ["search"] },
//! ]
//! ```

use affinity_engine::hot::{HotPolicy, MAX_SUB_ROWS};
use affinity_engine::{AppConfig, Engine, Schema};
use serde::Deserialize;

use crate::auth::{configured_digest, Acl, Keys};
use crate::clients::Proxies;
use crate::error::{Error, Result};
use crate::limits::{check_within, Limiter, RateLimit, ServerLimits};

/// The whole file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Proxies whose `X-Forwarded-For` names the client: addresses or
    /// blocks (`10.0.0.0/8`).
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    #[serde(default)]
    pub limits: ServerLimits,
    /// When ingestion lists a user on the hot lists (see
    /// `affinity_engine::hot`).
    #[serde(default)]
    pub hot_users: HotUsers,
    #[serde(default)]
    pub apps: Vec<AppEntry>,
}

/// The `[hot_users]` table: the policy ingestion lists users by
/// ([`HotPolicy`]); every field optional, the engine's defaults.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HotUsers {
    /// `false`: ingestion lists nobody (lists added by hand still apply).
    pub enabled: bool,
    /// A user's events of the day, at least.
    pub min_events: u64,
    /// Of the day's events this server took, at least.
    pub min_share: f64,
    /// One sub-row per this share of the day's events.
    pub share_per_sub_row: f64,
    /// Sub-rows at most (2 to 256).
    pub max_sub_rows: u32,
}

impl Default for HotUsers {
    fn default() -> HotUsers {
        let p = HotPolicy::default();
        HotUsers {
            enabled: true,
            min_events: p.min_adds,
            min_share: p.min_share,
            share_per_sub_row: p.share_per_row,
            max_sub_rows: p.max_rows,
        }
    }
}

impl HotUsers {
    /// The engine's policy, or what is wrong with the table.
    pub fn policy(&self) -> Result<HotPolicy> {
        let bad = |reason: String| Err(Error::Config { reason });
        if !self.enabled {
            return Ok(HotPolicy::off());
        }
        for (name, share) in [
            ("min_share", self.min_share),
            ("share_per_sub_row", self.share_per_sub_row),
        ] {
            check_within("hot_users", name, share, 1.0)?;
        }
        if !(2..=MAX_SUB_ROWS).contains(&self.max_sub_rows) {
            return bad(format!(
                "hot_users: max_sub_rows must be 2 to {MAX_SUB_ROWS}, got {}",
                self.max_sub_rows
            ));
        }
        Ok(HotPolicy {
            min_adds: self.min_events.max(1),
            min_share: self.min_share,
            share_per_row: self.share_per_sub_row,
            max_rows: self.max_sub_rows,
            ..HotPolicy::default()
        })
    }
}

/// One application.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppEntry {
    pub id: String,
    pub schema: Option<String>,
    pub retention_days: Option<u32>,
    /// Tables of its own rather than the shared ones (isolation); only an
    /// application without events can move to them.
    #[serde(default)]
    pub dedicated_tables: bool,
    /// The application's requests, whatever the key.
    pub rate_limit: Option<RateLimit>,
    #[serde(default)]
    pub keys: Vec<KeyEntry>,
}

/// One key of an application.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyEntry {
    /// The key, or `sha256:` and the 64 hexadecimal digits of its SHA-256
    /// digest. Only a key in plain text can sign secured API keys: their
    /// HMAC is keyed by the key itself, which a digest does not give back.
    pub value: String,
    pub acl: Vec<Acl>,
    /// This key's requests, and those of the secured keys it signs.
    pub rate_limit: Option<RateLimit>,
    /// Requests an hour from one client (Algolia's
    /// `maxQueriesPerIPPerHour`, see `clients.rs`; 0: no limit).
    pub max_queries_per_ip_per_hour: Option<u32>,
}

impl Config {
    /// Parse the TOML text.
    pub fn parse(text: &str) -> Result<Config> {
        toml::from_str(text).map_err(|e| Error::Config {
            reason: e.to_string(),
        })
    }

    /// Add an application with an admin key (the `--app-id/--api-key`
    /// pairs of the command line).
    pub fn add_admin(&mut self, app: &str, key: &str) {
        self.apps.push(AppEntry {
            id: app.to_string(),
            schema: None,
            retention_days: None,
            dedicated_tables: false,
            rate_limit: None,
            keys: vec![KeyEntry {
                value: key.to_string(),
                acl: vec![Acl::Admin],
                rate_limit: None,
                max_queries_per_ip_per_hour: None,
            }],
        });
    }

    /// Every key of every application.
    pub fn keys(&self) -> Result<Keys> {
        let mut keys = Keys::default();
        for app in &self.apps {
            for key in &app.keys {
                keys.add(&app.id, &key.value, key.acl.iter().copied())?;
                // 0, as in Algolia: no limit.
                if let Some(n) = key.max_queries_per_ip_per_hour.filter(|n| *n > 0) {
                    keys.limit_per_client(&app.id, &key.value, n)?;
                }
            }
        }
        if keys.is_empty() {
            return Err(Error::Config {
                reason: "no application has an API key (use --app-id/--api-key or a config file)"
                    .into(),
            });
        }
        Ok(keys)
    }

    /// The server's limits and every rate limit of the file.
    pub fn limiter(&self) -> Result<Limiter> {
        self.limits.check()?;
        let mut limiter = Limiter::new(self.limits);
        limiter.proxies = Proxies::parse(&self.trusted_proxies)?;
        for app in &self.apps {
            if let Some(limit) = app.rate_limit {
                limit.check(&format!("application {:?}", app.id))?;
                limiter.limit_app(&app.id, limit);
            }
            for key in &app.keys {
                if let Some(limit) = key.rate_limit {
                    limit.check(&format!("application {:?}: a key", app.id))?;
                    limiter.limit_key(&app.id, configured_digest(&app.id, &key.value)?, limit);
                }
            }
        }
        Ok(limiter)
    }

    /// Store the schema and retention of the applications that set one
    /// (the others keep what is stored, or the defaults), and give those
    /// asking for it tables of their own. Every change is
    /// checked before any is stored, so a refused one (a schema change of
    /// an application holding events: that is a migration) changes
    /// nothing.
    pub fn apply(&self, engine: &Engine) -> Result<()> {
        let mut changes = Vec::new();
        let mut isolated = Vec::new();
        for app in &self.apps {
            if app.dedicated_tables {
                engine.check_isolate_app(&app.id)?;
                isolated.push(&app.id);
            }
            if app.schema.is_none() && app.retention_days.is_none() {
                continue;
            }
            let mut config: AppConfig = engine.app(&app.id)?.config;
            if let Some(schema) = &app.schema {
                config.schema = Schema::parse(schema)?;
            }
            if let Some(days) = app.retention_days {
                config.retention_days = days;
            }
            engine.check_config(&app.id, config)?;
            changes.push((&app.id, config));
        }
        for app in isolated {
            engine.isolate_app(app)?;
        }
        for (app, config) in changes {
            engine.configure_app(app, config)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const FILE: &str = r#"
        [[apps]]
        id = "shop"
        schema = "wide"
        retention_days = 30
        keys = [
          { value = "admin-secret", acl = ["admin"] },
          { value = "browser", acl = ["events", "search"] },
        ]

        [[apps]]
        id = "blog"
        keys = [{ value = "blog-admin", acl = ["admin"] }]
    "#;

    #[test]
    fn keys_and_acls_come_from_the_file() {
        let mut config = Config::parse(FILE).unwrap();
        config.add_admin("cli", "cli-key");
        let keys = config.keys().unwrap();
        let acl = keys.check("shop", "browser").unwrap();
        assert_eq!(
            acl.iter().copied().collect::<Vec<_>>(),
            [Acl::Search, Acl::Events]
        );
        assert!(keys.check("shop", "blog-admin").is_none());
        assert!(keys
            .check("blog", "blog-admin")
            .unwrap()
            .contains(&Acl::Admin));
        assert!(keys.check("cli", "cli-key").unwrap().contains(&Acl::Admin));
        assert!(keys.check("cli", "cli-ke").is_none());
    }

    #[test]
    fn hashed_keys_are_checked_and_cannot_sign_secured_keys() {
        let hashed = crate::auth::hash_key("browser");
        // `echo -n browser | sha256sum`
        assert_eq!(
            hashed,
            "sha256:d4c3e8a11256ab82a4fc72560eb4a2b0e87bad820c290dd9b03616de240aa6db"
        );
        let file = format!(
            "[[apps]]\nid = \"shop\"\nkeys = [{{ value = \"{hashed}\", acl = [\"search\"] }}]"
        );
        let keys = Config::parse(&file).unwrap().keys().unwrap();
        assert!(keys.check("shop", "browser").is_some());
        assert!(keys.check("shop", &hashed).is_none());
        assert!(keys.check("shop", "browse").is_none());
        let secured = crate::secured::Restrictions::default().generate("browser");
        let err = keys.authenticate("shop", &secured).unwrap_err();
        assert_eq!(err.status(), axum::http::StatusCode::FORBIDDEN);
        assert!(err.to_string().contains("plain text"), "{err}");
        // A malformed digest is refused naming the key.
        let bad =
            "[[apps]]\nid = \"shop\"\nkeys = [{ value = \"sha256:abc\", acl = [\"search\"] }]";
        let err = Config::parse(bad).unwrap().keys().unwrap_err();
        assert!(err.to_string().contains("sha256:abc"), "{err}");
    }

    #[test]
    fn schema_and_retention_are_stored() {
        let engine = Engine::open(Arc::new(affinity_model::MemoryStore::new())).unwrap();
        Config::parse(FILE).unwrap().apply(&engine).unwrap();
        let shop = engine.app("shop").unwrap().config;
        assert_eq!((shop.schema, shop.retention_days), (Schema::Wide, 30));
        assert_eq!(engine.app("blog").unwrap().config, AppConfig::default());
    }

    #[test]
    fn a_schema_change_of_an_app_with_events_is_refused_and_changes_nothing() {
        let engine = Engine::open(Arc::new(affinity_model::MemoryStore::new())).unwrap();
        Config::parse(FILE).unwrap().apply(&engine).unwrap();
        let event = affinity_engine::Event::from_json(
            &serde_json::json!({"eventType": "click", "eventName": "Product Clicked",
                "index": "products", "userToken": "u1", "filters": ["brand:Apple"]}),
            &affinity_engine::Limits::api(engine.now_millis()),
        )
        .unwrap();
        engine.ingest("shop", &[event]).unwrap();
        // The shop moves to narrow, and the blog (listed first) changes
        // its retention: neither is stored.
        let moved = r#"
            [[apps]]
            id = "blog"
            retention_days = 7

            [[apps]]
            id = "shop"
            schema = "narrow"
        "#;
        let err = Config::parse(moved).unwrap().apply(&engine).unwrap_err();
        let message = err.to_string();
        for part in ["\"shop\"", "wide", "narrow", "migration"] {
            assert!(message.contains(part), "{message}");
        }
        assert_eq!(err.status(), axum::http::StatusCode::CONFLICT);
        engine.forget_apps();
        let shop = engine.app("shop").unwrap().config;
        assert_eq!((shop.schema, shop.retention_days), (Schema::Wide, 30));
        assert_eq!(engine.app("blog").unwrap().config, AppConfig::default());
        // Naming the stored schema, the retention still changes.
        let kept = moved.replace("narrow", "wide");
        Config::parse(&kept).unwrap().apply(&engine).unwrap();
        assert_eq!(engine.app("blog").unwrap().config.retention_days, 7);
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let err =
            Config::parse("[[apps]]\nid = \"a\"\nkeys = [{ value = \"k\", acl = [\"root\"] }]")
                .unwrap_err();
        assert!(err.to_string().contains("root"), "{err}");
        let err = Config::parse("[[apps]]\nid = \"a\"\ncolour = 1").unwrap_err();
        assert!(err.to_string().contains("colour"), "{err}");
        let no_keys = Config::parse("[[apps]]\nid = \"a\"").unwrap();
        assert!(no_keys.keys().is_err());
        let bad_app =
            Config::parse("[[apps]]\nid = \"a b\"\nkeys = [{ value = \"k\", acl = [\"admin\"] }]");
        assert!(bad_app.unwrap().keys().is_err());
        let engine = Engine::open(Arc::new(affinity_model::MemoryStore::new())).unwrap();
        let bad_schema = Config::parse("[[apps]]\nid = \"a\"\nschema = \"tall\"").unwrap();
        assert!(bad_schema.apply(&engine).is_err());
    }

    #[test]
    fn the_hot_users_policy_comes_from_the_file_and_is_checked() {
        assert_eq!(
            Config::parse("").unwrap().hot_users.policy().unwrap(),
            HotPolicy::default()
        );
        let config = Config::parse(
            "[hot_users]\nmin_events = 500\nmin_share = 0.05\nshare_per_sub_row = 0.02\nmax_sub_rows = 32",
        )
        .unwrap();
        let policy = config.hot_users.policy().unwrap();
        assert_eq!(
            (
                policy.min_adds,
                policy.min_share,
                policy.share_per_row,
                policy.max_rows
            ),
            (500, 0.05, 0.02, 32)
        );
        let off = Config::parse("[hot_users]\nenabled = false").unwrap();
        assert_eq!(off.hot_users.policy().unwrap(), HotPolicy::off());
        for (text, reason) in [
            (
                "min_share = 0",
                "min_share must be more than 0 and at most 1, got 0",
            ),
            (
                "share_per_sub_row = 2.0",
                "share_per_sub_row must be more than 0 and at most 1, got 2",
            ),
            ("max_sub_rows = 1", "max_sub_rows must be 2 to 256, got 1"),
            (
                "max_sub_rows = 300",
                "max_sub_rows must be 2 to 256, got 300",
            ),
        ] {
            let config = Config::parse(&format!("[hot_users]\n{text}")).unwrap();
            let err = config.hot_users.policy().unwrap_err().to_string();
            assert!(err.contains(reason), "{text}: {err}");
        }
        let err = Config::parse("[hot_users]\nmin_adds = 3")
            .unwrap_err()
            .to_string();
        assert!(err.contains("min_adds"), "{err}");
    }
}
