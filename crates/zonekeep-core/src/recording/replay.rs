//! Replaying a recording: a fresh host of the recorded kind (from the same [`ZoneKinds`] a
//! server registers) is handed the recorded calls and clock readings, and everything it does
//! is compared with what the recorded host did, up to the first difference.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use zonekeep_protocol::wire::Reader;

use super::format::{Record, RecordingError, StopReason, StreamState};
use super::header::{Header, Origin};
use super::read::RecordReader;
use crate::clock::Clock;
use crate::error::ZoneError;
use crate::host::ZoneHost;
use crate::image::ImageError;
use crate::kinds::ZoneKinds;
use crate::player::{Claims, Principal};
use crate::snapshot::RestoreError;
use crate::zone::ZoneInit;

/// Calls kept for a divergence report: the most recent ones since the last matching tick.
const MAX_STIMULI: usize = 256;

/// A clock that hands out recorded readings in order (then repeats the last): the replayed
/// host reads exactly what the recorded host read.
#[derive(Debug)]
pub struct ScriptedClock {
    script: Mutex<(VecDeque<Duration>, Duration)>,
}

impl ScriptedClock {
    /// A clock reading `start` until scripted.
    pub fn new(start: Duration) -> Self {
        Self {
            script: Mutex::new((VecDeque::new(), start)),
        }
    }

    /// The readings the next calls of [`Clock::now`] return, replacing any left over.
    pub fn script(&self, readings: impl IntoIterator<Item = Duration>) {
        let mut s = self.script.lock().unwrap_or_else(|p| p.into_inner());
        s.0.clear();
        s.0.extend(readings);
    }
}

impl Clock for ScriptedClock {
    fn now(&self) -> Duration {
        let mut s = self.script.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = s.0.pop_front() {
            s.1 = t;
        }
        s.1
    }
}

/// Why a recording could not be replayed at all (a divergence is a [`ReplayReport`], not this).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// The file is not a readable recording.
    #[error(transparent)]
    Recording(#[from] RecordingError),
    /// The replaying host has no zone kind of this name.
    #[error("unknown zone kind {0:?} (not registered here)")]
    UnknownKind(String),
    /// The zone could not be created or restored from the recording's header.
    #[error("the recorded zone could not be started: {0}")]
    Start(String),
}

/// Where a replay first differed from the recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// The tick it showed at (the tick whose state hash differs, or the last tick run).
    pub tick: u64,
    /// The last tick whose state hash matched, if any.
    pub last_match: Option<u64>,
    /// What the recording holds there.
    pub expected: String,
    /// What the replay did instead.
    pub actual: String,
    /// The calls since the last matching tick (the most recent 256), oldest first.
    pub stimuli: Vec<String>,
    /// Earlier calls since the last matching tick left out of `stimuli`.
    pub stimuli_omitted: u64,
}

/// The outcome of a replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayReport {
    /// The recorded zone's id.
    pub zone_id: String,
    /// Its kind.
    pub kind: String,
    /// Whether the recording starts at the zone's creation (else from an image or a snapshot).
    pub from_creation: bool,
    /// Whether the recording starts from a zone image (see [`crate::image`]).
    pub from_image: bool,
    /// The tick the recording starts after.
    pub start_tick: u64,
    /// Tick state hashes that matched.
    pub ticks_matched: u64,
    /// Calls replayed.
    pub calls: u64,
    /// Why the recording stopped; `None` when the file has no end record (it was cut short).
    pub ended: Option<StopReason>,
    /// Frame digests were compared (a recording started from an image or a snapshot while
    /// participants were connected can only compare frame counts: their replication state is
    /// not kept).
    pub frames_compared: bool,
    /// The first difference, if any.
    pub divergence: Option<Divergence>,
    /// The tick at which the replayed zone's game code failed, and why ([`ZoneHost::failure`]):
    /// a module's budget trap is deterministic, so its replay fails at the same tick.
    pub failure: Option<(u64, String)>,
}

impl ReplayReport {
    /// Whether the replay matched the recording all the way.
    pub fn matched(&self) -> bool {
        self.divergence.is_none()
    }
}

