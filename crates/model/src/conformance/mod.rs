//! The conformance suite every storage backend runs (feature
//! `conformance`), in the manner of quickwit's `storage_test_suite`.
//!
//! A backend's test file needs one line:
//!
//! ```ignore
//! affinity_model::conformance_suite!(crate::harness());
//! ```
//!
//! The expression is evaluated at the start of every case and must yield a
//! [`Harness`] (cache an expensive store, e.g. in a `OnceLock`). The macro
//! expands to one `#[test]` per case, so test runners run them in parallel
//! and a failure names its case. Every case creates its own tables, named
//! `<case>-<random hex>`, so one store or emulator serves all cases at once,
//! and deletes them when it ends (also when it fails).
//!
//! Cases create column families in alphabetical order, through
//! `modify_families` after an empty `create_table`: the Bigtable emulator
//! returns families in creation order while the model's canonical order is
//! by name, and this makes both agree. GC cases poll for up to 10 s, since
//! Bigtable and its emulator collect garbage in the background.
//!
//! [`check_against_reference`] (or the [`reference_model_test!`](crate::reference_model_test) macro)
//! applies random operation sequences to a backend and to a
//! [`MemoryStore`](crate::MemoryStore) and compares every read.

mod admin;
mod aggregates;
mod concurrency;
mod filters;
mod gc;
mod limits;
mod mutations;
mod reads;
pub(crate) mod reference;
mod util;

use std::sync::Arc;

use crate::store::{Store, Table};
use crate::table_spec::{FamilyModification, GcRule, TableSpec};

pub use reference::{check_against_reference, ReferenceConfig};

/// The cases, one function each, as the macros call them.
pub mod cases {
    pub use super::admin::*;
    pub use super::aggregates::*;
    pub use super::concurrency::*;
    pub use super::filters::*;
    pub use super::gc::*;
    pub use super::limits::*;
    pub use super::mutations::*;
    pub use super::reads::*;
}

/// Documented differences between backends that the suite tolerates. Each
/// flag is `true` for a backend with Cloud Bigtable's full behaviour (the
/// default); a harness turns one off only for a difference its backend
/// really has. Build it as `Capabilities { flag: false,
/// ..Capabilities::default() }` so flags added later keep their default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// `Sink` sends cells straight to the output. The Bigtable emulator
    /// (cbtemulator) ignores `sink` and treats it as pass-all; with `false`
    /// the sink cases only check that a sink inside a condition is rejected.
    pub sink_filter: bool,
    /// Intersection GC rules are enforced. The emulator logs "Unsupported GC
    /// rule type" and never collects them; with `false` the intersection
    /// case is skipped.
    pub gc_intersection: bool,
    /// A read-modify-write whose later rule fails changes nothing. The
    /// emulator applies rules one by one and keeps those before the failing
    /// one; with `false` only single-rule failures are checked, and the
    /// reference test sends single-rule requests.
    pub atomic_read_modify_write_failure: bool,
    /// An increment of a cell that is not 8 bytes fails with
    /// `Error::InvalidIncrementTarget`. The emulator answers gRPC UNKNOWN
    /// with free text that a client cannot map reliably; with `false` the
    /// case checks only that the request fails and changes nothing.
    pub typed_increment_error: bool,
    /// `CellsPerRowOffset` and `CellsPerRowLimit` count a row's cells in
    /// canonical order across all its families. The emulator walks a row's
    /// families in Go map order, random on every call; with `false` these
    /// cases use single-family rows and the reference test does not generate
    /// these two filters.
    pub cells_per_row_across_families: bool,
    /// `StripValue` keeps a cell's labels. The emulator's strip drops them;
    /// with `false` the case does not check it and the reference test does
    /// not generate `StripValue`.
    pub strip_value_keeps_labels: bool,
    /// The longest row key a table takes: Bigtable's 4 KiB, less a
    /// `PrefixedTable`'s prefix (its tables' keys share the limit with
    /// it). Longer keys fail with `RowKeyTooLarge`.
    pub max_row_key_bytes: usize,
}

impl Default for Capabilities {
    fn default() -> Self {
        Capabilities {
            sink_filter: true,
            gc_intersection: true,
            atomic_read_modify_write_failure: true,
            typed_increment_error: true,
            cells_per_row_across_families: true,
            strip_value_keeps_labels: true,
            max_row_key_bytes: crate::limits::MAX_ROW_KEY_BYTES,
        }
    }
}

/// What a backend's tests hand to the suite.
pub trait Harness: Send + Sync + 'static {
    /// The store under test (may be shared by all cases).
    fn store(&self) -> Arc<dyn Store>;
    /// The backend's documented differences.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }
}

