//! `affinity bench engine` end to end through the real binary: a small
//! batch run loads and recomputes every event (again with `--loaded`),
//! an ingest run stores every event and leaves readable profiles, and
//! `--loaded` needs `--data`.

mod common;

use common::ok;

#[test]
fn batch_loads_then_recomputes_every_event() {
    for schema in ["wide", "narrow"] {
        let dir = tempfile::tempdir().unwrap();
        let args = [
            "bench", "engine", "batch", "--schema", schema, "--events", "3000",
        ];
        let out = ok(dir.path(), &args);
        assert!(
            out.contains(&format!(
                "batch {schema} (2 threads): 3000 events, 30 profiles"
            )),
            "{out}"
        );
        let again = ok(
            dir.path(),
            &[&args[..], &["--loaded", "--threads", "1,2"]].concat(),
        );
        assert!(
            again.contains("(1 threads): 3000 events, 30 profiles"),
            "{again}"
        );
        assert!(
            again.contains("(2 threads): 3000 events, 30 profiles"),
            "{again}"
        );
    }
}

#[test]
fn ingest_stores_every_event_and_profiles_answer() {
    let dir = tempfile::tempdir().unwrap();
    let out = ok(
        dir.path(),
        &[
            "bench", "engine", "ingest", "--events", "2500", "--users", "50",
        ],
    );
    assert!(
        out.contains("ingest wide (4 clients, 50 users, 1 days): 2500 events in"),
        "{out}"
    );
    let profile = ok(
        dir.path(),
        &["profile", "--app", "bench", "user7", "--json"],
    );
    assert!(profile.contains(r#""userToken":"user7""#), "{profile}");
    assert!(profile.contains(r#""brand":{"#), "{profile}");
}

#[test]
fn loaded_needs_a_data_directory() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_affinity"))
        .args(["bench", "engine", "batch", "--loaded"])
        .output()
        .expect("run the affinity binary");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--data"), "{err}");
}
