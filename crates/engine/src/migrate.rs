//! Migration between schemas (narrow -> wide), as the write-up did it:
//!
//! 1. [`Engine::start_migration`]: every event ingested from now on is
//!    written in both layouts (in its one row, so both land atomically);
//! 2. [`Engine::backfill`]: every event within retention is rewritten in
//!    the target layout, in key order, with the last key done checkpointed
//!    (row `~migrate` of `profiles.<app>`), so an interrupted backfill
//!    resumes where it stopped; rewriting an event twice writes the same
//!    cells (idempotent);
//! 3. [`Engine::verify_migration`]: every user's profile computed from each
//!    layout, compared;
//! 4. [`Engine::cut_over`]: readers switch to the target layout and dual
//!    writes stop; the old layout's cells expire with the retention.
//!
//! An engine caches application settings for at most
//! [`crate::SETTINGS_REFRESH`]: every other process that ingests picks up
//! step 1 within that bound, and the backfill must start after it (`affinity
//! migrate start` waits it out, plus a margin for ingest requests in
//! flight), or events those processes wrote in between miss the target
//! layout (step 3 then reports those users).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::Ordering;

use affinity_model::{
    Bytes, Mutation, ReadRowsRequest, RowFilter, RowMutations, RowRange, RowSet, Table,
};
use affinity_rowkey::composite::app_prefix;

use crate::batch::Progress;
use crate::engine::{AppConfig, AppSettings, Engine};
use crate::error::{Error, Result};
use crate::job::JOBS_FAMILY;
use crate::schema::{decode_row, narrow_filter, since, wide_filter, Schema, WIDE_FAMILY};
use crate::scoring::{Accumulator, Profile};
use crate::strategy::Strategy;

const CHECKPOINT_ROW: &[u8] = b"~migrate";
const BACKFILL_CHUNK: usize = 500;

/// What [`Engine::verify_migration`] found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Verification {
    /// Users with a profile in either layout.
    pub users: usize,
    /// Users whose profiles differ.
    pub mismatched: Vec<String>,
}

fn layout_filter(schema: Schema) -> RowFilter {
    match schema {
        Schema::Narrow => RowFilter::FamilyNameRegex("view|click|conversion".into()),
        Schema::Wide => RowFilter::exact_family(WIDE_FAMILY),
    }
}

pub(crate) fn checkpoint(table: &dyn Table) -> Result<Option<(Bytes, bool)>> {
    let filter = RowFilter::CellsPerColumnLimit(1);
    let Some(row) = table.read_row(CHECKPOINT_ROW, Some(&filter))? else {
        return Ok(None);
    };
    let after = row
        .latest(JOBS_FAMILY, b"after")
        .map(|c| c.value.clone())
        .unwrap_or_default();
    let done = row.latest(JOBS_FAMILY, b"done").is_some();
    Ok(Some((after, done)))
}

/// `ranges` (in key order) trimmed to the keys after `after`, a
/// checkpoint: ranges wholly before it dropped, the one holding it cut.
pub(crate) fn ranges_after(
    ranges: impl IntoIterator<Item = RowRange>,
    after: Option<&Bytes>,
) -> Vec<RowRange> {
    let mut out = Vec::new();
    for range in ranges {
        match after {
            Some(k) if !range_ends_after(&range, k) => {}
            Some(k) if range.contains(k) => out.push(RowRange {
                start: Bound::Excluded(k.clone()),
                end: range.end,
            }),
            _ => out.push(range),
        }
    }
    out
}

/// True when some key of `range` sorts after `key`.
pub(crate) fn range_ends_after(range: &RowRange, key: &[u8]) -> bool {
    match &range.end {
        Bound::Unbounded => true,
        Bound::Included(e) | Bound::Excluded(e) if e.is_empty() => true,
        Bound::Included(e) => e.as_ref() > key,
        Bound::Excluded(e) => {
            e.as_ref() > key && {
                // (key, e) is non-empty unless e is key's immediate successor.
                let mut succ = key.to_vec();
                succ.push(0);
                e.as_ref() > succ.as_slice()
            }
        }
    }
}

impl Engine {
    /// Step 1: write new events in `target` too.
    pub fn start_migration(&self, app: &str, target: Schema) -> Result<AppSettings> {
        let current = self.app(app)?;
        if let Some(m) = current.salt_move {
            return Err(Error::InvalidArgument {
                name: "migration",
                reason: format!(
                    "application {app:?} is moving to {} salt buckets; finish that first",
                    m.to
                ),
            });
        }
        if current.config.schema == target {
            return Err(Error::InvalidArgument {
                name: "schema",
                reason: format!("application {app:?} already uses {}", target.as_str()),
            });
        }
        let settings = AppSettings {
            dual_write: Some(target),
            ..current.settings()
        };
        // A fresh backfill for this migration.
        current
            .profiles
            .mutate_row(CHECKPOINT_ROW, &[Mutation::DeleteFromRow])?;
        self.apply_settings(app, settings)?;
        Ok(settings)
    }

