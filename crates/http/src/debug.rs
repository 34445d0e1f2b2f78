//! The events debugger: per application, the last N events this server
//! received on `POST /1/events`, accepted or rejected, with the rejection
//! reason and where the request came from, so a developer whose events do
//! not count can see why (`GET /1/events/debug`, `affinity events tail`).
//!
//! It lives in memory, per server: a ring of [`EventLog::capacity`]
//! entries per application, numbered by a sequence (`seq`) that readers
//! use as a cursor (`since`), and a watch channel that wakes long-polling
//! readers when entries arrive. Nothing here touches the store.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use serde_json::{json, Value};
use tokio::sync::watch;

/// Events kept per application unless configured otherwise.
pub const DEFAULT_DEBUG_EVENTS: usize = 1000;

/// Where a request came from, as its headers and connection say, and how
/// its body was sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestOrigin {
    pub origin: Option<String>,
    pub referer: Option<String>,
    pub user_agent: Option<String>,
    pub remote_addr: Option<String>,
    pub forwarded_for: Option<String>,
    pub content_type: Option<String>,
    pub content_encoding: Option<String>,
}

impl<S: Send + Sync> FromRequestParts<S> for RequestOrigin {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let header = |name: &str| {
            parts
                .headers
                .get(name)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        };
        Ok(RequestOrigin {
            origin: header("origin"),
            referer: header("referer"),
            user_agent: header("user-agent"),
            forwarded_for: header("x-forwarded-for"),
            content_type: header("content-type"),
            content_encoding: header("content-encoding"),
            remote_addr: parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0.to_string()),
        })
    }
}

impl RequestOrigin {
    fn to_json(&self) -> Value {
        json!({"origin": self.origin, "referer": self.referer, "userAgent": self.user_agent,
               "remoteAddr": self.remote_addr, "forwardedFor": self.forwarded_for,
               "contentType": self.content_type, "contentEncoding": self.content_encoding})
    }
}

/// One event as received (or, for a body that could not be read, the
/// request: `event` is then `null`).
#[derive(Debug, PartialEq)]
pub struct Entry {
    pub seq: u64,
    pub received_millis: i64,
    /// `None` when accepted.
    pub rejection: Option<Rejection>,
    pub event: Value,
    pub request: Arc<RequestOrigin>,
}

/// Why a request's events were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The status answered.
    pub status: u16,
    /// A short, stable code: the field at fault (`eventType`, `filters`)
    /// or the kind of failure (`invalid_json`, `too_large`); the label of
    /// `affinity_events_rejected_total`.
    pub code: String,
    /// The message, with the index of the event at fault when there is one.
    pub message: String,
}

impl Entry {
    /// The API's form of an entry.
    pub fn to_json(&self) -> Value {
        let time = affinity_rowkey::time::format_millis(self.received_millis).unwrap_or_default();
        let (status, rejection) = match &self.rejection {
            None => ("accepted", Value::Null),
            Some(r) => (
                "rejected",
                json!({"status": r.status, "code": r.code, "message": r.message}),
            ),
        };
        json!({"seq": self.seq, "receivedAt": time, "status": status,
               "rejection": rejection, "event": self.event, "request": self.request.to_json()})
    }

    fn event_str(&self, field: &str) -> Option<&str> {
        self.event.get(field).and_then(Value::as_str)
    }
}

/// What a reader asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// `Some(true)`: accepted only; `Some(false)`: rejected only.
    pub accepted: Option<bool>,
    /// The event's `userToken` or `authenticatedUserToken`.
    pub user_token: Option<String>,
    pub event_name: Option<String>,
    /// Entries after this sequence number, oldest first; without it, the
    /// newest `limit` entries, oldest first.
    pub since: Option<u64>,
    pub limit: usize,
}

impl Filter {
    fn matches(&self, e: &Entry) -> bool {
        self.accepted.is_none_or(|a| a == e.rejection.is_none())
            && self.user_token.as_deref().is_none_or(|u| {
                e.event_str("userToken") == Some(u)
                    || e.event_str("authenticatedUserToken") == Some(u)
            })
            && self
                .event_name
                .as_deref()
                .is_none_or(|n| e.event_str("eventName") == Some(n))
    }
}

/// One application's ring.
struct AppLog {
    entries: VecDeque<Arc<Entry>>,
    /// The sequence number of the newest entry (0: none yet).
    head: u64,
    changed: watch::Sender<u64>,
}

impl AppLog {
    fn new() -> AppLog {
        AppLog {
            entries: VecDeque::new(),
            head: 0,
            changed: watch::channel(0).0,
        }
    }
}

/// Every application's ring.
pub struct EventLog {
    capacity: usize,
    apps: Mutex<HashMap<String, AppLog>>,
}

impl Default for EventLog {
    fn default() -> EventLog {
        EventLog::new(DEFAULT_DEBUG_EVENTS)
    }
}

