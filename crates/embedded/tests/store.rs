//! Behaviour specific to the embedded store: persistence across reopen,
//! on-disk GC, family ids, split points, lock-free reads under writes.

use std::sync::Arc;
use std::time::Duration;

use affinity_embedded::{EmbeddedOptions, EmbeddedStore};
use affinity_model::{
    Bytes, FamilyModification, GcRule, Mutation, ReadModifyWriteRule, ReadRowsRequest, Row,
    RowFilter, RowMutations, RowRange, RowSet, Store, Table, TableSpec, TimestampRange,
};

fn options() -> EmbeddedOptions {
    let mut options = EmbeddedOptions::default();
    // Tests run the sweeper themselves, deterministically.
    options.gc_interval = None;
    options
}

fn open(dir: &tempfile::TempDir) -> EmbeddedStore {
    EmbeddedStore::open_with(dir.path(), options()).expect("open store")
}

fn read_all(table: &dyn Table) -> Vec<Row> {
    read(table, &ReadRowsRequest::all())
}

fn read(table: &dyn Table, request: &ReadRowsRequest) -> Vec<Row> {
    table
        .read_rows(request)
        .expect("read_rows")
        .collect::<Result<Vec<_>, _>>()
        .expect("rows")
}

fn keys(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .map(|r| String::from_utf8_lossy(&r.key).into_owned())
        .collect()
}

/// `family:qualifier@ms=value` for every cell of every row.
fn render(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .flat_map(|r| {
            r.cells.iter().map(move |c| {
                format!(
                    "{}/{}:{}@{}={}",
                    String::from_utf8_lossy(&r.key),
                    c.family,
                    String::from_utf8_lossy(&c.qualifier),
                    c.timestamp_micros / 1000,
                    String::from_utf8_lossy(&c.value)
                )
            })
        })
        .collect()
}

fn set(family: &'static str, qualifier: &str, ms: i64, value: &str) -> Mutation {
    Mutation::set_cell(family, qualifier.to_string(), ms * 1000, value.to_string())
}

#[test]
fn tables_families_and_cells_survive_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store = open(&dir);
        store
            .create_table(
                "events",
                &TableSpec::new().with_family("z", GcRule::MaxVersions(2)),
            )
            .expect("create");
        store
            .modify_families(
                "events",
                &[FamilyModification::Create {
                    family: "a".into(),
                    gc_rule: GcRule::None,
                }],
            )
            .expect("add family");
        store
            .create_table("other", &TableSpec::new())
            .expect("create other");
        let table = store.open_table("events").expect("open table");
        table
            .mutate_row(
                b"k\x00ey",
                &[set("z", "q", 1, "z1"), set("a", "\x00q", 2, "a2")],
            )
            .expect("write");
    }
    let store = open(&dir);
    assert_eq!(store.list_tables().expect("list"), ["events", "other"]);
    let spec = store.table_spec("events").expect("spec");
    assert_eq!(
        spec,
        TableSpec::new()
            .with_family("a", GcRule::None)
            .with_family("z", GcRule::MaxVersions(2))
    );
    let table = store.open_table("events").expect("open table");
    // Family "a" has the higher id but comes first: cells are in name order.
    assert_eq!(
        render(&read_all(&*table)),
        ["k\u{0}ey/a:\u{0}q@2=a2", "k\u{0}ey/z:q@1=z1"]
    );
}

#[test]
fn deleted_table_stays_deleted_and_its_name_is_reusable() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store = open(&dir);
        let spec = TableSpec::new().with_family("f", GcRule::None);
        store.create_table("t", &spec).expect("create");
        let handle = store.open_table("t").expect("open");
        handle
            .mutate_row(b"r", &[set("f", "q", 1, "old")])
            .expect("write");
        store.delete_table("t").expect("delete");
        assert!(handle.mutate_row(b"r", &[set("f", "q", 1, "x")]).is_err());
        store.create_table("t", &spec).expect("re-create");
        // A handle names the table: it now sees the new, empty one.
        assert!(read_all(&*handle).is_empty());
        handle
            .mutate_row(b"s", &[set("f", "q", 1, "new")])
            .expect("write new");
    }
    let store = open(&dir);
    let table = store.open_table("t").expect("open");
    assert_eq!(render(&read_all(&*table)), ["s/f:q@1=new"]);
}

