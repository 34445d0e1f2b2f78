//! Loading a stream of points into a table in batches, with progress.

use crate::error::{Error, Result};
use crate::point::Point;
use crate::table::PointTable;

/// Points per `mutate_rows` call.
pub const BATCH: usize = 1000;

/// Write every point of `points` (`(line, point)` pairs, as
/// [`crate::csv::CsvPoints`] yields them) to `table`, calling `progress`
/// with the count written after each batch. Returns the count. Stops at the
/// first error; a row that cannot be keyed is reported with its line.
pub fn load_points<I>(table: &PointTable, points: I, mut progress: impl FnMut(u64)) -> Result<u64>
where
    I: IntoIterator<Item = Result<(u64, Point)>>,
{
    let mut batch = Vec::with_capacity(BATCH);
    let mut written = 0u64;
    for item in points {
        let (line, point) = item?;
        let entry = table.mutations(&point).map_err(|e| Error::BadRow {
            line,
            column: String::new(),
            reason: e.to_string(),
        })?;
        batch.push(entry);
        if batch.len() == BATCH {
            table.write_entries(&batch)?;
            written += batch.len() as u64;
            batch.clear();
            progress(written);
        }
    }
    if !batch.is_empty() {
        table.write_entries(&batch)?;
        written += batch.len() as u64;
        progress(written);
    }
    Ok(written)
}
