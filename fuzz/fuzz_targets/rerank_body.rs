//! Re-ranking bodies (`POST /1/indexes/{indexName}/rerank`): the body's
//! own JSON scanner (`http/src/members.rs`) against serde_json. What the
//! scanner takes (members, hits, each value's text), serde_json must read
//! alike; text the scanner gives up on goes to serde_json anyway.
#![no_main]

use affinity_http::fuzzing::rerank_body;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(agrees) = rerank_body(data) {
        assert!(
            agrees,
            "the scanner and serde_json disagree on {:?}",
            String::from_utf8_lossy(data)
        );
    }
});
