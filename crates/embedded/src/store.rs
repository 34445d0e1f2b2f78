//! The store: opening the database, table metadata, the admin operations.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use affinity_model::limits::{check_table_name, MAX_ROW_KEY_BYTES};
use affinity_model::{Error, FamilyModification, Result, Store, Table, TableSpec};
use parking_lot::{Mutex, RwLock};
use rocksdb::{
    BoundColumnFamily, Cache, ColumnFamilyDescriptor, MultiThreaded, WriteBatch, WriteOptions,
};

use crate::error::{storage, table_gone};
use crate::gc::GcSlot;
use crate::locks::RowLocks;
use crate::meta::{FamilyMeta, TableMeta};
use crate::options::{db_options, meta_cf_options, table_cf_options, EmbeddedOptions};
use crate::repairer::{RepairQueue, Repairer};
use crate::sweeper::{SweepSignal, Sweeper};
use crate::table::EmbeddedTable;

/// The RocksDB handle type used throughout the crate.
pub(crate) type Db = rocksdb::DBWithThreadMode<MultiThreaded>;

/// Column family holding table metadata.
const META_CF: &str = "affinity-meta";
/// Metadata key prefix of a table: `table/<name>`.
const TABLE_KEY_PREFIX: &[u8] = b"table/";
/// Metadata key of the next column family number.
const NEXT_CF_KEY: &[u8] = b"next-cf";
/// Prefix of the column families holding tables: `t/<name>/<number>`.
pub(crate) const TABLE_CF_PREFIX: &str = "t/";

/// A table known to the store.
pub(crate) struct TableEntry {
    meta: RwLock<Arc<TableMeta>>,
    /// What the table's compaction filter sees.
    gc_slot: GcSlot,
}

impl TableEntry {
    pub fn meta(&self) -> Arc<TableMeta> {
        self.meta.read().clone()
    }

    fn set_meta(&self, meta: Arc<TableMeta>) {
        *self.gc_slot.write() = Some(meta.clone());
        *self.meta.write() = meta;
    }
}

/// Bytes of memory the store holds, by RocksDB's account
/// ([`EmbeddedStore::memory_usage`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryUsage {
    /// Memtables of all tables, active and immutable.
    pub memtables: u64,
    /// Index and filter blocks of table files held outside the cache.
    pub table_readers: u64,
    /// The block cache's charge (data, index and filter blocks).
    pub block_cache: u64,
    /// The part of the block cache pinned by readers and iterators.
    pub block_cache_pinned: u64,
}

/// State shared by the store, its tables and the sweeper.
pub(crate) struct Inner {
    pub db: Db,
    pub options: EmbeddedOptions,
    pub locks: RowLocks,
    pub write_options: WriteOptions,
    cache: Cache,
    tables: RwLock<HashMap<String, Arc<TableEntry>>>,
    /// Serialises admin operations (create, delete, modify).
    admin: Mutex<()>,
    next_cf: AtomicU64,
    /// Tables that lost families and want a compaction.
    pub to_compact: Mutex<HashSet<String>>,
    /// Wakes the sweeper (when there is one).
    pub sweep_signal: Arc<SweepSignal>,
    /// Rows reads merged, for the repair thread to store.
    pub repairs: Arc<RepairQueue>,
}

impl Inner {
    pub fn entry(&self, table: &str) -> Result<Arc<TableEntry>> {
        self.tables
            .read()
            .get(table)
            .cloned()
            .ok_or_else(|| table_gone(table))
    }

    pub fn cf(&self, table: &str, meta: &TableMeta) -> Result<Arc<BoundColumnFamily<'_>>> {
        self.db
            .cf_handle(&meta.cf_name)
            .ok_or_else(|| table_gone(table))
    }

    pub fn table_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tables.read().keys().cloned().collect();
        names.sort();
        names
    }

    /// Every table with its column family (tables deleted meanwhile are
    /// left out).
    pub fn table_cfs(&self) -> Vec<(String, Arc<BoundColumnFamily<'_>>)> {
        self.table_names()
            .into_iter()
            .filter_map(|name| {
                let meta = self.entry(&name).ok()?.meta();
                let cf = self.cf(&name, &meta).ok()?;
                Some((name, cf))
            })
            .collect()
    }

    fn write_meta(&self, batch: WriteBatch) -> Result<()> {
        let mut opts = WriteOptions::default();
        opts.set_sync(true);
        self.db.write_opt(batch, &opts).map_err(storage)
    }

    fn meta_cf(&self) -> Result<Arc<BoundColumnFamily<'_>>> {
        self.db
            .cf_handle(META_CF)
            .ok_or_else(|| Error::Storage(format!("metadata column family {META_CF:?} missing")))
    }
}

