//! The clients of both phases: `--clients` tasks sending event batches,
//! then `--readers` tasks reading profiles, each on its own keep-alive
//! connection until the phase's deadline; what they saw, tallied.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::{clip, HttpBenchArgs, Target, DAY_MS, GOAL_READ_P99_MS};
use crate::days::splitmix;
use crate::quantile;

/// What the clients of one phase saw.
#[derive(Default, Clone)]
pub struct Tally {
    /// Latencies of the answered requests (200, and 404 for profiles).
    latencies: Vec<Duration>,
    /// When each of those answers came, in ms since the phase started (in
    /// the order of `latencies` until [`Tally::ms`] sorts them).
    stamps: Vec<u32>,
    pub ok: u64,
    pub not_found: u64,
    pub errors: u64,
    pub first_error: Option<String>,
}

impl Tally {
    pub(super) fn error(&mut self, message: String) {
        self.errors += 1;
        self.first_error.get_or_insert(message);
    }

    fn merge(&mut self, other: Tally) {
        self.append(other, 0);
    }

    /// Add `other`'s answers as if its phase had started `offset_ms` after
    /// this one's (two phases one after the other, second by second).
    pub fn append(&mut self, other: Tally, offset_ms: u32) {
        self.latencies.extend(other.latencies);
        self.stamps
            .extend(other.stamps.iter().map(|s| s.saturating_add(offset_ms)));
        self.ok += other.ok;
        self.not_found += other.not_found;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }

    pub(super) fn answered(&mut self, started: Instant, sent: Instant) {
        self.latencies.push(sent.elapsed());
        self.stamps
            .push(u32::try_from(started.elapsed().as_millis()).unwrap_or(u32::MAX));
    }

    /// Answers, p99 (ms) and answers slower than the read goal of each
    /// whole second of the phase, before [`Tally::ms`] sorts the latencies.
    pub fn by_second(&self) -> Vec<(usize, f64, usize)> {
        let mut seconds: Vec<Vec<Duration>> = Vec::new();
        for (latency, stamp) in self.latencies.iter().zip(&self.stamps) {
            let s = *stamp as usize / 1000;
            if seconds.len() <= s {
                seconds.resize_with(s + 1, Vec::new);
            }
            seconds[s].push(*latency);
        }
        seconds
            .into_iter()
            .map(|mut l| {
                l.sort_unstable();
                let p99 = quantile(&l, 0.99).map_or(0.0, |d| d.as_secs_f64() * 1e3);
                let goal = Duration::from_secs_f64(GOAL_READ_P99_MS / 1e3);
                let slow = l.len() - l.partition_point(|d| *d <= goal);
                (l.len(), p99, slow)
            })
            .collect()
    }

    /// The mean latency of the answered requests.
    pub fn mean(&self) -> Duration {
        let n = self.latencies.len().max(1) as u32;
        self.latencies.iter().sum::<Duration>() / n
    }

    pub fn ms(&mut self, q: f64) -> f64 {
        self.latencies.sort_unstable();
        quantile(&self.latencies, q).map_or(0.0, |d| d.as_secs_f64() * 1e3)
    }
}

/// A phase's tally and its wall time.
pub struct Phase {
    pub tally: Tally,
    pub seconds: f64,
}

/// Builds request `n` of client `c`: its JSON body.
pub type Bodies = Arc<dyn Fn(usize, usize) -> String + Send + Sync>;

/// The requests of a run without history: `--batch` events a request over
/// `--users` users, timestamps within the last day (see [`events_body`]).
pub fn uniform_bodies(args: &HttpBenchArgs) -> Bodies {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let (batch, users) = (usize::from(args.batch), args.users());
    Arc::new(move |c, n| events_body(c, n, batch, users, now))
}

/// The ingest phase: `--clients` tasks sending batches until the deadline.
pub async fn ingest(args: &HttpBenchArgs, target: &Target, bodies: Bodies) -> Phase {
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let started = Instant::now();
    let tasks: Vec<_> = (0..args.clients)
        .map(|c| {
            let target = target.clone();
            let bodies = Arc::clone(&bodies);
            target.endpoint.clone().spawn(c, async move {
                let mut tally = Tally::default();
                let mut conn = match target.endpoint.connect().await {
                    Ok(conn) => conn,
                    Err(err) => {
                        tally.error(format!("POST /1/events failed: {err:#}"));
                        return tally;
                    }
                };
                let mut n = 0;
                while Instant::now() < deadline {
                    let body = bodies(c, n);
                    n += 1;
                    let t = Instant::now();
                    match conn.send("POST", "/1/events", body.as_bytes()).await {
                        Ok(answer) if answer.status == 200 => {
                            tally.answered(started, t);
                            tally.ok += 1;
                        }
                        Ok(answer) => tally.error(format!(
                            "POST /1/events answered {}: {}",
                            answer.status,
                            clip(&String::from_utf8_lossy(&answer.body))
                        )),
                        Err(err) => {
                            // The connection failed: this client stops.
                            tally.error(format!("POST /1/events failed: {err:#}"));
                            break;
                        }
                    }
                }
                tally
            })
        })
        .collect();
    join(tasks, started).await
}

