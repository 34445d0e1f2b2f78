//! The on-disk key encoding: one RocksDB key per cell.
//!
//! ```text
//! cell key = esc(row key) 00 01 | family id (u32 BE) | esc(qualifier) 00 01 | !timestamp (u64 BE)
//! esc(x)   = x with every 00 byte written as 00 FF
//! ```
//!
//! Escaping keeps byte order and makes each component self-delimiting: the
//! terminator `00 01` sorts below any continuation (`00 FF` or a non-zero
//! byte), so a key sorts before every key it is a prefix of. The inverted
//! timestamp puts the newest version of a column first. Keys therefore sort
//! as the tuple `(row key, family id, qualifier, timestamp descending)`.

use memchr::memchr;

/// Terminator of an escaped component.
const TERMINATOR: [u8; 2] = [0x00, 0x01];
/// Second byte of an escaped `00`.
const ESCAPED_ZERO: u8 = 0xFF;
/// Bytes taken by the family id.
pub(crate) const FAMILY_ID_LEN: usize = 4;
/// Bytes taken by the inverted timestamp.
pub(crate) const TIMESTAMP_LEN: usize = 8;

/// Append `raw` escaped and terminated.
pub(crate) fn push_escaped(out: &mut Vec<u8>, raw: &[u8]) {
    let mut rest = raw;
    while let Some(zero) = memchr(0, rest) {
        out.extend_from_slice(&rest[..zero]);
        out.extend_from_slice(&[0x00, ESCAPED_ZERO]);
        rest = &rest[zero + 1..];
    }
    out.extend_from_slice(rest);
    out.extend_from_slice(&TERMINATOR);
}

/// Append the unescaped form of `escaped` (an escaped component without its
/// terminator).
pub(crate) fn push_unescaped(out: &mut Vec<u8>, escaped: &[u8]) {
    let mut rest = escaped;
    while let Some(zero) = memchr(0, rest) {
        out.extend_from_slice(&rest[..=zero]);
        // Skip the 0xFF that follows an escaped zero.
        rest = rest.get(zero + 2..).unwrap_or(&[]);
    }
    out.extend_from_slice(rest);
}

/// Length of the escaped component at the start of `input`, terminator
/// included, or `None` when it is not terminated.
pub(crate) fn component_len(input: &[u8]) -> Option<usize> {
    let mut from = 0;
    loop {
        let zero = from + memchr(0, &input[from..])?;
        match input.get(zero + 1) {
            Some(&0x01) => return Some(zero + 2),
            Some(&ESCAPED_ZERO) => from = zero + 2,
            _ => return None,
        }
    }
}

/// The encoded prefix shared by every cell of a row.
pub(crate) fn row_prefix(row_key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(row_key.len() + 2);
    push_escaped(&mut out, row_key);
    out
}

/// The smallest encoded key after every key starting with the terminated
/// component `prefix` (its terminator `00 01` becomes `00 02`).
pub(crate) fn component_successor(prefix: &[u8]) -> Vec<u8> {
    let mut out = prefix.to_vec();
    if let Some(last) = out.last_mut() {
        *last += 1;
    }
    out
}

/// The encoded prefix of a family within a row.
pub(crate) fn family_prefix(row_prefix: &[u8], family_id: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(row_prefix.len() + FAMILY_ID_LEN);
    out.extend_from_slice(row_prefix);
    out.extend_from_slice(&family_id.to_be_bytes());
    out
}

/// The end (exclusive) of a family's keys within a row.
pub(crate) fn family_end(row_prefix: &[u8], family_id: u32) -> Vec<u8> {
    match family_id.checked_add(1) {
        Some(next) => family_prefix(row_prefix, next),
        None => component_successor(row_prefix),
    }
}

/// The encoded prefix of a column within a row.
pub(crate) fn column_prefix(row_prefix: &[u8], family_id: u32, qualifier: &[u8]) -> Vec<u8> {
    let mut out = family_prefix(row_prefix, family_id);
    push_escaped(&mut out, qualifier);
    out
}

/// Append the full key of a cell given its column prefix.
pub(crate) fn push_timestamp(out: &mut Vec<u8>, timestamp_micros: i64) {
    // Timestamps are validated >= 0, so the cast keeps their order.
    out.extend_from_slice(&(!(timestamp_micros as u64)).to_be_bytes());
}

/// Write the key of a cell into `out` (cleared first).
pub(crate) fn encode_cell_key(
    out: &mut Vec<u8>,
    row_prefix: &[u8],
    family_id: u32,
    qualifier: &[u8],
    timestamp_micros: i64,
) {
    out.clear();
    out.extend_from_slice(row_prefix);
    out.extend_from_slice(&family_id.to_be_bytes());
    push_escaped(out, qualifier);
    push_timestamp(out, timestamp_micros);
}

/// The parts of a cell key, borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CellKey<'a> {
    /// Escaped row key with its terminator.
    pub row_prefix: &'a [u8],
    pub family_id: u32,
    /// Escaped qualifier, without its terminator.
    pub qualifier: &'a [u8],
    pub timestamp_micros: i64,
}

