//! `BigtableStore`: the admin side (tables and families) and the shared
//! connection every table handle uses.

use std::sync::Arc;

use affinity_model::{limits, Error, FamilyModification, Result, Store, Table, TableSpec};
use googleapis_tonic_google_bigtable_admin_v2::google::bigtable::admin::v2 as admin;

use crate::admin_convert::{family_to_proto, modification_to_proto, spec_from_proto};
use crate::conn::{Api, Conn, Target};
use crate::retry::{retry, RetryPolicy};
use crate::runtime::Bridge;
use crate::status::from_status;
use crate::table::BigtableTable;

/// Read-ahead a streaming read may buffer before it pauses the server.
pub const DEFAULT_READ_BUFFER_BYTES: usize = 64 * 1024 * 1024;

/// What every handle of one connection shares. Never moved into a task (the
/// runtime it owns must not end up owned by its own workers).
pub(crate) struct Shared {
    pub(crate) bridge: Bridge,
    pub(crate) conn: Conn,
    pub(crate) retry: RetryPolicy,
    pub(crate) read_buffer_bytes: usize,
    /// The app profile data requests name (empty: the instance's default).
    pub(crate) app_profile: String,
}

impl Shared {
    /// Run an async call with a clone of the connection, synchronously.
    pub(crate) fn call<T, F, Fut>(&self, f: F) -> Result<T>
    where
        F: FnOnce(Conn, RetryPolicy) -> Fut,
        Fut: std::future::Future<Output = Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        self.bridge.run(f(self.conn.clone(), self.retry))
    }
}

/// A Cloud Bigtable instance (or the emulator) behind the model's [`Store`]
/// trait. Cheap to clone; clones share one connection and runtime.
#[derive(Clone)]
pub struct BigtableStore {
    shared: Arc<Shared>,
    /// `projects/{project}/instances/{instance}`.
    parent: String,
}

/// Options for [`BigtableStore::builder`].
#[derive(Debug, Clone)]
pub struct BigtableStoreBuilder {
    project: String,
    instance: String,
    target: Option<Target>,
    retry: RetryPolicy,
    read_buffer_bytes: usize,
    app_profile: String,
}

impl BigtableStoreBuilder {
    /// Send data requests under this app profile (its routing and
    /// isolation: serving apart from batch); empty is the default one.
    pub fn app_profile(mut self, id: impl Into<String>) -> Self {
        self.app_profile = id.into();
        self
    }

    /// Talk to the emulator at `host:port` whatever the environment says.
    pub fn emulator_host(mut self, host: impl Into<String>) -> Self {
        self.target = Some(Target::Emulator(host.into()));
        self
    }

    /// Where to connect (default: [`Target::from_env`]).
    pub fn target(mut self, target: Target) -> Self {
        self.target = Some(target);
        self
    }

    /// Retry policy for idempotent calls and streaming reads.
    pub fn retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Bytes of rows a streaming read buffers ahead of its consumer before
    /// it cancels the server stream (it resumes after the last row once the
    /// consumer catches up). Default [`DEFAULT_READ_BUFFER_BYTES`].
    pub fn read_buffer_bytes(mut self, bytes: usize) -> Self {
        self.read_buffer_bytes = bytes.max(1);
        self
    }

    /// Connect.
    pub fn connect(self) -> Result<BigtableStore> {
        for (what, name) in [("project", &self.project), ("instance", &self.instance)] {
            if name.is_empty() || name.contains('/') {
                return Err(Error::InvalidArgument(format!(
                    "invalid bigtable {what} {name:?}: must be non-empty without '/'"
                )));
            }
        }
        let target = self.target.unwrap_or_else(Target::from_env);
        let bridge = Bridge::new()?;
        let conn = bridge.run(async move { Conn::connect(&target).await })?;
        Ok(BigtableStore {
            shared: Arc::new(Shared {
                bridge,
                conn,
                retry: self.retry,
                read_buffer_bytes: self.read_buffer_bytes,
                app_profile: self.app_profile,
            }),
            parent: format!("projects/{}/instances/{}", self.project, self.instance),
        })
    }
}

