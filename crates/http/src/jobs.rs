//! The batch jobs this server works on: its scheduled maintenance
//! ([`crate::State::maintain_every`]) and, on the same servers, jobs of its
//! applications whose worker died (a shard stalled: its lease expired).
//! They run on blocking threads.
//!
//! Jobs are records in the store (the engine's `jobs` module): `GET
//! /1/jobs` on any server lists every job of the application, whoever
//! runs it. Only the live counters in `/metrics` are this process's.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use affinity_engine::{Engine, JobKind, Progress, ShardState, WorkOptions};

/// Finished jobs kept for metrics (the oldest are forgotten).
const KEEP: usize = 200;

/// A job this server works (or worked) on.
#[derive(Debug)]
struct Local {
    app: String,
    id: String,
    progress: Progress,
    running: AtomicBool,
}

impl Local {
    fn is_running(&self) -> bool {
        self.running.load(Ordering::Relaxed)
    }
}

/// The jobs of this server.
#[derive(Debug)]
pub struct Jobs {
    worker: WorkOptions,
    list: Mutex<Vec<Arc<Local>>>,
    /// Set by [`Jobs::hand_back`]: no job starts here any more.
    closing: AtomicBool,
}

/// Threads of a job this server works on: half its cores (at least one),
/// so a maintenance leaves the requests the other half.
fn job_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

/// The nice value of a job's threads: under contention the kernel gives
/// each about a tenth of a request thread's share of a core (weights 110
/// and 1,024), so a maintenance pass slows down instead of the requests,
/// and still finishes on a saturated server.
const JOB_NICE: libc::c_int = 10;

impl Default for Jobs {
    fn default() -> Jobs {
        Jobs {
            worker: WorkOptions::this_process(job_threads()),
            list: Mutex::default(),
            closing: AtomicBool::new(false),
        }
    }
}

impl Jobs {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Local>>> {
        self.list.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether this server works on a job of `app`.
    pub fn running(&self, app: &str) -> bool {
        self.lock().iter().any(|j| j.app == app && j.is_running())
    }

    /// Whether this server works on job `id` of `app`.
    fn working_on(&self, app: &str, id: &str) -> bool {
        self.lock()
            .iter()
            .any(|j| j.app == app && j.id == id && j.is_running())
    }

    /// Start a maintenance job of `app` (blocking: creates its record,
    /// then works on it on a blocking thread). Returns its id.
    pub fn start_maintenance(
        self: &Arc<Self>,
        engine: &Arc<Engine>,
        app: &str,
    ) -> affinity_engine::Result<String> {
        let id = engine.new_job_id();
        engine.create_job(app, &id, JobKind::Maintain, 1)?;
        self.work(engine, app, &id, Some(0));
        Ok(id)
    }

    /// Take over the jobs of `app` with a stalled shard (blocking read;
    /// the work runs on blocking threads). Returns how many.
    pub fn resume_stalled(
        self: &Arc<Self>,
        engine: &Arc<Engine>,
        app: &str,
    ) -> affinity_engine::Result<usize> {
        let mut resumed = 0;
        for job in engine.jobs(app, 100)? {
            let stalled = job.shards.iter().any(|s| s.state == ShardState::Stalled);
            if stalled && !self.working_on(app, &job.id) {
                tracing::info!(job = %job.id, app, "taking over a stalled job");
                self.work(engine, app, &job.id, None);
                resumed += 1;
            }
        }
        Ok(resumed)
    }

