//! API keys kept in the store (`docs/design/keys.md`): made, changed and
//! deleted through any server (`/1/keys`) or the CLI (`affinity keys
//! add/list/delete`), and seen by every server within [`KEYS_REFRESH`].
//!
//! Every request authenticates, so the hot path never reads the store: it
//! looks keys up in this server's snapshot of the stored keys
//! ([`StoredKeys`]). The snapshot is re-read
//! - every [`KEYS_REFRESH`]: by [`crate::serve`]'s refresh task, or by the
//!   first request that finds it that old;
//! - when a request's key is unknown and the snapshot is older than
//!   [`MISS_REFRESH`] (a key just made on another server works at once);
//! - at once after a change through this server.
//!
//! A re-read is one point read of the keys' change counter, and a scan of
//! the keys only when the counter moved. At most one runs at a time (a
//! request that finds one running waits for it and judges its key by the
//! result), and at most one starts per [`MISS_REFRESH`], whatever the
//! requests: a flood of wrong keys costs at most 1 / [`MISS_REFRESH`]
//! point reads a second.
//! The configured keys (the TOML's) are checked alongside and cannot be
//! changed or deleted here.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use affinity_engine::{Engine, StoredKey};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use axum::extract::{Path, State as Shared};
use axum::Json;

use crate::auth::{Access, Acl, ApiKey, Caller, ALGOLIA_PROFILES, SHA256_PREFIX};
use crate::body::Body;
use crate::error::{blocking, Error, Result};
use crate::state::State;
use crate::time::iso;

/// How old this server's snapshot of the stored keys may get: a key
/// created, changed or deleted through another server (or the CLI) takes
/// effect here within this long (plus one re-read of the store).
pub const KEYS_REFRESH: Duration = Duration::from_secs(2);

/// The least time between two re-reads of the stored keys started by
/// requests: bounds the store reads a flood of unknown keys can cause.
pub const MISS_REFRESH: Duration = Duration::from_millis(100);

/// The longest validity a key may be given: 100 years, in seconds.
pub const MAX_VALIDITY_SECONDS: u64 = 100 * 365 * 86_400;

/// The longest description, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 1024;

/// The stored keys of every application, as this server last read them.
#[derive(Debug)]
struct Snapshot {
    /// The keys' change counter when they were read (`-1`: never read).
    generation: i64,
    read_at: Instant,
    apps: Arc<HashMap<String, Vec<ApiKey>>>,
}

/// This server's snapshot of the keys in the store, and the bookkeeping
/// that keeps re-reads rare (see the module's text).
#[derive(Debug)]
pub struct StoredKeys {
    snapshot: RwLock<Arc<Snapshot>>,
    /// When the last re-read started; held while one runs.
    refreshing: tokio::sync::Mutex<Option<Instant>>,
}

impl Default for StoredKeys {
    fn default() -> StoredKeys {
        StoredKeys {
            snapshot: RwLock::new(Arc::new(Snapshot {
                generation: -1,
                // Old enough to be re-read by the first request.
                read_at: Instant::now()
                    .checked_sub(KEYS_REFRESH * 2)
                    .unwrap_or_else(Instant::now),
                apps: Arc::default(),
            })),
            refreshing: tokio::sync::Mutex::new(None),
        }
    }
}

