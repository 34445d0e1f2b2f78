//! The synchronous face of an asynchronous client: the store owns a small
//! multi-thread tokio runtime, spawns each call onto it and waits for the
//! result on a plain channel. That wait is safe from any thread, including a
//! worker of some other tokio runtime (where `Runtime::block_on` would
//! panic): the future runs on our workers, never on the caller's.

use std::future::Future;

use affinity_model::{Error, Result};
use tokio::runtime::{Handle, Runtime};

/// Worker threads of the client runtime.
const WORKER_THREADS: usize = 2;

/// Owns the client runtime. Dropping it shuts the runtime down without
/// blocking, so a store may be dropped inside an async context.
pub(crate) struct Bridge {
    runtime: Option<Runtime>,
    handle: Handle,
}

impl Bridge {
    pub(crate) fn new() -> Result<Bridge> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKER_THREADS)
            .thread_name("affinity-bigtable")
            .enable_all()
            .build()
            .map_err(|e| {
                Error::Internal(format!("cannot start the bigtable client runtime: {e}"))
            })?;
        let handle = runtime.handle().clone();
        Ok(Bridge {
            runtime: Some(runtime),
            handle,
        })
    }

    /// A handle for spawning background tasks (streaming reads).
    pub(crate) fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Run `future` on the client runtime and wait for its output.
    pub(crate) fn run<F, T>(&self, future: F) -> Result<T>
    where
        F: Future<Output = Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.handle.spawn(async move {
            // The receiver only goes away if the caller's thread died.
            let _ = tx.send(future.await);
        });
        rx.recv().map_err(|_| {
            Error::Internal("the bigtable client runtime stopped before answering".to_string())
        })?
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