/// Decode a cell key whose row prefix is already known to be
/// `row_prefix_len` bytes long. `None` when the key is malformed.
pub(crate) fn decode_after_row(key: &[u8], row_prefix_len: usize) -> Option<CellKey<'_>> {
    let (row_prefix, rest) = key.split_at_checked(row_prefix_len)?;
    let (family, rest) = rest.split_first_chunk::<FAMILY_ID_LEN>()?;
    let (qualifier_part, timestamp) = rest.split_last_chunk::<TIMESTAMP_LEN>()?;
    let qualifier = qualifier_part.strip_suffix(&TERMINATOR)?;
    Some(CellKey {
        row_prefix,
        family_id: u32::from_be_bytes(*family),
        qualifier,
        timestamp_micros: !u64::from_be_bytes(*timestamp) as i64,
    })
}

/// Decode a cell key. `None` when the key is malformed.
pub(crate) fn decode_cell_key(key: &[u8]) -> Option<CellKey<'_>> {
    decode_after_row(key, component_len(key)?)
}

/// RocksDB prefix extractor: a key's row prefix (used by prefix bloom filters).
pub(crate) fn row_prefix_of(key: &[u8]) -> &[u8] {
    match component_len(key) {
        Some(len) => &key[..len],
        None => key,
    }
}

/// RocksDB prefix extractor domain: keys that contain a terminated row key.
pub(crate) fn has_row_prefix(key: &[u8]) -> bool {
    component_len(key).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn encode(row: &[u8], family: u32, qualifier: &[u8], ts: i64) -> Vec<u8> {
        let mut out = Vec::new();
        encode_cell_key(&mut out, &row_prefix(row), family, qualifier, ts);
        out
    }

    fn unescape(escaped: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        push_unescaped(&mut out, escaped);
        out
    }

    #[test]
    fn zero_bytes_are_escaped_and_restored() {
        let key = encode(b"a\x00b", 7, b"\x00", 5_000);
        let cell = decode_cell_key(&key).expect("well-formed key");
        assert_eq!(cell.row_prefix, b"a\x00\xffb\x00\x01");
        assert_eq!(
            unescape(&cell.row_prefix[..cell.row_prefix.len() - 2]),
            b"a\x00b"
        );
        assert_eq!(cell.family_id, 7);
        assert_eq!(unescape(cell.qualifier), b"\x00");
        assert_eq!(cell.timestamp_micros, 5_000);
    }

    #[test]
    fn truncated_keys_do_not_decode() {
        let key = encode(b"row", 1, b"q", 1_000);
        for len in 0..key.len() {
            assert_eq!(decode_cell_key(&key[..len]), None, "prefix of length {len}");
        }
        assert_eq!(decode_cell_key(b"row\x00\x07"), None);
    }

    #[test]
    fn row_successor_bounds_exactly_the_row() {
        let prefix = row_prefix(b"ab");
        let end = component_successor(&prefix);
        assert!(encode(b"ab", u32::MAX, b"\xff\xff", 0) < end);
        assert!(encode(b"ab\x00", 0, b"", i64::MAX) >= end);
        assert!(encode(b"ab\x01", 0, b"", i64::MAX) >= end);
        assert!(encode(b"a", 0, b"", 0) < prefix);
    }

    #[test]
    fn family_end_covers_the_last_family_id() {
        let prefix = row_prefix(b"r");
        assert!(encode(b"r", u32::MAX, b"q", 0) < family_end(&prefix, u32::MAX));
        assert!(encode(b"r", 3, b"\xff", 0) < family_end(&prefix, 3));
        assert!(encode(b"r", 4, b"", i64::MAX) >= family_end(&prefix, 3));
    }

    type Tuple = (Vec<u8>, u32, Vec<u8>, i64);

    fn tuple() -> impl Strategy<Value = Tuple> {
        let bytes = || {
            proptest::collection::vec(
                prop_oneof![Just(0u8), Just(1), Just(0xff), any::<u8>()],
                0..6,
            )
        };
        (bytes(), 0u32..4, bytes(), 0i64..5)
    }

    proptest! {
        #[test]
        fn keys_sort_like_tuples_with_timestamp_descending(a in tuple(), b in tuple()) {
            let ka = encode(&a.0, a.1, &a.2, a.3);
            let kb = encode(&b.0, b.1, &b.2, b.3);
            let ta = (&a.0, a.1, &a.2, std::cmp::Reverse(a.3));
            let tb = (&b.0, b.1, &b.2, std::cmp::Reverse(b.3));
            prop_assert_eq!(ka.cmp(&kb), ta.cmp(&tb));
        }

        #[test]
        fn decode_inverts_encode(t in tuple()) {
            let key = encode(&t.0, t.1, &t.2, t.3);
            let cell = decode_cell_key(&key).expect("well-formed key");
            prop_assert_eq!(unescape(&cell.row_prefix[..cell.row_prefix.len() - 2]), t.0.clone());
            prop_assert_eq!(cell.family_id, t.1);
            prop_assert_eq!(unescape(cell.qualifier), t.2);
            prop_assert_eq!(cell.timestamp_micros, t.3);
            let prefix = row_prefix(&t.0);
            prop_assert_eq!(row_prefix_of(&key), prefix.as_slice());
        }
    }
}
