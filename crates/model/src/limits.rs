//! Bigtable's limits, enforced before anything is written.

use std::ops::Bound;

use crate::error::{Error, Result};
use crate::mutation::{Mutation, ReadModifyWriteRule, RowMutations};
use crate::rowset::{RowRange, RowSet};
use crate::table_spec::FamilyType;

/// Largest row key, in bytes.
pub const MAX_ROW_KEY_BYTES: usize = 4 * 1024;
/// Largest column qualifier, in bytes.
pub const MAX_QUALIFIER_BYTES: usize = 16 * 1024;
/// Largest cell value, in bytes.
pub const MAX_VALUE_BYTES: usize = 100 * 1024 * 1024;
/// Most mutations in one request (summed over the entries of `mutate_rows`).
pub const MAX_MUTATIONS_PER_REQUEST: usize = 100_000;
/// Longest table name, in bytes.
pub const MAX_TABLE_NAME_BYTES: usize = 50;

/// Check a row key: non-empty and at most 4 KiB.
pub fn check_row_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(Error::EmptyRowKey);
    }
    if key.len() > MAX_ROW_KEY_BYTES {
        return Err(Error::RowKeyTooLarge { len: key.len() });
    }
    Ok(())
}

/// Check the prefix of a `drop_row_range`: non-empty (dropping every row
/// is deleting the table) and no longer than a row key.
pub fn check_row_key_prefix(prefix: &[u8]) -> Result<()> {
    if prefix.is_empty() {
        return Err(Error::InvalidArgument(
            "a row key prefix to drop must not be empty".into(),
        ));
    }
    if prefix.len() > MAX_ROW_KEY_BYTES {
        return Err(Error::RowKeyTooLarge { len: prefix.len() });
    }
    Ok(())
}

fn is_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphanumeric() || b == b'_' => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Check a family name against `[_a-zA-Z0-9][-_.a-zA-Z0-9]*`.
pub fn check_family_name(name: &str) -> Result<()> {
    if is_name(name) {
        Ok(())
    } else {
        Err(Error::InvalidFamilyName {
            name: name.to_string(),
        })
    }
}

/// Check a table name against `[_a-zA-Z0-9][-_.a-zA-Z0-9]*`, at most 50 bytes.
pub fn check_table_name(name: &str) -> Result<()> {
    if is_name(name) && name.len() <= MAX_TABLE_NAME_BYTES {
        Ok(())
    } else {
        Err(Error::InvalidTableName {
            name: name.to_string(),
        })
    }
}

/// Check a qualifier's size.
pub fn check_qualifier(qualifier: &[u8]) -> Result<()> {
    if qualifier.len() > MAX_QUALIFIER_BYTES {
        return Err(Error::QualifierTooLarge {
            len: qualifier.len(),
        });
    }
    Ok(())
}

/// Check a cell timestamp: `>= 0` and a multiple of 1000, or
/// [`crate::SERVER_TIME`] when `allow_server_time`.
pub fn check_timestamp(micros: i64, allow_server_time: bool) -> Result<()> {
    if allow_server_time && micros == crate::SERVER_TIME {
        return Ok(());
    }
    if micros < 0 {
        return Err(Error::InvalidTimestamp { micros });
    }
    if micros % 1000 != 0 {
        return Err(Error::TimestampGranularity { micros });
    }
    Ok(())
}

/// Check the number of mutations of a request.
pub fn check_mutation_count(count: usize) -> Result<()> {
    if count == 0 {
        return Err(Error::NoMutations);
    }
    if count > MAX_MUTATIONS_PER_REQUEST {
        return Err(Error::TooManyMutations { count });
    }
    Ok(())
}

/// The type of a table's family, `None` when the table has no such family:
/// what the checks below need to know about a table.
pub type FamilyTypes<'a> = &'a dyn Fn(&str) -> Option<FamilyType>;

