//! The store's decoders of bytes read from disk, reached without a
//! database, for the fuzz targets in `fuzz/` (feature `fuzzing`; not part
//! of the store's API).
//!
//! Each `check_*` function feeds bytes as a damaged file would give them
//! to the decoders the store runs on them, and checks what must hold
//! whatever the bytes: decoding returns rows or an error, never panics;
//! the ways a read decodes a row agree with each other; what a merge or
//! GC writes back decodes to what was read. A broken property panics (the
//! fuzzer's finding); errors are fine.

use std::time::Duration;

use affinity_model::eval::{CellPrefilter, CompiledFilter};
use affinity_model::{
    Bytes, CellRef, ColumnRange, GcRule, Mutation, Result, Row, RowFilter, TableSpec,
    TimestampRange,
};

use crate::decode::{decode_cells, read_refs, read_row, ColumnVerdicts};
use crate::gc::{collect_stored, Collected};
use crate::meta::TableMeta;
use crate::row::{cell_count, RowWriter};

/// A table's metadata, opaque.
pub struct Meta(TableMeta);

/// Families `a` (no GC), `b` (two versions), `s` (an int64 sum, one day),
/// `d` (dropped: its cells are hidden) and `e` (any of one version or an
/// hour), with ids 0 to 4.
pub fn sample_meta() -> Meta {
    let spec = TableSpec::new()
        .with_family("a", GcRule::None)
        .with_family("b", GcRule::MaxVersions(2))
        .with_sum_family("s", GcRule::MaxAge(Duration::from_secs(86_400)))
        .with_family("d", GcRule::None)
        .with_family(
            "e",
            GcRule::Union(vec![
                GcRule::MaxVersions(1),
                GcRule::MaxAge(Duration::from_secs(3600)),
            ]),
        );
    let meta = TableMeta::from_spec("cf".into(), &spec);
    let mut families = meta.families.clone();
    families.remove("d");
    Meta(TableMeta::new(
        meta.cf_name.clone(),
        meta.next_family_id,
        families,
    ))
}

/// Qualifiers sharing prefixes, as seeds and filters use them.
pub const QUALIFIERS: [&str; 7] = ["", "x", "xa", "xab", "xb", "y", "yb"];

/// The filters a read may carry, by number (`choice` modulo their count):
/// none, columns, a time range and a column, a family and qualifier, a
/// qualifier regex.
pub fn sample_filter(choice: u8) -> Option<RowFilter> {
    let column = |family: &str, q: usize| {
        let q = Bytes::from(QUALIFIERS[q]);
        RowFilter::ColumnRange(ColumnRange {
            family: family.to_string(),
            start: std::ops::Bound::Included(q.clone()),
            end: std::ops::Bound::Included(q),
        })
    };
    match choice % 6 {
        0 => None,
        1 => Some(RowFilter::interleave(vec![column("a", 1), column("b", 4)])),
        2 => Some(RowFilter::Chain(vec![
            RowFilter::TimestampRange(TimestampRange::new(2000, 0)),
            column("a", 2),
        ])),
        3 => Some(RowFilter::Chain(vec![
            RowFilter::exact_family("b"),
            RowFilter::exact_qualifier(b"xa"),
        ])),
        4 => Some(RowFilter::ColumnQualifierRegex(Bytes::from_static(b"x.*"))),
        _ => Some(RowFilter::interleave(vec![column("s", 0), column("e", 5)])),
    }
}

/// A stored row value of `cells` (family id, qualifier, timestamp in
/// microseconds, value), sorted into canonical order first: seeds.
pub fn encode_row(cells: &[(u32, &[u8], i64, &[u8])]) -> Vec<u8> {
    let mut cells = cells.to_vec();
    cells.sort_by(|a, b| (a.0, a.1, b.2).cmp(&(b.0, b.1, a.2)));
    cells.dedup_by(|a, b| (a.0, a.1, a.2) == (b.0, b.1, b.2));
    let mut out = Vec::new();
    let mut writer = RowWriter::new(&mut out);
    for (f, q, ts, v) in cells {
        writer.put(f, q, ts, v);
    }
    out
}

/// A merge operand of `mutations` at clock `now` (microseconds): seeds.
pub fn encode_operand(meta: &Meta, mutations: &[Mutation], now: i64) -> Vec<u8> {
    let mut out = Vec::new();
    crate::merge::encode_operand(&mut out, &meta.0, mutations, now)
        .expect("seed mutations fit the sample table");
    out
}

type Owned = (String, Vec<u8>, i64, Vec<u8>);