#[test]
fn dropped_family_data_never_comes_back_and_is_reclaimed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir);
    let spec = TableSpec::new()
        .with_family("f", GcRule::None)
        .with_family("g", GcRule::None);
    store.create_table("t", &spec).expect("create");
    let table = store.open_table("t").expect("open");
    for i in 0..50 {
        let key = format!("row{i:02}");
        table
            .mutate_row(
                key.as_bytes(),
                &[set("f", "q", 1, "gone"), set("g", "q", 1, "kept")],
            )
            .expect("write");
    }
    let drop_f = FamilyModification::Drop { family: "f".into() };
    store.modify_families("t", &[drop_f]).expect("drop f");
    let create_f = FamilyModification::Create {
        family: "f".into(),
        gc_rule: GcRule::None,
    };
    store
        .modify_families("t", &[create_f])
        .expect("re-create f");
    let rows = read_all(&*table);
    assert_eq!(rows.len(), 50);
    assert!(rows
        .iter()
        .all(|r| r.cells.len() == 1 && r.cells[0].family == "g"));
    assert_eq!(store.stored_cells("t").expect("count"), 100);
    store.sweep_gc().expect("sweep");
    assert_eq!(
        store.stored_cells("t").expect("count"),
        50,
        "compaction drops the old family's cells"
    );
}

#[test]
fn writes_collect_versions_beyond_the_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir);
    store
        .create_table(
            "t",
            &TableSpec::new().with_family("f", GcRule::MaxVersions(1)),
        )
        .expect("create");
    let table = store.open_table("t").expect("open");
    for ms in 1..=3 {
        table
            .mutate_row(b"r", &[set("f", "q", ms, &format!("v{ms}"))])
            .expect("write");
    }
    assert_eq!(render(&read_all(&*table)), ["r/f:q@3=v3"]);
    assert_eq!(store.stored_cells("t").expect("count"), 1);
    assert_eq!(store.sweep_gc().expect("sweep"), 0, "nothing left to sweep");
    assert_eq!(render(&read_all(&*table)), ["r/f:q@3=v3"]);
}

/// A table whose cells live one second, and one cell written now.
fn one_second_table(store: &EmbeddedStore) -> Arc<dyn Table> {
    let spec = TableSpec::new().with_family("f", GcRule::MaxAge(Duration::from_secs(1)));
    store.create_table("t", &spec).expect("create");
    let table = store.open_table("t").expect("open");
    let now_ms = affinity_model::apply::now_micros() / 1000;
    table
        .mutate_row(b"r", &[set("f", "q", now_ms, "short-lived")])
        .expect("write");
    assert_eq!(store.stored_cells("t").expect("count"), 1);
    table
}

#[test]
fn sweeper_reclaims_cells_that_aged_out_in_idle_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir);
    let table = one_second_table(&store);
    std::thread::sleep(Duration::from_millis(1100));
    assert!(read_all(&*table).is_empty(), "hidden as soon as expired");
    assert_eq!(store.sweep_gc().expect("sweep"), 1);
    assert_eq!(store.stored_cells("t").expect("count"), 0);
}

#[test]
fn background_sweeper_runs_and_stops_with_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = options();
    opts.gc_interval = Some(Duration::from_millis(20));
    let store = EmbeddedStore::open_with(dir.path(), opts).expect("open");
    let table = one_second_table(&store);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while store.stored_cells("t").expect("count") > 0 {
        assert!(std::time::Instant::now() < deadline, "sweeper never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(store);
    drop(table);
    // The sweeper thread is joined and the database closed: it reopens.
    let store = open(&dir);
    assert_eq!(store.stored_cells("t").expect("count"), 0);
}

#[test]
fn dropping_a_family_wakes_the_sweeper_to_compact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = options();
    // Far off: only the wake-up on drop can explain a prompt compaction.
    opts.gc_interval = Some(Duration::from_secs(3600));
    let store = EmbeddedStore::open_with(dir.path(), opts).expect("open");
    let spec = TableSpec::new()
        .with_family("f", GcRule::None)
        .with_family("g", GcRule::None);
    store.create_table("t", &spec).expect("create");
    let table = store.open_table("t").expect("open");
    table
        .mutate_row(b"r", &[set("f", "q", 1, "x"), set("g", "q", 1, "y")])
        .expect("write");
    store.flush().expect("flush");
    let drop_f = FamilyModification::Drop { family: "f".into() };
    store.modify_families("t", &[drop_f]).expect("drop");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while store.stored_cells("t").expect("count") > 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "no compaction after the drop"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn deleting_newer_versions_does_not_resurrect_collected_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir);
    store
        .create_table(
            "t",
            &TableSpec::new().with_family("f", GcRule::MaxVersions(1)),
        )
        .expect("create");
    let table = store.open_table("t").expect("open");
    table
        .mutate_row(b"r", &[set("f", "q", 1, "v1")])
        .expect("write");
    table
        .mutate_row(b"r", &[set("f", "q", 2, "v2")])
        .expect("write");
    let delete_v2 = Mutation::DeleteFromColumn {
        family: "f".into(),
        qualifier: Bytes::from_static(b"q"),
        time_range: TimestampRange::new(2000, 3000),
    };
    table.mutate_row(b"r", &[delete_v2]).expect("delete");
    // v1 was collected when v2 arrived (as the reference model does).
    assert!(read_all(&*table).is_empty());
}

