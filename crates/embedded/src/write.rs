//! Turning mutations into one RocksDB `WriteBatch`.
//!
//! Puts go straight into the batch. Deletes must name every cell they
//! remove, so a request containing one reads the affected key ranges (the
//! caller holds those rows' locks exclusively) and works on an ordered
//! overlay of the batch, so a delete also removes cells put earlier in the
//! same request, and a put after a delete survives it.
//!
//! GC: the reference model removes the cells GC hides whenever a row is
//! written. This store leaves them to the sweeper and the compaction
//! filter, which no read can tell apart, except for one case: a delete of
//! some versions of a column could bring back an older version that GC had
//! hidden. So before such a delete, the column's hidden cells are deleted
//! too, as they would have been.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use affinity_model::{Bytes, Error, GcRule, Mutation, Result, TimestampRange, SERVER_TIME};
use rocksdb::{BoundColumnFamily, WriteBatch};

use crate::error::storage;
use crate::gc::Visibility;
use crate::keys::{
    column_prefix, component_successor, encode_cell_key, family_end, family_prefix, push_timestamp,
    row_prefix,
};
use crate::meta::TableMeta;
use crate::ranges::KeyRange;
use crate::scan::open_range;
use crate::store::Db;

/// True when a mutation must read the row to know which cells it deletes.
pub(crate) fn needs_read(mutation: &Mutation) -> bool {
    !matches!(mutation, Mutation::SetCell { .. })
}

/// Collects the writes of one request.
pub(crate) struct BatchBuilder<'a, 'db> {
    db: &'db Db,
    cf: &'a Arc<BoundColumnFamily<'db>>,
    meta: &'a TableMeta,
    table: &'a str,
    now_micros: i64,
    batch: WriteBatch,
    /// Final state of every key touched, in key order (`None`: deleted).
    /// Present only when the request has deletes.
    overlay: Option<BTreeMap<Vec<u8>, Option<Bytes>>>,
    key: Vec<u8>,
}

impl<'a, 'db> BatchBuilder<'a, 'db> {
    /// `with_reads`: some mutation of the request deletes cells.
    pub fn new(
        db: &'db Db,
        cf: &'a Arc<BoundColumnFamily<'db>>,
        meta: &'a TableMeta,
        table: &'a str,
        now_micros: i64,
        with_reads: bool,
    ) -> BatchBuilder<'a, 'db> {
        BatchBuilder {
            db,
            cf,
            meta,
            table,
            now_micros,
            batch: WriteBatch::default(),
            overlay: with_reads.then(BTreeMap::new),
            key: Vec::with_capacity(64),
        }
    }

    fn family_id(&self, family: &str) -> Result<u32> {
        self.meta
            .family_id(family)
            .ok_or_else(|| Error::FamilyNotFound {
                table: self.table.to_string(),
                family: family.to_string(),
            })
    }

    /// Add a validated row mutation.
    pub fn add_row(&mut self, row_key: &[u8], mutations: &[Mutation]) -> Result<()> {
        let prefix = row_prefix(row_key);
        if self.overlay.is_some() {
            self.collect_hidden_before_deletes(&prefix, mutations)?;
        }
        for mutation in mutations {
            match mutation {
                Mutation::SetCell {
                    family,
                    qualifier,
                    timestamp_micros,
                    value,
                } => {
                    let family_id = self.family_id(family)?;
                    let ts = if *timestamp_micros == SERVER_TIME {
                        self.now_micros
                    } else {
                        *timestamp_micros
                    };
                    encode_cell_key(&mut self.key, &prefix, family_id, qualifier, ts);
                    match &mut self.overlay {
                        Some(overlay) => {
                            overlay.insert(self.key.clone(), Some(value.clone()));
                        }
                        None => self.batch.put_cf(self.cf, &self.key, value),
                    }
                }
                Mutation::DeleteFromColumn {
                    family,
                    qualifier,
                    time_range,
                } => {
                    let column = column_prefix(&prefix, self.family_id(family)?, qualifier);
                    let (lower, upper) = column_time_range(column, time_range);
                    self.delete_range(lower, upper)?;
                }
                Mutation::DeleteFromFamily { family } => {
                    let family_id = self.family_id(family)?;
                    let lower = family_prefix(&prefix, family_id);
                    self.delete_range(lower, family_end(&prefix, family_id))?;
                }
                Mutation::DeleteFromRow => {
                    let upper = component_successor(&prefix);
                    self.delete_range(prefix.clone(), upper)?;
                }
            }
        }
        Ok(())
    }