impl<H: Harness> Harness for Arc<H> {
    fn store(&self) -> Arc<dyn Store> {
        H::store(self)
    }
    fn capabilities(&self) -> Capabilities {
        H::capabilities(self)
    }
}

/// A harness over any store with default capabilities.
pub struct StoreHarness(pub Arc<dyn Store>);

impl Harness for StoreHarness {
    fn store(&self) -> Arc<dyn Store> {
        self.0.clone()
    }
}

/// What a case gets: the store, the capabilities and its name.
pub struct Ctx {
    store: Arc<dyn Store>,
    /// The backend's capabilities.
    pub caps: Capabilities,
    name: &'static str,
}

impl Ctx {
    /// The store under test.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// A fresh, unique table name for this case (at most 50 bytes).
    pub fn unique_name(&self) -> String {
        let mut base: String = self.name.chars().take(40).collect();
        base = base.replace(|c: char| !(c.is_ascii_alphanumeric() || c == '_'), "_");
        format!("{base}-{:08x}", rand::random::<u32>())
    }

    /// Create a table from `spec` (its families made with the table),
    /// deleted when the returned handle is dropped.
    pub fn table_with_spec(&self, spec: &TableSpec) -> TestTable {
        let name = self.unique_name();
        self.store
            .create_table(&name, spec)
            .unwrap_or_else(|e| panic!("create_table({name}): {e}"));
        let guard = TableGuard {
            store: self.store.clone(),
            name: name.clone(),
        };
        let table = self
            .store
            .open_table(&name)
            .unwrap_or_else(|e| panic!("open_table({name}): {e}"));
        TestTable {
            table,
            _guard: guard,
        }
    }

    /// Create a table with these families (created in alphabetical order),
    /// deleted when the returned handle is dropped.
    pub fn table(&self, families: &[(&str, GcRule)]) -> TestTable {
        let name = self.unique_name();
        self.store
            .create_table(&name, &TableSpec::new())
            .unwrap_or_else(|e| panic!("create_table({name}): {e}"));
        let guard = TableGuard {
            store: self.store.clone(),
            name: name.clone(),
        };
        let mut sorted: Vec<&(&str, GcRule)> = families.iter().collect();
        sorted.sort_by_key(|(f, _)| *f);
        if !sorted.is_empty() {
            let mods: Vec<FamilyModification> = sorted
                .iter()
                .map(|(f, rule)| FamilyModification::Create {
                    family: f.to_string(),
                    gc_rule: rule.clone(),
                })
                .collect();
            self.store
                .modify_families(&name, &mods)
                .unwrap_or_else(|e| panic!("modify_families({name}): {e}"));
        }
        let table = self
            .store
            .open_table(&name)
            .unwrap_or_else(|e| panic!("open_table({name}): {e}"));
        TestTable {
            table,
            _guard: guard,
        }
    }
}

/// Deletes a table on drop, ignoring errors (the case may have deleted it).
pub struct TableGuard {
    store: Arc<dyn Store>,
    name: String,
}

impl TableGuard {
    /// Delete `name` from `store` when dropped.
    pub fn new(store: Arc<dyn Store>, name: String) -> TableGuard {
        TableGuard { store, name }
    }
}

impl Drop for TableGuard {
    fn drop(&mut self) {
        let _ = self.store.delete_table(&self.name);
    }
}

/// A case's table, deleted on drop.
pub struct TestTable {
    table: Arc<dyn Table>,
    _guard: TableGuard,
}

impl TestTable {
    /// The table's name.
    pub fn name(&self) -> &str {
        &self._guard.name
    }
}

impl std::ops::Deref for TestTable {
    type Target = Arc<dyn Table>;
    fn deref(&self) -> &Arc<dyn Table> {
        &self.table
    }
}

/// Run one case against `harness` (what the generated tests call).
pub fn run_case<H: Harness + ?Sized>(harness: &H, name: &'static str, case: fn(&Ctx)) {
    let ctx = Ctx {
        store: harness.store(),
        caps: harness.capabilities(),
        name,
    };
    case(&ctx);
}

