//! Running the real `affinity` binary on an embedded store, for the CLI
//! end-to-end tests. Each test binary uses part of it.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// Run `affinity ARGS --data DATA`, away from any Bigtable configuration.
pub fn affinity(data: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_affinity"))
        .args(args)
        .arg("--data")
        .arg(data)
        .env_remove("AFFINITY_BIGTABLE")
        .env_remove("BIGTABLE_EMULATOR_HOST")
        .output()
        .expect("run the affinity binary")
}

/// Run it and return its standard output; it must succeed.
pub fn ok(data: &Path, args: &[&str]) -> String {
    let out = affinity(data, args);
    assert!(
        out.status.success(),
        "affinity {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Run it and return its standard error; it must fail.
pub fn fails(data: &Path, args: &[&str]) -> String {
    let out = affinity(data, args);
    assert!(!out.status.success(), "affinity {args:?} should fail");
    String::from_utf8(out.stderr).expect("utf-8")
}

/// A running `affinity serve`, killed when dropped (also when a test fails).
pub struct Server {
    child: Child,
    /// `host:port` it listens on.
    pub addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// Start `affinity serve --listen 127.0.0.1:0 --data DATA ARGS` with no
/// configuration from the environment; returns once it printed its address.
pub fn serve(data: &Path, args: &[&str]) -> Server {
    serve_with(data, args, |_| {})
}

/// [`serve`], with the command changed by `configure` first.
pub fn serve_with(data: &Path, args: &[&str], configure: impl FnOnce(&mut Command)) -> Server {
    let mut command = Command::new(env!("CARGO_BIN_EXE_affinity"));
    configure(&mut command);
    let mut child = command
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(data)
        .args(args)
        .env_remove("AFFINITY_BIGTABLE")
        .env_remove("BIGTABLE_EMULATOR_HOST")
        .env_remove("AFFINITY_CONFIG")
        .env_remove("AFFINITY_APP_ID")
        .env_remove("AFFINITY_API_KEY")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start affinity serve");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut server = Server {
        child,
        addr: String::new(),
    };
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the server's first line");
    server.addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    server
}
