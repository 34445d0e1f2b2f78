//! `affinity table`: a `cbt`-like look inside any backend.

use std::io::Write;
use std::ops::Bound;
use std::time::Duration;

use affinity_model::{
    Bytes, GcRule, Mutation, ReadRowsRequest, Row, RowFilter, RowRange, RowSet, TableSpec,
};
use anyhow::{bail, Context};

use crate::backend::BackendArgs;

#[derive(clap::Args)]
pub struct TableArgs {
    #[command(subcommand)]
    command: TableCommand,
}

#[derive(clap::Subcommand)]
enum TableCommand {
    /// Create a table. GC rules: `maxversions=N`, `maxage=90d` (s, m, h, d),
    /// `never`, combined with ` or ` (union) or ` and ` (intersection),
    /// e.g. `--family 'e:maxage=90d or maxversions=3'`.
    Create {
        table: String,
        /// A column family, `NAME[:GC]`; repeat for several.
        #[arg(long = "family", value_name = "NAME[:GC]")]
        families: Vec<String>,
    },
    /// List tables.
    Ls,
    /// Show a table's families and GC rules.
    Families { table: String },
    /// Write cells to one row (one atomic mutation).
    Set {
        table: String,
        row: String,
        /// `FAMILY:QUALIFIER=VALUE`, repeatable.
        #[arg(required = true, value_name = "FAMILY:QUALIFIER=VALUE")]
        cells: Vec<String>,
        /// Cell timestamp in microseconds (a multiple of 1000); default: server time.
        #[arg(long)]
        timestamp: Option<i64>,
    },
    /// Read rows, printed like `cbt read`.
    Read {
        table: String,
        /// Only rows whose key starts with this prefix.
        #[arg(long, conflicts_with_all = ["start", "end"])]
        prefix: Option<String>,
        /// First row key (inclusive).
        #[arg(long)]
        start: Option<String>,
        /// Last row key (exclusive).
        #[arg(long)]
        end: Option<String>,
        /// Only cells whose qualifier fully matches this RE2 regex.
        #[arg(long)]
        qualifier_regex: Option<String>,
        /// Only the newest N cells of each column.
        #[arg(long)]
        versions: Option<u32>,
        /// At most N rows.
        #[arg(long)]
        limit: Option<u64>,
        /// Descending key order.
        #[arg(long)]
        reversed: bool,
    },
    /// Count rows.
    Count { table: String },
    /// Delete one row.
    DeleteRow { table: String, row: String },
    /// Delete a table and all its data.
    Delete { table: String },
    /// Print the split points `sample_row_keys` returns.
    Sample { table: String },
}

pub fn run(args: TableArgs, backend: &BackendArgs) -> anyhow::Result<()> {
    let store = backend.open()?;
    let mut out = std::io::stdout().lock();
    match args.command {
        TableCommand::Create { table, families } => {
            let mut spec = TableSpec::new();
            for family in &families {
                let (name, gc) = match family.split_once(':') {
                    Some((name, gc)) => (name, parse_gc_rule(gc)?),
                    None => (family.as_str(), GcRule::None),
                };
                spec = spec.with_family(name, gc);
            }
            store.create_table(&table, &spec)?;
            writeln!(out, "created table {table} ({})", backend.describe())?;
        }
        TableCommand::Ls => {
            for table in store.list_tables()? {
                writeln!(out, "{table}")?;
            }
        }
        TableCommand::Families { table } => {
            let spec = store.table_spec(&table)?;
            writeln!(out, "{:<24} GC rule", "family")?;
            for (name, family) in &spec.families {
                writeln!(out, "{name:<24} {}", format_gc_rule(&family.gc_rule))?;
            }
        }
        TableCommand::Set {
            table,
            row,
            cells,
            timestamp,
        } => {
            let ts = timestamp.unwrap_or(affinity_model::SERVER_TIME);
            let mutations = cells
                .iter()
                .map(|cell| parse_set_cell(cell, ts))
                .collect::<anyhow::Result<Vec<_>>>()?;
            store
                .open_table(&table)?
                .mutate_row(row.as_bytes(), &mutations)?;
        }
        TableCommand::Read {
            table,
            prefix,
            start,
            end,
            qualifier_regex,
            versions,
            limit,
            reversed,
        } => {
            let range = match (prefix, start, end) {
                (Some(p), _, _) => Some(RowRange::prefix(p)),
                (None, None, None) => None,
                (None, start, end) => Some(RowRange {
                    start: start.map_or(Bound::Unbounded, |s| Bound::Included(Bytes::from(s))),
                    end: end.map_or(Bound::Unbounded, |e| Bound::Excluded(Bytes::from(e))),
                }),
            };
            let mut filters = Vec::new();
            if let Some(re) = qualifier_regex {
                filters.push(RowFilter::ColumnQualifierRegex(Bytes::from(re)));
            }
            if let Some(n) = versions {
                filters.push(RowFilter::CellsPerColumnLimit(n));
            }
            let request = ReadRowsRequest {
                rows: range.map_or_else(RowSet::all, RowSet::from_range),
                filter: (!filters.is_empty()).then(|| RowFilter::chain(filters)),
                rows_limit: limit,
                reversed,
            };
            let table = store.open_table(&table)?;
            for row in table.read_rows(&request)? {
                print_row(&mut out, &row?)?;
            }
        }
        TableCommand::Count { table } => {
            let request = ReadRowsRequest::all().with_filter(RowFilter::chain(vec![
                RowFilter::CellsPerRowLimit(1),
                RowFilter::StripValue,
            ]));
            let mut count = 0u64;
            for row in store.open_table(&table)?.read_rows(&request)? {
                row?;
                count += 1;
            }
            writeln!(out, "{count}")?;
        }
        TableCommand::DeleteRow { table, row } => {
            store
                .open_table(&table)?
                .mutate_row(row.as_bytes(), &[Mutation::DeleteFromRow])?;
        }
        TableCommand::Delete { table } => {
            store.delete_table(&table)?;
            writeln!(out, "deleted table {table}")?;
        }
        TableCommand::Sample { table } => {
            writeln!(out, "{:<40} offset_bytes", "row_key")?;
            for sample in store.open_table(&table)?.sample_row_keys()? {
                let key = if sample.row_key.is_empty() {
                    "(end of table)".to_string()
                } else {
                    quote_bytes(&sample.row_key)
                };
                writeln!(out, "{key:<40} {}", sample.offset_bytes)?;
            }
        }
    }
    Ok(())
}

