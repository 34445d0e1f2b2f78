//! The engine handle: tables, per-application configuration, strategies
//! and the catalog.
//!
//! Tables (created on first use):
//! - `apps`: row = application id; family `c` holds the configuration
//!   (JSON, latest version only), family `s` every version of the strategy
//!   (cell timestamp = `updatedAt`).
//! - `catalog`: row = tuple(app, index, objectID), family `o`, the object's
//!   JSON.
//! - `events.<app>`: the application's events (see [`crate::schema`]);
//!   families `view`, `click`, `conversion` and `e`, all with GC max-age =
//!   the retention.
//! - `profiles.<app>`: row `user` holds the batch profile (family `b`),
//!   rows `user,DAY` the streaming state (families `c`, `l`, see
//!   [`crate::ingest`]); rows `~job,<name>` and `~migrate` the state of
//!   recompute jobs and of a migration (no user token contains `~`).
//! - `trends.<app>`: one row per (event, located object), keyed by place
//!   and time, for regional trends (see [`crate::trends`]).
//!
//! Events are keyed by the event's identity: the `authenticatedUserToken`
//! when present, else the `userToken`. The events table may be salted per
//! application ([`crate::salting`]).
//!
//! One table per application gives each its own retention and keeps one
//! application's rows out of reach of another's key.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use affinity_model::{
    Error as StoreError, FamilyModification, GcRule, Mutation, ReadRowsRequest, RowFilter, RowSet,
    Store, Table, TableSpec,
};
use affinity_rowkey::tuple::{self, Element};
use serde_json::Value;
use std::sync::{Mutex, RwLock};

use crate::catalog::{Catalog, CatalogObject};
use crate::error::{Error, Result};
use crate::event::EventType;
use crate::ingest::{COUNTERS_FAMILY, IDS_FAMILY, LAST_FAMILY};
use crate::rollup;
use crate::schema::{Schema, WIDE_FAMILY};
use crate::strategy::Strategy;

/// Milliseconds in a day.
pub const DAY_MILLIS: i64 = 86_400_000;
/// Default retention.
pub const DEFAULT_RETENTION_DAYS: u32 = 90;
/// How many days a rollup may lag the window before reads stop using it
/// (see `docs/design/profiles.md`): the state rows and events it would
/// subtract are kept this long past the retention.
pub(crate) const SLACK_DAYS: u32 = 3;

/// The first event day counted at `now_millis` with `retention_days`:
/// every event of a day leaves the window at the same instant, `retention`
/// after its day began.
pub fn window_start_day(now_millis: i64, retention_days: u32) -> i64 {
    (now_millis - i64::from(retention_days) * DAY_MILLIS).div_euclid(DAY_MILLIS) + 1
}

/// A clock in milliseconds since the epoch.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// Per-application configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppConfig {
    /// The schema readers use.
    pub schema: Schema,
    pub retention_days: u32,
}

impl Default for AppConfig {
    fn default() -> AppConfig {
        AppConfig {
            schema: Schema::Narrow,
            retention_days: DEFAULT_RETENTION_DAYS,
        }
    }
}

impl AppConfig {
    pub fn retention_millis(&self) -> i64 {
        i64::from(self.retention_days) * DAY_MILLIS
    }

    /// The first counted event day at `now_millis` ([`window_start_day`]).
    pub fn window_start_day(&self, now_millis: i64) -> i64 {
        window_start_day(now_millis, self.retention_days)
    }

    /// The first counted instant at `now_millis`: events at or after it
    /// count ([`window_start_day`]'s first millisecond).
    pub fn window_start_millis(&self, now_millis: i64) -> i64 {
        self.window_start_day(now_millis) * DAY_MILLIS
    }
}

/// Everything stored about an application: its configuration, plus the
/// salting chosen at creation and the migration state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AppSettings {
    pub config: AppConfig,
    /// During a migration: the schema events are also written in.
    pub dual_write: Option<Schema>,
    /// Salt the events table over this many buckets (see
    /// [`crate::salting`]); fixed at creation.
    pub salt_buckets: Option<u32>,
}

impl AppSettings {
    fn to_json(self) -> Value {
        serde_json::json!({"schema": self.config.schema.as_str(),
            "retentionDays": self.config.retention_days,
            "dualWrite": self.dual_write.map(Schema::as_str), "saltBuckets": self.salt_buckets})
    }

