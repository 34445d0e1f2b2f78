//! `affinity catalog load`'s JSON lines (`affinity_engine::catalog`): each
//! line parses to an object or an error; an object written back as JSON
//! (its stored form) reads back the same.
#![no_main]

use affinity_engine::catalog::CatalogObject;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for line in data.split(|&b| b == b'\n') {
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(line) else {
            continue;
        };
        if let Ok(object) = CatalogObject::from_json(&value) {
            let back = CatalogObject::from_json(&object.to_json()).expect("the stored form reads");
            assert_eq!(back, object, "the stored form reads back differently");
        }
    }
});
