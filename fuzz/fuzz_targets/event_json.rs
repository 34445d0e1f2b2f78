//! `POST /1/events` bodies: decoded (any encoding), parsed as JSON and
//! validated event by event as the handler does (Insights' field rules,
//! `affinity_engine::Event::from_json`). An event the validator accepts
//! can be stored: its identity, content and events-table row key are
//! made without error.
#![no_main]

use affinity_engine::Limits;
use affinity_fuzz::Input;
use affinity_http::fuzzing::{encoding, events};
use affinity_rowkey::composite::{event_hash, event_key_text, EventKey};
use libfuzzer_sys::fuzz_target;

/// 2025-11-24T00:00:00Z, the clock the seeds' timestamps are near.
const NOW_MILLIS: i64 = 1_763_942_400_000;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let encoding = encoding(input.byte());
    // The API's 30 days, or a CLI's longer retention (`ingest` of history).
    let limits = match input.byte() % 2 {
        0 => Limits::api(NOW_MILLIS),
        _ => Limits {
            max_age_millis: 3650 * 86_400_000,
            ..Limits::api(NOW_MILLIS)
        },
    };
    let Ok(events) = events(input.rest(), encoding, &limits) else {
        return;
    };
    for event in &events {
        let content = event.content();
        assert_eq!(
            content,
            event.clone().content(),
            "content is not deterministic"
        );
        let key = event_key_text(
            "app",
            event.identity(),
            event.timestamp_millis,
            event_hash(&content),
        )
        .expect("an accepted event has a row key");
        let parsed = EventKey::parse(&key).expect("an event's row key parses");
        assert_eq!(parsed.user_token, event.identity());
        assert_eq!(parsed.timestamp_millis, event.timestamp_millis);
    }
});
