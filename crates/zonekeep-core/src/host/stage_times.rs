//! Timing a zone's stages on the stage clock (see [`crate::stages`]).

use std::time::Duration;

use crate::stages::{Stage, StageClock, StageDurations, StageTimes};
use crate::ZoneHost;

/// Frame builds per timed one (the first of every run of this many is timed).
pub const BUILDS_PER_SAMPLE: u64 = 16;

impl ZoneHost {
    /// Times every stage of this zone's work on `clock` from now on (`None`, the default: no
    /// stage is timed and nothing is read). Use a clock of its own, never the zone's: stage
    /// times are diagnostics, and the zone's clock readings are recorded for replays.
    pub fn set_stage_clock(&mut self, clock: Option<std::sync::Arc<dyn crate::Clock>>) {
        let clock = clock.map(StageClock);
        self.replicator.set_stage_clock(clock.clone());
        self.stage_clock = clock;
    }

    /// The recent durations of every stage (empty without a stage clock).
    pub fn stage_times(&self) -> &StageTimes {
        &self.stages
    }

    /// Records a stage the host times itself (inputs checked as they arrive, handing frames to
    /// connections, a save or a fact commit): kept with the zone's own stages. Ignored without
    /// a stage clock.
    pub fn record_stage(&mut self, stage: Stage, took: Duration) {
        if let Some(clock) = &self.stage_clock {
            let now = clock.now();
            self.stages.record(stage, took, now);
            self.stage_pending.add(stage, took);
        }
    }

    /// Every stage's summed duration since the last call, for metrics.
    pub fn take_stage_durations(&mut self) -> StageDurations {
        std::mem::take(&mut self.stage_pending)
    }

    /// The stage clock's reading, when stages are timed.
    pub(crate) fn stage_now(&self) -> Option<Duration> {
        self.stage_clock.as_ref().map(StageClock::now)
    }

    /// Records that `stage` ran from `since` until now; now, to time the next stage from.
    pub(crate) fn stage_done(&mut self, stage: Stage, since: Option<Duration>) -> Option<Duration> {
        let (clock, since) = (self.stage_clock.as_ref()?, since?);
        let now = clock.now();
        let took = now.saturating_sub(since);
        self.stages.record(stage, took, now);
        self.stage_pending.add(stage, took);
        Some(now)
    }

    /// Whether this frame build is timed, and when it started: one build in
    /// [`BUILDS_PER_SAMPLE`] is, so the clock readings around every subscriber's view are paid
    /// for a sixteenth of the patches.
    pub(crate) fn stage_build_start(&mut self) -> Option<Duration> {
        self.stage_clock.as_ref()?;
        self.stage_builds = self.stage_builds.wrapping_add(1);
        let sampled = self.stage_builds % BUILDS_PER_SAMPLE == 1;
        self.replicator.time_next_build(sampled);
        if sampled {
            self.stage_now()
        } else {
            None
        }
    }

    /// Records a frame build that started at `since`: its interest and budget work as
    /// measured inside the replicator, and the rest as encoding.
    pub(crate) fn stage_build_done(&mut self, since: Option<Duration>) {
        let (Some(clock), Some(since)) = (self.stage_clock.as_ref(), since) else {
            return;
        };
        let now = clock.now();
        let total = now.saturating_sub(since);
        let (interest, budget) = self.replicator.take_stage_times();
        let encode = total.saturating_sub(interest).saturating_sub(budget);
        for (stage, took) in [
            (Stage::Interest, interest),
            (Stage::Encode, encode),
            (Stage::Budget, budget),
        ] {
            if stage == Stage::Budget && took.is_zero() {
                continue;
            }
            self.stages.record(stage, took, now);
            self.stage_pending.add(stage, took);
        }
    }
}