fn table_key(table: &str) -> Vec<u8> {
    [TABLE_KEY_PREFIX, table.as_bytes()].concat()
}

/// A single-machine Bigtable on RocksDB. Share it as `Arc<EmbeddedStore>`;
/// tables opened from it stay usable after it is dropped.
pub struct EmbeddedStore {
    pub(crate) inner: Arc<Inner>,
    path: PathBuf,
    sweeper: Option<Sweeper>,
    repairer: Option<Repairer>,
}

impl std::fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl EmbeddedStore {
    /// Open (or create) a store in directory `path` with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<EmbeddedStore> {
        EmbeddedStore::open_with(path, EmbeddedOptions::default())
    }

    /// Open (or create) a store in directory `path`.
    pub fn open_with(path: impl AsRef<Path>, options: EmbeddedOptions) -> Result<EmbeddedStore> {
        let path = path.as_ref().to_path_buf();
        if path.exists() && !path.is_dir() {
            return Err(Error::Storage(format!(
                "store directory {} is not a directory",
                path.display()
            )));
        }
        std::fs::create_dir_all(&path).map_err(|e| {
            Error::Storage(format!(
                "cannot create store directory {}: {e}",
                path.display()
            ))
        })?;
        check_writable(&path)?;
        let db_opts = db_options(&options);
        let existing = if path.join("CURRENT").exists() {
            Db::list_cf(&db_opts, &path).map_err(storage)?
        } else {
            Vec::new()
        };
        // The tables' metadata, read before their column families open: a
        // flush while the log is recovered, or a compaction right after
        // open, may run the merge operator, which needs it.
        let known: HashMap<String, Arc<TableMeta>> = if existing.is_empty() {
            HashMap::new()
        } else {
            let db =
                Db::open_cf_for_read_only(&db_opts, &path, [META_CF], false).map_err(storage)?;
            let cf = db.cf_handle(META_CF).ok_or_else(|| {
                Error::Storage(format!("metadata column family {META_CF:?} missing"))
            })?;
            let metas = read_table_metas(&db, &cf)?;
            metas
                .into_values()
                .map(|meta| (meta.cf_name.clone(), meta))
                .collect()
        };
        let cache = Cache::new_lru_cache(options.block_cache_bytes);
        let mut slots: HashMap<String, GcSlot> = HashMap::new();
        let mut descriptors = vec![ColumnFamilyDescriptor::new(META_CF, meta_cf_options())];
        for name in existing.iter().filter(|n| n.starts_with(TABLE_CF_PREFIX)) {
            let slot = GcSlot::new(RwLock::new(known.get(name).cloned()));
            descriptors.push(ColumnFamilyDescriptor::new(
                name,
                table_cf_options(&options, &cache, slot.clone()),
            ));
            slots.insert(name.clone(), slot);
        }
        let db = Db::open_cf_descriptors(&db_opts, &path, descriptors).map_err(storage)?;
        // Writes are synced after their locks are released (`flush_wal`, see
        // `table.rs`), never inside the write.
        let write_options = WriteOptions::default();
        let inner = Inner {
            db,
            options,
            locks: RowLocks::new(),
            write_options,
            cache,
            tables: RwLock::new(HashMap::new()),
            admin: Mutex::new(()),
            next_cf: AtomicU64::new(0),
            to_compact: Mutex::new(HashSet::new()),
            sweep_signal: Arc::default(),
            repairs: Arc::default(),
        };
        load_tables(&inner, &mut slots)?;
        let inner = Arc::new(inner);
        let sweeper = inner
            .options
            .gc_interval
            .map(|every| Sweeper::start(&inner, every));
        let repairer = Some(Repairer::start(&inner));
        Ok(EmbeddedStore {
            inner,
            path,
            sweeper,
            repairer,
        })
    }

    /// The directory the store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The memory the store holds by RocksDB's own account: every table's
    /// memtables (active and waiting to flush), its files' index and
    /// filter blocks held outside the block cache, and the block cache
    /// (with the part pinned by readers). The rest of a process's resident
    /// memory is the allocators' and the program's.
    pub fn memory_usage(&self) -> Result<MemoryUsage> {
        let mut usage = MemoryUsage {
            block_cache: self.inner.cache.get_usage() as u64,
            block_cache_pinned: self.inner.cache.get_pinned_usage() as u64,
            ..MemoryUsage::default()
        };
        for (_, cf) in self.inner.table_cfs() {
            let db = &self.inner.db;
            usage.memtables +=
                crate::split::int_property(db, &cf, "rocksdb.cur-size-all-mem-tables")?;
            usage.table_readers +=
                crate::split::int_property(db, &cf, "rocksdb.estimate-table-readers-mem")?;
        }
        Ok(usage)
    }

    /// The store's live table files (SST files, every table and the
    /// metadata): how many and their bytes. Each one RocksDB keeps open
    /// holds a file descriptor, up to [`EmbeddedOptions::max_open_files`].
    pub fn table_files(&self) -> Result<(usize, u64)> {
        let files = self.inner.db.live_files().map_err(storage)?;
        Ok((files.len(), files.iter().map(|f| f.size as u64).sum()))
    }

    /// Flush every table's memtable to disk, then wait until background
    /// compactions have finished, so the tree is settled (call it between
    /// a bulk load and reads that should run at steady-state speed).
    pub fn flush(&self) -> Result<()> {
        for (_, cf) in self.inner.table_cfs() {
            self.inner.db.flush_cf(&cf).map_err(storage)?;
        }
        let mut wait = rocksdb::WaitForCompactOptions::default();
        wait.set_flush(true);
        self.inner.db.wait_for_compact(&wait).map_err(storage)
    }

    /// Compact every table fully (runs the GC compaction filter over all
    /// data). Slow on large stores.
    pub fn compact(&self) -> Result<()> {
        for (_, cf) in self.inner.table_cfs() {
            self.inner
                .db
                .compact_range_cf(&cf, None::<&[u8]>, None::<&[u8]>);
        }
        Ok(())
    }

    /// The number of cells stored for `table`, counting cells GC hides but
    /// has not reclaimed yet (a full scan, for tests and tools).
    pub fn stored_cells(&self, table: &str) -> Result<u64> {
        let entry = self.inner.entry(table)?;
        let cf = self.inner.cf(table, &entry.meta())?;
        let mut opts = rocksdb::ReadOptions::default();
        opts.fill_cache(false);
        let mut iter = self.inner.db.raw_iterator_cf_opt(&cf, opts);
        iter.seek_to_first();
        let mut count = 0;
        while let Some(value) = iter.value() {
            count += crate::row::cell_count(value);
            iter.next();
        }
        iter.status().map_err(storage)?;
        Ok(count)
    }

    /// Run one GC sweep now: compact tables that lost families, rewrite
    /// the rows holding cells GC hides. Returns the number of cells removed.
    pub fn sweep_gc(&self) -> Result<u64> {
        crate::sweeper::sweep_all(&self.inner)
    }
}