fn owned(cells: &[CellRef<'_>]) -> Vec<Owned> {
    cells
        .iter()
        .map(|c| {
            let value = (c.family.to_string(), c.qualifier.to_vec());
            (value.0, value.1, c.timestamp_micros, c.value.to_vec())
        })
        .collect()
}

fn row_cells(row: Option<Row>) -> Vec<Owned> {
    row.map(|r| {
        r.cells
            .into_iter()
            .map(|c| {
                (
                    c.family,
                    c.qualifier.to_vec(),
                    c.timestamp_micros,
                    c.value.to_vec(),
                )
            })
            .collect()
    })
    .unwrap_or_default()
}

/// Stored row values `rows`, decoded one after the other as a scan with
/// `filter` decodes them (through one memory of row shapes), and each
/// alone: both ways give the same cells, or both fail, and the filtered
/// read equals the filter applied to the whole row. Compaction's GC of a
/// row that decodes writes back a row that decodes to the same visible
/// cells. Returns how many rows failed to decode.
pub fn check_rows(meta: &Meta, rows: &[&[u8]], filter: Option<&RowFilter>, now: i64) -> usize {
    let meta = &meta.0;
    let compiled = CompiledFilter::compile_opt(filter).expect("sample filters compile");
    let prefilter = compiled.cell_prefilter();
    let exact = prefilter.as_ref().is_some_and(CellPrefilter::is_exact);
    let mut shared = ColumnVerdicts::default();
    let mut failed = 0;
    for value in rows {
        let key = b"row";
        let mut arena = Vec::new();
        let mut out = Vec::new();
        let remembered = read_refs(
            meta,
            key,
            value,
            now,
            prefilter.as_ref(),
            &mut shared,
            &mut arena,
            &mut out,
        )
        .map(|()| owned(&out));
        let mut fresh_arena = Vec::new();
        let mut fresh_out = Vec::new();
        let fresh = read_refs(
            meta,
            key,
            value,
            now,
            prefilter.as_ref(),
            &mut ColumnVerdicts::default(),
            &mut fresh_arena,
            &mut fresh_out,
        )
        .map(|()| owned(&fresh_out));
        let whole = read_row(meta, key, value, now, None, &mut ColumnVerdicts::default());
        let Ok(whole) = whole else {
            let err = whole.expect_err("checked");
            check_names_row(&err);
            assert!(
                remembered.is_err(),
                "a read with remembered shapes decoded a corrupt row"
            );
            assert!(fresh.is_err(), "a filtered read decoded a corrupt row");
            assert!(decode_cells(meta, key, value, now).is_err());
            failed += 1;
            // GC leaves a row it cannot decode alone.
            assert_eq!(collect_stored(meta, value, now), Collected::Unchanged);
            continue;
        };
        let remembered = remembered.expect("the whole row decodes, so does a filtered read");
        let fresh = fresh.expect("the whole row decodes, so does a filtered read");
        assert_eq!(remembered, fresh, "remembered shapes changed a read");
        let whole_cells = row_cells(whole.clone());
        let expected = row_cells(whole.and_then(|r| compiled.apply(r)));
        let got = if exact {
            remembered
        } else {
            let pruned = read_row(meta, key, value, now, prefilter.as_ref(), &mut shared)
                .expect("the whole row decodes, so does a pruned read");
            row_cells(pruned.and_then(|r| compiled.apply(r)))
        };
        assert_eq!(got, expected, "a filtered read differs from the filter");
        assert!(cell_count(value) >= whole_cells.len() as u64);
        match collect_stored(meta, value, now) {
            Collected::Unchanged => {}
            Collected::Empty => assert!(whole_cells.is_empty(), "GC emptied a row with cells"),
            Collected::Rewritten(rewritten, _) => {
                let again = read_row(
                    meta,
                    key,
                    &rewritten,
                    now,
                    None,
                    &mut ColumnVerdicts::default(),
                )
                .expect("GC wrote a row that does not decode");
                assert_eq!(
                    row_cells(again),
                    whole_cells,
                    "GC changed the visible cells"
                );
            }
        }
    }
    failed
}

/// The error of a row that does not decode names the row.
fn check_names_row(err: &affinity_model::Error) {
    let text = err.to_string();
    assert!(
        text.contains("\"row\""),
        "a corrupt row's error does not name it: {text}"
    );
}

/// A stored row `existing` (or none) merged with `operands` as RocksDB's
/// full merge does, and with the operands first combined by its partial
/// merge: a full merge of a row that decodes writes a row that decodes; a
/// row that does not decode is refused, never merged into a shorter one;
/// combining operands first changes nothing.
pub fn check_merge(meta: &Meta, existing: Option<&[u8]>, operands: &[&[u8]], now: i64) {
    let meta = &meta.0;
    let key = b"row";
    let full = crate::merge::full_merge(meta, key, existing, operands.iter().copied());
    let existing_decodes = existing.is_none_or(|v| decode_cells(meta, key, v, now).is_ok());
    if let Some(merged) = &full {
        if !existing_decodes {
            // Only as it was (operands without a group), never shortened.
            assert_eq!(
                Some(merged.as_slice()),
                existing,
                "a merge took a row that does not decode"
            );
        } else {
            decode_cells(meta, key, merged, now).expect("a merge wrote a row that does not decode");
        }
    }
    if let (Some(full), Some(combined)) = (&full, crate::merge::combine(Some(meta), operands)) {
        let again = crate::merge::full_merge(meta, key, existing, [combined.as_slice()])
            .expect("operands that merge also merge once combined");
        assert_eq!(
            decode_cells(meta, key, &again, now).ok(),
            decode_cells(meta, key, full, now).ok(),
            "combining operands first changed the merged row"
        );
    }
}

/// Table metadata as stored: decodes or fails with an error naming the
/// table; what decodes encodes back to bytes that decode to the same.
pub fn check_meta(bytes: &[u8]) -> Result<Meta> {
    match TableMeta::decode("events", bytes) {
        Ok(meta) => {
            let encoded = meta.encode();
            let back = TableMeta::decode("events", &encoded).expect("encoded metadata decodes");
            assert_eq!(back.encode(), encoded, "metadata does not round trip");
            assert_eq!(back.families, meta.families);
            assert_eq!(back.spec(), meta.spec());
            Ok(Meta(meta))
        }
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.contains("\"events\""),
                "error does not name the table: {text}"
            );
            Err(e)
        }
    }
}

/// The metadata encoded (seeds).
pub fn encode_meta(meta: &Meta) -> Vec<u8> {
    meta.0.encode()
}
