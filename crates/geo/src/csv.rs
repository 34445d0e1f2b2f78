//! CSV input: a header row naming the columns, then one point per row.
//!
//! Fields are separated by commas and may be quoted (`"a, b"`, `""` for a
//! quote, line breaks inside quotes). A header line starting with `#` is
//! accepted, its names split by commas or, when it has none, by whitespace
//! (`# object_id timestamp longitude latitude`). Blank lines are skipped.
//!
//! The id, time, latitude and longitude columns are named by the caller;
//! every other column becomes a measurement of the point: a number when it
//! parses as a finite number, text otherwise, absent when empty. Longitudes
//! outside [-180, 180] (unwrapped tracks) are wrapped into it; a latitude
//! outside [-90, 90] is an error.

use std::io::BufRead;

use affinity_rowkey::time::{parse_time, MAX_MILLIS};

use crate::error::{Error, Result};
use crate::point::{Field, Point, MAX_NAME_BYTES};

/// The columns that make a point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Columns {
    pub id: String,
    pub time: String,
    pub lat: String,
    pub lng: String,
}

/// A streaming reader of points from CSV text; yields `(line, point)`.
pub struct CsvPoints<R> {
    input: R,
    header: Vec<String>,
    id: usize,
    time: usize,
    lat: usize,
    lng: usize,
    line: u64,
    buf: String,
}

/// Split one CSV record starting with `first`, reading more lines from
/// `input` while a quote is open. Returns the fields and the lines used.
fn split_record<R: BufRead>(
    first: &str,
    input: &mut R,
    start_line: u64,
) -> Result<(Vec<String>, u64)> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut text = first.trim_end_matches(['\n', '\r']).to_string();
    let mut lines = 1;
    let mut chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    loop {
        if i == chars.len() {
            if !quoted {
                fields.push(std::mem::take(&mut field));
                return Ok((fields, lines));
            }
            let mut more = String::new();
            let n = input.read_line(&mut more).map_err(|e| Error::Io {
                what: "csv input".into(),
                reason: e.to_string(),
            })?;
            if n == 0 {
                return Err(Error::BadRow {
                    line: start_line,
                    column: String::new(),
                    reason: "has a quote that is never closed".into(),
                });
            }
            field.push('\n');
            text = more.trim_end_matches(['\n', '\r']).to_string();
            chars = text.chars().collect();
            i = 0;
            lines += 1;
            continue;
        }
        let c = chars[i];
        i += 1;
        match (quoted, c) {
            (true, '"') if chars.get(i) == Some(&'"') => {
                field.push('"');
                i += 1;
            }
            (true, '"') => quoted = false,
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => fields.push(std::mem::take(&mut field)),
            (_, c) => field.push(c),
        }
    }
}

impl<R: BufRead> CsvPoints<R> {
    /// Read the header and find the point's columns.
    pub fn new(mut input: R, columns: &Columns) -> Result<CsvPoints<R>> {
        let mut line = 0;
        let mut buf = String::new();
        let header = loop {
            buf.clear();
            let n = input.read_line(&mut buf).map_err(|e| Error::Io {
                what: "csv header".into(),
                reason: e.to_string(),
            })?;
            line += 1;
            if n == 0 {
                return Err(Error::BadHeader {
                    reason: "the input is empty".into(),
                });
            }
            let text = buf.trim_start_matches('\u{feff}').trim();
            if text.is_empty() {
                continue;
            }
            if let Some(rest) = text.strip_prefix('#') {
                let rest = rest.trim();
                break if rest.contains(',') {
                    rest.split(',').map(|s| s.trim().to_string()).collect()
                } else {
                    rest.split_whitespace().map(str::to_string).collect()
                };
            }
            let (names, used) = split_record(text, &mut input, line)?;
            line += used - 1;
            break names
                .into_iter()
                .map(|s| s.trim().to_string())
                .collect::<Vec<_>>();
        };
        for (i, name) in header.iter().enumerate() {
            if name.is_empty() {
                return Err(Error::BadHeader {
                    reason: format!("column {} has no name", i + 1),
                });
            }
            if name.len() > MAX_NAME_BYTES {
                return Err(Error::BadHeader {
                    reason: format!("column name {name:?} is longer than {MAX_NAME_BYTES} bytes"),
                });
            }
            if header[..i].contains(name) {
                return Err(Error::BadHeader {
                    reason: format!("column {name:?} appears twice"),
                });
            }
        }
        let find = |flag: &str, name: &str| {
            header
                .iter()
                .position(|h| h == name)
                .ok_or_else(|| Error::BadHeader {
                    reason: format!(
                        "no column {name:?} (given by --{flag}); columns are {}",
                        header.join(", ")
                    ),
                })
        };
        let (id, time) = (find("id", &columns.id)?, find("time", &columns.time)?);
        let (lat, lng) = (find("lat", &columns.lat)?, find("lng", &columns.lng)?);
        Ok(CsvPoints {
            input,
            id,
            time,
            lat,
            lng,
            header,
            line,
            buf,
        })
    }

