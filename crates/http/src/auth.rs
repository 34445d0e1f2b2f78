//! Applications, their API keys and ACLs, and the request extractor that
//! authenticates a caller from `x-algolia-application-id` and
//! `x-algolia-api-key` (headers, or query parameters of the same names).
//! A key is one of the application's keys (configured in plain text or as
//! a SHA-256 digest, or kept in the store: see [`crate::keystore`]) or a
//! secured API key derived from one of them (see [`crate::secured`]).

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts, Query};
use axum::http::request::Parts;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::clients::Client;
use crate::error::{Error, Result};
use crate::secured::{Restrictions, SecuredKey};
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
    /// Read profiles, the strategy, catalog objects and jobs. Algolia's
    /// name for its Personalization API's ACL, `recommendation`, is taken
    /// as this one (see [`Acl::parse`]).
    #[serde(alias = "recommendation")]
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

    /// The ACL named `text`: one of ours, or `recommendation`, the ACL
    /// Algolia's Personalization API asks for, which reads profiles and
    /// the strategy here as `profiles` does. (Algolia's also lets it set
    /// the strategy and delete profiles; here those stay `admin`.) A key
    /// keeps the names it was given, so Algolia's clients, which refuse
    /// names they do not know, can read back a key made with theirs.
    pub fn parse(text: &str) -> Option<Acl> {
        if text == ALGOLIA_PROFILES {
            return Some(Acl::Profiles);
        }
        [Acl::Search, Acl::Events, Acl::Profiles, Acl::Admin]
            .into_iter()
            .find(|a| a.as_str() == text)
    }
}

/// Algolia's name for the ACL of its Personalization API.
pub const ALGOLIA_PROFILES: &str = "recommendation";

/// One API key. Every comparison is of SHA-256 digests, in constant
/// time, so a key configured as a hash (`sha256:<hex>`) and one in plain
/// text are checked alike, and the time taken tells nothing of a key's
/// length or first differing byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    digest: [u8; 32],
    /// The key itself when configured in plain text: only such a key can
    /// be the parent of secured API keys, whose HMAC is computed with it.
    plain: Option<String>,
    pub acl: BTreeSet<Acl>,
    /// Milliseconds since the epoch after which the key is refused (keys
    /// in the store may expire; configured keys never do).
    valid_until: Option<i64>,
    /// Algolia's `maxQueriesPerIPPerHour`: requests per hour from one
    /// client (see [`crate::clients::Client`]).
    per_client_hourly: Option<u32>,
}

/// The header proxies record the client's address in.
const FORWARDED_FOR: &str = "x-forwarded-for";

/// The prefix of a key configured as its SHA-256 digest.
pub const SHA256_PREFIX: &str = "sha256:";

/// `sha256:<hex>` of a key: what to write in the configuration file to
/// keep the key itself out of it.
pub fn hash_key(key: &str) -> String {
    let digest: [u8; 32] = Sha256::digest(key.as_bytes()).into();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("{SHA256_PREFIX}{hex}")
}

/// The SHA-256 a configured key `value` (plain or `sha256:<hex>`) is
/// compared as.
pub(crate) fn configured_digest(app: &str, value: &str) -> Result<[u8; 32]> {
    ApiKey::parse(app, value, BTreeSet::new()).map(|k| k.digest)
}

impl ApiKey {
    /// A key from its configured value: `sha256:` and 64 hexadecimal
    /// digits is a digest, anything else the key itself.
    fn parse(app: &str, value: &str, acl: BTreeSet<Acl>) -> Result<ApiKey> {
        let Some(hex) = value.strip_prefix(SHA256_PREFIX) else {
            return Ok(ApiKey {
                digest: Sha256::digest(value.as_bytes()).into(),
                plain: Some(value.to_string()),
                acl,
                valid_until: None,
                per_client_hourly: None,
            });
        };
        let bad = || {
            Error::Config {
            reason: format!(
                "application {app:?}: key value {value:?} must be sha256: followed by 64 hexadecimal digits"
            ),
        }
        };
        if hex.len() != 64 {
            return Err(bad());
        }
        let mut digest = [0u8; 32];
        for (out, pair) in digest.iter_mut().zip(hex.as_bytes().chunks_exact(2)) {
            let pair = std::str::from_utf8(pair).map_err(|_| bad())?;
            *out = u8::from_str_radix(pair, 16).map_err(|_| bad())?;
        }
        Ok(ApiKey {
            digest,
            plain: None,
            acl,
            valid_until: None,
            per_client_hourly: None,
        })
    }

