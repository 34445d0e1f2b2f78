//! Choosing a backend from the command line: the embedded store in a data
//! directory (the default) or Cloud Bigtable (or its emulator). The flags
//! are global: they go before or after the subcommand, as `git -C` does.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use affinity_model::Store;
use anyhow::{bail, Context};

/// The data directory when neither `--data` nor `AFFINITY_DATA` says.
const DEFAULT_DATA: &str = "affinity-data";

/// Where the data lives. `--bigtable` wins over `--data`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct BackendArgs {
    /// Directory of the embedded store, created if missing (default:
    /// $AFFINITY_DATA, else ./affinity-data; for `affinity demo`:
    /// ./affinity-demo-data; for `affinity bench`: a new temporary
    /// directory each run, while a directory given here keeps its data
    /// from run to run).
    #[arg(long, global = true, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Use Cloud Bigtable instead: PROJECT/INSTANCE (default:
    /// $AFFINITY_BIGTABLE, except for `bench`). Set
    /// BIGTABLE_EMULATOR_HOST=host:port to talk to the emulator, and
    /// AFFINITY_BIGTABLE_APP_PROFILE to send data requests under an app
    /// profile.
    #[arg(long, global = true, value_name = "PROJECT/INSTANCE")]
    pub bigtable: Option<String>,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl BackendArgs {
    /// The embedded store's directory: `--data`, `AFFINITY_DATA`, or
    /// `./affinity-data`.
    pub fn data_dir(&self) -> PathBuf {
        self.data
            .clone()
            .or_else(|| env("AFFINITY_DATA").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA))
    }

    /// The Cloud Bigtable instance: `--bigtable` or `AFFINITY_BIGTABLE`.
    pub fn bigtable_spec(&self) -> Option<String> {
        self.bigtable.clone().or_else(|| env("AFFINITY_BIGTABLE"))
    }

    /// Open the chosen backend.
    pub fn open(&self) -> anyhow::Result<Arc<dyn Store>> {
        match self.bigtable_spec() {
            Some(spec) => {
                let (project, instance) = parse_instance(&spec)?;
                // Serving and batch processes name different app profiles
                // (routing, isolation); unset is the instance's default.
                let profile = env("AFFINITY_BIGTABLE_APP_PROFILE").unwrap_or_default();
                let store = affinity_bigtable::BigtableStore::builder(project, instance)
                    .app_profile(profile)
                    .connect()
                    .with_context(|| format!("connecting to Cloud Bigtable {spec}"))?;
                Ok(Arc::new(store))
            }
            None => Ok(open_embedded(&self.data_dir())?),
        }
    }

    /// Refuse the flags `command` has no use for (`data`, `bigtable`), so
    /// a flag given is never silently ignored.
    pub fn refuse(&self, command: &str, data: bool, bigtable: bool) -> anyhow::Result<()> {
        if data && self.data.is_some() {
            bail!("--data is not an option of {command}");
        }
        if bigtable && self.bigtable.is_some() {
            bail!("--bigtable is not an option of {command}");
        }
        Ok(())
    }

    /// True for the store on this machine (its reads are fast enough to
    /// run on the HTTP server's async workers).
    pub fn is_local(&self) -> bool {
        self.bigtable_spec().is_none()
    }

    /// A short description for messages.
    pub fn describe(&self) -> String {
        match self.bigtable_spec() {
            Some(spec) => match std::env::var("BIGTABLE_EMULATOR_HOST") {
                Ok(host) => format!("Bigtable emulator at {host} ({spec})"),
                Err(_) => format!("Cloud Bigtable {spec}"),
            },
            None => format!("embedded store in {}", self.data_dir().display()),
        }
    }
}

/// Open the embedded store in `dir`.
pub fn open_embedded(dir: &Path) -> anyhow::Result<Arc<affinity_embedded::EmbeddedStore>> {
    let store = affinity_embedded::EmbeddedStore::open(dir)
        .with_context(|| format!("opening the embedded store in {}", dir.display()))?;
    Ok(Arc::new(store))
}

/// Split `PROJECT/INSTANCE`.
pub fn parse_instance(spec: &str) -> anyhow::Result<(&str, &str)> {
    match spec.split_once('/') {
        Some((p, i)) if !p.is_empty() && !i.is_empty() && !i.contains('/') => Ok((p, i)),
        _ => bail!("--bigtable must be PROJECT/INSTANCE, got {spec:?}"),
    }
}
