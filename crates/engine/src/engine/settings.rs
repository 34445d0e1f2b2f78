//! Per-application settings: the configuration readers use, salting and
//! migration state, stored as JSON in family `c` of the `apps` row, and
//! the rules for changing them (the schema stays while the application
//! holds events; salting is fixed at creation).

use affinity_model::{Mutation, ReadRowsRequest, RowFilter};
use serde_json::Value;

use super::{validate_app, App, Engine, DAY_MILLIS};
use crate::error::{Error, Result};
use crate::schema::Schema;

/// Default retention.
pub const DEFAULT_RETENTION_DAYS: u32 = 90;
/// The retention of the shared tables (their GC rules): an application
/// with another one needs tables of its own.
pub const SHARED_RETENTION_DAYS: u32 = DEFAULT_RETENTION_DAYS;

/// Where an application's events, profiles and trends live (see
/// `docs/design/apps.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tables {
    /// The shared tables `events`, `profiles`, `trends`, rows prefixed by
    /// the application id.
    #[default]
    Shared,
    /// Tables of its own: `events.<app>`, `profiles.<app>`,
    /// `trends.<app>` (another retention, isolation asked for, or created
    /// before tables were shared).
    Dedicated,
}

impl Tables {
    pub fn as_str(self) -> &'static str {
        match self {
            Tables::Shared => "shared",
            Tables::Dedicated => "dedicated",
        }
    }
}

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

    /// The first counted event day at `now_millis`
    /// ([`super::window_start_day`]).
    pub fn window_start_day(&self, now_millis: i64) -> i64 {
        super::window_start_day(now_millis, self.retention_days)
    }

    /// The first counted instant at `now_millis`: events at or after it
    /// count ([`AppConfig::window_start_day`]'s first millisecond).
    pub fn window_start_millis(&self, now_millis: i64) -> i64 {
        self.window_start_day(now_millis) * DAY_MILLIS
    }
}

/// The phase of a salt migration (`docs/design/storage.md`, "Changing an
/// application's salt buckets").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaltPhase {
    /// Events written in both layouts, read from the old one; the backfill
    /// copies the old rows.
    Dual,
    /// Events written in both layouts, read from the new one.
    Cut,
    /// Events written and read in the new layout; the old rows are being
    /// deleted.
    Clean,
}

impl SaltPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            SaltPhase::Dual => "dual",
            SaltPhase::Cut => "cut",
            SaltPhase::Clean => "clean",
        }
    }

    fn parse(s: &str) -> Option<SaltPhase> {
        match s {
            "dual" => Some(SaltPhase::Dual),
            "cut" => Some(SaltPhase::Cut),
            "clean" => Some(SaltPhase::Clean),
            _ => None,
        }
    }
}

/// A salt migration under way: from `from` buckets (`None`: unsalted) to
/// `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaltMove {
    pub from: Option<u32>,
    pub to: u32,
    pub phase: SaltPhase,
}

/// Everything stored about an application: its configuration, plus the
/// salting and the migration state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AppSettings {
    pub config: AppConfig,
    /// During a migration: the schema events are also written in.
    pub dual_write: Option<Schema>,
    /// Salt the events table over this many buckets (the salt hashes an
    /// event key's `app,user`, so a user's events stay in one bucket): the
    /// layout read; `affinity migrate salt` changes it.
    pub salt_buckets: Option<u32>,
    /// During a salt migration: its layouts and phase.
    pub salt_move: Option<SaltMove>,
    /// Shared or dedicated tables.
    pub tables: Tables,
}