impl BigtableStore {
    /// Connect to `projects/{project}/instances/{instance}`: the emulator
    /// when `BIGTABLE_EMULATOR_HOST` is set (plaintext, no auth), otherwise
    /// Cloud Bigtable with Application Default Credentials.
    pub fn connect(project: &str, instance: &str) -> Result<BigtableStore> {
        BigtableStore::builder(project, instance).connect()
    }

    /// Connect with options.
    pub fn builder(project: &str, instance: &str) -> BigtableStoreBuilder {
        BigtableStoreBuilder {
            project: project.to_string(),
            instance: instance.to_string(),
            target: None,
            retry: RetryPolicy::default(),
            read_buffer_bytes: DEFAULT_READ_BUFFER_BYTES,
            app_profile: String::new(),
        }
    }

    /// Another instance over the same connection (tests give each case its
    /// own instance on one emulator this way).
    pub fn with_instance(&self, project: &str, instance: &str) -> BigtableStore {
        BigtableStore {
            shared: Arc::clone(&self.shared),
            parent: format!("projects/{project}/instances/{instance}"),
        }
    }

    /// `projects/{project}/instances/{instance}`.
    pub fn instance_name(&self) -> &str {
        &self.parent
    }

    fn table_path(&self, table: &str) -> String {
        format!("{}/tables/{table}", self.parent)
    }

    /// Typed handle on a table (what [`Store::open_table`] returns).
    pub fn table(&self, table: &str) -> Result<BigtableTable> {
        let spec = self.table_spec(table)?;
        Ok(BigtableTable::new(
            Arc::clone(&self.shared),
            table.to_string(),
            self.table_path(table),
            &spec,
        ))
    }
}

/// The spec of `path`, as the admin API describes it.
pub(crate) async fn get_spec(
    conn: Conn,
    policy: RetryPolicy,
    path: String,
    table: String,
) -> Result<TableSpec> {
    let response = retry(policy, true, || {
        let (conn, path) = (conn.clone(), path.clone());
        async move {
            let request = admin::GetTableRequest {
                name: path.clone(),
                view: admin::table::View::SchemaView as i32,
            };
            let request = conn.request(request, Api::Admin, "name", &path).await?;
            conn.admin().get_table(request).await
        }
    })
    .await
    .map_err(|s| from_status(&s, Some(&table)))?;
    spec_from_proto(response.get_ref())
}

impl Store for BigtableStore {
    fn create_table(&self, table: &str, spec: &TableSpec) -> Result<()> {
        limits::check_table_name(table)?;
        spec.validate()?;
        let mut proto = admin::Table::default();
        for (name, family) in &spec.families {
            proto
                .column_families
                .insert(name.clone(), family_to_proto(family)?);
        }
        let request = admin::CreateTableRequest {
            parent: self.parent.clone(),
            table_id: table.to_string(),
            table: Some(proto),
            initial_splits: Vec::new(),
        };
        let (parent, table) = (self.parent.clone(), table.to_string());
        self.shared.call(move |conn, _| async move {
            let request = conn
                .request(request, Api::Admin, "parent", &parent)
                .await
                .map_err(|s| from_status(&s, Some(&table)))?;
            match conn.admin().create_table(request).await {
                Ok(_) => Ok(()),
                Err(s) => Err(from_status(&s, Some(&table))),
            }
        })
    }

    fn delete_table(&self, table: &str) -> Result<()> {
        limits::check_table_name(table)?;
        let (path, table) = (self.table_path(table), table.to_string());
        self.shared.call(move |conn, policy| async move {
            // Deleting is idempotent, but a retry after a lost success would
            // report not-found: only retry what never reached the server.
            retry(policy, false, || {
                let (conn, path) = (conn.clone(), path.clone());
                async move {
                    let request = admin::DeleteTableRequest { name: path.clone() };
                    let request = conn.request(request, Api::Admin, "name", &path).await?;
                    conn.admin().delete_table(request).await
                }
            })
            .await
            .map(|_| ())
            .map_err(|s| from_status(&s, Some(&table)))
        })
    }

