//! `affinity table` end to end: the real binary, on the embedded store and
//! on the Bigtable emulator, with the same walk-through and error cases.

use std::process::{Command, Output};

/// How to point the binary at a backend.
enum Backend {
    Embedded(tempfile::TempDir),
    Emulator { host: String, instance: String },
}

impl Backend {
    fn run(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_affinity"));
        cmd.arg("table");
        match self {
            Backend::Embedded(dir) => {
                cmd.arg("--data").arg(dir.path());
                cmd.env_remove("BIGTABLE_EMULATOR_HOST");
            }
            Backend::Emulator { host, instance } => {
                cmd.arg("--bigtable").arg(format!("cli-test/{instance}"));
                cmd.env("BIGTABLE_EMULATOR_HOST", host);
            }
        }
        cmd.env_remove("AFFINITY_DATA")
            .env_remove("AFFINITY_BIGTABLE");
        cmd.args(args).output().expect("run the affinity binary")
    }

    /// Run and require success; returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "affinity table {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 output")
    }

    /// Run and require failure; returns stderr.
    fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            !out.status.success(),
            "affinity table {args:?} should have failed"
        );
        String::from_utf8(out.stderr).expect("utf-8 output")
    }
}

fn walk_through(b: &Backend) {
    let created = b.ok(&[
        "create",
        "events",
        "--family",
        "e:maxage=90d or maxversions=3",
        "--family",
        "c:maxversions=1",
    ]);
    assert!(created.contains("created table events"), "{created}");
    assert!(b.ok(&["ls"]).lines().any(|l| l == "events"));
    let families = b.ok(&["families", "events"]);
    assert!(families.contains("maxversions=1"), "{families}");

    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let ts = |offset_s: i64| ((now_ms / 1000 - offset_s) * 1_000_000).to_string();
    b.ok(&[
        "set",
        "events",
        "app1,alice,1",
        "e:view,Viewed,brand=Apple",
        "e:view,Viewed,color=Black",
        "--timestamp",
        &ts(30),
    ]);
    b.ok(&[
        "set",
        "events",
        "app1,alice,2",
        "e:click,Clicked,brand=Apple",
        "--timestamp",
        &ts(20),
    ]);
    b.ok(&[
        "set",
        "events",
        "app1,bob,1",
        "e:view,Viewed,brand=Samsung",
        "--timestamp",
        &ts(10),
    ]);
    b.ok(&["set", "events", "app2,carol,1", "e:view,Viewed,brand=Sony"]);

    let alice = b.ok(&["read", "events", "--prefix", "app1,alice,"]);
    let rows = |out: &str| out.lines().filter(|l| *l == "-".repeat(40)).count();
    assert_eq!(rows(&alice), 2, "{alice}");
    assert!(
        alice.contains("e:view,Viewed,color") && alice.contains("\"Black\""),
        "{alice}"
    );
    assert!(!alice.contains("bob"), "{alice}");

    let brands = b.ok(&[
        "read",
        "events",
        "--prefix",
        "app1,",
        "--qualifier-regex",
        ".*,brand",
    ]);
    assert!(
        brands.contains("\"Samsung\"") && !brands.contains("color"),
        "{brands}"
    );

    let ranged = b.ok(&["read", "events", "--start", "app1,alice,2", "--end", "app2"]);
    assert!(
        ranged.contains("app1,alice,2") && ranged.contains("app1,bob,1"),
        "{ranged}"
    );
    assert!(
        !ranged.contains("app1,alice,1") && !ranged.contains("carol"),
        "{ranged}"
    );

    let last = b.ok(&["read", "events", "--reversed", "--limit", "1"]);
    assert!(
        last.contains("app2,carol,1") && !last.contains("bob"),
        "{last}"
    );

    assert_eq!(b.ok(&["count", "events"]).trim(), "4");
    let sample = b.ok(&["sample", "events"]);
    assert!(sample.contains("(end of table)"), "{sample}");

    b.ok(&["delete-row", "events", "app1,bob,1"]);
    assert_eq!(b.ok(&["count", "events"]).trim(), "3");

    // Bad input: a clear error naming what is wrong, and nothing changed.
    let err = b.fails(&["set", "events", "app1,dave,1", "nofamily:q=v"]);
    assert!(err.contains("nofamily"), "{err}");
    let err = b.fails(&[
        "set",
        "events",
        "app1,dave,1",
        "e:q=v",
        "--timestamp",
        "1500",
    ]);
    assert!(err.contains("1500"), "{err}");
    let err = b.fails(&["set", "events", "app1,dave,1", "no-colon=v"]);
    assert!(err.contains("FAMILY:QUALIFIER=VALUE"), "{err}");
    assert_eq!(b.ok(&["count", "events"]).trim(), "3");
    let err = b.fails(&["read", "missing"]);
    assert!(err.contains("missing"), "{err}");
    let err = b.fails(&["create", "bad", "--family", "e:maxage=10"]);
    assert!(err.contains("unit"), "{err}");

    b.ok(&["delete", "events"]);
    assert!(!b.ok(&["ls"]).lines().any(|l| l == "events"));
}

#[test]
fn table_walk_through_on_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    walk_through(&Backend::Embedded(dir));
}

#[ignore = "needs the Cloud Bigtable emulator (scripts/test runs it)"]
#[test]
fn table_walk_through_on_the_emulator() {
    let host = affinity_bigtable::emulator::test_emulator_host();
    walk_through(&Backend::Emulator {
        host,
        instance: affinity_bigtable::emulator::fresh_instance(),
    });
}

#[test]
fn bigtable_flag_must_name_project_and_instance() {
    let out = Command::new(env!("CARGO_BIN_EXE_affinity"))
        .args(["table", "--bigtable", "just-a-project", "ls"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("PROJECT/INSTANCE"));
}