impl StoredKeys {
    fn current(&self) -> Arc<Snapshot> {
        Arc::clone(&self.snapshot.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// The application ids that have stored keys, as last read.
    pub fn apps(&self) -> Vec<String> {
        self.current().apps.keys().cloned().collect()
    }

    /// Re-read the stored keys now (blocking): after a change through this
    /// server.
    pub fn reload(&self, engine: &Engine) -> Result<()> {
        let fresh = read_snapshot(engine, &self.current())?;
        self.install(fresh);
        Ok(())
    }

    /// Install `fresh` unless a newer snapshot was installed meanwhile.
    fn install(&self, fresh: Snapshot) {
        let mut slot = self.snapshot.write().unwrap_or_else(|p| p.into_inner());
        if fresh.read_at >= slot.read_at {
            *slot = Arc::new(fresh);
        }
    }

    /// Re-read the keys off the async workers if the snapshot is at least
    /// `age` old and no re-read started within [`MISS_REFRESH`]; `true`
    /// when the snapshot changed since the call began. A call that finds a
    /// re-read running waits for it rather than judging a key by the
    /// snapshot that re-read replaces (a server's first requests would
    /// otherwise race its first read of the keys). A failed re-read is
    /// logged and the old snapshot kept.
    async fn refresh_if_older(&self, engine: &Arc<Engine>, age: Duration) -> bool {
        let before = self.current();
        if before.read_at.elapsed() < age {
            return false;
        }
        let mut last = self.refreshing.lock().await;
        if !Arc::ptr_eq(&before, &self.current()) {
            return true;
        }
        if last.is_some_and(|t| t.elapsed() < MISS_REFRESH) {
            return false;
        }
        *last = Some(Instant::now());
        let engine = Arc::clone(engine);
        let old = self.current();
        match tokio::task::spawn_blocking(move || read_snapshot(&engine, &old)).await {
            Ok(Ok(fresh)) => {
                self.install(fresh);
                true
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cannot re-read the stored API keys");
                false
            }
            Err(e) => {
                tracing::warn!(error = %e, "the API key re-read failed");
                false
            }
        }
    }

    /// Keep the snapshot at most [`KEYS_REFRESH`] old, so requests seldom
    /// wait for a re-read ([`crate::serve`] runs this).
    pub async fn refresh_forever(state: Arc<State>) {
        let mut tick = tokio::time::interval(KEYS_REFRESH / 2);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            state
                .stored_keys
                .refresh_if_older(&state.engine, KEYS_REFRESH / 2)
                .await;
        }
    }

    /// What `key` may do in `app`: a configured key, a stored one, or a
    /// secured API key derived from either (see
    /// [`crate::Keys::authenticate_with`]). Reads the store only as the
    /// module's text says.
    pub async fn authenticate(&self, state: &State, app: &str, key: &str) -> Result<Access> {
        // One look at the snapshot per request: the re-read's own checks
        // run only once it is due.
        let mut snapshot = self.current();
        if snapshot.read_at.elapsed() >= KEYS_REFRESH
            && self.refresh_if_older(&state.engine, KEYS_REFRESH).await
        {
            snapshot = self.current();
        }
        let check = |snapshot: &Snapshot| {
            let stored = snapshot.apps.get(app).map_or(&[][..], Vec::as_slice);
            state
                .keys
                .authenticate_with(app, stored, key, state.engine.now_millis())
        };
        match check(&snapshot) {
            Err(Error::Unauthorized | Error::Restricted { .. })
                if self.refresh_if_older(&state.engine, MISS_REFRESH).await =>
            {
                check(&self.current())
            }
            result => result,
        }
    }
}

/// The stored keys now: the change counter, then the keys only if it
/// moved since `old` (blocking).
fn read_snapshot(engine: &Engine, old: &Snapshot) -> Result<Snapshot> {
    let read_at = Instant::now();
    let generation = engine.api_keys_generation()?;
    let apps = if generation == old.generation {
        Arc::clone(&old.apps)
    } else {
        Arc::new(
            engine
                .all_api_keys()?
                .into_iter()
                .map(|(app, keys)| {
                    let keys = keys.iter().filter_map(|k| usable(&app, k)).collect();
                    (app, keys)
                })
                .collect(),
        )
    };
    Ok(Snapshot {
        generation,
        read_at,
        apps,
    })
}

/// A stored key as requests check it; one naming an ACL this server does
/// not know is left out (logged), never granted more than it says.
fn usable(app: &str, key: &StoredKey) -> Option<ApiKey> {
    let acl = key
        .acl
        .iter()
        .map(|a| Acl::parse(a).ok_or(a))
        .collect::<std::result::Result<BTreeSet<Acl>, _>>();
    match acl {
        Ok(acl) if !acl.is_empty() => Some(ApiKey::stored(
            key.digest,
            key.plain.clone(),
            acl,
            key.valid_until,
            key.max_queries_per_ip_per_hour,
        )),
        Ok(_) => None,
        Err(unknown) => {
            tracing::warn!(app, acl = %unknown, "a stored API key names an unknown ACL: it is not used");
            None
        }
    }
}

/// What a key may do, as `POST /1/keys`, `PUT /1/keys/{key}` and
/// `affinity keys add` give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpec {
    pub acl: Acls,
    pub description: String,
    /// Seconds from now after which the key is refused; 0: never.
    pub validity: u64,
    /// Algolia's `maxQueriesPerIPPerHour`: requests an hour from one
    /// client (see `clients.rs`); 0: no limit.
    pub max_queries_per_ip_per_hour: u32,
}

