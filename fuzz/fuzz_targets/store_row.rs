//! The embedded store's row decoder on stored values as a damaged file
//! gives them: rows decoded one after another through a scan's memory of
//! row shapes, with each sample filter, and GC of each row. Decoding and
//! the ways of reading agree, or fail together with an error naming the
//! row (`affinity_embedded::fuzzing::check_rows`).
#![no_main]

use affinity_embedded::fuzzing::{check_rows, sample_filter, sample_meta};
use affinity_fuzz::Input;
use libfuzzer_sys::fuzz_target;

/// Clocks a read runs at (microseconds): near the seeds' timestamps, and
/// today.
const NOWS: [i64; 3] = [10_000, 4_000, 1_764_000_000_000_000];

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let filter = sample_filter(input.byte());
    let now = NOWS[usize::from(input.byte()) % NOWS.len()];
    let mut rows = Vec::new();
    while !input.is_empty() {
        rows.push(input.chunk());
    }
    check_rows(&sample_meta(), &rows, filter.as_ref(), now);
});
