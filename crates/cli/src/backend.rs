//! Choosing a backend from the command line: the embedded store in a data
//! directory (the default) or Cloud Bigtable (or its emulator).

use std::path::PathBuf;
use std::sync::Arc;

use affinity_model::Store;
use anyhow::{bail, Context};

/// Where the data lives. `--bigtable` wins over `--data`.
#[derive(clap::Args, Debug, Clone)]
pub struct BackendArgs {
    /// Directory of the embedded store (created if missing).
    #[arg(
        long,
        env = "AFFINITY_DATA",
        default_value = "affinity-data",
        global = true
    )]
    pub data: PathBuf,
    /// Use Cloud Bigtable instead: PROJECT/INSTANCE. Set
    /// BIGTABLE_EMULATOR_HOST=host:port to talk to the emulator.
    #[arg(
        long,
        env = "AFFINITY_BIGTABLE",
        value_name = "PROJECT/INSTANCE",
        global = true
    )]
    pub bigtable: Option<String>,
}

impl BackendArgs {
    /// Open the chosen backend.
    pub fn open(&self) -> anyhow::Result<Arc<dyn Store>> {
        match &self.bigtable {
            Some(spec) => {
                let (project, instance) = parse_instance(spec)?;
                let store = affinity_bigtable::BigtableStore::connect(project, instance)
                    .with_context(|| format!("connecting to Cloud Bigtable {spec}"))?;
                Ok(Arc::new(store))
            }
            None => Ok(self.open_embedded()?),
        }
    }

    /// Open the embedded store in `--data` (whatever `--bigtable` says).
    pub fn open_embedded(&self) -> anyhow::Result<Arc<affinity_embedded::EmbeddedStore>> {
        let store = affinity_embedded::EmbeddedStore::open(&self.data)
            .with_context(|| format!("opening the embedded store in {}", self.data.display()))?;
        Ok(Arc::new(store))
    }

    /// True for the store on this machine (its reads are fast enough to
    /// run on the HTTP server's async workers).
    pub fn is_local(&self) -> bool {
        self.bigtable.is_none()
    }

    /// A short description for messages.
    pub fn describe(&self) -> String {
        match &self.bigtable {
            Some(spec) => match std::env::var("BIGTABLE_EMULATOR_HOST") {
                Ok(host) => format!("Bigtable emulator at {host} ({spec})"),
                Err(_) => format!("Cloud Bigtable {spec}"),
            },
            None => format!("embedded store in {}", self.data.display()),
        }
    }
}

/// Split `PROJECT/INSTANCE`.
pub fn parse_instance(spec: &str) -> anyhow::Result<(&str, &str)> {
    match spec.split_once('/') {
        Some((p, i)) if !p.is_empty() && !i.is_empty() && !i.contains('/') => Ok((p, i)),
        _ => bail!("--bigtable must be PROJECT/INSTANCE, got {spec:?}"),
    }
}