impl AppSettings {
    fn to_json(self) -> Value {
        serde_json::json!({"schema": self.config.schema.as_str(),
            "retentionDays": self.config.retention_days,
            "dualWrite": self.dual_write.map(Schema::as_str), "saltBuckets": self.salt_buckets,
            "tables": self.tables.as_str(),
            "saltMove": self.salt_move.map(|m| serde_json::json!({"from": m.from, "to": m.to,
                "phase": m.phase.as_str()}))})
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
        // Settings stored before tables were shared name no layout: those
        // applications have tables of their own.
        let tables = match v.get("tables").and_then(Value::as_str) {
            None | Some("dedicated") => Tables::Dedicated,
            Some("shared") => Tables::Shared,
            Some(other) => {
                return Err(Error::corrupt(
                    "app config",
                    format!("unknown tables {other:?}"),
                ))
            }
        };
        let salt_move = match v.get("saltMove") {
            None | Some(Value::Null) => None,
            Some(m) => {
                let bad = || Error::corrupt("app config", format!("salt move {m}"));
                let buckets = |v: Option<&Value>| {
                    v.and_then(Value::as_u64)
                        .and_then(|b| u32::try_from(b).ok())
                };
                Some(SaltMove {
                    from: buckets(m.get("from")),
                    to: buckets(m.get("to")).ok_or_else(bad)?,
                    phase: m
                        .get("phase")
                        .and_then(Value::as_str)
                        .and_then(SaltPhase::parse)
                        .ok_or_else(bad)?,
                })
            }
        };
        Ok(AppSettings {
            config: AppConfig {
                schema,
                retention_days,
            },
            dual_write,
            salt_buckets,
            salt_move,
            tables,
        })
    }
}
/// Check a retention: at least one day.
fn validate_retention(days: u32) -> Result<()> {
    if days == 0 {
        return Err(Error::InvalidArgument {
            name: "retention",
            reason: "must be at least 1 day".into(),
        });
    }
    Ok(())
}
impl Engine {
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
    /// retention updates the families' GC rules. The schema cannot change
    /// once the application holds events ([`Error::SchemaChange`]: they
    /// stay in the layout they were written in, and moving them is the
    /// migration's job, [`Engine::start_migration`]). Salting and migration
    /// state are kept.
    pub fn configure_app(&self, app: &str, config: AppConfig) -> Result<App> {
        validate_app(app)?;
        let stored = self.stored_settings(app)?;
        self.check_schema_change(app, stored, config.schema)?;
        let tables = self.tables_for(app, stored, config.retention_days, false)?;
        self.apply_layout(
            app,
            stored,
            AppSettings {
                config,
                tables,
                ..stored.unwrap_or_default()
            },
        )
    }

    /// Give the application tables of its own (isolation): a new one is
    /// created with them, one on the shared tables moves to them if it
    /// holds no events ([`Error::LayoutChange`] otherwise), a dedicated one
    /// is left as it is.
    pub fn isolate_app(&self, app: &str) -> Result<App> {
        validate_app(app)?;
        let stored = self.stored_settings(app)?;
        let settings = stored.unwrap_or_default();
        let tables = self.tables_for(app, stored, settings.config.retention_days, true)?;
        self.apply_layout(app, stored, AppSettings { tables, ..settings })
    }

    /// Whether [`Engine::isolate_app`] would succeed, changing nothing.
    pub fn check_isolate_app(&self, app: &str) -> Result<()> {
        validate_app(app)?;
        let stored = self.stored_settings(app)?;
        let days = stored.unwrap_or_default().config.retention_days;
        self.tables_for(app, stored, days, true).map(|_| ())
    }

    /// The tables an application gets with `retention_days`, isolated or
    /// not (the rules are in `docs/design/apps.md`).
    fn tables_for(
        &self,
        app: &str,
        stored: Option<AppSettings>,
        retention_days: u32,
        isolate: bool,
    ) -> Result<Tables> {
        let shared_days = self.shared_retention_days;
        let own = isolate || retention_days != shared_days;
        match stored {
            None if own => Ok(Tables::Dedicated),
            None => Ok(Tables::Shared),
            Some(s) if s.tables == Tables::Dedicated || !own => Ok(s.tables),
            Some(_) if self.has_events(app)? => Err(Error::LayoutChange {
                app: app.to_string(),
                reason: match isolate {
                    true => "isolation".to_string(),
                    false => format!("a retention of {retention_days} days"),
                },
                shared_days,
            }),
            Some(_) => Ok(Tables::Dedicated),
        }
    }

