//! Forward-looking salting migration: rows written at or after a cut-off
//! time go to salted keys, rows written before stay at their unsalted keys,
//! and readers merge both key spaces so callers see one logical table.
//!
//! The two spaces may be two tables, or one table. In one table the
//! unsalted space is every key outside [`Salter::salted_space`]; an
//! unsalted key that starts like a salt field (the salter's width of ASCII
//! digits, within the bucket range) would be hidden, so writes through this
//! type refuse such keys before the cut-off.

use std::ops::Bound;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use affinity_model::{Bytes, Mutation, ReadRowsRequest, Row, RowFilter, RowRange, RowSet, Table};

use crate::error::{Error, Result};
use crate::fanout::SaltedTable;
use crate::merge::{MergedRows, SubScan};
use crate::salt::{end_bound, Salter};

/// Reads and writes across the unsalted (old) and salted (new) key spaces.
#[derive(Clone)]
pub struct MigratingTable {
    old: Arc<dyn Table>,
    new: SaltedTable,
    cutoff_millis: i64,
    shared: bool,
}

fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl MigratingTable {
    /// Both key spaces in one table.
    pub fn same_table(table: Arc<dyn Table>, salter: Salter, cutoff_millis: i64) -> MigratingTable {
        MigratingTable {
            old: Arc::clone(&table),
            new: SaltedTable::new(table, salter),
            cutoff_millis,
            shared: true,
        }
    }

    /// Old unsalted rows in `old`, new salted rows in `new`.
    pub fn separate(
        old: Arc<dyn Table>,
        new: Arc<dyn Table>,
        salter: Salter,
        cutoff_millis: i64,
    ) -> MigratingTable {
        MigratingTable {
            old,
            new: SaltedTable::new(new, salter),
            cutoff_millis,
            shared: false,
        }
    }

    pub fn cutoff_millis(&self) -> i64 {
        self.cutoff_millis
    }

    /// True when a write at `at_millis` goes to the salted space.
    pub fn is_salted_at(&self, at_millis: i64) -> bool {
        at_millis >= self.cutoff_millis
    }

    /// Apply mutations to a logical row as of now.
    pub fn mutate_row(&self, key: &[u8], mutations: &[Mutation]) -> Result<()> {
        self.mutate_row_at(key, mutations, now_millis())
    }

    /// Apply mutations to a logical row as of `at_millis`: writes go to the
    /// space in force at that time; deletions are applied to both spaces (not
    /// atomically across them) so no old cell outlives its deletion.
    pub fn mutate_row_at(&self, key: &[u8], mutations: &[Mutation], at_millis: i64) -> Result<()> {
        if self.is_salted_at(at_millis) {
            self.new.mutate_row(key, mutations)?;
            let deletes: Vec<Mutation> = mutations
                .iter()
                .filter(|m| !matches!(m, Mutation::SetCell { .. }))
                .cloned()
                .collect();
            if !deletes.is_empty() {
                self.check_old_key(key)?;
                self.old.mutate_row(key, &deletes)?;
            }
            Ok(())
        } else {
            self.check_old_key(key)?;
            Ok(self.old.mutate_row(key, mutations)?)
        }
    }

    fn check_old_key(&self, key: &[u8]) -> Result<()> {
        if self.shared && self.new.salter().salted_space().contains(key) {
            return Err(Error::InvalidComponent {
                component: "unsalted key",
                value: String::from_utf8_lossy(key).into_owned(),
                reason: "starts like a salt field and would be hidden in a shared table",
            });
        }
        Ok(())
    }

    /// Read a logical row: the cells of both spaces, combined.
    pub fn read_row(&self, key: &[u8], filter: Option<&RowFilter>) -> Result<Option<Row>> {
        let new = self.new.read_row(key, filter)?;
        let old = if self.shared && self.new.salter().salted_space().contains(key) {
            None
        } else {
            self.old.read_row(key, filter)?
        };
        Ok(match (old, new) {
            (None, row) | (row, None) => row,
            (Some(mut old), Some(new)) => {
                old.cells.extend(new.cells);
                old.cells.sort_by(|a, b| a.canonical_cmp(b));
                Some(old)
            }
        })
    }

    /// Scan logical rows across both spaces in key order (descending for a
    /// reversed request); a row with cells in both spaces comes back once.
    pub fn read_rows(&self, request: &ReadRowsRequest) -> Result<MergedRows> {
        let mut scans = self.new.sub_scans(request);
        if let Some(rows) = self.old_rows(&request.rows) {
            scans.push(SubScan {
                table: Arc::clone(&self.old),
                request: ReadRowsRequest {
                    rows,
                    ..request.clone()
                },
                strip: 0,
            });
        }
        MergedRows::start(scans, true, request.reversed, request.rows_limit)
    }

    /// The old space's part of a logical row set (`None`: nothing to read).
    fn old_rows(&self, rows: &RowSet) -> Option<RowSet> {
        if !self.shared {
            return Some(rows.clone());
        }
        let hole = self.new.salter().salted_space();
        let keys: Vec<Bytes> = rows
            .keys
            .iter()
            .filter(|k| !hole.contains(k))
            .cloned()
            .collect();
        let all = [RowRange::all()];
        let ranges_in: &[RowRange] = if rows.is_all() { &all } else { &rows.ranges };
        let ranges: Vec<RowRange> = ranges_in.iter().flat_map(|r| subtract(r, &hole)).collect();
        let set = RowSet { keys, ranges };
        (!set.is_all()).then_some(set)
    }
}

