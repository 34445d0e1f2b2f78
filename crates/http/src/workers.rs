//! Per-core connection threads (`affinity serve --scheduler per-core`):
//! each a single-threaded tokio runtime of its own, the server dealing
//! accepted connections to them in turn.
//!
//! On tokio's multi-thread runtime (the default, `shared`) every task
//! may run on any worker, and a worker with nothing to do steals from
//! another's queue. That keeps the cores busy whatever the load, but it
//! reorders the ready tasks: under a steady load of short requests one
//! request waits for its turn much longer than the next. A thread that
//! owns its connections runs its ready tasks in the order they became
//! ready, so requests wait about as long as each other (figures:
//! docs/benchmarks.md, `bench http`). The price: a connection never
//! moves, so a long request holds up the other connections of its
//! thread, a thread that falls behind keeps its requests behind, and a
//! thread the kernel gives to other work (compactions, ingest) is not
//! helped by the others. Ingest batches and maintenance run on threads
//! of their own, not here.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::runtime::Handle;

/// How long a stopping thread waits for tasks still running on it.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// How a server's connections share the cores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scheduler {
    /// tokio's work-stealing runtime the server runs on.
    #[default]
    Shared,
    /// A thread per core ([`Workers::per_core`]), connections dealt to
    /// them in turn.
    PerCore,
}

impl Scheduler {
    /// The connection threads this scheduler serves on (`blocking`: see
    /// [`Workers::start`]); none for [`Scheduler::Shared`].
    pub fn workers(self, blocking: Option<usize>) -> std::io::Result<Option<Arc<Workers>>> {
        match self {
            Scheduler::PerCore => Ok(Some(Arc::new(Workers::per_core(blocking)?))),
            Scheduler::Shared => Ok(None),
        }
    }
}

impl std::str::FromStr for Scheduler {
    type Err = String;

    fn from_str(text: &str) -> Result<Scheduler, String> {
        match text {
            "per-core" => Ok(Scheduler::PerCore),
            "shared" => Ok(Scheduler::Shared),
            _ => Err(format!("{text:?} is not a scheduler: per-core or shared")),
        }
    }
}

impl std::fmt::Display for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Scheduler::PerCore => "per-core",
            Scheduler::Shared => "shared",
        })
    }
}

/// Connection threads; stopped (each waiting up to 5 s for tasks still
/// running) when dropped.
pub struct Workers {
    threads: Vec<Worker>,
    next: AtomicUsize,
}

struct Worker {
    handle: Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Workers {
    /// `threads` threads (at least one), named `affinity-worker-N`, each
    /// with a runtime whose blocking pool has at most `blocking` threads
    /// (default: tokio's) for the blocking engine work of its requests.
    pub fn start(threads: usize, blocking: Option<usize>) -> std::io::Result<Workers> {
        let mut started = Vec::with_capacity(threads.max(1));
        for i in 0..threads.max(1) {
            let mut builder = tokio::runtime::Builder::new_current_thread();
            builder
                .enable_all()
                .thread_name(format!("affinity-worker-{i}-blocking"));
            if let Some(n) = blocking {
                builder.max_blocking_threads(n.max(1));
            }
            let runtime = builder.build()?;
            let handle = runtime.handle().clone();
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let thread = std::thread::Builder::new()
                .name(format!("affinity-worker-{i}"))
                .spawn(move || {
                    runtime.block_on(async {
                        let _ = stopped.await;
                    });
                    runtime.shutdown_timeout(STOP_GRACE);
                })?;
            started.push(Worker {
                handle,
                stop: Some(stop),
                thread: Some(thread),
            });
        }
        Ok(Workers {
            threads: started,
            next: AtomicUsize::new(0),
        })
    }

    /// One thread per core this process may use.
    pub fn per_core(blocking: Option<usize>) -> std::io::Result<Workers> {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Workers::start(cores, blocking)
    }

    /// How many threads.
    pub fn len(&self) -> usize {
        self.threads.len()
    }

    /// Never: there is at least one thread.
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }

    /// Thread `i` (modulo their number): to run tasks beside the server's
    /// connections, as `affinity bench` runs its clients.
    pub fn handle(&self, i: usize) -> &Handle {
        &self.threads[i % self.threads.len()].handle
    }

    /// The thread for the next connection, in turn.
    pub(crate) fn next(&self) -> &Handle {
        self.handle(self.next.fetch_add(1, Ordering::Relaxed))
    }
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers")
            .field("threads", &self.threads.len())
            .finish()
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for worker in &mut self.threads {
            if let Some(stop) = worker.stop.take() {
                let _ = stop.send(());
            }
        }
        let me = std::thread::current().id();
        for worker in &mut self.threads {
            // The last holder may be a task on one of the threads (a
            // connection's router ending): that one stops by itself.
            if let Some(thread) = worker.thread.take().filter(|t| t.thread().id() != me) {
                let _ = thread.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deals_in_turn_and_runs_tasks_on_named_threads() {
        let workers = Workers::start(2, Some(1)).unwrap();
        assert_eq!(workers.len(), 2);
        let names: Vec<String> = (0..4)
            .map(|_| {
                let (tx, rx) = std::sync::mpsc::channel();
                workers.next().spawn(async move {
                    tx.send(std::thread::current().name().unwrap().to_string())
                        .unwrap();
                });
                rx.recv().unwrap()
            })
            .collect();
        assert_eq!(
            names,
            [
                "affinity-worker-0",
                "affinity-worker-1",
                "affinity-worker-0",
                "affinity-worker-1"
            ]
        );
        // Blocking work runs on the thread's own pool, and timers work.
        let (tx, rx) = std::sync::mpsc::channel();
        workers.handle(1).spawn(async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            let name =
                tokio::task::spawn_blocking(|| std::thread::current().name().unwrap().to_string())
                    .await
                    .unwrap();
            tx.send(name).unwrap();
        });
        assert_eq!(rx.recv().unwrap(), "affinity-worker-1-blocking");
        drop(workers);
    }

    #[test]
    fn the_last_holder_may_be_one_of_the_threads() {
        let workers = Arc::new(Workers::start(2, None).unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        let held = Arc::clone(&workers);
        workers.handle(0).spawn(async move {
            // Dropped here, on thread 0, after the test's own reference.
            tokio::time::sleep(Duration::from_millis(20)).await;
            drop(held);
            tx.send(()).unwrap();
        });
        drop(workers);
        rx.recv().unwrap();
    }

    #[test]
    fn schedulers_parse_by_name() {
        for scheduler in [Scheduler::PerCore, Scheduler::Shared] {
            assert_eq!(scheduler.to_string().parse(), Ok(scheduler));
        }
        let err = "fifo".parse::<Scheduler>().unwrap_err();
        assert!(err.contains("per-core or shared"), "{err}");
        assert!(Scheduler::Shared.workers(None).unwrap().is_none());
        assert!(Scheduler::PerCore.workers(Some(2)).unwrap().is_some());
    }

    #[test]
    fn zero_threads_means_one() {
        let workers = Workers::start(0, None).unwrap();
        assert_eq!(workers.len(), 1);
        assert!(!workers.is_empty());
    }
}