    /// [`Engine::apply_settings`], then, for an application that left the
    /// shared tables, its rows there (state or job rows without events)
    /// dropped.
    fn apply_layout(
        &self,
        app: &str,
        stored: Option<AppSettings>,
        settings: AppSettings,
    ) -> Result<App> {
        let handle = self.apply_settings(app, settings)?;
        if stored.is_some_and(|s| s.tables == Tables::Shared) && settings.tables != Tables::Shared {
            self.drop_shared_rows(app)?;
        }
        Ok(handle)
    }

    /// Create (or reconfigure) an application whose events table is salted
    /// over `buckets` buckets (1..=256). The bucket count cannot change once
    /// the application exists, nor the schema once it holds events (as for
    /// [`Engine::configure_app`]).
    pub fn configure_salted_app(&self, app: &str, config: AppConfig, buckets: u32) -> Result<App> {
        validate_app(app)?;
        let stored = self.stored_settings(app)?;
        self.check_schema_change(app, stored, config.schema)?;
        if let Some(s) = stored.filter(|s| s.salt_buckets != Some(buckets)) {
            return Err(Error::InvalidArgument {
                name: "salt buckets",
                reason: format!(
                    "application {app:?} is salted over {:?} buckets; \
                     `affinity migrate salt` changes that",
                    s.salt_buckets
                ),
            });
        }
        let dual_write = stored.and_then(|s| s.dual_write);
        let tables = self.tables_for(app, stored, config.retention_days, false)?;
        self.apply_layout(
            app,
            stored,
            AppSettings {
                config,
                dual_write,
                salt_buckets: Some(buckets),
                salt_move: stored.and_then(|s| s.salt_move),
                tables,
            },
        )
    }

    /// Whether [`Engine::configure_app`] would take `config` for `app`,
    /// without storing anything: to check several applications' settings
    /// before changing any.
    pub fn check_config(&self, app: &str, config: AppConfig) -> Result<()> {
        validate_app(app)?;
        validate_retention(config.retention_days)?;
        let stored = self.stored_settings(app)?;
        self.check_schema_change(app, stored, config.schema)?;
        self.tables_for(app, stored, config.retention_days, false)
            .map(|_| ())
    }

    /// Refuse `schema` for an application stored with another one when it
    /// holds events: readers would look for them in the other layout.
    fn check_schema_change(
        &self,
        app: &str,
        stored: Option<AppSettings>,
        schema: Schema,
    ) -> Result<()> {
        match stored {
            Some(s) if s.config.schema != schema && self.has_events(app)? => {
                Err(Error::SchemaChange {
                    app: app.to_string(),
                    stored: s.config.schema,
                    requested: schema,
                })
            }
            _ => Ok(()),
        }
    }

    /// Whether the application's events table holds an event within
    /// retention.
    fn has_events(&self, app: &str) -> Result<bool> {
        let events = self.app(app)?.events;
        let mut rows = events.read_rows(&ReadRowsRequest::all().with_limit(1))?;
        Ok(rows.next().transpose()?.is_some())
    }

    /// Store settings and open the tables they describe. Migrations change
    /// the schema through this, past [`Engine::configure_app`]'s rule.
    pub(crate) fn apply_settings(&self, app: &str, settings: AppSettings) -> Result<App> {
        validate_app(app)?;
        validate_retention(settings.config.retention_days)?;
        crate::salting::validate_buckets(settings.salt_buckets)?;
        crate::salting::validate_buckets(settings.salt_move.map(|m| m.to))?;
        let handle = self.open_tables(app, settings)?;
        let json = serde_json::to_vec(&settings.to_json())?;
        self.apps_table.mutate_row(
            app.as_bytes(),
            &[Mutation::set_cell("c", "config", 0, json)],
        )?;
        self.lock_apps()
            .insert(app.to_string(), (std::time::Instant::now(), handle.clone()));
        Ok(handle)
    }
}
