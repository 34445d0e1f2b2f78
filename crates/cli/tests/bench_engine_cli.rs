//! `affinity bench engine` end to end through the real binary: a small
//! batch run loads every event and exports every profile (again with
//! `--loaded`, once per thread count, the same profiles and JSON bytes;
//! narrow and wide alike), an ingest run stores every event and leaves profiles
//! that score what was ingested, a maintain run folds every event it loaded
//! (alone and on top of earlier days), and `--loaded` needs `--data`. The
//! figures are read from the printed line and checked against each other.

mod common;

use common::ok;

/// The number printed just before the word `label` in `line` (`3000` for
/// `events,` in `... 3000 events, ...`).
fn figure(line: &str, label: &str) -> f64 {
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| *w == label)
        .unwrap_or_else(|| panic!("no {label:?} in {line:?}"));
    let number = words[at - 1].trim_start_matches('(');
    number
        .parse()
        .unwrap_or_else(|_| panic!("{number:?} before {label:?} in {line:?}"))
}

/// The rate printed (`= R events/s`) is the count over the time printed
/// (`in S s`, rounded to 10 ms).
fn assert_rate_consistent(line: &str, count: f64) {
    let (seconds, rate) = (figure(line, "s"), figure(line, "events/s"));
    assert!(rate > 0.0 && seconds >= 0.0, "{line}");
    assert!(
        (count / rate - seconds).abs() <= 0.0051,
        "{count} events / {rate} events/s is not {seconds} s: {line}"
    );
}

/// The `export` lines of a batch run's output: (threads, events,
/// profiles, JSON bytes, ranges).
fn export_lines(out: &str) -> Vec<(f64, f64, f64, f64, f64)> {
    assert!(
        out.contains("writes nothing (the time is the export's, not output I/O)"),
        "{out}"
    );
    out.lines()
        .filter(|l| l.starts_with("export "))
        .map(|line| {
            let events = figure(line, "events,");
            assert_rate_consistent(line, events);
            let figures = (
                figure(line, "threads):"),
                events,
                figure(line, "profiles,"),
                figure(line, "JSON"),
                figure(line, "ranges"),
            );
            assert!(figures.3 > 0.0 && figures.4 >= 1.0, "{line}");
            figures
        })
        .collect()
}

#[test]
fn batch_loads_then_exports_every_profile() {
    let mut bytes_per_schema = Vec::new();
    for schema in ["wide", "narrow"] {
        let dir = tempfile::tempdir().unwrap();
        let args = [
            "bench", "engine", "batch", "--schema", schema, "--events", "3000",
        ];
        let out = ok(dir.path(), &args);
        let runs = export_lines(&out);
        // 100 events per user: 30 users, each with a profile.
        assert_eq!(runs.len(), 1, "{out}");
        assert_eq!(
            (runs[0].0, runs[0].1, runs[0].2),
            (2.0, 3000.0, 30.0),
            "{out}"
        );
        let bytes = runs[0].3;
        bytes_per_schema.push(bytes);
        let again = ok(
            dir.path(),
            &[&args[..], &["--loaded", "--threads", "1,2"]].concat(),
        );
        let runs = export_lines(&again);
        let threads: Vec<f64> = runs.iter().map(|r| r.0).collect();
        assert_eq!(threads, [1.0, 2.0], "{again}");
        for run in runs {
            assert_eq!((run.1, run.2, run.3), (3000.0, 30.0, bytes), "{again}");
        }
    }
    // The same generated events in either schema: the same profiles.
    assert_eq!(bytes_per_schema[0], bytes_per_schema[1]);
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
    let line = out
        .lines()
        .find(|l| l.starts_with("ingest "))
        .unwrap_or_else(|| panic!("no ingest line: {out}"));
    assert_eq!(figure(line, "events"), 2500.0, "{line}");
    assert_eq!(figure(line, "clients,"), 4.0, "{line}");
    assert_eq!(figure(line, "users,"), 50.0, "{line}");
    assert_rate_consistent(line, 2500.0);

    // 50 events per user: user7's profile scores the strategy's facets
    // (brand and category), 1 to 20, the best value 20.
    let profile = ok(
        dir.path(),
        &["profile", "--app", "bench", "user7", "--json"],
    );
    let profile: serde_json::Value = serde_json::from_str(&profile).unwrap();
    assert_eq!(profile["userToken"], "user7", "{profile}");
    let scores = profile["scores"].as_object().expect("scores");
    let mut facets: Vec<&str> = scores.keys().map(String::as_str).collect();
    facets.sort_unstable();
    assert_eq!(facets, ["brand", "category"], "{profile}");
    let values: Vec<i64> = scores
        .values()
        .flat_map(|v| v.as_object().expect("values").values())
        .map(|s| s.as_i64().expect("an integer score"))
        .collect();
    assert!(values.len() > 2, "{profile}");
    assert!(values.iter().all(|s| (1..=20).contains(s)), "{profile}");
    assert_eq!(values.iter().max(), Some(&20), "{profile}");
}

