//! The engine handle: tables, per-application settings (`settings.rs`),
//! strategies and the catalog.
//!
//! Tables (created on first use):
//! - `apps`: row = application id; family `c` holds the configuration
//!   (JSON, latest version only), family `s` every version of the strategy
//!   (cell timestamp = `updatedAt`).
//! - `catalog`: row = tuple(app, index, objectID), family `o`, the object's
//!   JSON.
//! - `events.<app>` (or its rows of `events`): the application's events (see [`crate::schema`]);
//!   families `view`, `click`, `conversion` and `e`, all with GC max-age =
//!   the retention.
//! - `profiles.<app>`: rows `user,DAY` the profile state (families `n`,
//!   `i`, `t`, see [`crate::state`]), row `user,!` the user's rollup (see
//!   [`crate::rollup`]); rows `~job,<name>`, `~migrate` and `~resalt` the
//!   state of batch jobs, of a schema migration and of a salt migration's
//!   copy (family `b`; no user token contains `~`).
//! - `keys`: row = `app,<sha256 hex>`, family `k`: API keys kept in the
//!   store (see [`crate::api_keys`]).
//! - `jobs`: row = `app,id`, family `j`: job records, shards and leases
//!   (see [`crate::jobs`]).
//! - `trends.<app>`: one row per (event, located object), keyed by place
//!   and time, for regional trends (see [`crate::trends`]).
//!
//! Events are keyed by the event's identity: the `authenticatedUserToken`
//! when present, else the `userToken`. The events table may be salted per
//! application ([`crate::salting`]).
//!
//! Applications share the tables `events`, `profiles` and `trends`, every
//! row key prefixed by the application id and `#` (a
//! [`affinity_model::PrefixedTable`] per application, so the code above
//! sees tables of its own and no key reaches another application's rows);
//! an application with another retention than the shared tables', or
//! asked to be isolated, or created before tables were shared, has its
//! own `events.<app>`, `profiles.<app>`, `trends.<app>`
//! (`docs/design/apps.md`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use affinity_model::keyvis::KeyVis;
use affinity_model::{
    Error as StoreError, FamilyModification, GcRule, Mutation, PrefixedTable, ReadRowsRequest,
    RowFilter, RowSet, Store, Table, TableSpec,
};
use affinity_rowkey::tuple::{self, Element};
use std::sync::{Mutex, RwLock};

use crate::catalog::{Catalog, CatalogObject};
use crate::error::{Error, Result};
use crate::event::EventType;
use crate::rollup;
use crate::schema::{Schema, WIDE_FAMILY};
use crate::state::{COUNTERS_FAMILY, DIGEST_FAMILY, IDS_FAMILY, LAST_FAMILY};
use crate::strategy::Strategy;
use crate::variants::Variants;

mod settings;

pub use settings::{
    AppConfig, AppSettings, SaltMove, SaltPhase, Tables, DEFAULT_RETENTION_DAYS,
    SHARED_RETENTION_DAYS,
};

/// The shared tables (see `docs/design/apps.md`): every application on
/// [`Tables::Shared`] keeps its rows there, prefixed by its id.
pub const SHARED_TABLES: [&str; 3] = ["events", "profiles", "trends"];

/// Milliseconds in a day.
pub const DAY_MILLIS: i64 = 86_400_000;
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

/// How long an application handle is used before its stored settings are
/// read again (one point read; the tables are reopened only when they
/// changed): settings changed by another process (a server, `affinity
/// migrate`) take effect here within this long.
pub const SETTINGS_REFRESH: Duration = Duration::from_secs(2);

/// A clock in milliseconds since the epoch.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

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
    /// The salt bucket count of the events layout read, if salted.
    pub salt_buckets: Option<u32>,
    /// During a salt migration: its layouts and phase.
    pub salt_move: Option<SaltMove>,
    /// Shared or dedicated tables.
    pub tables: Tables,
    /// The salter of the layout read (`None`: unsalted).
    pub(crate) salter: Option<affinity_rowkey::salt::Salter>,
    /// During a salt migration, the other layout: written too (phases
    /// `dual` and `cut`, `also_write`) or being deleted (`clean`).
    pub(crate) other_salter: Option<Option<affinity_rowkey::salt::Salter>>,
    pub(crate) also_write: bool,
    /// Hot lists read, and adds counted to list users (see `hot.rs`).
    pub(crate) hot: Arc<crate::hot::HotLists>,
    /// This handle's number among the process's handles: the profile
    /// cache keys answers by it, so a read through a handle of settings
    /// since replaced (a migration's earlier step) never answers a read
    /// through the new one.
    pub(crate) handle: u64,
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
    pub(crate) fn push_event_mutations(
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
            salt_move: self.salt_move,
            tables: self.tables,
        }
    }
}

