//! `kill -9` of the batch jobs mid-run, through the binary: `affinity
//! maintain`, `affinity rebuild` and `affinity migrate backfill`, each
//! killed while it works, then the profiles read back and the job rerun to
//! its end. Every profile must equal, byte for byte, the export taken
//! before the job (maintenance, a rebuild and a migration change how
//! profiles are stored, never what they are), and the exported profiles
//! must be those the naive reference computes from the events generated
//! here (checked once, before the jobs). SIGTERM of `affinity maintain`
//! hands its shard back instead.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use affinity_engine::scoring::reference::{profiles, ListedEvent};
use affinity_engine::scoring::ScoredEvent;
use affinity_engine::{EventType, Strategy};
use common::ok;

const APP: &str = "shop";
const USERS: usize = 1500;
/// Users of the SIGTERM test: enough that its job outlasts the signal's
/// way to the child on a loaded machine (about 0.5 s of work on one
/// thread here, where 1,500 users take 0.05 s).
const SIGTERM_USERS: usize = 3 * USERS;
const EVENTS_PER_USER: usize = 12;
const DAYS: i64 = 20;
const DAY: i64 = 86_400_000;

const STRATEGY: &str = r#"{"eventsScoring":[{"eventName":"Viewed","eventType":"view","score":10},{"eventName":"Clicked","eventType":"click","score":30}],"facetsScoring":[{"facetName":"brand","score":100},{"facetName":"color","score":50}],"personalizationImpact":80}"#;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A store in `dir/data` with the strategy and `users` users' events over
/// the last [`DAYS`] days (so maintenance has days to fold), in `schema`;
/// returns the data path and the events as the reference sees them.
fn loaded(dir: &Path, schema: &str, users: usize) -> (std::path::PathBuf, Vec<ListedEvent>) {
    let data = dir.join("data");
    let file = |name: &str| dir.join(name).to_string_lossy().into_owned();
    std::fs::write(dir.join("strategy.json"), STRATEGY).unwrap();
    ok(
        &data,
        &["strategy", "set", "--app", APP, &file("strategy.json")],
    );
    let now = now_ms();
    let mut lines = String::new();
    let mut listed = Vec::new();
    for u in 0..users {
        for e in 0..EVENTS_PER_USER {
            let seed = (u * 7919 + e * 104_729) as i64;
            // Within the window, away from its edges.
            let ts = now - 60_000 - (seed % (DAYS * DAY));
            let (kind, name, event_type) = if e % 3 == 0 {
                ("click", "Clicked", EventType::Click)
            } else {
                ("view", "Viewed", EventType::View)
            };
            let brand = format!("b{}", seed % 9);
            let color = format!("c{}", (seed / 9) % 5);
            lines.push_str(&format!(
                r#"{{"eventType":"{kind}","eventName":"{name}","index":"products","userToken":"u{u}","timestamp":{ts},"filters":["brand:{brand}","color:{color}"]}}"#
            ));
            lines.push('\n');
            let counts = affinity_engine::scoring::FacetCounts::from_pairs(&[
                ("brand".to_string(), brand.clone()),
                ("color".to_string(), color.clone()),
            ]);
            listed.push(ListedEvent {
                user: format!("u{u}"),
                id: format!("{u}/{e}"),
                event: ScoredEvent {
                    event_type,
                    event_name: name.to_string(),
                    timestamp_millis: ts,
                    counts,
                },
            });
        }
    }
    std::fs::write(dir.join("events.jsonl"), lines).unwrap();
    ok(
        &data,
        &[
            "ingest",
            "--app",
            APP,
            "--schema",
            schema,
            &file("events.jsonl"),
        ],
    );
    (data, listed)
}

/// Every profile, by user, as `affinity export` writes it.
fn export(data: &Path, out: &Path) -> BTreeMap<String, String> {
    ok(
        data,
        &["export", "--app", APP, "--out", &out.to_string_lossy()],
    );
    std::fs::read_to_string(out)
        .unwrap()
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            (
                v["userToken"].as_str().unwrap().to_string(),
                line.to_string(),
            )
        })
        .collect()
}

