//! `kill -9` of a server under load loses no acknowledged event, stores
//! no batch in part, and leaves every profile exactly what its stored
//! events score: each acknowledged batch (a user of its own) is counted
//! after the restart, event by event, and each user's profile compared
//! with the naive reference over those events.
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
    let sent_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let now = sent_at;
        let strategy = json!({
            "eventsScoring": [{"eventName": "Viewed", "eventType": "view", "score": 10}],
            "facetsScoring": [{"facetName": "brand", "score": 100}],
            "personalizationImpact": 100});
        let set = reqwest::Client::new()
            .post(format!("http://{addr}/1/strategies/personalization"))
            .header("x-algolia-application-id", APP)
            .header("x-algolia-api-key", KEY)
            .body(strategy.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(set.status(), 200);
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
    let strategy = engine
        .strategy(APP)
        .unwrap()
        .expect("the strategy survived");
    let now = engine.now_millis();
    let retention = i64::from(app.config.retention_days) * 86_400_000;
    let stored = |user: &str| engine.user_events(&app, user, 0, now + 1).unwrap();
    for user in &acked {
        let events = stored(user);
        assert_eq!(
            events.len(),
            BATCH,
            "acknowledged batch of {user} lost events"
        );
        let mut times: Vec<i64> = events.iter().map(|e| e.timestamp_millis).collect();
        times.sort_unstable();
        let sent: Vec<i64> = (0..BATCH as i64).rev().map(|i| sent_at - i).collect();
        assert_eq!(times, sent, "{user}'s stored events are not the ones sent");
        check_profile(
            &engine,
            &strategy,
            user,
            &events,
            now,
            retention,
            "acknowledged",
        );
    }
    // The batches in flight at the kill (one per client at most): all
    // events or none. Their state may be missing (a crash between the
    // event rows and the state adds: the ingest protocol's documented
    // window, closed by the client's retry or a rebuild), never wrong.
    let mut in_flight = Vec::new();
    let mut without_state = 0;
    for c in 0..CLIENTS {
        let sent = acked
            .iter()
            .filter(|u| u.starts_with(&format!("c{c}b")))
            .count();
        let user = format!("c{c}b{sent}");
        let events = stored(&user);
        assert!(
            events.is_empty() || events.len() == BATCH,
            "{user}'s unacknowledged batch was stored in part: {} events",
            events.len()
        );
        if !events.is_empty() && engine.profile(APP, &user).unwrap().is_none() {
            without_state += 1;
        } else {
            check_profile(
                &engine,
                &strategy,
                &user,
                &events,
                now,
                retention,
                "in flight",
            );
        }
        if !events.is_empty() {
            in_flight.push((user, events));
        }
        let next = format!("c{c}b{}", sent + 1);
        assert!(stored(&next).is_empty(), "{next} was never sent");
    }
    // A rebuild restores what the window left out; every profile exact.
    let options = affinity_engine::RebuildOptions::default();
    engine
        .rebuild(APP, options, &affinity_engine::Progress::default())
        .unwrap();
    for (user, events) in &in_flight {
        check_profile(&engine, &strategy, user, events, now, retention, "rebuilt");
    }
    for user in &acked {
        check_profile(
            &engine,
            &strategy,
            user,
            &stored(user),
            now,
            retention,
            "rebuilt",
        );
    }
    eprintln!(
        "{} batches of {BATCH} acknowledged before the kill, all stored with exact profiles; \
         {} in flight also stored, {without_state} of them without state until the rebuild",
        acked.len(),
        in_flight.len()
    );
}

/// The engine's profile of `user` equals the naive reference's over the
/// user's stored `events` (absent when there are none).
fn check_profile(
    engine: &Engine,
    strategy: &affinity_engine::Strategy,
    user: &str,
    events: &[affinity_engine::scoring::ScoredEvent],
    now: i64,
    retention: i64,
    batch: &str,
) {
    use affinity_engine::scoring::reference::{profiles, ListedEvent};
    let listed: Vec<ListedEvent> = events
        .iter()
        .enumerate()
        .map(|(i, e)| ListedEvent {
            user: user.to_string(),
            id: i.to_string(),
            event: e.clone(),
        })
        .collect();
    let want = profiles(&listed, strategy, now, retention).remove(user);
    let got = engine.profile(APP, user).unwrap();
    assert_eq!(
        got, want,
        "{user}'s profile after the restart ({batch} batch)"
    );
}
