//! Streaming `ReadRows`: a task on the client runtime drains the gRPC stream
//! as fast as it arrives into a queue the synchronous iterator pulls from.
//!
//! Draining never waits on the consumer: the emulator sends one small frame
//! per row, and h2 closes a connection that buffers too many small frames
//! unread. When the consumer falls behind by more than the read buffer, the
//! task cancels the server stream instead and, once the consumer has caught
//! up, resumes after the last row it queued. Retryable failures resume the
//! same way, with backoff and a bounded number of tries without progress.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use affinity_model::{eval, limits, Error, ReadRowsRequest, Result, Row, RowSet, RowStream};
use bytes::Bytes;
use crossbeam_channel::{Receiver, Sender};
use googleapis_tonic_google_bigtable_v2::google::bigtable::v2 as pb;
use tokio::sync::Notify;

use crate::conn::{Api, Conn};
use crate::convert::{filter_to_proto, row_set_to_proto, row_weight};
use crate::merger::RowMerger;
use crate::resume::remaining;
use crate::retry::RetryPolicy;
use crate::status::{from_status, is_retryable};
use crate::table::BigtableTable;

/// What the reader task sends the iterator.
enum Msg {
    Row(Row, usize),
    Failed(Error),
    End,
}

/// Bytes queued for the consumer, and a wake-up for the reader task when
/// the consumer has made room.
struct Buffer {
    queued: AtomicUsize,
    capacity: usize,
    room: Notify,
}

impl Buffer {
    fn is_full(&self) -> bool {
        self.queued.load(Ordering::Acquire) >= self.capacity
    }

    fn take(&self, weight: usize) {
        let before = self.queued.fetch_sub(weight, Ordering::AcqRel);
        if before.saturating_sub(weight) <= self.capacity / 2 {
            self.room.notify_one();
        }
    }

    async fn wait_for_room(&self) {
        loop {
            let notified = self.room.notified();
            if self.queued.load(Ordering::Acquire) <= self.capacity / 2 {
                return;
            }
            notified.await;
        }
    }
}

/// Everything the reader task needs to (re)issue the request.
struct Plan {
    path: String,
    app_profile: String,
    table: String,
    rows: RowSet,
    filter: Option<pb::RowFilter>,
    limit: Option<u64>,
    reversed: bool,
}

/// Where the read has got to.
#[derive(Default)]
struct Progress {
    last_key: Option<Bytes>,
    delivered: u64,
}

pub(crate) fn read_rows<'a>(
    table: &'a BigtableTable,
    request: &ReadRowsRequest,
) -> Result<RowStream<'a>> {
    limits::check_row_set(&request.rows)?;
    if let Some(filter) = &request.filter {
        eval::validate(filter)?;
    }
    let plan = Plan {
        path: table.path().to_string(),
        app_profile: table.shared().app_profile.clone(),
        table: affinity_model::Table::name(table).to_string(),
        rows: request.rows.clone(),
        filter: request.filter.as_ref().map(filter_to_proto).transpose()?,
        limit: request.rows_limit.filter(|&n| n > 0),
        reversed: request.reversed,
    };
    let shared = table.shared();
    let buffer = Arc::new(Buffer {
        queued: AtomicUsize::new(0),
        capacity: shared.read_buffer_bytes,
        room: Notify::new(),
    });
    let (tx, rx) = crossbeam_channel::unbounded();
    let task = shared.bridge.handle().spawn(drive(
        shared.conn.clone(),
        shared.retry,
        plan,
        tx,
        Arc::clone(&buffer),
    ));
    Ok(Box::new(RowIter {
        rx,
        buffer,
        task: task.abort_handle(),
        finished: false,
    }))
}

/// The synchronous end of a read.
struct RowIter {
    rx: Receiver<Msg>,
    buffer: Arc<Buffer>,
    task: tokio::task::AbortHandle,
    finished: bool,
}

impl Iterator for RowIter {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        if self.finished {
            return None;
        }
        match self.rx.recv() {
            Ok(Msg::Row(row, weight)) => {
                self.buffer.take(weight);
                Some(Ok(row))
            }
            Ok(Msg::Failed(err)) => {
                self.finished = true;
                Some(Err(err))
            }
            Ok(Msg::End) => {
                self.finished = true;
                None
            }
            Err(_) => {
                self.finished = true;
                Some(Err(Error::Internal(
                    "read stream stopped without finishing (client runtime shut down)".into(),
                )))
            }
        }
    }
}

impl Drop for RowIter {
    fn drop(&mut self) {
        // Stops the reader task, which cancels the server stream.
        self.task.abort();
    }
}

async fn drive(conn: Conn, policy: RetryPolicy, plan: Plan, tx: Sender<Msg>, buffer: Arc<Buffer>) {
    let msg = match read_all(&conn, policy, &plan, &tx, &buffer).await {
        Ok(()) => Msg::End,
        Err(err) => Msg::Failed(err),
    };
    let _ = tx.send(msg);
}

/// How one streaming call ended.
enum Outcome {
    /// The server sent everything asked for.
    Done,
    /// The consumer is behind: the stream was dropped to resume later.
    Paused,
    /// The iterator is gone.
    Abandoned,
}

