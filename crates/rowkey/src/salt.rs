//! Salted keys: `salt = XXH64(hashed part of the logical key) mod N`,
//! prepended as a fixed-width decimal field. The full spec, with test
//! vectors, is in the crate docs.

use std::ops::Bound;

use affinity_model::{prefix_successor, Bytes, RowRange};

use crate::error::{Error, Result};
use crate::xxh64::xxh64;

/// Largest bucket count (so a salt also fits one byte in binary layouts and
/// a fan-out scan runs at most this many threads).
pub const MAX_BUCKETS: u32 = 256;

/// A range's end with Bigtable's convention applied: an empty end key
/// means the end of the table.
pub(crate) fn end_bound(range: &RowRange) -> Bound<Bytes> {
    match &range.end {
        Bound::Included(e) | Bound::Excluded(e) if e.is_empty() => Bound::Unbounded,
        end => end.clone(),
    }
}

/// Which part of the logical key the salt hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaltScope {
    /// The whole logical key: the best spread; every prefix scan fans out.
    WholeKey,
    /// The first `n` bytes (the whole key when shorter).
    Bytes(usize),
    /// The first `count` components split by `separator` (the whole key
    /// when it has fewer), e.g. `user_id-site` of `user_id-site-ts` with
    /// `separator: b'-', count: 2`: a scan of one `user_id-site-` stays in
    /// one bucket.
    Components { separator: u8, count: usize },
}

/// Computes salts and salted keys for one bucket count and scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Salter {
    buckets: u32,
    width: usize,
    scope: SaltScope,
}

impl Salter {
    /// A salter over `buckets` buckets (1..=256) hashing the whole key.
    pub fn new(buckets: u32) -> Result<Salter> {
        if !(1..=MAX_BUCKETS).contains(&buckets) {
            return Err(Error::InvalidBuckets { buckets });
        }
        let width = (buckets - 1).max(1).ilog10() as usize + 1;
        Ok(Salter {
            buckets,
            width,
            scope: SaltScope::WholeKey,
        })
    }

    /// The same salter hashing only `scope` of each key.
    pub fn with_scope(mut self, scope: SaltScope) -> Salter {
        self.scope = scope;
        self
    }

    pub fn buckets(&self) -> u32 {
        self.buckets
    }

    /// Width of the salt field in bytes: the decimal digits of `N - 1`.
    pub fn width(&self) -> usize {
        self.width
    }

    pub fn scope(&self) -> &SaltScope {
        &self.scope
    }

