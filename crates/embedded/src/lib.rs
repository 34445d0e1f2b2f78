//! Affinity's embedded storage engine: the model's [`Store`] and [`Table`]
//! traits on RocksDB, for one machine.
//!
//! It is Affinity's default backend: durable (a write that returned `Ok`
//! survives `kill -9` and power loss), atomic per row, and built for fast
//! scans. It is not distributed, has no network API of its own, and knows
//! nothing of personalization; semantics (filters, GC rules,
//! read-modify-write) are the model crate's, reused rather than re-derived.
//!
//! ```
//! use affinity_embedded::EmbeddedStore;
//! use affinity_model::{GcRule, Mutation, ReadRowsRequest, Store, TableSpec};
//!
//! let dir = tempfile::tempdir().map_err(|e| affinity_model::Error::Storage(e.to_string()))?;
//! let store = EmbeddedStore::open(dir.path())?;
//! store.create_table("events", &TableSpec::new().with_family("e", GcRule::MaxVersions(1)))?;
//! let table = store.open_table("events")?;
//! table.mutate_row(b"app1,u1", &[Mutation::set_cell("e", "brand", 1_000, "Apple")])?;
//! let rows: Vec<_> = table.read_rows(&ReadRowsRequest::all())?.collect::<Result<_, _>>()?;
//! assert_eq!(rows[0].cells[0].value, "Apple");
//! # Ok::<(), affinity_model::Error>(())
//! ```
//!
//! # On-disk format
//!
//! One RocksDB database per store. Each table is a RocksDB column family
//! named `t/<table>/<n>` (`n` never reused), so deleting a table drops its
//! column family. The column family `affinity-meta` maps `table/<name>` to
//! the table's metadata (column family, families with their numeric ids and
//! GC rules; see `meta.rs`) and `next-cf` to the next `n`.
//!
//! Each row is one RocksDB key: the raw row key, whose bytewise order is
//! Bigtable's. The value holds the row's cells in canonical order (family
//! name, qualifier, timestamp descending), so a scan is a plain ordered
//! RocksDB iteration and a decoded row needs no sorting:
//!
//! ```text
//! value = 02 | cell*
//! cell  = family id varint | qualifier length varint | qualifier
//!       | timestamp u64 BE | value length varint | value
//! ```
//!
//! (see `row.rs`). Family ids are assigned at creation and never reused:
//! cells of a dropped family become invisible at once and are removed when
//! the row is next written or compacted. A whole-key bloom filter serves
//! point reads. Stores written in the earlier per-cell format (table
//! metadata version 1) are refused with an error saying so.
//!
//! # Concurrency and durability
//!
//! Every write locks the stripes of its rows exclusively (striped locks,
//! taken in ascending order), reads the rows, applies the request with the
//! model's own code (`affinity_model::apply`), and stores each touched row
//! whole; `mutate_rows` and `read_modify_write_rows` write one
//! `WriteBatch` for all the entries that validated. The batch goes to the
//! WAL and memtable unsynced under the locks; the locks are released and
//! then the WAL is synced (`FlushWAL(sync)`) before the call returns. The
//! WAL is sequential, so a write that read another's result is durable only
//! after that one is, and a write that returned `Ok` survives `kill -9`
//! and power loss. Readers take no lock: each range is read from one
//! RocksDB snapshot.
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
mod gc;
mod locks;
mod merge;
mod meta;
mod options;
mod ranges;
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
pub use store::EmbeddedStore;
pub use table::EmbeddedTable;
