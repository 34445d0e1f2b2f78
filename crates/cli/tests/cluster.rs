//! Beyond one machine, as separate processes: the emulator, three `affinity
//! serve --bigtable` servers and a two-shard `affinity maintain` job.
//! Events go round-robin through the three servers while one is SIGKILLed;
//! one shard process is SIGKILLed mid-job. Then: the job finished (its
//! shard taken over by the other process once the lease expired), its
//! status reads the same from every live server, and every acknowledged
//! event counts exactly once in the profiles every live server reads. A
//! retention changed through the CLI meanwhile reaches both live servers.
//!
//! Counts are read from scores: each user has one `anchor` event scored
//! 20 and `unit` events scored 1 on another brand, so the unit brand's
//! score (the raw score scaled so the anchor is 20) is the number of unit
//! events counted, below 20.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const APP: &str = "app1";
const KEY: &str = "cluster-admin-key";
const USERS: usize = 1500;
const BATCH: usize = 100;
const ROUNDS: usize = 4;
const SERVERS: usize = 3;

/// A child process, SIGKILLed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Cluster {
    host: String,
    bigtable: String,
}

impl Cluster {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_affinity"));
        c.args(args)
            .arg("--bigtable")
            .arg(&self.bigtable)
            .env("BIGTABLE_EMULATOR_HOST", &self.host)
            .env_remove("AFFINITY_CONFIG")
            .env_remove("AFFINITY_APP_ID")
            .env_remove("AFFINITY_API_KEY");
        c
    }

    /// `affinity serve` on a free port; returns it with its address.
    fn serve(&self) -> (Proc, String) {
        let mut child = self
            .command(&[
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--app-id",
                APP,
                "--api-key",
                KEY,
                "--maintain-every",
                "off",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start affinity serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("the server's first line");
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_string();
        (Proc(child), addr)
    }
}

/// One HTTP/1.1 request (`Connection: close`); the status and JSON body,
/// or the I/O error of a server that is gone.
fn http(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> std::io::Result<(u16, Value)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nX-Algolia-Application-Id: {APP}\r\n\
         X-Algolia-API-Key: {KEY}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no response head: {text:?}")))?;
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line: {head:?}")))?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = String::new();
        let mut rest = rest;
        while let Some((size, tail)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            out.push_str(&tail[..n]);
            rest = &tail[n + 2..];
        }
        out
    } else {
        rest.to_string()
    };
    let json = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&body).map_err(|e| std::io::Error::other(format!("{e}: {body}")))?
    };
    Ok((status, json))
}

fn user(i: usize) -> String {
    format!("u{i:04}")
}

/// Events of users `batch * BATCH ..`: one per user.
fn events(batch: usize, name: &str, brand: &str, timestamp: i64) -> Value {
    let events: Vec<Value> = (batch * BATCH..(batch + 1) * BATCH)
        .map(|i| {
            json!({"eventType": "click", "eventName": name, "index": "products",
                   "userToken": user(i), "timestamp": timestamp,
                   "filters": [format!("brand:{brand}")]})
        })
        .collect();
    json!({ "events": events })
}

/// The job as read from `addr`, without the answering server's clock.
fn job_without_clock(addr: &str, id: &str) -> Value {
    let (status, mut job) = http(addr, "GET", &format!("/1/jobs/{id}"), None).expect("job read");
    assert_eq!(status, 200, "{job}");
    for k in ["elapsedSeconds", "etaSeconds"] {
        job["progress"].as_object_mut().map(|p| p.remove(k));
    }
    job
}