/// The export matches the naive reference's profiles over `listed`.
fn check_reference(exported: &BTreeMap<String, String>, listed: &[ListedEvent]) {
    let strategy = Strategy::from_json(&serde_json::from_str(STRATEGY).unwrap()).unwrap();
    let want = profiles(listed, &strategy, now_ms(), 90 * DAY);
    assert_eq!(exported.len(), want.len(), "users exported");
    for (user, profile) in &want {
        let line: serde_json::Value = serde_json::from_str(&exported[user]).unwrap();
        assert_eq!(line, profile.to_json(), "{user}");
    }
}

/// Start `affinity ARGS --data DATA` on the embedded store, its standard
/// error to `stderr`.
fn start(data: &Path, args: &[&str], stderr: Stdio) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_affinity"))
        .args(args)
        .arg("--data")
        .arg(data)
        .env_remove("AFFINITY_BIGTABLE")
        .env_remove("BIGTABLE_EMULATOR_HOST")
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap()
}

/// Run `affinity ARGS --data DATA` and kill it with SIGKILL after `after`;
/// true when it was killed mid-run (false: it had finished).
fn kill_after(data: &Path, args: &[&str], after: Duration) -> bool {
    let mut child = start(data, args, Stdio::null());
    let started = Instant::now();
    while started.elapsed() < after {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "affinity {args:?} failed: {status}");
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    !status.success()
}

/// A fresh copy of `data` under `dir` for a probe run, which times a
/// command without touching the store the test goes on with.
fn probe_copy(data: &Path, dir: &Path) -> std::path::PathBuf {
    let copy = dir.join("probe");
    let _ = std::fs::remove_dir_all(&copy);
    let status = Command::new("cp")
        .arg("-a")
        .arg(data)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    copy
}

/// How long `args` takes to run whole on a copy of `data` (the copy is
/// then dropped): the kills are placed within that time.
fn full_run(data: &Path, dir: &Path, args: &[&str]) -> Duration {
    let copy = probe_copy(data, dir);
    let started = Instant::now();
    ok(&copy, args);
    let took = started.elapsed();
    std::fs::remove_dir_all(&copy).unwrap();
    took
}

/// Kill `args` at a quarter, half and three quarters of its whole run,
/// check the profiles after each kill, rerun it to its end, check them
/// again.
fn kill_rerun_check(data: &Path, dir: &Path, args: &[&str], before: &BTreeMap<String, String>) {
    let out = dir.join("after.jsonl");
    let whole = full_run(data, dir, args);
    let mut killed = 0;
    for share in [0.25, 0.5, 0.75] {
        let at = whole.mul_f64(share);
        if kill_after(data, args, at) {
            killed += 1;
            let during = export(data, &out);
            assert!(
                during == *before,
                "{args:?} killed after {at:?}: profiles changed"
            );
        }
    }
    assert!(killed > 0, "{args:?} always finished before its kill");
    let rerun = ok(data, args);
    assert!(!rerun.contains("not complete"), "{rerun}");
    let after = export(data, &out);
    assert!(after == *before, "{args:?} rerun: profiles changed");
    eprintln!(
        "{args:?}: whole run {whole:.2?}, killed {killed} times within it, rerun, every profile unchanged"
    );
}

#[test]
fn kill_9_of_maintain_and_rebuild_mid_job_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (data, listed) = loaded(dir.path(), "wide", USERS);
    let before = export(&data, &dir.path().join("before.jsonl"));
    check_reference(&before, &listed);
    kill_rerun_check(
        &data,
        dir.path(),
        &["maintain", "--app", APP, "--job", "m", "--threads", "1"],
        &before,
    );
    kill_rerun_check(
        &data,
        dir.path(),
        &["rebuild", "--app", APP, "--job", "r", "--threads", "1"],
        &before,
    );
    // A fresh maintenance after the interrupted ones: still the same.
    ok(&data, &["maintain", "--app", APP]);
    assert!(export(&data, &dir.path().join("last.jsonl")) == before);
}

