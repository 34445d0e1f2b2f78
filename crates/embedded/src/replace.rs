//! Whole rows written in key order ([`Table::replace_rows`]) as one
//! sorted file added to the table's column family at `finish`.
//!
//! A batch recompute writes each user's profile as a row replaced whole,
//! in key order. Through `mutate_rows`, each such row is a skiplist insert
//! into the memtable, a record in the log, and later part of a flush; as a
//! file, it is one append to a block being built, and the file is added to
//! the table below the memtable with one sync (RocksDB's external file
//! ingestion, which gives the file's rows a sequence number newer than
//! every earlier write, so they replace what the rows held). All the rows
//! land at once or none do.
//!
//! [`Table::replace_rows`]: affinity_model::Table::replace_rows

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use affinity_model::apply::now_micros;
use affinity_model::limits::{check_row_key, check_row_mutations};
use affinity_model::store::check_replaced_row;
use affinity_model::{Error, Mutation, Result, RowReplacer};
use rocksdb::{IngestExternalFileOptions, Options, SstFileWriter};

use crate::error::storage;
use crate::merge::encode_created_row;
use crate::meta::TableMeta;
use crate::store::Inner;

/// Where files being written wait to be added (under the store's
/// directory; emptied when the store opens).
pub(crate) const INGEST_DIR: &str = "ingest";

/// Numbers the files of this process (a store directory has one process).
static NEXT_FILE: AtomicU64 = AtomicU64::new(0);

/// The options files are built with: the table format of a table's column
/// family (see [`crate::options::table_cf_options`]), so they read as the
/// table's own files do.
static FILE_OPTIONS: LazyLock<Options> = LazyLock::new(crate::options::table_file_options);

/// A [`RowReplacer`] that writes one file.
pub(crate) struct FileReplacer<'t> {
    inner: &'t Inner,
    table: &'t str,
    /// The families the rows are encoded with; checked again at `finish`.
    meta: Arc<TableMeta>,
    now_micros: i64,
    /// The file, once a row is written.
    file: Option<(PathBuf, SstFileWriter<'static>)>,
    last_key: Option<Vec<u8>>,
    /// The lock stripes of the rows written.
    stripes: Vec<usize>,
}

impl<'t> FileReplacer<'t> {
    pub(crate) fn new(inner: &'t Inner, table: &'t str, meta: Arc<TableMeta>) -> FileReplacer<'t> {
        FileReplacer {
            inner,
            table,
            meta,
            now_micros: now_micros(),
            file: None,
            last_key: None,
            stripes: Vec::new(),
        }
    }

    /// The open file, created on first use.
    fn file(&mut self) -> Result<&mut SstFileWriter<'static>> {
        if self.file.is_none() {
            let dir = self.inner.db.path().join(INGEST_DIR);
            std::fs::create_dir_all(&dir)
                .map_err(|e| Error::Storage(format!("creating {}: {e}", dir.display())))?;
            let path = dir.join(format!("{}.sst", NEXT_FILE.fetch_add(1, Ordering::Relaxed)));
            let writer = SstFileWriter::create(&FILE_OPTIONS);
            writer.open(&path).map_err(storage)?;
            self.file = Some((path, writer));
        }
        match &mut self.file {
            Some((_, writer)) => Ok(writer),
            None => unreachable!("created above"),
        }
    }

    /// Add the file to the table, its rows' stripes held: no repair of a
    /// row read before can store its older merge over it (see
    /// `EmbeddedTable::store_merged`).
    fn ingest(&mut self, path: &std::path::Path) -> Result<()> {
        let inner = self.inner;
        self.stripes.sort_unstable();
        self.stripes.dedup();
        let _held = inner
            .locks
            .lock_mixed(self.stripes.iter().map(|&s| (s, false)).collect());
        let meta = inner.entry(self.table)?.meta();
        if !Arc::ptr_eq(&meta, &self.meta) {
            return Err(Error::Unavailable(format!(
                "table {:?} changed its families while rows were being replaced; retry",
                self.table
            )));
        }
        let cf = inner.cf(self.table, &meta)?;
        let mut options = IngestExternalFileOptions::default();
        options.set_move_files(true);
        inner
            .db
            .ingest_external_file_cf_opts(&cf, &options, vec![path])
            .map_err(storage)?;
        inner.locks.note_write(
            self.stripes.iter().copied(),
            inner.db.latest_sequence_number(),
        );
        Ok(())
    }
}

