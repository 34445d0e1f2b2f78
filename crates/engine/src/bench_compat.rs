//! The removed batch recompute's API, kept only so `crates/bench` builds
//! until it moves to [`Engine::export`] and the read path; remove it with
//! that change. Batch profiles are no longer stored: a "recompute" here is
//! an export whose profiles are dropped, and a "batch profile" the profile
//! a read answers.

use crate::batch::Progress;
use crate::engine::Engine;
use crate::error::Result;
use crate::export::{ExportOptions, ExportReport};
use crate::scoring::Profile;

/// [`ExportOptions`] under its old name.
pub type RecomputeOptions = ExportOptions;
/// [`ExportReport`] under its old name.
pub type RecomputeReport = ExportReport;

impl Engine {
    /// An export under the current strategy that drops the profiles.
    #[doc(hidden)]
    pub fn recompute(
        &self,
        app: &str,
        options: RecomputeOptions,
        progress: &Progress,
    ) -> Result<RecomputeReport> {
        let drop = |_: &str, _: &[u8]| -> std::io::Result<()> { Ok(()) };
        self.export(app, options, None, &drop, progress)
    }

    /// The profile a read answers, with the current strategy's version.
    #[doc(hidden)]
    pub fn batch_profile(&self, app: &str, user: &str) -> Result<Option<(Profile, i64)>> {
        let Some((strategy, version)) = self.strategy_version(app)? else {
            return Ok(None);
        };
        Ok(self
            .profile_with(app, user, &strategy)?
            .map(|profile| (profile, version)))
    }
}
