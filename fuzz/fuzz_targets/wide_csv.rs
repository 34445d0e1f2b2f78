//! The CSV records of the wide schema's qualifiers and values
//! (`affinity_engine::csv`), read back from stored cells: any text decodes
//! to fields or `None`; the fast fixed-size decoder agrees with the general
//! one; fields encoded then decoded come back unchanged.
#![no_main]

use affinity_engine::csv::{decode, decode_n, encode};
use affinity_fuzz::Input;
use libfuzzer_sys::fuzz_target;

/// `decode_n::<N>` is `decode` limited to N fields.
fn agrees<const N: usize>(text: &str, general: &Option<Vec<String>>) {
    let fast = decode_n::<N>(text);
    match general {
        Some(fields) if fields.len() <= N => {
            let (got, n) = fast.expect("decode_n reads what decode reads");
            assert_eq!(n, fields.len());
            for (a, b) in got.iter().zip(fields) {
                assert_eq!(a, b);
            }
        }
        _ => assert!(fast.is_none(), "decode_n read what decode refuses"),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let text = input.text();
    let general = decode(&text);
    if let Some(fields) = &general {
        assert!(!fields.is_empty());
        assert_eq!(decode(&encode(fields)).as_ref(), Some(fields));
    }
    agrees::<3>(&text, &general);
    agrees::<4>(&text, &general);
    let mut fields = Vec::new();
    while !input.is_empty() && fields.len() < 8 {
        fields.push(input.text());
    }
    if fields.is_empty() {
        return;
    }
    let record = encode(&fields);
    assert_eq!(decode(&record), Some(fields.clone()), "{record:?}");
    agrees::<4>(&record, &Some(fields));
});
