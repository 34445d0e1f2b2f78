//! A real server on a free loopback port, and a client for it.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use affinity_engine::Engine;
use affinity_http::State;
use affinity_http::{Acl, Keys};
use affinity_model::Store;
use reqwest::{Method, RequestBuilder, Response};
use serde_json::{json, Value};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const APP: &str = "app1";
pub const ADMIN: &str = "admin-key";
pub const EVENTS_KEY: &str = "events-key";
pub const SEARCH_KEY: &str = "search-key";
/// A browser's key (`events` and `search`): the parent of the secured
/// keys of the tests.
pub const BROWSER_KEY: &str = "browser-key";
pub const OTHER_APP: &str = "app2";
pub const OTHER_ADMIN: &str = "other-admin";

pub struct Server {
    pub base: String,
    pub engine: Arc<Engine>,
    pub client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<std::io::Result<()>>>,
    _dir: Option<tempfile::TempDir>,
}

pub fn keys() -> Keys {
    let mut keys = Keys::default();
    keys.add(APP, ADMIN, [Acl::Admin]).unwrap();
    keys.add(APP, EVENTS_KEY, [Acl::Events]).unwrap();
    keys.add(APP, SEARCH_KEY, [Acl::Search]).unwrap();
    keys.add(APP, BROWSER_KEY, [Acl::Events, Acl::Search])
        .unwrap();
    keys.add(OTHER_APP, OTHER_ADMIN, [Acl::Admin]).unwrap();
    keys
}