impl std::fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let origin = if self.from_creation {
            "its creation".to_owned()
        } else if self.from_image {
            format!("its image at tick {}", self.start_tick)
        } else {
            format!("a snapshot at tick {}", self.start_tick)
        };
        writeln!(
            f,
            "zone {:?} of kind {:?}, recorded from {origin}",
            self.zone_id, self.kind
        )?;
        if !self.frames_compared {
            writeln!(f, "frames: counts compared only (participants were connected when the recording started)")?;
        }
        if let Some((tick, why)) = &self.failure {
            writeln!(f, "the zone's game code failed at tick {tick}: {why}")?;
        }
        match &self.divergence {
            None => {
                write!(
                    f,
                    "MATCH: {} ticks and {} calls replayed, every state hash, outcome and frame digest equal",
                    self.ticks_matched, self.calls
                )?;
                match &self.ended {
                    Some(why) => write!(f, " (recording ended: {why})"),
                    None => write!(f, " (the recording has no end record: it was cut short)"),
                }
            }
            Some(d) => {
                writeln!(f, "DIVERGED at tick {}", d.tick)?;
                match d.last_match {
                    Some(t) => writeln!(f, "last matching tick: {t}")?,
                    None => writeln!(f, "no tick matched before")?,
                }
                writeln!(f, "expected: {}", d.expected)?;
                writeln!(f, "actual:   {}", d.actual)?;
                writeln!(f, "stimuli since the last matching tick:")?;
                if d.stimuli_omitted > 0 {
                    writeln!(f, "  ... {} earlier calls", d.stimuli_omitted)?;
                }
                for s in &d.stimuli {
                    writeln!(f, "  {s}")?;
                }
                Ok(())
            }
        }
    }
}

/// Replay the recording in `bytes` with a zone of its kind from `kinds`.
pub fn replay(kinds: &ZoneKinds, bytes: &[u8]) -> Result<ReplayReport, ReplayError> {
    let (header, reader) = RecordReader::open(bytes)?;
    Replay::start(kinds, header)?.run(reader)
}

/// A replay in progress.
struct Replay {
    host: ZoneHost,
    clock: Arc<ScriptedClock>,
    /// Decodes what the replayed host records.
    actual_state: StreamState,
    report: ReplayReport,
    last_match: Option<u64>,
    stimuli: VecDeque<String>,
    stimuli_omitted: u64,
}

fn start_error(kind: &str, e: ZoneError) -> ReplayError {
    match e {
        ZoneError::UnknownKind(_) => ReplayError::UnknownKind(kind.to_owned()),
        e => ReplayError::Start(e.to_string()),
    }
}

