//! Jobs as shared state: every maintenance or rebuild run as a job has a
//! record in table `jobs` that any process on the store lists and reads,
//! and its shards are taken under leases, so a job whose worker dies is
//! finished by another.
//!
//! Row `app,id` of table `jobs`, family `j` (one version):
//!
//! | qualifier  | value                                                   |
//! |------------|---------------------------------------------------------|
//! | `meta`     | JSON `{type, createdAt, shards}`                        |
//! | `lease,I`  | `EXPIRY,WORKER`: EXPIRY 16 decimal digits (ms)          |
//! | `shard,I`  | JSON: the shard's status, worker, progress, report      |
//! | `done,I`   | set once shard I succeeded or failed                    |
//!
//! - **Ids** are unique across processes: a generated id is the creation
//!   time (13 digits of ms, so ids sort by age) and 32 random bits; a
//!   named job (`--job NAME`) is one job for every process given the name.
//! - **Leases**: a worker takes shard I with one `CheckAndMutate` whose
//!   predicate is "a live lease or `done,I`" (live: EXPIRY >= now, a
//!   value range over the fixed-width digits), so two workers never both
//!   get it. It renews the lease every third of its length with a
//!   `CheckAndMutate` on its own lease value, writing its progress in the
//!   same call; a renewal that finds another value stops the work before
//!   the next range or user ([`crate::Progress::stop`]). The result is
//!   written the same way, so a worker that lost its lease writes nothing.
//! - **Resuming**: a shard's work is the named job plan of `job.rs` (the
//!   split stored once, ranges marked done), so whoever takes a shard over
//!   skips the ranges finished before. A shard never started is left to
//!   its own index for one lease length after the job's creation (the
//!   pods of an indexed job start together), then anyone may take it.
//! - **Several shards, one job**: a worker runs its own shard, then takes
//!   any shard whose lease expired, and returns once every shard is done.
//! - **Overlap**: a worker paused past its lease (not dead) works on until
//!   its next renewal fails, alongside the worker that took over. Folds
//!   commit per user with `CheckAndMutate`, so a maintenance stays exact;
//!   a rebuild may then write a missing event's state twice, which reads
//!   correct as they correct a retried batch (its id cell counts 2).
//! - **Forgetting**: creating a job forgets the application's finished
//!   jobs created more than [`JOB_RECORD_DAYS`] days before, and all but
//!   the newest [`MAX_FINISHED_JOBS`] finished ones: their records and
//!   their plans (`~job,<id>` rows of `profiles.<app>`, see `job.rs`).
//!   Running and stalled jobs are never forgotten.

use std::collections::BTreeMap;

use affinity_model::{Mutation, ReadRowsRequest, RowFilter, RowSet};
use serde_json::{json, Value};

use crate::engine::{validate_app, Engine};
use crate::error::{Error, Result};

mod work;

pub use work::{WorkOptions, DEFAULT_LEASE, RETRY_BACKOFF};

/// The table of job records.
pub const JOBS_TABLE: &str = "jobs";
/// Its one family.
pub(crate) const FAMILY: &str = "j";
/// Most shards a job may have.
pub const MAX_SHARDS: usize = 1024;
/// Days a finished job's record is kept after its creation.
pub const JOB_RECORD_DAYS: i64 = 30;
/// Finished jobs' records kept per application, newest first.
pub const MAX_FINISHED_JOBS: usize = 500;

/// What a job does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// [`Engine::maintain`].
    Maintain,
    /// [`Engine::rebuild`].
    Rebuild,
}

impl JobKind {
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Maintain => "maintain",
            JobKind::Rebuild => "rebuild",
        }
    }

    fn parse(text: &str) -> Result<JobKind> {
        match text {
            "maintain" => Ok(JobKind::Maintain),
            "rebuild" => Ok(JobKind::Rebuild),
            _ => Err(Error::corrupt("job type", text.to_string())),
        }
    }
}

/// Where a shard is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardState {
    /// No worker has taken it yet.
    Pending,
    /// A worker holds a live lease on it.
    Running,
    /// Its worker's lease expired before it finished: the next worker to
    /// look takes it over.
    Stalled,
    Succeeded,
    Failed,
}

