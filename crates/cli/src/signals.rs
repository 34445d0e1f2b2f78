//! Stop requests (SIGTERM, ctrl-c) for batch commands: a job worker hands
//! its shard back instead of dying with it leased (a Kubernetes pod is sent
//! SIGTERM when its node drains). A second request ends the process at
//! once.

use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::Duration;

/// Whether SIGTERM or SIGINT has arrived; a waiter wakes as it does.
#[derive(Default)]
pub struct StopRequest {
    requested: Mutex<bool>,
    arrived: Condvar,
}

impl StopRequest {
    /// Whether a stop was requested, waiting up to `timeout` for one.
    pub fn wait(&self, timeout: Duration) -> bool {
        let requested = self
            .requested
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (requested, _) = self
            .arrived
            .wait_timeout_while(requested, timeout, |requested| !*requested)
            .unwrap_or_else(PoisonError::into_inner);
        *requested
    }

    fn request(&self) {
        *self
            .requested
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = true;
        self.arrived.notify_all();
    }
}

/// The stop request, set once SIGTERM or SIGINT arrives. The first call
/// starts the thread that listens for them and returns once it listens;
/// from then on the signals no longer end the process by themselves,
/// except a second one.
pub fn on_stop_request() -> Arc<StopRequest> {
    static FLAG: OnceLock<Arc<StopRequest>> = OnceLock::new();
    Arc::clone(FLAG.get_or_init(|| {
        let flag = Arc::new(StopRequest::default());
        let set = Arc::clone(&flag);
        let (ready, listening) = std::sync::mpsc::channel::<()>();
        let listener = std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    return;
                };
                runtime.block_on(async move {
                    let Some(mut stops) = Stops::listen() else {
                        return;
                    };
                    let _ = ready.send(());
                    stops.next().await;
                    eprintln!(
                        "stop requested: handing the job back (send it again to stop at once)"
                    );
                    set.request();
                    stops.next().await;
                    std::process::exit(130);
                });
            });
        let listens = listener.is_ok() && listening.recv_timeout(Duration::from_secs(5)).is_ok();
        if !listens {
            eprintln!("warning: no signal listener: SIGTERM ends the job with its lease held");
        }
        flag
    }))
}

/// The stop signals, listened to.
struct Stops {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Stops {
    #[cfg(unix)]
    fn listen() -> Option<Stops> {
        use tokio::signal::unix::{signal, SignalKind};
        Some(Stops {
            term: signal(SignalKind::terminate()).ok()?,
            int: signal(SignalKind::interrupt()).ok()?,
        })
    }

    #[cfg(not(unix))]
    fn listen() -> Option<Stops> {
        Some(Stops {})
    }

    /// Resolves on the next SIGTERM or SIGINT.
    async fn next(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
