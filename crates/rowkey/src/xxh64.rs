//! XXH64 (xxHash, 64-bit, seed 0): the stable hash behind salts and event
//! suffixes. It is a published, frozen algorithm with implementations in
//! every common language, so another program can compute the same salt.
//! Written out here (about 60 lines) to keep the dependency tree small; the
//! tests check it against the reference crate.

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

fn read_u64(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[..8]);
    // XXH64 reads its input as little-endian words by definition; this is
    // the hash's spec, not a key byte order.
    #[allow(clippy::little_endian_bytes)]
    u64::from_le_bytes(word)
}

fn read_u32(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[..4]);
    #[allow(clippy::little_endian_bytes)]
    u64::from(u32::from_le_bytes(word))
}

fn round(acc: u64, input: u64) -> u64 {
    acc.wrapping_add(input.wrapping_mul(P2))
        .rotate_left(31)
        .wrapping_mul(P1)
}

fn merge_round(acc: u64, val: u64) -> u64 {
    (acc ^ round(0, val)).wrapping_mul(P1).wrapping_add(P4)
}

/// XXH64 of `input` with seed 0.
pub fn xxh64(input: &[u8]) -> u64 {
    xxh64_with_seed(input, 0)
}

/// XXH64 of `input` with the given seed.
pub fn xxh64_with_seed(input: &[u8], seed: u64) -> u64 {
    let len = input.len();
    let mut rest = input;
    let mut h = if len >= 32 {
        let mut v = [
            seed.wrapping_add(P1).wrapping_add(P2),
            seed.wrapping_add(P2),
            seed,
            seed.wrapping_sub(P1),
        ];
        while rest.len() >= 32 {
            for (i, lane) in v.iter_mut().enumerate() {
                *lane = round(*lane, read_u64(&rest[i * 8..]));
            }
            rest = &rest[32..];
        }
        let mut h = v[0]
            .rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18));
        for lane in v {
            h = merge_round(h, lane);
        }
        h
    } else {
        seed.wrapping_add(P5)
    };
    h = h.wrapping_add(len as u64);
    while rest.len() >= 8 {
        h ^= round(0, read_u64(rest));
        h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
        rest = &rest[8..];
    }
    if rest.len() >= 4 {
        h ^= read_u32(rest).wrapping_mul(P1);
        h = h.rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
        rest = &rest[4..];
    }
    for &byte in rest {
        h ^= u64::from(byte).wrapping_mul(P5);
        h = h.rotate_left(11).wrapping_mul(P1);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^ (h >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_vectors() {
        assert_eq!(xxh64(b""), 0xEF46_DB37_51D8_E999);
        assert_eq!(xxh64(b"a"), 0xD24E_C4F1_A98C_6E5B);
        assert_eq!(xxh64(b"abc"), 0x44BC_2CF5_AD77_0999);
    }

    #[test]
    fn matches_the_reference_crate_at_every_length() {
        let data: Vec<u8> = (0..200u32).map(|i| (i * 31 + 7) as u8).collect();
        for len in 0..data.len() {
            for seed in [0u64, 1, 0x1234_5678_9abc_def0] {
                assert_eq!(
                    xxh64_with_seed(&data[..len], seed),
                    xxhash_rust::xxh64::xxh64(&data[..len], seed),
                    "len {len} seed {seed}"
                );
            }
        }
    }
}
