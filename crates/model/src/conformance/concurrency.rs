//! Cases for per-row atomicity under concurrent readers and writers.

use std::sync::atomic::{AtomicBool, Ordering};

use super::util::*;
use super::Ctx;
use crate::apply::decode_i64;
use crate::mutation::{Mutation, ReadModifyWriteRule};
use crate::table_spec::GcRule;

const COLUMNS: usize = 8;

fn generation(i: usize) -> Vec<Mutation> {
    let mut muts = vec![Mutation::DeleteFromRow];
    for c in 0..COLUMNS {
        muts.push(set("a", &format!("c{c}"), 1, &format!("{i}")));
    }
    muts
}

pub fn atomic_row_mutation_visibility(ctx: &Ctx) {
    let t = ctx.table(&[("a", GcRule::None)]);
    write(&t, "k", &generation(0));
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            for i in 1..=100 {
                let result = t.mutate_row(b"k", &generation(i));
                if result.is_err() {
                    done.store(true, Ordering::SeqCst);
                }
                ok(result, "mutate_row");
            }
            done.store(true, Ordering::SeqCst);
        });
        let mut reads = 0;
        while !done.load(Ordering::SeqCst) || reads == 0 {
            let row = ok(t.read_row(b"k", None), "read_row").expect("the row always exists");
            let values: Vec<&[u8]> = row.cells.iter().map(|c| c.value.as_ref()).collect();
            assert_eq!(values.len(), COLUMNS, "saw part of a row mutation: {row:?}");
            assert!(
                values.iter().all(|v| *v == values[0]),
                "saw a mix of two row mutations: {row:?}"
            );
            reads += 1;
        }
        if writer.join().is_err() {
            panic!("writer failed");
        }
    });
}

pub fn concurrent_increments(ctx: &Ctx) {
    let t = ctx.table(&[("a", GcRule::None)]);
    const THREADS: usize = 4;
    const EACH: usize = 25;
    let mut seen: Vec<i64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    (0..EACH)
                        .map(|_| {
                            let row = ok(
                                t.read_modify_write_row(
                                    b"counter",
                                    &[ReadModifyWriteRule::increment("a", "n", 1)],
                                ),
                                "increment",
                            );
                            decode_i64(&row.cells[0].value).expect("8-byte counter")
                        })
                        .collect::<Vec<i64>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|_| panic!("incrementer failed")))
            .collect()
    });
    seen.sort_unstable();
    let total = i64::try_from(THREADS * EACH).unwrap_or(i64::MAX);
    let expected: Vec<i64> = (1..=total).collect();
    assert_eq!(seen, expected, "each increment must see its own new value");
    let row = ok(t.read_row(b"counter", None), "read_row").expect("counter exists");
    let latest = row.latest("a", b"n").expect("counter cell");
    assert_eq!(decode_i64(&latest.value), Some(total));
}
