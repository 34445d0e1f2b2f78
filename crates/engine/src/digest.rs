//! Digests: the closed hours of a user's row of today, packed, so a
//! profile read late in the day decodes a few packed cells and the last
//! hours' counters instead of a counter cell per value the user touched
//! today (the whole design is `docs/design/profiles.md`, "Digests").
//!
//! Ingestion stamps each counter add (`n`) with its arrival hour. Once an
//! hour is closed (no add stamped with it is written any more: the same
//! margin as a closed day, [`CLOSE_MARGIN_MILLIS`]), a digest
//! ([`Engine::digest_user`]) moves the counters of the row's closed hours
//! of today into family `g` of the same row: one cell per facet, packed as
//! a rollup's `f` cells are, with the sums of the digest before it. One
//! check-and-mutate on the row deletes the digested counter cells and
//! writes the new `g` cells, if the earliest cell it read is still there
//! (not moved by another digest, nor deleted with the user). So every
//! reader of the row sees the counters either as cells or in the digest,
//! never both nor neither, and a crash loses a digest whole. Reads and
//! folds take `g` cells as counters of the arrival day of their timestamp
//! (the last digested hour's first microsecond); the `i` and `t` cells
//! stay where they are, so the exactly-once corrections are unchanged.

use std::collections::BTreeMap;

use affinity_model::{Bytes, Mutation, ReadRowsRequest, RowFilter, RowSet, TimestampRange};

use crate::batch::visit_rows;
use crate::engine::{App, Engine, DAY_MILLIS};
use crate::error::Result;
use crate::rollup::{add_counter, add_facet_cell, facet_cells, Totals, CLOSE_MARGIN_MILLIS};
use crate::state::{day_micros, decode_sum, COUNTERS_FAMILY, DIGEST_FAMILY, HOUR_MILLIS};

/// The end (ms, exclusive) of the closed arrival hours at `now_millis`.
pub fn closed_hours_end(now_millis: i64) -> i64 {
    (now_millis - CLOSE_MARGIN_MILLIS).div_euclid(HOUR_MILLIS) * HOUR_MILLIS
}

/// What a digest did to one user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestOutcome {
    /// No counter of a closed hour of today waits.
    UpToDate,
    /// Rows of today digested.
    Digested,
    /// Another digest or a deletion came first to one of the rows (the
    /// others were digested); the next maintenance digests it.
    Conflict,
}

/// A digest of one physical row of today, prepared
/// ([`Engine::prepare_digest`]) and not yet committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestPlan {
    key: Vec<u8>,
    /// The earliest counter cell it moves (column, timestamp): the
    /// commit's check.
    earliest: (Vec<u8>, i64),
    /// The counter columns it moves cells of, and their time range.
    columns: Vec<Vec<u8>>,
    range: TimestampRange,
    /// The new `g` cells (facet, packed counters) and their timestamp.
    cells: BTreeMap<Vec<u8>, Vec<u8>>,
    stamp: i64,
}

impl DigestPlan {
    /// The row it digests.
    pub fn key(&self) -> &[u8] {
        &self.key
    }
}

impl Engine {
    /// Digest the closed hours of today in `user`'s rows of today:
    /// [`Engine::prepare_digest`] then [`Engine::commit_digest`] of each
    /// row.
    pub fn digest_user(&self, app: &App, user: &str) -> Result<DigestOutcome> {
        let (mut digested, mut conflict) = (false, false);
        for plan in self.prepare_digest(app, user)? {
            if self.commit_digest(app, &plan)? {
                digested = true;
            } else {
                conflict = true;
            }
        }
        Ok(match (digested, conflict) {
            (_, true) => DigestOutcome::Conflict,
            (false, false) => DigestOutcome::UpToDate,
            (true, false) => DigestOutcome::Digested,
        })
    }

