//! Garbage-collection rules: which cells of a row are still visible at a
//! given clock.
//!
//! Bigtable collects garbage in the background, so a read may still see a
//! cell its rules have expired. The model's stores are stricter and apply
//! the rules on every read ([`visible_cells`]), which is what a reader of
//! Bigtable sees once collection has run.

use std::time::Duration;

use crate::cell::Cell;
use crate::error::{Error, Result};
use crate::table_spec::{GcRule, TableSpec};

/// Deepest nesting of union/intersection rules accepted.
pub const MAX_GC_RULE_DEPTH: usize = 20;

/// Check a GC rule: `MaxVersions` at least 1, `MaxAge` at least one
/// millisecond (as Bigtable's admin API requires), unions and intersections
/// non-empty.
pub fn validate_gc_rule(rule: &GcRule) -> Result<()> {
    validate_at(rule, 0)
}

fn validate_at(rule: &GcRule, depth: usize) -> Result<()> {
    let bad = |reason: String| Err(Error::InvalidArgument(reason));
    if depth > MAX_GC_RULE_DEPTH {
        return bad(format!(
            "gc rule is nested more than {MAX_GC_RULE_DEPTH} levels deep"
        ));
    }
    match rule {
        GcRule::None => Ok(()),
        GcRule::MaxVersions(0) => bad("gc rule max versions must be at least 1, got 0".into()),
        GcRule::MaxVersions(_) => Ok(()),
        GcRule::MaxAge(age) if *age < Duration::from_millis(1) => bad(format!(
            "gc rule max age must be at least one millisecond, got {age:?}"
        )),
        GcRule::MaxAge(_) => Ok(()),
        GcRule::Union(rules) | GcRule::Intersection(rules) => {
            if rules.is_empty() {
                let kind = if matches!(rule, GcRule::Union(_)) {
                    "union"
                } else {
                    "intersection"
                };
                return bad(format!("gc rule {kind} must have at least one rule"));
            }
            rules.iter().try_for_each(|r| validate_at(r, depth + 1))
        }
    }
}

/// The age of a cell written at `timestamp_micros`, seen at `now_micros`,
/// exceeds `max_age` (the cell is older than `now - max_age`).
fn too_old(max_age: Duration, timestamp_micros: i64, now_micros: i64) -> bool {
    let age = i64::try_from(max_age.as_micros()).unwrap_or(i64::MAX);
    timestamp_micros < now_micros.saturating_sub(age)
}

/// True when `rule` deletes a cell: `version` is its 0-based rank among the
/// cells of its column, newest first.
pub fn deletes(rule: &GcRule, version: usize, timestamp_micros: i64, now_micros: i64) -> bool {
    match rule {
        GcRule::None => false,
        GcRule::MaxVersions(n) => version >= usize::try_from(*n).unwrap_or(usize::MAX),
        GcRule::MaxAge(age) => too_old(*age, timestamp_micros, now_micros),
        GcRule::Union(rules) => rules
            .iter()
            .any(|r| deletes(r, version, timestamp_micros, now_micros)),
        // An empty intersection is rejected by validation; keep cells if one
        // slips through rather than deleting everything.
        GcRule::Intersection(rules) => {
            !rules.is_empty()
                && rules
                    .iter()
                    .all(|r| deletes(r, version, timestamp_micros, now_micros))
        }
    }
}

/// True when `rule` deletes every version of a column but the newest,
/// whatever the cells' timestamps and the clock (a rule keeping one
/// version, alone or in a union). A reader may then drop the older
/// versions of a column before looking at anything else.
pub fn keeps_only_newest(rule: &GcRule) -> bool {
    match rule {
        GcRule::MaxVersions(n) => *n <= 1,
        GcRule::Union(rules) => rules.iter().any(keeps_only_newest),
        GcRule::Intersection(rules) => !rules.is_empty() && rules.iter().all(keeps_only_newest),
        GcRule::None | GcRule::MaxAge(_) => false,
    }
}

/// True when the rule may delete a cell because of its age alone (so the
/// result depends on the clock).
pub fn uses_age(rule: &GcRule) -> bool {
    match rule {
        GcRule::MaxAge(_) => true,
        GcRule::Union(rules) | GcRule::Intersection(rules) => rules.iter().any(uses_age),
        GcRule::None | GcRule::MaxVersions(_) => false,
    }
}

