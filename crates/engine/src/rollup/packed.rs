//! A rollup's packed totals (see `docs/design/profiles.md`).
//!
//! **By facet** (`f`, what folds write): one cell per facet, the
//! qualifier the facet's name, listing every folded value of the facet
//! once with its counts per counter prefix `type,name,facet` (CSV, as in
//! the `t` family):
//!
//! ```text
//! value = k varint | ( len varint | prefix bytes ){k}
//!         ( len varint | value bytes (UTF-8, unquoted) | ( count zigzag varint ){k} )*
//! ```
//!
//! values strictly increasing (bytewise), each with a non-zero count in
//! at least one of the `k` prefixes. A read weighs each value's counts
//! with the strategy's weights in one pass: a heavy user's rollup is one
//! cell and one sorted run per facet.
//!
//! **By prefix** (`r`, written before; still read until the next fold
//! rewrites the rollup): one cell per counter prefix, the qualifier the
//! prefix, listing its counters:
//!
//! ```text
//! value = ( len varint | value bytes (UTF-8, unquoted) | count zigzag varint )*
//! ```
//!
//! values strictly increasing (bytewise), counts non-zero.

use crate::error::{Error, Result};

/// Append the by-prefix form of `entries` (sorted by value, distinct) to
/// `out`; zero counts are left out. Folds no longer write it: tests make
/// the rollups of older folds with it.
#[cfg(test)]
pub(crate) fn pack<'a>(out: &mut Vec<u8>, entries: impl IntoIterator<Item = (&'a [u8], i64)>) {
    for (value, count) in entries {
        if count == 0 {
            continue;
        }
        put_varint(out, value.len() as u64);
        out.extend_from_slice(value);
        put_varint(out, zigzag(count));
    }
}

/// The counters of a packed cell, in order; an error names what is wrong
/// with a damaged one (`what` is the cell's prefix, for the message). The
/// order is not checked here: the profile read checks it as it merges
/// (`Accumulator::add_sorted_at`), and a fold does not need it.
pub(crate) fn unpack<'v>(value: &'v [u8], what: &'v [u8]) -> Unpack<'v> {
    Unpack(Rows {
        rest: value,
        what,
        facet: false,
    })
}

pub(crate) struct Unpack<'v>(Rows<'v>);

impl<'v> Iterator for Unpack<'v> {
    type Item = Result<(&'v [u8], i64)>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let rows = &mut self.0;
        let value = match rows.value() {
            Ok(Some(value)) => value,
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        };
        Some(match rows.count() {
            Ok(0) => Err(rows.corrupt("a zero count")),
            count => count.map(|n| (value, n)),
        })
    }
}

/// Writes the by-facet cell of one facet: its counter prefixes first
/// ([`FacetPacker::new`]), then its values in order ([`FacetPacker::row`]).
pub(crate) struct FacetPacker<'o> {
    out: &'o mut Vec<u8>,
    k: usize,
}

impl<'o> FacetPacker<'o> {
    /// Start the cell of a facet with counter prefixes `prefixes` in
    /// `out`.
    pub(crate) fn new(out: &'o mut Vec<u8>, prefixes: &[&[u8]]) -> FacetPacker<'o> {
        put_varint(out, prefixes.len() as u64);
        for prefix in prefixes {
            put_varint(out, prefix.len() as u64);
            out.extend_from_slice(prefix);
        }
        FacetPacker {
            out,
            k: prefixes.len(),
        }
    }

    /// Add `value` (after the values added before, bytewise) with one
    /// count per prefix; left out when they are all zero.
    pub(crate) fn row(&mut self, value: &[u8], counts: &[i64]) {
        debug_assert_eq!(counts.len(), self.k);
        if counts.iter().all(|n| *n == 0) {
            return;
        }
        put_varint(self.out, value.len() as u64);
        self.out.extend_from_slice(value);
        for n in counts {
            put_varint(self.out, zigzag(*n));
        }
    }
}

/// A by-facet cell read: its counter prefixes, and its rows still packed.
#[derive(Debug)]
pub(crate) struct FacetCell<'v> {
    prefixes: Vec<&'v [u8]>,
    rows: &'v [u8],
    what: &'v [u8],
}

/// Read the head of a by-facet cell (`what`, its facet, names it in
/// errors); its rows are decoded as they are walked.
pub(crate) fn unpack_facet<'v>(value: &'v [u8], what: &'v [u8]) -> Result<FacetCell<'v>> {
    // A prefix is laid out as a row's value is: length, then bytes.
    let mut head = Rows {
        rest: value,
        what,
        facet: true,
    };
    let Some(k) = take_varint(&mut head.rest) else {
        return Err(head.corrupt("truncated prefix count"));
    };
    // Each prefix takes at least its length byte.
    if k == 0 || k > head.rest.len() as u64 {
        return Err(head.corrupt("a bad prefix count"));
    }
    let mut prefixes = Vec::with_capacity(k as usize);
    for _ in 0..k {
        match head.value() {
            Ok(Some(prefix)) => prefixes.push(prefix),
            _ => return Err(head.corrupt("truncated prefix")),
        }
    }
    Ok(FacetCell {
        prefixes,
        rows: head.rest,
        what,
    })
}

