//! `read_rows`: raw RocksDB iterators bounded to each requested key range,
//! rows decoded lazily as the caller pulls them.

use std::sync::Arc;

use affinity_model::eval::{CellPrefilter, CompiledFilter};
use affinity_model::gc::deletes;
use affinity_model::{Bytes, Cell, Result, Row};
use rocksdb::{BoundColumnFamily, DBRawIteratorWithThreadMode, ReadOptions};

use crate::decode::{corrupt_key, Pushed, RowBuilder};
use crate::error::storage;
use crate::keys::{
    column_prefix, component_len, component_successor, decode_after_row, row_prefix,
};
use crate::meta::TableMeta;
use crate::ranges::KeyRange;
use crate::store::Db;

pub(crate) type RawIter<'a> = DBRawIteratorWithThreadMode<'a, Db>;

/// Open a raw iterator over one key range, positioned on its first key in
/// iteration order. A single-row range is always read forwards (the order
/// of cells within a row does not depend on the direction of the read);
/// the returned flag says whether the iterator walks backwards.
pub(crate) fn open_range<'a>(
    db: &'a Db,
    cf: &Arc<BoundColumnFamily<'a>>,
    range: &KeyRange,
    reversed: bool,
) -> (RawIter<'a>, bool) {
    let mut opts = ReadOptions::default();
    if let Some(lower) = &range.lower {
        opts.set_iterate_lower_bound(lower.clone());
    }
    if let Some(upper) = &range.upper {
        opts.set_iterate_upper_bound(upper.clone());
    }
    if range.single_row {
        // Every key of the range shares the row prefix: let RocksDB skip
        // files whose prefix bloom filter rules the row out.
        opts.set_prefix_same_as_start(true);
    } else {
        opts.set_total_order_seek(true);
    }
    let backwards = reversed && !range.single_row;
    let mut iter = db.raw_iterator_cf_opt(cf, opts);
    match (&range.lower, backwards) {
        (Some(lower), false) => iter.seek(lower),
        (None, false) => iter.seek_to_first(),
        (_, true) => iter.seek_to_last(),
    }
    (iter, backwards)
}

/// An iterator for point reads: prefix mode (it stops at the end of the
/// row it was sought to, and the prefix bloom filter skips files without
/// the row), reusable by seeking to another row.
pub(crate) fn point_iter<'a>(db: &'a Db, cf: &Arc<BoundColumnFamily<'a>>) -> RawIter<'a> {
    let mut opts = ReadOptions::default();
    opts.set_prefix_same_as_start(true);
    db.raw_iterator_cf_opt(cf, opts)
}

/// The latest visible cell of each column in `columns` of one row, one
/// seek each on `iter` (from [`point_iter`]): the read half of a
/// read-modify-write, which needs nothing else of the row. The newest
/// cell of a column is visible unless its age deletes it, and then every
/// older one is deleted too, so looking at the newest is enough.
pub(crate) fn read_latest(
    iter: &mut RawIter<'_>,
    meta: &TableMeta,
    row_key: &[u8],
    columns: &[(&str, &Bytes)],
    now_micros: i64,
) -> Result<Vec<Cell>> {
    let row = row_prefix(row_key);
    let mut out = Vec::with_capacity(columns.len());
    for &(family, qualifier) in columns {
        let (Some(id), Some(view)) = (
            meta.family_id(family),
            meta.family_id(family).and_then(|id| meta.family(id)),
        ) else {
            continue;
        };
        let prefix = column_prefix(&row, id, qualifier);
        iter.seek(&prefix);
        let Some((key, value)) = iter.item() else {
            iter.status().map_err(storage)?;
            continue;
        };
        if !key.starts_with(&prefix) {
            continue;
        }
        let cell = decode_after_row(key, row.len()).ok_or_else(|| corrupt_key(key))?;
        if deletes(&view.gc_rule, 0, cell.timestamp_micros, now_micros) {
            continue;
        }
        out.push(Cell::new(
            view.name.clone(),
            qualifier.clone(),
            cell.timestamp_micros,
            Bytes::copy_from_slice(value),
        ));
    }
    Ok(out)
}

/// Hidden versions of one column stepped over before a scan seeks past
/// the rest of them (a step costs less than a seek; many steps do not).
const SEEK_AFTER_HIDDEN: usize = 4;

