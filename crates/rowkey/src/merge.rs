//! Concurrent sub-scans and their merge: each sub-scan runs on its own
//! thread and feeds a bounded channel; the consumer merges the channels in
//! key order (a k-way merge over a heap) or takes rows as they come.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use affinity_model::{Bytes, ReadRowsRequest, Row, Table};

use crate::error::{Error, Result};

/// Rows a sub-scan may read ahead of the consumer.
const CHANNEL_ROWS: usize = 128;

/// One sub-scan: a physical request, and how many leading key bytes to
/// strip to get the logical key.
pub(crate) struct SubScan {
    pub table: Arc<dyn Table>,
    pub request: ReadRowsRequest,
    pub strip: usize,
}

fn run(scan: SubScan, tx: SyncSender<Result<Row>>) {
    let rows = match scan.table.read_rows(&scan.request) {
        Ok(rows) => rows,
        Err(e) => {
            let _ = tx.send(Err(e.into()));
            return;
        }
    };
    for row in rows {
        let item = row.map_err(Error::from).map(|mut row| {
            row.key = row.key.slice(scan.strip.min(row.key.len())..);
            row
        });
        let failed = item.is_err();
        // A closed channel means the consumer is gone: stop reading.
        if tx.send(item).is_err() || failed {
            return;
        }
    }
}

fn spawn(scan: SubScan, tx: SyncSender<Result<Row>>, index: usize) -> Result<()> {
    std::thread::Builder::new()
        .name(format!("rowkey-scan-{index}"))
        .spawn(move || run(scan, tx))
        .map(|_| ())
        .map_err(|e| {
            Error::Store(affinity_model::Error::Internal(format!(
                "cannot spawn scan thread: {e}"
            )))
        })
}

/// Rows of many sub-scans, merged. An `Err` item ends the stream.
pub struct MergedRows {
    inner: Inner,
    remaining: Option<u64>,
    done: bool,
}

enum Inner {
    Unordered(Receiver<Result<Row>>),
    Ordered(KeyMerge),
}

impl MergedRows {
    /// Start every sub-scan on its own thread and merge their rows. With
    /// `ordered`, rows come in logical key order (descending when
    /// `descending`) and rows of equal logical key from different sub-scans
    /// are combined into one; otherwise they come as they arrive.
    pub(crate) fn start(
        scans: Vec<SubScan>,
        ordered: bool,
        descending: bool,
        limit: Option<u64>,
    ) -> Result<MergedRows> {
        let inner = if ordered {
            let mut receivers = Vec::with_capacity(scans.len());
            for (i, scan) in scans.into_iter().enumerate() {
                let (tx, rx) = sync_channel(CHANNEL_ROWS);
                spawn(scan, tx, i)?;
                receivers.push(rx);
            }
            Inner::Ordered(KeyMerge::new(receivers, descending))
        } else {
            let (tx, rx) = sync_channel(CHANNEL_ROWS);
            for (i, scan) in scans.into_iter().enumerate() {
                spawn(scan, tx.clone(), i)?;
            }
            Inner::Unordered(rx)
        };
        Ok(MergedRows {
            inner,
            // As in Bigtable, a limit of 0 means no limit.
            remaining: limit.filter(|&n| n > 0),
            done: false,
        })
    }
}

impl Iterator for MergedRows {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        if self.done || self.remaining == Some(0) {
            return None;
        }
        let item = match &mut self.inner {
            Inner::Unordered(rx) => rx.recv().ok(),
            Inner::Ordered(merge) => merge.next(),
        };
        match &item {
            None | Some(Err(_)) => self.done = true,
            Some(Ok(_)) => {
                if let Some(n) = &mut self.remaining {
                    *n -= 1;
                }
            }
        }
        item
    }
}

struct Head {
    key: Bytes,
    source: usize,
    descending: bool,
}

impl PartialEq for Head {
    fn eq(&self, other: &Head) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head {}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Head) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Head {
    // BinaryHeap pops the greatest: for ascending order the smallest key
    // must compare greatest. Ties go to the lower source index.
    fn cmp(&self, other: &Head) -> Ordering {
        let by_key = if self.descending {
            self.key.cmp(&other.key)
        } else {
            other.key.cmp(&self.key)
        };
        by_key.then_with(|| other.source.cmp(&self.source))
    }
}

/// A k-way merge of row channels, each already in key order.
struct KeyMerge {
    receivers: Vec<Receiver<Result<Row>>>,
    rows: Vec<Option<Row>>,
    heap: BinaryHeap<Head>,
    descending: bool,
    started: bool,
    error: Option<Error>,
}

impl KeyMerge {
    fn new(receivers: Vec<Receiver<Result<Row>>>, descending: bool) -> KeyMerge {
        let rows = receivers.iter().map(|_| None).collect();
        KeyMerge {
            receivers,
            rows,
            heap: BinaryHeap::new(),
            descending,
            started: false,
            error: None,
        }
    }

    /// Pull the next row of `source` into the heap.
    fn refill(&mut self, source: usize) {
        match self.receivers[source].recv() {
            Ok(Ok(row)) => {
                self.heap.push(Head {
                    key: row.key.clone(),
                    source,
                    descending: self.descending,
                });
                self.rows[source] = Some(row);
            }
            Ok(Err(e)) => {
                if self.error.is_none() {
                    self.error = Some(e);
                }
            }
            Err(_) => {}
        }
    }

    fn next(&mut self) -> Option<Result<Row>> {
        if !self.started {
            self.started = true;
            for source in 0..self.receivers.len() {
                self.refill(source);
            }
        }
        if let Some(e) = self.error.take() {
            return Some(Err(e));
        }
        let head = self.heap.pop()?;
        let mut row = self.rows[head.source].take()?;
        self.refill(head.source);
        // Rows of one logical key from different sources (old and new key
        // spaces of a migration) become one row.
        let mut combined = false;
        while self.heap.peek().is_some_and(|h| h.key == row.key) {
            let Some(other) = self.heap.pop() else { break };
            if let Some(more) = self.rows[other.source].take() {
                row.cells.extend(more.cells);
                combined = true;
            }
            self.refill(other.source);
        }
        if combined {
            row.cells.sort_by(|a, b| a.canonical_cmp(b));
        }
        // An error met while refilling is returned by the next call.
        Some(Ok(row))
    }
}