/// Expand to one `#[test]` per conformance case, in a module named
/// `conformance` (or the name given second), each running the case against
/// the harness `$harness` (an expression evaluated in that module, with the
/// caller's items in scope, e.g. `harness()` or `crate::harness()`).
/// Attributes written after the module name go on every test, e.g.
/// `conformance_suite!(harness(), conformance, #[ignore = "needs the
/// emulator"])` for a backend that is not always there.
#[macro_export]
macro_rules! conformance_suite {
    ($harness:expr $(,)?) => {
        $crate::conformance_suite!($harness, conformance);
    };
    ($harness:expr, $module:ident $(, #[$attr:meta])* $(,)?) => {
        $crate::__conformance_tests! { $module; [$(#[$attr])*]; $harness;
            filter_pass_all_and_block_all,
            filter_chain,
            filter_degenerate_chain_and_interleave,
            filter_interleave_keeps_duplicates,
            filter_condition_branches,
            filter_condition_labels_do_not_leak,
            filter_sink_in_chain_and_interleave,
            filter_sink_in_condition_is_rejected,
            filter_labels_on_interleave_copies,
            filter_invalid_labels_are_rejected,
            filter_row_key_regex,
            filter_family_regex,
            filter_qualifier_regex,
            filter_regex_bytes_and_newlines,
            filter_invalid_regex_is_rejected,
            filter_column_range,
            filter_timestamp_range,
            filter_value_regex,
            filter_value_range,
            filter_cells_per_row_offset,
            filter_cells_per_row_limit,
            filter_cells_per_column_limit,
            filter_strip_value,
            filter_row_sample,
            filter_invalid_arguments_are_rejected,
            set_cell_explicit_timestamp,
            set_cell_server_time,
            delete_from_column_time_range,
            delete_from_column_all_versions,
            delete_from_family,
            delete_from_row,
            mutations_apply_in_order,
            mutate_rows_per_entry_status,
            check_and_mutate_true_branch,
            check_and_mutate_false_branch,
            check_and_mutate_without_predicate,
            check_and_mutate_invalid_request_changes_nothing,
            check_and_mutate_unsynced_is_check_and_mutate,
            read_modify_write_append,
            read_modify_write_increment,
            read_modify_write_missing_cell,
            read_modify_write_bad_length_target,
            read_modify_write_failure_is_atomic,
            read_modify_write_rows_per_entry_status,
            sample_row_keys_shape,
            read_rows_keys_and_ranges,
            read_rows_open_and_closed_bounds,
            read_rows_limit,
            read_rows_reversed,
            read_rows_reversed_with_limit,
            read_rows_inverted_range_is_rejected,
            read_row_single,
            admin_create_list_delete,
            admin_table_spec,
            admin_modify_families,
            admin_missing_table_errors,
            admin_missing_family_errors,
            admin_duplicates,
            admin_invalid_names_and_rules,
            admin_drop_row_range,
            gc_max_versions,
            gc_max_age,
            gc_union,
            gc_intersection,
            limit_row_key_too_large,
            limit_empty_row_key,
            limit_qualifier_too_large,
            limit_value_too_large,
            limit_too_many_mutations,
            limit_no_mutations,
            limit_bad_family_name,
            limit_unknown_family,
            limit_timestamp_granularity,
            limit_negative_timestamp,
            limit_mutate_rows_total,
            atomic_row_mutation_visibility,
            concurrent_increments,
            aggregate_add_to_cell_sums,
            aggregate_family_type_is_enforced,
            mutate_rows_unsynced_is_mutate_rows,
            aggregate_deletes_and_gc,
            aggregate_check_and_mutate,
            aggregate_concurrent_adds,
            aggregate_table_spec,
        }
    };
}

/// Implementation detail of [`conformance_suite!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_tests {
    ($module:ident; $attrs:tt; $harness:expr; $($case:ident),* $(,)?) => {
        #[allow(unused_imports)]
        mod $module {
            use super::*;
            $(
                $crate::__conformance_test! { $attrs; $harness; $case }
            )*
        }
    };
}

/// Implementation detail of [`conformance_suite!`]: one case's test (the
/// attributes come as one bracketed group, usable at any repetition depth).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_test {
    ([$(#[$attr:meta])*]; $harness:expr; $case:ident) => {
        $(#[$attr])*
        #[test]
        fn $case() {
            let harness = $harness;
            $crate::conformance::run_case(
                &harness,
                stringify!($case),
                $crate::conformance::cases::$case,
            );
        }
    };
}

/// One `#[test]` named `reference_model` comparing the harness's store with
/// a `MemoryStore` over `$cases` random operation sequences. Attributes
/// written after the case count go on the test, as in [`conformance_suite!`].
#[macro_export]
macro_rules! reference_model_test {
    ($harness:expr $(,)?) => {
        $crate::reference_model_test!($harness, cases = 64);
    };
    ($harness:expr, cases = $cases:expr $(, #[$attr:meta])* $(,)?) => {
        $(#[$attr])*
        #[test]
        fn reference_model() {
            use $crate::conformance::Harness as _;
            let harness = $harness;
            $crate::conformance::check_against_reference(
                harness.store(),
                $crate::conformance::ReferenceConfig {
                    cases: $cases,
                    ..$crate::conformance::ReferenceConfig::for_capabilities(harness.capabilities())
                },
            );
        }
    };
}
