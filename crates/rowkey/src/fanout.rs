//! A salted view of a [`Table`]: point reads and writes salt the key; scans
//! fan out into one sub-scan per bucket, run concurrently on threads, and
//! are merged by logical key (or taken unordered) with `rows_limit`
//! respected across the merge.

use std::sync::Arc;

use affinity_model::{Bytes, Mutation, ReadRowsRequest, Row, RowFilter, RowRange, RowSet, Table};

use crate::error::Result;
use crate::merge::{MergedRows, SubScan};
use crate::salt::Salter;

/// How a fan-out scan returns rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanOrder {
    /// In logical key order (descending for a reversed request): a k-way
    /// merge of the buckets' streams.
    KeyOrder,
    /// As the buckets produce them: faster to the first row, no order.
    Unordered,
}

/// A table whose keys are salted by a [`Salter`]. Callers speak logical
/// keys; rows come back with logical keys.
#[derive(Clone)]
pub struct SaltedTable {
    table: Arc<dyn Table>,
    salter: Salter,
}

impl SaltedTable {
    pub fn new(table: Arc<dyn Table>, salter: Salter) -> SaltedTable {
        SaltedTable { table, salter }
    }

    pub fn salter(&self) -> &Salter {
        &self.salter
    }

    /// The physical table underneath.
    pub fn table(&self) -> &Arc<dyn Table> {
        &self.table
    }

    /// Apply mutations to the row of a logical key.
    pub fn mutate_row(&self, key: &[u8], mutations: &[Mutation]) -> Result<()> {
        Ok(self.table.mutate_row(&self.salter.salt(key), mutations)?)
    }

    /// Read the row of a logical key (returned with its logical key).
    pub fn read_row(&self, key: &[u8], filter: Option<&RowFilter>) -> Result<Option<Row>> {
        let row = self.table.read_row(&self.salter.salt(key), filter)?;
        Ok(row.map(|mut row| {
            row.key = Bytes::copy_from_slice(key);
            row
        }))
    }

    /// Scan the logical rows of `request` (its row set, filter, limit and
    /// direction are logical) across every bucket it can touch.
    pub fn read_rows(&self, request: &ReadRowsRequest, order: ScanOrder) -> Result<MergedRows> {
        MergedRows::start(
            self.sub_scans(request),
            order == ScanOrder::KeyOrder,
            request.reversed,
            request.rows_limit,
        )
    }

    /// Scan every logical key starting with `prefix`.
    pub fn scan_prefix(
        &self,
        prefix: &[u8],
        order: ScanOrder,
        rows_limit: Option<u64>,
    ) -> Result<MergedRows> {
        let range = if prefix.is_empty() {
            RowRange::all()
        } else {
            RowRange::prefix(Bytes::copy_from_slice(prefix))
        };
        let mut request = ReadRowsRequest::new(RowSet::from_range(range));
        request.rows_limit = rows_limit;
        self.read_rows(&request, order)
    }

    /// One physical sub-scan per bucket the logical request touches.
    pub(crate) fn sub_scans(&self, request: &ReadRowsRequest) -> Vec<SubScan> {
        let buckets = self.salter.buckets() as usize;
        let mut sets = vec![RowSet::default(); buckets];
        for key in &request.rows.keys {
            let b = self.salter.bucket(key);
            sets[b as usize]
                .keys
                .push(Bytes::from(self.salter.salt(key)));
        }
        let all = [RowRange::all()];
        let ranges: &[RowRange] = if request.rows.is_all() {
            &all
        } else {
            &request.rows.ranges
        };
        for range in ranges {
            for (b, physical) in self.salter.scan_ranges(range) {
                sets[b as usize].ranges.push(physical);
            }
        }
        sets.into_iter()
            // An empty row set would mean "the whole table": skip it.
            .filter(|set| !set.is_all())
            .map(|rows| SubScan {
                table: Arc::clone(&self.table),
                request: ReadRowsRequest {
                    rows,
                    filter: request.filter.clone(),
                    rows_limit: request.rows_limit,
                    reversed: request.reversed,
                },
                strip: self.salter.width(),
            })
            .collect()
    }
}
