//! `affinity geo load`'s CSV (`affinity_geo::csv::CsvPoints`): a header
//! naming the columns, then one point per record. Any text gives points
//! or errors naming the line; each point's stored value decodes back to
//! the point, and any bytes given to the stored value's decoder
//! (`Point::decode_value`) decode or fail.
#![no_main]

use affinity_fuzz::Input;
use affinity_geo::csv::{Columns, CsvPoints};
use affinity_geo::point::Point;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    if let Ok(point) = Point::decode_value("id".into(), input.chunk(), b"key") {
        let again = point.encode_value().expect("a decoded point encodes");
        let back = Point::decode_value("id".into(), &again, b"key").expect("decodes");
        assert_eq!(back.encode_value().expect("encodes"), again);
    }
    // The column names of testdata/geo's two files, or short ones.
    let columns = match input.byte() % 3 {
        0 => Columns {
            id: "object_id".into(),
            time: "timestamp".into(),
            lat: "latitude".into(),
            lng: "longitude".into(),
        },
        1 => Columns {
            id: "MMSI".into(),
            time: "BaseDateTime".into(),
            lat: "LAT".into(),
            lng: "LON".into(),
        },
        _ => Columns {
            id: "id".into(),
            time: "time".into(),
            lat: "lat".into(),
            lng: "lng".into(),
        },
    };
    let Ok(points) = CsvPoints::new(input.rest(), &columns) else {
        return;
    };
    let mut last_line = 0;
    for item in points {
        let Ok((line, point)) = item else { continue };
        assert!(line > last_line, "lines go forward");
        last_line = line;
        assert!((-180.0..=180.0).contains(&point.lng), "{}", point.lng);
        assert!((-90.0..=90.0).contains(&point.lat), "{}", point.lat);
        let value = point.encode_value().expect("a loaded point encodes");
        let back = Point::decode_value(point.id.clone(), &value, b"key").expect("decodes");
        assert_eq!(back, point, "a point's stored value reads back differently");
    }
});
