//! The router, its middleware, and serving with graceful shutdown.
//!
//! | route | ACL (admin may do all) |
//! |---|---|
//! | `POST /1/events` | events |
//! | `GET /1/events/debug` (the events debugger) | profiles |
//! | `DELETE /1/usertokens/{userToken}` (204) | admin |
//! | `GET /1/strategies/personalization` | search, profiles |
//! | `POST /1/strategies/personalization` (starts a job) | admin |
//! | `GET /1/profiles/personalization/{userToken}` | search, profiles |
//! | `GET /1/profiles/personalization/{userToken}/optionalFilters` | search, profiles |
//! | `POST /1/indexes/{indexName}/rerank` | search, profiles |
//! | `GET /1/profiles/personalization/{userToken}/explain` | profiles |
//! | `POST /1/strategies/personalization/preview` (stores nothing) | profiles |
//! | `DELETE /1/profiles/{userToken}` | admin |
//! | `POST /1/indexes/{indexName}/objects` | admin |
//! | `GET/PUT/DELETE /1/indexes/{indexName}/objects/{objectID}` | search, profiles / admin |
//! | `GET /1/jobs`, `GET /1/jobs/{jobID}` (jobs in the store, any server) | profiles |
//! | `GET /1/trends` (regional trends) | search, profiles |
//! | `POST /1/keys`, `GET /1/keys`, `GET/PUT/DELETE /1/keys/{key}` (keys in the store, see [`crate::keystore`]) | admin |
//! | `GET /1/dashboard/stats`, `GET /1/dashboard/keyvis` | admin |
//! | `GET /dashboard/` and its files (see [`crate::dashboard`]) | none |
//! | `GET /health`, `/metrics`, `/openapi.json` | none |
//!
//! Every request is timed and counted per matched route (see
//! [`crate::metrics`]), and admitted only under the caps on requests and
//! writes in flight (see [`crate::limits`]); CORS allows any origin, with
//! credentials, so browsers running `search-insights` can call the API
//! directly. Connections are served by hyper with the configured header
//! read timeout.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, DefaultBodyLimit, MatchedPath, Request, State as Shared};
use axum::http::Method;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::net::TcpListener;
use tower::Service as _;
use tower_http::cors::{AllowHeaders, AllowMethods, AllowOrigin, CorsLayer};

use crate::error::MAX_BODY_BYTES;
use crate::state::State;
use crate::workers::Workers;
use crate::{
    catalog, dashboard, explain, insights, keystore, ops, personalization, query, variants,
};

