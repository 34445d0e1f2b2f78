//! The query-time phases, after the profile reads: `--readers` clients
//! asking heavy users' optional filters
//! (`GET /1/profiles/personalization/{user}/optionalFilters`) for
//! `--seconds`, then re-ranking 100 hits for heavy users
//! (`POST /1/indexes/products/rerank`) for `--seconds`. The hits carry
//! their facet attributes, drawn from the values the events use, so a
//! re-ranking reads the profile and no catalog: these phases time what a
//! search front end adds per query.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::load::{join, Phase, Tally};
use super::{clip, Target, GOAL_READERS, GOAL_READ_P99_MS};
use crate::days::{splitmix, FACETS};

/// Hits per re-ranking.
pub const RERANK_HITS: usize = 100;
/// Distinct hit lists the clients cycle through.
const HIT_LISTS: usize = 16;

/// One query-time phase's figures.
pub struct QueryReads {
    pub what: &'static str,
    /// "heavy users", or "users" in a run without history.
    pub who: &'static str,
    pub users: usize,
    pub readers: usize,
    pub requests: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub seconds: f64,
    pub per_s: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    /// With 50 closed-loop clients, the mean is clients over the rate; the
    /// p99 over the mean shows how evenly the requests were served.
    pub mean_ms: f64,
}

impl QueryReads {
    fn new(
        what: &'static str,
        who: &'static str,
        users: usize,
        readers: usize,
        mut phase: Phase,
    ) -> QueryReads {
        let t = &phase.tally;
        let (requests, errors, first_error) = (t.ok, t.errors, t.first_error.clone());
        QueryReads {
            what,
            who,
            users,
            readers,
            requests,
            errors,
            first_error,
            seconds: phase.seconds,
            per_s: requests as f64 / phase.seconds,
            p50_ms: phase.tally.ms(0.5),
            p90_ms: phase.tally.ms(0.9),
            p99_ms: phase.tally.ms(0.99),
            mean_ms: phase.tally.mean().as_secs_f64() * 1e3,
        }
    }

    pub fn met(&self) -> bool {
        self.readers >= GOAL_READERS && self.errors == 0 && self.p99_ms <= GOAL_READ_P99_MS
    }

    pub fn line(&self) -> String {
        format!(
            "{} ({} {}): {} clients, {} requests in {:.1} s = {:.0} requests/s; p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, mean {:.2} ms; {} errors (goal: p99 <= {GOAL_READ_P99_MS} ms at {GOAL_READERS} clients)",
            self.what, self.users, self.who, self.readers, self.requests, self.seconds, self.per_s,
            self.p50_ms, self.p90_ms, self.p99_ms, self.mean_ms, self.errors
        )
    }

    pub fn json(&self) -> Value {
        json!({"who": self.who, "users": self.users, "readers": self.readers, "requests": self.requests,
               "per_s": self.per_s, "p50_ms": self.p50_ms, "p90_ms": self.p90_ms,
               "p99_ms": self.p99_ms, "mean_ms": self.mean_ms,
               "errors": self.errors, "seconds": self.seconds, "met": self.met()})
    }
}