/// A key's ACLs: what they grant, and the names they were given by,
/// which the key keeps and lists (Algolia's `recommendation` grants
/// [`Acl::Profiles`] but is listed as given; see [`Acl::parse`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acls {
    pub grants: BTreeSet<Acl>,
    /// Each name once, in the order given.
    pub names: Vec<String>,
}

/// The ACLs named in `names`: at least one, each one of ours or
/// Algolia's `recommendation`.
pub fn parse_acls<S: AsRef<str>>(names: &[S]) -> Result<Acls> {
    let mut out = Acls {
        grants: BTreeSet::new(),
        names: Vec::new(),
    };
    for name in names {
        let name = name.as_ref();
        out.grants.insert(Acl::parse(name).ok_or_else(|| {
            invalid(
                "acl",
                format!(
                    "unknown ACL {name:?}: use search, events, profiles or admin \
                     (or Algolia's {ALGOLIA_PROFILES}, which is profiles)"
                ),
            )
        })?);
        if !out.names.iter().any(|n| n == name) {
            out.names.push(name.to_string());
        }
    }
    if out.grants.is_empty() {
        return Err(invalid("acl", "a key needs at least one ACL"));
    }
    Ok(out)
}

fn invalid(name: &'static str, reason: impl Into<String>) -> Error {
    Error::Engine(affinity_engine::Error::InvalidArgument {
        name,
        reason: reason.into(),
    })
}

/// Algolia's key fields this server does not apply: refused, so no one
/// believes a key is narrower than it is.
const UNSUPPORTED: [&str; 4] = ["indexes", "maxHitsPerQuery", "queryParameters", "referers"];

/// The fields of a key's body, as a refusal lists them.
const FIELDS: &str = "acl, description, validity and maxQueriesPerIPPerHour";

impl KeySpec {
    /// Check `description` and `validity` (seconds, 0: never expires).
    pub fn new(acl: Acls, description: String, validity: u64) -> Result<KeySpec> {
        if description.len() > MAX_DESCRIPTION_BYTES {
            return Err(invalid(
                "description",
                format!(
                    "{} bytes, the most is {MAX_DESCRIPTION_BYTES}",
                    description.len()
                ),
            ));
        }
        if validity > MAX_VALIDITY_SECONDS {
            return Err(invalid(
                "validity",
                format!("{validity} seconds, the most is {MAX_VALIDITY_SECONDS} (100 years); 0 never expires"),
            ));
        }
        Ok(KeySpec {
            acl,
            description,
            validity,
            max_queries_per_ip_per_hour: 0,
        })
    }

    /// Limit the key's requests to `per_hour` an hour from one client
    /// (0: no limit).
    pub fn with_max_queries_per_ip_per_hour(mut self, per_hour: u32) -> KeySpec {
        self.max_queries_per_ip_per_hour = per_hour;
        self
    }

