//! The recorder a [`ZoneHost`] carries while it is recorded: every call and effect is appended
//! to a bounded in-memory buffer that the driver takes and writes elsewhere (never on the
//! simulation thread's time).

use std::hash::Hasher;

use super::format::{encode_input_record, encode_record, Record, StopReason, StreamState};
use super::header::{encode_header, Header};
use crate::call::Call;
use crate::fact::Fact;
use crate::hash::StateHasher;
use crate::player::PlayerId;

/// Default size cap of one recording (64 MiB).
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;
/// Default bound on recorded bytes waiting in memory for the driver (8 MiB).
pub const DEFAULT_MAX_BUFFERED: usize = 8 << 20;
/// Room kept below the size cap for the end record.
const END_RESERVE: u64 = 512;
/// Longest writer failure message kept in an end record.
const MAX_REASON: usize = 256;

/// A recording's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordLimits {
    /// Size cap of the whole recording, header included: the record that would pass it stops
    /// the recording ([`StopReason::SizeCap`]).
    pub max_bytes: u64,
    /// Most bytes waiting in memory for [`ZoneHost::take_recorded`](crate::ZoneHost::take_recorded): past it the recording stops
    /// ([`StopReason::BufferFull`]).
    pub max_buffered: usize,
}

impl Default for RecordLimits {
    fn default() -> Self {
        Self {
            max_bytes: DEFAULT_MAX_BYTES,
            max_buffered: DEFAULT_MAX_BUFFERED,
        }
    }
}

/// Where a recording stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordingStatus {
    /// Bytes recorded so far, header included.
    pub bytes: u64,
    /// Ticks recorded.
    pub ticks: u64,
    /// Set once the recording stopped, with why.
    pub stopped: Option<StopReason>,
}

/// Why a recording could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartRecordingError {
    /// The zone is recorded already.
    #[error("the zone is being recorded already")]
    AlreadyRecording,
    /// A running zone is recorded from its snapshot, and this kind saves none.
    #[error("zones of kind {0:?} save no snapshot, so a running one cannot be recorded (record it from its creation)")]
    NotRestorable(String),
    /// The host was disposed.
    #[error("the zone has ended")]
    Disposed,
    /// The header (with its snapshot) alone passes the size cap.
    #[error("the recording's header is {header} bytes, over the size cap of {cap}")]
    TooLarge {
        /// Header bytes.
        header: u64,
        /// The cap.
        cap: u64,
    },
}

/// A recording in progress (or stopped, until its last bytes are taken).
#[derive(Debug)]
pub(crate) struct Recorder {
    out: Vec<u8>,
    scratch: Vec<u8>,
    state: StreamState,
    bytes: u64,
    ticks: u64,
    limits: RecordLimits,
    stopped: Option<StopReason>,
}

impl Recorder {
    /// A recorder whose stream starts with `header` (written unless `silent`: a replay's own
    /// recorder only produces records to compare).
    pub(crate) fn new(
        header: &Header,
        limits: RecordLimits,
        silent: bool,
    ) -> Result<Self, StartRecordingError> {
        let mut out = Vec::new();
        if !silent {
            encode_header(&mut out, header);
        }
        let bytes = out.len() as u64;
        if bytes.saturating_add(END_RESERVE) > limits.max_bytes {
            return Err(StartRecordingError::TooLarge {
                header: bytes,
                cap: limits.max_bytes,
            });
        }
        Ok(Self {
            out,
            scratch: Vec::with_capacity(64),
            state: StreamState {
                last_time: u64::try_from(header.start.as_nanos()).unwrap_or(u64::MAX),
                tick: header.start_tick,
            },
            bytes,
            ticks: 0,
            limits,
            stopped: None,
        })
    }

    pub(crate) fn active(&self) -> bool {
        self.stopped.is_none()
    }

    /// Append one record, stopping at the size cap or the buffer bound.
    pub(crate) fn record(&mut self, record: &Record) {
        if self.stopped.is_some() {
            return;
        }
        let (before, state) = (self.out.len(), self.state);
        encode_record(&mut self.out, &mut self.scratch, &mut self.state, record);
        self.appended(before, state, matches!(record, Record::Tick { .. }));
    }

    /// Append an input record (see [`encode_input_record`]).
    pub(crate) fn record_input(&mut self, input: (PlayerId, u32, u32, &[u8])) {
        if self.stopped.is_some() {
            return;
        }
        let (before, state) = (self.out.len(), self.state);
        encode_input_record(&mut self.out, &mut self.scratch, &self.state, input);
        self.appended(before, state, false);
    }

    /// Account for what the last record added since `before` (stream state then `state`):
    /// undone, with the recording stopped, past the size cap; stopped past the buffer bound.
    fn appended(&mut self, before: usize, state: StreamState, tick: bool) {
        let added = (self.out.len() - before) as u64;
        if self.bytes.saturating_add(added).saturating_add(END_RESERVE) > self.limits.max_bytes {
            self.out.truncate(before);
            self.state = state;
            self.stop(StopReason::SizeCap);
            return;
        }
        self.bytes += added;
        if tick {
            self.ticks += 1;
        }
        if self.out.len() > self.limits.max_buffered {
            self.stop(StopReason::BufferFull);
        }
    }

    /// Write the end record (once) and stop.
    pub(crate) fn stop(&mut self, reason: StopReason) {
        if self.stopped.is_some() {
            return;
        }
        let reason = match reason {
            StopReason::WriterFailed(mut s) if s.len() > MAX_REASON => {
                let kept = zonekeep_protocol::limits::clip(&s, MAX_REASON).len();
                s.truncate(kept);
                StopReason::WriterFailed(s)
            }
            r => r,
        };
        let before = self.out.len();
        encode_record(
            &mut self.out,
            &mut self.scratch,
            &mut self.state,
            &Record::End(reason.clone()),
        );
        self.bytes += (self.out.len() - before) as u64;
        self.stopped = Some(reason);
    }

    pub(crate) fn status(&self) -> RecordingStatus {
        RecordingStatus {
            bytes: self.bytes,
            ticks: self.ticks,
            stopped: self.stopped.clone(),
        }
    }

    pub(crate) fn take(&mut self) -> Vec<u8> {
        // The next step records about as much as this one did: one allocation of that size now
        // saves the doublings the buffer would go through growing to it again.
        let room = self.out.len();
        std::mem::replace(&mut self.out, Vec::with_capacity(room))
    }
}

/// Count and hash of drained facts.
pub(crate) fn facts_digest(facts: &[Fact]) -> Record {
    let mut h = StateHasher::new();
    for f in facts {
        h.write(f.key.as_str().as_bytes());
        h.write_u8(0xff);
        h.write(f.kind.as_bytes());
        h.write_u8(0xff);
        if let Some(p) = &f.principal {
            h.write(p.as_bytes());
        }
        h.write_u8(0xff);
        h.write(f.payload.to_string().as_bytes());
        h.write_u64(f.tick);
    }
    Record::Facts {
        count: u32::try_from(facts.len()).unwrap_or(u32::MAX),
        hash: h.finish(),
    }
}

/// Count and hash of drained calls.
pub(crate) fn calls_digest(calls: &[Call]) -> Record {
    let mut h = StateHasher::new();
    for c in calls {
        h.write(c.key.as_str().as_bytes());
        h.write_u8(0xff);
        h.write(c.function.as_bytes());
        h.write_u8(0xff);
        h.write(c.args.to_string().as_bytes());
        h.write_u64(c.tick);
    }
    Record::Calls {
        count: u32::try_from(calls.len()).unwrap_or(u32::MAX),
        hash: h.finish(),
    }
}