    /// A key kept in the store (its ACL names already checked).
    pub(crate) fn stored(
        digest: [u8; 32],
        plain: Option<String>,
        acl: BTreeSet<Acl>,
        valid_until: Option<i64>,
        per_client_hourly: Option<u32>,
    ) -> ApiKey {
        ApiKey {
            digest,
            plain,
            acl,
            valid_until,
            per_client_hourly,
        }
    }

    /// The SHA-256 of the key.
    pub fn digest(&self) -> &[u8; 32] {
        &self.digest
    }

    /// Refused (403) once past its validity.
    fn check_valid(&self, now_millis: i64, what: &str) -> Result<()> {
        match self.valid_until {
            Some(until) if now_millis >= until => Err(Error::Restricted {
                message: format!(
                    "{what} expired at {}: its validity has ended",
                    crate::time::iso(until)
                ),
            }),
            _ => Ok(()),
        }
    }

    fn matches(&self, digest: &[u8; 32]) -> bool {
        self.digest.ct_eq(digest).into()
    }
}

/// The keys of every application.
#[derive(Debug, Clone, Default)]
pub struct Keys {
    apps: HashMap<String, Vec<ApiKey>>,
}

/// What a presented key grants: its ACLs and, for a secured API key, the
/// restrictions it carries.
#[derive(Debug, Clone)]
pub struct Access {
    pub acl: BTreeSet<Acl>,
    pub restrictions: Option<Arc<Restrictions>>,
    /// The SHA-256 of the configured key that granted this (a secured
    /// key's parent): what its rate limit is counted under.
    pub key: [u8; 32],
    /// That key's requests per hour from one client, if it limits them.
    pub per_client_hourly: Option<u32>,
}

impl Keys {
    /// Add a key to an application (creating it); an empty key or ACL
    /// list is refused. `key` is the key itself or `sha256:<hex>`, its
    /// digest (see [`hash_key`]).
    pub fn add(&mut self, app: &str, key: &str, acl: impl IntoIterator<Item = Acl>) -> Result<()> {
        affinity_engine::validate_app(app)?;
        let acl: BTreeSet<Acl> = acl.into_iter().collect();
        if key.is_empty() || acl.is_empty() {
            return Err(Error::Config {
                reason: format!("application {app:?}: a key needs a value and at least one ACL"),
            });
        }
        let key = ApiKey::parse(app, key, acl)?;
        self.apps.entry(app.to_string()).or_default().push(key);
        Ok(())
    }

    /// Limit the requests made with the configured key `key` of `app`
    /// (its value as configured) to `per_hour` from one client.
    pub fn limit_per_client(&mut self, app: &str, key: &str, per_hour: u32) -> Result<()> {
        let digest = configured_digest(app, key)?;
        let found = self
            .apps
            .get_mut(app)
            .and_then(|keys| keys.iter_mut().find(|k| k.digest == digest))
            .ok_or_else(|| Error::Config {
                reason: format!("application {app:?}: no such key to limit"),
            })?;
        found.per_client_hourly = Some(per_hour);
        Ok(())
    }

    /// The ACLs of `key` in `app`, if it is one of its keys (plain or
    /// hashed; secured keys are [`Keys::authenticate`]'s).
    pub fn check(&self, app: &str, key: &str) -> Option<&BTreeSet<Acl>> {
        self.find(app, key).map(|k| &k.acl)
    }

    /// The configured key `key` is, in `app`.
    fn find(&self, app: &str, key: &str) -> Option<&ApiKey> {
        let digest: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        find_among([self.of(app), &[]], &digest)
    }

    /// The configured keys of `app`.
    pub(crate) fn of(&self, app: &str) -> &[ApiKey] {
        self.apps.get(app).map_or(&[], Vec::as_slice)
    }

    /// Whether `digest` is the digest of a configured key of `app`.
    pub(crate) fn is_configured(&self, app: &str, digest: &[u8; 32]) -> bool {
        find_among([self.of(app), &[]], digest).is_some()
    }

    /// What `key` may do in `app`: one of its keys, or a secured API key
    /// signed by one of its plain-text keys (which then grants the
    /// parent's ACLs, narrowed by the restrictions it carries). A key
    /// that is neither, and is not shaped as a secured key, is
    /// [`Error::Unauthorized`]; a secured key signed by no key of the
    /// application, derived from an admin key, or unreadable, is
    /// [`Error::Restricted`].
    pub fn authenticate(&self, app: &str, key: &str) -> Result<Access> {
        self.authenticate_with(app, &[], key, 0)
    }

