//! What is left of a read after some rows came back: the row set shrunk to
//! the keys after the last row received (before it, for reversed reads), so
//! a retried or resumed `ReadRows` never returns a row twice.

use std::ops::Bound;

use affinity_model::{RowRange, RowSet};
use bytes::Bytes;

/// A bound's key, or `None` when it is unbounded (an empty key also means
/// unbounded, as on the wire).
fn key(bound: &Bound<Bytes>) -> Option<&Bytes> {
    match bound {
        Bound::Included(k) | Bound::Excluded(k) if !k.is_empty() => Some(k),
        _ => None,
    }
}

/// The rows of `rows` strictly after `last` (strictly before it when
/// `reversed`), or `None` when nothing is left. An empty (whole-table) set
/// becomes a half-open range.
pub(crate) fn remaining(rows: &RowSet, last: &Bytes, reversed: bool) -> Option<RowSet> {
    let after = Bound::Excluded(last.clone());
    if rows.is_all() {
        let range = if reversed {
            RowRange {
                start: Bound::Unbounded,
                end: after,
            }
        } else {
            RowRange {
                start: after,
                end: Bound::Unbounded,
            }
        };
        return Some(RowSet::from_range(range));
    }
    let keys: Vec<Bytes> = rows
        .keys
        .iter()
        .filter(|k| if reversed { *k < last } else { *k > last })
        .cloned()
        .collect();
    let ranges: Vec<RowRange> = rows
        .ranges
        .iter()
        .filter_map(|r| clip(r, last, reversed))
        .collect();
    if keys.is_empty() && ranges.is_empty() {
        return None;
    }
    Some(RowSet { keys, ranges })
}

/// `range` cut to the keys after (or before) `last`, or `None` when no key
/// of it is left.
fn clip(range: &RowRange, last: &Bytes, reversed: bool) -> Option<RowRange> {
    if reversed {
        // Gone when its start is at or past `last`.
        if key(&range.start).is_some_and(|s| s >= last) {
            return None;
        }
        let keep_end = key(&range.end).is_some_and(|e| match &range.end {
            Bound::Excluded(_) => e <= last,
            _ => e < last,
        });
        Some(RowRange {
            start: range.start.clone(),
            end: if keep_end {
                range.end.clone()
            } else {
                Bound::Excluded(last.clone())
            },
        })
    } else {
        // Gone when its end is at or before `last`.
        if key(&range.end).is_some_and(|e| e <= last) {
            return None;
        }
        let keep_start = key(&range.start).is_some_and(|s| match &range.start {
            Bound::Excluded(_) => s >= last,
            _ => s > last,
        });
        Some(RowRange {
            start: if keep_start {
                range.start.clone()
            } else {
                Bound::Excluded(last.clone())
            },
            end: range.end.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    /// Every key of `universe` the shrunk set holds must be exactly the
    /// keys of the original set after `last`.
    fn check(rows: &RowSet, last: &str, reversed: bool) {
        let universe = ["", "a", "b", "c", "d", "e", "f", "g"];
        let last = b(last);
        let left = remaining(rows, &last, reversed);
        for k in universe.iter().filter(|k| !k.is_empty()) {
            let key = b(k);
            let wanted = rows.contains(&key) && if reversed { key < last } else { key > last };
            let got = left.as_ref().is_some_and(|s| s.contains(&key));
            assert_eq!(
                got, wanted,
                "key {k:?} last {last:?} reversed {reversed} rows {rows:?}"
            );
        }
    }

    #[test]
    fn shrinking_keeps_exactly_the_rows_not_yet_read() {
        let sets = [
            RowSet::all(),
            RowSet::from_keys([b("b"), b("d"), b("f")]),
            RowSet::from_range(RowRange::closed_open("b", "e")),
            RowSet::from_range(RowRange {
                start: Bound::Excluded(b("b")),
                end: Bound::Included(b("e")),
            }),
            RowSet::from_range(RowRange::prefix("c")),
            RowSet {
                keys: vec![b("a"), b("g")],
                ranges: vec![
                    RowRange::closed_open("c", "d"),
                    RowRange {
                        start: Bound::Included(b("e")),
                        end: Bound::Unbounded,
                    },
                ],
            },
        ];
        for rows in &sets {
            for last in ["a", "b", "c", "d", "e", "f", "g"] {
                check(rows, last, false);
                check(rows, last, true);
            }
        }
    }

    #[test]
    fn nothing_left_is_none_not_the_whole_table() {
        let rows = RowSet::from_keys([b("a"), b("b")]);
        assert_eq!(remaining(&rows, &b("b"), false), None);
        assert_eq!(remaining(&rows, &b("a"), true), None);
        let rows = RowSet::from_range(RowRange::closed_open("a", "c"));
        assert_eq!(remaining(&rows, &b("c"), false), None);
    }
}
