//! A test knob for crash tests: stopping this host's transfer worker at one step of every move,
//! so a test can kill a host exactly there (docs/ARCHITECTURE.md, "Transfers under crashes").
//!
//! Off unless `ZONEKEEP_CHAOS_TRANSFER_PAUSE` names a step (`pending`, `admitted` or
//! `accepted`). At that step the worker logs `transfer paused at chaos step` (with the step and
//! the transfer id) and waits: until the file named by `ZONEKEEP_CHAOS_TRANSFER_RELEASE` exists
//! when that is set, otherwise for good (the test kills the host). Nothing else changes: the
//! move goes on exactly as it would have, only later.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

/// The environment variable naming the step to pause at.
pub const PAUSE_VAR: &str = "ZONEKEEP_CHAOS_TRANSFER_PAUSE";
/// The environment variable naming the file whose appearance ends a pause.
pub const RELEASE_VAR: &str = "ZONEKEEP_CHAOS_TRANSFER_RELEASE";
/// How often a paused move looks for the release file.
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// A step of a move where the knob can stop it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// The source wrote the pending record and has not asked the target yet.
    Pending,
    /// The target admitted the player and has not recorded its acceptance yet.
    Admitted,
    /// The acceptance is recorded and the source zone has not been told (on the source host:
    /// before it tells its zone; on a target host asked over the bus: before it answers).
    Accepted,
}

impl Step {
    fn parse(text: &str) -> Option<Step> {
        match text {
            "pending" => Some(Step::Pending),
            "admitted" => Some(Step::Admitted),
            "accepted" => Some(Step::Accepted),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Step::Pending => "pending",
            Step::Admitted => "admitted",
            Step::Accepted => "accepted",
        }
    }
}

/// The knob as this process was started with: the step, and the release file if any.
fn knob() -> &'static Option<(Step, Option<PathBuf>)> {
    static KNOB: OnceLock<Option<(Step, Option<PathBuf>)>> = OnceLock::new();
    KNOB.get_or_init(|| {
        let step = Step::parse(std::env::var(PAUSE_VAR).ok()?.trim())?;
        let release = std::env::var_os(RELEASE_VAR).map(PathBuf::from);
        tracing::warn!(
            step = step.as_str(),
            "test knob {PAUSE_VAR} is set: every move pauses at this step"
        );
        Some((step, release))
    })
}

/// Waits here when the knob names `step` (returns at once otherwise, the production case).
pub(super) async fn at(step: Step, transfer: &str) {
    let Some((paused, release)) = knob() else {
        return;
    };
    if *paused != step {
        return;
    }
    tracing::warn!(step = step.as_str(), %transfer, "transfer paused at chaos step");
    match release {
        Some(file) => {
            while !file.exists() {
                tokio::time::sleep(LOOK_EVERY).await;
            }
            tracing::warn!(step = step.as_str(), %transfer, "transfer released at chaos step");
        }
        None => std::future::pending::<()>().await,
    }
}