impl ShardState {
    pub fn as_str(self) -> &'static str {
        match self {
            ShardState::Pending => "pending",
            ShardState::Running => "running",
            ShardState::Stalled => "stalled",
            ShardState::Succeeded => "succeeded",
            ShardState::Failed => "failed",
        }
    }

    /// Succeeded or failed.
    pub fn finished(self) -> bool {
        matches!(self, ShardState::Succeeded | ShardState::Failed)
    }
}

/// One shard of a job, as stored (and its lease read at `now`).
#[derive(Debug, Clone, PartialEq)]
pub struct ShardStatus {
    pub index: usize,
    pub state: ShardState,
    /// The worker holding (or last holding) the shard.
    pub worker: Option<String>,
    pub lease_expires_at: Option<i64>,
    /// The worker's last written progress and, once finished, its report
    /// or error (JSON, see [`JobStatus::to_json`]).
    pub detail: Value,
}

/// A job's record.
#[derive(Debug, Clone, PartialEq)]
pub struct JobStatus {
    pub app: String,
    pub id: String,
    pub kind: JobKind,
    /// Milliseconds since the epoch.
    pub created_at: i64,
    pub shards: Vec<ShardStatus>,
}

/// Milliseconds as the API's `YYYY-MM-DDTHH:MM:SSZ`.
fn iso(millis: i64) -> String {
    affinity_rowkey::time::format_seconds(millis).unwrap_or_default()
}

/// Sum the integer fields of `from` into `into`.
fn add_counts(into: &mut serde_json::Map<String, Value>, from: &Value) {
    for (k, v) in from.as_object().into_iter().flatten() {
        if let Some(n) = v.as_u64() {
            let sum = into.get(k).and_then(Value::as_u64).unwrap_or(0) + n;
            into.insert(k.clone(), Value::from(sum));
        }
    }
}

impl JobStatus {
    /// `failed` once a shard failed and none runs, `succeeded` once every
    /// shard did, else `running`.
    pub fn state(&self) -> &'static str {
        if self.shards.iter().all(|s| s.state == ShardState::Succeeded) {
            "succeeded"
        } else if self.shards.iter().any(|s| s.state == ShardState::Failed)
            && self.shards.iter().all(|s| s.state.finished())
        {
            "failed"
        } else {
            "running"
        }
    }

    /// Every shard finished.
    pub fn finished(&self) -> bool {
        self.shards.iter().all(|s| s.state.finished())
    }

    /// The job as the API shows it: the shards' progress and reports
    /// summed, and each shard's own. Everything but `elapsedSeconds` and
    /// `etaSeconds` comes from the store, so every server shows the same.
    pub fn to_json(&self, now_millis: i64) -> Value {
        let mut progress = serde_json::Map::new();
        let mut report = serde_json::Map::new();
        let mut errors = Vec::new();
        let shards: Vec<Value> = self
            .shards
            .iter()
            .map(|s| {
                add_counts(&mut progress, &s.detail["progress"]);
                add_counts(&mut report, &s.detail["report"]);
                if let Some(e) = s.detail["error"].as_str() {
                    errors.push(format!("shard {}: {e}", s.index));
                }
                let mut out = json!({"shard": s.index, "status": s.state.as_str(),
                    "worker": s.worker, "progress": s.detail["progress"]});
                if let Some(t) = s.lease_expires_at.filter(|_| !s.state.finished()) {
                    out["leaseExpiresAt"] = Value::from(iso(t));
                }
                for k in ["report", "error"] {
                    if !s.detail[k].is_null() {
                        out[k] = s.detail[k].clone();
                    }
                }
                out
            })
            .collect();
        let elapsed = (now_millis - self.created_at).max(0) as f64 / 1000.0;
        let done = progress.get("rangesDone").and_then(Value::as_u64);
        let total = progress.get("rangesTotal").and_then(Value::as_u64);
        let eta = match (done, total) {
            (Some(d), Some(t)) if d > 0 && t >= d => {
                Value::from(elapsed * (t - d) as f64 / d as f64)
            }
            _ => Value::Null,
        };
        progress.insert("elapsedSeconds".into(), Value::from(elapsed));
        progress.insert("etaSeconds".into(), eta);
        let mut out = json!({
            "jobID": self.id,
            "type": self.kind.as_str(),
            "createdAt": iso(self.created_at),
            "status": self.state(),
            "progress": progress,
            "shards": shards,
        });
        match self.state() {
            "succeeded" => out["report"] = Value::from(report),
            "failed" => out["error"] = Value::from(errors.join("; ")),
            _ => {}
        }
        out
    }
}

