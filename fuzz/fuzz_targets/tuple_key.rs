//! The order-preserving tuple codec (`affinity_rowkey::tuple`): any bytes
//! decode to a tuple or an error; what decodes re-encodes to the same
//! bytes (one encoding per tuple); tuples made from the input round-trip,
//! their encodings compare as the tuples do, and `prefix_range` of a
//! prefix holds exactly the tuples that extend it.
#![no_main]

use affinity_fuzz::Input;
use affinity_rowkey::tuple::{decode, encode, prefix_range, Element};
use libfuzzer_sys::fuzz_target;

/// A tuple of at most 4 elements read from the input.
fn tuple(input: &mut Input<'_>) -> Vec<Element> {
    let n = input.byte() % 5;
    (0..n)
        .map(|_| match input.byte() % 4 {
            0 => Element::Bytes(input.chunk().to_vec()),
            1 => Element::Str(input.text()),
            2 => Element::U64(input.u64()),
            _ => Element::I64(input.i64()),
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let raw = input.chunk();
    if let Ok(t) = decode(raw) {
        assert_eq!(encode(&t), raw, "decoded bytes re-encode differently");
    }
    let a = tuple(&mut input);
    let b = tuple(&mut input);
    let (ea, eb) = (encode(&a), encode(&b));
    assert_eq!(decode(&ea).expect("an encoding decodes"), a);
    assert_eq!(decode(&eb).expect("an encoding decodes"), b);
    assert_eq!(
        ea.cmp(&eb),
        a.cmp(&b),
        "encoding order differs from tuple order"
    );
    let cut = usize::from(input.byte()) % (a.len() + 1);
    assert!(
        prefix_range(&a[..cut]).contains(&ea),
        "a tuple is outside its prefix's range"
    );
    assert_eq!(
        prefix_range(&a[..cut]).contains(&eb),
        b.starts_with(&a[..cut]),
        "a prefix's range holds exactly the tuples that extend it"
    );
});