impl Replay {
    fn start(kinds: &ZoneKinds, header: Header) -> Result<Self, ReplayError> {
        let params = serde_json::from_str(&header.params).map_err(|e| {
            ReplayError::Recording(RecordingError::Corrupt {
                offset: super::format::PREAMBLE_LEN,
                reason: format!("create params: {e}"),
            })
        })?;
        let init = ZoneInit {
            zone_id: header.zone_id.clone(),
            kind: header.kind.clone(),
            params,
        };
        let clock = Arc::new(ScriptedClock::new(header.start));
        let dyn_clock: Arc<dyn Clock> = clock.clone();
        let config = header.config.clone();
        let kind = header.kind.as_str();
        let mut divergence = None;
        let (host, frames_compared) = match &header.origin {
            Origin::Created => (
                kinds
                    .create_at(init, config, dyn_clock, header.boot_epoch)
                    .map_err(|e| start_error(kind, e))?,
                true,
            ),
            Origin::Image { image, state_hash } => {
                let host =
                    kinds
                        .from_image(init, config, dyn_clock, image)
                        .map_err(|e| match e {
                            ImageError::Zone(z) => start_error(kind, z),
                            e => ReplayError::Start(format!("the recorded zone image: {e}")),
                        })?;
                let actual = host.state_hash().unwrap_or(0);
                let connected = host.players().any(|p| p.connected);
                // Subscribers start from a BASELINE here, not from what the original had sent:
                // with anyone connected, frames are compared by count.
                let mut replay = Self::new(host, clock, &header, !connected);
                if actual != *state_hash {
                    replay.report.divergence = Some(Divergence {
                        tick: header.start_tick,
                        last_match: None,
                        expected: format!(
                            "state hash {state_hash:016x} when the recording started"
                        ),
                        actual: format!(
                            "state hash {actual:016x} after building the zone from its image"
                        ),
                        stimuli: vec!["build from the recorded image".into()],
                        stimuli_omitted: 0,
                    });
                }
                return Ok(replay);
            }
            Origin::Snapshot {
                envelope,
                state_hash,
                connected,
            } => {
                let mut host = kinds
                    .restore(init, config, dyn_clock, header.boot_epoch, envelope)
                    .map_err(|e| match e {
                        RestoreError::Zone(z) => start_error(kind, z),
                        e => ReplayError::Start(e.to_string()),
                    })?;
                for p in connected {
                    if let Err(e) = host.handle_rejoin(*p) {
                        divergence.get_or_insert(format!("{p} could not rejoin: {e}"));
                    }
                }
                let actual = host.state_hash().unwrap_or(0);
                if divergence.is_none() && actual != *state_hash {
                    divergence = Some(format!("state hash {actual:016x} after the restore (this kind's save leaves out state its hash covers)"));
                }
                let expected = format!("state hash {state_hash:016x} when the recording started");
                let divergence = divergence.map(|actual| Divergence {
                    tick: header.start_tick,
                    last_match: None,
                    expected,
                    actual,
                    stimuli: vec!["restore from the recorded snapshot".into()],
                    stimuli_omitted: 0,
                });
                let mut replay = Self::new(host, clock, &header, connected.is_empty());
                if divergence.is_some() {
                    replay.report.divergence = divergence;
                }
                return Ok(replay);
            }
        };
        Ok(Self::new(host, clock, &header, frames_compared))
    }

    fn new(
        mut host: ZoneHost,
        clock: Arc<ScriptedClock>,
        header: &Header,
        frames_compared: bool,
    ) -> Self {
        host.start_silent_recording(header);
        Self {
            host,
            clock,
            actual_state: StreamState {
                last_time: u64::try_from(header.start.as_nanos()).unwrap_or(u64::MAX),
                tick: header.start_tick,
            },
            report: ReplayReport {
                zone_id: header.zone_id.clone(),
                kind: header.kind.clone(),
                from_creation: header.origin == Origin::Created,
                from_image: matches!(header.origin, Origin::Image { .. }),
                start_tick: header.start_tick,
                ticks_matched: 0,
                calls: 0,
                ended: None,
                frames_compared,
                divergence: None,
                failure: None,
            },
            last_match: None,
            stimuli: VecDeque::new(),
            stimuli_omitted: 0,
        }
    }

    fn run(mut self, mut reader: RecordReader<'_>) -> Result<ReplayReport, ReplayError> {
        let mut call: Option<(Record, usize)> = None;
        let mut expected: Vec<Record> = Vec::new();
        while self.report.divergence.is_none() {
            let offset = reader.offset();
            let next = reader.next_record()?;
            let boundary = match &next {
                None | Some(Record::End(_)) => true,
                Some(r) => r.is_call(),
            };
            if boundary {
                // A recording cut short (no end record, or stopped by a bound) may end inside a
                // call: only the effects it kept are compared.
                let cut = match &next {
                    None => true,
                    Some(Record::End(why)) => {
                        !matches!(why, StopReason::Requested | StopReason::ZoneEnded)
                    }
                    Some(_) => false,
                };
                if let Some((c, at)) = call.take() {
                    self.check(&c, at, &expected, cut)?;
                }
                expected.clear();
            }
            match next {
                None => break,
                Some(Record::End(why)) => {
                    self.report.ended = Some(why);
                    break;
                }
                Some(r) if r.is_call() => call = Some((r, offset)),
                Some(effect) => {
                    if call.is_none() {
                        return Err(RecordingError::Corrupt {
                            offset,
                            reason: "an effect before any call".into(),
                        }
                        .into());
                    }
                    expected.push(effect);
                }
            }
        }
        Ok(self.report)
    }

