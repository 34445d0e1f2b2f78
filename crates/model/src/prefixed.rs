//! `PrefixedTable`: one tenant's view of a table shared by many, its rows
//! those whose key starts with the tenant's prefix (`id#`). Every key
//! written is prefixed, every row set and row-key regex clamped to the
//! prefix, every key returned stripped, so no call reaches another
//! tenant's rows. Design and invariants: `docs/design/apps.md`.

use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;

use crate::cell::{Row, RowRef, SampleRowKey};
use crate::error::{Error, Result};
use crate::eval::CompiledFilter;
use crate::filter::RowFilter;
use crate::limits::{self, MAX_ROW_KEY_BYTES};
use crate::mutation::{Mutation, ReadModifyWriteRule, RowMutations, RowRules};
use crate::rowset::{prefix_successor, ReadRowsRequest, RowRange, RowSet};
use crate::store::{RowStream, Table};

/// The byte after a tenant id in its prefix; no id contains it.
pub const SEPARATOR: u8 = b'#';
/// Longest tenant id.
pub const MAX_TENANT_BYTES: usize = 64;

/// Check a tenant id: `[A-Za-z0-9_-]{1,64}` (so never the separator, and
/// literal in a regex).
pub fn check_tenant(id: &str) -> Result<()> {
    if (1..=MAX_TENANT_BYTES).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "invalid tenant id {id:?}: must match [A-Za-z0-9_-]{{1,{MAX_TENANT_BYTES}}}"
        )))
    }
}

/// The key prefix of tenant `id`: `id#`.
pub fn tenant_prefix(id: &str) -> Result<Vec<u8>> {
    check_tenant(id)?;
    let mut prefix = id.as_bytes().to_vec();
    prefix.push(SEPARATOR);
    Ok(prefix)
}

/// A tenant's rows of a shared table, seen as a table of their own.
pub struct PrefixedTable {
    inner: Arc<dyn Table>,
    name: String,
    prefix: Bytes,
    /// The prefix's successor: the first key past every prefixed key.
    end: Bytes,
}

impl PrefixedTable {
    /// Tenant `id`'s view of `inner`, named `name` (what [`Table::name`]
    /// returns).
    pub fn new(inner: Arc<dyn Table>, id: &str, name: impl Into<String>) -> Result<PrefixedTable> {
        let prefix = tenant_prefix(id)?;
        let end = prefix_successor(&prefix)
            .ok_or_else(|| Error::Internal(format!("prefix of {id:?} has no successor")))?;
        Ok(PrefixedTable {
            inner,
            name: name.into(),
            prefix: Bytes::from(prefix),
            end: Bytes::from(end),
        })
    }

    /// The physical key prefix of this tenant's rows.
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// The physical key of a logical one, checked as a row key is: empty
    /// keys are refused (the prefix alone is no row), long ones counted
    /// with the prefix.
    fn key(&self, key: &[u8]) -> Result<Bytes> {
        limits::check_row_key(key)?;
        if self.prefix.len() + key.len() > MAX_ROW_KEY_BYTES {
            return Err(Error::RowKeyTooLarge {
                len: self.prefix.len() + key.len(),
            });
        }
        Ok(self.prefixed(key))
    }

    fn prefixed(&self, key: &[u8]) -> Bytes {
        let mut out = Vec::with_capacity(self.prefix.len() + key.len());
        out.extend_from_slice(&self.prefix);
        out.extend_from_slice(key);
        Bytes::from(out)
    }