/// A list of [`RERANK_HITS`] hits as JSON text, each with the four bench
/// facets' values drawn from `seed`.
fn hit_list(seed: u64, value_prefix: &str) -> String {
    let mut out = String::from("[");
    for i in 0..RERANK_HITS {
        let mut rest = splitmix(seed ^ ((i as u64) << 20));
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, r#"{{"objectID":"o{}""#, rest % 100_000);
        for (facet, prefix, n) in FACETS {
            rest = splitmix(rest);
            let _ = write!(out, r#","{facet}":"{value_prefix}{prefix}{}""#, rest % n);
        }
        out.push('}');
    }
    out.push(']');
    out
}

/// What request `n` of a phase sends for `user`: method and path, its
/// body written into the buffer given (cleared; kept from request to
/// request, as a load generator's should be).
type Request = Arc<dyn Fn(u32, usize, &mut Vec<u8>) -> (&'static str, String) + Send + Sync>;

/// `readers` clients sending `request` for `users` for `seconds`; only
/// 200 counts as an answer.
async fn drive(
    target: &Target,
    readers: usize,
    seconds: f64,
    users: Arc<[u32]>,
    request: Request,
) -> Phase {
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let tasks: Vec<_> = (0..readers)
        .map(|r| {
            let (target, users, request) =
                (target.clone(), Arc::clone(&users), Arc::clone(&request));
            target.endpoint.clone().spawn(r, async move {
                let mut tally = Tally::default();
                let mut conn = match target.endpoint.connect().await {
                    Ok(conn) => conn,
                    Err(err) => {
                        tally.error(format!("connecting failed: {err:#}"));
                        return tally;
                    }
                };
                let mut n = r;
                let mut body = Vec::new();
                while Instant::now() < deadline {
                    let user = users[(n * 31) % users.len()];
                    body.clear();
                    let (method, path) = request(user, n, &mut body);
                    n += readers;
                    let t = Instant::now();
                    match conn.send(method, &path, &body).await {
                        Ok(answer) if answer.status == 200 => {
                            tally.answered(started, t);
                            tally.ok += 1;
                        }
                        Ok(answer) => tally.error(format!(
                            "{method} {path} answered {}: {}",
                            answer.status,
                            clip(&String::from_utf8_lossy(&answer.body))
                        )),
                        Err(err) => {
                            tally.error(format!("{method} {path} failed: {err:#}"));
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

/// Optional filters, then re-rankings, for `users` (`who` they are).
pub async fn query_phases(
    target: &Target,
    readers: usize,
    seconds: f64,
    users: Arc<[u32]>,
    who: &'static str,
    value_prefix: &str,
) -> Vec<QueryReads> {
    let filters: Request = Arc::new(|user, _, _| {
        let path = format!("/1/profiles/personalization/user{user}/optionalFilters");
        ("GET", path)
    });
    let phase = drive(target, readers, seconds, Arc::clone(&users), filters).await;
    let optional = QueryReads::new("optionalFilters", who, users.len(), readers, phase);
    let lists: Arc<[String]> = (0..HIT_LISTS as u64)
        .map(|seed| hit_list(seed, value_prefix))
        .collect();
    let rerank: Request = Arc::new(move |user, n, body| {
        let hits = &lists[n % lists.len()];
        let _ = write!(body, r#"{{"userToken":"user{user}","hits":{hits}}}"#);
        ("POST", "/1/indexes/products/rerank".to_string())
    });
    let phase = drive(target, readers, seconds, Arc::clone(&users), rerank).await;
    let reranked = QueryReads::new("rerank of 100 hits", who, users.len(), readers, phase);
    vec![optional, reranked]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hit_lists_are_100_hits_with_the_bench_facets() {
        let list: Value = serde_json::from_str(&hit_list(3, "")).unwrap();
        let hits = list.as_array().unwrap();
        assert_eq!(hits.len(), RERANK_HITS);
        for h in hits {
            for (facet, prefix, _) in FACETS {
                assert!(h[facet].as_str().unwrap().starts_with(prefix), "{h}");
            }
            assert!(h["objectID"].as_str().unwrap().starts_with('o'));
        }
        let brands: std::collections::BTreeSet<&str> =
            hits.iter().map(|h| h["brand"].as_str().unwrap()).collect();
        assert!(brands.len() > 50, "values vary: {}", brands.len());
        assert_ne!(hit_list(3, ""), hit_list(4, ""));
        let long: Value = serde_json::from_str(&hit_list(3, "Electronics > ")).unwrap();
        for (h, l) in hits.iter().zip(long.as_array().unwrap()) {
            for (facet, _, _) in FACETS {
                let value = h[facet].as_str().unwrap();
                assert_eq!(l[facet], format!("Electronics > {value}"), "{l}");
            }
        }
    }
}
