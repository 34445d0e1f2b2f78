//! The Cloud Bigtable v2 gRPC backend of Affinity's storage traits.
//!
//! [`BigtableStore`] implements the model's [`Store`](affinity_model::Store)
//! and [`Table`](affinity_model::Table) traits over Cloud Bigtable's data and
//! admin APIs, using the pre-generated `googleapis-tonic` clients. It talks to
//! the official emulator when `BIGTABLE_EMULATOR_HOST` is set (plaintext, no
//! credentials) and to `bigtable.googleapis.com` with Application Default
//! Credentials otherwise. The traits are synchronous: the store owns a small
//! tokio runtime and is safe to call from any thread, async or not.
//!
//! What it does beyond translating calls:
//! - validates requests client-side with `affinity_model::limits`, so errors
//!   are the same variants the embedded backend returns;
//! - merges `ReadRows` cell chunks into rows ([`merger::RowMerger`], checked
//!   against the 48 official conformance vectors), drains the stream
//!   continuously, and resumes after the last row on retryable errors;
//! - retries only idempotent work: `MutateRows` entries that failed with a
//!   retryable code and hold no server-timestamped cell.
//!
//! It is not a server (a Bigtable-compatible gRPC server over any `Store` is
//! a later addition) and knows nothing of personalization.
//!
//! ```
//! use affinity_model::{GcRule, Mutation, ReadRowsRequest, Store, TableSpec};
//! use affinity_bigtable::emulator::{Emulator, EmulatorError};
//!
//! // Against Cloud Bigtable: `BigtableStore::connect("my-project", "my-instance")`.
//! let emulator = match Emulator::start() {
//!     Ok(emulator) => emulator,
//!     Err(EmulatorError::NotFound) => return Ok(()), // not installed here
//!     Err(err) => return Err(err.into()),
//! };
//! let store = emulator.store("my-project", "my-instance")?;
//! store.create_table("events", &TableSpec::new().with_family("e", GcRule::MaxVersions(1)))?;
//! let table = store.open_table("events")?;
//! table.mutate_row(b"app1,u1", &[Mutation::set_cell("e", "brand", 1_000, "Apple")])?;
//! let rows: Vec<_> = table.read_rows(&ReadRowsRequest::all())?.collect::<Result<_, _>>()?;
//! assert_eq!(rows[0].cells[0].value, "Apple");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(clippy::host_endian_bytes, clippy::little_endian_bytes)]

mod admin_convert;
mod conn;
mod convert;
pub mod emulator;
mod filter_rewrite;
pub mod merger;
mod mutate;
mod read;
mod resume;
mod retry;
mod runtime;
mod status;
mod store;
mod table;

pub use conn::Target;
pub use retry::RetryPolicy;
pub use store::{BigtableStore, BigtableStoreBuilder, DEFAULT_READ_BUFFER_BYTES};
pub use table::BigtableTable;

/// The generated Bigtable v2 data-API messages this crate speaks.
pub use googleapis_tonic_google_bigtable_v2::google::bigtable::v2 as proto;