    fn list_tables(&self) -> Result<Vec<String>> {
        let parent = self.parent.clone();
        self.shared.call(move |conn, policy| async move {
            let prefix = format!("{parent}/tables/");
            let mut names = Vec::new();
            let mut page_token = String::new();
            loop {
                let response = retry(policy, true, || {
                    let (conn, parent, page_token) =
                        (conn.clone(), parent.clone(), page_token.clone());
                    async move {
                        let request = admin::ListTablesRequest {
                            parent: parent.clone(),
                            view: admin::table::View::NameOnly as i32,
                            page_size: 0,
                            page_token,
                        };
                        let request = conn.request(request, Api::Admin, "parent", &parent).await?;
                        conn.admin().list_tables(request).await
                    }
                })
                .await
                .map_err(|s| from_status(&s, None))?
                .into_inner();
                for table in response.tables {
                    let name = table.name.strip_prefix(&prefix).unwrap_or(&table.name);
                    names.push(name.to_string());
                }
                if response.next_page_token.is_empty() {
                    break;
                }
                page_token = response.next_page_token;
            }
            names.sort();
            Ok(names)
        })
    }

    fn table_spec(&self, table: &str) -> Result<TableSpec> {
        limits::check_table_name(table)?;
        let (path, table) = (self.table_path(table), table.to_string());
        self.shared
            .call(move |conn, policy| get_spec(conn, policy, path, table))
    }

    fn modify_families(
        &self,
        table: &str,
        modifications: &[FamilyModification],
    ) -> Result<TableSpec> {
        // Validate everything against the current spec first, so the errors
        // are the model's and nothing is applied when one modification is
        // wrong.
        let current = self.table_spec(table)?;
        let expected = current.apply_modifications(table, modifications)?;
        if modifications.is_empty() {
            return Ok(expected);
        }
        let request = admin::ModifyColumnFamiliesRequest {
            name: self.table_path(table),
            modifications: modifications
                .iter()
                .map(modification_to_proto)
                .collect::<Result<_>>()?,
            ignore_warnings: false,
        };
        let table = table.to_string();
        self.shared.call(move |conn, _| async move {
            let path = request.name.clone();
            let request = conn
                .request(request, Api::Admin, "name", &path)
                .await
                .map_err(|s| from_status(&s, Some(&table)))?;
            let response = conn
                .admin()
                .modify_column_families(request)
                .await
                .map_err(|s| from_status(&s, Some(&table)))?;
            spec_from_proto(response.get_ref())
        })
    }

    fn open_table(&self, table: &str) -> Result<Arc<dyn Table>> {
        Ok(Arc::new(self.table(table)?))
    }

    fn drop_row_range(&self, table: &str, prefix: &[u8]) -> Result<()> {
        limits::check_table_name(table)?;
        limits::check_row_key_prefix(prefix)?;
        let (path, table) = (self.table_path(table), table.to_string());
        let prefix = prefix.to_vec();
        self.shared.call(move |conn, policy| async move {
            // Dropping rows is idempotent: a retry after a lost success
            // drops nothing more.
            retry(policy, true, || {
                let (conn, path, prefix) = (conn.clone(), path.clone(), prefix.clone());
                async move {
                    let request = admin::DropRowRangeRequest {
                        name: path.clone(),
                        target: Some(admin::drop_row_range_request::Target::RowKeyPrefix(
                            prefix.into(),
                        )),
                    };
                    let request = conn.request(request, Api::Admin, "name", &path).await?;
                    conn.admin().drop_row_range(request).await
                }
            })
            .await
            .map(|_| ())
            .map_err(|s| from_status(&s, Some(&table)))
        })
    }
}
