//! The two events-table schemas, one row per event, keyed
//! `app_id,user_token,timestamp,suffix` (see `affinity_rowkey::composite`),
//! every cell stamped with the event's time:
//!
//! - *narrow*: family = event type (`view`, `click`, `conversion`),
//!   qualifier = event name, value = JSON of the event's filter counts,
//!   `{"brand":{"Apple":2},"color":{"Black":1}}`;
//! - *wide*: family `e`, one cell per facet, qualifier =
//!   CSV(event_type, event_name, facet) (RFC 4180 quoting), value = one CSV
//!   line `operator,value,count` per facet value (`:,Apple,2`), lines
//!   joined by `\n`. An event without facets gets one marker cell,
//!   qualifier CSV(event_type, event_name), empty value.
//!
//! [`wide_filter`] is the export's filter: an interleave of
//! single-column ranges, one per (event, facet) pair of the strategy, so
//! the store returns only the cells the strategy scores.

use std::borrow::Cow;

use affinity_model::{
    Bytes, CellRef, ColumnRange, Mutation, Row, RowFilter, RowRef, TimestampRange,
};
use std::ops::Bound;

use bytes::BufMut;

use crate::arena::Arena;
use crate::csv;
use crate::error::{Error, Result};
use crate::event::EventType;
use crate::scoring::{FacetCounts, ScoredEvent};
use crate::strategy::Strategy;

/// The wide schema's family.
pub const WIDE_FAMILY: &str = "e";
/// The filter operator of facet filters.
pub const FACET_OPERATOR: &str = ":";

/// How an application's events are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Schema {
    Narrow,
    Wide,
}

impl Schema {
    pub fn as_str(self) -> &'static str {
        match self {
            Schema::Narrow => "narrow",
            Schema::Wide => "wide",
        }
    }

    pub fn parse(text: &str) -> Result<Schema> {
        match text {
            "narrow" => Ok(Schema::Narrow),
            "wide" => Ok(Schema::Wide),
            other => Err(Error::InvalidArgument {
                name: "schema",
                reason: format!("{other:?} is not narrow or wide"),
            }),
        }
    }

    /// The cells of one event.
    pub fn mutations(self, event: &ScoredEvent) -> Vec<Mutation> {
        let mut out = Vec::new();
        self.push_mutations(event, &mut Arena::new(), &mut out);
        out
    }

    /// [`Schema::mutations`] appended to `out`, their bytes cut from
    /// `arena`.
    pub(crate) fn push_mutations(
        self,
        event: &ScoredEvent,
        arena: &mut Arena,
        out: &mut Vec<Mutation>,
    ) {
        let ts = event.timestamp_millis * 1000;
        match self {
            Schema::Narrow => {
                let json = arena.take(|out| {
                    // Serializing plain data to memory cannot fail.
                    let _ = serde_json::to_writer(out.writer(), &event.counts);
                });
                let name = arena.take(|out| out.extend_from_slice(event.event_name.as_bytes()));
                out.push(Mutation::set_cell(
                    event.event_type.as_str(),
                    name,
                    ts,
                    json,
                ));
            }
            Schema::Wide => {
                let ty = event.event_type.as_str();
                let name = event.event_name.as_str();
                let before = out.len();
                for (facet, values) in event.counts.by_facet() {
                    let value = arena.take(|out| {
                        for (i, (v, n)) in values.enumerate() {
                            if i > 0 {
                                out.put_u8(b'\n');
                            }
                            csv::push_record(out, &[FACET_OPERATOR, v]);
                            out.put_u8(b',');
                            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
                        }
                    });
                    out.push(Mutation::set_cell(
                        WIDE_FAMILY,
                        arena.csv(&[ty, name, facet]),
                        ts,
                        value,
                    ));
                }
                if out.len() == before {
                    out.push(Mutation::set_cell(
                        WIDE_FAMILY,
                        arena.csv(&[ty, name]),
                        ts,
                        Bytes::new(),
                    ));
                }
            }
        }
    }
}

