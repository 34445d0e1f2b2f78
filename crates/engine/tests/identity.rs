//! Identity stitching against a naive reference (`docs/design/identity.md`):
//! random sequences of events from anonymous tokens, some carrying an
//! authenticated token (a login), clock moves, maintenance and deletions of
//! anonymous and authenticated tokens; after every step, reading any token
//! equals the reference's joined profile. On the in-memory store and the
//! Bigtable emulator.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use affinity_engine::scoring::reference::{self, ListedEvent};
use affinity_engine::scoring::Profile;
use affinity_engine::{AppConfig, Engine, MaintainOptions, Progress, Schema};
use affinity_model::Store;
use common::identity::*;
use common::*;
use proptest::prelude::*;

const APP: &str = "ident";
const RETENTION_DAYS: u32 = 3;

#[derive(Debug, Clone)]
enum Op {
    Ingest(Vec<GenEvent>),
    Advance(u32),
    Maintain,
    /// Delete an anonymous (`false`) or authenticated (`true`) token.
    Delete(u8, bool),
}

fn op() -> impl Strategy<Value = Op> {
    let event = (
        any::<u8>(),
        0u8..4,
        prop_oneof![3 => Just(None), 1 => (0u8..2).prop_map(Some)],
        0u32..(24 * (RETENTION_DAYS + 1)),
        proptest::collection::vec(any::<u8>(), 1..3),
    );
    prop_oneof![
        4 => proptest::collection::vec(event, 1..6).prop_map(Op::Ingest),
        2 => prop_oneof![1u32..12, 12u32..40].prop_map(Op::Advance),
        1 => Just(Op::Maintain),
        1 => (0u8..4, any::<bool>()).prop_map(|(t, auth)| Op::Delete(t, auth)),
    ]
}

/// What only these tests ask of the reference.
impl Reference {
    fn profile(&self, token: &str, now: i64) -> Option<Profile> {
        let window_start = window_start(now, RETENTION_DAYS);
        let members = self.members(token, window_start);
        let listed: Vec<ListedEvent> = listed(APP, &self.events)
            .into_iter()
            .filter(|e| members.contains(&e.user))
            .map(|e| ListedEvent {
                user: token.to_string(),
                ..e
            })
            .collect();
        reference::profiles(&listed, &strategy(), now, i64::from(RETENTION_DAYS) * DAY)
            .remove(token)
    }

    fn delete(&mut self, token: &str, now: i64) {
        let window_start = window_start(now, RETENTION_DAYS);
        let doomed = match self.owner(token, window_start) {
            Some(owner) if owner != token => BTreeSet::from([token.to_string()]),
            _ => self.members(token, window_start),
        };
        self.events.retain(|e| !doomed.contains(e.identity()));
        self.links
            .retain(|(x, a, _)| !doomed.contains(x) && !doomed.contains(a));
    }
}

/// With cache budgets `(answers, rollups)` other than `(0, 0)`, through a
/// profile cache, every token read twice.
fn run(
    store: Arc<dyn Store>,
    clock: FakeClock,
    ops: &[Op],
    (answers, rollups): (usize, usize),
) -> Result<(), TestCaseError> {
    let cached = answers > 0 || rollups > 0;
    let engine = Engine::with_clock(store, clock.engine_clock())
        .unwrap()
        .with_profile_cache(answers)
        .with_rollup_cache(rollups);
    engine
        .configure_app(
            APP,
            AppConfig {
                schema: Schema::Narrow,
                retention_days: RETENTION_DAYS,
            },
        )
        .unwrap();
    engine
        .put_objects(APP, "products", &catalog_objects())
        .unwrap();
    engine.set_strategy(APP, &strategy()).unwrap();
    let mut reference = Reference::default();
    let tokens = tokens();
    for (step, op) in ops.iter().enumerate() {
        let now = clock.now();
        match op {
            Op::Ingest(list) => {
                if !reference.ingest(&engine, APP, list, now, RETENTION_DAYS) {
                    continue;
                }
            }
            Op::Advance(hours) => clock.set(now + i64::from(*hours) * 3_600_000),
            Op::Maintain => {
                engine
                    .maintain(APP, MaintainOptions::default(), &Progress::default())
                    .unwrap();
            }
            Op::Delete(t, auth) => {
                let token = if *auth {
                    authenticated(*t)
                } else {
                    anonymous(*t)
                };
                engine.delete_user(APP, &token).unwrap();
                reference.delete(&token, now);
            }
        }
        let now = clock.now();
        let got: BTreeMap<&str, Option<Profile>> = tokens
            .iter()
            .map(|t| (t.as_str(), engine.profile(APP, t).unwrap()))
            .collect();
        let want: BTreeMap<&str, Option<Profile>> = tokens
            .iter()
            .map(|t| (t.as_str(), reference.profile(t, now)))
            .collect();
        prop_assert_eq!(&got, &want, "after step {} ({:?})", step, op);
        if cached {
            let again: BTreeMap<&str, Option<Profile>> = tokens
                .iter()
                .map(|t| (t.as_str(), engine.profile(APP, t).unwrap()))
                .collect();
            prop_assert_eq!(again, want, "read again after step {} ({:?})", step, op);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn memory_store_joined_profiles_equal_the_reference(
        ops in proptest::collection::vec(op(), 1..30),
        hour in 0i64..24,
    ) {
        let start = 1_700_000_000_000 - 1_700_000_000_000 % DAY + hour * 3_600_000;
        let clock = FakeClock::new(start);
        run(clock.memory_store(), clock, &ops, (0, 0))?;
    }

    #[test]
    fn memory_store_cached_joined_profiles_equal_the_reference(
        ops in proptest::collection::vec(op(), 1..30),
        hour in 0i64..24,
    ) {
        let start = 1_700_000_000_000 - 1_700_000_000_000 % DAY + hour * 3_600_000;
        let clock = FakeClock::new(start);
        run(clock.memory_store(), clock, &ops, (1 << 20, 1 << 20))?;
    }

    #[test]
    fn memory_store_joined_profiles_with_rollups_kept_equal_the_reference(
        ops in proptest::collection::vec(op(), 1..30),
        hour in 0i64..24,
    ) {
        let start = 1_700_000_000_000 - 1_700_000_000_000 % DAY + hour * 3_600_000;
        let clock = FakeClock::new(start);
        run(clock.memory_store(), clock, &ops, (0, 1 << 20))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[ignore = "needs the Cloud Bigtable emulator (scripts/test runs it)"]
    #[test]
    fn emulator_joined_profiles_equal_the_reference(
        ops in proptest::collection::vec(op(), 1..30),
        hour in 0i64..24,
    ) {
        let now = real_now();
        let clock = FakeClock::new(now - now % DAY + hour * 3_600_000);
        run(affinity_bigtable::emulator::test_store(), clock, &ops, (0, 0))?;
    }
}
