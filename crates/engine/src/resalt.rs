//! Changing an application's salt buckets while it holds events
//! (`affinity migrate salt`): the phases and their invariants are in
//! `docs/design/storage.md`, "Changing an application's salt buckets".
//!
//! In short: [`Engine::migrate_salt`] stores phase `dual` (events written
//! in both layouts, read from the old one), waits `settle` so every
//! process writes both, copies every old row to its new key (checkpointed
//! in row `~resalt` of `profiles.<app>`, so an interrupted copy resumes),
//! stores phase `cut` (reads switch to the new layout, writes still go to
//! both), waits, stores phase `clean` (writes stop going to the old
//! layout), waits, deletes the old rows whose key changed and ends the
//! migration. Every process reads exactly one complete layout at every
//! moment, so profiles, exports and rebuilds stay exact throughout.

use std::time::Duration;

use affinity_model::{Bytes, Mutation, ReadRowsRequest, RowFilter, RowMutations, RowRange, RowSet};
use affinity_rowkey::composite::app_prefix;
use affinity_rowkey::salt::Salter;

use crate::batch::Progress;
use crate::engine::{validate_app, AppSettings, Engine, SaltMove, SaltPhase, SETTINGS_REFRESH};
use crate::error::{Error, Result};
use crate::job::JOBS_FAMILY;
use crate::migrate::ranges_after;
use crate::salting::{events_salter, layout_ranges, salted};

/// How long [`Engine::migrate_salt`] waits after each phase change for
/// every process to take it: [`SETTINGS_REFRESH`] plus a margin for
/// requests in flight with the previous settings.
pub const SALT_SETTLE: Duration = SETTINGS_REFRESH.saturating_add(Duration::from_secs(1));

const CHECKPOINT_ROW: &[u8] = b"~resalt";
const CHUNK: usize = 500;

/// What [`Engine::migrate_salt`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaltReport {
    /// The bucket count before (`None`: unsalted).
    pub from: Option<u32>,
    pub to: u32,
    /// Rows copied to their key in the new layout.
    pub copied: u64,
    /// Old rows deleted at the end.
    pub deleted: u64,
}

/// One row of the old layout met by a scan of its ranges: its logical
/// key, or `None` for a row of the new layout sharing the ranges (both
/// salted with the same width).
fn old_logical<'k>(from: Option<&Salter>, key: &'k [u8]) -> Result<Option<&'k [u8]>> {
    match from {
        None => Ok(Some(key)),
        Some(s) => {
            let Some(logical) = key.get(s.width()..) else {
                return Err(Error::corrupt("event key", format!("{key:?}")));
            };
            Ok((s.salt(logical) == key).then_some(logical))
        }
    }
}

/// Apply `entries` (none: nothing to send).
fn write_all(table: &dyn affinity_model::Table, entries: &[RowMutations]) -> Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    for status in table.mutate_rows(entries)? {
        status?;
    }
    Ok(())
}

/// Which of `keys` no longer hold a row.
fn vanished(
    table: &dyn affinity_model::Table,
    keys: &[Bytes],
) -> Result<std::collections::HashSet<Bytes>> {
    let mut gone: std::collections::HashSet<Bytes> = keys.iter().cloned().collect();
    if keys.is_empty() {
        return Ok(gone);
    }
    let request =
        ReadRowsRequest::new(RowSet::from_keys(keys.to_vec())).with_filter(RowFilter::Chain(vec![
            RowFilter::CellsPerRowLimit(1),
            RowFilter::StripValue,
        ]));
    for row in table.read_rows(&request)? {
        gone.remove(&row?.key);
    }
    Ok(gone)
}