    /// A key's body as Algolia's API takes it: `acl` (required),
    /// `description`, `validity` (seconds, 0: never expires).
    pub fn from_json(body: &Value) -> Result<KeySpec> {
        let object = body
            .as_object()
            .ok_or_else(|| invalid("body", "must be a JSON object with an acl list"))?;
        for name in object.keys() {
            if UNSUPPORTED.contains(&name.as_str()) {
                return Err(invalid(
                    "body",
                    format!("{name:?} is not supported by this server: use {FIELDS}"),
                ));
            }
            if !matches!(
                name.as_str(),
                "acl" | "description" | "validity" | "maxQueriesPerIPPerHour"
            ) {
                return Err(invalid(
                    "body",
                    format!("unknown field {name:?}: use {FIELDS}"),
                ));
            }
        }
        let acl = match object.get("acl") {
            Some(Value::Array(names)) => {
                let names = names
                    .iter()
                    .map(|n| {
                        n.as_str()
                            .ok_or_else(|| invalid("acl", format!("{n} is not an ACL name")))
                    })
                    .collect::<Result<Vec<&str>>>()?;
                parse_acls(&names)?
            }
            Some(other) => {
                return Err(invalid(
                    "acl",
                    format!("must be a list of ACL names, not {other}"),
                ))
            }
            None => return Err(invalid("acl", "is required (a list of ACL names)")),
        };
        let description = match object.get("description") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(d)) => d.clone(),
            Some(other) => {
                return Err(invalid(
                    "description",
                    format!("must be a string, not {other}"),
                ))
            }
        };
        let validity = match object.get("validity") {
            None | Some(Value::Null) => 0,
            Some(v) => v.as_u64().ok_or_else(|| {
                invalid(
                    "validity",
                    format!("must be a whole number of seconds, 0 or more, not {v}"),
                )
            })?,
        };
        let per_hour = match object.get("maxQueriesPerIPPerHour") {
            None | Some(Value::Null) => 0,
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| {
                    invalid(
                        "maxQueriesPerIPPerHour",
                        format!(
                            "must be a whole number of requests from 0 (no limit) to {}, not {v}",
                            u32::MAX
                        ),
                    )
                })?,
        };
        Ok(KeySpec::new(acl, description, validity)?.with_max_queries_per_ip_per_hour(per_hour))
    }

    fn stored(
        &self,
        digest: [u8; 32],
        plain: Option<String>,
        created_at: i64,
        now: i64,
    ) -> StoredKey {
        StoredKey {
            digest,
            // A key that may be the parent of secured API keys keeps its
            // text (their HMAC needs it); an admin key never can be.
            plain: plain.filter(|_| !self.acl.grants.contains(&Acl::Admin)),
            acl: self.acl.names.clone(),
            description: self.description.clone(),
            created_at,
            valid_until: (self.validity > 0).then(|| now + self.validity as i64 * 1000),
            max_queries_per_ip_per_hour: (self.max_queries_per_ip_per_hour > 0)
                .then_some(self.max_queries_per_ip_per_hour),
        }
    }
}

/// The digest a key is named by in a path or on the command line: the
/// key itself, or `sha256:<hex>` (how a key whose text is not kept is
/// listed).
pub fn digest_of(key: &str) -> Result<[u8; 32]> {
    if key.is_empty() {
        return Err(invalid("key", "is empty"));
    }
    match key.strip_prefix(SHA256_PREFIX) {
        Some(_) => crate::auth::configured_digest("", key).map_err(|_| {
            invalid(
                "key",
                format!("{key:?}: sha256: must be followed by 64 hexadecimal digits"),
            )
        }),
        None => Ok(Sha256::digest(key.as_bytes()).into()),
    }
}

