//! The repository's test data: files under `testdata/` at the repository
//! root, each source with its licence beside it (see `testdata/README.md`).
//!
//! This crate only says where a file is; it reads nothing. Tests and
//! benchmarks find their data through it, so no path to the data is
//! spelled out anywhere else.
//!
//! ```
//! let vectors = affinity_testdata::file("bigtable/readrows.json");
//! assert!(vectors.is_file());
//! ```

use std::path::PathBuf;

/// The `testdata/` directory at the root of the repository this crate was
/// built from.
pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// `testdata/RELATIVE`.
///
/// # Panics
/// When the file is missing: test data ships with the repository, so a
/// missing file is a broken checkout, not something to skip.
pub fn file(relative: &str) -> PathBuf {
    let path = dir().join(relative);
    assert!(
        path.is_file(),
        "test data {relative} not found at {} (it ships with the repository)",
        path.display()
    );
    path
}