pub(crate) fn utf8<'a>(bytes: &'a [u8], what: &'static str) -> Result<&'a str> {
    std::str::from_utf8(bytes).map_err(|_| not_utf8(what))
}

/// The error of stored bytes (`what`) that should be UTF-8 and are not.
pub(crate) fn not_utf8(what: &'static str) -> Error {
    Error::corrupt(what, "not utf-8")
}

/// Decode one event row (either schema, the narrow cell when it holds
/// both; a filtered read may hold only some of the event's facets). `None`
/// for a row without event cells.
pub fn decode_row(row: &Row) -> Result<Option<ScoredEvent>> {
    decode_cells(row.cells.iter().map(CellRef::from))
}

/// [`decode_row`] of a row a visit shows.
pub(crate) fn decode_row_ref(row: &RowRef<'_>) -> Result<Option<ScoredEvent>> {
    decode_cells(row.cells.iter().copied())
}

fn decode_cells<'c>(
    cells: impl Iterator<Item = CellRef<'c>> + Clone,
) -> Result<Option<ScoredEvent>> {
    let mut out: Option<ScoredEvent> = None;
    // A row written during a migration holds both layouts: read one.
    let narrow = cells.clone().any(|c| c.family != WIDE_FAMILY);
    for cell in cells.filter(|c| narrow != (c.family == WIDE_FAMILY)) {
        let ts = cell.timestamp_micros.div_euclid(1000);
        if cell.family == WIDE_FAMILY {
            let q = utf8(cell.qualifier, "wide qualifier")?;
            let fields = csv::decode(q).ok_or_else(|| Error::corrupt("wide qualifier", q))?;
            let ty = fields
                .first()
                .and_then(|t| EventType::parse(t))
                .ok_or_else(|| Error::corrupt("wide qualifier", q))?;
            let name = fields
                .get(1)
                .ok_or_else(|| Error::corrupt("wide qualifier", q))?;
            let e = out.get_or_insert_with(|| ScoredEvent {
                event_type: ty,
                event_name: name.clone(),
                timestamp_millis: ts,
                counts: FacetCounts::default(),
            });
            let Some(facet) = fields.get(2) else { continue };
            visit_wide_value(cell.value, |v, n| e.counts.add(facet, v, n))?;
        } else if let Some(ty) = EventType::parse(cell.family) {
            let counts: std::collections::BTreeMap<
                String,
                std::collections::BTreeMap<String, u32>,
            > = serde_json::from_slice(cell.value)
                .map_err(|e| Error::corrupt("narrow value", e.to_string()))?;
            out = Some(ScoredEvent {
                event_type: ty,
                event_name: utf8(cell.qualifier, "narrow qualifier")?.to_string(),
                timestamp_millis: ts,
                counts: FacetCounts::from_nested(counts),
            });
        }
    }
    Ok(out)
}

/// A wide qualifier's event type, name and facet (`None` in an event's
/// marker cell, which has no facet).
pub fn parse_wide_qualifier(q: &[u8]) -> Result<(EventType, Cow<'_, str>, Option<Cow<'_, str>>)> {
    let q = utf8(q, "wide qualifier")?;
    let bad = || Error::corrupt("wide qualifier", q);
    let ([ty, name, facet], n) = csv::decode_n::<3>(q).ok_or_else(bad)?;
    let ty = EventType::parse(&ty).filter(|_| n >= 2).ok_or_else(bad)?;
    Ok((ty, name, (n == 3).then_some(facet)))
}

/// Visit the `(value, count)` pairs of a wide cell's value (lines
/// `operator,value,count`; only the facet operator `:` counts). Lines
/// without quotes, nearly all of them, are split in one pass over their
/// bytes, without allocating.
pub fn visit_wide_value(value: &[u8], mut visit: impl FnMut(&str, u32)) -> Result<()> {
    visit_wide_value_bytes(value, |v, n| {
        visit(utf8(v, "wide value")?, n);
        Ok(())
    })
}

