//! Garbage collection of stored rows, and the compaction filter that
//! applies it as RocksDB rewrites files.
//!
//! GC is enforced on every read (a cell its rule deletes is never
//! returned) and applied physically whenever a row is written (see
//! [`crate::write`]). What ages out of rows nobody writes is reclaimed by
//! the compaction filter, which sees whole rows and so judges version
//! limits and ages exactly, and by the sweeper ([`crate::sweeper`]), which
//! rewrites such rows under their lock.

use std::ffi::{CStr, CString};
use std::sync::Arc;

use affinity_model::apply::now_micros;
use parking_lot::RwLock;
use rocksdb::compaction_filter::{CompactionFilter, Decision};
use rocksdb::compaction_filter_factory::{CompactionFilterContext, CompactionFilterFactory};

use crate::decode::Visibility;
use crate::meta::TableMeta;
use crate::row::{row_cursor, RawCell, RowWriter};

/// What GC leaves of a stored row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Collected {
    /// Every cell stays (or the value does not decode: left alone).
    Unchanged,
    /// No cell stays.
    Empty,
    /// Some cells go: the row re-encoded, and how many cells went.
    Rewritten(Vec<u8>, u64),
}

/// GC one stored row at `now_micros`. Cells of families newer than
/// `meta` (ids at or past `next_family_id`) are kept.
pub(crate) fn collect_stored(meta: &TableMeta, value: &[u8], now_micros: i64) -> Collected {
    // Which cells stay; the row is re-encoded only when some go.
    let keeps = |cell: &RawCell<'_>, visibility: &mut Visibility<'_>| {
        let newer_family = cell.family_id >= meta.next_family_id;
        visibility.visible(cell).is_some() || newer_family
    };
    let (mut kept, mut dropped) = (0u64, 0u64);
    let mut visibility = Visibility::new(meta, now_micros);
    let mut cells = row_cursor(value).ranked(meta);
    while let Some(cell) = cells.next_cell() {
        if keeps(&cell, &mut visibility) {
            kept += 1;
        } else {
            dropped += 1;
        }
    }
    if cells.failed() {
        return Collected::Unchanged;
    }
    if kept == 0 {
        // A row its writes emptied (a merge cannot delete) goes too.
        return Collected::Empty;
    }
    if dropped == 0 {
        return Collected::Unchanged;
    }
    let mut out = Vec::with_capacity(value.len());
    let mut writer = RowWriter::new(&mut out);
    let mut visibility = Visibility::new(meta, now_micros);
    let mut cells = row_cursor(value).ranked(meta);
    while let Some(cell) = cells.next_cell() {
        if keeps(&cell, &mut visibility) {
            writer.put(
                cell.family_id,
                cells.qualifier(),
                cell.timestamp_micros,
                cell.value,
            );
        }
    }
    // A row the writer stored (canonical order) rewrites to exactly the
    // cells kept, all visible. A damaged one out of that order may not
    // (dropping cells between two runs of one column joins them, and the
    // versions of the joined run count anew): GC leaves such a row alone
    // rather than change what a read shows of it.
    let mut visibility = Visibility::new(meta, now_micros);
    let mut again = row_cursor(&out).ranked(meta);
    let mut seen = 0u64;
    while let Some(cell) = again.next_cell() {
        if !keeps(&cell, &mut visibility) {
            return Collected::Unchanged;
        }
        seen += 1;
    }
    if again.failed() || seen != kept {
        return Collected::Unchanged;
    }
    Collected::Rewritten(out, dropped)
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
            changed: Vec::new(),
        }
    }

    fn name(&self) -> &CStr {
        FACTORY_NAME
    }
}

/// Applies [`collect_stored`] to every row a compaction rewrites.
pub(crate) struct GcFilter {
    meta: Option<Arc<TableMeta>>,
    now_micros: i64,
    name: CString,
    /// The last changed value; RocksDB copies it before the next call.
    changed: Vec<u8>,
}

impl GcFilter {
    fn decide(&mut self, value: &[u8]) -> Decision {
        let Some(meta) = &self.meta else {
            return Decision::Keep;
        };
        match collect_stored(meta, value, self.now_micros) {
            Collected::Unchanged => Decision::Keep,
            Collected::Empty => Decision::Remove,
            Collected::Rewritten(value, _) => {
                self.changed = value;
                // SAFETY: RocksDB's C API copies the new value
                // (`new_value->assign`) as soon as the callback returns,
                // and `self.changed` is not touched until the next call, so
                // the slice outlives its use; `'static` is only what the
                // `Decision` type asks for.
                let slice: &'static [u8] = unsafe {
                    std::slice::from_raw_parts(self.changed.as_ptr(), self.changed.len())
                };
                Decision::Change(slice)
            }
        }
    }
}

impl CompactionFilter for GcFilter {
    fn filter(&mut self, _level: u32, _key: &[u8], value: &[u8]) -> Decision {
        self.decide(value)
    }

    fn name(&self) -> &CStr {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use affinity_model::{GcRule, TableSpec};

    const DAY: i64 = 86_400_000_000;

    fn meta() -> TableMeta {
        let spec = TableSpec::new()
            .with_family("a", GcRule::MaxAge(Duration::from_secs(86_400)))
            .with_family("b", GcRule::MaxVersions(1))
            .with_family("c", GcRule::None);
        let meta = TableMeta::from_spec("cf".into(), &spec);
        let mut families = meta.families.clone();
        families.remove("c");
        TableMeta::new(meta.cf_name.clone(), meta.next_family_id, families)
    }

    fn row(cells: &[(u32, &str, i64)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut writer = RowWriter::new(&mut out);
        for (f, q, ts) in cells {
            writer.put(*f, q.as_bytes(), *ts, b"v");
        }
        out
    }

    #[test]
    fn collects_dropped_families_ages_and_versions() {
        let meta = meta();
        let now = 10 * DAY;
        assert_eq!(
            collect_stored(&meta, &row(&[(0, "q", 10 * DAY), (1, "q", 0)]), now),
            Collected::Unchanged
        );
        assert_eq!(
            collect_stored(&meta, &row(&[(0, "q", 5 * DAY)]), now),
            Collected::Empty,
            "expired"
        );
        assert_eq!(
            collect_stored(&meta, &row(&[(2, "q", now)]), now),
            Collected::Empty,
            "dropped family"
        );
        assert_eq!(
            collect_stored(&meta, &row(&[(1, "q", 3), (1, "q", 2), (1, "r", 1)]), now),
            Collected::Rewritten(row(&[(1, "q", 3), (1, "r", 1)]), 1),
            "versions past the limit"
        );
        assert_eq!(
            collect_stored(&meta, &row(&[(3, "q", 0)]), now),
            Collected::Unchanged,
            "family newer than the snapshot"
        );
        assert_eq!(collect_stored(&meta, b"garbage", now), Collected::Unchanged);
        assert_eq!(collect_stored(&meta, &row(&[]), now), Collected::Empty);
    }
}
