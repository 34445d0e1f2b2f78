//! The events row key `app_id,user_token,timestamp[,suffix]`
//! (`affinity_rowkey::composite`): any text parses to a key or an error;
//! what parses encodes back to the same text; keys made from the input
//! round-trip, and keys of one user sort by date, bucket (none first),
//! time, then suffix (the fixed-width timestamp, the bucket after the
//! date).
#![no_main]

use affinity_fuzz::Input;
use affinity_rowkey::composite::{bucketed_event_key_text, EventKey};
use affinity_rowkey::time::{MAX_MILLIS, MIN_MILLIS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let text = input.text();
    if let Ok(key) = EventKey::parse(&text) {
        assert_eq!(key.encode().expect("a parsed key encodes"), text);
    }
    let app = input.text();
    let user = input.text();
    let (t1, t2) = (input.i64(), input.i64());
    let (h1, h2) = (input.u64(), input.u64());
    // Drawn last, so older inputs keep their meaning (0: no bucket).
    let bucket = |n: u16| match n % 257 {
        0 => None,
        b => Some(u32::from(b - 1)),
    };
    let (b1, b2) = (bucket(input.u16()), bucket(input.u16()));
    let made = (
        bucketed_event_key_text(&app, &user, t1, b1, h1),
        bucketed_event_key_text(&app, &user, t2, b2, h2),
    );
    let valid = !app.is_empty() && !user.is_empty() && !app.contains(',') && !user.contains(',');
    let in_range = |t: i64| (MIN_MILLIS..=MAX_MILLIS).contains(&t);
    match made {
        (Ok(k1), Ok(k2)) => {
            assert!(valid && in_range(t1) && in_range(t2));
            let p1 = EventKey::parse(&k1).expect("a made key parses");
            let p2 = EventKey::parse(&k2).expect("a made key parses");
            assert_eq!(
                (p1.app_id.as_str(), p1.user_token.as_str()),
                (app.as_str(), user.as_str())
            );
            assert_eq!((p1.timestamp_millis, p2.timestamp_millis), (t1, t2));
            assert_eq!((p1.bucket, p2.bucket), (b1, b2));
            assert_eq!(p1.suffix, Some(format!("{h1:016x}")));
            let day = |t: i64| t.div_euclid(86_400_000);
            assert_eq!(
                k1.cmp(&k2),
                (day(t1), b1, t1, h1).cmp(&(day(t2), b2, t2, h2)),
                "keys of one user sort by date, bucket, time, then suffix"
            );
        }
        (r1, r2) => {
            assert_eq!(r1.is_ok(), valid && in_range(t1), "{r1:?}");
            assert_eq!(r2.is_ok(), valid && in_range(t2), "{r2:?}");
        }
    }
});