#[test]
fn loaded_needs_a_data_directory() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_affinity"))
        .args(["bench", "engine", "batch", "--loaded"])
        .output()
        .expect("run the affinity binary");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--loaded needs --data"), "{err}");
}

/// The `maintain` line of an output: (users, rollups written, day rows
/// read, conflicts, events folded), its rates checked against its time.
fn maintain_line(out: &str) -> (f64, f64, f64, f64, f64) {
    let line = out
        .lines()
        .find(|l| l.starts_with("maintain "))
        .unwrap_or_else(|| panic!("no maintain line: {out}"));
    let figures = (
        figure(line, "users,"),
        figure(line, "rollups"),
        figure(line, "day"),
        figure(line, "conflicts,"),
        figure(line, "events"),
    );
    let seconds = figure(line, "s");
    assert!(seconds >= 0.0 && figure(line, "users/s,") > 0.0, "{line}");
    // `N events folded in S s = R users/s, E events folded/s`
    let words: Vec<&str> = line.split_whitespace().collect();
    let per_s = words
        .iter()
        .position(|w| *w == "folded/s")
        .map(|at| words[at - 2].parse::<f64>().expect("a rate"))
        .unwrap_or_else(|| panic!("no folded/s in {line:?}"));
    assert!(
        (figures.4 / per_s - seconds).abs() <= 0.0051,
        "{} events / {per_s} events/s is not {seconds} s: {line}",
        figures.4
    );
    figures
}

/// The number of users with events the `loaded` line names.
fn loaded_users(out: &str) -> (f64, f64) {
    let line = out
        .lines()
        .find(|l| l.starts_with("loaded "))
        .unwrap_or_else(|| panic!("no loaded line: {out}"));
    (figure(line, "events"), figure(line, "users"))
}

#[test]
fn maintain_folds_every_event_it_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let out = ok(
        dir.path(),
        &[
            "bench", "engine", "maintain", "--events", "2000", "--users", "200",
        ],
    );
    let (loaded, with_events) = loaded_users(&out);
    assert_eq!(loaded, 2000.0, "{out}");
    assert!(with_events > 150.0 && with_events <= 200.0, "{out}");
    let (users, written, rows, conflicts, folded) = maintain_line(&out);
    // Every user with an event got a rollup from their one day row, and
    // the rollups hold every event loaded.
    assert_eq!(
        (users, written, rows),
        (with_events, with_events, with_events),
        "{out}"
    );
    assert_eq!(conflicts, 0.0, "{out}");
    assert_eq!(folded, 2000.0, "{out}");
    assert!(out.contains("rollups: "), "{out}");
}

#[test]
fn maintain_adds_a_day_to_the_rollups_of_earlier_days() {
    let dir = tempfile::tempdir().unwrap();
    let out = ok(
        dir.path(),
        &[
            "bench", "engine", "maintain", "--events", "2000", "--users", "100", "--days", "2",
        ],
    );
    assert!(out.contains("earlier days: 2 x 2000 events"), "{out}");
    let (loaded, with_events) = loaded_users(&out);
    assert_eq!((loaded, with_events), (2000.0, 100.0), "{out}");
    // 20 events a user a day: every user has a rollup and a new day row.
    let (users, written, rows, conflicts, folded) = maintain_line(&out);
    assert_eq!(
        (users, written, rows, conflicts),
        (100.0, 100.0, 100.0, 0.0),
        "{out}"
    );
    assert_eq!(folded, 2000.0, "{out}");
    let line = out.lines().find(|l| l.starts_with("rollups: ")).unwrap();
    assert_eq!(figure(line, "events"), 6000.0, "{line}");
    assert_eq!(figure(line, "before"), 4000.0, "{line}");
}

#[test]
fn maintain_days_stay_within_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let err = common::fails(
        dir.path(),
        &[
            "bench", "engine", "maintain", "--events", "10", "--days", "89",
        ],
    );
    assert!(
        err.contains("--days must be within 0 and 88, got 89"),
        "{err}"
    );
}
