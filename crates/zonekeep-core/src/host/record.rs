//! Recording calls: the [`ZoneHost`] side of [`crate::recording`]. Every call in passes
//! through [`ZoneHost::tap`], which costs one branch when nothing is recorded.

use std::time::Duration;

use super::ZoneHost;
use crate::recording::{
    Header, Origin, Outcome, Record, RecordLimits, Recorder, RecordingStatus, StartRecordingError,
    StopReason,
};

impl ZoneHost {
    /// Start recording this zone: from here on every call in, every clock reading, the state
    /// hash after each tick and a digest of the frames and facts handed out are appended to an
    /// in-memory buffer bounded by `limits`, which the driver takes with
    /// [`take_recorded`](ZoneHost::take_recorded) and writes wherever it likes (off the
    /// simulation thread).
    ///
    /// A host that nothing has been called on since it was created is recorded from its
    /// creation (a replay creates the zone afresh); otherwise, between two `advance` calls, from
    /// its [`image`](ZoneHost::image) (a replay builds the zone from it and checks the state
    /// hash first), or, for a kind that keeps no image, from its
    /// [`snapshot`](ZoneHost::snapshot) and the participants connected now (a replay restores,
    /// rejoins them and checks the state hash, which differs where the save leaves state out).
    pub fn start_recording(&mut self, limits: RecordLimits) -> Result<(), StartRecordingError> {
        if self.disposed {
            return Err(StartRecordingError::Disposed);
        }
        if self.recorder.as_ref().is_some_and(|r| r.active()) {
            return Err(StartRecordingError::AlreadyRecording);
        }
        let header = self.recording_header()?;
        self.recorder = Some(Box::new(Recorder::new(&header, limits, false)?));
        Ok(())
    }

    /// The header a recording starting now begins with.
    fn recording_header(&self) -> Result<Header, StartRecordingError> {
        // A restored host's schedule starts at its clock reading with slot 1 next; this reading
        // puts the next slot at the time this host's next slot is due.
        let resumed_start = self.next_tick_due().saturating_sub(self.core.dt);
        let image = if self.touched {
            self.image().ok()
        } else {
            None
        };
        let (start, origin) = if let Some(image) = image {
            let state_hash = self.state_hash().unwrap_or(0);
            (resumed_start, Origin::Image { image, state_hash })
        } else if self.touched {
            let envelope = self
                .snapshot()
                .ok_or_else(|| StartRecordingError::NotRestorable(self.init.kind.clone()))?;
            let start = resumed_start;
            let connected = self
                .core
                .roster
                .values()
                .filter(|p| p.connected)
                .map(|p| p.id)
                .collect();
            let state_hash = self.state_hash().unwrap_or(0);
            (
                start,
                Origin::Snapshot {
                    envelope,
                    state_hash,
                    connected,
                },
            )
        } else {
            (self.start, Origin::Created)
        };
        Ok(Header {
            zone_id: self.init.zone_id.clone(),
            kind: self.init.kind.clone(),
            params: self.init.params.to_string(),
            config: self.config.clone(),
            boot_epoch: self.core.facts.boot_epoch(),
            start,
            start_tick: self.core.tick,
            origin,
        })
    }

    /// Record into a buffer nobody writes: a replay compares these records with the file's.
    pub(crate) fn start_silent_recording(&mut self, header: &Header) {
        let limits = RecordLimits {
            max_bytes: u64::MAX,
            max_buffered: usize::MAX,
        };
        self.recorder = Recorder::new(header, limits, true).ok().map(Box::new);
    }

    /// The recording's status, while one is attached (running, or stopped with bytes left).
    pub fn recording_status(&self) -> Option<RecordingStatus> {
        self.recorder.as_ref().map(|r| r.status())
    }

    /// Take the bytes recorded since the last call (empty when nothing is recorded). A driver
    /// calls it after each `advance` and hands the bytes to its writer.
    pub fn take_recorded(&mut self) -> Vec<u8> {
        self.recorder.as_mut().map(|r| r.take()).unwrap_or_default()
    }

    /// Stop the recording with `reason`: its end record joins the bytes still to take. The
    /// recorder stays attached (its status readable) until [`end_recording`](ZoneHost::end_recording).
    pub fn stop_recording(&mut self, reason: StopReason) {
        if let Some(r) = self.recorder.as_mut() {
            r.stop(reason);
        }
    }

    /// Detach the recorder (stopping it as requested if it still runs): the bytes not yet taken
    /// and the final status.
    pub fn end_recording(&mut self) -> Option<(Vec<u8>, RecordingStatus)> {
        let mut r = self.recorder.take()?;
        r.stop(StopReason::Requested);
        Some((r.take(), r.status()))
    }

    /// The running recorder, after marking the host as called (a recording started later
    /// starts from a snapshot).
    pub(crate) fn tap(&mut self) -> Option<&mut Recorder> {
        self.touched = true;
        self.recorder.as_deref_mut().filter(|r| r.active())
    }

    /// Record an effect, when recording.
    pub(crate) fn tap_effect(&mut self, record: Record) {
        if let Some(r) = self.recorder.as_deref_mut().filter(|r| r.active()) {
            r.record(&record);
        }
    }

    /// Whether a recording is running.
    pub(crate) fn recording(&self) -> bool {
        self.recorder.as_ref().is_some_and(|r| r.active())
    }

    /// Read the injected clock (recorded: a replay hands the host the same readings).
    pub(crate) fn read_clock(&mut self) -> Duration {
        let now = self.clock.now();
        if let Some(r) = self.recorder.as_deref_mut().filter(|r| r.active()) {
            r.record(&Record::Clock(now));
        }
        now
    }

    /// Record the state hash after a tick.
    pub(crate) fn tap_tick(&mut self) {
        if self.recording() {
            let hash = self.state_hash().unwrap_or(0);
            let tick = self.core.tick;
            self.tap_effect(Record::Tick { tick, hash });
        }
    }

    /// Record a call's participant argument.
    pub(crate) fn tap_call(&mut self, make: impl FnOnce() -> Record) {
        if let Some(r) = self.tap() {
            r.record(&make());
        }
    }

    /// Record what a player-related call returned.
    pub(crate) fn tap_player_outcome(&mut self, result: Result<(), Outcome>) {
        if self.recording() {
            self.tap_effect(Record::Outcome(match result {
                Ok(()) => Outcome::Ok,
                Err(o) => o,
            }));
        }
    }
}
