//! Table metadata (families, their ids and GC rules) and its binary encoding
//! in the metadata column family.
//!
//! ```text
//! meta     = version u8 (=3) | cf name (str) | next family id u32 | n u32 | family * n
//! family   = name (str) | id u32 | gc rule | type u8 (0 standard, 1 int64 sum)
//! gc rule  = 0 (none) | 1 n:u32 (max versions) | 2 secs:u64 nanos:u32 (max age)
//!          | 3 n:u32 rule*n (intersection) | 4 n:u32 rule*n (union)
//! str      = len u16 | utf-8 bytes
//! ```
//! All integers are big-endian.

use std::collections::BTreeMap;
use std::time::Duration;

use affinity_model::{ColumnFamily, Error, FamilyType, GcRule, Result, TableSpec};

/// Version 3: version 2 and each family's type (aggregate families).
const FORMAT_VERSION: u8 = 3;
/// Version 2: rows stored one RocksDB key each (`crate::row`), every family
/// standard. Read as version 3 with standard families.
const UNTYPED_FORMAT: u8 = 2;
/// Version 1 stored one RocksDB key per cell; its data is not readable.
const PER_CELL_FORMAT: u8 = 1;
/// Family ids stored metadata may hold: far more families than a table
/// ever creates (Bigtable allows 100 at a time).
const MAX_FAMILY_ID: u32 = 1 << 20;

/// Deepest nesting of GC rules accepted when decoding.
const MAX_RULE_DEPTH: usize = 64;

/// A family as stored: the id its cells carry, and its GC rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FamilyMeta {
    pub id: u32,
    pub gc_rule: GcRule,
    pub value_type: FamilyType,
}

/// A family as the read path sees it, looked up by id.
#[derive(Debug, Clone)]
pub(crate) struct FamilyView {
    pub name: String,
    pub gc_rule: GcRule,
    /// The family's position among the table's families by name (the
    /// order cells of a row are stored in), for comparing without the
    /// names.
    pub rank: u32,
    /// The GC rule keeps only the newest version of a column
    /// ([`affinity_model::gc::keeps_only_newest`]).
    pub newest_only: bool,
}

/// Everything the store knows about one table.
#[derive(Debug, Clone)]
pub(crate) struct TableMeta {
    /// The RocksDB column family holding the table's cells.
    pub cf_name: String,
    /// Family ids are never reused, so a dropped family's cells stay
    /// invisible until compaction removes them.
    pub next_family_id: u32,
    pub families: BTreeMap<String, FamilyMeta>,
    /// Families by id (`None` for dropped ids).
    by_id: Vec<Option<FamilyView>>,
    /// True when some family has a GC rule other than `None`.
    has_gc: bool,
}

impl TableMeta {
    /// Build metadata and its derived lookup tables.
    pub fn new(
        cf_name: String,
        next_family_id: u32,
        families: BTreeMap<String, FamilyMeta>,
    ) -> TableMeta {
        // Ids past the highest live one are dropped families: no slot
        // (`next_family_id` comes from disk, and may be anything).
        let slots = families
            .values()
            .map(|f| f.id as usize + 1)
            .max()
            .unwrap_or(0);
        let mut by_id: Vec<Option<FamilyView>> = vec![None; slots];
        for (rank, (name, family)) in families.iter().enumerate() {
            if let Some(slot) = by_id.get_mut(family.id as usize) {
                *slot = Some(FamilyView {
                    name: name.clone(),
                    gc_rule: family.gc_rule.clone(),
                    rank: rank as u32,
                    newest_only: affinity_model::gc::keeps_only_newest(&family.gc_rule),
                });
            }
        }
        let has_gc = families.values().any(|f| f.gc_rule != GcRule::None);
        TableMeta {
            cf_name,
            next_family_id,
            families,
            by_id,
            has_gc,
        }
    }