/// Every route of the API on `state`.
pub fn router(state: Arc<State>) -> Router {
    // Browsers send events with `fetch`, XHR and `sendBeacon`, whose
    // requests always carry credentials: a credentialed request needs its
    // own origin echoed (never `*`). Echoing any origin grants nothing, as
    // the API reads no cookie: callers authenticate with their keys.
    let cors = CorsLayer::new()
        .allow_origin(AllowOrigin::mirror_request())
        .allow_methods(AllowMethods::mirror_request())
        .allow_headers(AllowHeaders::mirror_request())
        .allow_credentials(true)
        .allow_private_network(true)
        .max_age(Duration::from_secs(86_400));
    Router::new()
        .route("/1/events", post(insights::post_events))
        .route("/1/events/debug", get(insights::get_debug))
        .route(
            "/1/usertokens/{userToken}",
            axum::routing::delete(insights::delete_user_token),
        )
        .route(
            "/1/strategies/personalization",
            get(personalization::get_strategy).post(personalization::post_strategy),
        )
        .route(
            "/1/strategies/personalization/variants",
            get(variants::get_variants)
                .put(variants::put_variants)
                .delete(variants::delete_variants),
        )
        .route(
            "/1/strategies/personalization/preview",
            post(explain::post_preview),
        )
        .route(
            "/1/profiles/personalization/{userToken}",
            get(personalization::get_profile),
        )
        .route(
            "/1/profiles/personalization/{userToken}/optionalFilters",
            get(query::get_optional_filters),
        )
        .route("/1/indexes/{indexName}/rerank", post(query::post_rerank))
        .route(
            "/1/profiles/personalization/{userToken}/explain",
            get(explain::get_explain),
        )
        .route(
            "/1/profiles/{userToken}",
            axum::routing::delete(personalization::delete_profile),
        )
        .route(
            "/1/indexes/{indexName}/objects",
            post(catalog::post_objects),
        )
        .route(
            "/1/indexes/{indexName}/objects/{objectID}",
            get(catalog::get_object)
                .put(catalog::put_object)
                .delete(catalog::delete_object),
        )
        .route("/1/jobs", get(ops::list_jobs))
        .route("/1/trends", get(crate::trends::get_trends))
        .route("/1/jobs/{jobID}", get(ops::get_job))
        .route("/1/keys", get(keystore::list_keys).post(keystore::post_key))
        .route(
            "/1/keys/{key}",
            get(keystore::get_key)
                .put(keystore::put_key)
                .delete(keystore::delete_key),
        )
        .route("/1/dashboard/stats", get(dashboard::stats))
        .route("/1/dashboard/keyvis", get(dashboard::key_vis))
        .route("/dashboard", get(dashboard::redirect))
        .route("/dashboard/", get(dashboard::index))
        .route("/dashboard/{file}", get(dashboard::asset))
        .route("/health", get(ops::health))
        .route("/metrics", get(ops::metrics))
        .route("/openapi.json", get(ops::openapi))
        .fallback(ops::not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
        .layer(middleware::from_fn_with_state(Arc::clone(&state), admit))
        .layer(middleware::from_fn_with_state(Arc::clone(&state), observe))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(cors)
        .with_state(state)
}

/// Time every request, count it and log it.
async fn observe(Shared(state): Shared<Arc<State>>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    // A shared string: cloning it counts a reference.
    let matched = request.extensions().get::<MatchedPath>().cloned();
    let route = matched.as_ref().map_or("unmatched", |p| p.as_str());
    let response = next.run(request).await;
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    state
        .metrics
        .observe(method.as_str(), route, status, elapsed);
    tracing::debug!(%method, route, status, micros = elapsed.as_micros() as u64, "request");
    response
}

/// Serve a request only under the caps on requests and writes in flight
/// (503 with `Retry-After` over them). `/health` and `/metrics` are never
/// refused: an overloaded server must still say how it is.
async fn admit(Shared(state): Shared<Arc<State>>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("", |p| p.as_str());
    if matches!(route, "/health" | "/metrics") {
        return next.run(request).await;
    }
    let write = is_write(request.method(), route);
    match state.limiter.admit(write) {
        Ok(_admitted) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

/// Requests that change data, each holding a blocking thread while it
/// is served: the first to be shed. Re-ranking and previews are reads
/// sent with POST.
fn is_write(method: &Method, route: &str) -> bool {
    let changes = matches!(
        *method,
        Method::POST | Method::PUT | Method::DELETE | Method::PATCH
    );
    changes
        && !matches!(
            route,
            "/1/indexes/{indexName}/rerank" | "/1/strategies/personalization/preview"
        )
}

/// How often the engine's cached catalogs are dropped, so objects another
/// server stored are seen (the engine caches an index's catalog on first
/// use and refreshes it only for writes through itself).
pub const CATALOG_REFRESH: Duration = Duration::from_secs(60);

/// How long a server shutting down waits for its jobs to stop and give
/// their leases up ([`crate::Jobs::hand_back`]): within Kubernetes' default
/// 30 s grace period, with room for the requests in flight.
pub const HAND_BACK_WAIT: Duration = Duration::from_secs(10);

/// Serve `state` on `listener` until `shutdown` resolves; requests in
/// flight then finish, and the jobs this server works on are handed
/// back, before this returns.
pub async fn serve(
    listener: TcpListener,
    state: Arc<State>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "affinity http api listening");
    }
    let engine = Arc::clone(&state.engine);
    let refresh = tokio::spawn(async move {
        let mut tick = tokio::time::interval(CATALOG_REFRESH);
        tick.tick().await;
        loop {
            tick.tick().await;
            engine.forget_catalogs();
        }
    });
    let keys = tokio::spawn(keystore::StoredKeys::refresh_forever(Arc::clone(&state)));
    let maintenance = state
        .maintain_every
        .map(|every| tokio::spawn(maintain_on_schedule(Arc::clone(&state), every)));
    let clock = Arc::clone(&state.engine);
    let key_vis = state.dashboard.key_vis().map(|(vis, slot)| {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(slot);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                vis.rotate(clock.now_millis());
            }
        })
    });
    let stopping = Arc::clone(&state);
    let shutdown = async move {
        shutdown.await;
        stopping.stop_waiting();
    };
    let header_timeout = state.limiter.server.header_timeout();
    let jobs = Arc::clone(&state.jobs);
    let workers = state.workers.clone();
    let served = accept_until(listener, router(state), header_timeout, workers, shutdown).await;
    refresh.abort();
    keys.abort();
    for task in [maintenance, key_vis].into_iter().flatten() {
        task.abort();
    }
    jobs.hand_back(HAND_BACK_WAIT).await;
    served?;
    tracing::info!("server stopped");
    Ok(())
}