impl Drop for EmbeddedStore {
    fn drop(&mut self) {
        if let Some(sweeper) = self.sweeper.take() {
            sweeper.stop();
        }
        if let Some(repairer) = self.repairer.take() {
            repairer.stop();
        }
    }
}

/// Read table metadata, hook each table to its compaction filter, drop
/// column families no table owns (left by a crash mid-create or mid-delete).
fn load_tables(inner: &Inner, slots: &mut HashMap<String, GcSlot>) -> Result<()> {
    let meta_cf = inner.meta_cf()?;
    let mut tables = HashMap::new();
    for (name, meta) in read_table_metas(&inner.db, &meta_cf)? {
        let slot = slots.remove(&meta.cf_name).ok_or_else(|| {
            Error::Storage(format!(
                "table {name:?} has no column family {:?}",
                meta.cf_name
            ))
        })?;
        *slot.write() = Some(meta.clone());
        tables.insert(
            name,
            Arc::new(TableEntry {
                meta: RwLock::new(meta),
                gc_slot: slot,
            }),
        );
    }
    let next_cf = match inner.db.get_cf(&meta_cf, NEXT_CF_KEY).map_err(storage)? {
        Some(bytes) => u64::from_be_bytes(
            bytes
                .as_slice()
                .try_into()
                .map_err(|_| Error::Storage(format!("corrupt {NEXT_CF_KEY:?} in metadata")))?,
        ),
        None => 0,
    };
    drop(meta_cf);
    inner.next_cf.store(next_cf, Ordering::Relaxed);
    for orphan in slots.keys() {
        inner.db.drop_cf(orphan).map_err(storage)?;
    }
    *inner.tables.write() = tables;
    Ok(())
}