#[ignore = "needs the Cloud Bigtable emulator (scripts/test runs it)"]
#[test]
fn three_servers_and_a_two_shard_job_behave_as_one_system() {
    let cluster = Cluster {
        host: affinity_bigtable::emulator::test_emulator_host(),
        bigtable: format!(
            "affinity-test/{}",
            affinity_bigtable::emulator::fresh_instance()
        ),
    };
    let dir = tempfile::tempdir().unwrap();
    let strategy = dir.path().join("strategy.json");
    std::fs::write(
        &strategy,
        json!({"eventsScoring": [{"eventName": "anchor", "eventType": "click", "score": 20},
                                 {"eventName": "unit", "eventType": "click", "score": 1}],
               "facetsScoring": [{"facetName": "brand", "score": 100}],
               "personalizationImpact": 60})
        .to_string(),
    )
    .unwrap();
    // Tables of its own: its retention changes below, which an
    // application holding events on the shared tables cannot do.
    let none = dir.path().join("none.jsonl");
    std::fs::write(&none, "").unwrap();
    let isolated = cluster
        .command(&["ingest", "--app", APP, "--dedicated-tables"])
        .arg(&none)
        .output()
        .unwrap();
    assert!(
        isolated.status.success(),
        "{}",
        String::from_utf8_lossy(&isolated.stderr)
    );
    let set = cluster
        .command(&["strategy", "set", "--app", APP])
        .arg(&strategy)
        .output()
        .unwrap();
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );

    let mut servers: Vec<Option<Proc>> = Vec::new();
    let mut addrs = Vec::new();
    for _ in 0..SERVERS {
        let (proc, addr) = cluster.serve();
        servers.push(Some(proc));
        addrs.push(addr);
    }
    let now = affinity_model::apply::now_micros() / 1000;
    let batches = USERS / BATCH;

    // Every user's anchor, through the three servers in turn: all answered.
    for b in 0..batches {
        let (status, body) = http(
            &addrs[b % SERVERS],
            "POST",
            "/1/events",
            Some(&events(b, "anchor", "Anchor", now - 60_000)),
        )
        .expect("anchor batch");
        assert_eq!(status, 200, "{body}");
    }

    // Unit events round-robin, one sender per server, while server 2 is
    // SIGKILLed once it has answered two batches.
    let acked = Arc::new(Mutex::new(vec![0u32; USERS]));
    let unacked = Arc::new(Mutex::new(vec![0u32; USERS]));
    let answered_by_2 = Arc::new(AtomicUsize::new(0));
    let senders: Vec<_> = (0..SERVERS)
        .map(|s| {
            let (addr, acked, unacked, answered) = (
                addrs[s].clone(),
                Arc::clone(&acked),
                Arc::clone(&unacked),
                Arc::clone(&answered_by_2),
            );
            std::thread::spawn(move || {
                for round in 0..ROUNDS {
                    for b in (0..batches).filter(|b| (b + round) % SERVERS == s) {
                        let body = events(b, "unit", "U", now - 50_000 + round as i64 * 1000);
                        let ok =
                            matches!(http(&addr, "POST", "/1/events", Some(&body)), Ok((200, _)));
                        let mut counts = if ok { acked.lock() } else { unacked.lock() }.unwrap();
                        for c in &mut counts[b * BATCH..(b + 1) * BATCH] {
                            *c += 1;
                        }
                        if ok && s == 2 {
                            answered.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                }
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    while answered_by_2.load(Ordering::SeqCst) < 2 {
        assert!(
            Instant::now() < deadline,
            "server 2 never answered two batches"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(servers[2].take()); // SIGKILL, mid-ingest
    for s in senders {
        s.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let unacked = unacked.lock().unwrap().clone();
    assert!(
        unacked.iter().any(|&n| n > 0),
        "server 2's later batches got no answer"
    );
    eprintln!(
        "unit events: {} acknowledged, {} unanswered (server 2 killed)",
        acked.iter().sum::<u32>(),
        unacked.iter().sum::<u32>()
    );
    let live: Vec<&String> = addrs[..2].iter().collect();

    // A retention changed through the CLI reaches both live servers
    // within the settings refresh: an event 10 days old leaves profiles.
    let old = json!({"events": [{"eventType": "click", "eventName": "anchor", "index": "products",
        "userToken": "old", "timestamp": now - 10 * 86_400_000, "filters": ["brand:Old"]}]});
    let (status, body) = http(live[0], "POST", "/1/events", Some(&old)).unwrap();
    assert_eq!(status, 200, "{body}");
    for addr in &live {
        let (status, body) = http(addr, "GET", "/1/profiles/personalization/old", None).unwrap();
        assert_eq!(status, 200, "{body}");
    }
    let empty = dir.path().join("none.jsonl");
    std::fs::write(&empty, "").unwrap();
    let changed = Instant::now();
    let set = cluster
        .command(&["ingest", "--app", APP, "--retention-days", "5"])
        .arg(&empty)
        .output()
        .unwrap();
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    for addr in &live {
        let deadline = changed + Duration::from_secs(30);
        loop {
            let (status, _) = http(addr, "GET", "/1/profiles/personalization/old", None).unwrap();
            if status == 404 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{addr} still counts an expired event"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    eprintln!(
        "retention seen by every live server after {:?}",
        changed.elapsed()
    );

    // A two-shard maintenance as two processes; shard 1's is SIGKILLed
    // once it holds its shard.
    let shard = |i: usize| {
        cluster
            .command(&[
                "maintain",
                "--app",
                APP,
                "--job",
                "cluster",
                "--shard",
                &format!("{i}/2"),
                "--threads",
                "1",
                "--lease",
                "3s",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map(Proc)
            .expect("start a shard")
    };
    let mut survivor = shard(0);
    let victim = shard(1);
    let victim_pid = victim.0.id();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (status, job) = http(live[0], "GET", "/1/jobs/cluster", None).expect("job read");
        if status == 200 && job["shards"][1]["status"] == "running" {
            let worker = job["shards"][1]["worker"].as_str().unwrap_or("");
            assert!(worker.contains(&format!("-{victim_pid}-")), "{job}");
            break;
        }
        assert!(Instant::now() < deadline, "shard 1 never started: {job}");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(victim); // SIGKILL, mid-job
    let exit = survivor.0.wait().expect("shard 0 exits");
    let mut out = String::new();
    survivor
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(exit.success(), "shard 0 failed: {out}");
    assert!(out.contains("job cluster"), "{out}");

    // The job, as every live server reads it.
    let job = job_without_clock(live[0], "cluster");
    assert_eq!(job_without_clock(live[1], "cluster"), job);
    assert_eq!(job["status"], "succeeded", "{job}");
    assert_eq!(job["type"], "maintain");
    // A range shard 1's first worker finished is not run again, nor
    // reported again (the users and `old`).
    let reported = job["report"]["users"].as_u64().unwrap();
    assert!(reported > 0 && reported <= USERS as u64 + 1, "{job}");
    let takeover = job["shards"][1]["worker"].as_str().unwrap();
    assert_eq!(Some(takeover), job["shards"][0]["worker"].as_str(), "{job}");
    assert!(!takeover.contains(&format!("-{victim_pid}-")), "{job}");
    eprintln!("job after the takeover: {job}");
    let (status, list) = http(live[1], "GET", "/1/jobs", None).unwrap();
    assert_eq!(status, 200);
    assert_eq!(list["jobs"].as_array().map(Vec::len), Some(1), "{list}");

    // Every acknowledged event counted once, on every live server.
    for i in 0..USERS {
        let path = format!("/1/profiles/personalization/{}", user(i));
        let (status, first) = http(live[0], "GET", &path, None).unwrap();
        assert_eq!(status, 200, "{first}");
        let (_, second) = http(live[1], "GET", &path, None).unwrap();
        assert_eq!(first, second, "servers disagree on {}", user(i));
        assert_eq!(first["scores"]["brand"]["Anchor"], 20, "{first}");
        let counted = first["scores"]["brand"]["U"].as_u64().unwrap_or(0) as u32;
        assert!(
            (acked[i]..=acked[i] + unacked[i]).contains(&counted),
            "{}: {counted} unit events counted, {} acknowledged, {} unanswered",
            user(i),
            acked[i],
            unacked[i]
        );
    }
}