    /// Run one recorded call and compare what the host did with what it did when recorded.
    fn check(
        &mut self,
        call: &Record,
        offset: usize,
        expected: &[Record],
        cut: bool,
    ) -> Result<(), ReplayError> {
        self.note_stimulus(call.to_string());
        self.report.calls += 1;
        self.clock.script(expected.iter().filter_map(|r| match r {
            Record::Clock(t) => Some(*t),
            _ => None,
        }));
        self.execute(call, offset)?;
        let bytes = self.host.take_recorded();
        let mut actual = Vec::new();
        let mut r = Reader::new(&bytes);
        while r.remaining() > 0 {
            let rec =
                super::read::decode_one(&mut r, &mut self.actual_state).map_err(|reason| {
                    ReplayError::Start(format!("the replay's own records are unreadable: {reason}"))
                })?;
            if !rec.is_call() && !matches!(rec, Record::End(_)) {
                actual.push(rec);
            }
        }
        let compared = if cut {
            expected.len()
        } else {
            expected.len().max(actual.len())
        };
        for i in 0..compared {
            let (e, a) = (expected.get(i), actual.get(i));
            let same = match (e, a) {
                (
                    Some(Record::Frames { count: c1, .. }),
                    Some(Record::Frames { count: c2, .. }),
                ) if !self.report.frames_compared => c1 == c2,
                (Some(x), Some(y)) => x == y,
                _ => false,
            };
            if !same {
                let show =
                    |r: Option<&Record>| r.map_or_else(|| "nothing".to_owned(), Record::to_string);
                self.diverge(show(e), show(a));
                return Ok(());
            }
            if let Some(Record::Tick { tick, .. }) = e {
                self.last_match = Some(*tick);
                self.report.ticks_matched += 1;
                self.stimuli.clear();
                self.stimuli_omitted = 0;
                self.note_stimulus(format!("{call} (continued)"));
            }
        }
        Ok(())
    }

    fn note_stimulus(&mut self, s: String) {
        if self.stimuli.len() == MAX_STIMULI {
            self.stimuli.pop_front();
            self.stimuli_omitted += 1;
        }
        self.stimuli.push_back(s);
    }

    fn diverge(&mut self, expected: String, actual: String) {
        self.report.divergence = Some(Divergence {
            tick: self.host.tick(),
            last_match: self.last_match,
            expected,
            actual,
            stimuli: self.stimuli.iter().cloned().collect(),
            stimuli_omitted: self.stimuli_omitted,
        });
    }