#[test]
fn loosening_a_rule_does_not_resurrect_collected_versions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir);
    store
        .create_table(
            "t",
            &TableSpec::new().with_family("f", GcRule::MaxVersions(1)),
        )
        .expect("create");
    let table = store.open_table("t").expect("open");
    table
        .mutate_row(b"r", &[set("f", "q", 1, "v1")])
        .expect("write");
    table
        .mutate_row(b"r", &[set("f", "q", 2, "v2")])
        .expect("write");
    let update = FamilyModification::Update {
        family: "f".into(),
        gc_rule: GcRule::MaxVersions(5),
    };
    store.modify_families("t", &[update]).expect("update");
    table
        .mutate_row(b"r", &[set("f", "q", 3, "v3")])
        .expect("write");
    assert_eq!(render(&read_all(&*table)), ["r/f:q@3=v3", "r/f:q@2=v2"]);
}

#[test]
fn expired_cells_are_hidden_then_compacted_away() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir);
    let table = one_second_table(&store);
    let now_ms = affinity_model::apply::now_micros() / 1000;
    table
        .mutate_row(b"stale", &[set("f", "q", now_ms - 2000, "expired")])
        .expect("write");
    assert_eq!(
        store.stored_cells("t").expect("count"),
        1,
        "a write stores nothing already expired"
    );
    std::thread::sleep(Duration::from_millis(1100));
    assert!(read_all(&*table).is_empty());
    store.flush().expect("flush");
    store.compact().expect("compact");
    assert_eq!(store.stored_cells("t").expect("count"), 0);
}

#[test]
fn reversed_reads_walk_ranges_and_keys_backwards() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir);
    store
        .create_table("t", &TableSpec::new().with_family("f", GcRule::None))
        .expect("create");
    let table = store.open_table("t").expect("open");
    for key in ["a", "b", "b\x00", "c", "d", "e", "f"] {
        table
            .mutate_row(
                key.as_bytes(),
                &[set("f", "x", 1, "1"), set("f", "y", 2, "2")],
            )
            .expect("write");
    }
    let rows = RowSet {
        keys: vec![Bytes::from_static(b"f"), Bytes::from_static(b"a")],
        ranges: vec![RowRange::closed_open("b", "d")],
    };
    let request = ReadRowsRequest::new(rows).reversed(true);
    let got = read(&*table, &request);
    assert_eq!(keys(&got), ["f", "c", "b\u{0}", "b", "a"]);
    // Cells keep their canonical order in a reversed read.
    assert_eq!(render(&got[..1]), ["f/f:x@1=1", "f/f:y@2=2"]);
    assert_eq!(keys(&read(&*table, &request.with_limit(2))), ["f", "c"]);
}

#[test]
fn sample_row_keys_cut_even_chunks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir);
    store
        .create_table("t", &TableSpec::new().with_family("f", GcRule::None))
        .expect("create");
    let table = store.open_table("t").expect("open");
    // ~4 MB of incompressible values in 4000 equal rows.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut noise = |len: usize| -> Vec<u8> {
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 56) as u8
            })
            .collect()
    };
    for chunk in 0..40 {
        let entries = (0..100)
            .map(|i| {
                let key = format!("user{:05}", chunk * 100 + i);
                RowMutations::new(key, vec![Mutation::set_cell("f", "q", 1000, noise(1000))])
            })
            .collect::<Vec<_>>();
        let statuses = table.mutate_rows(&entries).expect("mutate_rows");
        assert!(statuses.iter().all(Result::is_ok));
    }
    let samples = table.sample_row_keys().expect("samples");
    assert!(samples.len() >= 6, "{} samples", samples.len());
    let (last, splits) = samples.split_last().expect("at least the end");
    assert!(last.row_key.is_empty());
    assert!(splits
        .windows(2)
        .all(|w| w[0].row_key < w[1].row_key && w[0].offset_bytes < w[1].offset_bytes));
    assert!(last.offset_bytes > splits.last().map_or(0, |s| s.offset_bytes));
    // Chunks hold about the same number of (equal-sized) rows.
    let mut bounds: Vec<u32> = vec![0];
    bounds.extend(splits.iter().map(|s| {
        let key = String::from_utf8_lossy(&s.row_key).into_owned();
        key.trim_start_matches("user")
            .parse::<u32>()
            .expect("a row key")
    }));
    bounds.push(4000);
    let sizes: Vec<u32> = bounds.windows(2).map(|w| w[1] - w[0]).collect();
    let (min, max) = (sizes.iter().min().copied(), sizes.iter().max().copied());
    let (min, max) = (min.unwrap_or(0), max.unwrap_or(0));
    // The last chunk takes the remainder; the others must be even.
    let body = &sizes[..sizes.len() - 1];
    let body_min = body.iter().min().copied().unwrap_or(0);
    assert!(
        max <= 2 * body_min.max(1),
        "uneven chunks {sizes:?} (min {min}, max {max})"
    );
}