    fn from_json(v: &Value) -> Result<AppSettings> {
        let schema = Schema::parse(v.get("schema").and_then(Value::as_str).unwrap_or(""))?;
        let retention_days = v
            .get("retentionDays")
            .and_then(Value::as_u64)
            .and_then(|d| u32::try_from(d).ok())
            .ok_or_else(|| Error::corrupt("app config", v.to_string()))?;
        let dual_write = match v.get("dualWrite").and_then(Value::as_str) {
            Some(s) => Some(Schema::parse(s)?),
            None => None,
        };
        let salt_buckets = v
            .get("saltBuckets")
            .and_then(Value::as_u64)
            .and_then(|b| u32::try_from(b).ok());
        Ok(AppSettings {
            config: AppConfig {
                schema,
                retention_days,
            },
            dual_write,
            salt_buckets,
        })
    }
}

/// An application's open tables and configuration.
#[derive(Clone)]
pub struct App {
    pub id: String,
    pub config: AppConfig,
    /// The events table (physical keys: see [`App::event_key`]).
    pub events: Arc<dyn Table>,
    pub profiles: Arc<dyn Table>,
    /// The regional-trends table (see [`crate::trends`]).
    pub trends: Arc<dyn Table>,
    /// During a migration: the schema events are also written in.
    pub dual_write: Option<Schema>,
    /// The salt bucket count of the events table, if salted.
    pub salt_buckets: Option<u32>,
    pub(crate) salter: Option<affinity_rowkey::salt::Salter>,
}

impl App {
    /// The cells of one event: the schema's, plus the dual-write schema's
    /// during a migration (same row, so both land atomically).
    pub fn event_mutations(&self, event: &crate::scoring::ScoredEvent) -> Vec<Mutation> {
        let mut out = Vec::new();
        self.push_event_mutations(event, &mut crate::arena::Arena::new(), &mut out);
        out
    }

    /// [`App::event_mutations`] appended to `out`, their bytes cut from
    /// `arena`.
    pub fn push_event_mutations(
        &self,
        event: &crate::scoring::ScoredEvent,
        arena: &mut crate::arena::Arena,
        out: &mut Vec<Mutation>,
    ) {
        self.config.schema.push_mutations(event, arena, out);
        if let Some(other) = self.dual_write.filter(|s| *s != self.config.schema) {
            other.push_mutations(event, arena, out);
        }
    }

    /// The stored settings this handle was opened with.
    pub fn settings(&self) -> AppSettings {
        AppSettings {
            config: self.config,
            dual_write: self.dual_write,
            salt_buckets: self.salt_buckets,
        }
    }
}

/// The engine: everything goes through one of these.
pub struct Engine {
    pub(crate) store: Arc<dyn Store>,
    clock: Clock,
    apps_table: Arc<dyn Table>,
    catalog_table: Arc<dyn Table>,
    apps: Mutex<HashMap<String, App>>,
    catalogs: RwLock<HashMap<(String, String), Arc<Catalog>>>,
}

