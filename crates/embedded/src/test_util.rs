//! Helpers shared by the crate's unit tests.

use affinity_model::apply::apply_mutations;
use affinity_model::gc::visible_cells;
use affinity_model::{Cell, GcRule, Mutation, TableSpec};

use crate::meta::TableMeta;

/// The cells the reference model (`MemoryStore`'s semantics) keeps of a
/// row that starts empty and takes `writes`, each at its clock: the
/// visible cells, the mutations in order, GC on the result.
pub(crate) fn reference(meta: &TableMeta, writes: &[(Vec<Mutation>, i64)]) -> Vec<Cell> {
    let spec = meta.spec();
    let mut cells = Vec::new();
    for (mutations, now) in writes {
        cells = visible_cells(&spec, cells, *now);
        apply_mutations(&mut cells, mutations, *now);
        cells = visible_cells(&spec, cells, *now);
    }
    cells
}

/// A table of families `a` (no GC), `v` (one version) and `s` (sums, no
/// GC).
pub(crate) fn sample_meta() -> TableMeta {
    let spec = TableSpec::new()
        .with_family("a", GcRule::None)
        .with_family("v", GcRule::MaxVersions(1))
        .with_sum_family("s", GcRule::None);
    TableMeta::from_spec("cf".into(), &spec)
}