/// Every table's metadata in the metadata column family `meta_cf` of `db`,
/// by table name.
fn read_table_metas(
    db: &Db,
    meta_cf: &Arc<BoundColumnFamily<'_>>,
) -> Result<BTreeMap<String, Arc<TableMeta>>> {
    let mut out = BTreeMap::new();
    let mut iter = db.raw_iterator_cf(meta_cf);
    iter.seek(TABLE_KEY_PREFIX);
    while let Some((key, value)) = iter.item() {
        let Some(name) = key.strip_prefix(TABLE_KEY_PREFIX) else {
            break;
        };
        let name = String::from_utf8(name.to_vec())
            .map_err(|_| Error::Storage(format!("corrupt table name {name:?} in metadata")))?;
        let meta = Arc::new(TableMeta::decode(&name, value)?);
        out.insert(name, meta);
        iter.next();
    }
    iter.status().map_err(storage)?;
    Ok(out)
}

impl Store for EmbeddedStore {
    fn create_table(&self, table: &str, spec: &TableSpec) -> Result<()> {
        check_table_name(table)?;
        spec.validate()?;
        let inner = &self.inner;
        let _admin = inner.admin.lock();
        if inner.tables.read().contains_key(table) {
            return Err(Error::TableExists {
                table: table.to_string(),
            });
        }
        let number = inner.next_cf.fetch_add(1, Ordering::Relaxed);
        let meta = Arc::new(TableMeta::from_spec(
            format!("{TABLE_CF_PREFIX}{table}/{number}"),
            spec,
        ));
        let slot = GcSlot::new(RwLock::new(Some(meta.clone())));
        let cf_options = table_cf_options(&inner.options, &inner.cache, slot.clone());
        inner
            .db
            .create_cf(&meta.cf_name, &cf_options)
            .map_err(storage)?;
        let mut batch = WriteBatch::default();
        let meta_cf = inner.meta_cf()?;
        batch.put_cf(&meta_cf, table_key(table), meta.encode());
        batch.put_cf(&meta_cf, NEXT_CF_KEY, (number + 1).to_be_bytes());
        if let Err(e) = inner.write_meta(batch) {
            // Best effort: an orphan column family is dropped at next open.
            let _ = inner.db.drop_cf(&meta.cf_name);
            return Err(e);
        }
        let entry = TableEntry {
            meta: RwLock::new(meta),
            gc_slot: slot,
        };
        inner
            .tables
            .write()
            .insert(table.to_string(), Arc::new(entry));
        Ok(())
    }

    fn delete_table(&self, table: &str) -> Result<()> {
        let inner = &self.inner;
        let _admin = inner.admin.lock();
        let entry = inner.entry(table)?;
        let mut batch = WriteBatch::default();
        batch.delete_cf(&inner.meta_cf()?, table_key(table));
        inner.write_meta(batch)?;
        inner.tables.write().remove(table);
        inner.to_compact.lock().remove(table);
        // Metadata is gone: if this fails, the next open drops the orphan.
        inner.db.drop_cf(&entry.meta().cf_name).map_err(storage)
    }

