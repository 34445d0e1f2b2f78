//! The conformance suite and the reference-model test, run against
//! `MemoryStore` itself (each case on a fresh store).

use std::sync::Arc;

use affinity_model::conformance::StoreHarness;
use affinity_model::MemoryStore;

fn harness() -> StoreHarness {
    StoreHarness(Arc::new(MemoryStore::new()))
}

affinity_model::conformance_suite!(harness());
affinity_model::reference_model_test!(harness(), cases = 128);
