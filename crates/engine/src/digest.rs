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
//! writes the new `g` cells, if the row's `g` cells are still those it
//! read. So every reader of the row sees the counters either as cells or
//! in the digest, never both nor neither, and a crash loses a digest
//! whole. Reads and folds take `g` cells as counters of the arrival day of
//! their timestamp (the last digested hour's first microsecond); the `i`
//! and `t` cells stay where they are, so the exactly-once corrections are
//! unchanged.

use std::collections::BTreeMap;

use affinity_model::{Bytes, Mutation, ReadRowsRequest, RowFilter, RowSet, TimestampRange};

use crate::batch::visit_rows;
use crate::engine::{App, Engine, DAY_MILLIS};
use crate::error::{Error, Result};
use crate::rollup::{add_total, facet_cells, packed, Totals, CLOSE_MARGIN_MILLIS};
use crate::state::{
    day_micros, split_counter_qualifier, COUNTERS_FAMILY, DIGEST_FAMILY, HOUR_MILLIS,
};

/// The end (ms, exclusive) of the closed arrival hours at `now_millis`.
pub fn closed_hours_end(now_millis: i64) -> i64 {
    (now_millis - CLOSE_MARGIN_MILLIS).div_euclid(HOUR_MILLIS) * HOUR_MILLIS
}

/// What a digest did to one user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestOutcome {
    /// No counter of a closed hour of today waits.
    UpToDate,
    /// Rows of today digested, and the counter cells they moved.
    Digested { rows: usize, cells: usize },
    /// Another digest committed first to one of the rows (the others
    /// were digested); the next maintenance digests it.
    Conflict,
}

/// One physical row of today as the digest reads it.
struct Held {
    key: Vec<u8>,
    /// The row's `g` cells: facet, packed counters; and their timestamp.
    digest: Vec<(Vec<u8>, Vec<u8>)>,
    digest_stamp: Option<i64>,
    /// The closed hours' counter cells: qualifier, count.
    counters: Vec<(Vec<u8>, i64)>,
}

/// A filter that keeps a `g` cell unless its timestamp is `stamp`: with
/// `None`, any `g` cell.
fn digest_changed(stamp: Option<i64>) -> RowFilter {
    let family = RowFilter::exact_family(DIGEST_FAMILY);
    match stamp {
        None => family,
        Some(s) => RowFilter::Chain(vec![
            family,
            RowFilter::interleave(vec![
                RowFilter::TimestampRange(TimestampRange::new(0, s)),
                RowFilter::TimestampRange(TimestampRange::new(s + 1000, 0)),
            ]),
        ]),
    }
}

impl Engine {
    /// Digest the closed hours of today in `user`'s rows of today (see the
    /// module docs). In the first hours of a day (none of its hours closed
    /// yet) there is nothing to do; yesterday's row is the fold's.
    pub fn digest_user(&self, app: &App, user: &str) -> Result<DigestOutcome> {
        let now = self.now_millis();
        let today = now.div_euclid(DAY_MILLIS);
        let (start, end) = (day_micros(today), closed_hours_end(now) * 1000);
        if end <= start {
            return Ok(DigestOutcome::UpToDate);
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
        let mut held: Vec<Held> = Vec::new();
        visit_rows(
            app.profiles.as_ref(),
            &ReadRowsRequest::new(rows).with_filter(filter),
            |row| {
                let mut h = Held {
                    key: row.key.to_vec(),
                    digest: Vec::new(),
                    digest_stamp: None,
                    counters: Vec::new(),
                };
                for cell in row.cells {
                    if cell.family == DIGEST_FAMILY {
                        h.digest
                            .push((cell.qualifier.to_vec(), cell.value.to_vec()));
                        h.digest_stamp = h.digest_stamp.max(Some(cell.timestamp_micros));
                    } else {
                        let n = affinity_model::apply::decode_i64(cell.value).ok_or_else(|| {
                            Error::corrupt("state cell", format!("{} bytes", cell.value.len()))
                        })?;
                        h.counters.push((cell.qualifier.to_vec(), n));
                    }
                }
                if !h.counters.is_empty() {
                    held.push(h);
                }
                Ok(())
            },
        )?;
        let (mut digested, mut cells, mut conflict) = (0, 0, false);
        for row in held {
            let mut totals = Totals::new();
            for (facet, cell) in &row.digest {
                let cell = packed::unpack_facet(cell, facet)?;
                let prefixes = cell.prefixes();
                cell.for_each(|value, j, n| add_total(&mut totals, prefixes[j], value, n))?;
            }
            let mut columns: BTreeMap<&[u8], ()> = BTreeMap::new();
            for (q, n) in &row.counters {
                let (prefix, value) = split_counter_qualifier(q)?;
                add_total(&mut totals, &prefix, &value, *n);
                columns.insert(q, ());
            }
            totals.retain(|_, values| {
                values.retain(|_, n| *n != 0);
                !values.is_empty()
            });
            let mut write: Vec<Mutation> = columns
                .keys()
                .map(|q| Mutation::DeleteFromColumn {
                    family: COUNTERS_FAMILY.into(),
                    qualifier: Bytes::copy_from_slice(q),
                    time_range: TimestampRange::new(start, end),
                })
                .collect();
            write.push(Mutation::DeleteFromFamily {
                family: DIGEST_FAMILY.into(),
            });
            // Stamped with the last digested hour: in today, and other
            // than the digest it replaces.
            let stamp = end - HOUR_MILLIS * 1000;
            for (facet, cell) in facet_cells(&totals)? {
                write.push(Mutation::set_cell(DIGEST_FAMILY, facet, stamp, cell));
            }
            // Unsynced: a digest lost in a crash is one not yet made.
            let changed = app.profiles.check_and_mutate_row_unsynced(
                &row.key,
                Some(&digest_changed(row.digest_stamp)),
                &[],
                &write,
            )?;
            if changed {
                conflict = true;
            } else {
                digested += 1;
                cells += row.counters.len();
            }
        }
        Ok(match (digested, conflict) {
            (_, true) => DigestOutcome::Conflict,
            (0, false) => DigestOutcome::UpToDate,
            (rows, false) => DigestOutcome::Digested { rows, cells },
        })
    }
}
