//! Running the real `affinity` binary on an embedded store, for the CLI
//! end-to-end tests.

use std::path::Path;
use std::process::{Command, Output};

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
