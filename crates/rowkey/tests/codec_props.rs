//! Property tests of the key codecs: ordering, round trips, prefixes.

use affinity_rowkey::composite::EventKey;
use affinity_rowkey::time::{MAX_MILLIS, MIN_MILLIS};
use affinity_rowkey::tuple::{self, Element};
use proptest::prelude::*;

fn element() -> impl Strategy<Value = Element> {
    prop_oneof![
        // Bytes biased towards 0x00 and 0xFF, the escaping edge cases.
        prop::collection::vec(
            prop_oneof![Just(0u8), Just(0xFF), Just(1), any::<u8>()],
            0..6
        )
        .prop_map(Element::Bytes),
        "[a\\x00b\u{e9}]{0,5}".prop_map(Element::Str),
        prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>(), 0..300u64].prop_map(Element::U64),
        prop_oneof![
            Just(i64::MIN),
            Just(-1i64),
            Just(0),
            Just(i64::MAX),
            any::<i64>(),
            -300..300i64
        ]
        .prop_map(Element::I64),
    ]
}

fn tuple_strategy() -> impl Strategy<Value = Vec<Element>> {
    prop::collection::vec(element(), 0..5)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn tuple_keys_sort_like_tuples(a in tuple_strategy(), b in tuple_strategy()) {
        prop_assert_eq!(tuple::encode(&a).cmp(&tuple::encode(&b)), a.cmp(&b));
    }

    #[test]
    fn tuple_round_trips(t in tuple_strategy()) {
        prop_assert_eq!(tuple::decode(&tuple::encode(&t)).unwrap(), t);
    }

    #[test]
    fn tuple_prefix_is_key_prefix(t in tuple_strategy(), cut in 0usize..6, other in tuple_strategy()) {
        let cut = cut.min(t.len());
        let key = tuple::encode(&t);
        prop_assert!(key.starts_with(&tuple::encode(&t[..cut])));
        prop_assert!(tuple::prefix_range(&t[..cut]).contains(&key));
        // A tuple that does not extend the prefix is outside its range.
        let extends = other.len() >= cut && other[..cut] == t[..cut];
        prop_assert_eq!(tuple::prefix_range(&t[..cut]).contains(&tuple::encode(&other)), extends);
    }

    #[test]
    fn tuple_decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..40)) {
        let _ = tuple::decode(&bytes);
    }

    #[test]
    fn event_keys_sort_by_time_within_a_user(
        user in "[a-z0-9_-]{1,8}",
        a in MIN_MILLIS..=MAX_MILLIS,
        b in MIN_MILLIS..=MAX_MILLIS,
        ca in prop::collection::vec(any::<u8>(), 0..8),
        cb in prop::collection::vec(any::<u8>(), 0..8),
    ) {
        let ka = EventKey::for_event("app", &user, a, &ca).unwrap();
        let kb = EventKey::for_event("app", &user, b, &cb).unwrap();
        let (ea, eb) = (ka.encode().unwrap(), kb.encode().unwrap());
        if a != b {
            prop_assert_eq!(ea.cmp(&eb), a.cmp(&b));
        }
        prop_assert_eq!(ea == eb, a == b && ca == cb);
        prop_assert_eq!(EventKey::parse(&ea).unwrap(), ka);
    }
}
