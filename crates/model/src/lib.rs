//! The Bigtable v2 data model, independent of any backend.
//!
//! A table maps `(row key, family, qualifier, timestamp)` to bytes, with rows
//! sorted by key. This crate holds the types of that model (cells, rows,
//! mutations, row sets, the full [`RowFilter`] algebra, GC rules, limits),
//! the reference semantics of filters, mutations and GC, the [`Store`] and
//! [`Table`] traits every backend implements, an in-memory reference store,
//! and (feature `conformance`) the test suite every backend must pass.
//!
//! Where to start reading:
//! - [`store`]: the traits; [`limits`]: what every backend checks before
//!   writing anything;
//! - [`eval`]: `RowFilter` semantics ([`eval::CompiledFilter`]);
//!   [`gc`]: which cells GC rules keep; [`apply`]: mutations and
//!   read-modify-write on one row's cells;
//! - [`memory`]: [`MemoryStore`], the reference store built from those;
//! - `conformance` (feature `conformance`): `conformance_suite!`, one test
//!   per case for any backend, and the reference-model property test;
//! - `counting` (feature `counting`): `CountingStore`, a wrapper that counts
//!   the rows, cells and bytes reads return, per table;
//! - [`keyvis`]: `KeyVis`, tables counting their reads and writes per key
//!   range and time slot while watched (the dashboard's key visualizer);
//! - [`prefixed`]: `PrefixedTable`, one tenant's rows of a shared table
//!   seen as a table of their own (applications sharing tables);
//! - [`recent`]: `Recent`, the values a thread made last from a few keys
//!   (compiled filters, a strategy's weights), found again by key.
//!
//! It is not a storage engine: it knows nothing of RocksDB or gRPC, and its
//! `MemoryStore` favours obvious correctness over speed.
//!
//! ```
//! use affinity_model::{MemoryStore, Mutation, ReadRowsRequest, Store, TableSpec, GcRule};
//!
//! let store = MemoryStore::new();
//! store.create_table("events", &TableSpec::new().with_family("e", GcRule::MaxVersions(1)))?;
//! let table = store.open_table("events")?;
//! table.mutate_row(b"app1,u1", &[Mutation::set_cell("e", "brand", 1_000, "Apple")])?;
//! let rows: Vec<_> = table.read_rows(&ReadRowsRequest::all())?.collect::<Result<_, _>>()?;
//! assert_eq!(rows[0].cells[0].value, "Apple");
//! # Ok::<(), affinity_model::Error>(())
//! ```

#![deny(clippy::host_endian_bytes, clippy::little_endian_bytes)]

pub mod apply;
pub mod cell;
#[cfg(feature = "conformance")]
pub mod conformance;
#[cfg(feature = "counting")]
pub mod counting;
pub mod error;
pub mod eval;
pub mod filter;
pub mod gc;
pub mod keyvis;
pub mod limits;
pub mod memory;
pub mod mutation;
pub mod prefixed;
pub mod recent;
pub mod rowset;
pub mod store;
pub mod table_spec;

pub use bytes::Bytes;
pub use cell::{recycle_cells, Cell, CellRef, Row, RowRef, SampleRowKey, SERVER_TIME};
pub use error::{Error, ErrorCode, Result};
pub use filter::{ColumnRange, RowFilter, TimestampRange, ValueRange};
pub use memory::MemoryStore;
pub use mutation::{
    FamilyName, Mutation, ReadModifyWriteOp, ReadModifyWriteRule, RowMutations, RowRules,
};
pub use prefixed::PrefixedTable;
pub use rowset::{prefix_successor, ReadRowsRequest, RowRange, RowSet};
pub use store::{RowStream, Store, Table};
pub use table_spec::{ColumnFamily, FamilyModification, FamilyType, GcRule, TableSpec};
