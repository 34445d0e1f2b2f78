//! The backend flags (`--data`, `--bigtable`) come from the caller's
//! command line, so the benchmarks check the combinations clap used to:
//! each refused before any work starts, with a message naming the flags.

use std::path::PathBuf;

use affinity_bench::{run, BenchBackend, BenchCommand};
use clap::Parser;

/// `affinity bench`'s subcommands, as the binary parses them.
#[derive(Parser)]
struct Bench {
    #[command(subcommand)]
    command: BenchCommand,
}

/// The error of `bench ARGS` with `backend`; it must fail.
fn refused(args: &[&str], backend: BenchBackend) -> String {
    let bench = Bench::try_parse_from(std::iter::once("bench").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?} does not parse: {e}"));
    match run(bench.command, &backend) {
        Ok(()) => panic!("bench {args:?} with {backend:?} ran"),
        Err(err) => format!("{err:#}"),
    }
}

fn data() -> Option<PathBuf> {
    Some(PathBuf::from("/nonexistent/affinity-bench-never-created"))
}

fn bigtable() -> Option<String> {
    Some("project/instance".into())
}

const REMOTE: [&str; 7] = [
    "http",
    "--url",
    "http://127.0.0.1:9",
    "--app-id",
    "shop",
    "--api-key",
    "secret",
];

#[test]
fn http_refuses_a_store_with_a_server_elsewhere_and_two_stores() {
    let with_data = BenchBackend {
        data: data(),
        bigtable: None,
    };
    let err = refused(&REMOTE, with_data);
    assert!(
        err.contains("--data cannot be combined with --url"),
        "{err}"
    );

    let with_bigtable = BenchBackend {
        data: None,
        bigtable: bigtable(),
    };
    let err = refused(&REMOTE, with_bigtable);
    assert!(
        err.contains("--bigtable cannot be combined with --url"),
        "{err}"
    );

    let both = BenchBackend {
        data: data(),
        bigtable: bigtable(),
    };
    let err = refused(&["http"], both);
    assert!(
        err.contains("--data cannot be combined with --bigtable"),
        "{err}"
    );
}

#[test]
fn http_with_a_bad_instance_names_the_flag() {
    let backend = BenchBackend {
        data: None,
        bigtable: Some("no-instance".into()),
    };
    let err = refused(&["http"], backend);
    assert!(
        err.contains(r#"--bigtable must be PROJECT/INSTANCE, got "no-instance""#),
        "{err}"
    );
}

#[test]
fn engine_loaded_needs_data() {
    let err = refused(&["engine", "batch", "--loaded"], BenchBackend::default());
    assert!(err.contains("--loaded needs --data"), "{err}");
}

#[test]
fn a_flag_a_benchmark_has_no_use_for_is_refused() {
    let with_bigtable = BenchBackend {
        data: None,
        bigtable: bigtable(),
    };
    for (args, name) in [
        (&["store"][..], "store"),
        (&["geo"][..], "geo"),
        (&["schemas"][..], "schemas"),
        (&["engine", "ingest"][..], "engine"),
        (&["keys"][..], "keys"),
    ] {
        let err = refused(args, with_bigtable.clone());
        assert_eq!(err, format!("--bigtable is not an option of bench {name}"));
    }
    let with_data = BenchBackend {
        data: data(),
        bigtable: None,
    };
    let err = refused(&["keys"], with_data);
    assert_eq!(err, "--data is not an option of bench keys");
}
