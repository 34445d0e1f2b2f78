//! A reference-model property test with GC rules on (the model's own
//! reference test runs without them): random writes, partial and whole
//! deletes, GC rule changes, family drops and re-creations and GC sweeps,
//! applied to the embedded store and to a `MemoryStore`, which collects on
//! every write. Every read must agree, whenever the embedded store's
//! sweeper and compactions happen to run.
//!
//! One documented difference: before a GC rule changes, the embedded store
//! deletes what the old rule hid, so relaxing a rule never brings a hidden
//! cell back; `MemoryStore` only collects a row when it is written. The test
//! models that by writing a no-op to every row of the reference before a
//! rule change or a sweep.
//!
//! Timestamps are in 2100, so `MaxAge` rules never expire anything and the
//! two stores' clocks do not matter.

use std::sync::Arc;
use std::time::Duration;

use affinity_embedded::{EmbeddedOptions, EmbeddedStore};
use affinity_model::{
    Bytes, FamilyModification, GcRule, MemoryStore, Mutation, ReadRowsRequest, RowMutations, Store,
    Table, TableSpec, TimestampRange,
};
use proptest::prelude::*;

const BASE: i64 = 4_102_444_800_000_000;

#[derive(Debug, Clone)]
enum Op {
    Mutate(&'static str, Vec<Mutation>),
    MutateRows(Vec<(&'static str, Vec<Mutation>)>),
    SetRule(&'static str, GcRule),
    /// Drop the family if it exists, else create it with this rule.
    Toggle(&'static str, GcRule),
    Sweep,
    Flush,
}

fn rule() -> impl Strategy<Value = GcRule> {
    let far = GcRule::MaxAge(Duration::from_secs(1000 * 86_400));
    prop_oneof![
        Just(GcRule::None),
        (1u32..4).prop_map(GcRule::MaxVersions),
        Just(GcRule::Union(vec![GcRule::MaxVersions(1), far.clone()])),
        Just(GcRule::Intersection(vec![GcRule::MaxVersions(1), far])),
    ]
}

fn set_cell() -> BoxedStrategy<Mutation> {
    (
        prop::sample::select(vec!["a", "b"]),
        prop::sample::select(vec!["p", "q"]),
        0i64..6,
        prop::sample::select(vec!["x", "y", "z"]),
    )
        .prop_map(|(f, q, ms, v)| Mutation::set_cell(f, q, BASE + ms * 1000, v))
        .boxed()
}

fn mutation() -> BoxedStrategy<Mutation> {
    let family = prop::sample::select(vec!["a", "b"]);
    let qualifier = prop::sample::select(vec!["p", "q"]);
    let ms = 0i64..6;
    prop_oneof![
        6 => (family.clone(), qualifier.clone(), ms.clone(), prop::sample::select(vec!["x", "y", "z"]))
            .prop_map(|(f, q, ms, v)| Mutation::set_cell(f, q, BASE + ms * 1000, v)),
        2 => (family.clone(), qualifier.clone(), ms.clone(), 1i64..3).prop_map(|(f, q, start, len)| {
            Mutation::DeleteFromColumn {
                family: f.into(),
                qualifier: Bytes::from(q),
                time_range: TimestampRange::new(BASE + start * 1000, BASE + (start + len) * 1000),
            }
        }),
        1 => (family.clone(), qualifier).prop_map(|(f, q)| Mutation::delete_column(f, q)),
        1 => family.prop_map(|f| Mutation::DeleteFromFamily { family: f.into() }),
        1 => Just(Mutation::DeleteFromRow),
    ]
    .boxed()
}

fn op() -> impl Strategy<Value = Op> {
    let key = prop::sample::select(KEYS.to_vec());
    let mutations = prop::collection::vec(mutation(), 1..4);
    prop_oneof![
        8 => (key.clone(), mutations.clone()).prop_map(|(k, m)| Op::Mutate(k, m)),
        3 => prop::collection::vec((key.clone(), mutations.clone()), 1..4).prop_map(Op::MutateRows),
        // Rows replaced whole (written without reading what they held).
        2 => prop::collection::vec((key.clone(), mutations, any::<bool>()), 1..4).prop_map(|entries| {
            Op::MutateRows(
                entries
                    .into_iter()
                    .map(|(k, mut m, replace)| {
                        if replace {
                            m.insert(0, Mutation::DeleteFromRow);
                        }
                        (k, m)
                    })
                    .collect(),
            )
        }),
        // Requests of whole-row replacements only (a batch job's output):
        // the store encodes them straight from their cells.
        2 => prop::collection::vec((key.clone(), prop::collection::vec(set_cell(), 0..4)), 1..4)
            .prop_map(|entries| {
                Op::MutateRows(
                    entries
                        .into_iter()
                        .map(|(k, cells)| {
                            let mut m = vec![Mutation::DeleteFromRow];
                            m.extend(cells);
                            (k, m)
                        })
                        .collect(),
                )
            }),
        2 => (prop::sample::select(vec!["a", "b"]), rule()).prop_map(|(f, r)| Op::SetRule(f, r)),
        1 => rule().prop_map(|r| Op::Toggle("b", r)),
        1 => Just(Op::Sweep),
        1 => Just(Op::Flush),
    ]
}

fn render(table: &dyn Table) -> Vec<String> {
    let rows = table
        .read_rows(&ReadRowsRequest::all())
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>());
    match rows {
        Ok(rows) => rows
            .iter()
            .flat_map(|r| {
                r.cells.iter().map(move |c| {
                    let q = String::from_utf8_lossy(&c.qualifier);
                    let v = String::from_utf8_lossy(&c.value);
                    let key = String::from_utf8_lossy(&r.key);
                    format!(
                        "{key}/{}:{q}@{}={v}",
                        c.family,
                        (c.timestamp_micros - BASE) / 1000
                    )
                })
            })
            .collect(),
        Err(e) => vec![format!("error: {e}")],
    }
}

fn status<T>(result: affinity_model::Result<T>) -> String {
    match result {
        Ok(_) => "ok".into(),
        Err(e) => format!("{e}"),
    }
}

const KEYS: [&str; 3] = ["k1", "k2", "k3"];

/// Make the reference collect every row now, as the embedded store's sweep
/// does: any write to a row (here a delete of a column never written)
/// applies the GC rules to it.
fn collect_all(table: &dyn Table) {
    for key in KEYS {
        let touch = Mutation::delete_column("a", "never-written");
        table
            .mutate_row(key.as_bytes(), &[touch])
            .expect("no-op write");
    }
}

/// Apply `op` to one store; returns what the caller can observe.
fn apply(
    store: &dyn Store,
    table: &dyn Table,
    op: &Op,
    embedded: Option<&EmbeddedStore>,
) -> String {
    match op {
        Op::Mutate(key, mutations) => status(table.mutate_row(key.as_bytes(), mutations)),
        Op::MutateRows(entries) => {
            let entries: Vec<RowMutations> = entries
                .iter()
                .map(|(k, m)| RowMutations::new(k.as_bytes().to_vec(), m.clone()))
                .collect();
            match table.mutate_rows(&entries) {
                Ok(statuses) => statuses
                    .into_iter()
                    .map(status)
                    .collect::<Vec<_>>()
                    .join(","),
                Err(e) => format!("{e}"),
            }
        }
        Op::SetRule(family, rule) => {
            let update = FamilyModification::Update {
                family: family.to_string(),
                gc_rule: rule.clone(),
            };
            status(store.modify_families("t", &[update]))
        }
        Op::Toggle(family, rule) => {
            let exists = store
                .table_spec("t")
                .map(|s| s.families.contains_key(*family))
                .unwrap_or(false);
            let modification = if exists {
                FamilyModification::Drop {
                    family: family.to_string(),
                }
            } else {
                FamilyModification::Create {
                    family: family.to_string(),
                    gc_rule: rule.clone(),
                }
            };
            status(store.modify_families("t", &[modification]))
        }
        Op::Sweep => embedded.map_or("ok".into(), |e| status(e.sweep_gc())),
        Op::Flush => embedded.map_or("ok".into(), |e| status(e.flush())),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, max_shrink_iters: 512, ..ProptestConfig::default() })]

    #[test]
    fn gc_reads_match_the_reference(ops in prop::collection::vec(op(), 1..30)) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut options = EmbeddedOptions::default();
        options.gc_interval = None;
        options.sync_writes = false;
        let embedded = Arc::new(EmbeddedStore::open_with(dir.path(), options).expect("open"));
        let reference = MemoryStore::new();
        let spec = TableSpec::new()
            .with_family("a", GcRule::MaxVersions(1))
            .with_family("b", GcRule::MaxVersions(2));
        embedded.create_table("t", &spec).expect("create");
        reference.create_table("t", &spec).expect("create");
        let (got_table, want_table) = (embedded.open_table("t").expect("open"), reference.open_table("t").expect("open"));
        for (i, op) in ops.iter().enumerate() {
            let got = apply(embedded.as_ref(), got_table.as_ref(), op, Some(&embedded));
            if matches!(op, Op::SetRule(..) | Op::Sweep) {
                collect_all(want_table.as_ref());
            }
            let want = apply(&reference, want_table.as_ref(), op, None);
            prop_assert_eq!(&got, &want, "status of op {} {:?}", i, op);
            prop_assert_eq!(render(got_table.as_ref()), render(want_table.as_ref()), "reads after op {} {:?}", i, op);
        }
    }
}
