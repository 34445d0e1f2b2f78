//! Named batch jobs (maintenance, rebuild): a named job stores its split
//! and the ranges it has finished in row `~job,<name>` of
//! `profiles.<app>` (no user token contains `~`), so N shard processes
//! share one split and a job restarted after a crash skips the ranges
//! already done. Redoing a range that was cut short never double counts: a
//! fold commits per user and skips users already folded, and a rebuild
//! writes only the state that is missing.
//!
//! The rows live in family [`JOBS_FAMILY`] (`b`), which nothing else
//! writes but the migration's checkpoint (`~migrate`). Stores written by
//! earlier versions may also hold rows `user` in it: the profiles their
//! batch recompute stored, before exports and rebuilds replaced it.
//! Nothing uses them now (reads and folds take the rows `user,!` and
//! `user,DAY`, exports the events table; a maintenance finds a user by
//! such a row alone, and nothing to fold); the family keeps one version
//! with no age limit, so they stay until the user's deletion removes them.

use affinity_model::{Mutation, RowFilter, RowRange};
use serde_json::Value;

use crate::engine::App;
use crate::error::{Error, Result};

/// The family of the rows of jobs and of a migration's checkpoint.
pub(crate) const JOBS_FAMILY: &str = "b";

fn job_row(name: &str) -> Result<Vec<u8>> {
    if name.is_empty() || name.len() > 200 {
        return Err(Error::InvalidArgument {
            name: "job",
            reason: format!("{name:?} must be 1 to 200 bytes"),
        });
    }
    Ok(format!("~job,{name}").into_bytes())
}

/// Delete the plan of job `name` (its split and finished ranges).
pub(crate) fn forget(app: &App, name: &str) -> Result<()> {
    app.profiles
        .mutate_row(&job_row(name)?, &[Mutation::DeleteFromRow])?;
    Ok(())
}

fn bound_key(bound: &std::ops::Bound<affinity_model::Bytes>) -> Value {
    match bound {
        std::ops::Bound::Included(k) | std::ops::Bound::Excluded(k) => {
            Value::from(String::from_utf8_lossy(k).into_owned())
        }
        std::ops::Bound::Unbounded => Value::Null,
    }
}

fn ranges_to_json(ranges: &[RowRange]) -> Value {
    Value::from(
        ranges
            .iter()
            .map(|r| Value::from(vec![bound_key(&r.start), bound_key(&r.end)]))
            .collect::<Vec<_>>(),
    )
}

fn ranges_from_json(value: &Value) -> Result<Vec<RowRange>> {
    let bad = || Error::corrupt("job split", value.to_string());
    let list = value.as_array().ok_or_else(bad)?;
    // `null` is an open end (a range from the table's first key, or to
    // its last).
    let bound = |v: Option<&Value>, included: bool| match v {
        Some(Value::Null) => Ok(std::ops::Bound::Unbounded),
        Some(Value::String(k)) => {
            let k = affinity_model::Bytes::from(k.clone());
            Ok(if included {
                std::ops::Bound::Included(k)
            } else {
                std::ops::Bound::Excluded(k)
            })
        }
        _ => Err(bad()),
    };
    list.iter()
        .map(|pair| {
            Ok(RowRange {
                start: bound(pair.get(0), true)?,
                end: bound(pair.get(1), false)?,
            })
        })
        .collect()
}

/// The job's split: the stored one, or `fresh` stored atomically by the
/// first process to get here.
pub(crate) fn plan(app: &App, name: &str, fresh: Vec<RowRange>) -> Result<Vec<RowRange>> {
    let row = job_row(name)?;
    let split = RowFilter::Chain(vec![
        RowFilter::exact_family(JOBS_FAMILY),
        RowFilter::exact_qualifier(b"split"),
        RowFilter::CellsPerColumnLimit(1),
    ]);
    let json = serde_json::to_vec(&ranges_to_json(&fresh))?;
    app.profiles.check_and_mutate_row(
        &row,
        Some(&split),
        &[],
        &[Mutation::set_cell(JOBS_FAMILY, "split", 0, json)],
    )?;
    let stored = app
        .profiles
        .read_row(&row, Some(&split))?
        .and_then(|r| r.cells.into_iter().next())
        .ok_or_else(|| Error::corrupt("job split", "missing after write"))?;
    ranges_from_json(&serde_json::from_slice(&stored.value)?)
}

/// Indexes of the job's finished ranges.
pub(crate) fn done(app: &App, name: &str) -> Result<std::collections::BTreeSet<usize>> {
    let filter = RowFilter::Chain(vec![
        RowFilter::exact_family(JOBS_FAMILY),
        RowFilter::CellsPerColumnLimit(1),
    ]);
    let mut out = std::collections::BTreeSet::new();
    if let Some(row) = app.profiles.read_row(&job_row(name)?, Some(&filter))? {
        for cell in row.cells {
            if let Some(i) = cell.qualifier.strip_prefix(b"done,") {
                let i = std::str::from_utf8(i).ok().and_then(|i| i.parse().ok());
                out.insert(
                    i.ok_or_else(|| Error::corrupt("job mark", format!("{:?}", cell.qualifier)))?,
                );
            }
        }
    }
    Ok(out)
}

/// Mark range `index` finished (after its work is written).
pub(crate) fn mark_done(app: &App, name: &str, index: usize) -> Result<()> {
    app.profiles.mutate_row(
        &job_row(name)?,
        &[Mutation::set_cell(
            JOBS_FAMILY,
            format!("done,{index}"),
            0,
            Vec::new(),
        )],
    )?;
    Ok(())
}