/// Why one streaming call failed.
enum Failure {
    Status(tonic::Status),
    Invalid(Error),
}

impl From<tonic::Status> for Failure {
    fn from(status: tonic::Status) -> Failure {
        Failure::Status(status)
    }
}

async fn read_all(
    conn: &Conn,
    policy: RetryPolicy,
    plan: &Plan,
    tx: &Sender<Msg>,
    buffer: &Buffer,
) -> Result<()> {
    let mut progress = Progress::default();
    // Failed tries since the last one that returned a row.
    let mut failures = 0;
    loop {
        let rows = match &progress.last_key {
            None => plan.rows.clone(),
            Some(last) => match remaining(&plan.rows, last, plan.reversed) {
                Some(rows) => rows,
                None => return Ok(()),
            },
        };
        let rows_limit = match plan.limit {
            Some(limit) if progress.delivered >= limit => return Ok(()),
            Some(limit) => i64::try_from(limit - progress.delivered).unwrap_or(i64::MAX),
            None => 0,
        };
        let request = pb::ReadRowsRequest {
            table_name: plan.path.clone(),
            app_profile_id: plan.app_profile.clone(),
            rows: Some(row_set_to_proto(&rows)),
            filter: plan.filter.clone(),
            rows_limit,
            reversed: plan.reversed,
            ..Default::default()
        };
        let delivered_before = progress.delivered;
        match stream_once(conn, request, plan, &mut progress, tx, buffer).await {
            Ok(Outcome::Done) | Ok(Outcome::Abandoned) => return Ok(()),
            Ok(Outcome::Paused) => {
                failures = 0;
                buffer.wait_for_room().await;
            }
            Err(Failure::Invalid(err)) => return Err(err),
            Err(Failure::Status(status)) => {
                if progress.delivered > delivered_before {
                    failures = 0;
                }
                failures += 1;
                if !is_retryable(&status) || !policy.may_retry(failures) {
                    return Err(from_status(&status, Some(&plan.table)));
                }
                tracing::debug!(
                    table = plan.table,
                    failures,
                    code = ?status.code(),
                    message = status.message(),
                    "read stream failed; resuming after the last row"
                );
                tokio::time::sleep(policy.backoff(failures)).await;
            }
        }
    }
}

/// Put a row's families in name order, as the model's canonical cell order
/// wants. Bigtable leaves the order of a row's families unspecified (the
/// emulator sends them in creation order); within a family the server's
/// order (qualifier, newest first, interleave duplicates) is kept.
fn order_families(row: &mut Row) {
    if !row.cells.is_sorted_by(|a, b| a.family <= b.family) {
        row.cells.sort_by(|a, b| a.family.cmp(&b.family));
    }
}

/// One `ReadRows` call: merge its chunks into rows and queue them.
async fn stream_once(
    conn: &Conn,
    request: pb::ReadRowsRequest,
    plan: &Plan,
    progress: &mut Progress,
    tx: &Sender<Msg>,
    buffer: &Buffer,
) -> Result<Outcome, Failure> {
    let request = conn
        .request(request, Api::Data, "table_name", &plan.path)
        .await?;
    let mut stream = conn.data().read_rows(request).await?.into_inner();
    let mut merger = RowMerger::new(plan.reversed);
    if let Some(last) = &progress.last_key {
        // Rows of a resumed call must still come after the last one.
        merger.note_scanned(last.clone());
    }
    while let Some(response) = stream.message().await? {
        for chunk in response.chunks {
            let Some(mut row) = merger.push(chunk).map_err(Failure::Invalid)? else {
                continue;
            };
            order_families(&mut row);
            progress.last_key = Some(row.key.clone());
            progress.delivered += 1;
            let weight = row_weight(&row);
            buffer.queued.fetch_add(weight, Ordering::AcqRel);
            if tx.send(Msg::Row(row, weight)).is_err() {
                return Ok(Outcome::Abandoned);
            }
            if plan.limit.is_some_and(|limit| progress.delivered >= limit) {
                return Ok(Outcome::Done);
            }
        }
        if !response.last_scanned_row_key.is_empty() && merger.is_between_rows() {
            merger.note_scanned(response.last_scanned_row_key.clone());
            progress.last_key = Some(response.last_scanned_row_key);
        }
        if buffer.is_full() && merger.is_between_rows() {
            return Ok(Outcome::Paused);
        }
    }
    merger.finish().map_err(Failure::Invalid)?;
    Ok(Outcome::Done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use affinity_model::Cell;

    #[test]
    fn families_are_ordered_and_the_rest_kept() {
        let mut row = Row {
            key: Bytes::from_static(b"r"),
            cells: vec![
                Cell::new("g", "b", 1000, "x"),
                Cell::new("f", "a", 2000, "new"),
                Cell::new("f", "a", 1000, "old"),
                Cell::new("f", "a", 1000, "old"),
            ],
        };
        order_families(&mut row);
        let order: Vec<_> = row
            .cells
            .iter()
            .map(|c| (c.family.as_str(), c.timestamp_micros))
            .collect();
        assert_eq!(order, [("f", 2000), ("f", 1000), ("f", 1000), ("g", 1000)]);
    }
}
