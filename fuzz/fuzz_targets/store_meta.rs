//! The embedded store's table metadata decoder on bytes as a damaged
//! metadata column family gives them: an error naming the table, or
//! metadata that round-trips; a row is then decoded under it (its family
//! ids and GC rules as the damaged metadata says).
#![no_main]

use affinity_embedded::fuzzing::{check_meta, check_rows};
use affinity_fuzz::Input;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let meta = input.chunk();
    let row = input.rest();
    if let Ok(meta) = check_meta(meta) {
        check_rows(&meta, &[row], None, 10_000);
    }
});