fn create_if_missing(store: &dyn Store, name: &str, spec: &TableSpec) -> Result<Arc<dyn Table>> {
    match store.create_table(name, spec) {
        Ok(()) | Err(StoreError::TableExists { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(store.open_table(name)?)
}

/// Check an application id: `[A-Za-z0-9_-]{1,32}`.
pub fn validate_app(app: &str) -> Result<()> {
    if (1..=32).contains(&app.len())
        && app
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        Ok(())
    } else {
        Err(Error::InvalidApp {
            app: app.to_string(),
        })
    }
}

fn system_millis() -> i64 {
    affinity_model::apply::now_micros() / 1000
}

impl Engine {
    /// An engine on `store`, on the system clock.
    pub fn open(store: Arc<dyn Store>) -> Result<Engine> {
        Engine::with_clock(store, Arc::new(system_millis))
    }

    /// An engine reading time from `clock` (tests use a fake one; it must
    /// agree with the store's clock for GC).
    pub fn with_clock(store: Arc<dyn Store>, clock: Clock) -> Result<Engine> {
        let apps_table = create_if_missing(
            store.as_ref(),
            "apps",
            &TableSpec::new()
                .with_family("c", GcRule::MaxVersions(1))
                .with_family("s", GcRule::None),
        )?;
        let catalog_table = create_if_missing(
            store.as_ref(),
            "catalog",
            &TableSpec::new().with_family("o", GcRule::MaxVersions(1)),
        )?;
        Ok(Engine {
            store,
            clock,
            apps_table,
            catalog_table,
            apps: Mutex::new(HashMap::new()),
            catalogs: RwLock::new(HashMap::new()),
        })
    }

    /// The engine's clock, milliseconds since the epoch.
    pub fn now_millis(&self) -> i64 {
        (self.clock)()
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    fn events_spec(config: &AppConfig) -> TableSpec {
        // Past the retention by the rollup slack: reads correct expired
        // days of a lagging rollup from their events.
        let days = u64::from(config.retention_days + SLACK_DAYS + 1);
        let age = GcRule::MaxAge(Duration::from_millis(days * DAY_MILLIS as u64));
        let mut spec = TableSpec::new().with_family(WIDE_FAMILY, age.clone());
        for ty in EventType::ALL {
            spec = spec.with_family(ty.as_str(), age.clone());
        }
        spec
    }

    fn profiles_spec(config: &AppConfig) -> TableSpec {
        // Day-row cells are stamped with their arrival day: they outlive
        // the retention by the rollup slack plus a day of margin.
        let days = u64::from(config.retention_days + SLACK_DAYS + 2);
        let state = GcRule::MaxAge(Duration::from_millis(days * DAY_MILLIS as u64));
        let latest = GcRule::Union(vec![GcRule::MaxVersions(1), state.clone()]);
        let one = GcRule::MaxVersions(1);
        TableSpec::new()
            .with_sum_family(COUNTERS_FAMILY, state.clone())
            .with_sum_family(IDS_FAMILY, state.clone())
            .with_sum_family(LAST_FAMILY, latest)
            .with_sum_family(rollup::MARKS_FAMILY, state)
            .with_family(rollup::TOTALS_FAMILY, one.clone())
            .with_family(rollup::LATEST_FAMILY, one.clone())
            .with_family(rollup::WATERMARK_FAMILY, one.clone())
            .with_family(
                rollup::TOMBSTONE_FAMILY,
                // Far longer than a fold runs, then the row goes.
                GcRule::Union(vec![
                    one.clone(),
                    GcRule::MaxAge(Duration::from_millis(7 * DAY_MILLIS as u64)),
                ]),
            )
            .with_family("b", one)
    }

    /// The application's stored settings, if it was ever configured.
    pub fn stored_settings(&self, app: &str) -> Result<Option<AppSettings>> {
        let filter = RowFilter::Chain(vec![
            RowFilter::exact_family("c"),
            RowFilter::CellsPerColumnLimit(1),
        ]);
        match self.apps_table.read_row(app.as_bytes(), Some(&filter))? {
            Some(row) => match row.cells.first() {
                Some(cell) => Ok(Some(AppSettings::from_json(&serde_json::from_slice(
                    &cell.value,
                )?)?)),
                None => Ok(None),
            },
            None => Ok(None),
        }
    }

    /// Set an application's configuration, creating its tables; a new
    /// retention updates the families' GC rules. Changing the schema does
    /// not move existing events (that is the migration's job). Salting and
    /// migration state are kept.
    pub fn configure_app(&self, app: &str, config: AppConfig) -> Result<App> {
        validate_app(app)?;
        let stored = self.stored_settings(app)?.unwrap_or_default();
        self.apply_settings(app, AppSettings { config, ..stored })
    }

    /// Create (or reconfigure) an application whose events table is salted
    /// over `buckets` buckets (1..=256). The bucket count cannot change once
    /// the application exists.
    pub fn configure_salted_app(&self, app: &str, config: AppConfig, buckets: u32) -> Result<App> {
        validate_app(app)?;
        let stored = self.stored_settings(app)?;
        if let Some(s) = stored.filter(|s| s.salt_buckets != Some(buckets)) {
            return Err(Error::InvalidArgument {
                name: "salt buckets",
                reason: format!(
                    "application {app:?} is salted over {:?} buckets; that cannot change",
                    s.salt_buckets
                ),
            });
        }
        let dual_write = stored.and_then(|s| s.dual_write);
        self.apply_settings(
            app,
            AppSettings {
                config,
                dual_write,
                salt_buckets: Some(buckets),
            },
        )
    }

    /// Store settings and open the tables they describe.
    pub(crate) fn apply_settings(&self, app: &str, settings: AppSettings) -> Result<App> {
        validate_app(app)?;
        if settings.config.retention_days == 0 {
            return Err(Error::InvalidArgument {
                name: "retention",
                reason: "must be at least 1 day".into(),
            });
        }
        crate::salting::validate_buckets(settings.salt_buckets)?;
        let handle = self.open_tables(app, settings)?;
        let json = serde_json::to_vec(&settings.to_json())?;
        self.apps_table.mutate_row(
            app.as_bytes(),
            &[Mutation::set_cell("c", "config", 0, json)],
        )?;
        self.lock_apps().insert(app.to_string(), handle.clone());
        Ok(handle)
    }

    fn open_tables(&self, app: &str, settings: AppSettings) -> Result<App> {
        let config = settings.config;
        let events_name = format!("events.{app}");
        let profiles_name = format!("profiles.{app}");
        let trends_name = format!("trends.{app}");
        let events = create_if_missing(
            self.store.as_ref(),
            &events_name,
            &Self::events_spec(&config),
        )?;
        let profiles = create_if_missing(
            self.store.as_ref(),
            &profiles_name,
            &Self::profiles_spec(&config),
        )?;
        let trends = create_if_missing(
            self.store.as_ref(),
            &trends_name,
            &crate::trends::table_spec(&config),
        )?;
        for (name, spec) in [
            (&events_name, Self::events_spec(&config)),
            (&profiles_name, Self::profiles_spec(&config)),
            (&trends_name, crate::trends::table_spec(&config)),
        ] {
            let current = self.store.table_spec(name)?;
            let updates: Vec<FamilyModification> = spec
                .families
                .iter()
                .filter(|(f, fam)| current.families.get(*f) != Some(fam))
                .map(|(f, fam)| match current.families.contains_key(f) {
                    true => FamilyModification::Update {
                        family: f.clone(),
                        gc_rule: fam.gc_rule.clone(),
                    },
                    false if fam.value_type.is_aggregate() => FamilyModification::CreateSum {
                        family: f.clone(),
                        gc_rule: fam.gc_rule.clone(),
                    },
                    false => FamilyModification::Create {
                        family: f.clone(),
                        gc_rule: fam.gc_rule.clone(),
                    },
                })
                .collect();
            if !updates.is_empty() {
                self.store.modify_families(name, &updates)?;
            }
        }
        let salter = settings
            .salt_buckets
            .map(crate::salting::events_salter)
            .transpose()?;
        Ok(App {
            id: app.to_string(),
            config,
            events,
            profiles,
            trends,
            dual_write: settings.dual_write,
            salt_buckets: settings.salt_buckets,
            salter,
        })
    }

    /// Drop cached application handles, so settings changed by another
    /// process (a migration started elsewhere) are read again.
    pub fn forget_apps(&self) {
        self.lock_apps().clear();
    }

    fn lock_apps(&self) -> std::sync::MutexGuard<'_, HashMap<String, App>> {
        self.apps.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The application's handle: its stored configuration, or the default
    /// one (narrow, 90 days) stored on first use.
    pub fn app(&self, app: &str) -> Result<App> {
        validate_app(app)?;
        if let Some(h) = self.lock_apps().get(app) {
            return Ok(h.clone());
        }
        match self.stored_settings(app)? {
            Some(settings) => {
                let handle = self.open_tables(app, settings)?;
                self.lock_apps().insert(app.to_string(), handle.clone());
                Ok(handle)
            }
            None => self.configure_app(app, AppConfig::default()),
        }
    }

    /// Store a new version of the application's strategy; returns its
    /// `updatedAt` (milliseconds).
    pub fn set_strategy(&self, app: &str, strategy: &Strategy) -> Result<i64> {
        validate_app(app)?;
        let latest = self.strategy_version(app)?.map_or(i64::MIN, |(_, t)| t);
        // Versions are cell timestamps: strictly increasing.
        let updated_at = self.now_millis().max(latest + 1);
        let json = serde_json::to_vec(&strategy.to_json())?;
        self.apps_table.mutate_row(
            app.as_bytes(),
            &[Mutation::set_cell("s", "strategy", updated_at * 1000, json)],
        )?;
        Ok(updated_at)
    }

    /// The current strategy and its `updatedAt`, if any.
    pub fn strategy_version(&self, app: &str) -> Result<Option<(Strategy, i64)>> {
        Ok(self.strategy_history(app, 1)?.into_iter().next())
    }

    /// The current strategy.
    pub fn strategy(&self, app: &str) -> Result<Option<Strategy>> {
        Ok(self.strategy_version(app)?.map(|(s, _)| s))
    }

    /// Up to `limit` versions, newest first.
    pub fn strategy_history(&self, app: &str, limit: u32) -> Result<Vec<(Strategy, i64)>> {
        validate_app(app)?;
        let filter = RowFilter::Chain(vec![
            RowFilter::exact_family("s"),
            RowFilter::CellsPerColumnLimit(limit.max(1)),
        ]);
        let Some(row) = self.apps_table.read_row(app.as_bytes(), Some(&filter))? else {
            return Ok(Vec::new());
        };
        row.cells
            .iter()
            .map(|c| {
                Ok((
                    Strategy::from_json(&serde_json::from_slice(&c.value)?)?,
                    c.timestamp_micros / 1000,
                ))
            })
            .collect()
    }

    fn catalog_key(app: &str, index: &str, object_id: &str) -> Vec<u8> {
        tuple::encode(&[
            Element::from(app),
            Element::from(index),
            Element::from(object_id),
        ])
    }

    /// Add or replace catalog objects of an index.
    pub fn put_objects(&self, app: &str, index: &str, objects: &[CatalogObject]) -> Result<()> {
        validate_app(app)?;
        let entries: Vec<affinity_model::RowMutations> = objects
            .iter()
            .map(|o| {
                let json = serde_json::to_vec(&o.to_json()).unwrap_or_default();
                affinity_model::RowMutations::new(
                    Self::catalog_key(app, index, &o.object_id),
                    vec![Mutation::set_cell("o", "j", 0, json)],
                )
            })
            .collect();
        for chunk in entries.chunks(1000) {
            for status in self.catalog_table.mutate_rows(chunk)? {
                status?;
            }
        }
        let mut cache = self.catalogs.write().unwrap_or_else(|p| p.into_inner());
        cache.remove(&(app.to_string(), index.to_string()));
        Ok(())
    }

    /// Load catalog objects from JSON lines (one object per line; blank
    /// lines skipped). Every line is checked before anything is stored.
    pub fn load_catalog(
        &self,
        app: &str,
        index: &str,
        input: impl std::io::BufRead,
    ) -> Result<usize> {
        let mut objects = Vec::new();
        for item in crate::error::json_lines(input) {
            let (line, value) = item?;
            objects.push(CatalogObject::from_json(&value).map_err(|e| Error::at_line(line, e))?);
        }
        self.put_objects(app, index, &objects)?;
        Ok(objects.len())
    }

    /// The catalog of an index (cached; [`Engine::put_objects`] through
    /// this engine refreshes it, another process's loads are seen after
    /// [`Engine::forget_catalogs`]).
    pub fn catalog(&self, app: &str, index: &str) -> Result<Arc<Catalog>> {
        let key = (app.to_string(), index.to_string());
        if let Some(c) = self
            .catalogs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Ok(Arc::clone(c));
        }
        let prefix = tuple::prefix_range(&[Element::from(app), Element::from(index)]);
        let mut catalog = Catalog::new();
        for row in self
            .catalog_table
            .read_rows(&ReadRowsRequest::new(RowSet::from_range(prefix)))?
        {
            let row = row?;
            if let Some(cell) = row.cells.first() {
                catalog.insert(CatalogObject::from_json(&serde_json::from_slice(
                    &cell.value,
                )?)?);
            }
        }
        let catalog = Arc::new(catalog);
        self.catalogs
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, Arc::clone(&catalog));
        Ok(catalog)
    }

    /// Drop cached catalogs.
    pub fn forget_catalogs(&self) {
        self.catalogs
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}