impl Engine {
    /// Move the application's events to `buckets` salt buckets, exact
    /// throughout; `settle` is the wait after each phase change
    /// ([`SALT_SETTLE`] when other processes may be using the
    /// application). Running it again with the same count after an
    /// interruption resumes the migration.
    pub fn migrate_salt(
        &self,
        app: &str,
        buckets: u32,
        settle: Duration,
        progress: &Progress,
    ) -> Result<SaltReport> {
        let stored = self.check_salt_move(app, buckets)?;
        let mut mv = match stored.salt_move {
            Some(mv) => {
                // Resumed: some process may still be a phase behind.
                std::thread::sleep(settle);
                mv
            }
            None => {
                let mv = SaltMove {
                    from: stored.salt_buckets,
                    to: buckets,
                    phase: SaltPhase::Dual,
                };
                let handle = self.app(app)?;
                handle
                    .profiles
                    .mutate_row(CHECKPOINT_ROW, &[Mutation::DeleteFromRow])?;
                self.store_salt(app, stored.salt_buckets, Some(mv))?;
                std::thread::sleep(settle);
                mv
            }
        };
        let mut report = SaltReport {
            from: mv.from,
            to: mv.to,
            copied: 0,
            deleted: 0,
        };
        if mv.phase == SaltPhase::Dual {
            report.copied = self.copy_salted(app, mv, progress)?;
            mv.phase = SaltPhase::Cut;
            self.store_salt(app, Some(mv.to), Some(mv))?;
            std::thread::sleep(settle);
        }
        if mv.phase == SaltPhase::Cut {
            mv.phase = SaltPhase::Clean;
            self.store_salt(app, Some(mv.to), Some(mv))?;
            std::thread::sleep(settle);
        }
        report.deleted = self.delete_old_layout(app, mv)?;
        self.store_salt(app, Some(mv.to), None)?;
        self.app(app)?
            .profiles
            .mutate_row(CHECKPOINT_ROW, &[Mutation::DeleteFromRow])?;
        Ok(report)
    }

    /// The stored settings, after checking that `migrate salt --buckets
    /// buckets` may start or resume on `app`.
    fn check_salt_move(&self, app: &str, buckets: u32) -> Result<AppSettings> {
        validate_app(app)?;
        if !(1..=affinity_rowkey::salt::MAX_BUCKETS).contains(&buckets) {
            return Err(Error::InvalidArgument {
                name: "salt buckets",
                reason: format!("{buckets} is not between 1 and 256"),
            });
        }
        let stored = self
            .stored_settings(app)?
            .ok_or_else(|| Error::UnknownApp {
                app: app.to_string(),
            })?;
        let busy = |reason: String| {
            Err(Error::InvalidArgument {
                name: "migration",
                reason,
            })
        };
        if let Some(target) = stored.dual_write {
            return busy(format!(
                "application {app:?} is migrating to the {} schema; finish that first",
                target.as_str()
            ));
        }
        match stored.salt_move {
            Some(mv) if mv.to != buckets => busy(format!(
                "application {app:?} is already moving to {} salt buckets; \
                 finish it with --buckets {}",
                mv.to, mv.to
            )),
            None if stored.salt_buckets == Some(buckets) => Err(Error::InvalidArgument {
                name: "salt buckets",
                reason: format!("application {app:?} is already salted over {buckets} buckets"),
            }),
            _ => Ok(stored),
        }
    }

    /// Store the salting settings, the others as stored now.
    fn store_salt(&self, app: &str, read: Option<u32>, mv: Option<SaltMove>) -> Result<()> {
        let stored = self
            .stored_settings(app)?
            .ok_or_else(|| Error::UnknownApp {
                app: app.to_string(),
            })?;
        self.apply_settings(
            app,
            AppSettings {
                salt_buckets: read,
                salt_move: mv,
                ..stored
            },
        )?;
        Ok(())
    }

    /// The old layout's ranges in key order, trimmed to what follows the
    /// checkpoint.
    fn old_ranges(&self, app: &str, from: Option<&Salter>) -> Result<Vec<RowRange>> {
        let handle = self.app(app)?;
        let after = handle
            .profiles
            .read_row(CHECKPOINT_ROW, Some(&RowFilter::CellsPerColumnLimit(1)))?
            .and_then(|row| row.latest(JOBS_FAMILY, b"after").map(|c| c.value.clone()))
            .filter(|k| !k.is_empty());
        let layout = layout_ranges(from, &app_prefix(app)?);
        Ok(ranges_after(
            layout.into_iter().map(|(_, r)| r),
            after.as_ref(),
        ))
    }