/// [`visit_wide_value`] showing each value as its bytes, not checked as
/// UTF-8 (the caller checks what it keeps); `visit` may fail.
pub fn visit_wide_value_bytes(
    value: &[u8],
    mut visit: impl FnMut(&[u8], u32) -> Result<()>,
) -> Result<()> {
    for line in value.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let bad = || Error::corrupt("wide value", String::from_utf8_lossy(line).into_owned());
        // The first and last commas, and how many, unless a quote comes.
        let (mut first, mut last, mut commas, mut quoted) = (0, 0, 0, false);
        for (i, b) in line.iter().enumerate() {
            match b {
                b',' => {
                    if commas == 0 {
                        first = i;
                    }
                    last = i;
                    commas += 1;
                }
                b'"' => {
                    quoted = true;
                    break;
                }
                _ => {}
            }
        }
        if !quoted {
            if commas != 2 {
                return Err(bad());
            }
            let n = parse_count(&line[last + 1..]).ok_or_else(bad)?;
            if &line[..first] == FACET_OPERATOR.as_bytes() {
                visit(&line[first + 1..last], n)?;
            }
            continue;
        }
        let line = utf8(line, "wide value")?;
        let ([op, v, n], 3) = csv::decode_n::<3>(line).ok_or_else(bad)? else {
            return Err(bad());
        };
        let n: u32 = n.parse().map_err(|_| bad())?;
        if op == FACET_OPERATOR {
            visit(v.as_bytes(), n)?;
        }
    }
    Ok(())
}

/// A count: decimal digits of a `u32` (as `str::parse` reads them,
/// without a sign).
fn parse_count(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u32, |n, d| {
        let d = d.wrapping_sub(b'0');
        (d < 10).then_some(())?;
        n.checked_mul(10)?.checked_add(u32::from(d))
    })
}

/// Visit the counts of a narrow cell's value (JSON
/// `{"facet":{"value":count}}`) without building maps: strings without
/// escapes are borrowed from the value.
pub fn visit_narrow_value(value: &[u8], visit: impl FnMut(&str, &str, u32)) -> Result<()> {
    use serde::de::Deserializer as _;
    let mut de = serde_json::Deserializer::from_slice(value);
    de.deserialize_map(narrow::Facets(visit))
        .and_then(|()| de.end())
        .map_err(|e| Error::corrupt("narrow value", e.to_string()))
}

/// Serde visitors of the narrow value.
mod narrow {
    use std::borrow::Cow;
    use std::fmt;

    use serde::de::{DeserializeSeed, Deserializer, MapAccess, Visitor};

    /// A string, borrowed when it has no escapes.
    struct Text<'de>(Cow<'de, str>);

    impl<'de> serde::Deserialize<'de> for Text<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Text<'de>;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a string")
                }
                fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Text<'de>, E> {
                    Ok(Text(Cow::Borrowed(v)))
                }
                fn visit_str<E>(self, v: &str) -> Result<Text<'de>, E> {
                    Ok(Text(Cow::Owned(v.to_string())))
                }
            }
            d.deserialize_str(V)
        }
    }

    /// The outer map: facet -> values.
    pub(super) struct Facets<F>(pub F);

    impl<'de, F: FnMut(&str, &str, u32)> Visitor<'de> for Facets<F> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map of facets")
        }
        fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
            while let Some(facet) = map.next_key::<Text<'de>>()? {
                map.next_value_seed(Values {
                    facet: &facet.0,
                    visit: &mut self.0,
                })?;
            }
            Ok(())
        }
    }

    /// One facet's map: value -> count.
    struct Values<'a, F> {
        facet: &'a str,
        visit: &'a mut F,
    }

    impl<'de, F: FnMut(&str, &str, u32)> DeserializeSeed<'de> for Values<'_, F> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_map(self)
        }
    }

    impl<'de, F: FnMut(&str, &str, u32)> Visitor<'de> for Values<'_, F> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map of values to counts")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(value) = map.next_key::<Text<'de>>()? {
                let n: u32 = map.next_value()?;
                (self.visit)(self.facet, &value.0, n);
            }
            Ok(())
        }
    }
}

/// Cells at or after `from_millis`.
pub fn since(from_millis: i64) -> RowFilter {
    RowFilter::TimestampRange(TimestampRange::new(from_millis.saturating_mul(1000), 0))
}