/// How a [`Scan`] reads.
pub(crate) struct ScanOptions {
    pub reversed: bool,
    pub filter: CompiledFilter,
    /// Stop after this many rows (`None`: no limit).
    pub rows_limit: Option<u64>,
    /// The clock GC rules are applied at.
    pub now_micros: i64,
}

/// A stream of rows over a list of key ranges (already in iteration order).
pub(crate) struct Scan<'a> {
    db: &'a Db,
    cf: Arc<BoundColumnFamily<'a>>,
    meta: Arc<TableMeta>,
    ranges: std::vec::IntoIter<KeyRange>,
    /// The current range's iterator and whether it walks backwards.
    iter: Option<(RawIter<'a>, bool)>,
    /// True when `iter` is the point-read iterator, kept for the next
    /// single-row range instead of being dropped.
    iter_is_point: bool,
    /// The prefix-mode iterator point reads share: creating a RocksDB
    /// iterator costs more than a seek, and a read of many keys (a batch's
    /// read-modify-writes, a key set) would otherwise create one per key.
    point: Option<RawIter<'a>>,
    reversed: bool,
    filter: CompiledFilter,
    prefilter: Option<CellPrefilter>,
    remaining: Option<u64>,
    now_micros: i64,
    builder: RowBuilder,
    done: bool,
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
            iter_is_point: false,
            point: None,
            reversed: how.reversed,
            prefilter: how.filter.cell_prefilter(),
            filter: how.filter,
            remaining: how.rows_limit,
            now_micros: how.now_micros,
            builder: RowBuilder::new(),
            done: false,
        }
    }

    /// The next row with at least one visible cell, before the filter.
    fn next_visible_row(&mut self) -> Result<Option<Row>> {
        loop {
            let (iter, backwards) = match &mut self.iter {
                Some((iter, backwards)) => (iter, *backwards),
                None => match self.ranges.next() {
                    Some(range) => {
                        match (&range.lower, range.single_row) {
                            (Some(lower), true) => {
                                let mut iter = match self.point.take() {
                                    Some(iter) => iter,
                                    None => point_iter(self.db, &self.cf),
                                };
                                iter.seek(lower);
                                self.iter = Some((iter, false));
                                self.iter_is_point = true;
                            }
                            _ => {
                                self.iter =
                                    Some(open_range(self.db, &self.cf, &range, self.reversed));
                                self.iter_is_point = false;
                            }
                        }
                        continue;
                    }
                    None => return Ok(None),
                },
            };
            let Some(first) = iter.key() else {
                iter.status().map_err(storage)?;
                if let Some((iter, _)) = self.iter.take() {
                    if self.iter_is_point {
                        self.point = Some(iter);
                    }
                }
                continue;
            };
            let prefix_len = component_len(first).ok_or_else(|| corrupt_key(first))?;
            self.builder.start(&first[..prefix_len]);
            while let Some((key, value)) = iter.item() {
                if !self.builder.owns(key) {
                    break;
                }
                match self.builder.push(&self.meta, key, value, !backwards)? {
                    // Many hidden versions of a column (counters bumped
                    // by every read-modify-write, until compaction drops
                    // them): jump past the column instead of stepping.
                    Pushed::Hidden { run } if run >= SEEK_AFTER_HIDDEN => {
                        iter.seek(component_successor(self.builder.column()));
                    }
                    _ if backwards => iter.prev(),
                    _ => iter.next(),
                }
            }
            let pre = self.prefilter.as_ref();
            if let Some(row) = self
                .builder
                .finish(&self.meta, backwards, self.now_micros, pre)
            {
                return Ok(Some(row));
            }
        }
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
            let row = if self.filter.is_pass_all() {
                row
            } else {
                match self.filter.apply(row) {
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

/// Read one row with GC applied and no filter (the read half of the
/// read-then-write operations).
pub(crate) fn read_row<'a>(
    db: &'a Db,
    cf: &Arc<BoundColumnFamily<'a>>,
    meta: &Arc<TableMeta>,
    row_key: &[u8],
    now_micros: i64,
) -> Result<Option<Row>> {
    let range = KeyRange::row(row_key);
    let how = ScanOptions {
        reversed: false,
        filter: CompiledFilter::pass_all(),
        rows_limit: None,
        now_micros,
    };
    let mut scan = Scan::new(db, cf.clone(), meta.clone(), vec![range], how);
    scan.next().transpose()
}