    /// The logical key of a physical one; a key outside the prefix is an
    /// error, never shown.
    fn strip<'k>(&self, key: &'k [u8]) -> Result<&'k [u8]> {
        key.strip_prefix(self.prefix.as_ref()).ok_or_else(|| {
            Error::Internal(format!(
                "{}: a row outside the tenant's prefix was returned",
                self.name
            ))
        })
    }

    fn strip_row(&self, mut row: Row) -> Result<Row> {
        let len = self.strip(&row.key)?.len();
        row.key = row.key.slice(row.key.len() - len..);
        Ok(row)
    }

    /// `range` within the prefix: an unbounded (or empty-key) side becomes
    /// the prefix's bound.
    fn range(&self, range: &RowRange) -> RowRange {
        let start = match &range.start {
            Bound::Included(k) if !k.is_empty() => Bound::Included(self.prefixed(k)),
            Bound::Excluded(k) if !k.is_empty() => Bound::Excluded(self.prefixed(k)),
            _ => Bound::Included(self.prefix.clone()),
        };
        let end = match &range.end {
            Bound::Included(k) if !k.is_empty() => Bound::Included(self.prefixed(k)),
            Bound::Excluded(k) if !k.is_empty() => Bound::Excluded(self.prefixed(k)),
            _ => Bound::Excluded(self.end.clone()),
        };
        RowRange { start, end }
    }

    /// A row set within the prefix; the empty set ("every row") is the
    /// prefix's range.
    fn row_set(&self, rows: &RowSet) -> Result<RowSet> {
        limits::check_row_set(rows)?;
        if rows.is_all() {
            return Ok(RowSet::from_range(RowRange {
                start: Bound::Included(self.prefix.clone()),
                end: Bound::Excluded(self.end.clone()),
            }));
        }
        Ok(RowSet {
            keys: rows.keys.iter().map(|k| self.prefixed(k)).collect(),
            ranges: rows.ranges.iter().map(|r| self.range(r)).collect(),
        })
    }

    /// `filter` with every row-key regex anchored under the prefix. Each
    /// regex is validated alone first, so its parentheses balance and it
    /// cannot close the group it is put in.
    fn filter(&self, filter: &RowFilter) -> Result<RowFilter> {
        Ok(match filter {
            RowFilter::RowKeyRegex(pattern) => {
                CompiledFilter::compile(filter)?;
                let mut out = Vec::with_capacity(self.prefix.len() + pattern.len() + 4);
                out.extend_from_slice(&self.prefix);
                out.extend_from_slice(b"(?:");
                out.extend_from_slice(pattern);
                out.push(b')');
                RowFilter::RowKeyRegex(Bytes::from(out))
            }
            RowFilter::Chain(filters) => RowFilter::Chain(
                filters
                    .iter()
                    .map(|f| self.filter(f))
                    .collect::<Result<_>>()?,
            ),
            RowFilter::Interleave(filters) => RowFilter::Interleave(
                filters
                    .iter()
                    .map(|f| self.filter(f))
                    .collect::<Result<_>>()?,
            ),
            RowFilter::Condition {
                predicate,
                true_filter,
                false_filter,
            } => {
                let branch = |f: &Option<Box<RowFilter>>| -> Result<Option<Box<RowFilter>>> {
                    f.as_deref()
                        .map(|f| Ok(Box::new(self.filter(f)?)))
                        .transpose()
                };
                RowFilter::Condition {
                    predicate: Box::new(self.filter(predicate)?),
                    true_filter: branch(true_filter)?,
                    false_filter: branch(false_filter)?,
                }
            }
            other => other.clone(),
        })
    }

    fn filter_opt(&self, filter: Option<&RowFilter>) -> Result<Option<RowFilter>> {
        filter.map(|f| self.filter(f)).transpose()
    }

    fn request(&self, request: &ReadRowsRequest) -> Result<ReadRowsRequest> {
        Ok(ReadRowsRequest {
            rows: self.row_set(&request.rows)?,
            filter: self.filter_opt(request.filter.as_ref())?,
            rows_limit: request.rows_limit,
            reversed: request.reversed,
        })
    }

    /// `mutate_rows` by `write` (the inner table's, synced or not) of the
    /// entries with their keys prefixed: a bad key fails its entry only,
    /// as the backends do.
    fn mutate_rows_with(
        &self,
        entries: &[RowMutations],
        write: impl FnOnce(&[RowMutations]) -> Result<Vec<Result<()>>>,
    ) -> Result<Vec<Result<()>>> {
        let mut statuses: Vec<Option<Result<()>>> = Vec::with_capacity(entries.len());
        let mut physical = Vec::with_capacity(entries.len());
        for entry in entries {
            match self.key(&entry.row_key) {
                Ok(key) => {
                    statuses.push(None);
                    physical.push(RowMutations {
                        row_key: key,
                        mutations: entry.mutations.clone(),
                    });
                }
                Err(e) => statuses.push(Some(Err(e))),
            }
        }
        if physical.is_empty() && !entries.is_empty() {
            return Ok(statuses.into_iter().flatten().collect());
        }
        let mut results = write(&physical)?.into_iter();
        Ok(statuses
            .into_iter()
            .map(|s| s.unwrap_or_else(|| results.next().unwrap_or(Ok(()))))
            .collect())
    }
}

impl Table for PrefixedTable {
    fn name(&self) -> &str {
        &self.name
    }

    fn mutate_row(&self, row_key: &[u8], mutations: &[Mutation]) -> Result<()> {
        self.inner.mutate_row(&self.key(row_key)?, mutations)
    }

    fn mutate_rows(&self, entries: &[RowMutations]) -> Result<Vec<Result<()>>> {
        self.mutate_rows_with(entries, |physical| self.inner.mutate_rows(physical))
    }

