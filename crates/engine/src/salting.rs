//! Salted events tables, for hot applications: with `salt_buckets = N`
//! every events key `app,user,...` is stored as `salt || key`, the salt
//! hashing `app,user` (the key's first two components, see
//! `affinity_rowkey::salt`), so a user's events stay in one bucket (user
//! reads touch one range) while users spread over N key ranges. Scans of
//! the whole application fan out into one range per bucket. The bucket
//! count is chosen when the application is created and changed by a salt
//! migration (`resalt.rs`), during which events are also written in a
//! second layout.

use affinity_model::{Bytes, RowRange};
use affinity_rowkey::salt::{SaltScope, Salter};

use crate::engine::App;
use crate::error::{Error, Result};

/// The salter of `buckets` buckets over `app,user`.
pub fn events_salter(buckets: u32) -> Result<Salter> {
    Ok(Salter::new(buckets)?.with_scope(SaltScope::Components {
        separator: b',',
        count: 2,
    }))
}

impl App {
    /// The physical key of a logical events key, in the layout read.
    pub fn event_key(&self, logical: &[u8]) -> Vec<u8> {
        salted(self.salter.as_ref(), logical)
    }

    /// The physical keys an event is written at: the layout read's, and
    /// during a salt migration's `dual` and `cut` phases the other
    /// layout's when it differs.
    pub fn write_keys(&self, logical: &[u8]) -> (Vec<u8>, Option<Vec<u8>>) {
        let key = self.event_key(logical);
        let other = match &self.other_salter {
            Some(other) if self.also_write => {
                Some(salted(other.as_ref(), logical)).filter(|k| *k != key)
            }
            _ => None,
        };
        (key, other)
    }

    /// The logical key of a physical events key of the layout read;
    /// `None` for a row of the other layout of a salt migration that a
    /// scan of the layout read meets (both salted with the same width).
    pub fn logical_key<'k>(&self, physical: &'k [u8]) -> Result<Option<&'k [u8]>> {
        let Some(s) = &self.salter else {
            return Ok(Some(physical));
        };
        match s.unsalt(physical) {
            Ok(logical) => Ok(Some(logical)),
            Err(e) => match &self.other_salter {
                Some(Some(other))
                    if other.width() == s.width() && other.unsalt(physical).is_ok() =>
                {
                    Ok(None)
                }
                _ => Err(e.into()),
            },
        }
    }

    /// The physical ranges holding the logical `range` in the layout read,
    /// with the salt prefix of each (empty when unsalted), in physical key
    /// order.
    pub fn physical_ranges(&self, range: &RowRange) -> Vec<(Vec<u8>, RowRange)> {
        layout_ranges(self.salter.as_ref(), range)
    }

    /// [`App::physical_ranges`] plus, during a salt migration, the other
    /// layout's ranges (each physical range once): what a deletion
    /// clears.
    pub fn every_physical_range(&self, range: &RowRange) -> Vec<RowRange> {
        let mut out = self.physical_ranges(range);
        if let Some(other) = &self.other_salter {
            for (salt, r) in layout_ranges(other.as_ref(), range) {
                if !out.iter().any(|(s, _)| *s == salt) {
                    out.push((salt, r));
                }
            }
        }
        out.into_iter().map(|(_, r)| r).collect()
    }

    /// The physical keys a deletion of the rows `found` (read from
    /// [`App::every_physical_range`]) removes: each event's key in the
    /// layout read, all of them first, then its key in the other layout of
    /// a salt migration. In that order a row the migration's copy writes
    /// concurrently is deleted by the deletion or by the copy's check
    /// (`resalt.rs`).
    pub(crate) fn deletion_keys(&self, found: &[Bytes]) -> Vec<Bytes> {
        let head = format!("{},", self.id);
        let logical: Vec<&[u8]> = found
            .iter()
            .filter_map(|k| {
                (0..=3)
                    .find(|w| k.get(*w..).is_some_and(|l| l.starts_with(head.as_bytes())))
                    .map(|w| &k[w..])
            })
            .collect();
        let mut out: Vec<Bytes> = logical
            .iter()
            .map(|l| Bytes::from(self.event_key(l)))
            .collect();
        if let Some(other) = &self.other_salter {
            for l in &logical {
                let key = salted(other.as_ref(), l);
                if key != self.event_key(l) {
                    out.push(Bytes::from(key));
                }
            }
        }
        out
    }
}

/// The physical key of `logical` under `salter`.
pub(crate) fn salted(salter: Option<&Salter>, logical: &[u8]) -> Vec<u8> {
    match salter {
        Some(s) => s.salt(logical),
        None => logical.to_vec(),
    }
}

/// The physical ranges of logical `range` under `salter`, with their salt
/// fields.
pub(crate) fn layout_ranges(salter: Option<&Salter>, range: &RowRange) -> Vec<(Vec<u8>, RowRange)> {
    match salter {
        Some(s) => s
            .scan_ranges(range)
            .into_iter()
            .map(|(b, r)| (s.salt_field(b), r))
            .collect(),
        None => vec![(Vec::new(), range.clone())],
    }
}

/// Check a bucket count.
pub fn validate_buckets(buckets: Option<u32>) -> Result<()> {
    match buckets {
        Some(b) if !(1..=256).contains(&b) => Err(Error::InvalidArgument {
            name: "salt buckets",
            reason: format!("{b} is not between 1 and 256"),
        }),
        _ => Ok(()),
    }
}