    /// Copy every row of the old layout to its key in the new one (cells
    /// as they are: copying twice stores the same cells), checkpointing the
    /// last key done.
    fn copy_salted(&self, app: &str, mv: SaltMove, progress: &Progress) -> Result<u64> {
        let from = mv.from.map(events_salter).transpose()?;
        let to = events_salter(mv.to)?;
        let ranges = self.old_ranges(app, from.as_ref())?;
        let handle = self.app(app)?;
        let mut copied = 0u64;
        if ranges.is_empty() {
            return Ok(copied);
        }
        let mut pending: Vec<RowMutations> = Vec::with_capacity(CHUNK);
        let mut sources: Vec<Bytes> = Vec::with_capacity(CHUNK);
        let mut last: Option<Bytes> = None;
        let mut flush = |pending: &mut Vec<RowMutations>,
                         sources: &mut Vec<Bytes>,
                         last: &Option<Bytes>|
         -> Result<()> {
            write_all(handle.events.as_ref(), pending)?;
            // A user deletion that ran between our read of a row and our
            // copy of it deleted the old row first: the copy goes too.
            let gone = vanished(handle.events.as_ref(), sources)?;
            let undo: Vec<RowMutations> = pending
                .iter()
                .zip(sources.iter())
                .filter(|(_, source)| gone.contains(*source))
                .map(|(copy, _)| {
                    RowMutations::new(copy.row_key.clone(), vec![Mutation::DeleteFromRow])
                })
                .collect();
            write_all(handle.events.as_ref(), &undo)?;
            sources.clear();
            copied += pending.len() as u64;
            progress
                .events
                .fetch_add(pending.len() as u64, std::sync::atomic::Ordering::Relaxed);
            pending.clear();
            if let Some(last) = last {
                handle.profiles.mutate_row(
                    CHECKPOINT_ROW,
                    &[Mutation::set_cell(JOBS_FAMILY, "after", 0, last.clone())],
                )?;
            }
            Ok(())
        };
        let request = ReadRowsRequest::new(RowSet::from_ranges(ranges));
        for row in handle.events.read_rows(&request)? {
            let row = row?;
            if let Some(logical) = old_logical(from.as_ref(), &row.key)? {
                let key = to.salt(logical);
                if key != row.key.as_ref() {
                    let cells = row
                        .cells
                        .iter()
                        .map(|c| Mutation::SetCell {
                            family: c.family.clone().into(),
                            qualifier: c.qualifier.clone(),
                            timestamp_micros: c.timestamp_micros,
                            value: c.value.clone(),
                        })
                        .collect();
                    pending.push(RowMutations::new(key, cells));
                    sources.push(row.key.clone());
                }
            }
            last = Some(row.key.clone());
            if pending.len() >= CHUNK {
                flush(&mut pending, &mut sources, &last)?;
            }
        }
        flush(&mut pending, &mut sources, &last)?;
        Ok(copied)
    }

    /// Delete the old layout's rows whose key changed (phase `clean`: no
    /// process reads or writes them any more).
    fn delete_old_layout(&self, app: &str, mv: SaltMove) -> Result<u64> {
        let from = mv.from.map(events_salter).transpose()?;
        let to = events_salter(mv.to)?;
        let handle = self.app(app)?;
        let ranges = layout_ranges(from.as_ref(), &app_prefix(app)?)
            .into_iter()
            .map(|(_, r)| r)
            .collect();
        let request =
            ReadRowsRequest::new(RowSet::from_ranges(ranges)).with_filter(RowFilter::Chain(vec![
                RowFilter::CellsPerRowLimit(1),
                RowFilter::StripValue,
            ]));
        let mut doomed: Vec<RowMutations> = Vec::with_capacity(CHUNK);
        let mut deleted = 0u64;
        let mut flush = |doomed: &mut Vec<RowMutations>| -> Result<()> {
            write_all(handle.events.as_ref(), doomed)?;
            deleted += doomed.len() as u64;
            doomed.clear();
            Ok(())
        };
        for row in handle.events.read_rows(&request)? {
            let row = row?;
            if let Some(logical) = old_logical(from.as_ref(), &row.key)? {
                if salted(Some(&to), logical) != row.key.as_ref() {
                    doomed.push(RowMutations::new(
                        row.key.clone(),
                        vec![Mutation::DeleteFromRow],
                    ));
                }
            }
            if doomed.len() >= CHUNK {
                flush(&mut doomed)?;
            }
        }
        flush(&mut doomed)?;
        Ok(deleted)
    }
}