impl<'v> FacetCell<'v> {
    /// The counter prefixes, in the order of each row's counts.
    pub(crate) fn prefixes(&self) -> &[&'v [u8]] {
        &self.prefixes
    }

    /// Each value with `sum(weights[j] * count[j])` over the prefixes
    /// (`weights` one per prefix), in order; values whose sum is 0 are
    /// passed over (a profile counts nothing for them).
    pub(crate) fn weighted<'w>(&self, weights: &'w [i64]) -> Weighted<'v, 'w> {
        debug_assert_eq!(weights.len(), self.prefixes.len());
        Weighted {
            rows: self.rows(),
            weights,
        }
    }

    /// Call `each(value, j, count)` for every non-zero count, in order of
    /// value then prefix.
    pub(crate) fn for_each(&self, mut each: impl FnMut(&'v [u8], usize, i64)) -> Result<()> {
        let mut rows = self.rows();
        while let Some(value) = rows.value()? {
            rows.counts(self.prefixes.len(), |j, n| {
                if n != 0 {
                    each(value, j, n);
                }
            })?;
        }
        Ok(())
    }

    fn rows(&self) -> Rows<'v> {
        Rows {
            rest: self.rows,
            what: self.what,
            facet: true,
        }
    }
}

/// The rows of a packed cell, decoded field by field.
struct Rows<'v> {
    rest: &'v [u8],
    /// The cell's qualifier, for messages: a facet, or a counter prefix.
    what: &'v [u8],
    facet: bool,
}

impl<'v> Rows<'v> {
    fn corrupt(&mut self, why: &str) -> Error {
        self.rest = &[];
        let what = String::from_utf8_lossy(self.what);
        let what = if self.facet {
            format!("facet {what} ({why})")
        } else {
            format!("{what} ({why})")
        };
        Error::corrupt("rollup totals", what)
    }

    /// The next row's value, `None` at the end.
    #[inline]
    fn value(&mut self) -> Result<Option<&'v [u8]>> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        let Some(len) = take_varint(&mut self.rest) else {
            return Err(self.corrupt("truncated length"));
        };
        let Some(value) = usize::try_from(len).ok().and_then(|l| self.rest.get(..l)) else {
            return Err(self.corrupt("truncated value"));
        };
        self.rest = &self.rest[value.len()..];
        Ok(Some(value))
    }

    /// The row's next count.
    #[inline]
    fn count(&mut self) -> Result<i64> {
        match take_varint(&mut self.rest) {
            Some(z) => Ok(unzigzag(z)),
            None => Err(self.corrupt("truncated count")),
        }
    }

    /// A by-facet row's `k` counts, each given to `each(j, count)`; an
    /// error when they are all zero (a fold never writes such a row).
    #[inline]
    fn counts(&mut self, k: usize, mut each: impl FnMut(usize, i64)) -> Result<()> {
        let mut any = false;
        for j in 0..k {
            let n = self.count()?;
            any |= n != 0;
            each(j, n);
        }
        if any {
            Ok(())
        } else {
            Err(self.corrupt("a value without counts"))
        }
    }
}

/// [`FacetCell::weighted`].
pub(crate) struct Weighted<'v, 'w> {
    rows: Rows<'v>,
    weights: &'w [i64],
}

impl<'v> Iterator for Weighted<'v, '_> {
    type Item = Result<(&'v [u8], i64)>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let value = match self.rows.value() {
                Ok(Some(value)) => value,
                Ok(None) => return None,
                Err(e) => return Some(Err(e)),
            };
            let (weights, mut sum) = (self.weights, 0i64);
            let counted = self.rows.counts(weights.len(), |j, n| {
                // Wrapping: a damaged cell's counts must not panic.
                sum = sum.wrapping_add(weights[j].wrapping_mul(n));
            });
            if let Err(e) = counted {
                return Some(Err(e));
            }
            if sum != 0 {
                return Some(Ok((value, sum)));
            }
        }
    }
}

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