fn check_family(
    table: &str,
    family: &str,
    family_type: FamilyTypes<'_>,
    aggregate: Option<bool>,
    what: &str,
) -> Result<()> {
    check_family_name(family)?;
    let Some(found) = family_type(family) else {
        return Err(Error::FamilyNotFound {
            table: table.to_string(),
            family: family.to_string(),
        });
    };
    match aggregate {
        Some(wanted) if found.is_aggregate() != wanted => Err(Error::FamilyTypeMismatch {
            table: table.to_string(),
            family: family.to_string(),
            reason: if wanted {
                format!("{what} needs an aggregate family; {family:?} is a standard family")
            } else {
                format!("{what} cannot write to aggregate family {family:?}")
            },
        }),
        _ => Ok(()),
    }
}

/// Check one mutation's sizes, names and timestamps, and that its family is
/// one of the table's, of the type the mutation needs (`SetCell` a
/// standard family, `AddToCell` an aggregate one). Does not check the
/// mutation count.
pub fn check_mutation(
    mutation: &Mutation,
    table: &str,
    family_type: FamilyTypes<'_>,
) -> Result<()> {
    match check_cell_part(mutation)? {
        Some((family, aggregate, what)) => {
            check_family(table, family, family_type, aggregate, what)
        }
        None => Ok(()),
    }
}

/// What the family of a mutation must be, once the rest of it (sizes,
/// timestamps) checked: its name, whether it must be an aggregate family
/// (`None`: either) and the mutation's name for messages. `None` for a
/// mutation without a family.
fn check_cell_part(mutation: &Mutation) -> Result<Option<(&str, Option<bool>, &'static str)>> {
    Ok(Some(match mutation {
        Mutation::SetCell {
            family,
            qualifier,
            timestamp_micros,
            value,
        } => {
            check_qualifier(qualifier)?;
            check_timestamp(*timestamp_micros, true)?;
            if value.len() > MAX_VALUE_BYTES {
                return Err(Error::ValueTooLarge { len: value.len() });
            }
            (family, Some(false), "SetCell")
        }
        Mutation::AddToCell {
            family,
            qualifier,
            timestamp_micros,
            ..
        } => {
            check_qualifier(qualifier)?;
            check_timestamp(*timestamp_micros, false)?;
            (family, Some(true), "AddToCell")
        }
        Mutation::DeleteFromColumn {
            family,
            qualifier,
            time_range,
        } => {
            check_qualifier(qualifier)?;
            check_timestamp(time_range.start_micros, false)?;
            check_timestamp(time_range.end_micros, false)?;
            if time_range.end_micros != 0 && time_range.end_micros <= time_range.start_micros {
                return Err(Error::InvalidArgument(format!(
                    "time range end {} is not after its start {}",
                    time_range.end_micros, time_range.start_micros
                )));
            }
            (family, None, "DeleteFromColumn")
        }
        Mutation::DeleteFromFamily { family } => (family, None, "DeleteFromFamily"),
        Mutation::DeleteFromRow => return Ok(None),
    }))
}

/// Check the mutations of one row: its key, their count and each mutation
/// ([`check_mutation`]; a family is checked once for a run of mutations
/// naming it the same way).
pub fn check_row_mutations(
    table: &str,
    row_key: &[u8],
    mutations: &[Mutation],
    family_type: FamilyTypes<'_>,
) -> Result<()> {
    check_row_key(row_key)?;
    check_mutation_count(mutations.len())?;
    let mut checked: Option<(&str, Option<bool>)> = None;
    for m in mutations {
        let Some((family, aggregate, what)) = check_cell_part(m)? else {
            continue;
        };
        if checked != Some((family, aggregate)) {
            check_family(table, family, family_type, aggregate, what)?;
            checked = Some((family, aggregate));
        }
    }
    Ok(())
}

/// Check the rules of a `read_modify_write_row` request.
pub fn check_read_modify_write(
    table: &str,
    row_key: &[u8],
    rules: &[ReadModifyWriteRule],
    family_type: FamilyTypes<'_>,
) -> Result<()> {
    check_row_key(row_key)?;
    check_mutation_count(rules.len())?;
    for rule in rules {
        check_qualifier(&rule.qualifier)?;
        check_family(
            table,
            &rule.family,
            family_type,
            Some(false),
            "ReadModifyWriteRow",
        )?;
    }
    Ok(())
}

