//! The removed batch recompute's API, kept only so `crates/bench` builds
//! until it moves to [`Engine::export`] and the read path; remove it with
//! that change. Batch profiles are no longer stored: a "recompute" here is
//! an export whose profiles are dropped, and a "batch profile" the user's
//! profile scored from the events table (what a recompute stored).

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

    /// The user's profile scored from the events table under the current
    /// strategy, with its version.
    #[doc(hidden)]
    pub fn batch_profile(&self, app: &str, user: &str) -> Result<Option<(Profile, i64)>> {
        let Some((strategy, version)) = self.strategy_version(app)? else {
            return Ok(None);
        };
        let handle = self.app(app)?;
        let window = handle.config.window_start_day(self.now_millis());
        let scores = self.scores_from_events(&handle, user, &strategy.weights(), window)?;
        Ok(scores.map(|(last, scores)| (scores.into_profile(user, last), version)))
    }
}