/// The engine: everything goes through one of these.
pub struct Engine {
    pub(crate) store: Arc<dyn Store>,
    clock: Clock,
    apps_table: Arc<dyn Table>,
    catalog_table: Arc<dyn Table>,
    /// Job records (see `jobs.rs`).
    pub(crate) jobs_table: Arc<dyn Table>,
    /// API keys (see `api_keys.rs`).
    pub(crate) keys_table: Arc<dyn Table>,
    /// Application handles and when their settings were last read.
    apps: Mutex<HashMap<String, (Instant, App)>>,
    /// The shared tables (events, profiles, trends), once checked.
    shared: Mutex<Option<[Arc<dyn Table>; 3]>>,
    /// Their retention ([`SHARED_RETENTION_DAYS`]).
    pub(crate) shared_retention_days: u32,
    catalogs: RwLock<HashMap<(String, String), Arc<Catalog>>>,
    /// Counts each application's tables per key range while watched (the
    /// dashboard's key visualizer), when set.
    key_vis: Option<Arc<KeyVis>>,
    /// When ingestion spreads a user's day rows (see `hot.rs`).
    pub(crate) hot_policy: crate::hot::HotPolicy,
    /// Users ingestion put on hot lists, and those it failed to.
    pub(crate) hot_listed: crate::hot::ListedCounts,
    /// Profile answers kept between reads (see `cache.rs`), when set.
    pub(crate) profile_cache: Option<Arc<crate::cache::ProfileCache>>,
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
        let jobs_table = create_if_missing(
            store.as_ref(),
            crate::jobs::JOBS_TABLE,
            &TableSpec::new().with_family(crate::jobs::FAMILY, GcRule::MaxVersions(1)),
        )?;
        let keys_table = create_if_missing(
            store.as_ref(),
            crate::api_keys::KEYS_TABLE,
            &TableSpec::new().with_family(crate::api_keys::FAMILY, GcRule::MaxVersions(1)),
        )?;
        Ok(Engine {
            store,
            clock,
            apps_table,
            catalog_table,
            jobs_table,
            keys_table,
            apps: Mutex::new(HashMap::new()),
            shared: Mutex::new(None),
            shared_retention_days: SHARED_RETENTION_DAYS,
            catalogs: RwLock::new(HashMap::new()),
            key_vis: None,
            hot_policy: crate::hot::HotPolicy::default(),
            hot_listed: Default::default(),
            profile_cache: None,
        })
    }

    /// This engine with ingestion listing hot users by `policy` (default:
    /// [`HotPolicy::default`](crate::hot::HotPolicy)).
    pub fn with_hot_policy(mut self, policy: crate::hot::HotPolicy) -> Engine {
        self.hot_policy = policy;
        self
    }

    /// This engine keeping profile answers between reads, up to about
    /// `budget_bytes` (0: none), and exact (see `cache.rs`). Only for a
    /// store no other process writes to: the embedded store or memory,
    /// not Cloud Bigtable. Set before any application is opened.
    pub fn with_profile_cache(self, budget_bytes: usize) -> Engine {
        let (_, rollups) = self.cache_budgets();
        self.with_cache_budgets(budget_bytes, rollups)
    }

    /// This engine keeping users' rollup rows between profile reads, up to
    /// about `budget_bytes` (0: none), until the row is written (see
    /// `cache.rs`); the same conditions as [`Engine::with_profile_cache`].
    pub fn with_rollup_cache(self, budget_bytes: usize) -> Engine {
        let (answers, _) = self.cache_budgets();
        self.with_cache_budgets(answers, budget_bytes)
    }

    fn cache_budgets(&self) -> (usize, usize) {
        self.profile_cache.as_ref().map_or((0, 0), |c| c.budgets())
    }

    fn with_cache_budgets(mut self, answers: usize, rollups: usize) -> Engine {
        self.profile_cache = (answers > 0 || rollups > 0)
            .then(|| Arc::new(crate::cache::ProfileCache::new(answers, rollups)));
        self
    }

    /// This engine sharing `cache` with other engines of the process on
    /// the same store (each tells it of its writes), as tests run two.
    pub fn with_shared_profile_cache(mut self, cache: Arc<crate::cache::ProfileCache>) -> Engine {
        self.profile_cache = Some(cache);
        self
    }

    /// The profile cache's figures, when it keeps answers.
    pub fn profile_cache_stats(&self) -> Option<crate::cache::CacheStats> {
        let cache = self.profile_cache.as_ref()?;
        cache.keeps_answers().then(|| cache.stats())
    }

    /// The rollup cache's figures, when it keeps rollup rows.
    pub fn rollup_cache_stats(&self) -> Option<crate::cache::CacheStats> {
        let cache = self.profile_cache.as_ref()?;
        cache.keeps_rollups().then(|| cache.rollup_stats())
    }

    /// Tell the profile cache (if any) that any user's rows may have
    /// changed.
    fn profiles_changed(&self) {
        if let Some(cache) = &self.profile_cache {
            cache.wrote_all();
        }
    }

    /// This engine with shared tables of another retention than
    /// [`SHARED_RETENTION_DAYS`]: applications with that retention share
    /// them. Every process on a store must agree (the tables' GC rules
    /// follow the last one to open them); `affinity` always uses the
    /// default, tests use this to run retention-bound property tests on
    /// shared tables.
    pub fn with_shared_retention(mut self, days: u32) -> Engine {
        self.shared_retention_days = days;
        self
    }

    /// This engine with every application's events, profiles and trends
    /// tables counted by `key_vis` under their logical names
    /// (`events.<app>`...), whether the application has tables of its own
    /// or shares them: keys are counted as the application sees them,
    /// without the shared tables' prefix, and never mixed with another
    /// application's. They count while watched ([`KeyVis::watch`]).
    pub fn with_key_vis(mut self, key_vis: Arc<KeyVis>) -> Engine {
        self.key_vis = Some(key_vis);
        self
    }

    /// The key visualizer's counters, when set.
    pub fn key_vis(&self) -> Option<&Arc<KeyVis>> {
        self.key_vis.as_ref()
    }

    /// The names an application's tables are counted under, and shown as:
    /// `events.<app>`, `profiles.<app>`, `trends.<app>` on either layout.
    pub fn table_names(app: &str) -> [String; 3] {
        SHARED_TABLES.map(|kind| format!("{kind}.{app}"))
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
        // Day-row cells are stamped with their arrival day (or an hour
        // of it): they outlive the retention by the rollup slack plus a
        // day of margin.
        let days = u64::from(config.retention_days + SLACK_DAYS + 2);
        let state = GcRule::MaxAge(Duration::from_millis(days * DAY_MILLIS as u64));
        let latest = GcRule::Union(vec![GcRule::MaxVersions(1), state.clone()]);
        let one = GcRule::MaxVersions(1);
        TableSpec::new()
            .with_sum_family(COUNTERS_FAMILY, state.clone())
            .with_sum_family(IDS_FAMILY, state.clone())
            .with_sum_family(LAST_FAMILY, latest)
            .with_family(DIGEST_FAMILY, state.clone())
            .with_sum_family(rollup::MARKS_FAMILY, state.clone())
            .with_family(rollup::LINKS_FAMILY, state.clone())
            .with_family(rollup::MEMBERS_FAMILY, state)
            .with_family(rollup::FACET_TOTALS_FAMILY, one.clone())
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
            .with_family(crate::job::JOBS_FAMILY, one)
            .with_family(
                crate::hot::HOT_FAMILY,
                GcRule::MaxAge(Duration::from_millis((days + 1) * DAY_MILLIS as u64)),
            )
    }

    /// The three table specs of an application configured as `config`.
    fn specs(config: &AppConfig) -> [TableSpec; 3] {
        [
            Self::events_spec(config),
            Self::profiles_spec(config),
            crate::trends::table_spec(config),
        ]
    }

    /// Table `name` with `spec`: created if missing, its families brought
    /// to the spec's (a retention change updates GC rules).
    fn ensure_table(&self, name: &str, spec: &TableSpec) -> Result<Arc<dyn Table>> {
        let table = create_if_missing(self.store.as_ref(), name, spec)?;
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
        Ok(table)
    }

    /// The shared tables, checked (created, families brought to the shared
    /// retention's) once per engine.
    fn shared_tables(&self) -> Result<[Arc<dyn Table>; 3]> {
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tables) = shared.as_ref() {
            return Ok(tables.clone());
        }
        let config = AppConfig {
            retention_days: self.shared_retention_days,
            ..AppConfig::default()
        };
        let [e, p, t] = Self::specs(&config);
        let tables = [
            self.ensure_table(SHARED_TABLES[0], &e)?,
            self.ensure_table(SHARED_TABLES[1], &p)?,
            self.ensure_table(SHARED_TABLES[2], &t)?,
        ];
        *shared = Some(tables.clone());
        Ok(tables)
    }

    fn open_tables(&self, app: &str, settings: AppSettings) -> Result<App> {
        let config = settings.config;
        let names = Self::table_names(app);
        let [events, profiles, trends] = match settings.tables {
            Tables::Dedicated => {
                let [e, p, t] = Self::specs(&config);
                [
                    self.ensure_table(&names[0], &e)?,
                    self.ensure_table(&names[1], &p)?,
                    self.ensure_table(&names[2], &t)?,
                ]
            }
            Tables::Shared => {
                let shared = self.shared_tables()?;
                let view = |i: usize| -> Result<Arc<dyn Table>> {
                    Ok(Arc::new(PrefixedTable::new(
                        Arc::clone(&shared[i]),
                        app,
                        names[i].clone(),
                    )?))
                };
                [view(0)?, view(1)?, view(2)?]
            }
        };
        let counted = |name: &str, table: Arc<dyn Table>| match &self.key_vis {
            Some(vis) => vis.wrap(name, table),
            None => table,
        };
        // A new handle: its settings changed (a migration's step, another
        // layout), so no profile answer kept before is trusted.
        self.profiles_changed();
        let profiles = match &self.profile_cache {
            Some(cache) => crate::cache::Watched::wrap(profiles, app, cache),
            None => profiles,
        };
        let [events, profiles, trends] = [
            counted(&names[0], events),
            counted(&names[1], profiles),
            counted(&names[2], trends),
        ];
        let salter = settings
            .salt_buckets
            .map(crate::salting::events_salter)
            .transpose()?;
        let other_salter = match settings.salt_move {
            Some(m) => {
                let other = match m.phase {
                    SaltPhase::Dual => Some(m.to),
                    SaltPhase::Cut | SaltPhase::Clean => m.from,
                };
                Some(other.map(crate::salting::events_salter).transpose()?)
            }
            None => None,
        };
        Ok(App {
            id: app.to_string(),
            config,
            events,
            profiles,
            trends,
            dual_write: settings.dual_write,
            salt_buckets: settings.salt_buckets,
            salt_move: settings.salt_move,
            tables: settings.tables,
            salter,
            other_salter,
            also_write: settings
                .salt_move
                .is_some_and(|m| m.phase != SaltPhase::Clean),
            hot: Arc::default(),
            handle: {
                static HANDLES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                HANDLES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            },
        })
    }

    /// Drop the application's rows from the shared tables.
    pub(crate) fn drop_shared_rows(&self, app: &str) -> Result<()> {
        let prefix = affinity_model::prefixed::tenant_prefix(app)?;
        self.shared_tables()?;
        let dropped = SHARED_TABLES
            .iter()
            .try_for_each(|table| self.store.drop_row_range(table, &prefix));
        self.profiles_changed();
        Ok(dropped?)
    }

    /// Delete an application: its settings, strategy and A/B test, its
    /// events, profiles and trends (its prefix dropped from the shared
    /// tables, or its own tables deleted), its catalog, its job records
    /// and its stored API keys. No other application's row is touched. An application
    /// never created is [`Error::UnknownApp`].
    pub fn delete_app(&self, app: &str) -> Result<()> {
        validate_app(app)?;
        let settings = self
            .stored_settings(app)?
            .ok_or_else(|| Error::UnknownApp {
                app: app.to_string(),
            })?;
        // Settings first: a process opening the application from now on
        // finds none.
        self.apps_table
            .mutate_row(app.as_bytes(), &[Mutation::DeleteFromRow])?;
        self.lock_apps().remove(app);
        match settings.tables {
            Tables::Shared => self.drop_shared_rows(app)?,
            Tables::Dedicated => {
                for name in Self::table_names(app) {
                    let deleted = self.store.delete_table(&name);
                    self.profiles_changed();
                    match deleted {
                        Ok(()) | Err(StoreError::TableNotFound { .. }) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
        self.store
            .drop_row_range("catalog", &tuple::encode(&[Element::from(app)]))?;
        self.store
            .drop_row_range(crate::jobs::JOBS_TABLE, &crate::jobs::row_key(app, ""))?;
        self.store.drop_row_range(
            crate::api_keys::KEYS_TABLE,
            &crate::api_keys::app_prefix(app),
        )?;
        self.bump_keys_generation()?;
        self.catalogs
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(a, _), _| a != app);
        Ok(())
    }

    /// Drop cached application handles, so settings changed by another
    /// process are read again now rather than within
    /// [`SETTINGS_REFRESH`].
    pub fn forget_apps(&self) {
        self.lock_apps().clear();
    }

    fn lock_apps(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, App)>> {
        self.apps.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The application's handle: its stored configuration, or the default
    /// one (narrow, 90 days) stored on first use. A cached handle is used
    /// for [`SETTINGS_REFRESH`], then checked against the stored settings.
    pub fn app(&self, app: &str) -> Result<App> {
        validate_app(app)?;
        let cached = self.lock_apps().get(app).cloned();
        if let Some((read, h)) = &cached {
            if read.elapsed() < SETTINGS_REFRESH {
                return Ok(h.clone());
            }
        }
        let read = Instant::now();
        match self.stored_settings(app)? {
            Some(settings) => {
                let handle = match cached {
                    Some((_, h)) if h.settings() == settings => h,
                    _ => self.open_tables(app, settings)?,
                };
                self.lock_apps()
                    .insert(app.to_string(), (read, handle.clone()));
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
            RowFilter::exact_qualifier(b"strategy"),
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

    /// Start (or replace) the application's A/B test of strategies (see
    /// [`crate::variants`]); returns its `updatedAt` (milliseconds).
    pub fn set_variants(&self, app: &str, variants: &Variants) -> Result<i64> {
        self.store_variants(app, variants.to_json())
    }

    /// End the application's A/B test: every user is served the
    /// application's strategy again. Returns the `updatedAt`.
    pub fn clear_variants(&self, app: &str) -> Result<i64> {
        self.store_variants(app, serde_json::Value::Null)
    }

    fn store_variants(&self, app: &str, json: serde_json::Value) -> Result<i64> {
        validate_app(app)?;
        let latest = self.variants_version(app)?.map_or(i64::MIN, |(_, t)| t);
        let updated_at = self.now_millis().max(latest + 1);
        self.apps_table.mutate_row(
            app.as_bytes(),
            &[Mutation::set_cell(
                "s",
                "variants",
                updated_at * 1000,
                serde_json::to_vec(&json)?,
            )],
        )?;
        Ok(updated_at)
    }

    /// The application's running A/B test, if any.
    pub fn variants(&self, app: &str) -> Result<Option<Variants>> {
        Ok(self.variants_version(app)?.and_then(|(v, _)| v))
    }

    /// The latest test setting and its `updatedAt` (`None` inside: ended).
    fn variants_version(&self, app: &str) -> Result<Option<(Option<Variants>, i64)>> {
        validate_app(app)?;
        let filter = RowFilter::Chain(vec![
            RowFilter::exact_family("s"),
            RowFilter::exact_qualifier(b"variants"),
            RowFilter::CellsPerColumnLimit(1),
        ]);
        let Some(row) = self.apps_table.read_row(app.as_bytes(), Some(&filter))? else {
            return Ok(None);
        };
        let Some(cell) = row.cells.first() else {
            return Ok(None);
        };
        let json: serde_json::Value = serde_json::from_slice(&cell.value)?;
        let variants = if json.is_null() {
            None
        } else {
            Some(Variants::from_json(&json)?)
        };
        Ok(Some((variants, cell.timestamp_micros / 1000)))
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

    /// Delete catalog objects of an index; ids it does not hold are no
    /// error. Events already ingested keep the facets they resolved to:
    /// only later events stop resolving these ids.
    pub fn delete_objects(&self, app: &str, index: &str, object_ids: &[&str]) -> Result<()> {
        validate_app(app)?;
        let entries: Vec<affinity_model::RowMutations> = object_ids
            .iter()
            .map(|id| {
                affinity_model::RowMutations::new(
                    Self::catalog_key(app, index, id),
                    vec![Mutation::DeleteFromRow],
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
