//! `read_rows`: point reads by `get`, ranges by raw RocksDB iterators
//! bounded to each range, rows decoded lazily as the caller pulls them.

use std::cell::RefCell;
use std::sync::Arc;

use affinity_model::eval::{CellPrefilter, CompiledFilter};
use affinity_model::recent::Recent;
use affinity_model::{recycle_cells, CellRef, Result, Row, RowFilter, RowRef};
use rocksdb::{BoundColumnFamily, DBRawIteratorWithThreadMode, ReadOptions};

use crate::decode;
use crate::error::read_error;
use crate::merge::merged_operand_bytes;
use crate::meta::TableMeta;
use crate::ranges::KeyRange;
use crate::store::Db;

pub(crate) type RawIter<'a> = DBRawIteratorWithThreadMode<'a, Db>;

/// Open a raw iterator over one key range, positioned on its first row in
/// iteration order.
pub(crate) fn open_range<'a>(
    db: &'a Db,
    cf: &Arc<BoundColumnFamily<'a>>,
    range: &KeyRange,
    reversed: bool,
) -> RawIter<'a> {
    let mut opts = ReadOptions::default();
    if let Some(lower) = &range.lower {
        opts.set_iterate_lower_bound(lower.clone());
    }
    if let Some(upper) = &range.upper {
        opts.set_iterate_upper_bound(upper.clone());
    }
    let mut iter = db.raw_iterator_cf_opt(cf, opts);
    match (&range.lower, reversed) {
        (Some(lower), false) => iter.seek(lower),
        (None, false) => iter.seek_to_first(),
        (_, true) => iter.seek_to_last(),
    }
    iter
}

/// A row whose read merged at least this many bytes of operands is
/// stored merged afterwards (see [`Scan::visit`]): about 25 operands of
/// one packed add with a 30-byte qualifier each, two or three
/// profile-state writes of 13 adds, or one operand a flush's partial merge
/// combined from as many (counting operands alone, such a row was merged
/// again by every read until a compaction reached its base). Bytes, not
/// operands, and a low bound: a busy row is merged by few reads before
/// one stores it merged.
pub(crate) const REPAIR_BYTES: u64 = 1024;

/// A thread's buffers for decoding rows as views ([`Scan::visit`]), kept
/// between reads: a profile read's day row (hundreds of cells, most with a
/// rebuilt qualifier) would otherwise grow them from nothing every time.
#[derive(Default)]
pub(crate) struct Buffers {
    cells: Vec<CellRef<'static>>,
    arena: Vec<u8>,
}

thread_local! {
    static SPARE_BUFFERS: RefCell<Buffers> = RefCell::default();
}

impl Buffers {
    /// Larger buffers (from a scan of huge rows) are not kept: every
    /// thread that reads keeps its own (a heavy user's day row needs
    /// about 30 KiB).
    const KEPT_BYTES: usize = 256 << 10;

    /// This thread's spare buffers (empty ones when a read on this thread
    /// holds them: a visit inside a visit).
    fn take() -> Buffers {
        SPARE_BUFFERS.with(|spare| std::mem::take(&mut *spare.borrow_mut()))
    }

    /// Give the buffers back for the thread's next read.
    fn keep(mut self) {
        if self.arena.capacity() + self.cells.capacity() * size_of::<CellRef<'static>>()
            > Self::KEPT_BYTES
        {
            return;
        }
        self.cells.clear();
        self.arena.clear();
        SPARE_BUFFERS.with(|spare| *spare.borrow_mut() = self);
    }
}

/// A read's filter compiled, with what a scan derives from it.
pub(crate) struct Compiled {
    filter: CompiledFilter,
    prefilter: Option<CellPrefilter>,
    /// True when the prefilter alone gives the filter's output.
    filter_is_redundant: bool,
}

thread_local! {
    /// The filters this thread compiled last, the latest used first: a
    /// profile read's two or three reads repeat the same few filters,
    /// which would otherwise be compiled (and their prefilters derived)
    /// every time.
    static COMPILED: RefCell<Recent<RowFilter, Arc<Compiled>>> =
        const { RefCell::new(Recent::new(Compiled::KEPT)) };
    /// The filter that passes every cell, for reads without one.
    static PASS_ALL: Arc<Compiled> = Arc::new(Compiled::new(CompiledFilter::pass_all()));
}

impl Compiled {
    /// How many filters a thread keeps compiled.
    const KEPT: usize = 8;

    /// `filter` compiled (`None` passes every cell); an invalid filter is
    /// the error compiling it gives, every time.
    pub fn of(filter: Option<&RowFilter>) -> Result<Arc<Compiled>> {
        let Some(filter) = filter else {
            return Ok(PASS_ALL.with(Arc::clone));
        };
        COMPILED.with_borrow_mut(|kept| {
            kept.get_or_try_make(filter, |f| {
                Ok(Arc::new(Compiled::new(CompiledFilter::compile(f)?)))
            })
        })
    }

