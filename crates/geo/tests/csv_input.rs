//! CSV input: headers, quoting, measurements, and errors that name the line
//! and column; a load through the table keeps every measurement.

use affinity_geo::csv::{Columns, CsvPoints};
use affinity_geo::load::load_points;
use affinity_geo::{Error, Field, KeyKind, Point, PointLayout, PointTable};
use affinity_model::MemoryStore;
use affinity_rowkey::geo::TimeBin;
use affinity_rowkey::plan::{BBox, GeoQuery};

fn cols() -> Columns {
    Columns {
        id: "id".into(),
        time: "t".into(),
        lat: "lat".into(),
        lng: "lng".into(),
    }
}

fn read(text: &str) -> Result<Vec<(u64, Point)>, Error> {
    CsvPoints::new(text.as_bytes(), &cols())?.collect()
}

fn row_error(text: &str) -> (u64, String, String) {
    match read(text) {
        Err(Error::BadRow {
            line,
            column,
            reason,
        }) => (line, column, reason),
        other => panic!("expected a row error, got {other:?}"),
    }
}

#[test]
fn measurements_quotes_and_wrapping() {
    let text = "id,t,lat,lng,speed,name,empty\n\
                a,2020-06-30T00:00:00,40.5,-74.1,12.5,\"BIG, \"\"RED\"\" SHIP\",\n\
                \n\
                b,1593475200,1.5,-256.0,-0.25,\"two\nlines\",\n\
                c,1593475200000,-89,190,nan,x,\n";
    let rows = read(text).unwrap();
    assert_eq!(rows.len(), 3);
    let (line, a) = &rows[0];
    assert_eq!(*line, 2);
    assert_eq!(a.field("speed"), Some(&Field::Number(12.5)));
    assert_eq!(
        a.field("name"),
        Some(&Field::Text("BIG, \"RED\" SHIP".into()))
    );
    assert_eq!(a.field("empty"), None);
    assert_eq!(a.fields.len(), 2);
    let (line, b) = &rows[1];
    assert_eq!(*line, 4);
    assert_eq!(b.lng, 104.0);
    assert_eq!(b.field("name"), Some(&Field::Text("two\nlines".into())));
    assert_eq!(b.time_millis, a.time_millis);
    let (line, c) = &rows[2];
    assert_eq!(*line, 6, "line numbers count the line inside quotes");
    assert_eq!(c.lng, -170.0);
    assert_eq!(c.field("speed"), Some(&Field::Text("nan".into())));
}

#[test]
fn hash_header_split_by_spaces() {
    let text = "# id t lng lat\nx,2014-07-01 15:45:43-0000,28.8,40.9\n";
    let rows = read(text).unwrap();
    assert_eq!(rows[0].1.lat, 40.9);
    assert_eq!(rows[0].1.lng, 28.8);
    assert!(rows[0].1.fields.is_empty());
}

#[test]
fn header_errors() {
    for (text, needle) in [
        ("", "empty"),
        ("id,t,lat\n", "\"lng\""),
        ("id,t,lat,lng,lat\n", "appears twice"),
        ("id,t,,lat,lng\n", "column 3 has no name"),
    ] {
        match read(text) {
            Err(e @ Error::BadHeader { .. }) => {
                assert!(e.to_string().contains(needle), "{e}")
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
}

#[test]
fn row_errors_name_line_and_column() {
    let head = "id,t,lat,lng,v\n";
    let cases = [
        ("a,2020-06-30T00:00:00,91,0,1\n", "lat", "outside [-90, 90]"),
        (
            "a,2020-06-30T00:00:00,north,0,1\n",
            "lat",
            "\"north\" is not a number",
        ),
        (
            "a,2020-06-30T00:00:00,0,inf,1\n",
            "lng",
            "not a finite number",
        ),
        ("a,2020-06-31T00:00:00,0,0,1\n", "t", "2020-06-31"),
        ("a,1969-12-31T23:59:59Z,0,0,1\n", "t", "before 1970"),
        ("a,999999999999999,0,0,1\n", "t", "after the year 9999"),
        (",2020-06-30T00:00:00,0,0,1\n", "id", "id is empty"),
        (
            "a,2020-06-30T00:00:00,0,0\n",
            "",
            "has 4 fields, the header has 5",
        ),
        ("a,2020-06-30T00:00:00,0,0,\"open\n", "", "never closed"),
    ];
    for (row, column, needle) in cases {
        let text = format!("{head}b,2020-06-30T00:00:00,0,0,1\n{row}");
        let (line, col, reason) = row_error(&text);
        assert_eq!(line, 3, "{row}");
        assert_eq!(col, column, "{row}");
        assert!(reason.contains(needle), "{row}: {reason}");
        let message = read(&text).unwrap_err().to_string();
        assert!(message.starts_with("line 3, column"), "{message}");
    }
}

#[test]
fn load_keeps_measurements_and_reports_progress() {
    let mut text = String::from("id,t,lat,lng,temp,label\n");
    for i in 0..2500 {
        text.push_str(&format!(
            "s{},{},{},{},{}.5,L{}\n",
            i % 7,
            1_600_000_000 + i,
            10.0 + f64::from(i) * 1e-3,
            20.0,
            i,
            i
        ));
    }
    let store = MemoryStore::new();
    let layout = PointLayout::new(KeyKind::Hilbert, TimeBin::Day, 2).unwrap();
    let table = PointTable::create(&store, "pts", layout).unwrap();
    let mut seen = Vec::new();
    let n = load_points(
        &table,
        CsvPoints::new(text.as_bytes(), &cols()).unwrap(),
        |w| seen.push(w),
    )
    .unwrap();
    assert_eq!(n, 2500);
    assert_eq!(seen, vec![1000, 2000, 2500]);
    // Reopening finds the layout; a second create with another layout fails.
    let reopened = PointTable::open(&store, "pts").unwrap();
    assert_eq!(reopened.layout(), layout);
    let other = PointLayout::new(KeyKind::ZOrder, TimeBin::Day, 2).unwrap();
    assert!(PointTable::create(&store, "pts", other).is_err());
    let q = GeoQuery {
        bbox: BBox::new(19.9, 10.0, 20.1, 10.0995).unwrap(),
        from_millis: 1_600_000_000_000,
        to_millis: 1_600_000_050_000,
    };
    let (mut points, _) = reopened.query(&q).unwrap();
    points.sort_by_key(|p| p.time_millis);
    assert_eq!(points.len(), 50);
    assert_eq!(points[3].field("temp"), Some(&Field::Number(3.5)));
    assert_eq!(points[3].field("label"), Some(&Field::Text("L3".into())));
    assert_eq!(points[3].id, "s3");
}