/// `range` minus `hole` (a closed-open range), as at most two ranges.
fn subtract(range: &RowRange, hole: &RowRange) -> Vec<RowRange> {
    let (Bound::Included(lo), Bound::Excluded(hi)) = (&hole.start, &hole.end) else {
        return vec![range.clone()];
    };
    let end = end_bound(range);
    let below = RowRange {
        start: range.start.clone(),
        end: min_end(&end, Bound::Excluded(lo.clone())),
    };
    let above = RowRange {
        start: max_start(&range.start, Bound::Included(hi.clone())),
        end,
    };
    [below, above]
        .into_iter()
        .filter(|r| !r.is_empty())
        .collect()
}

fn min_end(a: &Bound<Bytes>, b: Bound<Bytes>) -> Bound<Bytes> {
    match (a, &b) {
        (Bound::Unbounded, _) => b,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Excluded(y)) if x < y => a.clone(),
        (Bound::Included(_), Bound::Excluded(_)) => b,
        (Bound::Excluded(_), _) => b,
        _ => a.clone(),
    }
}

fn max_start(a: &Bound<Bytes>, b: Bound<Bytes>) -> Bound<Bytes> {
    match (a, &b) {
        (Bound::Unbounded, _) => b,
        (Bound::Included(x), Bound::Included(y)) if x >= y => a.clone(),
        (Bound::Excluded(x), Bound::Included(y)) if x >= y => a.clone(),
        _ => b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtract_cuts_the_hole_out() {
        let hole = RowRange::closed_open("0", "2");
        let all = subtract(&RowRange::all(), &hole);
        assert_eq!(all.len(), 2);
        for key in [&b"/"[..], b"2", b"a", b"20"] {
            assert!(all.iter().any(|r| r.contains(key)), "{key:?}");
        }
        for key in [&b"0"[..], b"1", b"0abc", b"19"] {
            assert!(!all.iter().any(|r| r.contains(key)), "{key:?}");
        }
        let inside = subtract(&RowRange::closed_open("05", "15"), &hole);
        assert!(inside.is_empty());
        let left = subtract(&RowRange::closed_open("+", "1"), &hole);
        assert_eq!(left, vec![RowRange::closed_open("+", "0")]);
        let incl = RowRange {
            start: Bound::Excluded(Bytes::from("1")),
            end: Bound::Included(Bytes::from("3")),
        };
        assert_eq!(
            subtract(&incl, &hole),
            vec![RowRange {
                start: Bound::Included(Bytes::from("2")),
                end: Bound::Included(Bytes::from("3")),
            }]
        );
    }
}
