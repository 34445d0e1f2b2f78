//! Garbage collection: which cells a family's GC rule hides, and the
//! compaction filter that physically drops cells no read can see again.
//!
//! GC is enforced on every read (a cell its rule deletes is never returned).
//! Space is reclaimed two ways: the compaction filter drops cells of dropped
//! families and cells old enough that their rule deletes them whatever their
//! version (age only grows, so this is safe at any time); the background
//! sweeper ([`crate::sweeper`]) deletes cells hidden by version limits,
//! row by row under the row lock.

use std::ffi::{CStr, CString};
use std::sync::Arc;

use affinity_model::apply::now_micros;
use affinity_model::gc::deletes;
use affinity_model::GcRule;
use parking_lot::RwLock;
use rocksdb::compaction_filter::{CompactionFilter, Decision};
use rocksdb::compaction_filter_factory::{CompactionFilterContext, CompactionFilterFactory};

use crate::keys::{decode_after_row, decode_cell_key};
use crate::meta::TableMeta;

/// True when `rule` deletes the cell even if it were the newest of its
/// column, so it deletes it whatever its actual version: the decision of
/// [`deletes`] only grows with the version and with age.
pub(crate) fn deletes_at_any_version(
    rule: &GcRule,
    timestamp_micros: i64,
    now_micros: i64,
) -> bool {
    deletes(rule, 0, timestamp_micros, now_micros)
}

/// Tells, cell by cell in key order, which cells of a row GC hides: cells
/// of dropped families and cells their family's rule deletes.
pub(crate) struct Visibility<'m> {
    meta: &'m TableMeta,
    now_micros: i64,
    family_id: Option<u32>,
    qualifier: Vec<u8>,
    version: usize,
}

impl<'m> Visibility<'m> {
    pub fn new(meta: &'m TableMeta, now_micros: i64) -> Visibility<'m> {
        Visibility {
            meta,
            now_micros,
            family_id: None,
            qualifier: Vec::new(),
            version: 0,
        }
    }

    /// Forget the previous column (call at the start of each row).
    pub fn start_row(&mut self) {
        self.family_id = None;
    }

    /// True when the cell with this key (of a row whose prefix is
    /// `prefix_len` bytes) is hidden. Cells must be fed in key order.
    pub fn hidden(&mut self, key: &[u8], prefix_len: usize) -> bool {
        let Some(cell) = decode_after_row(key, prefix_len) else {
            return false;
        };
        if self.family_id == Some(cell.family_id) && self.qualifier == cell.qualifier {
            self.version += 1;
        } else {
            self.family_id = Some(cell.family_id);
            self.qualifier.clear();
            self.qualifier.extend_from_slice(cell.qualifier);
            self.version = 0;
        }
        match self.meta.family(cell.family_id) {
            Some(family) => deletes(
                &family.gc_rule,
                self.version,
                cell.timestamp_micros,
                self.now_micros,
            ),
            // Dropped (ids are never reused); a higher id is newer than `meta`.
            None => cell.family_id < self.meta.next_family_id,
        }
    }
}

/// The metadata a table's compaction filter consults; empty until the
/// store has read the table's metadata at open.
pub(crate) type GcSlot = Arc<RwLock<Option<Arc<TableMeta>>>>;

/// Creates one [`GcFilter`] per compaction with a snapshot of the table's
/// metadata and the clock.
pub(crate) struct GcFilterFactory {
    slot: GcSlot,
}

impl GcFilterFactory {
    pub fn new(slot: GcSlot) -> GcFilterFactory {
        GcFilterFactory { slot }
    }
}

const FACTORY_NAME: &CStr = c"affinity-gc-factory";
const FILTER_NAME: &CStr = c"affinity-gc";

impl CompactionFilterFactory for GcFilterFactory {
    type Filter = GcFilter;

    fn create(&mut self, _context: CompactionFilterContext) -> GcFilter {
        GcFilter {
            meta: self.slot.read().clone(),
            now_micros: now_micros(),
            name: FILTER_NAME.to_owned(),
        }
    }

    fn name(&self) -> &CStr {
        FACTORY_NAME
    }
}

/// Drops cells of dropped families and cells their rule deletes by age.
pub(crate) struct GcFilter {
    meta: Option<Arc<TableMeta>>,
    now_micros: i64,
    name: CString,
}

impl GcFilter {
    fn decide(&self, key: &[u8]) -> Decision {
        let Some(meta) = &self.meta else {
            return Decision::Keep;
        };
        let Some(cell) = decode_cell_key(key) else {
            return Decision::Keep;
        };
        match meta.family(cell.family_id) {
            Some(family)
                if deletes_at_any_version(
                    &family.gc_rule,
                    cell.timestamp_micros,
                    self.now_micros,
                ) =>
            {
                Decision::Remove
            }
            Some(_) => Decision::Keep,
            // Ids below `next_family_id` that are not live were dropped and
            // are never reused; a higher id belongs to a family created
            // after this snapshot and must be kept.
            None if cell.family_id < meta.next_family_id => Decision::Remove,
            None => Decision::Keep,
        }
    }
}

impl CompactionFilter for GcFilter {
    fn filter(&mut self, _level: u32, key: &[u8], _value: &[u8]) -> Decision {
        self.decide(key)
    }

    fn name(&self) -> &CStr {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use affinity_model::TableSpec;

    use crate::keys::{encode_cell_key, row_prefix};

    const DAY: i64 = 86_400_000_000;

    #[test]
    fn filter_drops_dropped_families_and_expired_cells_only() {
        let spec = TableSpec::new()
            .with_family("a", GcRule::MaxAge(Duration::from_secs(86_400)))
            .with_family("b", GcRule::MaxVersions(1))
            .with_family("c", GcRule::None);
        let mut meta = TableMeta::from_spec("cf".into(), &spec);
        let mut families = meta.families.clone();
        families.remove("c");
        meta = TableMeta::new(meta.cf_name.clone(), meta.next_family_id, families);
        let filter = GcFilter {
            meta: Some(Arc::new(meta)),
            now_micros: 10 * DAY,
            name: FILTER_NAME.to_owned(),
        };
        let key = |family: u32, ts: i64| {
            let mut out = Vec::new();
            encode_cell_key(&mut out, &row_prefix(b"r"), family, b"q", ts);
            out
        };
        assert!(matches!(filter.decide(&key(0, 5 * DAY)), Decision::Remove));
        assert!(matches!(filter.decide(&key(0, 10 * DAY)), Decision::Keep));
        assert!(
            matches!(filter.decide(&key(1, 0)), Decision::Keep),
            "versions are the sweeper's job"
        );
        assert!(
            matches!(filter.decide(&key(2, 10 * DAY)), Decision::Remove),
            "dropped family"
        );
        assert!(
            matches!(filter.decide(&key(3, 0)), Decision::Keep),
            "family newer than the snapshot"
        );
        assert!(matches!(filter.decide(b"garbage"), Decision::Keep));
    }
}
