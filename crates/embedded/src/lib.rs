//! Affinity's embedded storage engine: the model's [`Store`] and [`Table`]
//! traits on RocksDB, for one machine.
//!
//! It is Affinity's default backend: durable (a write that returned `Ok`
//! survives `kill -9` and power loss), atomic per row, and built for fast
//! scans and for blind aggregate adds. It is not distributed, has no
//! network API of its own, and knows nothing of personalization;
//! semantics (filters, GC rules, read-modify-write, aggregate sums) are
//! the model crate's, reused rather than re-derived, so every read equals
//! what `affinity_model::MemoryStore` would return.
//!
//! ```
//! use affinity_embedded::{EmbeddedStore, Store};
//! use affinity_model::{GcRule, Mutation, ReadRowsRequest, TableSpec};
//!
//! let dir = tempfile::tempdir().map_err(|e| affinity_model::Error::Storage(e.to_string()))?;
//! let store = EmbeddedStore::open(dir.path())?;
//! let spec = TableSpec::new()
//!     .with_family("e", GcRule::MaxVersions(1))
//!     .with_sum_family("n", GcRule::None);
//! store.create_table("events", &spec)?;
//! let table = store.open_table("events")?;
//! table.mutate_row(b"app1,u1", &[Mutation::set_cell("e", "brand", 1_000, "Apple")])?;
//! // Adds are written blind (a merge operand, no read) and summed on read.
//! for _ in 0..3 {
//!     table.mutate_row(b"app1,u1", &[Mutation::add_to_cell("n", "views", 0, 1)])?;
//! }
//! let rows: Vec<_> = table.read_rows(&ReadRowsRequest::all())?.collect::<Result<_, _>>()?;
//! let cells = &rows[0].cells;
//! assert_eq!(cells[0].value, "Apple");
//! assert_eq!(cells[1].value, 3i64.to_be_bytes().as_slice());
//! # Ok::<(), affinity_model::Error>(())
//! ```
//!
//! # On-disk format
//!
//! `docs/design/storage.md` has every byte; in short: one RocksDB
//! database per store, each table a column family named `t/<table>/<n>`
//! (`n` never reused, so deleting a table drops its column family), and
//! the column family `affinity-meta` holding each table's metadata
//! (families with their numeric ids, GC rules and types; `meta.rs`) and
//! the next `n`. Each row is one RocksDB key, the raw row key (bytewise
//! order is Bigtable's); its value holds the row's cells in canonical
//! order (family name, qualifier, timestamp descending), so a scan is a
//! plain ordered RocksDB iteration and a decoded row needs no sorting.
//! Rows are written in format 4 (`row/`): family id, the qualifier as
//! the length it shares with the previous cell's plus a suffix, the
//! timestamp as a zigzag delta from the previous cell's, the value.
//! Rows of format 2 (whole qualifiers and timestamps) and add operands of
//! tag 2 are still read, both held by fixtures the old code wrote
//! (`tests/old_formats.rs`); stores of the per-cell format before one key
//! per row are refused with an error saying so. Family ids are never
//! reused: cells of a dropped family become invisible at once and are
//! removed when the row is next written or compacted.
//!
//! # Concurrency and durability
//!
//! A write that reads its rows (check-and-mutate, read-modify-write, and
//! `mutate_row(s)` entries that do more than add) locks their stripes
//! exclusively (striped locks, taken in ascending order), reads them,
//! applies the request with the model's own code
//! (`affinity_model::apply`), and stores each row whole. A row whose
//! mutations only add to aggregate cells is written blind:
//! its mutations become a RocksDB merge operand (`merge/`) under its
//! stripe held shared, and the table's merge operator applies operands
//! with the same model code whenever RocksDB reads or compacts the row.
//! One request is one `WriteBatch`, to the WAL and memtable unsynced
//! under the locks; the locks are released, then the WAL is synced
//! (`FlushWAL(sync)`) before the call returns. The WAL is sequential, so
//! a write that read another's result is durable only after that one is.
//! Readers take no lock: each range is read from one RocksDB snapshot.
//!
//! # Garbage collection
//!
//! GC rules are applied to every read, so a read never returns a cell its
//! rule deletes, and every write collects the row it stores, exactly as
//! the model's `MemoryStore` does. What ages out of rows nobody writes is
//! reclaimed by the compaction filter (which sees whole rows, so it applies
//! age and version rules exactly; files untouched for 3 days are
//! recompacted for it) and by the sweeper thread
//! ([`EmbeddedOptions::gc_interval`]), which rewrites rows holding hidden
//! cells under their lock. Before a rule changes, the table is swept under
//! the old rule, so relaxing a rule never brings back a cell that was
//! hidden (`MemoryStore` would show the cells of rows not written since
//! they were hidden).
//!
//! # Operations
//!
//! [`EmbeddedStore::flush`] flushes memtables and waits for compactions
//! (call it after a bulk load, before timing reads);
//! [`EmbeddedStore::compact`] compacts everything;
//! [`EmbeddedStore::sweep_gc`] runs a GC sweep now;
//! [`EmbeddedStore::stored_cells`] counts cells on disk, hidden ones
//! included. `sample_row_keys` bisects each table's key span with RocksDB's
//! size estimates into chunks of about equal size (64 chunks by default,
//! see [`EmbeddedOptions::split_target_bytes`]); it flushes a memtable
//! holding more than an eighth of the table first, as estimates only count
//! files.

#![deny(clippy::host_endian_bytes, clippy::little_endian_bytes)]

mod decode;
mod error;
/// The decoders of stored bytes, for the fuzz targets in `fuzz/`.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod gc;
mod locks;
mod merge;
mod meta;
mod options;
mod ranges;
mod repairer;
mod row;
mod scan;
mod shapes;
mod split;
mod store;
mod sweeper;
mod table;
#[cfg(test)]
mod test_util;
mod write;

pub use affinity_model::{Store, Table};
pub use options::EmbeddedOptions;
pub use store::{EmbeddedStore, MemoryUsage};
pub use table::EmbeddedTable;
