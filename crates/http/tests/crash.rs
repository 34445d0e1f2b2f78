//! `kill -9` of a server under load loses no acknowledged event.
//!
//! The server runs in a child process: this test binary re-executed with
//! the data directory in the environment. The binary has its own `main`
//! (`harness = false`, tests listed through libtest-mimic), so the child's
//! entry point is not a test of its own.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use affinity_engine::Engine;
use affinity_http::{Acl, Keys};
use serde_json::{json, Value};

const CHILD_DIR: &str = "AFFINITY_HTTP_CRASH_CHILD_DIR";
const APP: &str = "crash";
const KEY: &str = "crash-key";
const BATCH: usize = 200;
const CLIENTS: usize = 4;
/// Acknowledged batches to wait for before the kill.
const BEFORE_KILL: usize = 30;

fn main() {
    if let Ok(dir) = std::env::var(CHILD_DIR) {
        child_server(&dir);
        return;
    }
    let args = libtest_mimic::Arguments::from_args();
    let tests = vec![libtest_mimic::Trial::test(
        "kill_9_loses_no_acknowledged_event",
        || {
            kill_9_loses_no_acknowledged_event();
            Ok(())
        },
    )];
    libtest_mimic::run(&args, tests).exit();
}

/// The child: a server on the embedded store in `dir`, printing its
/// address, running until killed.
fn child_server(dir: &str) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = affinity_embedded::EmbeddedStore::open(dir).unwrap();
        let engine = Arc::new(Engine::open(Arc::new(store)).unwrap());
        let mut keys = Keys::default();
        keys.add(APP, KEY, [Acl::Admin]).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("LISTENING {}", listener.local_addr().unwrap());
        let state = affinity_http::State::new(engine, keys);
        affinity_http::serve(listener, state, std::future::pending())
            .await
            .unwrap();
    });
}

/// Kills the child when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn batch(user: &str, now: i64) -> Value {
    let events: Vec<Value> = (0..BATCH)
        .map(|i| {
            json!({"eventType": "view", "eventName": "Viewed", "index": "products",
                   "userToken": user, "timestamp": now - i as i64,
                   "filters": [format!("brand:b{}", i % 7)]})
        })
        .collect();
    json!({ "events": events })
}

fn kill_9_loses_no_acknowledged_event() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(CHILD_DIR, dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut child = Killed(child);
    let addr = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|l| {
            l.split_once("LISTENING ")
                .map(|(_, a)| a.trim().to_string())
        })
        .expect("the child server printed its address");
    let url = format!("http://{addr}/1/events");

    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let (url, acked) = (url.clone(), Arc::clone(&acked));
                tokio::spawn(async move {
                    let client = reqwest::Client::new();
                    for b in 0.. {
                        let user = format!("c{c}b{b}");
                        let sent = client
                            .post(&url)
                            .header("x-algolia-application-id", APP)
                            .header("x-algolia-api-key", KEY)
                            .body(batch(&user, now).to_string())
                            .send()
                            .await;
                        match sent {
                            Ok(r) if r.status().as_u16() == 200 => {
                                acked.lock().unwrap().push(user);
                            }
                            Ok(r) => panic!("batch refused: {}", r.status()),
                            Err(e) if acked.lock().unwrap().len() < BEFORE_KILL => {
                                panic!("request failed before the kill: {e}")
                            }
                            Err(_) => return, // the server is gone
                        }
                    }
                })
            })
            .collect();
        while acked.lock().unwrap().len() < BEFORE_KILL {
            assert!(
                !clients.iter().all(|c| c.is_finished()),
                "every client stopped before the kill"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        // SIGKILL while the clients are still sending.
        child.0.kill().unwrap();
        child.0.wait().unwrap();
        for c in clients {
            c.await.unwrap();
        }
    });

    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= BEFORE_KILL);
    let store = affinity_embedded::EmbeddedStore::open(dir.path()).unwrap();
    let engine = Engine::open(Arc::new(store)).unwrap();
    let app = engine.app(APP).unwrap();
    for user in &acked {
        let events = engine
            .user_events(&app, user, 0, engine.now_millis() + 1)
            .unwrap();
        assert_eq!(
            events.len(),
            BATCH,
            "acknowledged batch of {user} lost events"
        );
    }
}
