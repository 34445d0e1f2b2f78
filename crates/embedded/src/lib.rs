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
//! Each cell is one RocksDB key, its value the cell's value:
//!
//! ```text
//! esc(row key) 00 01 | family id: u32 BE | esc(qualifier) 00 01 | !timestamp: u64 BE
//! esc(x) = x with each 00 byte written 00 FF
//! ```
//!
//! Keys sort as `(row key, family id, qualifier, timestamp descending)`, so
//! a row is one contiguous key range, a column's newest version comes
//! first, and a scan is a plain ordered RocksDB iteration. The escaped row
//! key with its terminator is the prefix of every key of the row and is the
//! RocksDB prefix extractor (prefix bloom filters serve point reads).
//! Family ids are assigned at creation and never reused: cells of a dropped
//! family become invisible at once and are removed by compaction. Cells are
//! returned in family-name order whatever the ids' order. All integers are
//! big-endian.
//!
//! # Concurrency and durability
//!
//! A row mutation is one `WriteBatch`; `mutate_rows` writes one batch for
//! all the entries that validated. Writes are synced to the WAL (RocksDB
//! commits concurrent synced writers as a group). Rows are locked by
//! striped locks: shared for blind writes, exclusive for anything that
//! reads before it writes (check-and-mutate, read-modify-write, deletes,
//! the GC sweeper), so nothing lands between such a read and its write.
//! Readers take no lock: each range is read from one RocksDB snapshot.
//!
//! # Garbage collection
//!
//! GC rules are applied to every read, so a read never returns a cell its
//! rule deletes. Space is reclaimed in the background: the compaction
//! filter drops cells of dropped families and cells too old for their rule
//! (files untouched for 3 days are recompacted for it), and a sweeper
//! thread ([`EmbeddedOptions::gc_interval`]) deletes versions beyond the
//! limits in tables that have them. Under a given rule, reads match the
//! model's `MemoryStore` (which collects a row whenever it is written): a
//! delete of some versions of a column first deletes the versions GC hid,
//! so they cannot resurface. Before a rule changes, the table is swept
//! under the old rule, so relaxing a rule never brings back a cell that
//! was hidden (`MemoryStore` would show the cells of rows not written
//! since they were hidden).
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
mod keys;
mod locks;
mod meta;
mod options;
mod ranges;
mod scan;
mod split;
mod store;
mod sweeper;
mod table;
mod write;

pub use affinity_model::{Store, Table};
pub use options::EmbeddedOptions;
pub use store::EmbeddedStore;
pub use table::EmbeddedTable;
