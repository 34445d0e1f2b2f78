//! The model's conformance suite and reference-model property test against
//! the embedded store. Each case gets a fresh store in its own directory,
//! with the GC sweeper running often so physical collection races the
//! cases' reads and writes.

use std::sync::Arc;
use std::time::Duration;

use affinity_embedded::{EmbeddedOptions, EmbeddedStore};
use affinity_model::conformance::Harness;
use affinity_model::Store;

struct EmbeddedHarness {
    // Declared first: dropped (closing the database) before the directory.
    store: Arc<dyn Store>,
    _dir: tempfile::TempDir,
}

impl Harness for EmbeddedHarness {
    fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }
}

fn harness() -> EmbeddedHarness {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = EmbeddedOptions::default();
    options.gc_interval = Some(Duration::from_millis(50));
    let store = EmbeddedStore::open_with(dir.path(), options).expect("open store");
    EmbeddedHarness {
        store: Arc::new(store),
        _dir: dir,
    }
}

affinity_model::conformance_suite!(harness());
affinity_model::reference_model_test!(harness(), cases = 64);
