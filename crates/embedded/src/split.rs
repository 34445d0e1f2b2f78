//! `sample_row_keys`: row keys that cut a table into chunks of about equal
//! size on disk.
//!
//! RocksDB estimates the bytes of any key range from its SST index blocks
//! (`GetApproximateSizes`, block-granular). The table's key span is bisected
//! (midpoint of the two keys read as big-endian fractions, moved to the
//! start of the next row) until every piece is under a quarter of the
//! target, then adjacent pieces are merged greedily into chunks of about the
//! target. Memtables are not counted by the estimate, so a table whose
//! memtable holds a noticeable share of its data is flushed first.

use std::sync::Arc;

use affinity_model::{Bytes, Result, SampleRowKey};
use rocksdb::{BoundColumnFamily, ReadOptions};

use crate::error::storage;
use crate::meta::TableMeta;
use crate::row::successor;
use crate::store::{Db, Inner};

/// Deepest bisection (guards against pathological key spans).
const MAX_DEPTH: usize = 64;
/// Default number of chunks aimed at.
const DEFAULT_CHUNKS: u64 = 64;
const MIN_TARGET: u64 = 256 << 10;
const MAX_TARGET: u64 = 256 << 20;

pub(crate) fn sample_row_keys(
    inner: &Inner,
    table: &str,
    meta: &TableMeta,
) -> Result<Vec<SampleRowKey>> {
    let db = &inner.db;
    let cf = inner.cf(table, meta)?;
    let memtables = int_property(db, &cf, "rocksdb.cur-size-all-mem-tables")?;
    let files = int_property(db, &cf, "rocksdb.live-sst-files-size")?;
    if memtables > 0 && memtables.saturating_mul(8) > files {
        db.flush_cf(&cf).map_err(storage)?;
    }
    let end = |offset: u64| SampleRowKey {
        row_key: Bytes::new(),
        offset_bytes: offset as i64,
    };
    let Some((lower, upper)) = key_span(db, &cf)? else {
        return Ok(vec![end(0)]);
    };
    let total = approximate_size(db, &cf, &lower, &upper);
    let target = inner
        .options
        .split_target_bytes
        .unwrap_or((total / DEFAULT_CHUNKS).clamp(MIN_TARGET, MAX_TARGET))
        .max(1);
    let mut pieces = Vec::new();
    let splitter = Splitter {
        db,
        cf: &cf,
        leaf: (target / 4).max(1),
    };
    splitter.bisect(lower, upper, total, 0, &mut pieces)?;

    let mut samples = Vec::new();
    let (mut offset, mut chunk) = (0u64, 0u64);
    let last = pieces.len().saturating_sub(1);
    for (i, (boundary, size)) in pieces.into_iter().enumerate() {
        offset += size;
        chunk += size;
        if chunk >= target && i < last {
            samples.push(SampleRowKey {
                row_key: Bytes::from(boundary),
                offset_bytes: offset as i64,
            });
            chunk = 0;
        }
    }
    samples.push(end(offset));
    Ok(samples)
}

pub(crate) fn int_property(db: &Db, cf: &Arc<BoundColumnFamily<'_>>, name: &str) -> Result<u64> {
    Ok(db
        .property_int_value_cf(cf, name)
        .map_err(storage)?
        .unwrap_or(0))
}

fn approximate_size(db: &Db, cf: &Arc<BoundColumnFamily<'_>>, lower: &[u8], upper: &[u8]) -> u64 {
    db.get_approximate_sizes_cf(cf, &[rocksdb::Range::new(lower, upper)])
        .first()
        .copied()
        .unwrap_or(0)
}

/// The first row key and the end (exclusive) of the last row.
fn key_span(db: &Db, cf: &Arc<BoundColumnFamily<'_>>) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
    let mut iter = db.raw_iterator_cf_opt(cf, ReadOptions::default());
    iter.seek_to_first();
    let Some(first) = iter.key().map(<[u8]>::to_vec) else {
        iter.status().map_err(storage)?;
        return Ok(None);
    };
    iter.seek_to_last();
    let Some(last) = iter.key().map(successor) else {
        iter.status().map_err(storage)?;
        return Ok(None);
    };
    Ok(Some((first, last)))
}