    /// [`Keys::authenticate`] among the configured keys of `app` and
    /// `stored`, its keys kept in the store, at `now_millis`: a stored
    /// key past its validity (or a secured key derived from one) is
    /// [`Error::Restricted`].
    pub fn authenticate_with(
        &self,
        app: &str,
        stored: &[ApiKey],
        key: &str,
        now_millis: i64,
    ) -> Result<Access> {
        let sets = [self.of(app), stored];
        let digest: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        if let Some(found) = find_among(sets, &digest) {
            found.check_valid(now_millis, "API key")?;
            return Ok(Access {
                acl: found.acl.clone(),
                restrictions: None,
                key: found.digest,
                per_client_hourly: found.per_client_hourly,
            });
        }
        if sets.iter().all(|s| s.is_empty()) {
            return Err(Error::Unauthorized);
        }
        let secured = SecuredKey::decode(key).ok_or(Error::Unauthorized)?;
        let parent = sets
            .iter()
            .flat_map(|s| s.iter())
            .filter_map(|k| Some((k.plain.as_deref()?, k)))
            .find(|(plain, _)| secured.signed_by(plain))
            .map(|(_, k)| k)
            .ok_or_else(|| Error::Restricted {
                message: "Invalid secured API key: it was signed by no key of this application \
                    (tampered with, or derived from a key that is not configured in plain text)"
                    .into(),
            })?;
        if parent.acl.contains(&Acl::Admin) {
            return Err(Error::Restricted {
                message: "Invalid secured API key: it derives from an admin key, \
                    and secured API keys must derive from a key without the admin ACL"
                    .into(),
            });
        }
        parent.check_valid(now_millis, "The parent key of this secured API key")?;
        Ok(Access {
            acl: parent.acl.clone(),
            restrictions: Some(Arc::new(secured.restrictions()?)),
            key: parent.digest,
            per_client_hourly: parent.per_client_hourly,
        })
    }

    /// The configured application ids.
    pub fn apps(&self) -> impl Iterator<Item = &str> {
        self.apps.keys().map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.apps.is_empty()
    }
}

/// The key of `sets` whose digest is `digest`. Every key is compared, in
/// constant time, so the time taken does not tell which matched.
fn find_among<'a>(sets: [&'a [ApiKey]; 2], digest: &[u8; 32]) -> Option<&'a ApiKey> {
    sets.into_iter()
        .flat_map(|s| s.iter())
        .fold(None, |found, k| {
            let matched = k.matches(digest);
            match found {
                None if matched => Some(k),
                _ => found,
            }
        })
}

/// An authenticated caller: its application and ACLs, and the
/// restrictions of its key when it is a secured API key (its expiry and
/// sources already checked).
#[derive(Debug, Clone)]
pub struct Caller {
    pub app: String,
    pub acl: BTreeSet<Acl>,
    pub restrictions: Option<Arc<Restrictions>>,
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

    /// Ok unless the key is restricted to another `userToken`.
    pub fn require_user(&self, user: &str) -> Result<()> {
        self.restrictions
            .as_ref()
            .map_or(Ok(()), |r| r.check_user(user))
    }

    /// Ok unless the key is restricted to other indices.
    pub fn require_index(&self, index: &str) -> Result<()> {
        self.restrictions
            .as_ref()
            .map_or(Ok(()), |r| r.check_index(index))
    }

    /// The user the key is restricted to, if any.
    pub fn only_user(&self) -> Option<&str> {
        self.restrictions.as_ref()?.user_token.as_deref()
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
        let access = state.stored_keys.authenticate(state, &app, &key).await?;
        let needs_ip = access.restrictions.is_some() || access.per_client_hourly.is_some();
        // The connection's peer, or behind trusted proxies the address
        // they forwarded (see `clients.rs` and docs/api.md).
        let ip = needs_ip
            .then(|| {
                let peer = parts
                    .extensions
                    .get::<ConnectInfo<SocketAddr>>()
                    .map(|ConnectInfo(addr)| addr.ip());
                let forwarded = parts
                    .headers
                    .get_all(FORWARDED_FOR)
                    .iter()
                    // An unreadable value ends the walk past the proxies
                    // there, as an entry that is not an address does.
                    .map(|v| v.to_str().unwrap_or("unreadable"));
                state.limiter.proxies.client_ip(peer, forwarded)
            })
            .flatten();
        if let Some(r) = &access.restrictions {
            let now = u64::try_from(state.engine.now_millis() / 1000).unwrap_or(0);
            r.check_time(now)?;
            r.check_source(ip)?;
        }
        state.limiter.check_rate(&app, &access.key)?;
        if let Some(per_hour) = access.per_client_hourly {
            let client = match access
                .restrictions
                .as_ref()
                .and_then(|r| r.user_token.clone())
            {
                Some(user) => Client::User(user),
                None => Client::Ip(ip),
            };
            state
                .limiter
                .check_client(&app, &access.key, &client, per_hour)?;
        }
        Ok(Caller {
            app,
            acl: access.acl,
            restrictions: access.restrictions,
        })
    }
}