/// `FAMILY:QUALIFIER=VALUE` -> SetCell.
fn parse_set_cell(spec: &str, timestamp_micros: i64) -> anyhow::Result<Mutation> {
    let (column, value) = spec
        .split_once('=')
        .with_context(|| format!("cell {spec:?} must be FAMILY:QUALIFIER=VALUE"))?;
    let (family, qualifier) = column
        .split_once(':')
        .with_context(|| format!("cell {spec:?} must be FAMILY:QUALIFIER=VALUE"))?;
    Ok(Mutation::set_cell(
        family.to_string(),
        Bytes::copy_from_slice(qualifier.as_bytes()),
        timestamp_micros,
        Bytes::copy_from_slice(value.as_bytes()),
    ))
}

/// Parse a GC rule: `never`, `maxversions=N`, `maxage=DURATION`, joined by
/// ` or ` (union) or ` and ` (intersection), not both.
pub fn parse_gc_rule(spec: &str) -> anyhow::Result<GcRule> {
    let spec = spec.trim();
    let has_or = spec.contains(" or ") || spec.contains("||");
    let has_and = spec.contains(" and ") || spec.contains("&&");
    if has_or && has_and {
        bail!("GC rule {spec:?} mixes 'or' and 'and'; use one of them");
    }
    let parts: Vec<&str> = spec
        .split(" or ")
        .flat_map(|p| p.split("||"))
        .flat_map(|p| p.split(" and "))
        .flat_map(|p| p.split("&&"))
        .map(str::trim)
        .collect();
    let rules = parts
        .iter()
        .map(|p| parse_gc_atom(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(match (rules.len(), has_or) {
        (1, _) => rules.into_iter().next().unwrap_or_default(),
        (_, true) => GcRule::Union(rules),
        (_, false) => GcRule::Intersection(rules),
    })
}

fn parse_gc_atom(atom: &str) -> anyhow::Result<GcRule> {
    if atom == "never" {
        return Ok(GcRule::None);
    }
    if let Some(n) = atom.strip_prefix("maxversions=") {
        let n: u32 = n
            .parse()
            .with_context(|| format!("maxversions must be a positive integer, got {n:?}"))?;
        return Ok(GcRule::MaxVersions(n));
    }
    if let Some(age) = atom.strip_prefix("maxage=") {
        return Ok(GcRule::MaxAge(parse_duration(age)?));
    }
    bail!("unknown GC rule {atom:?}: expected never, maxversions=N or maxage=DURATION")
}

/// `90d`, `12h`, `30m`, `45s`, `500ms`.
pub fn parse_duration(text: &str) -> anyhow::Result<Duration> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .with_context(|| format!("duration {text:?} needs a unit (ms, s, m, h, d)"))?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .with_context(|| format!("duration {text:?} must start with a number"))?;
    let secs = match unit {
        "ms" => return Ok(Duration::from_millis(n)),
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86_400,
        _ => bail!("duration {text:?} has unknown unit {unit:?} (ms, s, m, h, d)"),
    };
    Ok(Duration::from_secs(secs))
}

fn format_gc_rule(rule: &GcRule) -> String {
    let join = |rules: &[GcRule], sep: &str| {
        rules
            .iter()
            .map(format_gc_rule)
            .collect::<Vec<_>>()
            .join(sep)
    };
    match rule {
        GcRule::None => "never".to_string(),
        GcRule::MaxVersions(n) => format!("maxversions={n}"),
        GcRule::MaxAge(d) => format!("maxage={}", format_duration(*d)),
        GcRule::Union(rules) => format!("({})", join(rules, " or ")),
        GcRule::Intersection(rules) => format!("({})", join(rules, " and ")),
    }
}

/// The inverse of [`parse_duration`], in the largest unit that is exact.
fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    let units = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1000, "s"),
    ];
    for (size, unit) in units {
        if ms >= size && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// Print a row the way `cbt read` does.
fn print_row(out: &mut impl Write, row: &Row) -> std::io::Result<()> {
    writeln!(out, "{}", "-".repeat(40))?;
    writeln!(out, "{}", String::from_utf8_lossy(&row.key))?;
    for cell in &row.cells {
        let column = format!(
            "{}:{}",
            cell.family,
            String::from_utf8_lossy(&cell.qualifier)
        );
        let labels = if cell.labels.is_empty() {
            String::new()
        } else {
            format!(" [{}]", cell.labels.join(","))
        };
        writeln!(
            out,
            "  {column:<40} @ {}{labels}",
            format_cbt_time(cell.timestamp_micros)
        )?;
        writeln!(out, "    {}", quote_bytes(&cell.value))?;
    }
    Ok(())
}

/// Quote bytes like Go's `%q`: printable ASCII as is, the rest escaped.
fn quote_bytes(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() + 2);
    s.push('"');
    for &b in bytes {
        match b {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push('"');
    s
}

/// `YYYY/MM/DD-HH:MM:SS.ffffff` in UTC, as `cbt` prints cell timestamps.
fn format_cbt_time(micros: i64) -> String {
    match affinity_rowkey::time::format_millis(micros.div_euclid(1000)) {
        // `YYYY-MM-DDTHH:MM:SS.mmmZ`
        Ok(iso) => format!(
            "{}/{}/{}-{}{:03}",
            &iso[0..4],
            &iso[5..7],
            &iso[8..10],
            &iso[11..23],
            micros.rem_euclid(1000)
        ),
        Err(_) => format!("{micros}us"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gc_rules_parse() {
        assert_eq!(
            parse_gc_rule("maxversions=3").unwrap(),
            GcRule::MaxVersions(3)
        );
        assert_eq!(
            parse_gc_rule("maxage=90d or maxversions=2").unwrap(),
            GcRule::Union(vec![
                GcRule::MaxAge(Duration::from_secs(90 * 86_400)),
                GcRule::MaxVersions(2)
            ])
        );
        assert_eq!(
            parse_gc_rule("maxage=1h && maxversions=1").unwrap(),
            GcRule::Intersection(vec![
                GcRule::MaxAge(Duration::from_secs(3600)),
                GcRule::MaxVersions(1)
            ])
        );
        assert!(parse_gc_rule("maxage=1h or maxversions=1 and never").is_err());
        assert!(parse_gc_rule("maxage=10").is_err());
        assert!(parse_gc_rule("maxversions=x").is_err());
        for text in ["90d", "12h", "30m", "45s", "1500ms"] {
            assert_eq!(format_duration(parse_duration(text).unwrap()), text);
        }
    }

    #[test]
    fn cbt_time_format() {
        assert_eq!(format_cbt_time(0), "1970/01/01-00:00:00.000000");
        assert_eq!(
            format_cbt_time(1_716_254_135_000_000),
            "2024/05/21-01:15:35.000000"
        );
        assert_eq!(
            format_cbt_time(1_716_254_135_123_456),
            "2024/05/21-01:15:35.123456"
        );
    }

    #[test]
    fn set_cell_parse() {
        let m = parse_set_cell("e:brand=Apple=1", 1000).unwrap();
        assert_eq!(m, Mutation::set_cell("e", "brand", 1000, "Apple=1"));
        assert!(parse_set_cell("brand=Apple", 1000).is_err());
    }
}
