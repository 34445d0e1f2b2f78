//! Applications, their API keys and ACLs, and the request extractor that
//! authenticates a caller from `x-algolia-application-id` and
//! `x-algolia-api-key` (headers, or query parameters of the same names).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::state::State;

pub const APP_ID_HEADER: &str = "x-algolia-application-id";
pub const API_KEY_HEADER: &str = "x-algolia-api-key";

/// What a key may do. `admin` may do everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Acl {
    /// Read profiles and the strategy (what a front end needs at query time).
    Search,
    /// Send events.
    Events,
    /// Read profiles, the strategy, catalog objects and jobs.
    Profiles,
    /// Everything, including strategy changes, deletions and the catalog.
    Admin,
}

impl Acl {
    pub fn as_str(self) -> &'static str {
        match self {
            Acl::Search => "search",
            Acl::Events => "events",
            Acl::Profiles => "profiles",
            Acl::Admin => "admin",
        }
    }

    pub fn parse(text: &str) -> Option<Acl> {
        [Acl::Search, Acl::Events, Acl::Profiles, Acl::Admin]
            .into_iter()
            .find(|a| a.as_str() == text)
    }
}

/// One API key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub value: String,
    pub acl: BTreeSet<Acl>,
}

/// The keys of every application.
#[derive(Debug, Clone, Default)]
pub struct Keys {
    apps: HashMap<String, Vec<ApiKey>>,
}

/// Compare without an early exit on the first differing byte.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

impl Keys {
    /// Add a key to an application (creating it); an empty key or ACL
    /// list is refused.
    pub fn add(&mut self, app: &str, key: &str, acl: impl IntoIterator<Item = Acl>) -> Result<()> {
        affinity_engine::validate_app(app)?;
        let acl: BTreeSet<Acl> = acl.into_iter().collect();
        if key.is_empty() || acl.is_empty() {
            return Err(Error::Config {
                reason: format!("application {app:?}: a key needs a value and at least one ACL"),
            });
        }
        self.apps.entry(app.to_string()).or_default().push(ApiKey {
            value: key.to_string(),
            acl,
        });
        Ok(())
    }

    /// The ACLs of `key` in `app`, if it is one of its keys.
    pub fn check(&self, app: &str, key: &str) -> Option<&BTreeSet<Acl>> {
        self.apps
            .get(app)?
            .iter()
            .find(|k| same_secret(&k.value, key))
            .map(|k| &k.acl)
    }

    /// The configured application ids.
    pub fn apps(&self) -> impl Iterator<Item = &str> {
        self.apps.keys().map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.apps.is_empty()
    }
}

/// An authenticated caller: its application and ACLs.
#[derive(Debug, Clone)]
pub struct Caller {
    pub app: String,
    pub acl: BTreeSet<Acl>,
}

impl Caller {
    /// Ok when the key holds `acl` (or `admin`).
    pub fn require(&self, acl: Acl) -> Result<()> {
        self.require_any(&[acl])
    }

    /// Ok when the key holds one of `acls` (or `admin`).
    pub fn require_any(&self, acls: &[Acl]) -> Result<()> {
        if self.acl.contains(&Acl::Admin) || acls.iter().any(|a| self.acl.contains(a)) {
            Ok(())
        } else {
            Err(Error::Forbidden {
                acl: acls.first().map_or("admin", |a| a.as_str()),
            })
        }
    }
}

fn credential(parts: &Parts, query: &HashMap<String, String>, name: &str) -> Option<String> {
    parts
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| {
            // Browsers' search-insights sends `X-Algolia-Application-Id` and
            // `X-Algolia-API-Key`: query names match case-insensitively.
            query
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        })
}

impl FromRequestParts<Arc<State>> for Caller {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<State>) -> Result<Caller> {
        let query: HashMap<String, String> = Query::try_from_uri(&parts.uri)
            .map(|Query(q)| q)
            .unwrap_or_default();
        let app = credential(parts, &query, APP_ID_HEADER).ok_or(Error::Unauthorized)?;
        let key = credential(parts, &query, API_KEY_HEADER).ok_or(Error::Unauthorized)?;
        let acl = state.keys.check(&app, &key).ok_or(Error::Unauthorized)?;
        Ok(Caller {
            app,
            acl: acl.clone(),
        })
    }
}
