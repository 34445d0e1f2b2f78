//! `BigtableTable`: one table's data operations over the v2 data API.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use affinity_model::{
    eval, limits, Error, FamilyType, Mutation, ReadModifyWriteOp, ReadModifyWriteRule,
    ReadRowsRequest, Result, Row, RowFilter, RowMutations, RowRules, RowStream, SampleRowKey,
    Table, TableSpec,
};
use bytes::Bytes;
use googleapis_tonic_google_bigtable_v2::google::bigtable::v2 as pb;

use crate::conn::Api;

/// Concurrent `ReadModifyWriteRow` calls of one `read_modify_write_rows`.
const RMW_CONCURRENCY: usize = 32;
use crate::convert::{filter_to_proto, mutations_to_proto, row_from_proto, rule_to_proto};
use crate::retry::retry;
use crate::status::from_status;
use crate::store::{get_spec, Shared};

/// A handle on one table. Holds the names of the table's families (loaded
/// when opened, reloaded when a mutation names one it does not know) so
/// requests are validated client-side with the same errors as the embedded
/// backend.
pub struct BigtableTable {
    shared: Arc<Shared>,
    name: String,
    /// `projects/{p}/instances/{i}/tables/{name}`.
    path: String,
    families: RwLock<Arc<Families>>,
}

/// A table's families and their types, as the client-side checks see them.
pub(crate) type Families = BTreeMap<String, FamilyType>;

fn family_names(spec: &TableSpec) -> Arc<Families> {
    Arc::new(
        spec.families
            .iter()
            .map(|(name, f)| (name.clone(), f.value_type))
            .collect(),
    )
}

impl BigtableTable {
    pub(crate) fn new(shared: Arc<Shared>, name: String, path: String, spec: &TableSpec) -> Self {
        BigtableTable {
            shared,
            name,
            path,
            families: RwLock::new(family_names(spec)),
        }
    }