#[test]
fn concurrent_increments_and_scans() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(open(&dir));
    store
        .create_table(
            "t",
            &TableSpec::new().with_family("c", GcRule::MaxVersions(1)),
        )
        .expect("create");
    let table = store.open_table("t").expect("open");
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let table = table.clone();
            std::thread::spawn(move || {
                for i in 0..200 {
                    let key = format!("counter{}", i % 4);
                    table
                        .read_modify_write_row(
                            key.as_bytes(),
                            &[ReadModifyWriteRule::increment("c", "n", 1)],
                        )
                        .expect("increment");
                    // Readers run alongside and always see whole rows.
                    let rows = read_all(&*table);
                    assert!(rows.iter().all(|r| r.cells.len() == 1));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    let total: i64 = read_all(&*table)
        .iter()
        .map(|r| i64::from_be_bytes(r.cells[0].value.as_ref().try_into().expect("8 bytes")))
        .sum();
    assert_eq!(total, 800);
}

#[test]
fn mutate_rows_entries_for_one_row_apply_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir);
    store
        .create_table("t", &TableSpec::new().with_family("f", GcRule::None))
        .expect("create");
    let table = store.open_table("t").expect("open");
    table
        .mutate_row(b"r", &[set("f", "old", 1, "x")])
        .expect("write");
    let entries = vec![
        RowMutations::new("r", vec![set("f", "a", 1, "a")]),
        RowMutations::new("r", vec![Mutation::DeleteFromRow, set("f", "b", 1, "b")]),
        RowMutations::new("r", vec![set("nope", "c", 1, "c")]),
        RowMutations::new(
            "s",
            vec![set("f", "c", 1, "c"), Mutation::delete_column("f", "c")],
        ),
    ];
    let statuses = table.mutate_rows(&entries).expect("mutate_rows");
    assert!(statuses[0].is_ok() && statuses[1].is_ok() && statuses[3].is_ok());
    assert!(statuses[2].is_err());
    assert_eq!(render(&read_all(&*table)), ["r/f:b@1=b"]);
}

/// Reads skip the versions a family's rule hides past its version cap by
/// seeking past them (after a few steps); the result must not change:
/// other columns, rows, filters, reversed reads and point reads all see
/// exactly the newest versions the rule keeps.
#[test]
fn many_hidden_versions_are_skipped_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir);
    let day = Duration::from_secs(86_400);
    store
        .create_table(
            "t",
            &TableSpec::new()
                .with_family("a", GcRule::MaxVersions(2))
                .with_family(
                    "b",
                    GcRule::Union(vec![
                        GcRule::MaxAge(day * 365 * 100),
                        GcRule::MaxVersions(1),
                    ]),
                )
                .with_family("c", GcRule::None),
        )
        .expect("create");
    let table = store.open_table("t").expect("open");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    for row in ["r1", "r2"] {
        let mut mutations = Vec::new();
        for v in 0..12 {
            let ts = now_ms - 1000 + v;
            mutations.push(set("a", "q", ts, &format!("a{v}")));
            mutations.push(set("a", "q\u{0}", ts, &format!("z{v}")));
            mutations.push(set("b", "n", ts, &format!("b{v}")));
            mutations.push(set("c", "k", ts, &format!("c{v}")));
        }
        table.mutate_row(row.as_bytes(), &mutations).expect("write");
    }
    let expected_row = |row: &str| -> Vec<String> {
        let t = |v: i64| now_ms - 1000 + v;
        let mut out = vec![
            format!("{row}/a:q@{}=a11", t(11)),
            format!("{row}/a:q@{}=a10", t(10)),
            format!("{row}/a:q\u{0}@{}=z11", t(11)),
            format!("{row}/a:q\u{0}@{}=z10", t(10)),
            format!("{row}/b:n@{}=b11", t(11)),
        ];
        out.extend((0..12).rev().map(|v| format!("{row}/c:k@{}=c{v}", t(v))));
        out
    };
    let mut both = expected_row("r1");
    both.extend(expected_row("r2"));
    assert_eq!(render(&read_all(&*table)), both);
    let mut reversed = ReadRowsRequest::all();
    reversed.reversed = true;
    let mut backwards = expected_row("r2");
    backwards.extend(expected_row("r1"));
    assert_eq!(render(&read(&*table, &reversed)), backwards);
    let point = table.read_row(b"r2", None).expect("read").expect("row");
    assert_eq!(render(&[point]), expected_row("r2"));
    let only_c = RowFilter::exact_family("c");
    let mut request = ReadRowsRequest::all();
    request.filter = Some(only_c);
    assert_eq!(render(&read(&*table, &request)).len(), 24);
}

