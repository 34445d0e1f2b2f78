use super::*;
use crate::filter::{RowFilter, TimestampRange};

fn cells_of(muts: &[Mutation]) -> Vec<Cell> {
    let mut cells = Vec::new();
    apply_mutations(&mut cells, muts, 5_000_123);
    cells
}

fn view(cells: &[Cell]) -> Vec<(String, String, i64, String)> {
    cells
        .iter()
        .map(|c| {
            (
                c.family.clone(),
                String::from_utf8_lossy(&c.qualifier).into_owned(),
                c.timestamp_micros,
                String::from_utf8_lossy(&c.value).into_owned(),
            )
        })
        .collect()
}

#[test]
fn set_cell_keeps_canonical_order_and_replaces_same_timestamp() {
    let cells = cells_of(&[
        Mutation::set_cell("b", "q", 1000, "1"),
        Mutation::set_cell("a", "q", 1000, "2"),
        Mutation::set_cell("a", "q", 3000, "3"),
        Mutation::set_cell("a", "q", 1000, "4"),
        Mutation::set_cell("a", "p", SERVER_TIME, "5"),
    ]);
    assert_eq!(
        view(&cells),
        vec![
            ("a".into(), "p".into(), 5_000_000, "5".into()),
            ("a".into(), "q".into(), 3000, "3".into()),
            ("a".into(), "q".into(), 1000, "4".into()),
            ("b".into(), "q".into(), 1000, "1".into()),
        ]
    );
}

#[test]
fn deletes() {
    let base = [
        Mutation::set_cell("a", "q", 1000, "1"),
        Mutation::set_cell("a", "q", 2000, "2"),
        Mutation::set_cell("a", "q", 3000, "3"),
        Mutation::set_cell("a", "r", 2000, "r"),
        Mutation::set_cell("b", "q", 2000, "b"),
    ];
    let with = |extra: Mutation| {
        let mut muts = base.to_vec();
        muts.push(extra);
        view(&cells_of(&muts))
            .into_iter()
            .map(|(f, q, ts, _)| format!("{f}:{q}@{ts}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let range = |s, e| Mutation::DeleteFromColumn {
        family: "a".into(),
        qualifier: Bytes::from_static(b"q"),
        time_range: TimestampRange::new(s, e),
    };
    assert_eq!(
        with(range(2000, 3000)),
        "a:q@3000 a:q@1000 a:r@2000 b:q@2000"
    );
    assert_eq!(with(range(2000, 0)), "a:q@1000 a:r@2000 b:q@2000");
    assert_eq!(with(Mutation::delete_column("a", "q")), "a:r@2000 b:q@2000");
    assert_eq!(
        with(Mutation::DeleteFromFamily { family: "a".into() }),
        "b:q@2000"
    );
    assert_eq!(with(Mutation::DeleteFromRow), "");
}

#[test]
fn mutations_apply_in_order() {
    let cells = cells_of(&[
        Mutation::set_cell("a", "q", 1000, "1"),
        Mutation::DeleteFromRow,
        Mutation::set_cell("a", "z", 5000, "5"),
    ]);
    assert_eq!(
        view(&cells),
        vec![("a".into(), "z".into(), 5000, "5".into())]
    );
}

#[test]
fn increment_and_append() {
    let mut cells = cells_of(&[
        Mutation::set_cell("a", "n", 1000, 5i64.to_be_bytes().to_vec()),
        Mutation::set_cell("a", "s", 9_000_000, "ab"),
    ]);
    let out = read_modify_write(
        &mut cells,
        &[
            ReadModifyWriteRule::increment("a", "n", 2),
            ReadModifyWriteRule::increment("a", "n", 3),
            ReadModifyWriteRule::append("a", "s", "cd"),
            ReadModifyWriteRule::increment("a", "new", -3),
            ReadModifyWriteRule::append("b", "new", "x"),
        ],
        7_000_456,
    )
    .expect("valid rules");
    assert_eq!(
        view(&out),
        vec![
            (
                "a".into(),
                "n".into(),
                7_000_000,
                String::from_utf8_lossy(&10i64.to_be_bytes()).into_owned()
            ),
            (
                "a".into(),
                "new".into(),
                7_000_000,
                String::from_utf8_lossy(&(-3i64).to_be_bytes()).into_owned()
            ),
            // The latest cell is in the future: the new one replaces it.
            ("a".into(), "s".into(), 9_000_000, "abcd".into()),
            ("b".into(), "new".into(), 7_000_000, "x".into()),
        ]
    );
    // The old version of n stays below the new one; s was replaced.
    assert_eq!(cells.len(), 5);
    assert_eq!(decode_i64(&cells[0].value), Some(10));
    assert_eq!(decode_i64(&cells[1].value), Some(5));
}

#[test]
fn increment_wraps() {
    let mut cells = cells_of(&[Mutation::set_cell(
        "a",
        "n",
        1000,
        i64::MAX.to_be_bytes().to_vec(),
    )]);
    let out = read_modify_write(
        &mut cells,
        &[ReadModifyWriteRule::increment("a", "n", 1)],
        2000,
    )
    .expect("valid");
    assert_eq!(decode_i64(&out[0].value), Some(i64::MIN));
}

#[test]
fn bad_increment_changes_nothing() {
    let mut cells = cells_of(&[Mutation::set_cell("a", "bad", 1000, "abc")]);
    let before = cells.clone();
    let err = read_modify_write(
        &mut cells,
        &[
            ReadModifyWriteRule::increment("a", "ok", 1),
            ReadModifyWriteRule::increment("a", "bad", 1),
        ],
        2000,
    );
    assert_eq!(
        err,
        Err(Error::InvalidIncrementTarget {
            family: "a".into(),
            qualifier: "bad".into(),
            len: 3
        })
    );
    assert_eq!(cells, before);
}

#[test]
fn predicates() {
    let key = Bytes::from_static(b"k");
    let cells = cells_of(&[Mutation::set_cell("a", "q", 1000, "v")]);
    assert!(predicate_matches(None, &key, &cells));
    assert!(!predicate_matches(None, &key, &[]));
    let yes =
        CompiledFilter::compile(&RowFilter::ValueRegex(Bytes::from_static(b"v"))).expect("ok");
    let no = CompiledFilter::compile(&RowFilter::ValueRegex(Bytes::from_static(b"w"))).expect("ok");
    assert!(predicate_matches(Some(&yes), &key, &cells));
    assert!(!predicate_matches(Some(&no), &key, &cells));
}