/// `affinity ARGS --data DATA` started and past the line saying which job
/// it works on (printed once its signal listener listens), with the
/// thread collecting its standard error.
fn started_job(
    data: &Path,
    args: &[&str],
) -> (std::process::Child, std::thread::JoinHandle<String>) {
    use std::io::BufRead;

    let mut child = start(data, args, Stdio::piped());
    let stderr = child.stderr.take().unwrap();
    let (working, started) = std::sync::mpsc::channel::<()>();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr).lines() {
            let line = line.unwrap();
            if line.starts_with("job ") {
                let _ = working.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    started
        .recv_timeout(Duration::from_secs(120))
        .expect("the job's first line");
    (child, reader)
}

/// How long `args` works once it said which job it works on, on a copy of
/// `data` (its start, the store's opening, is not part of it).
fn job_time(data: &Path, dir: &Path, args: &[&str]) -> Duration {
    let copy = probe_copy(data, dir);
    let (mut child, reader) = started_job(&copy, args);
    let started = Instant::now();
    assert!(
        child.wait().unwrap().success(),
        "{}",
        reader.join().unwrap()
    );
    let took = started.elapsed();
    reader.join().unwrap();
    std::fs::remove_dir_all(&copy).unwrap();
    took
}

/// Send SIGTERM to `affinity ARGS --data DATA` `after` it said which job
/// it works on; its standard error when that stopped it mid-run, `None`
/// when it had finished first.
fn term_after(data: &Path, args: &[&str], after: Duration) -> Option<String> {
    let (mut child, reader) = started_job(data, args);
    std::thread::sleep(after);
    // SAFETY: a signal to our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let status = child.wait().unwrap();
    let stderr = reader.join().unwrap();
    (!status.success()).then_some(stderr)
}

/// SIGTERM (a Kubernetes pod's stop) of `affinity maintain` mid-job: it
/// hands its shard back and says so; the record shows the shard stalled
/// at once (its 60 s lease given up, not expired), the profiles are
/// unchanged, and a rerun finishes it.
#[test]
fn sigterm_of_maintain_hands_its_shard_back() {
    let dir = tempfile::tempdir().unwrap();
    let (data, _) = loaded(dir.path(), "wide", SIGTERM_USERS);
    let before = export(&data, &dir.path().join("before.jsonl"));
    let args = [
        "maintain",
        "--app",
        APP,
        "--job",
        "t",
        "--threads",
        "1",
        "--lease",
        "60s",
    ];
    // Shares of the job's own time, not of the whole process's: on a fast
    // machine the job is a small part of it. At 0 the signal comes as the
    // job starts, before its first user.
    let whole = job_time(&data, dir.path(), &args);
    let mut handed = 0;
    for share in [0.0, 0.2, 0.5] {
        let Some(stderr) = term_after(&data, &args, whole.mul_f64(share)) else {
            continue;
        };
        let shown: serde_json::Value =
            serde_json::from_str(&ok(&data, &["jobs", "show", "--app", APP, "t"])).unwrap();
        let shard = &shown["shards"][0];
        // A signal that comes before the shard is claimed (at share 0 on
        // a slow machine) leaves it pending and never leased, and says
        // so; a claimed one is given up at once.
        let never_claimed = shard["status"] == "pending" && shard["worker"].is_null();
        if never_claimed {
            assert!(
                stderr
                    .contains("stopped: job t left as it was (this process had not taken shard 0"),
                "{stderr}"
            );
        } else {
            assert!(stderr.contains("stopped: job t handed back"), "{stderr}");
            assert_eq!(shard["status"], "stalled", "{shown}");
        }
        assert!(export(&data, &dir.path().join("during.jsonl")) == before);
        handed += 1;
    }
    assert!(handed > 0, "maintain always finished before its SIGTERM");
    eprintln!("maintain (the job {whole:.2?}) handed back {handed} of 3 times, then rerun");
    let rerun = ok(&data, &args);
    assert!(!rerun.contains("not complete"), "{rerun}");
    let shown: serde_json::Value =
        serde_json::from_str(&ok(&data, &["jobs", "show", "--app", APP, "t"])).unwrap();
    assert_eq!(shown["status"], "succeeded", "{shown}");
    assert!(export(&data, &dir.path().join("after.jsonl")) == before);
}

#[test]
fn kill_9_of_a_migration_backfill_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (data, listed) = loaded(dir.path(), "narrow", USERS);
    let before = export(&data, &dir.path().join("before.jsonl"));
    check_reference(&before, &listed);
    ok(&data, &["migrate", "start", "--app", APP, "--to", "wide"]);
    kill_rerun_check(
        &data,
        dir.path(),
        &["migrate", "backfill", "--app", APP],
        &before,
    );
    let verified = ok(&data, &["migrate", "verify", "--app", APP]);
    assert!(
        verified.contains(&format!("{USERS} users have equal profiles")),
        "{verified}"
    );
    ok(&data, &["migrate", "cut-over", "--app", APP]);
    assert!(export(&data, &dir.path().join("wide.jsonl")) == before);
}
