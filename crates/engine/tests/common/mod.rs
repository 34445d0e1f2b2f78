//! Shared helpers of the engine's integration tests.
#![allow(dead_code)]

pub mod identity;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use affinity_engine::catalog::{Catalog, CatalogObject};
use affinity_engine::scoring::reference::{self, ListedEvent};
use affinity_engine::scoring::{FacetCounts, Profile, ScoredEvent};
use affinity_engine::{Engine, Event, ExportOptions, ExportReport, Limits, Progress, Strategy};
use affinity_model::{
    MemoryStore, Mutation, ReadRowsRequest, RowFilter, RowMutations, RowRange, RowSet, Store, Table,
};
use affinity_rowkey::composite::EventKey;
use serde_json::{json, Value};

pub const DAY: i64 = 86_400_000;

/// A clock tests move by hand (milliseconds).
#[derive(Clone)]
pub struct FakeClock(pub Arc<AtomicI64>);

impl FakeClock {
    pub fn new(millis: i64) -> FakeClock {
        FakeClock(Arc::new(AtomicI64::new(millis)))
    }
    pub fn now(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
    pub fn set(&self, millis: i64) {
        self.0.store(millis, Ordering::SeqCst)
    }
    pub fn engine_clock(&self) -> affinity_engine::Clock {
        let c = self.0.clone();
        Arc::new(move || c.load(Ordering::SeqCst))
    }
    pub fn memory_store(&self) -> Arc<dyn Store> {
        let c = self.0.clone();
        // Small split spacing, so batch jobs get several ranges.
        let store = MemoryStore::with_clock(Arc::new(move || c.load(Ordering::SeqCst) * 1000));
        Arc::new(store.with_sample_spacing(512))
    }
}

pub fn real_now() -> i64 {
    affinity_model::apply::now_micros() / 1000
}

pub fn strategy() -> Strategy {
    Strategy::from_json(&json!({
        "eventsScoring":[{"eventName":"click","eventType":"click","score":10},
                         {"eventName":"view","eventType":"view","score":1},
                         {"eventName":"buy, now","eventType":"conversion","score":50}],
        "facetsScoring":[{"facetName":"brand","score":100},{"facetName":"color","score":7}],
        "personalizationImpact":60}))
    .expect("valid strategy")
}

pub fn catalog_objects() -> Vec<CatalogObject> {
    [
        json!({"objectID":"p1","brand":"Apple","color":["Black","White"],"size":"M"}),
        json!({"objectID":"p2","brand":"Samsung","color":"Black"}),
        json!({"objectID":"p3","brand":"Apple, Inc","color":"\"Red\""}),
        json!({"objectID":"p4","size":"L"}),
    ]
    .iter()
    .map(|v| CatalogObject::from_json(v).expect("valid object"))
    .collect()
}

pub fn catalog() -> Catalog {
    let mut c = Catalog::new();
    for o in catalog_objects() {
        c.insert(o);
    }
    c
}

/// The reference's view of validated events.
pub fn listed(app: &str, events: &[Event]) -> Vec<ListedEvent> {
    let cat = catalog();
    events
        .iter()
        .map(|e| {
            let counts = if e.object_ids.is_empty() {
                FacetCounts::from_pairs(&e.filters)
            } else {
                cat.resolve(&e.object_ids).counts
            };
            let key = EventKey::for_event(app, e.identity(), e.timestamp_millis, &e.content())
                .and_then(|k| k.encode())
                .expect("valid key");
            ListedEvent {
                user: e.identity().to_string(),
                id: key,
                event: ScoredEvent {
                    event_type: e.event_type,
                    event_name: e.event_name.clone(),
                    timestamp_millis: e.timestamp_millis,
                    counts,
                },
            }
        })
        .collect()
}

/// One event's JSON from small generated choices.
pub fn event_json(kind: u8, user: u8, ts: i64, items: &[u8], by_objects: bool) -> Value {
    let (ty, name) = match kind % 5 {
        0 => ("click", "click"),
        1 => ("view", "view"),
        2 => ("conversion", "buy, now"),
        3 => ("click", "other"),
        _ => ("view", "click"),
    };
    let mut v = json!({"eventType": ty, "eventName": name, "index": "products",
        "userToken": format!("user-{}", user % 4), "timestamp": ts});
    if by_objects {
        let ids: Vec<String> = items.iter().map(|i| format!("p{}", i % 6)).collect();
        v["objectIDs"] = json!(ids);
    } else {
        let filters: Vec<String> = items
            .iter()
            .map(|i| match i % 5 {
                0 => "brand:Apple".to_string(),
                1 => "brand:Sam%2Csung".to_string(),
                2 => "color:Black".to_string(),
                3 => format!("brand:B{}", i % 3),
                _ => "size:XL".to_string(),
            })
            .collect();
        v["filters"] = json!(filters);
    }
    v
}

pub fn parse_all(values: &[Value], now: i64) -> Vec<Event> {
    let limits = Limits {
        now_millis: now,
        max_age_millis: 90 * DAY,
        max_skew_millis: 3_600_000,
    };
    values
        .iter()
        .map(|v| Event::from_json(v, &limits).expect("valid event"))
        .collect()
}

pub fn reference_profiles(
    app: &str,
    events: &[Event],
    now: i64,
    retention: i64,
) -> BTreeMap<String, Profile> {
    reference::profiles(&listed(app, events), &strategy(), now, retention)
}

/// Streaming profile of every listed user.
pub fn streaming_profiles(
    engine: &Engine,
    app: &str,
    users: &[String],
) -> BTreeMap<String, Profile> {
    users
        .iter()
        .filter_map(|u| {
            engine
                .profile(app, u)
                .expect("profile read")
                .map(|p| (u.clone(), p))
        })
        .collect()
}

/// Every profile an export hands over, as the API's JSON text by user
/// (each user at most once), and the export's report.
pub fn exported(
    engine: &Engine,
    app: &str,
    options: ExportOptions,
    strategy: Option<&Strategy>,
) -> (BTreeMap<String, String>, ExportReport) {
    let out = Mutex::new(BTreeMap::new());
    let sink = |user: &str, json: &[u8]| -> std::io::Result<()> {
        let text = String::from_utf8(json.to_vec()).expect("JSON is UTF-8");
        let before = out.lock().unwrap().insert(user.to_string(), text);
        assert!(before.is_none(), "{user} exported twice");
        Ok(())
    };
    let report = engine
        .export(app, options, strategy, &sink, &Progress::default())
        .expect("export");
    (out.into_inner().unwrap(), report)
}

/// [`exported`] with the default options and the current strategy.
pub fn exported_profiles(engine: &Engine, app: &str) -> BTreeMap<String, String> {
    exported(engine, app, ExportOptions::default(), None).0
}

/// Profiles as the API's JSON text, by user.
pub fn json_texts(profiles: &BTreeMap<String, Profile>) -> BTreeMap<String, String> {
    profiles
        .iter()
        .map(|(u, p)| (u.clone(), serde_json::to_string(p).expect("serializes")))
        .collect()
}

/// What a profile read answers for each listed user under the current
/// strategy, as JSON text.
pub fn read_texts(engine: &Engine, app: &str, users: &[String]) -> BTreeMap<String, String> {
    let strategy = engine
        .strategy(app)
        .expect("strategy read")
        .expect("a strategy");
    users
        .iter()
        .filter_map(|u| {
            let json = engine
                .profile_json_with(app, u, &strategy)
                .expect("profile read")?;
            Some((u.clone(), String::from_utf8(json).expect("JSON is UTF-8")))
        })
        .collect()
}

/// What a profiles table loses: rows of `profiles.<app>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loss {
    /// Every row of the user (rollup and day rows).
    User,
    /// The user's rollup row alone (watermarks, late markers, tombstone).
    Rollup,
}