/// The cells of one row still visible under `spec`'s rules at `now_micros`.
/// `cells` must be in canonical order (one entry per stored cell, no
/// duplicates). Cells of families the spec does not have (dropped) are not
/// visible either.
pub fn visible_cells(spec: &TableSpec, cells: Vec<Cell>, now_micros: i64) -> Vec<Cell> {
    let mut out = Vec::with_capacity(cells.len());
    let mut version = 0usize;
    for (i, cell) in cells.iter().enumerate() {
        let continues = i > 0 && cells[i - 1].same_column(cell);
        version = if continues { version + 1 } else { 0 };
        let keep = match spec.families.get(&cell.family) {
            Some(family) => !deletes(&family.gc_rule, version, cell.timestamp_micros, now_micros),
            None => false,
        };
        out.push(keep);
    }
    cells
        .into_iter()
        .zip(out)
        .filter_map(|(c, keep)| keep.then_some(c))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000_000;

    fn cell(q: &str, ts: i64) -> Cell {
        Cell::new("f", q.to_string(), ts, "v")
    }

    fn spec(rule: GcRule) -> TableSpec {
        TableSpec::new().with_family("f", rule)
    }

    fn stamps(cells: &[Cell]) -> Vec<(String, i64)> {
        cells
            .iter()
            .map(|c| {
                (
                    String::from_utf8_lossy(&c.qualifier).into_owned(),
                    c.timestamp_micros,
                )
            })
            .collect()
    }

    fn sample(now: i64) -> Vec<Cell> {
        vec![
            cell("a", now),
            cell("a", now - HOUR),
            cell("a", now - 3 * HOUR),
            cell("b", now - 2 * HOUR),
        ]
    }

    fn rule_strategy() -> impl proptest::strategy::Strategy<Value = GcRule> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(GcRule::None),
            (0u32..4).prop_map(GcRule::MaxVersions),
            (0u64..10).prop_map(|h| GcRule::MaxAge(Duration::from_secs(h * 3600))),
        ];
        leaf.prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 1..3).prop_map(GcRule::Union),
                proptest::collection::vec(inner, 1..3).prop_map(GcRule::Intersection),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn keeps_only_newest_means_older_versions_always_go(
            rule in rule_strategy(),
            version in 1usize..6,
            ts in 0i64..(200 * HOUR),
            now in 0i64..(200 * HOUR),
        ) {
            if keeps_only_newest(&rule) {
                proptest::prop_assert!(deletes(&rule, version, ts, now), "{rule:?}");
            }
        }
    }

    #[test]
    fn keeps_only_newest_recognises_one_version_rules() {
        let age = GcRule::MaxAge(Duration::from_secs(3600));
        assert!(keeps_only_newest(&GcRule::MaxVersions(1)));
        assert!(!keeps_only_newest(&GcRule::MaxVersions(2)));
        assert!(keeps_only_newest(&GcRule::Union(vec![
            age.clone(),
            GcRule::MaxVersions(1)
        ])));
        assert!(!keeps_only_newest(&GcRule::Intersection(vec![
            age,
            GcRule::MaxVersions(1)
        ])));
        assert!(!keeps_only_newest(&GcRule::None));
    }

    #[test]
    fn max_versions_is_per_column() {
        let now = 100 * HOUR;
        let out = visible_cells(&spec(GcRule::MaxVersions(1)), sample(now), now);
        assert_eq!(
            stamps(&out),
            vec![("a".into(), now), ("b".into(), now - 2 * HOUR)]
        );
    }

    #[test]
    fn max_age_uses_the_clock() {
        let now = 100 * HOUR;
        let rule = GcRule::MaxAge(Duration::from_secs(90 * 60));
        let out = visible_cells(&spec(rule.clone()), sample(now), now);
        assert_eq!(
            stamps(&out),
            vec![("a".into(), now), ("a".into(), now - HOUR)]
        );
        let later = visible_cells(&spec(rule), sample(now), now + HOUR);
        assert_eq!(stamps(&later), vec![("a".into(), now)]);
    }

    #[test]
    fn union_and_intersection() {
        let now = 100 * HOUR;
        let age = GcRule::MaxAge(Duration::from_secs(150 * 60));
        let union = GcRule::Union(vec![GcRule::MaxVersions(2), age.clone()]);
        let out = visible_cells(&spec(union), sample(now), now);
        assert_eq!(
            stamps(&out),
            vec![
                ("a".into(), now),
                ("a".into(), now - HOUR),
                ("b".into(), now - 2 * HOUR)
            ]
        );
        let inter = GcRule::Intersection(vec![GcRule::MaxVersions(1), age]);
        let out = visible_cells(&spec(inter), sample(now), now);
        // Only a@-3h is both beyond one version and older than 2.5h.
        assert_eq!(
            stamps(&out),
            vec![
                ("a".into(), now),
                ("a".into(), now - HOUR),
                ("b".into(), now - 2 * HOUR)
            ]
        );
    }

    #[test]
    fn unknown_families_are_invisible_and_none_keeps_all() {
        let now = 100 * HOUR;
        let out = visible_cells(&TableSpec::new(), sample(now), now);
        assert!(out.is_empty());
        assert_eq!(
            visible_cells(&spec(GcRule::None), sample(now), now).len(),
            4
        );
    }

    #[test]
    fn validation() {
        assert!(validate_gc_rule(&GcRule::MaxVersions(0)).is_err());
        assert!(validate_gc_rule(&GcRule::MaxAge(Duration::from_micros(999))).is_err());
        assert!(validate_gc_rule(&GcRule::Union(vec![])).is_err());
        assert!(validate_gc_rule(&GcRule::Intersection(vec![GcRule::MaxVersions(0)])).is_err());
        assert!(validate_gc_rule(&GcRule::Union(vec![
            GcRule::MaxVersions(3),
            GcRule::MaxAge(Duration::from_millis(1)),
        ]))
        .is_ok());
        assert!(validate_gc_rule(&GcRule::None).is_ok());
    }
}