    /// `projects/{p}/instances/{i}/tables/{name}`.
    pub fn path(&self) -> &str {
        &self.path
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    pub(crate) fn known_families(&self) -> Arc<Families> {
        match self.families.read() {
            Ok(f) => Arc::clone(&f),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    pub(crate) fn reload_families(&self) -> Result<Arc<Families>> {
        let (path, table) = (self.path.clone(), self.name.clone());
        let spec = self
            .shared
            .call(move |conn, policy| get_spec(conn, policy, path, table))?;
        let names = family_names(&spec);
        match self.families.write() {
            Ok(mut f) => *f = Arc::clone(&names),
            Err(poisoned) => *poisoned.into_inner() = Arc::clone(&names),
        }
        Ok(names)
    }

    /// Run a client-side check that consults the table's families; when it
    /// fails on an unknown family, reload the families once and check again
    /// (another client may have just created it).
    pub(crate) fn check_with_families(
        &self,
        check: impl Fn(&dyn Fn(&str) -> Option<FamilyType>) -> Result<()>,
    ) -> Result<()> {
        let known = self.known_families();
        match check(&|f: &str| known.get(f).copied()) {
            Err(Error::FamilyNotFound { .. }) => {
                let known = self.reload_families()?;
                check(&|f: &str| known.get(f).copied())
            }
            other => other,
        }
    }

    /// A request the server refused may name a family dropped since the
    /// families were loaded: reload them and run the client-side `check`
    /// again, so the error is the model's `FamilyNotFound` rather than the
    /// server's wording. Other errors come back unchanged.
    pub(crate) fn explain_failure(
        &self,
        err: Error,
        check: impl Fn(&dyn Fn(&str) -> Option<FamilyType>) -> Result<()>,
    ) -> Error {
        if !may_be_unknown_family(&err) {
            return err;
        }
        match self.reload_families() {
            Ok(known) => explain_with(&known, err, check),
            Err(_) => err,
        }
    }

    /// After a failed increment, find the cell that is not a 64-bit integer
    /// to name it in the error, as the embedded backend does.
    fn explain_increment_failure(
        &self,
        row_key: &[u8],
        rules: &[ReadModifyWriteRule],
    ) -> Option<Error> {
        let row = self.read_row(row_key, None).ok()??;
        rules.iter().find_map(|rule| {
            if !matches!(rule.op, ReadModifyWriteOp::Increment(_)) {
                return None;
            }
            let cell = row.latest(&rule.family, &rule.qualifier)?;
            (cell.value.len() != 8).then(|| Error::InvalidIncrementTarget {
                family: rule.family.to_string(),
                qualifier: String::from_utf8_lossy(&rule.qualifier).into_owned(),
                len: cell.value.len(),
            })
        })
    }
}

/// True for a refusal that an unknown family could explain.
pub(crate) fn may_be_unknown_family(err: &Error) -> bool {
    !err.is_retryable() && !matches!(err, Error::TableNotFound { .. })
}

/// `err`, or the `FamilyNotFound` that `check` finds with the families
/// `known`.
pub(crate) fn explain_with(
    known: &Families,
    err: Error,
    check: impl Fn(&dyn Fn(&str) -> Option<FamilyType>) -> Result<()>,
) -> Error {
    match check(&|f: &str| known.get(f).copied()) {
        Err(family_err @ Error::FamilyNotFound { .. }) => family_err,
        _ => err,
    }
}

impl Table for BigtableTable {
    fn name(&self) -> &str {
        &self.name
    }

    fn mutate_row(&self, row_key: &[u8], mutations: &[Mutation]) -> Result<()> {
        let check = |has: &dyn Fn(&str) -> Option<FamilyType>| {
            limits::check_row_mutations(&self.name, row_key, mutations, has)
        };
        self.check_with_families(check)?;
        let idempotent = mutations.iter().all(Mutation::is_idempotent);
        let request = pb::MutateRowRequest {
            table_name: self.path.clone(),
            app_profile_id: self.shared.app_profile.clone(),
            row_key: Bytes::copy_from_slice(row_key),
            mutations: mutations_to_proto(mutations),
            ..Default::default()
        };
        let table = self.name.clone();
        self.shared
            .call(move |conn, policy| async move {
                retry(policy, idempotent, || {
                    let (conn, request) = (conn.clone(), request.clone());
                    async move {
                        let path = request.table_name.clone();
                        let request = conn
                            .request(request, Api::Data, "table_name", &path)
                            .await?;
                        conn.data().mutate_row(request).await
                    }
                })
                .await
                .map(|_| ())
                .map_err(|s| from_status(&s, Some(&table)))
            })
            .map_err(|err| self.explain_failure(err, check))
    }

    fn mutate_rows(&self, entries: &[RowMutations]) -> Result<Vec<Result<()>>> {
        crate::mutate::mutate_rows(self, entries)
    }

    fn check_and_mutate_row(
        &self,
        row_key: &[u8],
        predicate: Option<&RowFilter>,
        true_mutations: &[Mutation],
        false_mutations: &[Mutation],
    ) -> Result<bool> {
        let check = |has: &dyn Fn(&str) -> Option<FamilyType>| {
            limits::check_check_and_mutate(
                &self.name,
                row_key,
                true_mutations,
                false_mutations,
                has,
            )
        };
        self.check_with_families(check)?;
        if let Some(predicate) = predicate {
            eval::validate(predicate)?;
        }
        let request = pb::CheckAndMutateRowRequest {
            table_name: self.path.clone(),
            app_profile_id: self.shared.app_profile.clone(),
            row_key: Bytes::copy_from_slice(row_key),
            predicate_filter: predicate.map(filter_to_proto).transpose()?,
            true_mutations: mutations_to_proto(true_mutations),
            false_mutations: mutations_to_proto(false_mutations),
            ..Default::default()
        };
        let table = self.name.clone();
        self.shared
            .call(move |conn, _| async move {
                let path = request.table_name.clone();
                let request = conn
                    .request(request, Api::Data, "table_name", &path)
                    .await
                    .map_err(|s| from_status(&s, Some(&table)))?;
                // Not retried: the predicate may see the first try's writes.
                let response = conn
                    .data()
                    .check_and_mutate_row(request)
                    .await
                    .map_err(|s| from_status(&s, Some(&table)))?;
                Ok(response.get_ref().predicate_matched)
            })
            .map_err(|err| self.explain_failure(err, check))
    }

    /// Bigtable has no batch read-modify-write: the entries go out as
    /// concurrent `ReadModifyWriteRow` calls, those of one row in order.
    fn read_modify_write_rows(&self, entries: &[RowRules]) -> Result<Vec<Result<Row>>> {
        let mut by_row: Vec<Vec<usize>> = Vec::new();
        let mut slot: std::collections::HashMap<&[u8], usize> = std::collections::HashMap::new();
        for (i, e) in entries.iter().enumerate() {
            let at = *slot.entry(&e.row_key).or_insert_with(|| {
                by_row.push(Vec::new());
                by_row.len() - 1
            });
            by_row[at].push(i);
        }
        let workers = RMW_CONCURRENCY.min(by_row.len()).max(1);
        let chunk = by_row.len().div_ceil(workers).max(1);
        let results: Vec<Vec<(usize, Result<Row>)>> = std::thread::scope(|s| {
            let handles: Vec<_> = by_row
                .chunks(chunk)
                .map(|rows| {
                    s.spawn(move || {
                        rows.iter()
                            .flatten()
                            .map(|&i| {
                                let e = &entries[i];
                                (i, self.read_modify_write_row(&e.row_key, &e.rules))
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect()
        });
        let mut statuses: Vec<Option<Result<Row>>> = entries.iter().map(|_| None).collect();
        for (i, status) in results.into_iter().flatten() {
            statuses[i] = Some(status);
        }
        Ok(statuses
            .into_iter()
            .map(|s| {
                s.unwrap_or_else(|| {
                    Err(Error::Internal("read-modify-write worker panicked".into()))
                })
            })
            .collect())
    }

    fn read_modify_write_row(&self, row_key: &[u8], rules: &[ReadModifyWriteRule]) -> Result<Row> {
        let check = |has: &dyn Fn(&str) -> Option<FamilyType>| {
            limits::check_read_modify_write(&self.name, row_key, rules, has)
        };
        self.check_with_families(check)?;
        let request = pb::ReadModifyWriteRowRequest {
            table_name: self.path.clone(),
            app_profile_id: self.shared.app_profile.clone(),
            row_key: Bytes::copy_from_slice(row_key),
            rules: rules.iter().map(rule_to_proto).collect(),
            ..Default::default()
        };
        let (table, key) = (self.name.clone(), Bytes::copy_from_slice(row_key));
        let result = self.shared.call(move |conn, _| async move {
            let path = request.table_name.clone();
            let request = conn
                .request(request, Api::Data, "table_name", &path)
                .await
                .map_err(|s| from_status(&s, Some(&table)))?;
            // Not retried: each try appends or increments again.
            let response = conn
                .data()
                .read_modify_write_row(request)
                .await
                .map_err(|s| from_status(&s, Some(&table)))?;
            let row = response.into_inner().row.unwrap_or_default();
            let mut row = row_from_proto(row);
            if row.key.is_empty() {
                row.key = key;
            }
            Ok(row)
        });
        match result {
            // Servers word this failure differently (the emulator says
            // "unknown: increment on non-64-bit value"): look at the row.
            Err(err) if may_be_unknown_family(&err) => Err(self
                .explain_increment_failure(row_key, rules)
                .unwrap_or(err)),
            other => other,
        }
    }

    fn sample_row_keys(&self) -> Result<Vec<SampleRowKey>> {
        let (path, table) = (self.path.clone(), self.name.clone());
        let profile = self.shared.app_profile.clone();
        self.shared.call(move |conn, policy| async move {
            retry(policy, true, || {
                let (conn, path, profile) = (conn.clone(), path.clone(), profile.clone());
                async move {
                    let request = pb::SampleRowKeysRequest {
                        table_name: path.clone(),
                        app_profile_id: profile,
                        ..Default::default()
                    };
                    let request = conn
                        .request(request, Api::Data, "table_name", &path)
                        .await?;
                    let mut stream = conn.data().sample_row_keys(request).await?.into_inner();
                    let mut samples = Vec::new();
                    while let Some(sample) = stream.message().await? {
                        samples.push(SampleRowKey {
                            row_key: sample.row_key,
                            offset_bytes: sample.offset_bytes,
                        });
                    }
                    Ok(samples)
                }
            })
            .await
            .map_err(|s| from_status(&s, Some(&table)))
        })
    }

    fn read_rows(&self, request: &ReadRowsRequest) -> Result<RowStream<'_>> {
        crate::read::read_rows(self, request)
    }
}
