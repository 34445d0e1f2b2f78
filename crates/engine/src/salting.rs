//! Salted events tables, for hot applications: with `salt_buckets = N`
//! every events key `app,user,...` is stored as `salt || key`, the salt
//! hashing `app,user` (the key's first two components, see
//! `affinity_rowkey::salt`), so a user's events stay in one bucket (user
//! reads touch one range) while users spread over N key ranges. Scans of
//! the whole application fan out into one range per bucket. The bucket
//! count is fixed when the application is created.

use affinity_model::RowRange;
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
    /// The physical key of a logical events key.
    pub fn event_key(&self, logical: &[u8]) -> Vec<u8> {
        match &self.salter {
            Some(s) => s.salt(logical),
            None => logical.to_vec(),
        }
    }

    /// The logical key of a physical events key.
    pub fn logical_key<'k>(&self, physical: &'k [u8]) -> Result<&'k [u8]> {
        match &self.salter {
            Some(s) => Ok(s.unsalt(physical)?),
            None => Ok(physical),
        }
    }

    /// The physical ranges holding the logical `range`, with the salt
    /// prefix of each (empty when unsalted), in physical key order.
    pub fn physical_ranges(&self, range: &RowRange) -> Vec<(Vec<u8>, RowRange)> {
        match &self.salter {
            Some(s) => s
                .scan_ranges(range)
                .into_iter()
                .map(|(b, r)| (s.salt_field(b), r))
                .collect(),
            None => vec![(Vec::new(), range.clone())],
        }
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
