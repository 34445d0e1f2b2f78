//! The embedded store's merge operator on a stored row and merge operands
//! as a damaged file gives them: a full merge of a row that decodes writes
//! a row that decodes, a row that does not decode is never merged into a
//! shorter one, and combining operands first (RocksDB's partial merge)
//! changes nothing (`affinity_embedded::fuzzing::check_merge`).
#![no_main]

use affinity_embedded::fuzzing::{check_merge, sample_meta};
use affinity_fuzz::Input;
use libfuzzer_sys::fuzz_target;

const NOWS: [i64; 3] = [10_000, 4_000, 1_764_000_000_000_000];

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let now = NOWS[usize::from(input.byte()) % NOWS.len()];
    let existing = match input.byte() % 2 {
        0 => None,
        _ => Some(input.chunk()),
    };
    let mut operands = Vec::new();
    while !input.is_empty() {
        operands.push(input.chunk());
    }
    check_merge(&sample_meta(), existing, &operands, now);
});
