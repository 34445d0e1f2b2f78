//! The server configuration file (TOML): applications, their keys and
//! ACLs, schema and retention.
//!
//! ```toml
//! [[apps]]
//! id = "shop"
//! schema = "wide"          # or "narrow" (default: what is stored, else narrow)
//! retention_days = 90
//! keys = [
//!   { value = "admin-secret", acl = ["admin"] },
//!   { value = "browser-key", acl = ["events", "search"] },
//! ]
//! ```

use affinity_engine::{AppConfig, Engine, Schema};
use serde::Deserialize;

use crate::auth::{Acl, Keys};
use crate::error::{Error, Result};

/// The whole file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub apps: Vec<AppEntry>,
}

/// One application.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppEntry {
    pub id: String,
    pub schema: Option<String>,
    pub retention_days: Option<u32>,
    #[serde(default)]
    pub keys: Vec<KeyEntry>,
}

/// One key of an application.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyEntry {
    pub value: String,
    pub acl: Vec<Acl>,
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
            keys: vec![KeyEntry {
                value: key.to_string(),
                acl: vec![Acl::Admin],
            }],
        });
    }

    /// Every key of every application.
    pub fn keys(&self) -> Result<Keys> {
        let mut keys = Keys::default();
        for app in &self.apps {
            for key in &app.keys {
                keys.add(&app.id, &key.value, key.acl.iter().copied())?;
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

    /// Store the schema and retention of the applications that set one
    /// (the others keep what is stored, or the defaults).
    pub fn apply(&self, engine: &Engine) -> Result<()> {
        for app in &self.apps {
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
            engine.configure_app(&app.id, config)?;
        }
        Ok(())
    }
}
