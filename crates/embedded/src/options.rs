//! Store options and the RocksDB tuning derived from them.

use std::time::Duration;

use rocksdb::{BlockBasedOptions, Cache, DBCompressionType, Options};

use crate::gc::{GcFilterFactory, GcSlot};

/// How an [`crate::EmbeddedStore`] runs. Start from `default()` and change
/// fields.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EmbeddedOptions {
    /// Sync the write-ahead log before a write returns (default `true`), so
    /// an acknowledged write survives a crash of the process or the machine.
    /// RocksDB commits concurrent synced writers as one group.
    pub sync_writes: bool,
    /// Block cache shared by all tables (default 256 MiB).
    pub block_cache_bytes: usize,
    /// Memtable size of each table (default 32 MiB). Ingest inserts at
    /// random places in it (keys are user-major), each insert a skiplist
    /// search whose cache misses grow with the memtable; and whatever it
    /// holds is flushed when a burst ends. Half of 64 MiB made inserts a
    /// little faster and the flush after a burst a third as long.
    pub write_buffer_bytes: usize,
    /// Cap on the memtables of all tables together (default 512 MiB).
    pub total_write_buffer_bytes: usize,
    /// RocksDB background flush and compaction threads (default 2).
    pub background_jobs: i32,
    /// Run compactions at a lower CPU priority than everything else
    /// (default `false`). Lowered, they starve while requests keep every
    /// core busy: level 0 piles up, each point read checks more files, and
    /// in a soak at half the sustainable ingest reads fell to a fifth
    /// within minutes. At normal priority they keep pace. Flushes keep
    /// their priority either way.
    pub low_priority_compactions: bool,
    /// How often the GC sweeper deletes the cells hidden by version limits
    /// (a full scan of each table that has such a limit; default hourly).
    /// Tables that lost families are compacted as soon as they do. `None`:
    /// no sweeper thread; call [`crate::EmbeddedStore::sweep_gc`] instead.
    pub gc_interval: Option<Duration>,
    /// Target size of the chunks `sample_row_keys` delimits (default: the
    /// table's size / 64, between 256 KiB and 256 MiB).
    pub split_target_bytes: Option<u64>,
    /// Table files RocksDB keeps open (each holds a file descriptor; past
    /// this many, the least used are closed and opened again when read).
    /// Default: half the process's open-file limit when the options are
    /// made ([`table_files_for`]), leaving the rest to connections and
    /// logs; a store of months of history has thousands of table files.
    pub max_open_files: i32,
}

/// The table files kept open under an open-file limit of `limit`: half of
/// it, at least 64.
pub(crate) fn table_files_for(limit: u64) -> i32 {
    (limit / 2).clamp(64, i32::MAX as u64) as i32
}

/// The process's soft open-file limit (1,024 where it cannot be read).
pub(crate) fn open_file_limit() -> u64 {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the limit into the struct it is given.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
            return limit.rlim_cur;
        }
    }
    1024
}

impl Default for EmbeddedOptions {
    fn default() -> EmbeddedOptions {
        EmbeddedOptions {
            sync_writes: true,
            block_cache_bytes: 256 << 20,
            write_buffer_bytes: 32 << 20,
            total_write_buffer_bytes: 512 << 20,
            background_jobs: 2,
            low_priority_compactions: false,
            gc_interval: Some(Duration::from_secs(3600)),
            split_target_bytes: None,
            max_open_files: table_files_for(open_file_limit()),
        }
    }
}

/// Options of the database as a whole.
pub(crate) fn db_options(options: &EmbeddedOptions) -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    opts.increase_parallelism(options.background_jobs.max(1));
    opts.set_max_background_jobs(options.background_jobs.max(1));
    // Keys are user-major, so each level-0 file spans the whole table and
    // its compaction rewrites the table's base level: split into key
    // ranges, it uses the idle cores after a burst instead of one.
    opts.set_max_subcompactions(options.background_jobs.max(1) as u32);
    opts.set_bytes_per_sync(1 << 20);
    opts.set_db_write_buffer_size(options.total_write_buffer_bytes);
    // A WAL file lives until every column family with data in it flushed;
    // past this size RocksDB flushes the idle ones (the metadata, quiet
    // tables) so old WAL files can go.
    opts.set_max_total_wal_size(options.total_write_buffer_bytes as u64);
    // Writers to the WAL and to memtables proceed as a pipeline.
    opts.set_enable_pipelined_write(true);
    opts.set_allow_concurrent_memtable_write(false);
    opts.set_keep_log_file_num(4);
    opts.set_max_open_files(options.max_open_files);
    if options.low_priority_compactions {
        // Only an optimisation: without an environment, compactions run
        // at normal priority.
        if let Ok(mut env) = rocksdb::Env::new() {
            env.lower_thread_pool_cpu_priority();
            opts.set_env(&env);
        }
    }
    opts
}