/// A new key: 32 hexadecimal digits, 128 random bits, as Algolia's.
fn new_key() -> String {
    rand::random::<[u8; 16]>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The key a stored key is listed as: its text when kept, else
/// `sha256:<hex>`.
fn listed_value(key: &StoredKey) -> String {
    key.plain.clone().unwrap_or_else(|| {
        format!(
            "{SHA256_PREFIX}{}",
            affinity_engine::api_keys::digest_hex(&key.digest)
        )
    })
}

/// A stored key as `GET /1/keys` lists it (Algolia's shape; `validity` is
/// the seconds left, 0 for a key that never expires).
pub fn key_json(key: &StoredKey, now_millis: i64) -> Value {
    let validity = key
        .valid_until
        .map_or(0, |until| ((until - now_millis).max(0) + 999) / 1000);
    let mut out = Map::new();
    out.insert("value".into(), json!(listed_value(key)));
    out.insert("createdAt".into(), json!(key.created_at));
    out.insert("acl".into(), json!(key.acl));
    out.insert("description".into(), json!(key.description));
    out.insert("validity".into(), json!(validity));
    out.insert(
        "maxQueriesPerIPPerHour".into(),
        json!(key.max_queries_per_ip_per_hour.unwrap_or(0)),
    );
    Value::Object(out)
}

/// Refuse changing a configured key through the store.
fn not_configured(keys: &crate::Keys, app: &str, digest: &[u8; 32]) -> Result<()> {
    if keys.is_configured(app, digest) {
        return Err(invalid(
            "key",
            "it is one of this server's configured keys (its --config file): \
             change or remove it there, not through the API",
        ));
    }
    Ok(())
}

fn unknown_key() -> Error {
    Error::not_found(
        "Key does not exist: no stored key of this application has it \
         (a key of a server's configuration file is changed in that file)",
    )
}

/// Make a key for `app` (blocking): the key, once, and its `createdAt`.
pub fn create(engine: &Engine, app: &str, spec: &KeySpec) -> Result<(String, i64)> {
    let key = new_key();
    let now = engine.now_millis();
    let digest: [u8; 32] = Sha256::digest(key.as_bytes()).into();
    engine.put_api_key(app, &spec.stored(digest, Some(key.clone()), now, now))?;
    Ok((key, now))
}

/// The stored key `key` names (the key or `sha256:<hex>`) in `app`.
pub fn get(engine: &Engine, keys: &crate::Keys, app: &str, key: &str) -> Result<StoredKey> {
    let digest = digest_of(key)?;
    match engine.api_key(app, &digest)? {
        Some(stored) => Ok(stored),
        None => {
            not_configured(keys, app, &digest)?;
            Err(unknown_key())
        }
    }
}

/// Replace what the stored key `key` may do (blocking); returns
/// `updatedAt`. Its creation time stays; its validity counts from now.
pub fn update(
    engine: &Engine,
    keys: &crate::Keys,
    app: &str,
    key: &str,
    spec: &KeySpec,
) -> Result<i64> {
    let old = get(engine, keys, app, key)?;
    let plain = old
        .plain
        .clone()
        .or_else(|| (!key.starts_with(SHA256_PREFIX)).then(|| key.to_string()));
    let now = engine.now_millis();
    engine.put_api_key(app, &spec.stored(old.digest, plain, old.created_at, now))?;
    Ok(now)
}

/// Delete the stored key `key` (blocking); returns `deletedAt`.
pub fn delete(engine: &Engine, keys: &crate::Keys, app: &str, key: &str) -> Result<i64> {
    let digest = digest_of(key)?;
    not_configured(keys, app, &digest)?;
    if !engine.delete_api_key(app, &digest)? {
        return Err(unknown_key());
    }
    Ok(engine.now_millis())
}

/// The stored keys of `app`, newest first.
pub fn list(engine: &Engine, app: &str) -> Result<Vec<StoredKey>> {
    let mut keys = engine.api_keys(app)?;
    keys.sort_by_key(|k| std::cmp::Reverse((k.created_at, k.digest)));
    Ok(keys)
}

/// `POST /1/keys`: make a key (admin); answers `{key, createdAt}`, the
/// only time the key is shown in full for an admin key.
pub async fn post_key(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    body: Body,
) -> Result<Json<Value>> {
    caller.require(Acl::Admin)?;
    let app = caller.app;
    let (key, created_at) = blocking(move || {
        let spec = KeySpec::from_json(&body.json()?)?;
        let made = create(&state.engine, &app, &spec)?;
        state.stored_keys.reload(&state.engine)?;
        tracing::info!(app, acl = ?spec.acl.names, "API key created");
        Ok(made)
    })
    .await?;
    Ok(Json(json!({"key": key, "createdAt": iso(created_at)})))
}

/// `GET /1/keys`: the application's stored keys (admin).
pub async fn list_keys(Shared(state): Shared<Arc<State>>, caller: Caller) -> Result<Json<Value>> {
    caller.require(Acl::Admin)?;
    let app = caller.app;
    let keys = blocking(move || {
        let now = state.engine.now_millis();
        Ok(list(&state.engine, &app)?
            .iter()
            .map(|k| key_json(k, now))
            .collect::<Vec<_>>())
    })
    .await?;
    Ok(Json(json!({ "keys": keys })))
}

/// `GET /1/keys/{key}`: one stored key (admin).
pub async fn get_key(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<Value>> {
    caller.require(Acl::Admin)?;
    let app = caller.app;
    blocking(move || {
        let stored = get(&state.engine, &state.keys, &app, &key)?;
        Ok(Json(key_json(&stored, state.engine.now_millis())))
    })
    .await
}

/// `PUT /1/keys/{key}`: replace a stored key's ACLs, description and
/// validity (admin); answers `{key, updatedAt}`.
pub async fn put_key(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    Path(key): Path<String>,
    body: Body,
) -> Result<Json<Value>> {
    caller.require(Acl::Admin)?;
    let app = caller.app;
    blocking(move || {
        let spec = KeySpec::from_json(&body.json()?)?;
        let updated_at = update(&state.engine, &state.keys, &app, &key, &spec)?;
        state.stored_keys.reload(&state.engine)?;
        tracing::info!(app, acl = ?spec.acl.names, "API key changed");
        Ok(Json(json!({"key": key, "updatedAt": iso(updated_at)})))
    })
    .await
}

/// `DELETE /1/keys/{key}`: delete a stored key (admin); answers
/// `{deletedAt}`. Every server refuses it within [`KEYS_REFRESH`].
pub async fn delete_key(
    Shared(state): Shared<Arc<State>>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<Value>> {
    caller.require(Acl::Admin)?;
    let app = caller.app;
    blocking(move || {
        let deleted_at = delete(&state.engine, &state.keys, &app, &key)?;
        state.stored_keys.reload(&state.engine)?;
        tracing::info!(app, "API key deleted");
        Ok(Json(json!({"deletedAt": iso(deleted_at)})))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine_with_a_key() -> Arc<Engine> {
        let engine = Engine::open(Arc::new(affinity_model::MemoryStore::new())).unwrap();
        let key = StoredKey {
            digest: [7; 32],
            plain: None,
            acl: vec!["search".into()],
            description: String::new(),
            created_at: 0,
            valid_until: None,
            max_queries_per_ip_per_hour: None,
        };
        engine.put_api_key("shop", &key).unwrap();
        Arc::new(engine)
    }

    /// Algolia's `recommendation` grants `profiles`, and the key keeps
    /// the names it was given, each once, so Algolia's clients can read
    /// it back; an unknown name is refused naming it.
    #[test]
    fn algolia_recommendation_is_profiles_listed_as_given() {
        let acls = parse_acls(&["recommendation", "search", "recommendation"]).unwrap();
        assert_eq!(acls.grants, BTreeSet::from([Acl::Search, Acl::Profiles]));
        assert_eq!(acls.names, ["recommendation", "search"]);
        let spec = KeySpec::new(acls, String::new(), 0).unwrap();
        let stored = spec.stored([1; 32], Some("k".into()), 0, 0);
        assert_eq!(stored.acl, ["recommendation", "search"]);
        let key = usable("shop", &stored).unwrap();
        assert!(key.acl.contains(&Acl::Profiles) && !key.acl.contains(&Acl::Admin));
        let err = parse_acls(&["addObject"]).unwrap_err().to_string();
        assert!(
            err.contains("addObject") && err.contains("recommendation"),
            "{err}"
        );
    }

    /// A server's first request used to race its refresh task's first
    /// read: finding that read running, it judged the key by the empty
    /// snapshot and answered 401. It now waits for the running read.
    #[tokio::test]
    async fn a_request_waits_for_the_re_read_it_finds_running() {
        let engine = engine_with_a_key();
        let keys = Arc::new(StoredKeys::default());
        let running = keys.refreshing.lock().await;
        let asking = {
            let (keys, engine) = (Arc::clone(&keys), Arc::clone(&engine));
            tokio::spawn(async move { keys.refresh_if_older(&engine, KEYS_REFRESH).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !asking.is_finished(),
            "did not wait for the running re-read"
        );
        keys.reload(&engine).unwrap();
        drop(running);
        assert!(
            asking.await.unwrap(),
            "the snapshot changed while it waited"
        );
        assert_eq!(keys.apps(), ["shop"]);
        // Fresh now: a further call reads nothing.
        assert!(!keys.refresh_if_older(&engine, MISS_REFRESH).await);
    }

    #[tokio::test]
    async fn re_reads_started_by_requests_are_spaced() {
        let engine = engine_with_a_key();
        let keys = StoredKeys::default();
        assert!(keys.refresh_if_older(&engine, Duration::ZERO).await);
        // Within MISS_REFRESH of the last start, even a zero age reads nothing.
        assert!(!keys.refresh_if_older(&engine, Duration::ZERO).await);
        tokio::time::sleep(MISS_REFRESH).await;
        assert!(keys.refresh_if_older(&engine, Duration::ZERO).await);
    }
}
