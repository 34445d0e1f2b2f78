//! The real server in this process, on the embedded store or Cloud
//! Bigtable.

use std::sync::Arc;
use std::time::Duration;

use affinity_engine::Engine;
use affinity_http::{Acl, Keys};
use affinity_model::Store;
use anyhow::{bail, Context};

use super::{bench, HttpBenchArgs, Local, Settle, Target, APP, KEY};
use crate::BenchBackend;

/// The in-process server's store.
struct ServerStore {
    store: Arc<dyn Store>,
    /// Flushes it and waits for its compactions (the embedded store only).
    settle: Option<Settle>,
    /// `embedded` or `bigtable`, as the JSON names the backend.
    kind: &'static str,
    /// For messages: `embedded store in DIR`, `Cloud Bigtable P/I`.
    described: String,
    /// The embedded store's temporary directory, removed when dropped.
    _tmp: Option<tempfile::TempDir>,
}

impl ServerStore {
    /// The embedded store in `--data` (default: a temporary directory), or
    /// Cloud Bigtable with `--bigtable` (the emulator when
    /// BIGTABLE_EMULATOR_HOST is set).
    fn open(backend: &BenchBackend) -> anyhow::Result<ServerStore> {
        if let Some(spec) = &backend.bigtable {
            let (project, instance) = match spec.split_once('/') {
                Some((p, i)) if !p.is_empty() && !i.is_empty() && !i.contains('/') => (p, i),
                _ => bail!("--bigtable must be PROJECT/INSTANCE, got {spec:?}"),
            };
            let store = affinity_bigtable::BigtableStore::connect(project, instance)
                .with_context(|| format!("connecting to Cloud Bigtable {spec}"))?;
            let described = match std::env::var("BIGTABLE_EMULATOR_HOST") {
                Ok(host) => format!("Bigtable emulator at {host} ({spec})"),
                Err(_) => format!("Cloud Bigtable {spec}"),
            };
            return Ok(ServerStore {
                store: Arc::new(store),
                settle: None,
                kind: "bigtable",
                described,
                _tmp: None,
            });
        }
        let (dir, tmp) = crate::data_dir(backend.data.as_deref())?;
        let embedded = affinity_embedded::EmbeddedStore::open(&dir)
            .with_context(|| format!("opening the embedded store in {}", dir.display()))?;
        let embedded = Arc::new(embedded);
        let flush = Arc::clone(&embedded);
        Ok(ServerStore {
            store: embedded,
            settle: Some(Arc::new(move || flush.flush().map_err(anyhow::Error::from))),
            kind: "embedded",
            described: format!("embedded store in {}", dir.display()),
            _tmp: tmp,
        })
    }
}

/// Run the benchmark against the real server in this process, on the
/// embedded store or `--bigtable`.
pub fn in_process(
    args: &HttpBenchArgs,
    backend: &BenchBackend,
    runtime: tokio::runtime::Runtime,
) -> anyhow::Result<()> {
    // Opened outside the runtime: the Bigtable backend owns one.
    let ServerStore {
        store,
        settle,
        kind,
        described,
        _tmp,
    } = ServerStore::open(backend)?;
    let mut engine = Engine::open(Arc::clone(&store))?;
    if backend.bigtable.is_none() {
        engine = engine.with_rollup_cache(args.rollup_cache_mib << 20);
    }
    let engine = Arc::new(engine);
    let local = Local {
        store,
        engine: Arc::clone(&engine),
        settle,
    };
    let mut keys = Keys::default();
    keys.add(APP, KEY, [Acl::Admin])?;
    let described = match engine.rollup_cache_stats() {
        Some(kept) => format!(
            "an in-process server on the {described} keeping {} MiB of rollup rows and no profile answers",
            kept.budget >> 20
        ),
        None => format!("an in-process server on the {described}"),
    };
    // Reads of the store on this machine are fast enough to run on the
    // server's async workers.
    let inline = backend.bigtable.is_none();
    let result = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding a loopback port")?;
        let base = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let workers = args
            .scheduler
            .workers(None)
            .context("starting the connection threads")?;
        let state = affinity_http::State::with_inline_reads(engine, keys, inline)
            .with_workers(workers.clone());
        let server = tokio::spawn(affinity_http::serve(listener, state, async {
            let _ = stopped.await;
        }));
        let result = match Target::new(&base, APP, KEY) {
            Ok(mut target) => {
                target.endpoint = target.endpoint.with_workers(workers);
                bench(args, target, &described, kind, Some(local)).await
            }
            Err(e) => Err(e),
        };
        let _ = stop.send(());
        server.await.context("the server task")??;
        result
    });
    // The engine's last holders (blocking tasks of the server still
    // running) finish before the temporary store directory is removed.
    runtime.shutdown_timeout(Duration::from_secs(10));
    result
}