/// Options of the metadata column family (tiny, rarely written).
pub(crate) fn meta_cf_options() -> Options {
    let mut opts = Options::default();
    opts.set_write_buffer_size(1 << 20);
    opts
}

/// Options of a table's column family.
pub(crate) fn table_cf_options(options: &EmbeddedOptions, cache: &Cache, gc: GcSlot) -> Options {
    let mut block = BlockBasedOptions::default();
    block.set_block_cache(cache);
    block.set_block_size(16 << 10);
    // A row is one key: point reads and the read half of every write look
    // up whole keys, so a whole-key bloom filter skips files without the row.
    block.set_bloom_filter(10.0, false);
    block.set_whole_key_filtering(true);
    block.set_cache_index_and_filter_blocks(true);
    block.set_pin_l0_filter_and_index_blocks_in_cache(true);

    let mut opts = Options::default();
    opts.set_block_based_table_factory(&block);
    opts.set_compression_type(DBCompressionType::Lz4);
    // Level 0 (and 1) uncompressed, as TiKV configures RocksDB: flushes
    // skip LZ4 (a burst's flushes, and the flush of the rows reads stored
    // merged right after it), and reads of recent data skip decompressing
    // it; compactions compress as they move data down.
    opts.set_compression_per_level(&[
        DBCompressionType::None,
        DBCompressionType::None,
        DBCompressionType::Lz4,
        DBCompressionType::Lz4,
        DBCompressionType::Lz4,
        DBCompressionType::Lz4,
        DBCompressionType::Lz4,
    ]);
    opts.set_write_buffer_size(options.write_buffer_bytes);
    // A bloom filter over the memtable's whole keys: the read half of a
    // write (nearly always of a row not yet there, such as a new event)
    // skips the skiplist search.
    opts.set_memtable_whole_key_filtering(true);
    opts.set_memtable_prefix_bloom_ratio(0.02);
    // Room to absorb a burst while a flush runs, instead of stalling writers.
    opts.set_max_write_buffer_number(4);
    opts.set_level_compaction_dynamic_level_bytes(true);
    // Level 0 is compacted at 2 files, not 4: rows of blind adds are
    // partial operand lists until a compaction reaches their base, and a
    // read merges all of them, so fewer files mean fewer operands a read
    // merges.
    opts.set_level_zero_file_num_compaction_trigger(2);
    // Writes never merge a row's operands (that would read the row on the
    // write path): flushes and compactions combine them, and the row a
    // read merged from many is stored by the repair thread (`repairer.rs`).
    opts.set_max_successive_merges(0);
    opts.set_merge_operator(
        "affinity-row-writes",
        crate::merge::full_merge_fn(gc.clone()),
        crate::merge::partial_merge_fn(gc.clone()),
    );
    opts.set_compaction_filter_factory(GcFilterFactory::new(gc));
    // Rewrite files untouched for 3 days, so the compaction filter reclaims
    // expired cells (and tombstones go) even in data no write disturbs.
    opts.set_periodic_compaction_seconds(3 * 24 * 3600);
    opts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_the_open_file_limit_goes_to_table_files() {
        assert_eq!(table_files_for(1024), 512);
        assert_eq!(table_files_for(1 << 20), 1 << 19);
        assert_eq!(table_files_for(20), 64, "at least 64");
        assert_eq!(table_files_for(u64::MAX), i32::MAX, "an unlimited limit");
        assert!(open_file_limit() > 0);
        assert_eq!(
            EmbeddedOptions::default().max_open_files,
            table_files_for(open_file_limit())
        );
    }
}