impl Server {
    /// A server on a fresh embedded store in a temporary directory.
    pub async fn embedded() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let store = affinity_embedded::EmbeddedStore::open(dir.path()).unwrap();
        let mut server = Server::on(Arc::new(store)).await;
        server._dir = Some(dir);
        server
    }

    /// A server with its own engine on `store`.
    pub async fn on(store: Arc<dyn Store>) -> Server {
        Server::maintaining(store, None).await
    }

    /// A server on a fresh embedded store whose engine keeps profile
    /// answers and rollup rows between reads (`affinity serve
    /// --profile-cache-mib`, `--rollup-cache-mib`),
    /// reading profiles on the async workers when `inline` (as `affinity
    /// serve` on a local store does).
    pub async fn cached_with(inline: bool) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let store = affinity_embedded::EmbeddedStore::open(dir.path()).unwrap();
        let engine = Engine::open(Arc::new(store))
            .unwrap()
            .with_profile_cache(1 << 20)
            .with_rollup_cache(1 << 20);
        let engine = Arc::new(engine);
        let state = State::with_inline_reads(Arc::clone(&engine), keys(), inline);
        let mut server = Server::serve(engine, state).await;
        server._dir = Some(dir);
        server
    }

    /// A server on a fresh embedded store, with `keys` instead of [`keys`].
    pub async fn with_keys(keys: Keys) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let store = affinity_embedded::EmbeddedStore::open(dir.path()).unwrap();
        let mut server = Server::start(Arc::new(store), None, keys).await;
        server._dir = Some(dir);
        server
    }

    /// A server on a fresh embedded store, with the applications, keys and
    /// limits of the configuration file `toml`.
    pub async fn configured(toml: &str) -> Server {
        let config = affinity_http::Config::parse(toml).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = affinity_embedded::EmbeddedStore::open(dir.path()).unwrap();
        let engine = Arc::new(Engine::open(Arc::new(store)).unwrap());
        let state = State::new(Arc::clone(&engine), config.keys().unwrap())
            .with_limits(config.limiter().unwrap());
        let mut server = Server::serve(engine, state).await;
        server._dir = Some(dir);
        server
    }

    /// [`Server::on`], maintaining every application every `every`.
    pub async fn maintaining(store: Arc<dyn Store>, every: Option<Duration>) -> Server {
        Server::start(store, every, keys()).await
    }

    /// A server on a fresh embedded store whose applications' reads and
    /// writes are counted per key range for the dashboard's key visualizer
    /// (once asked for), in slots of `slot`; with `dedicated`, [`APP`] has
    /// tables of its own, else it shares them (the default).
    pub async fn key_visualized(slot: Duration, dedicated: bool) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let store = affinity_embedded::EmbeddedStore::open(dir.path()).unwrap();
        let vis = Arc::new(affinity_model::keyvis::KeyVis::new(600));
        let engine = Engine::open(Arc::new(store)).unwrap().with_key_vis(vis);
        let engine = Arc::new(engine);
        if dedicated {
            engine.isolate_app(APP).unwrap();
        }
        let state = State::new(Arc::clone(&engine), keys()).with_key_vis(slot);
        let mut server = Server::serve(engine, state).await;
        server._dir = Some(dir);
        server
    }

    async fn start(store: Arc<dyn Store>, every: Option<Duration>, keys: Keys) -> Server {
        Server::start_with(store, keys, |s| s.with_maintenance(every)).await
    }

    async fn start_with(
        store: Arc<dyn Store>,
        keys: Keys,
        configure: impl FnOnce(Arc<State>) -> Arc<State>,
    ) -> Server {
        let engine = Arc::new(Engine::open(store).unwrap());
        let state = configure(State::new(Arc::clone(&engine), keys));
        Server::serve(engine, state).await
    }

    /// A server on a fresh embedded store whose connections are served
    /// on two threads of their own (`affinity serve --scheduler
    /// per-core`).
    pub async fn embedded_per_core() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let store = affinity_embedded::EmbeddedStore::open(dir.path()).unwrap();
        let engine = Arc::new(Engine::open(Arc::new(store)).unwrap());
        let workers = affinity_http::Workers::start(2, None).unwrap();
        let state = State::new(Arc::clone(&engine), keys()).with_workers(Some(Arc::new(workers)));
        let mut server = Server::serve(engine, state).await;
        server._dir = Some(dir);
        server
    }

    /// Serve `state` (whose engine is `engine`) on a free loopback port.
    async fn serve(engine: Arc<Engine>, state: Arc<State>) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let handle = tokio::spawn(affinity_http::serve(listener, state, async {
            let _ = stopped.await;
        }));
        Server {
            base,
            engine,
            client: reqwest::Client::new(),
            stop: Some(stop),
            handle: Some(handle),
            _dir: None,
        }
    }

    /// The newest `slots` slots of the key visualizer (200 asserted);
    /// asking starts the counting of [`APP`]'s tables.
    pub async fn key_vis(&self, slots: usize) -> Value {
        let r = self.admin(Method::GET, &format!("/1/dashboard/keyvis?slots={slots}"));
        let (status, body) = parts(r.send().await.unwrap()).await;
        assert_eq!(status, 200, "{body}");
        body
    }

    /// A request without credentials.
    pub fn bare(&self, method: Method, path: &str) -> RequestBuilder {
        self.client.request(method, format!("{}{path}", self.base))
    }

    /// A request with `app`'s `key`.
    pub fn as_key(&self, method: Method, path: &str, app: &str, key: &str) -> RequestBuilder {
        self.bare(method, path)
            .header("x-algolia-application-id", app)
            .header("x-algolia-api-key", key)
    }

    /// The text of `GET /metrics` (it needs no key).
    pub async fn metrics(&self) -> String {
        let r = self.bare(Method::GET, "/metrics").send().await.unwrap();
        r.text().await.unwrap()
    }

    /// A request with the admin key of [`APP`].
    pub fn admin(&self, method: Method, path: &str) -> RequestBuilder {
        self.as_key(method, path, APP, ADMIN)
    }

    pub async fn set_strategy(&self) -> Response {
        self.admin(Method::POST, "/1/strategies/personalization")
            .body(strategy().to_string())
            .send()
            .await
            .unwrap()
    }

    pub async fn post_events(&self, events: &[Value]) -> Response {
        self.admin(Method::POST, "/1/events")
            .body(json!({ "events": events }).to_string())
            .send()
            .await
            .unwrap()
    }

    /// Stop gracefully and wait for the server to finish.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(handle) = self.handle.take() {
            handle.await.unwrap().unwrap();
        }
    }
}

pub fn strategy() -> Value {
    json!({
        "eventsScoring": [
            {"eventName": "Product Clicked", "eventType": "click", "score": 10},
            {"eventName": "Product Bought", "eventType": "conversion", "score": 50}
        ],
        "facetsScoring": [{"facetName": "brand", "score": 100}, {"facetName": "color", "score": 50}],
        "personalizationImpact": 60
    })
}

pub fn click(user: &str, brand: &str) -> Value {
    json!({"eventType": "click", "eventName": "Product Clicked", "index": "products",
           "userToken": user, "filters": [format!("brand:{brand}")]})
}

/// Status and JSON body of a response.
pub async fn parts(response: Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not json: {text}"))
    };
    (status, body)
}