    /// Stop working on jobs, for a server shutting down: no job starts
    /// here any more, and each running one stops before its next range
    /// (or user) and gives its lease up at once, so a live worker resumes
    /// it at its next look instead of after the lease expires. Returns
    /// once none runs here, or after `wait` (a job still running then is
    /// taken over when its lease expires, as after a crash); false then.
    pub async fn hand_back(&self, wait: std::time::Duration) -> bool {
        self.closing.store(true, Ordering::SeqCst);
        for job in self.lock().iter() {
            job.progress.release.store(true, Ordering::Relaxed);
        }
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let running: Vec<String> = self
                .lock()
                .iter()
                .filter(|j| j.is_running())
                .map(|j| format!("{}/{}", j.app, j.id))
                .collect();
            if running.is_empty() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(
                    jobs = %running.join(", "),
                    "jobs still running at shutdown: another worker takes them over when their leases expire"
                );
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Work on job `id` on a blocking thread until every shard is done,
    /// shard `prefer` first (nothing when the server is closing: the job
    /// waits for another worker).
    fn work(self: &Arc<Self>, engine: &Arc<Engine>, app: &str, id: &str, prefer: Option<usize>) {
        if self.closing.load(Ordering::SeqCst) {
            return;
        }
        let local = Arc::new(Local {
            app: app.to_string(),
            id: id.to_string(),
            progress: Progress::default(),
            running: AtomicBool::new(true),
        });
        {
            let mut list = self.lock();
            if list.len() >= KEEP {
                if let Some(i) = list.iter().position(|j| !j.is_running()) {
                    list.remove(i);
                }
            }
            list.push(Arc::clone(&local));
        }
        // `hand_back` may have started since the check above, and looked
        // at the list before this job was in it.
        if self.closing.load(Ordering::SeqCst) {
            local.progress.release.store(true, Ordering::Relaxed);
        }
        let (engine, jobs, this) = (Arc::clone(engine), Arc::clone(self), Arc::clone(&local));
        let spawned = std::thread::Builder::new().name("affinity-job".into()).spawn(move || {
            // The job's threads (this one and those it starts, which
            // inherit it) yield the cores to requests when both want them.
            crate::priority::lower_this_thread(JOB_NICE);
            let result =
                engine.work_on_job(&local.app, &local.id, prefer, &jobs.worker, &local.progress);
            match result {
                Ok(job) => {
                    tracing::info!(job = %local.id, app = %local.app, status = job.state(), "job done")
                }
                Err(affinity_engine::Error::Stopped) => {
                    tracing::info!(job = %local.id, app = %local.app, "job handed back")
                }
                Err(e) => {
                    tracing::error!(job = %local.id, app = %local.app, error = %e, "job failed")
                }
            }
            local.running.store(false, Ordering::Relaxed);
        });
        if let Err(e) = spawned {
            tracing::error!(job = %id, app, error = %e, "no thread for a job: another worker takes it over when its lease expires");
            this.running.store(false, Ordering::Relaxed);
        }
    }

    /// Job gauges in the Prometheus text format (this server's work).
    pub fn render_metrics(&self, out: &mut String) {
        let list = self.lock();
        let running = list.iter().filter(|j| j.is_running()).count();
        let _ = writeln!(
            out,
            "# HELP affinity_jobs_running Jobs this server works on.\n# TYPE affinity_jobs_running gauge\naffinity_jobs_running {running}"
        );
        let gauges = [
            ("affinity_job_rows_read", "Rows a job has read here."),
            ("affinity_job_users", "Users a job has visited here."),
            (
                "affinity_job_ranges_done",
                "Key ranges of the shard this server runs that are finished.",
            ),
            (
                "affinity_job_ranges_total",
                "Key ranges of the shard this server runs.",
            ),
        ];
        for (k, (name, help)) in gauges.iter().enumerate() {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for j in list.iter() {
                let p = j.progress.snapshot();
                let v = [
                    p.events,
                    p.users,
                    p.ranges_done as u64,
                    p.ranges_total as u64,
                ][k];
                let _ = writeln!(out, "{name}{{app=\"{}\",job=\"{}\"}} {v}", j.app, j.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn engine() -> Arc<Engine> {
        let engine = Engine::open(Arc::new(affinity_model::MemoryStore::new())).unwrap();
        engine
            .configure_app("shop", affinity_engine::AppConfig::default())
            .unwrap();
        Arc::new(engine)
    }

    #[cfg(target_os = "linux")]
    use crate::priority::this_thread as nice;

    /// A job's thread lowers its priority, and the threads it starts (a
    /// job's range workers) inherit it; other threads keep theirs.
    #[cfg(target_os = "linux")]
    #[test]
    fn job_threads_run_at_a_lower_priority() {
        let before = nice();
        let (own, child) = std::thread::spawn(|| {
            crate::priority::lower_this_thread(JOB_NICE);
            (nice(), std::thread::spawn(nice).join().unwrap())
        })
        .join()
        .unwrap();
        // A process already nicer than JOB_NICE may not be allowed to
        // come back up to it.
        assert!(
            own == JOB_NICE || (before > JOB_NICE && own == before),
            "the job's thread at nice {own} (the process at {before})"
        );
        assert_eq!(
            child, own,
            "a thread the job starts inherits its nice value"
        );
        assert_eq!(nice(), before, "the caller's thread is unchanged");
    }

    /// A job running here is told to hand back and waited for; once it
    /// stops, `hand_back` returns true. One that never stops is given up
    /// on after the wait.
    #[tokio::test]
    async fn hand_back_waits_for_the_running_jobs() {
        let jobs = Arc::new(Jobs::default());
        let local = Arc::new(Local {
            app: "shop".into(),
            id: "j1".into(),
            progress: Progress::default(),
            running: AtomicBool::new(true),
        });
        jobs.lock().push(Arc::clone(&local));
        // The job's worker: stops once told to.
        let worker = std::thread::spawn({
            let local = Arc::clone(&local);
            move || {
                while !local.progress.release.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                local.running.store(false, Ordering::Relaxed);
            }
        });
        assert!(jobs.hand_back(Duration::from_secs(60)).await);
        worker.join().unwrap();

        let stuck = Arc::new(Jobs::default());
        stuck.lock().push(Arc::new(Local {
            app: "shop".into(),
            id: "j2".into(),
            progress: Progress::default(),
            running: AtomicBool::new(true),
        }));
        assert!(!stuck.hand_back(Duration::from_millis(50)).await);
    }

    /// Once handing back, the server starts no job: a maintenance asked
    /// for is recorded, for another worker to take, but not run here.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closing_server_starts_no_job() {
        let engine = engine();
        let jobs = Arc::new(Jobs::default());
        assert!(jobs.hand_back(Duration::from_secs(1)).await);
        let id = {
            let (jobs, engine) = (Arc::clone(&jobs), Arc::clone(&engine));
            tokio::task::spawn_blocking(move || jobs.start_maintenance(&engine, "shop"))
                .await
                .unwrap()
                .unwrap()
        };
        assert!(!jobs.running("shop"));
        assert!(jobs.lock().is_empty());
        let job = engine.job("shop", &id).unwrap().expect("the job's record");
        assert_eq!(job.shards[0].state, ShardState::Pending);
    }
}
