//! Full and unusable disks, through the binary: `affinity serve --data` on
//! a small tmpfs this test mounts, ingested until the disk is full (writes
//! refused with 503 and a message saying so, nothing acknowledged lost,
//! reads served, writes resuming by themselves once space is freed, every
//! refused batch stored exactly once when retried), and
//! store directories that are read-only or cannot be created refused at
//! start with a message naming them.
//!
//! Mounting needs root (or CAP_SYS_ADMIN). Without it the tests are
//! reported as ignored (skipped) with the reason, never passed; under
//! `CI=true` they fail. Hence its own `main` (libtest-mimic).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use affinity_engine::Engine;
use libtest_mimic::{Completion, Trial};
use serde_json::{json, Value};

const APP: &str = "disk";
const KEY: &str = "disk-key";
/// Events per batch; each batch goes to a user of its own.
const BATCH: usize = 50;
/// The tmpfs, and the filler taking most of it so that freeing space is
/// deleting one file. RocksDB resumes writing once the free space is at
/// least one memtable's worth (the store's 32 MiB write buffer): the
/// filler frees more than that, and the disk fills after about 12 MiB of
/// log.
const TMPFS_MIB: u64 = 96;
const FILLER_MIB: u64 = 84;
/// How long the test waits for the server to do something by itself
/// (RocksDB polls the free space every 5 s) before failing.
const PATIENCE: Duration = Duration::from_secs(90);

fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let trials: [(&str, fn()); 2] = [
        (
            "a_full_disk_refuses_writes_keeps_reads_and_resumes_with_nothing_lost",
            full_disk,
        ),
        (
            "a_read_only_or_uncreatable_store_directory_is_refused_at_start",
            unusable_directories,
        ),
    ];
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let missing = can_mount().err();
    let tests = trials
        .into_iter()
        .map(|(name, body)| {
            let ignored = missing.is_some() && !ci;
            if let (Some(why), true) = (&missing, ignored) {
                eprintln!("skipping {name}: {why}");
            }
            let missing = missing.clone();
            // Run anyway, it reports itself ignored (see tests/browser.rs
            // in the http crate).
            Trial::ignorable_test(name, move || match missing {
                Some(why) if ci => Err(format!("{why} (required under CI=true)").into()),
                Some(why) => Ok(Completion::ignored_with(why)),
                None => {
                    body();
                    Ok(Completion::Completed)
                }
            })
            .with_ignored_flag(ignored)
        })
        .collect();
    libtest_mimic::run(&args, tests).exit();
}

/// A tmpfs mounted on a directory of its own, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(options: &str) -> Result<Tmpfs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "cannot mount a tmpfs (needs root): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

fn can_mount() -> Result<(), String> {
    Tmpfs::mount("size=1m").map(drop)
}

/// One HTTP/1.1 request on a connection of its own: status and body.
fn request(addr: &str, method: &str, path: &str, body: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(PATIENCE))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nx-algolia-application-id: {APP}\r\n\
         x-algolia-api-key: {KEY}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    Ok((status, body))
}

/// Batch `n`: [`BATCH`] events of the user `u{n}`, a filter each.
fn batch(n: usize, now: i64) -> String {
    let events: Vec<Value> = (0..BATCH)
        .map(|i| {
            json!({"eventType": "view", "eventName": "Viewed", "index": "products",
                   "userToken": format!("u{n}"), "timestamp": now - i as i64,
                   // Distinct values: rows that do not compress to nothing.
                   "filters": [format!("brand:b{n}x{i}")]})
        })
        .collect();
    json!({ "events": events }).to_string()
}

fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn write_filler(path: &Path, mib: u64) {
    let mut file = std::fs::File::create(path).unwrap();
    let chunk = vec![0xa5u8; 1 << 20];
    for _ in 0..mib {
        file.write_all(&chunk).unwrap();
    }
    file.sync_all().unwrap();
}