    /// Column names, in file order.
    pub fn header(&self) -> &[String] {
        &self.header
    }

    fn bad(&self, line: u64, column: usize, reason: String) -> Error {
        Error::BadRow {
            line,
            column: self.header[column].clone(),
            reason,
        }
    }

    fn coordinate(&self, line: u64, col: usize, text: &str, max: f64) -> Result<f64> {
        let v: f64 = text
            .trim()
            .parse()
            .map_err(|_| self.bad(line, col, format!("{text:?} is not a number")))?;
        if !v.is_finite() {
            return Err(self.bad(line, col, format!("{text:?} is not a finite number")));
        }
        if max == 90.0 && v.abs() > 90.0 {
            return Err(self.bad(line, col, format!("latitude {v} is outside [-90, 90]")));
        }
        if max == 180.0 && v.abs() > 180.0 {
            // Unwrapped track: bring it back into [-180, 180).
            return Ok((v + 180.0).rem_euclid(360.0) - 180.0);
        }
        Ok(v)
    }

    fn point(&self, line: u64, record: Vec<String>) -> Result<Point> {
        if record.len() != self.header.len() {
            return Err(Error::BadRow {
                line,
                column: String::new(),
                reason: format!(
                    "has {} fields, the header has {}",
                    record.len(),
                    self.header.len()
                ),
            });
        }
        let id = record[self.id].trim();
        if id.is_empty() {
            return Err(self.bad(line, self.id, "the id is empty".into()));
        }
        let time_millis =
            parse_time(&record[self.time]).map_err(|e| self.bad(line, self.time, e.to_string()))?;
        if time_millis < 0 {
            let reason = format!("{:?} is before 1970", record[self.time]);
            return Err(self.bad(line, self.time, reason));
        }
        if time_millis > MAX_MILLIS {
            let reason = format!("{:?} is after the year 9999", record[self.time]);
            return Err(self.bad(line, self.time, reason));
        }
        let lat = self.coordinate(line, self.lat, &record[self.lat], 90.0)?;
        let lng = self.coordinate(line, self.lng, &record[self.lng], 180.0)?;
        let mut fields = Vec::with_capacity(record.len() - 4);
        let id = id.to_string();
        for (i, value) in record.into_iter().enumerate() {
            if [self.id, self.time, self.lat, self.lng].contains(&i) || value.is_empty() {
                continue;
            }
            let field = match value.trim().parse::<f64>() {
                Ok(v) if v.is_finite() => Field::Number(v),
                _ => Field::Text(value),
            };
            fields.push((self.header[i].clone(), field));
        }
        Ok(Point {
            id,
            time_millis,
            lng,
            lat,
            fields,
        })
    }
}

impl<R: BufRead> Iterator for CsvPoints<R> {
    type Item = Result<(u64, Point)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            self.buf.clear();
            match self.input.read_line(&mut self.buf) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => {
                    return Some(Err(Error::Io {
                        what: format!("csv line {}", self.line + 1),
                        reason: e.to_string(),
                    }))
                }
            }
            self.line += 1;
            if self.buf.trim().is_empty() {
                continue;
            }
            let line = self.line;
            let first = std::mem::take(&mut self.buf);
            let record = split_record(&first, &mut self.input, line);
            self.buf = first;
            return Some(record.and_then(|(fields, used)| {
                self.line += used - 1;
                self.point(line, fields).map(|p| (line, p))
            }));
        }
    }
}