    /// Before deleting some versions of a column (a time range), delete the
    /// column's cells GC hides in the row as it stands.
    fn collect_hidden_before_deletes(
        &mut self,
        prefix: &[u8],
        mutations: &[Mutation],
    ) -> Result<()> {
        for mutation in mutations {
            let Mutation::DeleteFromColumn {
                family,
                qualifier,
                time_range,
            } = mutation
            else {
                continue;
            };
            let family_id = self.family_id(family)?;
            let all_versions = *time_range == TimestampRange::default();
            let has_gc = self
                .meta
                .family(family_id)
                .is_some_and(|f| f.gc_rule != GcRule::None);
            if all_versions || !has_gc {
                continue;
            }
            let column = column_prefix(prefix, family_id, qualifier);
            let end = component_successor(&column);
            let mut present: BTreeSet<Vec<u8>> =
                self.stored_keys(&column, &end)?.into_iter().collect();
            let Some(overlay) = &mut self.overlay else {
                return Err(missing_overlay());
            };
            for (key, state) in overlay.range(column.clone()..end.clone()) {
                match state {
                    Some(_) => present.insert(key.clone()),
                    None => present.remove(key),
                };
            }
            let mut visibility = Visibility::new(self.meta, self.now_micros);
            for key in present {
                if visibility.hidden(&key, prefix.len()) {
                    overlay.insert(key, None);
                }
            }
        }
        Ok(())
    }

    /// The keys stored in `[lower, upper)`, a range within one row.
    fn stored_keys(&self, lower: &[u8], upper: &[u8]) -> Result<Vec<Vec<u8>>> {
        let range = KeyRange {
            lower: Some(lower.to_vec()),
            upper: Some(upper.to_vec()),
            single_row: true,
        };
        let (mut iter, _) = open_range(self.db, self.cf, &range, false);
        let mut keys = Vec::new();
        while let Some(key) = iter.key() {
            keys.push(key.to_vec());
            iter.next();
        }
        iter.status().map_err(storage)?;
        Ok(keys)
    }

    /// Delete every key in `[lower, upper)`, stored or written earlier in
    /// this request. The range lies within one row.
    fn delete_range(&mut self, lower: Vec<u8>, upper: Vec<u8>) -> Result<()> {
        if lower >= upper {
            return Ok(());
        }
        let stored = self.stored_keys(&lower, &upper)?;
        let Some(overlay) = &mut self.overlay else {
            return Err(missing_overlay());
        };
        for (_, state) in overlay.range_mut(lower..upper) {
            *state = None;
        }
        for key in stored {
            overlay.insert(key, None);
        }
        Ok(())
    }

    /// The batch to write.
    pub fn finish(mut self) -> WriteBatch {
        if let Some(overlay) = self.overlay.take() {
            for (key, state) in overlay {
                match state {
                    Some(value) => self.batch.put_cf(self.cf, key, value),
                    None => self.batch.delete_cf(self.cf, key),
                }
            }
        }
        self.batch
    }
}

fn missing_overlay() -> Error {
    Error::Internal("delete planned without reading the row".into())
}

/// The keys of a column whose timestamps fall in `range`, as
/// `[lower, upper)` (timestamps are stored inverted, newest first).
fn column_time_range(column: Vec<u8>, range: &TimestampRange) -> (Vec<u8>, Vec<u8>) {
    let mut lower = column.clone();
    if range.end_micros > 0 {
        // Newest timestamp included is end - 1.
        push_timestamp(&mut lower, range.end_micros - 1);
    }
    let mut upper = column;
    push_timestamp(&mut upper, range.start_micros.max(0));
    // Just past the key of the oldest timestamp included.
    upper.push(0);
    (lower, upper)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::decode_cell_key;

    fn key(ts: i64) -> Vec<u8> {
        let mut out = Vec::new();
        encode_cell_key(&mut out, &row_prefix(b"r"), 0, b"q", ts);
        out
    }

    fn in_range(range: TimestampRange, ts: i64) -> bool {
        let (lower, upper) = column_time_range(column_prefix(&row_prefix(b"r"), 0, b"q"), &range);
        let k = key(ts);
        lower <= k && k < upper
    }

    #[test]
    fn column_time_range_is_start_inclusive_end_exclusive() {
        let range = TimestampRange::new(2_000, 4_000);
        for ts in [0, 1_000, 2_000, 3_000, 4_000, 5_000] {
            assert_eq!(in_range(range, ts), range.contains(ts), "ts {ts}");
        }
        let open_end = TimestampRange::new(3_000, 0);
        for ts in [0, 2_000, 3_000, i64::MAX - 807] {
            assert_eq!(in_range(open_end, ts), open_end.contains(ts), "ts {ts}");
        }
        assert_eq!(
            decode_cell_key(&key(7_000)).map(|c| c.timestamp_micros),
            Some(7_000)
        );
    }

    #[test]
    fn only_sets_are_blind() {
        assert!(!needs_read(&Mutation::set_cell("f", "q", 1_000, "v")));
        assert!(needs_read(&Mutation::DeleteFromRow));
        assert!(needs_read(&Mutation::delete_column("f", "q")));
    }
}