fn full_disk() {
    let tmpfs = Tmpfs::mount(&format!("size={TMPFS_MIB}m")).unwrap();
    let filler = tmpfs.path().join("filler");
    write_filler(&filler, FILLER_MIB);
    let data = tmpfs.path().join("store");
    let server = common::serve(&data, &["--app-id", APP, "--api-key", KEY]);
    let addr = server.addr.clone();
    let now = now_millis();
    let strategy = json!({
        "eventsScoring": [{"eventName": "Viewed", "eventType": "view", "score": 10}],
        "facetsScoring": [{"facetName": "brand", "score": 100}],
        "personalizationImpact": 100});
    let (status, body) = request(
        &addr,
        "POST",
        "/1/strategies/personalization",
        &strategy.to_string(),
    )
    .unwrap();
    assert_eq!(status, 200, "{body}");

    // Ingest until the disk is full: batches refused in a row.
    let mut acked = Vec::new();
    let mut refused = Vec::new();
    let mut message = String::new();
    let mut n = 0;
    while refused.len() < 20 {
        assert!(n < 100_000, "the disk never filled");
        let (status, body) = request(&addr, "POST", "/1/events", &batch(n, now)).unwrap();
        match status {
            200 => acked.push(n),
            503 | 507 => {
                refused.push(n);
                message = body;
            }
            other => panic!("batch {n} answered {other}: {body}"),
        }
        n += 1;
    }
    assert!(
        !acked.is_empty(),
        "some batches were stored before the disk filled"
    );
    let answer: Value = serde_json::from_str(&message).unwrap();
    let text = answer["message"].as_str().unwrap();
    assert!(text.contains("disk is full"), "{text}");
    assert_eq!(answer["status"], 503, "{answer}");

    // Reads are served meanwhile.
    let user = acked[acked.len() / 2];
    let (status, body) = request(
        &addr,
        "GET",
        &format!("/1/profiles/personalization/u{user}"),
        "",
    )
    .unwrap();
    assert_eq!(status, 200, "{body}");
    let (status, _) = request(&addr, "GET", "/health", "").unwrap();
    assert_eq!(status, 200);

    // Space returns: writes resume without a restart.
    std::fs::remove_file(&filler).unwrap();
    let started = Instant::now();
    loop {
        let (status, body) = request(&addr, "POST", "/1/events", &batch(n, now)).unwrap();
        match status {
            200 => {
                acked.push(n);
                n += 1;
                break;
            }
            503 | 507 => refused.push(n),
            other => panic!("batch {n} answered {other}: {body}"),
        }
        n += 1;
        assert!(
            started.elapsed() < PATIENCE,
            "writes never resumed once space was freed: {body}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    for _ in 0..10 {
        let (status, body) = request(&addr, "POST", "/1/events", &batch(n, now)).unwrap();
        assert_eq!(status, 200, "{body}");
        acked.push(n);
        n += 1;
    }
    // A refused batch (503) may have had its event rows stored before its
    // state adds failed (the ingest protocol's window, which a retry
    // closes): every refused batch is retried, as a client does after a
    // 503, and must then be stored exactly once.
    for n in &refused {
        let (status, body) = request(&addr, "POST", "/1/events", &batch(*n, now)).unwrap();
        assert_eq!(status, 200, "retry of batch {n}: {body}");
    }
    drop(server);

    // Exact counts and profiles, every acknowledged and retried batch.
    let store = affinity_embedded::EmbeddedStore::open(&data).unwrap();
    let engine = Engine::open(Arc::new(store)).unwrap();
    for n in acked.iter().chain(&refused) {
        check_batch(&engine, *n);
    }
    eprintln!(
        "{} batches acknowledged and {} refused while the disk was full, then retried; \
         each stored exactly once with an exact profile",
        acked.len(),
        refused.len()
    );
}

/// Batch `n` is stored whole and once, and user `u{n}`'s profile is what
/// the naive reference scores from its events.
fn check_batch(engine: &Engine, n: usize) {
    use affinity_engine::scoring::reference::{profiles, ListedEvent};
    let user = format!("u{n}");
    let app = engine.app(APP).unwrap();
    let strategy = engine.strategy(APP).unwrap().unwrap();
    let now = engine.now_millis();
    let events = engine.user_events(&app, &user, 0, now + 1).unwrap();
    assert_eq!(events.len(), BATCH, "batch {n}");
    let listed: Vec<ListedEvent> = events
        .into_iter()
        .enumerate()
        .map(|(i, event)| ListedEvent {
            user: user.clone(),
            id: i.to_string(),
            event,
        })
        .collect();
    let retention = i64::from(app.config.retention_days) * 86_400_000;
    let want = profiles(&listed, &strategy, now, retention).remove(&user);
    assert_eq!(
        engine.profile(APP, &user).unwrap(),
        want,
        "{user}'s profile"
    );
}

/// `affinity serve --data DIR` fails at once with a message naming DIR.
fn refused_at_start(data: &Path, expect: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_affinity"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(data)
        .args(["--app-id", APP, "--api-key", KEY])
        .env_remove("AFFINITY_BIGTABLE")
        .env_remove("BIGTABLE_EMULATOR_HOST")
        .env_remove("AFFINITY_CONFIG")
        .output()
        .unwrap();
    assert!(!out.status.success(), "serve started on {}", data.display());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&data.display().to_string()), "{stderr}");
    for part in expect {
        assert!(stderr.contains(part), "{part:?} not in {stderr}");
    }
}

fn unusable_directories() {
    let read_only = Tmpfs::mount("size=1m,ro").unwrap();
    // An existing directory on a read-only filesystem.
    refused_at_start(read_only.path(), &["read-only"]);
    // A directory to create there.
    refused_at_start(&read_only.path().join("store"), &["cannot create"]);
    // A path through a regular file.
    let dir = tempfile::tempdir().unwrap();
    let file: PathBuf = dir.path().join("file");
    std::fs::write(&file, b"not a directory").unwrap();
    refused_at_start(&file.join("store"), &["cannot create"]);
    refused_at_start(&file, &["not a directory"]);
}