struct Splitter<'a, 'db> {
    db: &'db Db,
    cf: &'a Arc<BoundColumnFamily<'db>>,
    leaf: u64,
}

impl Splitter<'_, '_> {
    /// Split `[lower, upper)` (row boundaries, `size` bytes) into pieces of
    /// at most `leaf` bytes where rows allow; pushes `(piece end, size)`.
    fn bisect(
        &self,
        lower: Vec<u8>,
        upper: Vec<u8>,
        size: u64,
        depth: usize,
        out: &mut Vec<(Vec<u8>, u64)>,
    ) -> Result<()> {
        if size <= self.leaf || depth >= MAX_DEPTH {
            out.push((upper, size));
            return Ok(());
        }
        let Some(mid) = self.row_start_after(&lower, &upper)? else {
            // One row: cannot split.
            out.push((upper, size));
            return Ok(());
        };
        let sizes = self.db.get_approximate_sizes_cf(
            self.cf,
            &[
                rocksdb::Range::new(&lower, &mid),
                rocksdb::Range::new(&mid, &upper),
            ],
        );
        let (left, right) = (
            sizes.first().copied().unwrap_or(0),
            sizes.get(1).copied().unwrap_or(0),
        );
        self.bisect(lower, mid.clone(), left, depth + 1, out)?;
        self.bisect(mid, upper, right, depth + 1, out)
    }

    /// A row start strictly inside `(lower, upper)`, near the midpoint of
    /// the first and last rows (so sparse key alphabets, like decimal
    /// digits, still split near the middle).
    fn row_start_after(&self, lower: &[u8], upper: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut opts = ReadOptions::default();
        opts.set_iterate_lower_bound(lower.to_vec());
        opts.set_iterate_upper_bound(upper.to_vec());
        let mut iter = self.db.raw_iterator_cf_opt(self.cf, opts);
        iter.seek_to_last();
        let Some(last) = iter.key().map(<[u8]>::to_vec) else {
            return iter.status().map_err(storage).map(|()| None);
        };
        if last.as_slice() <= lower {
            return Ok(None);
        }
        iter.seek(midpoint(lower, &last));
        let Some(row) = iter.key().map(<[u8]>::to_vec) else {
            return iter.status().map_err(storage).map(|()| None);
        };
        if row.as_slice() > lower {
            return Ok(Some(row));
        }
        // The midpoint falls on the first row: take the next row instead.
        iter.seek(successor(&row));
        match iter.key() {
            Some(key) => Ok(Some(key.to_vec())),
            None => iter.status().map_err(storage).map(|()| None),
        }
    }
}

/// `floor((a + b) / 2)` with `a` and `b` read as big-endian fractions (the
/// shorter padded with zeros); lies in `[a, b)` when `a < b`.
fn midpoint(a: &[u8], b: &[u8]) -> Vec<u8> {
    let len = a.len().max(b.len()) + 1;
    let byte = |s: &[u8], i: usize| u16::from(s.get(i).copied().unwrap_or(0));
    let mut sum = vec![0u16; len];
    let mut carry = 0u16;
    for i in (0..len).rev() {
        let v = byte(a, i) + byte(b, i) + carry;
        sum[i] = v & 0xff;
        carry = v >> 8;
    }
    let mut out = Vec::with_capacity(len);
    let mut remainder = carry;
    for v in sum {
        let v = (remainder << 8) | v;
        out.push((v / 2) as u8);
        remainder = v % 2;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::midpoint;

    #[test]
    fn midpoint_lies_between() {
        let cases: [(&[u8], &[u8]); 4] = [
            (b"a", b"c"),
            (b"a", b"b"),
            (b"ab\xff", b"ac"),
            (b"\xff\xfe", b"\xff\xff"),
        ];
        for (a, b) in cases {
            let m = midpoint(a, b);
            assert!(a <= m.as_slice() && m.as_slice() < b, "{a:?} {m:?} {b:?}");
        }
        assert_eq!(midpoint(b"a", b"c"), b"b\x00");
    }
}