    /// A new table's metadata from its spec.
    pub fn from_spec(cf_name: String, spec: &TableSpec) -> TableMeta {
        let families: BTreeMap<String, FamilyMeta> = spec
            .families
            .iter()
            .enumerate()
            .map(|(id, (name, cf))| {
                let family = FamilyMeta {
                    id: id as u32,
                    gc_rule: cf.gc_rule.clone(),
                    value_type: cf.value_type,
                };
                (name.clone(), family)
            })
            .collect();
        TableMeta::new(cf_name, families.len() as u32, families)
    }

    /// The table's spec as the traits return it.
    pub fn spec(&self) -> TableSpec {
        TableSpec {
            families: self
                .families
                .iter()
                .map(|(name, f)| {
                    let cf = ColumnFamily {
                        gc_rule: f.gc_rule.clone(),
                        value_type: f.value_type,
                    };
                    (name.clone(), cf)
                })
                .collect(),
        }
    }

    pub fn family_id(&self, name: &str) -> Option<u32> {
        self.families.get(name).map(|f| f.id)
    }

    /// The id of a family a request was validated against: an internal
    /// error when the table has no such family.
    pub fn known_family_id(&self, name: &str) -> Result<u32> {
        self.family_id(name)
            .ok_or_else(|| Error::Internal(format!("family {name:?} has no id")))
    }

    /// The type of a family, if the table has it.
    pub fn family_type(&self, name: &str) -> Option<FamilyType> {
        self.families.get(name).map(|f| f.value_type)
    }

    /// The live family with this id, if any.
    pub fn family(&self, id: u32) -> Option<&FamilyView> {
        self.by_id.get(id as usize).and_then(Option::as_ref)
    }

    pub fn has_gc(&self) -> bool {
        self.has_gc
    }

    /// Encode for the metadata column family.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![FORMAT_VERSION];
        put_str(&mut out, &self.cf_name);
        out.extend_from_slice(&self.next_family_id.to_be_bytes());
        out.extend_from_slice(&(self.families.len() as u32).to_be_bytes());
        for (name, family) in &self.families {
            put_str(&mut out, name);
            out.extend_from_slice(&family.id.to_be_bytes());
            put_rule(&mut out, &family.gc_rule);
            out.push(match family.value_type {
                FamilyType::Standard => 0,
                FamilyType::SumInt64 => 1,
            });
        }
        out
    }

    /// Decode what [`TableMeta::encode`] wrote; `table` names the table in
    /// errors.
    pub fn decode(table: &str, bytes: &[u8]) -> Result<TableMeta> {
        let corrupt =
            |what: &str| Error::Storage(format!("corrupt metadata of table {table:?}: {what}"));
        let mut r = Reader { bytes };
        let version = r.u8().ok_or_else(|| corrupt("empty"))?;
        if version == PER_CELL_FORMAT {
            return Err(Error::Storage(format!(
                "table {table:?} was written by an older Affinity that stored one key per \
                 cell; this version stores one key per row and cannot read it: \
                 reload the data into a new --data directory"
            )));
        }
        if version != FORMAT_VERSION && version != UNTYPED_FORMAT {
            return Err(corrupt(&format!("unknown format version {version}")));
        }
        let cf_name = r.str().ok_or_else(|| corrupt("bad column family name"))?;
        let next_family_id = r.u32().ok_or_else(|| corrupt("bad next family id"))?;
        let count = r.u32().ok_or_else(|| corrupt("bad family count"))?;
        let mut families = BTreeMap::new();
        for _ in 0..count {
            let name = r.str().ok_or_else(|| corrupt("bad family name"))?;
            let id = r.u32().ok_or_else(|| corrupt("bad family id"))?;
            let gc_rule = r.rule(0).ok_or_else(|| corrupt("bad gc rule"))?;
            let value_type = match version {
                UNTYPED_FORMAT => FamilyType::Standard,
                _ => match r.u8() {
                    Some(0) => FamilyType::Standard,
                    Some(1) => FamilyType::SumInt64,
                    _ => return Err(corrupt("bad family type")),
                },
            };
            if id >= next_family_id {
                return Err(corrupt(&format!(
                    "family id {id} is not below {next_family_id}"
                )));
            }
            // Bigtable allows 100 families a table: ids past this many
            // creations are damage (and would size `by_id`).
            if id >= MAX_FAMILY_ID {
                return Err(corrupt(&format!(
                    "family id {id} is not below {MAX_FAMILY_ID}"
                )));
            }
            if families.values().any(|f: &FamilyMeta| f.id == id) {
                return Err(corrupt(&format!("family id {id} is used twice")));
            }
            if families.contains_key(&name) {
                return Err(corrupt(&format!("family {name:?} is listed twice")));
            }
            families.insert(
                name,
                FamilyMeta {
                    id,
                    gc_rule,
                    value_type,
                },
            );
        }
        if !r.bytes.is_empty() {
            return Err(corrupt("trailing bytes"));
        }
        Ok(TableMeta::new(cf_name, next_family_id, families))
    }
}