/// The narrow export filter: the strategy's `(type, name)` columns.
pub fn narrow_filter(strategy: &Strategy) -> RowFilter {
    RowFilter::interleave(
        strategy
            .events
            .keys()
            .map(|(ty, name)| {
                RowFilter::Chain(vec![
                    RowFilter::exact_family(ty.as_str()),
                    RowFilter::exact_qualifier(name.as_bytes()),
                ])
            })
            .collect(),
    )
}

/// The wide export filter: an interleave of single-column ranges of family
/// `e`, one per qualifier CSV(type, name, facet) of the strategy's events
/// and facets. Column ranges, not qualifier regexes: every server compares
/// them without a regex engine (the Bigtable emulator compiles a regex
/// for every cell it tests), and the embedded store turns them into one
/// set lookup per cell.
pub fn wide_filter(strategy: &Strategy) -> RowFilter {
    let mut columns = Vec::new();
    for (ty, name) in strategy.events.keys() {
        for facet in strategy.facets.keys() {
            let q = Bytes::from(csv::encode(&[ty.as_str(), name.as_str(), facet.as_str()]));
            columns.push(RowFilter::ColumnRange(ColumnRange {
                family: WIDE_FAMILY.to_string(),
                start: Bound::Included(q.clone()),
                end: Bound::Included(q),
            }));
        }
    }
    RowFilter::interleave(columns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use affinity_model::Cell;

    fn sample() -> ScoredEvent {
        let mut counts = FacetCounts::default();
        counts.add("brand", "Apple, Inc", 2);
        counts.add("color", "\"Black\"", 1);
        counts.add("color", "White", 1);
        ScoredEvent {
            event_type: EventType::Click,
            event_name: "Product, Clicked".into(),
            timestamp_millis: 1_700_000_000_123,
            counts,
        }
    }

    fn row_of(muts: Vec<Mutation>) -> Row {
        let mut cells = Vec::new();
        for m in muts {
            if let Mutation::SetCell {
                family,
                qualifier,
                timestamp_micros,
                value,
            } = m
            {
                cells.push(Cell::new(family, qualifier, timestamp_micros, value));
            }
        }
        cells.sort_by(|a, b| a.canonical_cmp(b));
        Row {
            key: Bytes::from_static(b"k"),
            cells,
        }
    }

    #[test]
    fn both_schemas_round_trip() {
        for schema in [Schema::Narrow, Schema::Wide] {
            let e = sample();
            assert_eq!(
                decode_row(&row_of(schema.mutations(&e))).unwrap(),
                Some(e.clone())
            );
            let empty = ScoredEvent {
                counts: FacetCounts::default(),
                ..e
            };
            assert_eq!(
                decode_row(&row_of(schema.mutations(&empty))).unwrap(),
                Some(empty)
            );
        }
        let wide = Schema::Wide.mutations(&sample());
        assert!(matches!(&wide[0], Mutation::SetCell { qualifier, .. }
            if qualifier.as_ref() == b"click,\"Product, Clicked\",brand"));
    }

    fn wide_pairs(value: &str) -> Result<Vec<(String, u32)>> {
        let mut out = Vec::new();
        visit_wide_value(value.as_bytes(), |v, n| out.push((v.to_string(), n)))?;
        Ok(out)
    }

    #[test]
    fn wide_values_read_plain_and_quoted_lines_and_refuse_broken_ones() {
        let pairs = wide_pairs(":,Apple,2\n:,\"Apple, Inc\",1\nx,other,5\n:,,4294967295").unwrap();
        assert_eq!(
            pairs,
            [
                ("Apple".to_string(), 2),
                ("Apple, Inc".to_string(), 1),
                (String::new(), u32::MAX)
            ]
        );
        for broken in [
            ":,Apple",
            ":,a,b,1",
            ":,Apple,",
            ":,Apple,-1",
            ":,Apple,4294967296",
            ":,Apple,1x",
            ":,\"Apple,1",
        ] {
            assert!(wide_pairs(broken).is_err(), "{broken:?} was read");
        }
    }
}
