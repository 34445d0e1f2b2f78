//! `affinity bench hotkeys` prints its table; bad flags are refused.

use std::process::{Command, Output};

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_affinity"))
        .arg("bench")
        .args(args)
        .output()
        .expect("run affinity")
}

/// What `affinity bench ARGS` prints, once it succeeded.
fn printed(args: &[&str]) -> String {
    let run = bench(args);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    String::from_utf8(run.stdout).unwrap()
}

#[test]
fn hotkeys_prints_the_busiest_range_of_each_layout() {
    let out = printed(&[
        "hotkeys", "--users", "2000", "--writes", "100000", "--ranges", "8",
    ]);
    // The figures of the row starting with `row` in `table`: ranges cut
    // by size, then (after its header) by load.
    let (by_size, by_load) = out
        .split_once("with load-based splits")
        .unwrap_or_else(|| panic!("{out}"));
    let figures = |table: &str, row: &str| -> Vec<f64> {
        table
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("no {row} row in {out}"))
            .split('|')
            .filter_map(|c| c.trim().parse().ok())
            .collect()
    };
    // Events: unsalted, salted by app,user, spread, hot users spread;
    // state: unsalted, spread, hot users spread.
    for (table, count) in [("events", 4), ("profile state", 3)] {
        let figures = figures(by_size, &format!("| {table} |"));
        assert_eq!(figures.len(), count, "{out}");
        // The busiest of 8 ranges takes at least the mean and at most all.
        assert!(figures.iter().all(|f| (1.0..=8.0).contains(f)), "{out}");
        // Spreading hot users' writes beats keeping them together.
        for spread in &figures[count - 2..] {
            assert!(*spread < figures[0], "{out}");
        }
    }
    // With load-based splits: both tables without hot lists and as
    // built with them (the busiest users' state over sub-rows and their
    // events over buckets, which such splits divide and the single row
    // or range end they replace cannot be; 100,000 writes, so the
    // busiest users pass the policy's 10,000).
    let events = figures(by_load, "| events (salted by app,user) |");
    assert_eq!(events.len(), 2, "{out}");
    assert!(events[1] < events[0], "{out}");
    let state = figures(by_load, "| profile state |");
    assert_eq!(state.len(), 2, "{out}");
    assert!(
        events.iter().chain(&state).all(|f| (1.0..=8.0).contains(f)),
        "{out}"
    );
    assert!(state[1] < state[0], "{out}");
    // Applications Zipf-distributed too: the same tables, each
    // application's busiest users listed on its own events.
    let out = printed(&[
        "hotkeys", "--users", "2000", "--apps", "20", "--writes", "100000", "--ranges", "8",
    ]);
    assert!(out.contains("of each of 20 application(s)"), "{out}");
    let (_, by_load) = out.split_once("with load-based splits").unwrap();
    for row in ["| events (salted by app,user) |", "| profile state |"] {
        let figures = figures(by_load, row);
        assert_eq!(figures.len(), 2, "{out}");
        assert!(figures.iter().all(|f| (1.0..=8.0).contains(f)), "{out}");
    }
    let refused = bench(&["hotkeys", "--apps", "0"]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("--apps"), "{err}");
    let refused = bench(&["hotkeys", "--ranges", "1"]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("--ranges at least 2"), "{err}");
    let refused = bench(&["hotkeys", "--sub-rows", "0"]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("--sub-rows must be positive"), "{err}");
    let refused = bench(&["hotkeys", "--data", "/tmp/x"]);
    assert!(String::from_utf8_lossy(&refused.stderr)
        .contains("--data is not an option of bench hotkeys"));
}