    fn new(filter: CompiledFilter) -> Compiled {
        let prefilter = filter.cell_prefilter();
        let filter_is_redundant =
            filter.is_pass_all() || prefilter.as_ref().is_some_and(CellPrefilter::is_exact);
        Compiled {
            filter,
            prefilter,
            filter_is_redundant,
        }
    }
}

/// How a [`Scan`] reads.
pub(crate) struct ScanOptions {
    pub reversed: bool,
    pub filter: Arc<Compiled>,
    /// Stop after this many rows (`None`: no limit).
    pub rows_limit: Option<u64>,
    /// The clock GC rules are applied at.
    pub now_micros: i64,
}

/// A row a read found as a chain of merge operands worth storing merged
/// (see [`Scan::visit`]).
pub(crate) struct Repair {
    pub key: Vec<u8>,
    /// The value the read merged.
    pub merged: Vec<u8>,
    /// The database's sequence number before the read's iterator (or
    /// point read) was opened: every write up to it is in `merged`.
    pub seen: u64,
}

/// A stream of rows over a list of key ranges (already in iteration order).
pub(crate) struct Scan<'a> {
    db: &'a Db,
    cf: Arc<BoundColumnFamily<'a>>,
    meta: Arc<TableMeta>,
    ranges: std::vec::IntoIter<KeyRange>,
    /// The current range's iterator.
    iter: Option<RawIter<'a>>,
    reversed: bool,
    filter: Arc<Compiled>,
    remaining: Option<u64>,
    now_micros: i64,
    done: bool,
    /// The prefilter's verdicts on the columns met so far.
    verdicts: decode::ColumnVerdicts,
}

impl<'a> Scan<'a> {
    /// `ranges` ascending; they are walked backwards when `how.reversed`.
    pub fn new(
        db: &'a Db,
        cf: Arc<BoundColumnFamily<'a>>,
        meta: Arc<TableMeta>,
        mut ranges: Vec<KeyRange>,
        how: ScanOptions,
    ) -> Scan<'a> {
        if how.reversed {
            ranges.reverse();
        }
        Scan {
            db,
            cf,
            meta,
            ranges: ranges.into_iter(),
            iter: None,
            reversed: how.reversed,
            filter: how.filter,
            remaining: how.rows_limit,
            now_micros: how.now_micros,
            done: false,
            verdicts: decode::ColumnVerdicts::default(),
        }
    }

    /// The next row with at least one visible cell the prefilter lets
    /// through, before the filter.
    fn next_visible_row(&mut self) -> Result<Option<Row>> {
        loop {
            let iter = match &mut self.iter {
                Some(iter) => iter,
                None => match self.ranges.next() {
                    Some(range) => {
                        if let (Some(key), true) = (&range.lower, range.single_row) {
                            let stored = self
                                .db
                                .get_pinned_cf(&self.cf, key)
                                .map_err(|e| read_error(e, Some(key)))?;
                            if let Some(value) = stored {
                                let row = decode::read_row(
                                    &self.meta,
                                    key,
                                    &value,
                                    self.now_micros,
                                    self.filter.prefilter.as_ref(),
                                    &mut self.verdicts,
                                )?;
                                if row.is_some() {
                                    return Ok(row);
                                }
                            }
                            continue;
                        }
                        self.iter = Some(open_range(self.db, &self.cf, &range, self.reversed));
                        continue;
                    }
                    None => return Ok(None),
                },
            };
            let Some((key, value)) = iter.item() else {
                iter.status().map_err(|e| read_error(e, None))?;
                self.iter = None;
                continue;
            };
            let row = decode::read_row(
                &self.meta,
                key,
                value,
                self.now_micros,
                self.filter.prefilter.as_ref(),
                &mut self.verdicts,
            )?;
            if self.reversed {
                iter.prev();
            } else {
                iter.next();
            }
            if row.is_some() {
                return Ok(row);
            }
        }
    }
}