#[inline]
fn take_varint(rest: &mut &[u8]) -> Option<u64> {
    let mut n = 0u64;
    for (i, b) in rest.iter().enumerate().take(10) {
        n |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            *rest = &rest[i + 1..];
            return Some(n);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn unpack_returns_what_pack_wrote(
            entries in proptest::collection::btree_map(
                proptest::collection::vec(any::<u8>(), 0..20),
                any::<i64>().prop_filter("non-zero", |n| *n != 0),
                0..40,
            )
        ) {
            let mut packed = Vec::new();
            pack(&mut packed, entries.iter().map(|(v, n)| (v.as_slice(), *n)));
            let back: Vec<(Vec<u8>, i64)> = unpack(&packed, b"p")
                .map(|r| r.map(|(v, n)| (v.to_vec(), n)))
                .collect::<Result<_>>()
                .unwrap();
            let expected: Vec<(Vec<u8>, i64)> = entries.into_iter().collect();
            prop_assert_eq!(back, expected);
        }

        #[test]
        fn damaged_cells_are_errors_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            for item in unpack(&bytes, b"p") {
                if item.is_err() {
                    break;
                }
            }
        }
    }

    proptest! {
        #[test]
        fn a_facet_cell_gives_back_what_was_packed(
            rows in proptest::collection::btree_map(
                proptest::collection::vec(any::<u8>(), 0..12),
                proptest::collection::vec(-1000i64..1000, 3),
                0..40,
            ),
            weights in proptest::collection::vec(-50i64..50, 3),
        ) {
            let prefixes: [&[u8]; 3] = [b"click,Clicked,brand", b"view,Viewed,brand", b"x"];
            let mut cell = Vec::new();
            let mut packer = FacetPacker::new(&mut cell, &prefixes);
            for (v, c) in &rows {
                packer.row(v, c);
            }
            let read = unpack_facet(&cell, b"brand").unwrap();
            prop_assert_eq!(read.prefixes(), &prefixes[..]);
            let mut counts = Vec::new();
            read.for_each(|v, j, n| counts.push((v.to_vec(), j, n))).unwrap();
            let expected: Vec<(Vec<u8>, usize, i64)> = rows
                .iter()
                .flat_map(|(v, c)| {
                    c.iter().enumerate().filter(|(_, n)| **n != 0).map(|(j, n)| (v.clone(), j, *n))
                })
                .collect();
            prop_assert_eq!(counts, expected);
            let weighted: Vec<(Vec<u8>, i64)> = read
                .weighted(&weights)
                .map(|r| r.map(|(v, n)| (v.to_vec(), n)))
                .collect::<Result<_>>()
                .unwrap();
            let expected: Vec<(Vec<u8>, i64)> = rows
                .iter()
                .map(|(v, c)| (v.clone(), c.iter().zip(&weights).map(|(n, w)| n * w).sum::<i64>()))
                .filter(|(_, n)| *n != 0)
                .collect();
            prop_assert_eq!(weighted, expected);
        }

        #[test]
        fn damaged_facet_cells_are_errors_never_panics(
            bytes in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            if let Ok(read) = unpack_facet(&bytes, b"f") {
                let weights = vec![7; read.prefixes().len()];
                for item in read.weighted(&weights) {
                    if item.is_err() {
                        break;
                    }
                }
                let _ = read.for_each(|_, _, _| {});
            }
        }
    }

    #[test]
    fn damaged_facet_cells_are_named() {
        let mut cell = Vec::new();
        let mut packer = FacetPacker::new(&mut cell, &[b"a", b"b"]);
        packer.row(b"v", &[0, 3]);
        packer.row(b"w", &[0, 0]);
        let read = unpack_facet(&cell, b"color").unwrap();
        let mut seen = Vec::new();
        read.for_each(|v, j, n| seen.push((v, j, n))).unwrap();
        assert_eq!(seen, vec![(&b"v"[..], 1, 3)], "a row of zeros is left out");
        cell.pop();
        let err = unpack_facet(&cell, b"color")
            .unwrap()
            .for_each(|_, _, _| {})
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("color") && err.contains("truncated count"),
            "{err}"
        );
        // A row with every count zero (not what a fold writes).
        let mut zeros = Vec::new();
        put_varint(&mut zeros, 1);
        put_varint(&mut zeros, 1);
        zeros.push(b'a');
        zeros.extend_from_slice(&[1, b'v', 0]);
        let read = unpack_facet(&zeros, b"size").unwrap();
        let err = read.weighted(&[1]).next().unwrap().unwrap_err().to_string();
        assert!(err.contains("without counts"), "{err}");
        assert!(unpack_facet(&[0], b"size").is_err(), "no prefix");
    }

    #[test]
    fn zero_counts_are_left_out_and_damage_is_named() {
        let mut packed = Vec::new();
        pack(&mut packed, [(&b"a"[..], 3), (b"b", 0), (b"c", -2)]);
        let back: Vec<_> = unpack(&packed, b"p").collect::<Result<_>>().unwrap();
        assert_eq!(back, vec![(&b"a"[..], 3), (&b"c"[..], -2)]);
        packed.pop();
        let err = unpack(&packed, b"click,buy,brand")
            .collect::<Result<Vec<_>>>()
            .unwrap_err();
        assert!(err.to_string().contains("click,buy,brand"), "{err}");
        assert!(err.to_string().contains("truncated count"), "{err}");
    }
}