/// Check a job id: 1 to 100 of `[A-Za-z0-9_.-]`.
pub fn validate_job_id(id: &str) -> Result<()> {
    if (1..=100).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        Ok(())
    } else {
        Err(Error::InvalidArgument {
            name: "job",
            reason: format!("{id:?} must be 1 to 100 of A-Z a-z 0-9 _ - ."),
        })
    }
}

pub(crate) fn row_key(app: &str, id: &str) -> Vec<u8> {
    format!("{app},{id}").into_bytes()
}

pub(crate) fn column(name: &str, index: usize) -> String {
    format!("{name},{index}")
}

fn parse_row(app: &str, id: &str, row: &affinity_model::Row, now: i64) -> Result<JobStatus> {
    let corrupt = |what: &str| Error::corrupt("job record", format!("{app},{id}: {what}"));
    let mut meta = None;
    let mut leases: BTreeMap<usize, (i64, String)> = BTreeMap::new();
    let mut details: BTreeMap<usize, Value> = BTreeMap::new();
    let mut done: BTreeMap<usize, ()> = BTreeMap::new();
    for cell in &row.cells {
        let q = std::str::from_utf8(&cell.qualifier).map_err(|_| corrupt("qualifier"))?;
        if q == "meta" {
            meta = Some(serde_json::from_slice::<Value>(&cell.value)?);
            continue;
        }
        let (name, index) = q.split_once(',').ok_or_else(|| corrupt(q))?;
        let index: usize = index.parse().map_err(|_| corrupt(q))?;
        match name {
            "lease" => {
                let text = std::str::from_utf8(&cell.value).map_err(|_| corrupt(q))?;
                let (t, w) = text.split_once(',').ok_or_else(|| corrupt(q))?;
                leases.insert(index, (t.parse().map_err(|_| corrupt(q))?, w.to_string()));
            }
            "shard" => {
                details.insert(index, serde_json::from_slice(&cell.value)?);
            }
            "done" => {
                done.insert(index, ());
            }
            _ => return Err(corrupt(q)),
        }
    }
    let meta = meta.ok_or_else(|| corrupt("no meta"))?;
    let kind = JobKind::parse(meta["type"].as_str().unwrap_or(""))?;
    let created_at = meta["createdAt"]
        .as_i64()
        .ok_or_else(|| corrupt("createdAt"))?;
    let count = meta["shards"]
        .as_u64()
        .map(|n| n as usize)
        .filter(|n| (1..=MAX_SHARDS).contains(n))
        .ok_or_else(|| corrupt("shards"))?;
    let shards = (0..count)
        .map(|index| {
            let detail = details.remove(&index).unwrap_or(Value::Null);
            let lease = leases.remove(&index);
            let state = if done.contains_key(&index) {
                if detail["status"] == "failed" {
                    ShardState::Failed
                } else {
                    ShardState::Succeeded
                }
            } else {
                match &lease {
                    None => ShardState::Pending,
                    Some((t, _)) if *t >= now => ShardState::Running,
                    Some(_) => ShardState::Stalled,
                }
            };
            ShardStatus {
                index,
                state,
                worker: lease
                    .as_ref()
                    .map(|(_, w)| w.clone())
                    .or_else(|| detail["worker"].as_str().map(str::to_string)),
                lease_expires_at: lease.map(|(t, _)| t),
                detail,
            }
        })
        .collect();
    Ok(JobStatus {
        app: app.to_string(),
        id: id.to_string(),
        kind,
        created_at,
        shards,
    })
}

impl Engine {
    /// A new job id, unique across processes: creation time and 32
    /// random bits.
    pub fn new_job_id(&self) -> String {
        format!(
            "{:013}-{:08x}",
            self.now_millis().max(0),
            rand::random::<u32>()
        )
    }