    /// The digests of `user`'s rows of today (one per physical row with
    /// counters of a closed hour of today; none in the first hours of a
    /// day, when none of its hours is closed yet: yesterday's row is the
    /// fold's). Reads only.
    pub fn prepare_digest(&self, app: &App, user: &str) -> Result<Vec<DigestPlan>> {
        let now = self.now_millis();
        let today = now.div_euclid(DAY_MILLIS);
        let (start, end) = (day_micros(today), closed_hours_end(now) * 1000);
        if end <= start {
            return Ok(Vec::new());
        }
        let mut rows = RowSet::default();
        self.push_day_rows(app, user, [today], &mut rows)?;
        let filter = RowFilter::interleave(vec![
            RowFilter::Chain(vec![
                RowFilter::exact_family(COUNTERS_FAMILY),
                RowFilter::TimestampRange(TimestampRange::new(start, end)),
            ]),
            RowFilter::exact_family(DIGEST_FAMILY),
        ]);
        let mut plans = Vec::new();
        visit_rows(
            app.profiles.as_ref(),
            &ReadRowsRequest::new(rows).with_filter(filter),
            |row| {
                let mut totals = Totals::new();
                let mut earliest: Option<(Vec<u8>, i64)> = None;
                let mut columns: Vec<Vec<u8>> = Vec::new();
                for cell in row.cells {
                    if cell.family == DIGEST_FAMILY {
                        add_facet_cell(&mut totals, cell.qualifier, cell.value, 1)?;
                        continue;
                    }
                    add_counter(&mut totals, cell.qualifier, decode_sum(cell.value)?)?;
                    if earliest
                        .as_ref()
                        .is_none_or(|(_, t)| cell.timestamp_micros < *t)
                    {
                        earliest = Some((cell.qualifier.to_vec(), cell.timestamp_micros));
                    }
                    // A column's versions come one after another.
                    if columns
                        .last()
                        .is_none_or(|q| q.as_slice() != cell.qualifier)
                    {
                        columns.push(cell.qualifier.to_vec());
                    }
                }
                let Some(earliest) = earliest else {
                    return Ok(());
                };
                totals.retain(|_, values| {
                    values.retain(|_, n| *n != 0);
                    !values.is_empty()
                });
                plans.push(DigestPlan {
                    key: row.key.to_vec(),
                    earliest,
                    columns,
                    range: TimestampRange::new(start, end),
                    cells: facet_cells(&totals)?,
                    // The last digested hour: in today, the digest's
                    // arrival day for every reader.
                    stamp: end - HOUR_MILLIS * 1000,
                });
                Ok(())
            },
        )?;
        Ok(plans)
    }

    /// Commit a digest: `false` (nothing written) when the earliest
    /// counter cell it moves is gone from the row: another digest moved
    /// it (one through a later hour moved every cell this one read; one
    /// through an earlier hour may have, else this one's digest holds
    /// everything that one's does), or a deletion took the row. No add
    /// can write that cell again: its hour is closed.
    pub fn commit_digest(&self, app: &App, plan: &DigestPlan) -> Result<bool> {
        let mut write: Vec<Mutation> = plan
            .columns
            .iter()
            .map(|q| Mutation::DeleteFromColumn {
                family: COUNTERS_FAMILY.into(),
                qualifier: Bytes::copy_from_slice(q),
                time_range: plan.range,
            })
            .collect();
        write.push(Mutation::DeleteFromFamily {
            family: DIGEST_FAMILY.into(),
        });
        for (facet, cell) in &plan.cells {
            write.push(Mutation::set_cell(
                DIGEST_FAMILY,
                facet.clone(),
                plan.stamp,
                cell.clone(),
            ));
        }
        let (column, t) = &plan.earliest;
        let still_there = RowFilter::Chain(vec![
            RowFilter::exact_family(COUNTERS_FAMILY),
            RowFilter::exact_qualifier(column),
            RowFilter::TimestampRange(TimestampRange::new(*t, t + 1000)),
        ]);
        // Unsynced: a digest lost in a crash is one not yet made.
        app.profiles
            .check_and_mutate_row_unsynced(&plan.key, Some(&still_there), &write, &[])
            .map_err(Into::into)
    }
}
