//! `MutateRows`: per-entry statuses, and retries of only the entries that
//! failed with a retryable code and are idempotent.

use affinity_model::{limits, Error, Mutation, Result, RowMutations};

use crate::table::Families;
use googleapis_tonic_google_bigtable_v2::google::bigtable::v2 as pb;
use tonic::Code;

use crate::conn::{Api, Conn};
use crate::convert::mutations_to_proto;
use crate::retry::RetryPolicy;
use crate::status::{from_rpc_status, from_status, is_retryable, is_retryable_code};
use crate::table::{explain_with, may_be_unknown_family, BigtableTable};

/// An entry still to be applied.
struct Pending {
    /// Its index in the caller's slice.
    index: usize,
    entry: pb::mutate_rows_request::Entry,
    idempotent: bool,
}

pub(crate) fn mutate_rows(
    table: &BigtableTable,
    entries: &[RowMutations],
) -> Result<Vec<Result<()>>> {
    limits::check_mutate_rows(entries)?;
    let name = affinity_model::Table::name(table).to_string();
    let mut results: Vec<Option<Result<()>>> = vec![None; entries.len()];
    let mut pending = Vec::with_capacity(entries.len());
    // Families are reloaded at most once per call, at the first unknown one.
    let mut known = table.known_families();
    let mut reloaded = false;
    for (index, entry) in entries.iter().enumerate() {
        let check = |known: &Families| {
            limits::check_row_mutations(&name, &entry.row_key, &entry.mutations, &|f: &str| {
                known.get(f).copied()
            })
        };
        let mut checked = check(&known);
        if matches!(checked, Err(Error::FamilyNotFound { .. })) && !reloaded {
            known = table.reload_families()?;
            reloaded = true;
            checked = check(&known);
        }
        match checked {
            Ok(()) => pending.push(Pending {
                index,
                entry: pb::mutate_rows_request::Entry {
                    row_key: entry.row_key.clone(),
                    mutations: mutations_to_proto(&entry.mutations),
                    idempotency: None,
                },
                idempotent: entry.mutations.iter().all(Mutation::is_idempotent),
            }),
            // Only the whole table going away fails the whole request.
            Err(err @ Error::TableNotFound { .. }) => return Err(err),
            Err(err) => results[index] = Some(Err(err)),
        }
    }
    if !pending.is_empty() {
        let path = table.path().to_string();
        let table_name = name.clone();
        let profile = table.shared().app_profile.clone();
        let applied = table
            .shared()
            .call(move |conn, policy| apply(conn, policy, (path, profile), table_name, pending))?;
        // Entries the server refused may name a family dropped since the
        // families were loaded: reload once and name it.
        let known = applied
            .iter()
            .any(|(_, r)| r.as_ref().is_err_and(may_be_unknown_family))
            .then(|| table.reload_families().ok())
            .flatten();
        for (index, result) in applied {
            let entry = &entries[index];
            results[index] = Some(result.map_err(|err| match &known {
                Some(known) if may_be_unknown_family(&err) => explain_with(known, err, |has| {
                    limits::check_row_mutations(&name, &entry.row_key, &entry.mutations, has)
                }),
                _ => err,
            }));
        }
    }
    Ok(results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Error::Internal("entry was never sent".into()))))
        .collect())
}

/// Send the entries, retrying the retryable idempotent failures; returns
/// each entry's outcome by index. Fails as a whole when a call fails before
/// any entry status came back and it cannot be retried.
async fn apply(
    conn: Conn,
    policy: RetryPolicy,
    (path, profile): (String, String),
    table: String,
    mut pending: Vec<Pending>,
) -> Result<Vec<(usize, Result<()>)>> {
    let mut done = Vec::with_capacity(pending.len());
    let mut attempt = 0;
    loop {
        attempt += 1;
        let request = pb::MutateRowsRequest {
            table_name: path.clone(),
            app_profile_id: profile.clone(),
            entries: pending.iter().map(|p| p.entry.clone()).collect(),
            ..Default::default()
        };
        let mut statuses: Vec<Option<(Code, String)>> = vec![None; pending.len()];
        let call = async {
            let request = conn
                .request(request, Api::Data, "table_name", &path)
                .await?;
            let mut stream = conn.data().mutate_rows(request).await?.into_inner();
            while let Some(response) = stream.message().await? {
                for entry in response.entries {
                    let slot = usize::try_from(entry.index)
                        .ok()
                        .and_then(|i| statuses.get_mut(i));
                    if let Some(slot) = slot {
                        let status = entry.status.unwrap_or_default();
                        *slot = Some((Code::from_i32(status.code), status.message));
                    }
                }
            }
            Ok::<(), tonic::Status>(())
        };
        let call_error = call.await.err();
        let may_retry = policy.may_retry(attempt);
        if let Some(status) = &call_error {
            let none_answered = statuses.iter().all(Option::is_none);
            if none_answered && !(is_retryable(status) && may_retry) {
                return Err(from_status(status, Some(&table)));
            }
        }
        let mut again = Vec::new();
        for (p, status) in pending.into_iter().zip(statuses) {
            // The entry's outcome and whether trying it again may help.
            let outcome = match (status, &call_error) {
                (Some((Code::Ok, _)), _) => Ok(()),
                (Some((code, message)), _) => Err((
                    is_retryable_code(code),
                    from_rpc_status(code as i32, &message, Some(&table)),
                )),
                (None, Some(s)) => Err((is_retryable(s), from_status(s, Some(&table)))),
                (None, None) => Err((
                    true,
                    Error::Unavailable("the server returned no status for this entry".into()),
                )),
            };
            match outcome {
                Ok(()) => done.push((p.index, Ok(()))),
                Err((true, _)) if p.idempotent && may_retry => again.push(p),
                Err((_, err)) => done.push((p.index, Err(err))),
            }
        }
        if again.is_empty() {
            return Ok(done);
        }
        tracing::debug!(
            table,
            attempt,
            entries = again.len(),
            "retrying failed mutate_rows entries"
        );
        tokio::time::sleep(policy.backoff(attempt)).await;
        pending = again;
    }
}