/// Check a `check_and_mutate_row` request: each branch within the limits and
/// valid, and at least one mutation over both branches (as Bigtable asks).
pub fn check_check_and_mutate(
    table: &str,
    row_key: &[u8],
    true_mutations: &[Mutation],
    false_mutations: &[Mutation],
    family_type: FamilyTypes<'_>,
) -> Result<()> {
    check_row_key(row_key)?;
    check_mutation_count(true_mutations.len() + false_mutations.len())?;
    for branch in [true_mutations, false_mutations] {
        if branch.len() > MAX_MUTATIONS_PER_REQUEST {
            return Err(Error::TooManyMutations {
                count: branch.len(),
            });
        }
        for m in branch {
            check_mutation(m, table, family_type)?;
        }
    }
    Ok(())
}

/// Check what fails a whole `mutate_rows` request: no entries, or more than
/// 100,000 mutations summed over the entries. Each entry is then checked on
/// its own with [`check_row_mutations`] and fails alone.
pub fn check_mutate_rows(entries: &[RowMutations]) -> Result<()> {
    if entries.is_empty() {
        return Err(Error::NoMutations);
    }
    let total: usize = entries.iter().map(|e| e.mutations.len()).sum();
    if total > MAX_MUTATIONS_PER_REQUEST {
        return Err(Error::TooManyMutations { count: total });
    }
    Ok(())
}

fn bound_key(bound: &Bound<bytes::Bytes>) -> Option<&[u8]> {
    match bound {
        Bound::Included(k) | Bound::Excluded(k) if !k.is_empty() => Some(k.as_ref()),
        _ => None,
    }
}

/// Check a row range as Bigtable does: when both ends are set, the start key
/// must not sort after the end key (equal keys are a valid, possibly empty,
/// range). An empty key on either side means "unbounded".
pub fn check_row_range(range: &RowRange) -> Result<()> {
    if let (Some(start), Some(end)) = (bound_key(&range.start), bound_key(&range.end)) {
        if start > end {
            return Err(Error::InvalidRowRange {
                reason: format!(
                    "start key {:?} sorts after end key {:?}",
                    String::from_utf8_lossy(start),
                    String::from_utf8_lossy(end)
                ),
            });
        }
    }
    Ok(())
}

/// Check every range of a row set.
pub fn check_row_set(rows: &RowSet) -> Result<()> {
    rows.ranges.iter().try_for_each(check_row_range)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::TimestampRange;

    #[test]
    fn delete_ranges_must_not_be_empty_or_inverted() {
        let has = |_: &str| Some(FamilyType::Standard);
        let del = |s, e| Mutation::DeleteFromColumn {
            family: "f".into(),
            qualifier: bytes::Bytes::new(),
            time_range: TimestampRange::new(s, e),
        };
        assert!(check_mutation(&del(1000, 2000), "t", &has).is_ok());
        assert!(check_mutation(&del(1000, 0), "t", &has).is_ok());
        assert!(check_mutation(&del(2000, 2000), "t", &has).is_err());
        assert!(check_mutation(&del(3000, 2000), "t", &has).is_err());
        assert!(check_mutation(&del(1500, 2000), "t", &has).is_err());
    }

    #[test]
    fn row_ranges() {
        assert!(check_row_range(&RowRange::closed_open("a", "b")).is_ok());
        assert!(check_row_range(&RowRange::closed_open("a", "a")).is_ok());
        assert!(matches!(
            check_row_range(&RowRange::closed_open("b", "a")),
            Err(Error::InvalidRowRange { .. })
        ));
        assert!(check_row_range(&RowRange::closed_open("b", "")).is_ok());
    }

    #[test]
    fn check_and_mutate_needs_one_mutation() {
        let has = |_: &str| Some(FamilyType::Standard);
        let set = Mutation::set_cell("f", "q", 1000, "v");
        assert_eq!(
            check_check_and_mutate("t", b"k", &[], &[], &has),
            Err(Error::NoMutations)
        );
        assert!(check_check_and_mutate("t", b"k", &[], std::slice::from_ref(&set), &has).is_ok());
        let bad = Mutation::set_cell("f", "q", 1500, "v");
        assert!(check_check_and_mutate("t", b"k", &[set], &[bad], &has).is_err());
    }
}