    /// The bytes of `key` the salt hashes.
    pub fn hashed_part<'k>(&self, key: &'k [u8]) -> &'k [u8] {
        match self.scope {
            SaltScope::WholeKey => key,
            SaltScope::Bytes(n) => &key[..n.min(key.len())],
            SaltScope::Components { separator, count } => {
                match key
                    .iter()
                    .enumerate()
                    .filter(|(_, &b)| b == separator)
                    .nth(count.max(1) - 1)
                {
                    Some((pos, _)) => &key[..pos],
                    None => key,
                }
            }
        }
    }

    /// The bucket of a logical key.
    pub fn bucket(&self, key: &[u8]) -> u32 {
        (xxh64(self.hashed_part(key)) % u64::from(self.buckets)) as u32
    }

    /// The salt field of a bucket: zero-padded decimal, [`Salter::width`] bytes.
    pub fn salt_field(&self, bucket: u32) -> Vec<u8> {
        format!("{bucket:0width$}", width = self.width).into_bytes()
    }

    /// The salted (physical) key of a logical key.
    pub fn salt(&self, key: &[u8]) -> Vec<u8> {
        let mut out = self.salt_field(self.bucket(key));
        out.extend_from_slice(key);
        out
    }

    /// The logical key of a salted key, after checking its salt field.
    pub fn unsalt<'k>(&self, salted: &'k [u8]) -> Result<&'k [u8]> {
        let malformed = |reason: &str| Error::MalformedKey {
            key: String::from_utf8_lossy(salted).into_owned(),
            reason: reason.to_string(),
        };
        if salted.len() < self.width || !salted[..self.width].iter().all(u8::is_ascii_digit) {
            return Err(malformed("does not start with a salt field"));
        }
        let logical = &salted[self.width..];
        if self.salt_field(self.bucket(logical)) != salted[..self.width] {
            return Err(malformed("salt does not match the key's hash"));
        }
        Ok(logical)
    }

    /// The shortest prefix of `key` such that every key starting with it
    /// has the same hashed part, if there is one.
    pub fn fixed_hash_prefix<'k>(&self, key: &'k [u8]) -> Option<&'k [u8]> {
        match self.scope {
            SaltScope::WholeKey => None,
            SaltScope::Bytes(n) => (key.len() >= n).then(|| &key[..n]),
            SaltScope::Components { separator, count } => key
                .iter()
                .enumerate()
                .filter(|(_, &b)| b == separator)
                .nth(count.max(1) - 1)
                .map(|(pos, _)| &key[..=pos]),
        }
    }

    /// The one bucket holding every key of a logical range, when the range
    /// lies within a prefix that fixes the hashed part.
    pub fn range_bucket(&self, range: &RowRange) -> Option<u32> {
        let start = match &range.start {
            Bound::Included(s) | Bound::Excluded(s) => s,
            Bound::Unbounded => return None,
        };
        let prefix = self.fixed_hash_prefix(start)?;
        let limit = prefix_successor(prefix);
        let inside = match (&end_bound(range), &limit) {
            (Bound::Unbounded, None) => true,
            (Bound::Unbounded, Some(_)) => false,
            (_, None) => true,
            (Bound::Excluded(e), Some(l)) => e.as_ref() <= l.as_slice(),
            (Bound::Included(e), Some(_)) => e.starts_with(prefix),
        };
        inside.then(|| self.bucket(prefix))
    }

    /// The physical range of bucket `bucket` holding the salted forms of the
    /// logical keys in `range` that fall in that bucket (and others of other
    /// buckets' hashes, never returned by a correct write path).
    pub fn salted_range(&self, bucket: u32, range: &RowRange) -> RowRange {
        let salt = self.salt_field(bucket);
        let join = |key: &Bytes| Bytes::from([salt.as_slice(), key.as_ref()].concat());
        let start = match &range.start {
            Bound::Unbounded => Bound::Included(Bytes::from(salt.clone())),
            Bound::Included(s) => Bound::Included(join(s)),
            Bound::Excluded(s) => Bound::Excluded(join(s)),
        };
        let end = match &end_bound(range) {
            // A salt field is ASCII digits, so it always has a successor.
            Bound::Unbounded => match prefix_successor(&salt) {
                Some(succ) => Bound::Excluded(Bytes::from(succ)),
                None => Bound::Unbounded,
            },
            Bound::Included(e) => Bound::Included(join(e)),
            Bound::Excluded(e) => Bound::Excluded(join(e)),
        };
        RowRange { start, end }
    }

    /// The physical ranges a scan of logical `range` reads: one per bucket,
    /// or just one when the range fixes the hashed part.
    pub fn scan_ranges(&self, range: &RowRange) -> Vec<(u32, RowRange)> {
        match self.range_bucket(range) {
            Some(b) => vec![(b, self.salted_range(b, range))],
            None => (0..self.buckets)
                .map(|b| (b, self.salted_range(b, range)))
                .collect(),
        }
    }

    /// The physical key range holding every salted key of this salter:
    /// `[salt_field(0), successor(salt_field(N-1)))`.
    pub fn salted_space(&self) -> RowRange {
        let last = self.salt_field(self.buckets - 1);
        match prefix_successor(&last) {
            Some(end) => RowRange::closed_open(self.salt_field(0), end),
            None => RowRange::prefix(self.salt_field(0)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_and_limits() {
        assert_eq!(Salter::new(1).unwrap().width(), 1);
        assert_eq!(Salter::new(10).unwrap().width(), 1);
        assert_eq!(Salter::new(11).unwrap().width(), 2);
        assert_eq!(Salter::new(100).unwrap().width(), 2);
        assert_eq!(Salter::new(256).unwrap().width(), 3);
        assert!(Salter::new(0).is_err());
        assert!(Salter::new(257).is_err());
    }

    #[test]
    fn spec_test_vectors() {
        // The vectors printed in the crate docs; any implementation of the
        // spec must reproduce them.
        let cases: [(u32, &[u8], u64, &[u8]); 6] = [
            (
                16,
                b"app1,user42,2019-05-28T00:04:34.000Z",
                0x4017_694d_b2aa_186d,
                b"13app1,user42,2019-05-28T00:04:34.000Z",
            ),
            (16, b"user42", 0x9341_6474_3b6a_6a0c, b"12user42"),
            (100, b"user42", 0x9341_6474_3b6a_6a0c, b"76user42"),
            (256, b"user42", 0x9341_6474_3b6a_6a0c, b"012user42"),
            (10, b"hello", 0x26c7_827d_889f_6da3, b"9hello"),
            (7, b"", 0xef46_db37_51d8_e999, b"6"),
        ];
        for (n, key, hash, salted) in cases {
            assert_eq!(xxh64(key), hash);
            assert_eq!(Salter::new(n).unwrap().salt(key), salted);
        }
        let scoped = Salter::new(16).unwrap().with_scope(SaltScope::Components {
            separator: b'-',
            count: 2,
        });
        assert_eq!(
            scoped.salt(b"user42-siteA-2019")[..2],
            scoped.salt(b"user42-siteA")[..2]
        );
    }

    #[test]
    fn scoped_hash_keeps_a_prefix_in_one_bucket() {
        let s = Salter::new(16).unwrap().with_scope(SaltScope::Components {
            separator: b'-',
            count: 2,
        });
        assert_eq!(s.hashed_part(b"u1-siteA-2019"), b"u1-siteA");
        assert_eq!(s.hashed_part(b"u1-siteA"), b"u1-siteA");
        assert_eq!(s.hashed_part(b"u1"), b"u1");
        assert_eq!(s.bucket(b"u1-siteA-1"), s.bucket(b"u1-siteA-2"));
        assert_eq!(s.scan_ranges(&RowRange::prefix("u1-siteA-")).len(), 1);
        assert_eq!(s.scan_ranges(&RowRange::prefix("u1-siteA-20")).len(), 1);
        assert_eq!(s.scan_ranges(&RowRange::prefix("u1-siteA")).len(), 16);
        assert_eq!(s.scan_ranges(&RowRange::prefix("u1-")).len(), 16);
        let b = Salter::new(8).unwrap().with_scope(SaltScope::Bytes(4));
        assert_eq!(b.scan_ranges(&RowRange::prefix("abcd")).len(), 1);
        assert_eq!(b.scan_ranges(&RowRange::prefix("abc")).len(), 8);
    }

    #[test]
    fn unsalt_checks_the_field() {
        let s = Salter::new(16).unwrap();
        let salted = s.salt(b"key");
        assert_eq!(s.unsalt(&salted).unwrap(), b"key");
        let mut wrong = salted.clone();
        wrong[1] = if wrong[1] == b'0' { b'1' } else { b'0' };
        assert!(s.unsalt(&wrong).is_err());
        assert!(s.unsalt(b"x").is_err());
    }
}
