//! The repair thread: stores the rows reads found as long chains of merge
//! operands as the values they merged to ([`EmbeddedTable::store_merged`]),
//! off the readers' threads.
//!
//! Reads run on the server's async threads; a repair is a write, and a
//! write joins RocksDB's write queue behind whatever ingestion is writing
//! (on threads of lower priority), and allocates under the writers' load.
//! So a read only hands its repairs over, and never waits to do that: the
//! queue is tried, not locked, and bounded. A repair left out costs
//! nothing but the merge the next read of the row does again. The thread
//! sleeps while nothing is queued; woken by the first repair, it waits a
//! [`TICK`] and takes all that came meanwhile, rather than being woken by
//! each read: a thread woken thousands of times a second takes the core
//! from the readers each time.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::scan::Repair;
use crate::store::Inner;
use crate::table::EmbeddedTable;

/// Merged rows waiting in the queue, in bytes, past which a read's
/// repairs are left out.
const MAX_QUEUED_BYTES: usize = 16 << 20;

/// How long the repair thread gathers repairs before it stores them.
const TICK: Duration = Duration::from_millis(20);

/// The repairs of one read of one table.
pub(crate) struct RepairJob {
    pub table: String,
    /// The column family the read saw (see [`EmbeddedTable::store_merged`]).
    pub cf_name: String,
    pub repairs: Vec<Repair>,
}

impl RepairJob {
    fn bytes(&self) -> usize {
        self.repairs.iter().map(|r| r.merged.len()).sum()
    }
}

/// The queue between the readers and the repair thread.
#[derive(Default)]
pub(crate) struct RepairQueue {
    state: Mutex<QueueState>,
    changed: Condvar,
}

#[derive(Default)]
struct QueueState {
    jobs: VecDeque<RepairJob>,
    bytes: usize,
    /// The thread is storing a job it took.
    busy: bool,
    /// No thread takes jobs (stopped, or none could be started).
    stopped: bool,
}

impl RepairQueue {
    /// Queue `job` for the repair thread, unless the queue is held this
    /// instant, full or stopped; never waits. True when queued.
    pub fn offer(&self, job: RepairJob) -> bool {
        let Some(mut state) = self.state.try_lock() else {
            return false;
        };
        let bytes = job.bytes();
        if state.stopped || state.bytes + bytes > MAX_QUEUED_BYTES {
            return false;
        }
        state.bytes += bytes;
        state.jobs.push_back(job);
        let first = state.jobs.len() == 1;
        drop(state);
        if first {
            self.changed.notify_all();
        }
        true
    }

    /// The jobs queued a [`TICK`] after the first (sooner for a
    /// [`RepairQueue::settle`]); `None` once stopped. They are being
    /// stored until [`RepairQueue::done`].
    fn next(&self) -> Option<Vec<RepairJob>> {
        let mut state = self.state.lock();
        while state.jobs.is_empty() && !state.stopped {
            self.changed.wait(&mut state);
        }
        if !state.stopped {
            self.changed.wait_for(&mut state, TICK);
        }
        if state.stopped {
            return None;
        }
        state.bytes = 0;
        state.busy = true;
        Some(state.jobs.drain(..).collect())
    }

    fn done(&self) {
        self.state.lock().busy = false;
        self.changed.notify_all();
    }

    fn stop(&self) {
        let mut state = self.state.lock();
        state.stopped = true;
        state.jobs.clear();
        state.bytes = 0;
        drop(state);
        self.changed.notify_all();
    }

    /// Wait until every queued repair is stored (or left out by a stop).
    #[cfg(test)]
    pub fn settle(&self) {
        let mut state = self.state.lock();
        while !state.stopped && (state.busy || !state.jobs.is_empty()) {
            // Wakes the thread too.
            self.changed.notify_all();
            self.changed.wait_for(&mut state, TICK);
        }
    }
}

/// The running repair thread; stopped (and joined) by [`Repairer::stop`].
pub(crate) struct Repairer {
    queue: Arc<RepairQueue>,
    handle: Option<JoinHandle<()>>,
}

impl Repairer {
    /// Start storing the repairs queued in `inner.repairs`. The thread
    /// holds the store weakly.
    pub fn start(inner: &Arc<Inner>) -> Repairer {
        let queue = Arc::clone(&inner.repairs);
        let weak: Weak<Inner> = Arc::downgrade(inner);
        let thread_queue = Arc::clone(&queue);
        let handle = std::thread::Builder::new()
            .name("affinity-repair".into())
            .spawn(move || {
                while let Some(jobs) = thread_queue.next() {
                    if let Some(inner) = weak.upgrade() {
                        for job in jobs {
                            // Only an optimisation: a failure leaves the
                            // operands, which the next read merges again.
                            let table = EmbeddedTable::new(job.table, Arc::clone(&inner));
                            let _ = table.store_merged(&job.cf_name, &job.repairs);
                        }
                    }
                    thread_queue.done();
                }
            })
            .ok();
        if handle.is_none() {
            queue.stop();
        }
        Repairer { queue, handle }
    }

    /// Stop the thread and wait for it (a repair being stored finishes
    /// first; the queued ones are left out).
    pub fn stop(mut self) {
        self.queue.stop();
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(bytes: usize) -> RepairJob {
        RepairJob {
            table: "t".into(),
            cf_name: "t/0".into(),
            repairs: vec![Repair {
                key: b"row".to_vec(),
                merged: vec![0; bytes],
                seen: 0,
            }],
        }
    }

    #[test]
    fn offers_never_wait_and_the_queue_is_bounded() {
        let queue = RepairQueue::default();
        assert!(queue.offer(job(MAX_QUEUED_BYTES - 10)));
        assert!(!queue.offer(job(11)), "past the bound: left out");
        assert!(queue.offer(job(10)));
        let held = queue.state.lock();
        assert!(!queue.offer(job(1)), "the queue held: left out at once");
        drop(held);
        let taken = queue.next().expect("the jobs");
        assert_eq!(taken.len(), 2);
        assert_eq!(taken[0].bytes(), MAX_QUEUED_BYTES - 10);
        assert!(queue.offer(job(MAX_QUEUED_BYTES)), "room again once taken");
        queue.done();
        queue.stop();
        assert!(queue.next().is_none());
        assert!(!queue.offer(job(1)), "stopped");
        queue.settle();
    }
}
