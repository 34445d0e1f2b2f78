//! Maintenance jobs (see [`affinity_engine::maintain`]) that this server
//! runs on its schedule ([`crate::State::maintain_every`]): run on a
//! blocking thread, their progress readable while they run (`GET
//! /1/jobs/{jobID}`) and exported as metrics.
//!
//! The registry is this process's memory: a job belongs to the server that
//! started it (the rollups it writes are in the store, for every server).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use affinity_engine::{Engine, MaintainOptions, MaintainReport, Progress};
use serde_json::{json, Value};

use crate::time::iso;

/// Jobs kept in memory (the oldest finished ones are forgotten).
const KEEP: usize = 200;

/// Where a job is.
#[derive(Debug, Clone, PartialEq)]
pub enum JobState {
    Running,
    Succeeded(MaintainReport),
    Failed(String),
}

/// One maintenance of an application's rollups.
#[derive(Debug)]
pub struct Job {
    pub id: u64,
    pub app: String,
    pub created_at: i64,
    pub progress: Progress,
    state: Mutex<JobState>,
}

impl Job {
    pub fn state(&self) -> JobState {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The job as the API's JSON.
    pub fn to_json(&self) -> Value {
        let p = self.progress.snapshot();
        let mut out = json!({
            "jobID": self.id.to_string(),
            "type": "maintain",
            "createdAt": iso(self.created_at),
            "progress": {
                "users": p.users,
                "rowsRead": p.events,
                "rangesDone": p.ranges_done,
                "rangesTotal": p.ranges_total,
                "elapsedSeconds": p.elapsed.as_secs_f64(),
                "etaSeconds": p.eta.map(|d| d.as_secs_f64()),
            },
        });
        let (status, extra) = match self.state() {
            JobState::Running => ("running", None),
            JobState::Succeeded(r) => (
                "succeeded",
                Some((
                    "report",
                    json!({"users": r.users, "folded": r.folded, "rowsRead": r.rows_read,
                           "conflicts": r.conflicts, "ranges": r.ranges}),
                )),
            ),
            JobState::Failed(e) => ("failed", Some(("error", Value::from(e)))),
        };
        out["status"] = Value::from(status);
        if let Some((k, v)) = extra {
            out[k] = v;
        }
        out
    }
}

/// The jobs of this server.
#[derive(Debug, Default)]
pub struct Jobs {
    next: AtomicU64,
    list: Mutex<Vec<Arc<Job>>>,
}

impl Jobs {
    /// Start maintaining `app` on a blocking thread; returns the job.
    pub fn start(&self, engine: Arc<Engine>, app: &str) -> Arc<Job> {
        let job = Arc::new(Job {
            id: self.next.fetch_add(1, Ordering::Relaxed) + 1,
            app: app.to_string(),
            created_at: engine.now_millis(),
            progress: Progress::default(),
            state: Mutex::new(JobState::Running),
        });
        {
            let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
            if list.len() >= KEEP {
                if let Some(i) = list.iter().position(|j| j.state() != JobState::Running) {
                    list.remove(i);
                }
            }
            list.push(Arc::clone(&job));
        }
        let running = Arc::clone(&job);
        tokio::task::spawn_blocking(move || {
            let result =
                engine.maintain(&running.app, MaintainOptions::default(), &running.progress);
            let state = match result {
                Ok(report) => {
                    tracing::info!(job = running.id, app = %running.app, users = report.users,
                        folded = report.folded, rows = report.rows_read, "maintenance finished");
                    JobState::Succeeded(report)
                }
                Err(e) => {
                    tracing::error!(job = running.id, app = %running.app, error = %e, "maintenance failed");
                    JobState::Failed(e.to_string())
                }
            };
            *running.state.lock().unwrap_or_else(|p| p.into_inner()) = state;
        });
        job
    }

    /// Whether a job of `app` is running.
    pub fn running(&self, app: &str) -> bool {
        self.list
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|j| j.app == app && j.state() == JobState::Running)
    }

    /// A job of `app` by id.
    pub fn get(&self, app: &str, id: u64) -> Option<Arc<Job>> {
        self.list
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|j| j.id == id && j.app == app)
            .cloned()
    }

    /// The jobs of `app`, newest first.
    pub fn of_app(&self, app: &str) -> Vec<Arc<Job>> {
        let list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        list.iter()
            .rev()
            .filter(|j| j.app == app)
            .cloned()
            .collect()
    }

    /// Job gauges in the Prometheus text format.
    pub fn render_metrics(&self, out: &mut String) {
        let list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        let running = list
            .iter()
            .filter(|j| j.state() == JobState::Running)
            .count();
        let _ = writeln!(
            out,
            "# HELP affinity_jobs_running Maintenance jobs running.\n# TYPE affinity_jobs_running gauge\naffinity_jobs_running {running}"
        );
        let gauges = [
            (
                "affinity_job_rows_read",
                "Day rows a maintenance job has read.",
            ),
            ("affinity_job_users", "Users a maintenance job has visited."),
            (
                "affinity_job_ranges_done",
                "Key ranges a maintenance job has finished.",
            ),
            (
                "affinity_job_ranges_total",
                "Key ranges of a maintenance job.",
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
