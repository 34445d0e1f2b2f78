//! The official Cloud Bigtable emulator (`cbtemulator`) as a child process,
//! and the store tests use.
//!
//! The emulator runs under a small `sh` watchdog that kills it when our end
//! of its stdin closes, so it goes away with the test process even when
//! that process is killed or never drops the [`Emulator`] (a `static`).

use std::io::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::BigtableStore;

/// Where the Google Cloud SDK installs the emulator.
const SDK_PATHS: &[&str] = &[
    "/usr/lib/google-cloud-sdk/platform/bigtable-emulator/cbtemulator",
    "/usr/share/google-cloud-sdk/platform/bigtable-emulator/cbtemulator",
];

/// How long the emulator may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the emulator could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmulatorError {
    #[error("the Cloud Bigtable emulator (cbtemulator) was not found: set AFFINITY_CBTEMULATOR, put cbtemulator on PATH, or install the google-cloud-cli-bigtable-emulator package")]
    NotFound,
    #[error("cannot start the emulator {path}: {reason}")]
    Spawn { path: PathBuf, reason: String },
    #[error("the emulator on {host} did not accept connections within {waited:?}: {reason}")]
    NotReady {
        host: String,
        waited: Duration,
        reason: String,
    },
}

impl From<EmulatorError> for affinity_model::Error {
    fn from(err: EmulatorError) -> affinity_model::Error {
        affinity_model::Error::Unavailable(err.to_string())
    }
}

/// The emulator binary: `$AFFINITY_CBTEMULATOR`, `cbtemulator` on `PATH`,
/// or the Cloud SDK's copy.
pub fn find_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("AFFINITY_CBTEMULATOR") {
        let path = PathBuf::from(path);
        if path.is_file() {
            return Some(path);
        }
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let candidate = dir.join("cbtemulator");
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    SDK_PATHS.iter().map(PathBuf::from).find(|p| p.is_file())
}

/// A running emulator on a free loopback port, stopped on drop.
#[derive(Debug)]
pub struct Emulator {
    host: String,
    watchdog: Child,
    stdin: Option<ChildStdin>,
}

impl Emulator {
    /// Start the emulator found by [`find_binary`] and wait until it
    /// accepts connections.
    pub fn start() -> Result<Emulator, EmulatorError> {
        let binary = find_binary().ok_or(EmulatorError::NotFound)?;
        Emulator::start_binary(&binary)
    }

    /// Start a given emulator binary.
    pub fn start_binary(binary: &Path) -> Result<Emulator, EmulatorError> {
        // A port another process grabs between our probe and the
        // emulator's bind makes the start fail: try a few ports.
        let mut last_err = None;
        for _ in 0..3 {
            match Emulator::start_on(binary, free_port(binary)?) {
                Ok(emulator) => return Ok(emulator),
                Err(err) => last_err = Some(err),
            }
        }
        Err(last_err.unwrap_or(EmulatorError::NotFound))
    }

    fn start_on(binary: &Path, port: u16) -> Result<Emulator, EmulatorError> {
        let host = format!("127.0.0.1:{port}");
        let log = std::env::temp_dir().join(format!("affinity-cbtemulator-{port}.log"));
        // `$0` is the binary, `$1` the port, `$2` the log; the emulator dies
        // when `read` sees our end of stdin close.
        let script = r#""$0" -host 127.0.0.1 -port "$1" >"$2" 2>&1 </dev/null &
pid=$!
read -r _ignored
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
exit 0"#;
        let mut watchdog = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg(binary)
            .arg(port.to_string())
            .arg(&log)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| EmulatorError::Spawn {
                path: binary.to_path_buf(),
                reason: e.to_string(),
            })?;
        let stdin = watchdog.stdin.take();
        let mut emulator = Emulator {
            host: host.clone(),
            watchdog,
            stdin,
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let started = Instant::now();
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(emulator);
            }
            let exited = matches!(emulator.watchdog.try_wait(), Ok(Some(_)));
            let log_tail = || -> String {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let start = text.len().saturating_sub(500);
                text.get(start..).unwrap_or(&text).to_string()
            };
            if exited || started.elapsed() > START_TIMEOUT {
                return Err(EmulatorError::NotReady {
                    host,
                    waited: started.elapsed(),
                    reason: format!("log {}: {}", log.display(), log_tail()),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `127.0.0.1:PORT`, the value for `BIGTABLE_EMULATOR_HOST`.
    pub fn emulator_host(&self) -> &str {
        &self.host
    }

    /// Same as [`Emulator::emulator_host`].
    pub fn host(&self) -> &str {
        &self.host
    }

    /// A store on `projects/{project}/instances/{instance}` of this emulator.
    pub fn store(&self, project: &str, instance: &str) -> affinity_model::Result<BigtableStore> {
        BigtableStore::builder(project, instance)
            .emulator_host(self.host.clone())
            .connect()
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            // A line or EOF both end the watchdog's `read`.
            let _ = stdin.write_all(b"stop\n");
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if !matches!(self.watchdog.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.watchdog.kill();
        let _ = self.watchdog.wait();
    }
}

fn free_port(binary: &Path) -> Result<u16, EmulatorError> {
    TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| EmulatorError::Spawn {
            path: binary.to_path_buf(),
            reason: format!("no free loopback port: {e}"),
        })
}

/// The emulator this process started for its tests, if any.
static TEST_EMULATOR: OnceLock<Result<Emulator, String>> = OnceLock::new();
/// The connection tests share, to the emulator they use.
static TEST_CONNECTION: OnceLock<Result<BigtableStore, String>> = OnceLock::new();
static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(0);

/// `host:port` of the emulator tests use: `$BIGTABLE_EMULATOR_HOST` when
/// set (`scripts/test` starts one emulator for the whole run), else one this
/// process starts and keeps until it exits.
///
/// Tests that need the emulator are `#[ignore]`d, so a plain `cargo test`
/// reports them as ignored; `scripts/test` runs them whenever it finds an
/// emulator (always under `CI=true`). A test that calls this was asked for,
/// so a missing emulator fails it rather than letting it pass unchecked.
///
/// # Panics
/// When no emulator is running and none can be found or started.
pub fn test_emulator_host() -> String {
    if let Ok(host) = std::env::var("BIGTABLE_EMULATOR_HOST") {
        if !host.trim().is_empty() {
            return host.trim().to_string();
        }
    }
    match TEST_EMULATOR.get_or_init(|| Emulator::start().map_err(|e| e.to_string())) {
        Ok(emulator) => emulator.host().to_string(),
        Err(err) => panic!("this test needs the Cloud Bigtable emulator: {err}"),
    }
}

/// A store on a fresh, empty instance of the test emulator
/// ([`test_emulator_host`]), for tests. Each call gets its own instance
/// over one shared connection, so tests sharing an emulator never see each
/// other's tables.
///
/// # Panics
/// As [`test_emulator_host`], and when the emulator cannot be reached.
pub fn test_store() -> Arc<BigtableStore> {
    let connection = TEST_CONNECTION.get_or_init(|| {
        let host = test_emulator_host();
        BigtableStore::builder("affinity-test", "conn")
            .emulator_host(host.clone())
            .connect()
            .map_err(|e| format!("cannot connect to the emulator at {host}: {e}"))
    });
    match connection {
        Ok(store) => Arc::new(store.with_instance("affinity-test", &fresh_instance())),
        Err(err) => panic!("bigtable emulator unusable: {err}"),
    }
}

/// An instance name no other test (of this or another process) uses.
pub fn fresh_instance() -> String {
    let n = NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed);
    format!("test-{}-{n}", std::process::id())
}
