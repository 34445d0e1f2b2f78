//! A rollup's packed totals: one `r` cell per counter prefix
//! `type,name,facet` (the qualifier, CSV as in the `t` family), whose
//! value lists that prefix's counters, sorted by value:
//!
//! ```text
//! value = ( len varint | value bytes (UTF-8, unquoted) | count zigzag varint )*
//! ```
//!
//! values strictly increasing (bytewise), counts non-zero. A read then
//! walks one cell per scored prefix and no qualifier per counter: a heavy
//! user's rollup is a dozen cells, not thousands.

use crate::error::{Error, Result};

/// Append the packed form of `entries` (sorted by value, distinct) to
/// `out`; zero counts are left out.
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
    Unpack { rest: value, what }
}

pub(crate) struct Unpack<'v> {
    rest: &'v [u8],
    what: &'v [u8],
}

impl<'v> Unpack<'v> {
    fn corrupt(&mut self, why: &str) -> Error {
        self.rest = &[];
        Error::corrupt(
            "rollup totals",
            format!("{} ({why})", String::from_utf8_lossy(self.what)),
        )
    }
}

impl<'v> Iterator for Unpack<'v> {
    type Item = Result<(&'v [u8], i64)>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let Some(len) = take_varint(&mut self.rest) else {
            return Some(Err(self.corrupt("truncated length")));
        };
        let Some(value) = usize::try_from(len).ok().and_then(|l| self.rest.get(..l)) else {
            return Some(Err(self.corrupt("truncated value")));
        };
        self.rest = &self.rest[value.len()..];
        let count = match take_varint(&mut self.rest) {
            Some(z) if z != 0 => unzigzag(z),
            Some(_) => return Some(Err(self.corrupt("a zero count"))),
            None => return Some(Err(self.corrupt("truncated count"))),
        };
        Some(Ok((value, count)))
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