    /// Step 2: rewrite events within retention in the target layout,
    /// resuming after the last checkpoint. Stops after `max_rows` rows when
    /// given; returns whether the backfill is complete.
    pub fn backfill(&self, app: &str, progress: &Progress, max_rows: Option<u64>) -> Result<bool> {
        let app = self.app(app)?;
        let Some(target) = app.dual_write else {
            return Err(Error::InvalidArgument {
                name: "migration",
                reason: format!("application {:?} is not migrating (start it first)", app.id),
            });
        };
        let mut after: Option<Bytes> = None;
        if let Some((last, done)) = checkpoint(app.profiles.as_ref())? {
            if done {
                return Ok(true);
            }
            after = Some(last).filter(|k| !k.is_empty());
        }
        // Physical ranges in key order, trimmed to what follows the
        // checkpoint.
        let physical = app.physical_ranges(&app_prefix(&app.id)?);
        let ranges = ranges_after(physical.into_iter().map(|(_, r)| r), after.as_ref());
        if ranges.is_empty() {
            app.profiles.mutate_row(
                CHECKPOINT_ROW,
                &[Mutation::set_cell(JOBS_FAMILY, "done", 0, Vec::new())],
            )?;
            return Ok(true);
        }
        let cutoff = app.config.window_start_millis(self.now_millis());
        let filter = RowFilter::Chain(vec![since(cutoff), layout_filter(app.config.schema)]);
        let mut request = ReadRowsRequest::new(RowSet::from_ranges(ranges)).with_filter(filter);
        request.rows_limit = max_rows.filter(|n| *n > 0);
        let mut pending: Vec<RowMutations> = Vec::with_capacity(BACKFILL_CHUNK);
        let mut rows = 0u64;
        let flush = |pending: &mut Vec<RowMutations>| -> Result<()> {
            let Some(last) = pending.last().map(|e| e.row_key.clone()) else {
                return Ok(());
            };
            for status in app.events.mutate_rows(pending)? {
                status?;
            }
            progress
                .events
                .fetch_add(pending.len() as u64, Ordering::Relaxed);
            pending.clear();
            app.profiles.mutate_row(
                CHECKPOINT_ROW,
                &[Mutation::set_cell(JOBS_FAMILY, "after", 0, last)],
            )?;
            Ok(())
        };
        for row in app.events.read_rows(&request)? {
            let row = row?;
            rows += 1;
            if let Some(event) = decode_row(&row)? {
                pending.push(RowMutations::new(row.key.clone(), target.mutations(&event)));
            }
            if pending.len() >= BACKFILL_CHUNK {
                flush(&mut pending)?;
            }
        }
        flush(&mut pending)?;
        let complete = max_rows.is_none_or(|n| rows < n);
        if complete {
            app.profiles.mutate_row(
                CHECKPOINT_ROW,
                &[Mutation::set_cell(JOBS_FAMILY, "done", 0, Vec::new())],
            )?;
        }
        Ok(complete)
    }

    /// Every user's profile from one layout under `strategy`.
    pub fn layout_profiles(
        &self,
        app: &str,
        schema: Schema,
        strategy: &Strategy,
    ) -> Result<BTreeMap<String, Profile>> {
        let app = self.app(app)?;
        let cutoff = app.config.window_start_millis(self.now_millis());
        let layout = match schema {
            Schema::Narrow => narrow_filter(strategy),
            Schema::Wide => wide_filter(strategy),
        };
        let ranges = app
            .physical_ranges(&app_prefix(&app.id)?)
            .into_iter()
            .map(|(_, r)| r)
            .collect();
        let request = ReadRowsRequest::new(RowSet::from_ranges(ranges))
            .with_filter(RowFilter::Chain(vec![since(cutoff), layout]));
        let weights = strategy.weights();
        let mut per_user: BTreeMap<String, Accumulator<'_>> = BTreeMap::new();
        for row in app.events.read_rows(&request)? {
            let row = row?;
            let Some(key) = app.logical_key(&row.key)? else {
                continue;
            };
            let key =
                std::str::from_utf8(key).map_err(|_| Error::corrupt("event key", "not utf-8"))?;
            let user = key
                .split(',')
                .nth(1)
                .ok_or_else(|| Error::corrupt("event key", key))?;
            let acc = per_user
                .entry(user.to_string())
                .or_insert_with(|| Accumulator::new(&weights));
            if let Some(e) = decode_row(&row)? {
                acc.add_event(&e);
            }
        }
        Ok(per_user
            .into_iter()
            .filter_map(|(u, acc)| acc.finish(&u).map(|p| (u, p)))
            .collect())
    }

    /// Step 3: compare every user's profile from both layouts, under the
    /// current strategy.
    pub fn verify_migration(&self, app: &str) -> Result<Verification> {
        let handle = self.app(app)?;
        let Some(target) = handle.dual_write else {
            return Err(Error::InvalidArgument {
                name: "migration",
                reason: format!("application {app:?} is not migrating"),
            });
        };
        let strategy = self.strategy(app)?.ok_or_else(|| Error::InvalidArgument {
            name: "strategy",
            reason: format!("application {app:?} has no strategy"),
        })?;
        let old = self.layout_profiles(app, handle.config.schema, &strategy)?;
        let new = self.layout_profiles(app, target, &strategy)?;
        let mut users: Vec<&String> = old.keys().chain(new.keys()).collect();
        users.sort();
        users.dedup();
        Ok(Verification {
            users: users.len(),
            mismatched: users
                .into_iter()
                .filter(|u| old.get(*u) != new.get(*u))
                .cloned()
                .collect(),
        })
    }

    /// Step 4: switch readers to the target layout; refused until the
    /// backfill is complete.
    pub fn cut_over(&self, app: &str) -> Result<AppSettings> {
        let handle = self.app(app)?;
        let (Some(target), Some((_, true))) =
            (handle.dual_write, checkpoint(handle.profiles.as_ref())?)
        else {
            return Err(Error::InvalidArgument {
                name: "migration",
                reason: format!("application {app:?} has no completed backfill"),
            });
        };
        let settings = AppSettings {
            config: AppConfig {
                schema: target,
                ..handle.config
            },
            dual_write: None,
            ..handle.settings()
        };
        self.apply_settings(app, settings)?;
        Ok(settings)
    }
}