    fn execute(&mut self, call: &Record, offset: usize) -> Result<(), ReplayError> {
        let h = &mut self.host;
        match call {
            Record::Join {
                principal,
                claims,
                role,
            } => {
                let claims: Claims = serde_json::from_str(claims).map_err(|e| {
                    ReplayError::Recording(RecordingError::Corrupt {
                        offset,
                        reason: format!("join claims: {e}"),
                    })
                })?;
                let _ = h.handle_join(Principal::new(principal.as_str()), claims, *role);
            }
            Record::JoinCharacter {
                principal,
                claims,
                role,
                character,
            } => {
                let claims: Claims = serde_json::from_str(claims).map_err(|e| {
                    ReplayError::Recording(RecordingError::Corrupt {
                        offset,
                        reason: format!("join claims: {e}"),
                    })
                })?;
                let principal = Principal::new(principal.as_str());
                let _ = h.handle_join_with_character(principal, claims, *role, character.clone());
            }
            Record::Input {
                player,
                seq,
                view_tick,
                payload,
            } => {
                let _ = h.handle_input(*player, *seq, *view_tick, payload);
            }
            Record::Drop(p) => {
                let _ = h.handle_drop(*p);
            }
            Record::Rejoin(p) => {
                let _ = h.handle_rejoin(*p);
            }
            Record::RejoinFrom { player, from } => {
                let _ = h.handle_rejoin_from(*player, *from);
            }
            Record::Leave { player, reason } => {
                let _ = h.handle_leave(*player, *reason);
            }
            Record::Settle(s) => h.handle_settlement(s.clone()),
            Record::Resync(p) => h.resync(*p),
            Record::Relay { player, link } => match link {
                Some(link) => {
                    let _ = h.relay(*player, *link);
                }
                None => h.unrelay(*player),
            },
            Record::Advance(now) => {
                let _ = h.advance(*now);
                if self.report.failure.is_none() {
                    if let Some(why) = h.failure() {
                        self.report.failure = Some((h.tick(), why.to_owned()));
                    }
                }
            }
            Record::DrainFrames => {
                // Frames not iterated are discarded; the digest was taken when they were built.
                let _ = h.drain_frames().map(Iterator::count);
            }
            Record::DrainFacts => {
                let _ = h.drain_facts();
            }
            Record::CallResult(a) => h.handle_call_result(a.clone()),
            Record::DrainCalls => {
                let _ = h.drain_calls();
            }
            Record::Dispose => h.dispose(),
            Record::TickAtOnce => h.tick_at_once(),
            Record::Rtt { player, rtt } => h.set_rtt(*player, *rtt),
            Record::Datagrams { player, max_frame } => {
                h.use_datagrams(*player, (*max_frame > 0).then_some(*max_frame as usize));
            }
            Record::AckState { player, tick } => h.ack_state(*player, *tick),
            Record::TransferIn {
                principal,
                player_claims,
                claims,
                from_zone,
                state,
            } => {
                let parse = |what: &str, text: &str| claims_at(offset, "transfer", what, text);
                let player_claims = parse("player claims", player_claims)?;
                let claims = parse("claims", claims)?;
                let _ = h.handle_transfer_in(
                    Principal::new(principal.as_str()),
                    player_claims,
                    claims,
                    from_zone,
                    state,
                );
            }
            Record::TransferReturn {
                principal,
                player_claims,
                claims,
                from_zone,
                state,
            } => {
                let parse =
                    |what: &str, text: &str| claims_at(offset, "transfer return", what, text);
                let player_claims = parse("player claims", player_claims)?;
                let claims = parse("claims", claims)?;
                let _ = h.handle_transfer_return(
                    Principal::new(principal.as_str()),
                    player_claims,
                    claims,
                    from_zone,
                    state,
                );
            }
            Record::TransferBack(p) => {
                let _ = h.handle_transfer_back(*p);
            }
            Record::TransferInCharacter {
                principal,
                player_claims,
                claims,
                from_zone,
                state,
                character,
            }
            | Record::TransferReturnCharacter {
                principal,
                player_claims,
                claims,
                from_zone,
                state,
                character,
            } => {
                let parse = |what: &str, text: &str| claims_at(offset, "transfer", what, text);
                let player_claims = parse("player claims", player_claims)?;
                let claims = parse("claims", claims)?;
                let principal = Principal::new(principal.as_str());
                let character = character.clone();
                let _ = if matches!(call, Record::TransferInCharacter { .. }) {
                    h.handle_transfer_in_with_character(
                        principal,
                        player_claims,
                        claims,
                        from_zone,
                        state,
                        character,
                    )
                } else {
                    h.handle_transfer_return_with_character(
                        principal,
                        player_claims,
                        claims,
                        from_zone,
                        state,
                        character,
                    )
                };
            }
            Record::TransferBackCharacter { player, character } => {
                let _ = h.handle_transfer_back_with_character(*player, character.clone());
            }
            Record::TransferDone(p) => {
                let _ = h.handle_transfer_done(*p);
            }
            Record::Message(m) => {
                let _ = h.handle_message(m.clone());
            }
            Record::Undeliverable {
                id,
                to,
                topic,
                reason,
            } => h.handle_undeliverable(id.clone(), to.clone(), *topic, reason.clone()),
            Record::DrainMessages => {
                let _ = h.drain_messages();
            }
            _ => {}
        }
        Ok(())
    }
}

/// A recorded claims object, read back: a record whose text is not one is corrupt at `offset`.
fn claims_at(offset: usize, record: &str, what: &str, text: &str) -> Result<Claims, ReplayError> {
    serde_json::from_str::<Claims>(text).map_err(|e| {
        ReplayError::Recording(RecordingError::Corrupt {
            offset,
            reason: format!("{record} {what}: {e}"),
        })
    })
}