/// Blind adds on top of a stored row, left in the log by a process that
/// stopped without flushing: reopening recovers the log and flushes it,
/// which merges the adds into the row, so the merge operator must know the
/// table before its column family opens. Then many flushes and a reopen
/// give compactions right at open; every read sees the sums.
#[test]
fn rows_of_blind_adds_survive_reopen_recovery_and_compaction() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let spec = TableSpec::new()
        .with_family("a", GcRule::MaxVersions(1))
        .with_sum_family("s", GcRule::None);
    // The row's cells as (family, qualifier, value or sum).
    let seen = |t: &dyn Table| -> Vec<(String, String, String)> {
        read_all(t)
            .iter()
            .flat_map(|r| r.cells.clone())
            .map(|c| {
                let value = match c.family.as_str() {
                    "s" => affinity_model::apply::decode_i64(&c.value)
                        .expect("a sum")
                        .to_string(),
                    _ => String::from_utf8_lossy(&c.value).into_owned(),
                };
                let q = String::from_utf8_lossy(&c.qualifier).into_owned();
                (c.family, q, value)
            })
            .collect()
    };
    let expected = |rounds: i64| {
        vec![
            ("a".to_string(), "x".to_string(), "base".to_string()),
            (
                "s".into(),
                "n".into(),
                (1..=rounds).sum::<i64>().to_string(),
            ),
        ]
    };
    {
        let store = open(&dir);
        store.create_table("t", &spec).expect("create");
        let t = store.open_table("t").expect("open table");
        t.mutate_row(b"r", &[Mutation::set_cell("a", "x", 0, "base")])
            .expect("set");
        for i in 0..5 {
            t.mutate_row(b"r", &[Mutation::add_to_cell("s", "n", 0, i + 1)])
                .expect("add");
        }
        assert_eq!(seen(t.as_ref()), expected(5));
    }
    {
        let store = open(&dir);
        let t = store.open_table("t").expect("open table");
        assert_eq!(seen(t.as_ref()), expected(5));
        for round in 5..12 {
            t.mutate_row(b"r", &[Mutation::add_to_cell("s", "n", 0, round + 1)])
                .expect("add");
            store.flush().expect("flush");
        }
    }
    let store = open(&dir);
    let t = store.open_table("t").expect("open table");
    store.flush().expect("compactions finish");
    assert_eq!(seen(t.as_ref()), expected(12));
}

#[test]
fn memory_usage_counts_memtables_until_a_flush_and_the_cache_after_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir);
    store
        .create_table("events", &TableSpec::new().with_family("z", GcRule::None))
        .expect("create");
    let empty = store.memory_usage().expect("usage");
    let table = store.open_table("events").expect("open table");
    let value = "v".repeat(1000);
    for i in 0..2000 {
        table
            .mutate_row(format!("row{i:05}").as_bytes(), &[set("z", "q", 1, &value)])
            .expect("write");
    }
    let written = store.memory_usage().expect("usage");
    assert!(
        written.memtables >= empty.memtables + 2000 * 1000,
        "{empty:?} then {written:?}"
    );
    store.flush().expect("flush");
    let flushed = store.memory_usage().expect("usage");
    assert!(flushed.memtables < written.memtables / 10, "{flushed:?}");
    assert_eq!(read_all(&*table).len(), 2000);
    let read = store.memory_usage().expect("usage");
    assert!(read.block_cache >= 1000 * 1000, "{read:?}");
}
