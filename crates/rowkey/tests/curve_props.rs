//! Property tests of the curves: round trips, agreement with the textbook
//! algorithm at full resolution, and the Hilbert curve's continuity.

use affinity_rowkey::curve::{
    hilbert_decode, hilbert_encode, hilbert_encode_reference, zorder_decode, zorder_encode,
};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]

    #[test]
    fn hilbert_round_trips(x in any::<u32>(), y in any::<u32>()) {
        prop_assert_eq!(hilbert_decode(hilbert_encode(x, y)), (x, y));
    }

    #[test]
    fn hilbert_matches_the_textbook_loop(x in any::<u32>(), y in any::<u32>()) {
        prop_assert_eq!(hilbert_encode(x, y), hilbert_encode_reference(32, x, y));
    }

    #[test]
    fn hilbert_steps_are_unit_moves(i in 0..u64::MAX) {
        let (x0, y0) = hilbert_decode(i);
        let (x1, y1) = hilbert_decode(i + 1);
        prop_assert_eq!(x0.abs_diff(x1) + y0.abs_diff(y1), 1);
    }

    #[test]
    fn hilbert_prefix_is_the_coarse_cell(x in any::<u32>(), y in any::<u32>(), level in 1u32..32) {
        // The top 2*level bits of the index name the level's cell: cells of
        // every level are contiguous index ranges.
        let shift = 32 - level;
        let coarse = hilbert_encode((x >> shift) << shift, (y >> shift) << shift);
        prop_assert_eq!(hilbert_encode(x, y) >> (2 * shift), coarse >> (2 * shift));
    }

    #[test]
    fn zorder_round_trips_and_orders(x in any::<u32>(), y in any::<u32>()) {
        prop_assert_eq!(zorder_decode(zorder_encode(x, y)), (x, y));
        if x < u32::MAX {
            prop_assert!(zorder_encode(x + 1, y) > zorder_encode(x, y));
        }
    }
}
