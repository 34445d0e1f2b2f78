//! The model's conformance suite and reference-model property test against
//! the official Bigtable emulator, each case on a fresh instance of one
//! shared emulator (see `emulator::test_store`); ignored unless asked for
//! (`scripts/test` runs them when it finds the emulator).
//!
//! The capabilities turned off below are differences of the emulator
//! (cbtemulator) itself, not of this client; Cloud Bigtable has the full
//! behaviour. See the model's `Capabilities` for each.

use std::sync::Arc;

use affinity_bigtable::emulator::test_store;
use affinity_bigtable::BigtableStore;
use affinity_model::conformance::{Capabilities, Harness};
use affinity_model::Store;

struct EmulatorHarness(Arc<BigtableStore>);

impl Harness for EmulatorHarness {
    fn store(&self) -> Arc<dyn Store> {
        self.0.clone()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // cbtemulator treats `sink` as pass-all.
            sink_filter: false,
            // cbtemulator never collects intersection GC rules.
            gc_intersection: false,
            // cbtemulator keeps the rules before a failing one.
            atomic_read_modify_write_failure: false,
            // cbtemulator walks a row's families in random (Go map) order.
            cells_per_row_across_families: false,
            // cbtemulator's strip drops the labels a cell already has.
            strip_value_keeps_labels: false,
            ..Capabilities::default()
        }
    }
}

fn harness() -> EmulatorHarness {
    EmulatorHarness(test_store())
}

affinity_model::conformance_suite!(
    harness(),
    conformance,
    #[ignore = "needs the Cloud Bigtable emulator (scripts/test runs it)"]
);
affinity_model::reference_model_test!(
    harness(),
    cases = 400,
    #[ignore = "needs the Cloud Bigtable emulator (scripts/test runs it)"]
);