impl Scan<'_> {
    /// The column family of the table this scan reads.
    pub fn cf_name(&self) -> &str {
        &self.meta.cf_name
    }

    /// Show every row of the scan to `visit` (see
    /// `Table::visit_rows`). When the prefilter alone gives the filter's
    /// output, rows are shown as views of RocksDB's buffers: no `Row`, no
    /// copy of the value, no `String` per cell. Otherwise each row is
    /// built and filtered as `next` does.
    ///
    /// Returns the rows whose read had to merge at least
    /// [`REPAIR_BYTES`] of blind-write operands, with the values they
    /// merged to, for the table to store them merged (so the next read of
    /// a busy row does not merge again).
    pub fn visit(self, visit: &mut dyn FnMut(RowRef<'_>) -> Result<bool>) -> Result<Vec<Repair>> {
        if !self.filter.filter_is_redundant {
            return self.visit_built(visit).map(|()| Vec::new());
        }
        let mut buffers = Buffers::take();
        let visited = self.visit_refs(visit, &mut buffers);
        buffers.keep();
        visited
    }

    /// [`Scan::visit`] over rows shown as views, decoded into `buffers`.
    fn visit_refs(
        mut self,
        visit: &mut dyn FnMut(RowRef<'_>) -> Result<bool>,
        buffers: &mut Buffers,
    ) -> Result<Vec<Repair>> {
        let meta = Arc::clone(&self.meta);
        let Buffers {
            cells: buffer,
            arena: arena_slot,
        } = buffers;
        let mut verdicts = std::mem::take(&mut self.verdicts);
        let mut repairs: Vec<Repair> = Vec::new();
        // One row: `Ok(false)` when the scan is to stop.
        let mut show = |key: &[u8], value: &[u8], remaining: &mut Option<u64>| -> Result<bool> {
            let mut cells = recycle_cells(std::mem::take(buffer));
            let mut arena = std::mem::take(arena_slot);
            decode::read_refs(
                &meta,
                key,
                value,
                self.now_micros,
                self.filter.prefilter.as_ref(),
                &mut verdicts,
                &mut arena,
                &mut cells,
            )?;
            let go_on = if cells.is_empty() {
                true
            } else {
                if let Some(n) = remaining.as_mut() {
                    *n -= 1;
                }
                visit(RowRef { key, cells: &cells })? && *remaining != Some(0)
            };
            *buffer = recycle_cells(cells);
            *arena_slot = arena;
            Ok(go_on)
        };
        let mut remaining = self.remaining;
        if remaining == Some(0) {
            return Ok(repairs);
        }
        // Operands merged by this thread since `*mark`, moved to now.
        let merged_since = |mark: &mut u64| {
            let now = merged_operand_bytes();
            let n = now - *mark;
            *mark = now;
            n
        };
        let mut mark = merged_operand_bytes();
        for range in self.ranges.by_ref() {
            if let (Some(key), true) = (&range.lower, range.single_row) {
                merged_since(&mut mark);
                let seen = self.db.latest_sequence_number();
                let stored = self
                    .db
                    .get_pinned_cf(&self.cf, key)
                    .map_err(|e| read_error(e, Some(key)))?;
                if let Some(value) = stored {
                    if merged_since(&mut mark) >= REPAIR_BYTES {
                        repairs.push(Repair {
                            key: key.clone(),
                            merged: value.to_vec(),
                            seen,
                        });
                    }
                    if !show(key, &value, &mut remaining)? {
                        return Ok(repairs);
                    }
                }
                continue;
            }
            merged_since(&mut mark);
            let seen = self.db.latest_sequence_number();
            let mut iter = open_range(self.db, &self.cf, &range, self.reversed);
            while let Some((key, value)) = iter.item() {
                if merged_since(&mut mark) >= REPAIR_BYTES {
                    repairs.push(Repair {
                        key: key.to_vec(),
                        merged: value.to_vec(),
                        seen,
                    });
                }
                if !show(key, value, &mut remaining)? {
                    return Ok(repairs);
                }
                if self.reversed {
                    iter.prev();
                } else {
                    iter.next();
                }
            }
            iter.status().map_err(|e| read_error(e, None))?;
        }
        Ok(repairs)
    }

    /// [`Scan::visit`] over built and filtered rows.
    fn visit_built(self, visit: &mut dyn FnMut(RowRef<'_>) -> Result<bool>) -> Result<()> {
        affinity_model::store::visit_each(self, visit)
    }
}

impl Iterator for Scan<'_> {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        if self.done || self.remaining == Some(0) {
            return None;
        }
        loop {
            let row = match self.next_visible_row() {
                Ok(Some(row)) => row,
                Ok(None) => {
                    self.done = true;
                    return None;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            };
            let row = if self.filter.filter_is_redundant {
                row
            } else {
                match self.filter.filter.apply(row) {
                    Some(row) => row,
                    None => continue,
                }
            };
            if let Some(remaining) = &mut self.remaining {
                *remaining -= 1;
            }
            return Some(Ok(row));
        }
    }
}

#[cfg(test)]
mod tests {
    use affinity_model::RowFilter;
    use std::sync::Arc;

    use super::Compiled;

    #[test]
    fn a_thread_compiles_a_filter_it_read_with_lately_once() {
        let family = |name: &str| Some(RowFilter::exact_family(name));
        let first = Compiled::of(family("c").as_ref()).expect("compiles");
        let again = Compiled::of(family("c").as_ref()).expect("compiles");
        assert!(Arc::ptr_eq(&first, &again));
        let other = Compiled::of(family("d").as_ref()).expect("compiles");
        assert!(!Arc::ptr_eq(&first, &other));
        // More filters than a thread keeps: the first is compiled anew.
        for i in 0..Compiled::KEPT {
            Compiled::of(family(&format!("f{i}")).as_ref()).expect("compiles");
        }
        let later = Compiled::of(family("c").as_ref()).expect("compiles");
        assert!(!Arc::ptr_eq(&first, &later));
        assert!(Compiled::of(None).expect("passes all").filter_is_redundant);
        // An invalid filter is an error every time, never kept.
        let bad = Some(RowFilter::FamilyNameRegex("(".to_string()));
        for _ in 0..2 {
            assert!(Compiled::of(bad.as_ref()).is_err());
        }
    }
}