/// Delete rows of `user` from `profiles.<app>` behind the engine's back.
pub fn lose_state(engine: &Engine, app: &str, user: &str, loss: Loss) {
    let profiles = engine.app(app).expect("app").profiles;
    let rows = match loss {
        Loss::User => RowSet::from_range(RowRange::prefix(format!("{user},"))),
        Loss::Rollup => RowSet::from_keys([format!("{user},!")]),
    };
    delete_rows(profiles.as_ref(), rows);
}

/// Delete every row of `profiles.<app>` (users and jobs).
pub fn lose_profiles_table(engine: &Engine, app: &str) {
    let profiles = engine.app(app).expect("app").profiles;
    delete_rows(profiles.as_ref(), RowSet::all());
}

fn delete_rows(table: &dyn Table, rows: RowSet) {
    let keys: Vec<_> = table
        .read_rows(&ReadRowsRequest::new(rows).with_filter(RowFilter::StripValue))
        .expect("read")
        .map(|r| r.expect("row").key)
        .collect();
    let entries: Vec<RowMutations> = keys
        .into_iter()
        .map(|k| RowMutations::new(k, vec![Mutation::DeleteFromRow]))
        .collect();
    if !entries.is_empty() {
        for status in table.mutate_rows(&entries).expect("delete") {
            status.expect("deleted");
        }
    }
}

/// Store events in the events table without their profile state, as a
/// bulk load of the table would.
pub fn store_without_state(engine: &Engine, app: &str, events: &[Event]) {
    let handle = engine.app(app).expect("app");
    let entries: Vec<RowMutations> = listed(app, events)
        .iter()
        .map(|e| {
            RowMutations::new(
                handle.event_key(e.id.as_bytes()),
                handle.event_mutations(&e.event),
            )
        })
        .collect();
    for status in handle.events.mutate_rows(&entries).expect("write") {
        status.expect("written");
    }
}

pub fn users() -> Vec<String> {
    (0..4).map(|u| format!("user-{u}")).collect()
}
