//! `affinity bench overload` and `affinity bench soak` through the real
//! binary: a short overload run prints its phases with figures that add
//! up and no error; bad flags of both are refused naming the flag. (A soak
//! lasts whole minutes: it is not run here.)

mod common;

use common::{fails, ok};

/// The number printed just after `label` in `line` (`162.0` for `sent`
/// in `... sent 162.0/s: ...`).
fn after(line: &str, label: &str) -> f64 {
    let at = line
        .find(label)
        .unwrap_or_else(|| panic!("no {label:?} in {line:?}"));
    let number: String = line[at + label.len()..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    number
        .parse()
        .unwrap_or_else(|_| panic!("{number:?} after {label:?} in {line:?}"))
}

#[test]
fn a_short_overload_run_prints_every_phase() {
    let dir = tempfile::tempdir().unwrap();
    let out = ok(
        dir.path(),
        &[
            "bench",
            "overload",
            "--seconds",
            "1",
            "--readers",
            "4",
            "--senders",
            "16",
            "--users",
            "50",
            "--batch",
            "10",
            "--max-writes-in-flight",
            "1",
        ],
    );
    let line = |start: &str| {
        out.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no {start:?} line in {out}"))
            .to_string()
    };
    let calibration = line("calibration");
    assert!(after(&calibration, "calibration") > 0.0, "{out}");
    assert!(line("reads alone").contains("p99"), "{out}");
    // One-second phases: every batch sent was acknowledged, refused or
    // cut off, to the rounding of the printed figures.
    let overload = line("overload");
    let sent = after(&overload, "sent");
    let answered = after(&overload, "acknowledged")
        + after(&overload, "shed 503")
        + after(&overload, ", 429")
        + after(&overload, "closed while sending");
    assert!(sent > 0.0 && (sent - answered).abs() <= 0.35, "{out}");
    assert_eq!(after(&overload, "errors"), 0.0, "{out}");
    let reads = line("reads under");
    assert!(after(&reads, "reads under") > 0.0, "{out}");
    assert_eq!(after(&reads, "errors"), 0.0, "{out}");
}

#[test]
fn bad_flags_are_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let err = fails(dir.path(), &["bench", "overload", "--seconds", "0"]);
    assert!(err.contains("--seconds"), "{err}");
    let err = fails(dir.path(), &["bench", "overload", "--factor", "0"]);
    assert!(err.contains("--factor"), "{err}");
    let err = fails(
        dir.path(),
        &["bench", "overload", "--max-writes-in-flight", "0"],
    );
    assert!(err.contains("max_writes_in_flight"), "{err}");
    let err = fails(dir.path(), &["bench", "soak", "--minutes", "0"]);
    assert!(err.contains("--minutes"), "{err}");
    let err = fails(dir.path(), &["bench", "soak", "--share", "0"]);
    assert!(err.contains("--share"), "{err}");
}
