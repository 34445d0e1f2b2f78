//! Crash test: a child process (this test binary re-executed) loads rows
//! with synced writes and prints each acknowledged row; the parent kills it
//! with SIGKILL mid-load, reopens the store and checks that every
//! acknowledged row is there and that no row is half-applied. Three rounds
//! on the same directory also exercise recovery of a recovered store.
//!
//! The binary has its own `main` (`harness = false`, tests listed through
//! libtest-mimic), so the child's entry point is not a test of its own.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use affinity_embedded::{EmbeddedOptions, EmbeddedStore};
use affinity_model::{
    Error, GcRule, Mutation, ReadRowsRequest, Row, RowMutations, Store, TableSpec,
};

/// Set in the child: the store directory and the round number.
const CHILD_DIR: &str = "AFFINITY_EMBEDDED_CRASH_DIR";
const CHILD_ROUND: &str = "AFFINITY_EMBEDDED_CRASH_ROUND";
/// Cells per row, over two families.
const CELLS_PER_ROW: usize = 6;
/// Rows per `mutate_rows` batch.
const BATCH: usize = 8;

fn spec() -> TableSpec {
    TableSpec::new()
        .with_family("a", GcRule::None)
        .with_family("b", GcRule::MaxVersions(1))
}

/// The mutations of a row: every cell's value names the row, so a cell
/// from another row or a torn value is caught.
fn row_mutations(key: &str) -> Vec<Mutation> {
    (0..CELLS_PER_ROW)
        .map(|i| {
            let family = if i % 2 == 0 { "a" } else { "b" };
            let value = format!("{key}#{i}:{}", "x".repeat(200));
            Mutation::set_cell(family, format!("q{i}"), 1000, value)
        })
        .collect()
}

fn check_row(row: &Row) {
    let key = String::from_utf8_lossy(&row.key).into_owned();
    assert_eq!(
        row.cells.len(),
        CELLS_PER_ROW,
        "row {key} is half-applied: {:?}",
        row.cells
    );
    for cell in &row.cells {
        let i: usize = cell.qualifier[1..]
            .iter()
            .fold(0, |n, d| n * 10 + usize::from(d - b'0'));
        let expected = format!("{key}#{i}:{}", "x".repeat(200));
        assert_eq!(cell.value, expected.as_bytes(), "row {key} cell {i}");
    }
}

/// The child's body: load rows until killed.
fn load_until_killed(dir: &str, round: &str) -> Result<(), Error> {
    let store = EmbeddedStore::open_with(dir, EmbeddedOptions::default())?;
    match store.create_table("t", &spec()) {
        Ok(()) | Err(Error::TableExists { .. }) => {}
        Err(e) => return Err(e),
    }
    let table = store.open_table("t")?;
    let mut out = std::io::stdout().lock();
    for n in 0u64.. {
        if n % 2 == 0 {
            let key = format!("r{round}-single-{n:08}");
            table.mutate_row(key.as_bytes(), &row_mutations(&key))?;
            let _ = writeln!(out, "ACK {key}");
        } else {
            let keys: Vec<String> = (0..BATCH)
                .map(|i| format!("r{round}-batch-{n:08}-{i}"))
                .collect();
            let entries: Vec<RowMutations> = keys
                .iter()
                .map(|k| RowMutations::new(k.clone(), row_mutations(k)))
                .collect();
            let statuses = table.mutate_rows(&entries)?;
            for (key, status) in keys.iter().zip(statuses) {
                status?;
                let _ = writeln!(out, "ACK {key}");
            }
        }
        let _ = out.flush();
    }
    Ok(())
}

fn main() {
    if let (Ok(dir), Ok(round)) = (std::env::var(CHILD_DIR), std::env::var(CHILD_ROUND)) {
        if let Err(e) = load_until_killed(&dir, &round) {
            eprintln!("child failed: {e}");
            std::process::exit(2);
        }
        return;
    }
    let args = libtest_mimic::Arguments::from_args();
    let tests = vec![libtest_mimic::Trial::test(
        "acknowledged_writes_survive_kill_9",
        || {
            acknowledged_writes_survive_kill_9();
            Ok(())
        },
    )];
    libtest_mimic::run(&args, tests).exit();
}

/// Run one child until it acknowledged `kill_after` rows, SIGKILL it, and
/// return every row it acknowledged.
fn run_and_kill(dir: &std::path::Path, round: usize, kill_after: usize) -> Vec<String> {
    let exe = std::env::current_exe().expect("test binary path");
    let mut child = Command::new(exe)
        .env(CHILD_DIR, dir)
        .env(CHILD_ROUND, round.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("child stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut acked = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while acked.len() < kill_after {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(key) = line.strip_prefix("ACK ") {
                    acked.push(key.to_string());
                }
            }
            _ => panic!(
                "child ended before being killed ({} rows acknowledged)",
                acked.len()
            ),
        }
        assert!(Instant::now() < deadline, "child too slow");
    }
    // Child::kill sends SIGKILL on Unix.
    child.kill().expect("kill child");
    let status = child.wait().expect("wait child");
    assert!(!status.success(), "child was killed, not finished");
    // Acknowledgements printed before the kill still count.
    for line in lines.map_while(Result::ok) {
        if let Some(key) = line.strip_prefix("ACK ") {
            acked.push(key.to_string());
        }
    }
    acked
}

fn acknowledged_writes_survive_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut all_acked = Vec::new();
    for (round, kill_after) in [(0, 300), (1, 517), (2, 211)].into_iter() {
        let acked = run_and_kill(dir.path(), round, kill_after);
        eprintln!(
            "round {round}: killed after {} acknowledged rows",
            acked.len()
        );
        all_acked.extend(acked);
        let store = EmbeddedStore::open(dir.path()).expect("reopen after kill");
        let table = store.open_table("t").expect("table");
        let rows: Vec<Row> = table
            .read_rows(&ReadRowsRequest::all())
            .expect("read")
            .collect::<Result<_, _>>()
            .expect("rows");
        rows.iter().for_each(check_row);
        let present: std::collections::HashSet<&[u8]> =
            rows.iter().map(|r| r.key.as_ref()).collect();
        let missing: Vec<&String> = all_acked
            .iter()
            .filter(|k| !present.contains(k.as_bytes()))
            .collect();
        assert!(
            missing.is_empty(),
            "round {round}: acknowledged rows lost: {missing:?}"
        );
        assert!(rows.len() >= all_acked.len());
        eprintln!("round {round}: {} rows present, all whole", rows.len());
    }
}