/// Accept connections on `listener` and serve `app` on each until
/// `shutdown` resolves; then stop accepting, let each connection finish
/// its request in flight, and return once all are closed. A client that
/// does not send a request's headers within `header_timeout` (or stays
/// idle that long between requests) has its connection closed. With
/// `workers`, each connection is served on the next of their threads;
/// without, on the runtime this runs on.
async fn accept_until(
    listener: TcpListener,
    app: Router,
    header_timeout: Duration,
    workers: Option<Arc<Workers>>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    builder.http2().timer(TokioTimer::new());
    let builder = Arc::new(builder);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    // Each connection holds a receiver; all dropped: all closed.
    let (open, closed) = tokio::sync::watch::channel(());
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, or a connection reset
                    // before it was accepted: the listener itself is fine.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let connection = Connection {
            app: app.clone(),
            peer,
            builder: Arc::clone(&builder),
            stop: stopped.clone(),
            open: closed.clone(),
        };
        match &workers {
            Some(workers) => {
                // Moved to the worker's own reactor: registered there
                // afresh, so its readiness wakes that thread only.
                let stream = match stream.into_std() {
                    Ok(stream) => stream,
                    Err(e) => {
                        tracing::warn!(%peer, error = %e, "handing a connection over failed");
                        continue;
                    }
                };
                workers.next().spawn(async move {
                    match tokio::net::TcpStream::from_std(stream) {
                        Ok(stream) => connection.serve(stream).await,
                        Err(e) => {
                            tracing::warn!(%peer, error = %e, "taking a connection over failed")
                        }
                    }
                });
            }
            None => {
                tokio::spawn(connection.serve(stream));
            }
        }
    }
    drop(listener);
    stop.send_replace(true);
    drop(closed);
    open.closed().await;
    Ok(())
}

/// One accepted connection and what serving it needs.
struct Connection {
    app: Router,
    peer: std::net::SocketAddr,
    builder: Arc<Builder<TokioExecutor>>,
    /// Changes when the server stops accepting.
    stop: tokio::sync::watch::Receiver<bool>,
    /// Held until the connection closes.
    open: tokio::sync::watch::Receiver<()>,
}

impl Connection {
    /// Serve requests until the client closes, or the server stops and
    /// the request in flight is answered.
    async fn serve(self, stream: tokio::net::TcpStream) {
        let Connection {
            app,
            peer,
            builder,
            mut stop,
            open,
        } = self;
        // The connection's address is the debugger's `remoteAddr`.
        let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            let mut app = app.clone();
            async move { app.call(request.map(axum::body::Body::new)).await }
        });
        let result = {
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => result,
                _ = stop.changed() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            }
            // The connection, and with it the router and the state it
            // holds, dropped here: before `open`, so that when the server
            // returns no connection still holds the state. (Otherwise the
            // last holder could be a per-core thread, which nothing joins:
            // the process could exit while that thread closes the store.)
        };
        if let Err(e) = result {
            tracing::debug!(%peer, error = %e, "connection ended");
        }
        drop(open);
    }
}

/// Maintain every application with keys on this server (configured or
/// stored): at start, then
/// every `every`; an application whose last run here is still going is
/// skipped. Between runs, every lease length, take over the applications'
/// jobs whose worker died (servers that run no maintenance leave batch
/// work to the job processes).
async fn maintain_on_schedule(state: Arc<State>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut watch = tokio::time::interval(affinity_engine::DEFAULT_LEASE);
    watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let maintain = tokio::select! {
            _ = tick.tick() => true,
            _ = watch.tick() => false,
        };
        let state = Arc::clone(&state);
        let done = tokio::task::spawn_blocking(move || {
            let mut apps: Vec<String> = state.keys.apps().map(str::to_string).collect();
            apps.extend(state.stored_keys.apps());
            apps.sort();
            apps.dedup();
            for app in apps.iter().map(String::as_str) {
                let result = if maintain && !state.jobs.running(app) {
                    state.jobs.start_maintenance(&state.engine, app).map(|_| ())
                } else {
                    state.jobs.resume_stalled(&state.engine, app).map(|_| ())
                };
                if let Err(e) = result {
                    tracing::error!(app, error = %e, "cannot start or resume a job");
                }
            }
        });
        let _ = done.await;
    }
}

/// Resolves on ctrl-c or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutdown requested: finishing requests in flight");
}