/// One request's events: users spread over `users` (each client starts at
/// its own offset), timestamps within the last day, a view/click/conversion
/// mix and four filters per event. Written by hand: the clients share the
/// server's cores, so the body should cost little to build.
pub(crate) fn events_body(client: usize, n: usize, batch: usize, users: usize, now: i64) -> String {
    let mut body = String::with_capacity(batch * 220 + 16);
    body.push_str(r#"{"events":["#);
    for i in 0..batch {
        let seq = n * batch + i;
        let user = (client * 7919 + seq) % users;
        let age = (client * 1_000_003 + seq) as u64 % DAY_MS;
        let mix = splitmix(((client as u64) << 40) ^ seq as u64);
        let (kind, name) = match mix % 10 {
            0 => ("conversion", "Bought"),
            1..=3 => ("click", "Clicked"),
            _ => ("view", "Viewed"),
        };
        if i > 0 {
            body.push(',');
        }
        let _ = write!(
            body,
            r#"{{"eventType":"{kind}","eventName":"{name}","index":"products","userToken":"user{user}","timestamp":{},"filters":["brand:b{}","category:k{}","color:c{}","size:s{}"]}}"#,
            now - age as i64,
            (mix >> 8) % 40,
            (mix >> 16) % 25,
            (mix >> 24) % 12,
            (mix >> 32) % 6,
        );
    }
    body.push_str("]}");
    body
}

/// A read phase: `readers` tasks reading profiles of `users` (`user{i}`
/// for each `i` listed, at least one) for `seconds`; 404 (a user without a profile) is
/// an answer, not an error.
pub async fn read_profiles(
    target: &Target,
    readers: usize,
    seconds: f64,
    users: Arc<[u32]>,
) -> Phase {
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let tasks: Vec<_> = (0..readers)
        .map(|r| {
            let target = target.clone();
            let users = Arc::clone(&users);
            target.endpoint.clone().spawn(r, async move {
                let mut tally = Tally::default();
                let mut conn = match target.endpoint.connect().await {
                    Ok(conn) => conn,
                    Err(err) => {
                        tally.error(format!("GET a profile failed: {err:#}"));
                        return tally;
                    }
                };
                let mut n = r;
                while Instant::now() < deadline {
                    let user = users[(n * 31) % users.len()];
                    let path = format!("/1/profiles/personalization/user{user}");
                    n += readers;
                    let t = Instant::now();
                    match conn.send("GET", &path, b"").await {
                        Ok(answer) => match answer.status {
                            200 | 404 => {
                                tally.answered(started, t);
                                tally.ok += u64::from(answer.status == 200);
                                tally.not_found += u64::from(answer.status == 404);
                            }
                            status => tally.error(format!(
                                "GET {path} answered {status}: {}",
                                clip(&String::from_utf8_lossy(&answer.body))
                            )),
                        },
                        Err(err) => {
                            tally.error(format!("GET {path} failed: {err:#}"));
                            break;
                        }
                    }
                }
                tally
            })
        })
        .collect();
    join(tasks, started).await
}

pub(super) async fn join(tasks: Vec<tokio::task::JoinHandle<Tally>>, started: Instant) -> Phase {
    let mut tally = Tally::default();
    for task in tasks {
        match task.await {
            Ok(t) => tally.merge(t),
            Err(err) => tally.error(format!("a client task failed: {err}")),
        }
    }
    Phase {
        tally,
        seconds: started.elapsed().as_secs_f64(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn a_batch_is_live_varied_traffic_over_the_users() {
        let now = 1_700_000_000_000;
        let body: Value = serde_json::from_str(&events_body(3, 7, 1000, 100, now)).unwrap();
        let events = body["events"].as_array().unwrap();
        assert_eq!(events.len(), 1000);
        let mut users = std::collections::BTreeSet::new();
        let mut kinds = std::collections::BTreeSet::new();
        for e in events {
            let ts = e["timestamp"].as_i64().unwrap();
            assert!(ts <= now && now - ts < DAY_MS as i64, "{e}");
            let filters: Vec<&str> = e["filters"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_str().unwrap())
                .collect();
            let facets: Vec<&str> = filters.iter().filter_map(|f| f.split(':').next()).collect();
            assert_eq!(facets, ["brand", "category", "color", "size"], "{e}");
            users.insert(e["userToken"].as_str().unwrap().to_string());
            kinds.insert(e["eventType"].as_str().unwrap().to_string());
        }
        assert_eq!(users.len(), 100, "every user gets events");
        assert_eq!(kinds.len(), 3, "views, clicks and conversions");
        // Another request of the same client sends other events.
        assert_ne!(
            events_body(3, 7, 10, 100, now),
            events_body(3, 8, 10, 100, now)
        );
    }
}