    fn list_tables(&self) -> Result<Vec<String>> {
        Ok(self.inner.table_names())
    }

    fn table_spec(&self, table: &str) -> Result<TableSpec> {
        Ok(self.inner.entry(table)?.meta().spec())
    }

    fn modify_families(
        &self,
        table: &str,
        modifications: &[FamilyModification],
    ) -> Result<TableSpec> {
        let inner = &self.inner;
        let _admin = inner.admin.lock();
        let entry = inner.entry(table)?;
        let old = entry.meta();
        let next = old.spec().apply_modifications(table, modifications)?;
        // Families keep their id; new ones get fresh ids, so a family
        // dropped and re-created later starts empty.
        let mut next_id = old.next_family_id;
        let mut families = BTreeMap::new();
        for (name, family) in &next.families {
            let id = match old.families.get(name) {
                Some(existing) => existing.id,
                None => {
                    let id = next_id;
                    next_id = next_id.checked_add(1).ok_or_else(|| {
                        Error::InvalidArgument(format!("table {table:?} has used every family id"))
                    })?;
                    id
                }
            };
            families.insert(
                name.clone(),
                FamilyMeta {
                    id,
                    gc_rule: family.gc_rule.clone(),
                    value_type: family.value_type,
                },
            );
        }
        let dropped = old.families.keys().any(|f| !next.families.contains_key(f));
        let rules_changed = old.families.iter().any(|(name, f)| {
            next.families
                .get(name)
                .is_some_and(|n| n.gc_rule != f.gc_rule)
        });
        if rules_changed && old.has_gc() {
            // What the old rules hid stays gone, as if GC had run: a looser
            // rule must not bring it back.
            let cf = inner.cf(table, &old)?;
            crate::sweeper::sweep_table(inner, &cf, table, &old)?;
        }
        let meta = Arc::new(TableMeta::new(old.cf_name.clone(), next_id, families));
        let mut batch = WriteBatch::default();
        batch.put_cf(&inner.meta_cf()?, table_key(table), meta.encode());
        inner.write_meta(batch)?;
        entry.set_meta(meta.clone());
        if dropped {
            inner.to_compact.lock().insert(table.to_string());
            inner.sweep_signal.wake();
        }
        Ok(meta.spec())
    }

    fn drop_row_range(&self, table: &str, prefix: &[u8]) -> Result<()> {
        affinity_model::limits::check_row_key_prefix(prefix)?;
        let inner = &self.inner;
        let meta = inner.entry(table)?.meta();
        let cf = inner.cf(table, &meta)?;
        let end = affinity_model::prefix_successor(prefix);
        let mut batch = WriteBatch::default();
        match &end {
            Some(end) => batch.delete_range_cf(&cf, prefix, end.as_slice()),
            // All 0xff: nothing sorts after the prefix's rows but
            // themselves, so the table's end is the range's.
            None => batch.delete_range_cf(&cf, prefix, [0xffu8; MAX_ROW_KEY_BYTES + 1].as_slice()),
        }
        let mut opts = WriteOptions::default();
        opts.set_sync(true);
        inner.db.write_opt(batch, &opts).map_err(storage)?;
        // The tombstone hides the rows at once; the compaction gives their
        // space back.
        inner.db.compact_range_cf(&cf, Some(prefix), end.as_deref());
        Ok(())
    }

    fn open_table(&self, table: &str) -> Result<Arc<dyn Table>> {
        self.inner.entry(table)?;
        Ok(Arc::new(EmbeddedTable::new(
            table.to_string(),
            self.inner.clone(),
        )))
    }
}

/// Refuse a store directory this process cannot write, naming it, before
/// RocksDB reports it as a failure to lock a file. The probe is RocksDB's
/// own lock file, which it creates anyway.
fn check_writable(path: &Path) -> Result<()> {
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path.join("LOCK"))
        .map(drop)
        .map_err(|e| {
            let why = match e.raw_os_error() {
                Some(30) => "is read-only (a read-only filesystem)",
                _ if e.kind() == std::io::ErrorKind::PermissionDenied => "is not writable",
                _ => "cannot be written",
            };
            Error::Storage(format!("store directory {} {why}: {e}", path.display()))
        })
}