    fn mutate_rows_unsynced(&self, entries: &[RowMutations]) -> Result<Vec<Result<()>>> {
        self.mutate_rows_with(entries, |physical| {
            self.inner.mutate_rows_unsynced(physical)
        })
    }

    fn check_and_mutate_row(
        &self,
        row_key: &[u8],
        predicate: Option<&RowFilter>,
        true_mutations: &[Mutation],
        false_mutations: &[Mutation],
    ) -> Result<bool> {
        let key = self.key(row_key)?;
        let predicate = self.filter_opt(predicate)?;
        self.inner
            .check_and_mutate_row(&key, predicate.as_ref(), true_mutations, false_mutations)
    }

    fn check_and_mutate_row_unsynced(
        &self,
        row_key: &[u8],
        predicate: Option<&RowFilter>,
        true_mutations: &[Mutation],
        false_mutations: &[Mutation],
    ) -> Result<bool> {
        let key = self.key(row_key)?;
        let predicate = self.filter_opt(predicate)?;
        self.inner.check_and_mutate_row_unsynced(
            &key,
            predicate.as_ref(),
            true_mutations,
            false_mutations,
        )
    }

    fn read_modify_write_row(&self, row_key: &[u8], rules: &[ReadModifyWriteRule]) -> Result<Row> {
        let row = self
            .inner
            .read_modify_write_row(&self.key(row_key)?, rules)?;
        self.strip_row(row)
    }

    fn read_modify_write_rows(&self, entries: &[RowRules]) -> Result<Vec<Result<Row>>> {
        let mut statuses: Vec<Option<Result<Row>>> = Vec::with_capacity(entries.len());
        let mut physical = Vec::with_capacity(entries.len());
        for entry in entries {
            match self.key(&entry.row_key) {
                Ok(key) => {
                    statuses.push(None);
                    physical.push(RowRules {
                        row_key: key,
                        rules: entry.rules.clone(),
                    });
                }
                Err(e) => statuses.push(Some(Err(e))),
            }
        }
        let mut results = if physical.is_empty() {
            Vec::new().into_iter()
        } else {
            self.inner.read_modify_write_rows(&physical)?.into_iter()
        };
        Ok(statuses
            .into_iter()
            .map(|s| match s {
                Some(status) => status,
                None => results
                    .next()
                    .unwrap_or_else(|| Err(Error::Internal("a status is missing".into())))
                    .and_then(|row| self.strip_row(row)),
            })
            .collect())
    }

    fn sample_row_keys(&self) -> Result<Vec<SampleRowKey>> {
        let samples = self.inner.sample_row_keys()?;
        // Bytes before the prefix: the offset of the last split at or
        // before its start (an estimate, as every offset is).
        let base = samples
            .iter()
            .take_while(|s| !s.row_key.is_empty() && s.row_key <= self.prefix)
            .last()
            .map_or(0, |s| s.offset_bytes);
        let mut out = Vec::new();
        let mut end_offset = None;
        for s in &samples {
            if s.row_key.is_empty() || s.row_key >= self.end {
                end_offset = Some(s.offset_bytes);
                break;
            }
            if s.row_key.len() > self.prefix.len() && s.row_key.starts_with(&self.prefix) {
                out.push(SampleRowKey {
                    row_key: s.row_key.slice(self.prefix.len()..),
                    offset_bytes: (s.offset_bytes - base).max(0),
                });
            }
        }
        let last = out.last().map_or(0, |s| s.offset_bytes);
        out.push(SampleRowKey {
            row_key: Bytes::new(),
            offset_bytes: end_offset.map_or(last, |o| (o - base).max(last)),
        });
        Ok(out)
    }

    fn read_rows(&self, request: &ReadRowsRequest) -> Result<RowStream<'_>> {
        let request = self.request(request)?;
        let rows = self.inner.read_rows(&request)?;
        Ok(Box::new(rows.map(move |row| self.strip_row(row?))))
    }

    fn visit_rows(
        &self,
        request: &ReadRowsRequest,
        visit: &mut dyn FnMut(RowRef<'_>) -> Result<bool>,
    ) -> Result<()> {
        let request = self.request(request)?;
        self.inner.visit_rows(&request, &mut |row| {
            visit(RowRef {
                key: self.strip(row.key)?,
                cells: row.cells,
            })
        })
    }

    fn read_row(&self, row_key: &[u8], filter: Option<&RowFilter>) -> Result<Option<Row>> {
        let filter = self.filter_opt(filter)?;
        match self
            .inner
            .read_row(&self.prefixed(row_key), filter.as_ref())?
        {
            Some(row) => Ok(Some(self.strip_row(row)?)),
            None => Ok(None),
        }
    }
}