    /// Create job `id` of `app` with `shards` shards, or find it: every
    /// process given the same id joins one job. An id already used for
    /// another type of job or shard count is refused.
    pub fn create_job(
        &self,
        app: &str,
        id: &str,
        kind: JobKind,
        shards: usize,
    ) -> Result<JobStatus> {
        validate_app(app)?;
        validate_job_id(id)?;
        if !(1..=MAX_SHARDS).contains(&shards) {
            return Err(Error::InvalidArgument {
                name: "shard",
                reason: format!("{shards} shards: need 1 to {MAX_SHARDS}"),
            });
        }
        self.app(app)?;
        let now = self.now_millis();
        let meta = json!({"type": kind.as_str(), "createdAt": now, "shards": shards});
        let has_meta = RowFilter::Chain(vec![
            RowFilter::exact_family(FAMILY),
            RowFilter::exact_qualifier(b"meta"),
        ]);
        let existed = self.jobs_table.check_and_mutate_row(
            &row_key(app, id),
            Some(&has_meta),
            &[],
            &[Mutation::set_cell(
                FAMILY,
                "meta",
                0,
                serde_json::to_vec(&meta)?,
            )],
        )?;
        if !existed {
            let before = now - JOB_RECORD_DAYS * crate::DAY_MILLIS;
            self.forget_finished_jobs(app, before, MAX_FINISHED_JOBS)?;
        }
        let job = self
            .job(app, id)?
            .ok_or_else(|| Error::corrupt("job record", format!("{app},{id}: missing")))?;
        if job.kind != kind || job.shards.len() != shards {
            return Err(Error::InvalidArgument {
                name: "job",
                reason: format!(
                    "{id:?} is a {} job of {} shards, not a {} job of {shards}",
                    job.kind.as_str(),
                    job.shards.len(),
                    kind.as_str()
                ),
            });
        }
        Ok(job)
    }

    /// Forget `app`'s finished jobs created before `before_millis`, and
    /// all but the newest `keep` finished ones: each plan row, then each
    /// record (a crash in between leaves a record the next call forgets).
    /// Running and stalled jobs stay. Returns how many were forgotten.
    pub fn forget_finished_jobs(
        &self,
        app: &str,
        before_millis: i64,
        keep: usize,
    ) -> Result<usize> {
        let handle = self.app(app)?;
        let mut kept = 0;
        let mut forgotten = 0;
        for job in self.jobs(app, usize::MAX)? {
            if !job.finished() {
                continue;
            }
            if kept < keep && job.created_at >= before_millis {
                kept += 1;
                continue;
            }
            crate::job::forget(&handle, &job.id)?;
            self.jobs_table
                .mutate_row(&row_key(app, &job.id), &[Mutation::DeleteFromRow])?;
            forgotten += 1;
        }
        Ok(forgotten)
    }

    /// Job `id` of `app`, if there is one.
    pub fn job(&self, app: &str, id: &str) -> Result<Option<JobStatus>> {
        validate_app(app)?;
        if validate_job_id(id).is_err() {
            return Ok(None);
        }
        let filter = RowFilter::CellsPerColumnLimit(1);
        match self.jobs_table.read_row(&row_key(app, id), Some(&filter))? {
            Some(row) => Ok(Some(parse_row(app, id, &row, self.now_millis())?)),
            None => Ok(None),
        }
    }

    /// The jobs of `app`, newest first (generated ids sort by creation;
    /// named jobs by their creation time too), at most `limit`.
    pub fn jobs(&self, app: &str, limit: usize) -> Result<Vec<JobStatus>> {
        validate_app(app)?;
        let prefix = format!("{app},").into_bytes();
        let request = ReadRowsRequest::new(RowSet::from_range(affinity_model::RowRange::prefix(
            prefix.clone(),
        )))
        .with_filter(RowFilter::CellsPerColumnLimit(1));
        let now = self.now_millis();
        let mut out = Vec::new();
        for row in self.jobs_table.read_rows(&request)? {
            let row = row?;
            let id = String::from_utf8_lossy(&row.key[prefix.len()..]).into_owned();
            out.push(parse_row(app, &id, &row, now)?);
        }
        out.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        out.truncate(limit);
        Ok(out)
    }
}
