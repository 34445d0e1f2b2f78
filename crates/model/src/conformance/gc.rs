//! Cases for garbage collection. Bigtable and its emulator collect in the
//! background (the emulator about every second), so each case polls for up
//! to [`GC_TIMEOUT`] until the read shows the collected state; a store that
//! applies GC rules on read passes at once.

use std::time::Duration;

use super::util::*;
use super::Ctx;
use crate::apply::now_micros;
use crate::table_spec::GcRule;

const MINUTE_MS: i64 = 60_000;
const HOUR: Duration = Duration::from_secs(3600);

fn settles_to(t: &super::TestTable, expected: Vec<String>) {
    eventually(GC_TIMEOUT, || {
        let got = read_all(t);
        if got == expected {
            Ok(())
        } else {
            Err(format!("read {got:?}, want {expected:?}"))
        }
    });
}

pub fn gc_max_versions(ctx: &Ctx) {
    let t = ctx.table(&[("a", GcRule::MaxVersions(2))]);
    write(
        &t,
        "k",
        &[
            set("a", "q", 1, "1"),
            set("a", "q", 2, "2"),
            set("a", "q", 3, "3"),
            set("a", "r", 1, "r"),
        ],
    );
    settles_to(&t, strings(&["k/a:q@3=3", "k/a:q@2=2", "k/a:r@1=r"]));
}

pub fn gc_max_age(ctx: &Ctx) {
    let t = ctx.table(&[("a", GcRule::MaxAge(HOUR))]);
    let now = now_micros() / 1000;
    write(
        &t,
        "k",
        &[
            set("a", "q", now, "new"),
            set("a", "q", now - 120 * MINUTE_MS, "old"),
            set("a", "r", now - 180 * MINUTE_MS, "older"),
        ],
    );
    write(&t, "gone", &[set("a", "q", now - 240 * MINUTE_MS, "x")]);
    settles_to(&t, vec![format!("k/a:q@{now}=new")]);
}

pub fn gc_union(ctx: &Ctx) {
    let rule = GcRule::Union(vec![GcRule::MaxVersions(2), GcRule::MaxAge(HOUR)]);
    let t = ctx.table(&[("a", rule)]);
    let now = now_micros() / 1000;
    write(
        &t,
        "k",
        &[
            set("a", "q", now, "0"),
            set("a", "q", now - 10 * MINUTE_MS, "1"),
            set("a", "q", now - 20 * MINUTE_MS, "2"),
            set("a", "r", now - 120 * MINUTE_MS, "r"),
        ],
    );
    settles_to(
        &t,
        vec![
            format!("k/a:q@{now}=0"),
            format!("k/a:q@{}=1", now - 10 * MINUTE_MS),
        ],
    );
}

pub fn gc_intersection(ctx: &Ctx) {
    if !ctx.caps.gc_intersection {
        eprintln!("skipping: the backend does not collect intersection rules");
        return;
    }
    let rule = GcRule::Intersection(vec![GcRule::MaxVersions(1), GcRule::MaxAge(HOUR)]);
    let t = ctx.table(&[("a", rule)]);
    let now = now_micros() / 1000;
    write(
        &t,
        "k",
        &[
            set("a", "q", now, "0"),
            set("a", "q", now - 10 * MINUTE_MS, "1"),
            set("a", "q", now - 120 * MINUTE_MS, "2"),
            set("a", "r", now - 180 * MINUTE_MS, "r"),
        ],
    );
    // Deleted only when beyond one version AND older than an hour.
    settles_to(
        &t,
        vec![
            format!("k/a:q@{now}=0"),
            format!("k/a:q@{}=1", now - 10 * MINUTE_MS),
            format!("k/a:r@{}=r", now - 180 * MINUTE_MS),
        ],
    );
}