/// Family ids and ranks by name, for mutations that come in runs of one
/// family: each run's looked up once.
pub(crate) struct FamilyLookup<'m, 'n> {
    meta: &'m TableMeta,
    /// The last family looked up: its name, id and rank.
    last: Option<(&'n str, u32, u32)>,
}

impl<'m, 'n> FamilyLookup<'m, 'n> {
    pub fn new(meta: &'m TableMeta) -> Self {
        FamilyLookup { meta, last: None }
    }

    /// The id and the rank ([`FamilyView::rank`]) of the family `name`.
    #[inline]
    pub fn id_and_rank(&mut self, name: &'n str) -> Result<(u32, u32)> {
        match self.last {
            Some((last, id, rank)) if last == name => Ok((id, rank)),
            _ => {
                let id = self.meta.known_family_id(name)?;
                let rank = self.meta.family(id).map_or(u32::MAX, |f| f.rank);
                self.last = Some((name, id, rank));
                Ok((id, rank))
            }
        }
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    // Names are validated short (tables <= 50 bytes, families are names).
    let len = u16::try_from(s.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&s.as_bytes()[..len as usize]);
}

fn put_rule(out: &mut Vec<u8>, rule: &GcRule) {
    match rule {
        GcRule::None => out.push(0),
        GcRule::MaxVersions(n) => {
            out.push(1);
            out.extend_from_slice(&n.to_be_bytes());
        }
        GcRule::MaxAge(age) => {
            out.push(2);
            out.extend_from_slice(&age.as_secs().to_be_bytes());
            out.extend_from_slice(&age.subsec_nanos().to_be_bytes());
        }
        GcRule::Intersection(rules) | GcRule::Union(rules) => {
            out.push(if matches!(rule, GcRule::Intersection(_)) {
                3
            } else {
                4
            });
            out.extend_from_slice(&(rules.len() as u32).to_be_bytes());
            for r in rules {
                put_rule(out, r);
            }
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.bytes.split_first_chunk::<N>()?;
        self.bytes = rest;
        Some(*head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|[b]| b)
    }

    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_be_bytes)
    }

    fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_be_bytes)
    }

    fn str(&mut self) -> Option<String> {
        let len = usize::from(self.take().map(u16::from_be_bytes)?);
        let (s, rest) = self.bytes.split_at_checked(len)?;
        self.bytes = rest;
        String::from_utf8(s.to_vec()).ok()
    }

    fn rule(&mut self, depth: usize) -> Option<GcRule> {
        if depth > MAX_RULE_DEPTH {
            return None;
        }
        Some(match self.u8()? {
            0 => GcRule::None,
            1 => GcRule::MaxVersions(self.u32()?),
            2 => {
                let secs = self.u64()?;
                let nanos = self.u32()?;
                if nanos >= 1_000_000_000 {
                    return None;
                }
                GcRule::MaxAge(Duration::new(secs, nanos))
            }
            tag @ (3 | 4) => {
                let n = self.u32()?;
                // Each rule takes at least one byte: bound the allocation.
                let mut rules = Vec::with_capacity((n as usize).min(self.bytes.len()));
                for _ in 0..n {
                    rules.push(self.rule(depth + 1)?);
                }
                if tag == 3 {
                    GcRule::Intersection(rules)
                } else {
                    GcRule::Union(rules)
                }
            }
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TableMeta {
        let spec = TableSpec::new()
            .with_family("e", GcRule::MaxVersions(1))
            .with_sum_family("n", GcRule::MaxVersions(2))
            .with_family(
                "p",
                GcRule::Union(vec![
                    GcRule::MaxAge(Duration::new(86_400, 5)),
                    GcRule::Intersection(vec![GcRule::MaxVersions(3), GcRule::None]),
                ]),
            );
        TableMeta::from_spec("t/x/1".into(), &spec)
    }

    #[test]
    fn metadata_round_trips() {
        let meta = sample();
        let back = TableMeta::decode("x", &meta.encode()).expect("decodes");
        assert_eq!(back.cf_name, "t/x/1");
        assert_eq!(back.families, meta.families);
        assert_eq!(back.spec(), meta.spec());
        assert_eq!(back.family(2).map(|f| f.name.as_str()), Some("p"));
        assert_eq!(back.family_type("n"), Some(FamilyType::SumInt64));
        assert!(back.has_gc());
    }

    #[test]
    fn corrupt_metadata_is_an_error_naming_the_table() {
        let bytes = sample().encode();
        for len in 0..bytes.len() {
            let err = TableMeta::decode("events", &bytes[..len]).expect_err("truncated");
            assert!(err.to_string().contains("\"events\""), "{err}");
        }
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(TableMeta::decode("events", &trailing).is_err());
    }

    #[test]
    fn per_cell_stores_are_refused_with_a_clear_error() {
        let mut bytes = sample().encode();
        bytes[0] = PER_CELL_FORMAT;
        let err = TableMeta::decode("events", &bytes).expect_err("old format");
        assert!(err.to_string().contains("one key per cell"), "{err}");
    }

    #[test]
    fn untyped_metadata_reads_with_standard_families() {
        // Version 2, as stores wrote it before aggregate families: no
        // type byte after a family's GC rule.
        let mut bytes = vec![UNTYPED_FORMAT];
        put_str(&mut bytes, "t/x/1");
        bytes.extend_from_slice(&3u32.to_be_bytes());
        bytes.extend_from_slice(&2u32.to_be_bytes());
        for (name, id, rule) in [("e", 0u32, GcRule::MaxVersions(1)), ("p", 2, GcRule::None)] {
            put_str(&mut bytes, name);
            bytes.extend_from_slice(&id.to_be_bytes());
            put_rule(&mut bytes, &rule);
        }
        let meta = TableMeta::decode("x", &bytes).expect("decodes");
        assert_eq!(
            meta.spec(),
            TableSpec::new()
                .with_family("e", GcRule::MaxVersions(1))
                .with_family("p", GcRule::None)
        );
        assert_eq!(meta.family_id("p"), Some(2));
        assert_eq!(meta.next_family_id, 3);
    }

    #[test]
    fn ids_out_of_name_order_are_looked_up_by_id() {
        let mut families = BTreeMap::new();
        families.insert(
            "a".to_string(),
            FamilyMeta {
                id: 2,
                gc_rule: GcRule::None,
                value_type: FamilyType::Standard,
            },
        );
        families.insert(
            "b".to_string(),
            FamilyMeta {
                id: 0,
                gc_rule: GcRule::None,
                value_type: FamilyType::SumInt64,
            },
        );
        let meta = TableMeta::new("cf".into(), 3, families);
        assert_eq!(meta.family(2).map(|f| f.name.as_str()), Some("a"));
        assert_eq!(meta.family(0).map(|f| f.name.as_str()), Some("b"));
        assert!(meta.family(1).is_none());
        assert!(!meta.has_gc());
    }
}