impl EventLog {
    /// A log keeping `capacity` entries per application (0: none).
    pub fn new(capacity: usize) -> EventLog {
        EventLog {
            capacity,
            apps: Mutex::default(),
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Keep `events` of one request of `app` (each event one entry; an
    /// empty list records the request itself, with a `null` event).
    pub fn record(
        &self,
        app: &str,
        received_millis: i64,
        rejection: Option<Rejection>,
        events: Vec<Value>,
        request: Arc<RequestOrigin>,
    ) {
        if self.capacity == 0 {
            return;
        }
        let events = if events.is_empty() {
            vec![Value::Null]
        } else {
            events
        };
        // Only the newest `capacity` of a large batch can stay.
        let skip = events.len().saturating_sub(self.capacity);
        let mut evicted = Vec::new();
        {
            let mut apps = self.apps.lock().unwrap_or_else(|p| p.into_inner());
            let log = apps.entry(app.to_string()).or_insert_with(AppLog::new);
            log.head += skip as u64;
            for event in events.into_iter().skip(skip) {
                log.head += 1;
                if log.entries.len() == self.capacity {
                    evicted.extend(log.entries.pop_front());
                }
                log.entries.push_back(Arc::new(Entry {
                    seq: log.head,
                    received_millis,
                    rejection: rejection.clone(),
                    event,
                    request: Arc::clone(&request),
                }));
            }
            log.changed.send_replace(log.head);
        }
        // Evicted events are freed outside the lock.
        drop(evicted);
    }

    /// The entries of `app` that `filter` selects, and the cursor to ask
    /// from next (the last entry returned, or the newest when the answer
    /// holds everything up to it).
    pub fn query(&self, app: &str, filter: &Filter) -> (Vec<Arc<Entry>>, u64) {
        let apps = self.apps.lock().unwrap_or_else(|p| p.into_inner());
        let Some(log) = apps.get(app) else {
            return (Vec::new(), filter.since.unwrap_or(0));
        };
        match filter.since {
            Some(since) => {
                let out: Vec<Arc<Entry>> = log
                    .entries
                    .iter()
                    .filter(|e| e.seq > since && filter.matches(e))
                    .take(filter.limit)
                    .cloned()
                    .collect();
                let cursor = match out.last() {
                    Some(last) if out.len() == filter.limit => last.seq,
                    _ => log.head.max(since),
                };
                (out, cursor)
            }
            None => {
                let mut out: Vec<Arc<Entry>> = log
                    .entries
                    .iter()
                    .rev()
                    .filter(|e| filter.matches(e))
                    .take(filter.limit)
                    .cloned()
                    .collect();
                out.reverse();
                (out, log.head)
            }
        }
    }

    /// A receiver that changes when `app` records entries.
    pub fn subscribe(&self, app: &str) -> watch::Receiver<u64> {
        let mut apps = self.apps.lock().unwrap_or_else(|p| p.into_inner());
        apps.entry(app.to_string())
            .or_insert_with(AppLog::new)
            .changed
            .subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(user: &str, name: &str) -> Value {
        json!({"userToken": user, "eventName": name})
    }

    fn rejected(code: &str) -> Option<Rejection> {
        Some(Rejection {
            status: 422,
            code: code.into(),
            message: "no".into(),
        })
    }

    fn seqs(entries: &[Arc<Entry>]) -> Vec<u64> {
        entries.iter().map(|e| e.seq).collect()
    }

    #[test]
    fn keeps_the_newest_entries_per_app_and_filters_them() {
        let log = EventLog::new(3);
        let origin = Arc::new(RequestOrigin::default());
        log.record(
            "a",
            1,
            None,
            vec![event("u1", "x"), event("u2", "y")],
            Arc::clone(&origin),
        );
        log.record(
            "a",
            2,
            rejected("eventType"),
            vec![event("u1", "y")],
            Arc::clone(&origin),
        );
        log.record("a", 3, None, vec![event("u3", "x")], Arc::clone(&origin));
        log.record("b", 3, None, vec![event("u9", "x")], origin);
        let all = Filter {
            limit: 10,
            ..Filter::default()
        };
        let (entries, cursor) = log.query("a", &all);
        assert_eq!((seqs(&entries), cursor), (vec![2, 3, 4], 4));
        let f = Filter {
            accepted: Some(false),
            ..all.clone()
        };
        let (entries, _) = log.query("a", &f);
        assert_eq!(seqs(&entries), [3]);
        assert_eq!(entries[0].to_json()["rejection"]["code"], "eventType");
        let f = Filter {
            user_token: Some("u1".into()),
            ..all.clone()
        };
        assert_eq!(seqs(&log.query("a", &f).0), [3]);
        let f = Filter {
            event_name: Some("x".into()),
            ..all.clone()
        };
        assert_eq!(seqs(&log.query("a", &f).0), [4]);
        let f = Filter {
            since: Some(2),
            limit: 1,
            ..all.clone()
        };
        assert_eq!(log.query("a", &f).0.len(), 1);
        assert_eq!(log.query("a", &f).1, 3);
        let f = Filter {
            since: Some(4),
            ..all.clone()
        };
        assert_eq!(log.query("a", &f), (vec![], 4));
        assert_eq!(seqs(&log.query("b", &all).0), [1]);
        assert_eq!(log.query("nope", &all), (vec![], 0));
    }

    #[test]
    fn a_batch_larger_than_the_ring_keeps_its_tail_and_zero_keeps_nothing() {
        let log = EventLog::new(2);
        let events = (0..5).map(|i| event(&format!("u{i}"), "x")).collect();
        log.record("a", 1, None, events, Arc::default());
        let all = Filter {
            limit: 10,
            ..Filter::default()
        };
        let (entries, cursor) = log.query("a", &all);
        assert_eq!((seqs(&entries), cursor), (vec![4, 5], 5));
        assert_eq!(entries[1].event["userToken"], "u4");
        let off = EventLog::new(0);
        off.record("a", 1, None, vec![event("u", "x")], Arc::default());
        assert_eq!(off.query("a", &all), (vec![], 0));
    }

    #[tokio::test]
    async fn subscribers_wake_on_new_entries() {
        let log = Arc::new(EventLog::new(10));
        let mut rx = log.subscribe("a");
        let writer = Arc::clone(&log);
        tokio::spawn(async move {
            writer.record("a", 1, None, vec![], Arc::default());
        });
        rx.changed().await.unwrap();
        assert_eq!(*rx.borrow(), 1);
    }
}
