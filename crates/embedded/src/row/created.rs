//! The row a write creates from `SetCell`s alone, encoded straight from
//! its mutations: nearly every write to an events table creates its row,
//! and this skips building, collecting and encoding `Cell`s.

use affinity_model::apply::truncate_to_millis;
use affinity_model::{Mutation, Result, SERVER_TIME};

use super::{CellKey, GcRowWriter};
use crate::meta::{FamilyLookup, TableMeta};

/// One `SetCell` of a created row.
struct CreatedCell<'a> {
    key: CellKey<'a>,
    family_id: u32,
    value: &'a [u8],
}

/// The stored form of the row `mutations` make of no row at all at clock
/// `now_micros`, when they only set cells: what applying them to no cells,
/// collecting GC and encoding gives. `Ok(None)` when they do anything
/// else.
pub(crate) fn encode_created_row(
    meta: &TableMeta,
    mutations: &[Mutation],
    now_micros: i64,
) -> Result<Option<Vec<u8>>> {
    let mut cells: Vec<CreatedCell<'_>> = Vec::with_capacity(mutations.len());
    let mut families = FamilyLookup::new(meta);
    for m in mutations {
        let Mutation::SetCell {
            family,
            qualifier,
            timestamp_micros,
            value,
        } = m
        else {
            return Ok(None);
        };
        let ts = match *timestamp_micros {
            SERVER_TIME => truncate_to_millis(now_micros),
            ts => ts,
        };
        let (family_id, rank) = families.id_and_rank(family)?;
        cells.push(CreatedCell {
            key: CellKey {
                rank,
                qualifier,
                timestamp_micros: ts,
            },
            family_id,
            value,
        });
    }
    // Stable, and a later cell of the same column and time replaces the
    // earlier, as `apply_mutations` does.
    cells.sort_by(|a, b| a.key.cmp(&b.key));
    cells.dedup_by(|later, kept| {
        let same = later.key == kept.key;
        if same {
            kept.family_id = later.family_id;
            kept.value = later.value;
        }
        same
    });
    let mut out = Vec::with_capacity(
        cells
            .iter()
            .map(|c| c.key.qualifier.len() + c.value.len() + 8)
            .sum(),
    );
    let mut writer = GcRowWriter::new(meta, now_micros, &mut out);
    for cell in cells {
        writer.put(
            cell.family_id,
            cell.key.qualifier,
            cell.key.timestamp_micros,
            cell.value,
        );
    }
    drop(writer);
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use affinity_model::{GcRule, TableSpec};

    use super::*;
    use crate::decode::decode_cells;
    use crate::row::encode_row;
    use crate::test_util::reference;

    #[test]
    fn created_rows_encode_as_applied_collected_and_encoded() {
        let meta = TableMeta::from_spec(
            "cf".into(),
            &TableSpec::new()
                .with_family("a", GcRule::None)
                .with_family("m", GcRule::MaxVersions(2))
                .with_family("o", GcRule::MaxAge(std::time::Duration::from_millis(5)))
                .with_family("v", GcRule::MaxVersions(1))
                .with_sum_family("s", GcRule::None),
        );
        let set = |f: &'static str, q: &str, ts: i64, v: &str| {
            Mutation::set_cell(f, q.to_string(), ts, v.to_string())
        };
        let now = 20_000;
        let cases: Vec<Vec<Mutation>> = vec![
            vec![set("a", "q", 1000, "x")],
            // Unsorted, a repeated column and time (the later wins), server
            // time, versions past a limit, cells past their age, a family
            // used twice apart.
            vec![
                set("v", "q", 1000, "old"),
                set("a", "z", 3000, "1"),
                set("m", "q", 1000, "m1"),
                set("m", "q", 2000, "m2"),
                set("m", "q", 3000, "m3"),
                set("a", "b", 3000, "first"),
                set("a", "b", 3000, "second"),
                set("v", "q", SERVER_TIME, "new"),
                set("o", "old", 1000, "gone"),
                set("o", "young", 18_000, "kept"),
                set("a", "", 0, ""),
            ],
            // Nothing survives GC.
            vec![set("o", "old", 1000, "gone")],
        ];
        for mutations in cases {
            let encoded = encode_created_row(&meta, &mutations, now)
                .expect("encodes")
                .expect("only sets");
            let expected = reference(&meta, &[(mutations.clone(), now)]);
            let mut generic = Vec::new();
            encode_row(&mut generic, &meta, &expected).expect("encodes");
            assert_eq!(encoded, generic, "{mutations:?}");
            assert_eq!(
                decode_cells(&meta, b"k", &encoded, now).expect("decodes"),
                expected
            );
        }
        assert_eq!(
            encode_created_row(&meta, &[Mutation::add_to_cell("s", "n", 0, 1)], now).unwrap(),
            None
        );
        assert_eq!(
            encode_created_row(
                &meta,
                &[set("a", "q", 1, "x"), Mutation::DeleteFromRow],
                now
            )
            .unwrap(),
            None
        );
    }
}