impl RowReplacer for FileReplacer<'_> {
    fn replace(&mut self, row_key: &[u8], cells: Vec<Mutation>) -> Result<()> {
        check_replaced_row(self.last_key.as_deref(), row_key, &cells)?;
        if cells.is_empty() {
            check_row_key(row_key)?;
        } else {
            check_row_mutations(self.table, row_key, &cells, &|f| self.meta.family_type(f))?;
        }
        let encoded = encode_created_row(&self.meta, &cells, self.now_micros)?
            .ok_or_else(|| Error::Internal("a replaced row holds only SetCells".into()))?;
        let stripe = self.inner.locks.stripe(self.table, row_key);
        let file = self.file()?;
        // Only the format byte: no cell (or GC hides every one).
        if encoded.len() > 1 {
            file.put(row_key, &encoded).map_err(storage)?;
        } else {
            file.delete(row_key).map_err(storage)?;
        }
        self.stripes.push(stripe);
        self.last_key = Some(row_key.to_vec());
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<()> {
        let Some((path, mut writer)) = self.file.take() else {
            return Ok(());
        };
        let result = writer
            .finish()
            .map_err(storage)
            .and_then(|()| self.ingest(&path));
        // Moved into the table on success (the name here is a second
        // link); nothing to keep on failure.
        let _ = std::fs::remove_file(&path);
        result
    }
}

impl Drop for FileReplacer<'_> {
    /// A replacer dropped without `finish` leaves no file behind.
    fn drop(&mut self) {
        if let Some((path, writer)) = self.file.take() {
            drop(writer);
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use affinity_model::{GcRule, Mutation, ReadRowsRequest, Store, TableSpec};

    use super::INGEST_DIR;
    use crate::{EmbeddedOptions, EmbeddedStore};

    fn open(dir: &std::path::Path) -> EmbeddedStore {
        let options = EmbeddedOptions {
            sync_writes: false,
            ..EmbeddedOptions::default()
        };
        EmbeddedStore::open_with(dir, options).expect("opens")
    }

    fn files(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir.join(INGEST_DIR)).map_or(0, |d| d.count())
    }

    fn values(store: &EmbeddedStore) -> Vec<String> {
        let table = store.open_table("t").expect("opens");
        table
            .read_rows(&ReadRowsRequest::all())
            .expect("reads")
            .map(|row| {
                let row = row.expect("row");
                let cells: Vec<String> = row
                    .cells
                    .iter()
                    .map(|c| String::from_utf8_lossy(&c.value).into_owned())
                    .collect();
                format!("{}={}", String::from_utf8_lossy(&row.key), cells.join(","))
            })
            .collect()
    }

    #[test]
    fn rows_land_at_finish_and_an_unfinished_replacer_leaves_nothing() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = open(dir.path());
        let spec = TableSpec::new().with_family("f", GcRule::None);
        store.create_table("t", &spec).expect("creates");
        let table = store.open_table("t").expect("opens");
        table
            .mutate_row(b"b", &[Mutation::set_cell("f", "q", 1000, "old")])
            .expect("writes");
        let set = |v: &str| vec![Mutation::set_cell("f", "q", 2000, v.to_string())];

        let mut replacer = table.replace_rows().expect("replacer");
        replacer.replace(b"a", set("a")).expect("replaces");
        replacer.replace(b"b", set("b")).expect("replaces");
        assert_eq!(values(&store), ["b=old"], "nothing shows before finish");
        assert_eq!(files(dir.path()), 1);
        drop(replacer);
        assert_eq!(files(dir.path()), 0, "a dropped replacer removes its file");
        assert_eq!(values(&store), ["b=old"]);

        let mut replacer = table.replace_rows().expect("replacer");
        replacer.replace(b"a", set("a")).expect("replaces");
        replacer.replace(b"b", set("b")).expect("replaces");
        replacer.replace(b"c", Vec::new()).expect("replaces");
        replacer.finish().expect("finishes");
        assert_eq!(files(dir.path()), 0, "the file moved into the table");
        assert_eq!(values(&store), ["a=a", "b=b"]);
        // Durable: there after a reopen.
        drop(table);
        drop(store);
        let store = open(dir.path());
        assert_eq!(values(&store), ["a=a", "b=b"]);
    }

    #[test]
    fn files_a_crash_left_are_removed_at_open() {
        let dir = tempfile::tempdir().expect("temporary directory");
        drop(open(dir.path()));
        std::fs::create_dir_all(dir.path().join(INGEST_DIR)).expect("creates");
        std::fs::write(dir.path().join(INGEST_DIR).join("7.sst"), b"half a file").expect("writes");
        drop(open(dir.path()));
        assert!(!dir.path().join(INGEST_DIR).exists());
    }
}
