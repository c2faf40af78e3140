//! The records of a recording: what each call and effect is, and how it is written (see the
//! [module docs](super) for the layout; `header.rs` writes and reads the header, `read.rs`
//! reads records back).

use std::time::Duration;

use zonekeep_protocol::wire::{put_varint, put_zigzag64};

use crate::call::{CallAnswer, CallResult};
use crate::fact::{FactOutcome, Settlement};
use crate::message::{InboundMessage, MessageFrom, MessageId, MessageTarget};
use crate::player::{PlayerId, Role};
use crate::zone::LeaveReason;

/// A recording's first four bytes.
pub const RECORDING_MAGIC: [u8; 4] = *b"ZKRC";
/// The format version this build writes (it also reads [`OLDEST_READ_VERSION`] and later).
pub const RECORDING_VERSION: u16 = 12;
/// The oldest format version this build reads (version 3 only added an origin, version 4 the
/// zone's limits to the config, version 5 the transfer and message records, version 6 the
/// transfer return record, version 7 whether the zone is a lasting world, version 8 the
/// zone's state version, version 9 joins that bring a character, version 10 durable calls and
/// moves that carry a character, version 11 relayed participants, version 12 the observers'
/// patch rate in the config).
pub const OLDEST_READ_VERSION: u16 = 2;
/// Bytes before the header record: magic, version, flags.
pub(crate) const PREAMBLE_LEN: usize = 8;
/// Largest body a record other than the header may have (an input payload, a claims object, a
/// settlement's result are all far smaller): a corrupt length never makes a reader allocate more.
pub const MAX_RECORD_BODY: usize = 1 << 20;
/// Largest header body (it carries the snapshot a recording starts from).
pub const MAX_HEADER_BODY: usize = 256 << 20;

/// Why a recording could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordingError {
    /// The first bytes are not `ZKRC`: not a Zonekeep recording.
    #[error("not a zonekeep recording (bad magic)")]
    BadMagic,
    /// Written by another format version.
    #[error(
        "unsupported recording version {found} (this build reads versions {OLDEST_READ_VERSION} to {RECORDING_VERSION})"
    )]
    UnsupportedVersion {
        /// The version in the file.
        found: u16,
    },
    /// The file ends in the middle of a record (at byte `offset`).
    #[error("recording truncated at byte {offset}")]
    Truncated {
        /// Where the incomplete record starts.
        offset: usize,
    },
    /// A record is malformed (at byte `offset`): bad varint, length past its limit, bad UTF-8,
    /// unknown tag or inconsistent content.
    #[error("corrupt recording at byte {offset}: {reason}")]
    Corrupt {
        /// Where the bad record starts.
        offset: usize,
        /// What is wrong.
        reason: String,
    },
}

/// Why a recording stopped (the last record of a complete recording).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// Someone asked.
    Requested,
    /// The next record would have passed the size cap.
    SizeCap,
    /// Recorded bytes waited in memory past their bound: the driver did not take them.
    BufferFull,
    /// The file writer fell behind, failed or went away (the host drops the rest, never waits).
    WriterFailed(String),
    /// The zone was disposed.
    ZoneEnded,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Requested => f.write_str("stopped on request"),
            Self::SizeCap => f.write_str("size cap reached"),
            Self::BufferFull => f.write_str("recorded bytes were not taken in time"),
            Self::WriterFailed(why) => write!(f, "writer failed: {why}"),
            Self::ZoneEnded => f.write_str("the zone ended"),
        }
    }
}

impl StopReason {
    /// A stable snake_case name (for metrics labels and JSON).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Requested => "requested",
            Self::SizeCap => "size_cap",
            Self::BufferFull => "buffer_full",
            Self::WriterFailed(_) => "writer_failed",
            Self::ZoneEnded => "zone_ended",
        }
    }
}

/// What a call returned, as recorded (compared on replay).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Succeeded (drop, rejoin, leave) or the input was buffered.
    Ok,
    /// A join admitted this id.
    Joined(PlayerId),
    /// The zone refused a join or an input with its own code.
    Refused(u16),
    /// A join found the role full.
    Full,
    /// The host was disposed.
    Disposed,
    /// A join found no id left.
    IdsExhausted,
    /// No such participant.
    UnknownPlayer,
    /// A rejoin for a participant who is connected.
    NotDropped,
    /// A rejoin after the grace.
    GraceExpired,
    /// An input was buffered by dropping the oldest.
    DroppedOldest,
    /// An input repeated a sequence number.
    Duplicate,
    /// An input was older than the newest received.
    Stale,
    /// An observer sent an input.
    Observer,
    /// A dropped participant sent an input.
    Disconnected,
    /// A rejoin with a resume point continues with an ordinary Delta.
    ResumedDelta,
    /// A rejoin with a resume point starts over from a BASELINE.
    ResumedBaseline,
    /// A moving player sent an input.
    Moving,
}

/// One entry after the header: a call into the host (a stimulus) or what the host did in
/// answer (an effect, compared on replay).
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// [`ZoneHost::handle_join`](crate::ZoneHost::handle_join).
    Join {
        /// The verified principal.
        principal: String,
        /// The ticket claims, as JSON object text.
        claims: String,
        /// The role.
        role: Role,
    },
    /// [`ZoneHost::handle_join_with_character`](crate::ZoneHost::handle_join_with_character)
    /// (format version 9).
    JoinCharacter {
        /// The verified principal.
        principal: String,
        /// The ticket claims, as JSON object text.
        claims: String,
        /// The role.
        role: Role,
        /// The character the player brought.
        character: Vec<u8>,
    },
    /// [`ZoneHost::handle_input`](crate::ZoneHost::handle_input).
    Input {
        /// The sender.
        player: PlayerId,
        /// The client's sequence number.
        seq: u32,
        /// The tick the client was viewing.
        view_tick: u32,
        /// The input's bytes.
        payload: Vec<u8>,
    },
    /// [`ZoneHost::handle_drop`](crate::ZoneHost::handle_drop).
    Drop(PlayerId),
    /// [`ZoneHost::handle_rejoin`](crate::ZoneHost::handle_rejoin).
    Rejoin(PlayerId),
    /// [`ZoneHost::handle_rejoin_from`](crate::ZoneHost::handle_rejoin_from).
    RejoinFrom {
        /// Who rejoins.
        player: PlayerId,
        /// What its client says it holds.
        from: zonekeep_protocol::ResumeFrom,
    },
    /// [`ZoneHost::handle_leave`](crate::ZoneHost::handle_leave).
    Leave {
        /// Who leaves.
        player: PlayerId,
        /// Why.
        reason: LeaveReason,
    },
    /// [`ZoneHost::handle_settlement`](crate::ZoneHost::handle_settlement).
    Settle(Settlement),
    /// [`ZoneHost::handle_call_result`](crate::ZoneHost::handle_call_result) (format version 10).
    CallResult(CallAnswer),
    /// [`ZoneHost::drain_calls`](crate::ZoneHost::drain_calls) (format version 10).
    DrainCalls,
    /// [`ZoneHost::resync`](crate::ZoneHost::resync).
    Resync(PlayerId),
    /// [`ZoneHost::relay`](crate::ZoneHost::relay) (`link` set) or
    /// [`ZoneHost::unrelay`](crate::ZoneHost::unrelay) (format version 11).
    Relay {
        /// Whose frames move.
        player: PlayerId,
        /// The link whose relay builds them from now on; `None`: the host does again.
        link: Option<u64>,
    },
    /// [`ZoneHost::advance`](crate::ZoneHost::advance) with this clock time.
    Advance(Duration),
    /// [`ZoneHost::drain_frames`](crate::ZoneHost::drain_frames).
    DrainFrames,
    /// [`ZoneHost::drain_facts`](crate::ZoneHost::drain_facts).
    DrainFacts,
    /// [`ZoneHost::dispose`](crate::ZoneHost::dispose).
    Dispose,
    /// [`ZoneHost::tick_at_once`](crate::ZoneHost::tick_at_once).
    TickAtOnce,
    /// [`ZoneHost::set_rtt`](crate::ZoneHost::set_rtt).
    Rtt {
        /// Whose round trip.
        player: PlayerId,
        /// The measured round trip.
        rtt: Duration,
    },
    /// [`ZoneHost::use_datagrams`](crate::ZoneHost::use_datagrams).
    Datagrams {
        /// Whose frames become States.
        player: PlayerId,
        /// Largest frame in bytes (0 = no limit).
        max_frame: u32,
    },
    /// [`ZoneHost::ack_state`](crate::ZoneHost::ack_state).
    AckState {
        /// Whose client acknowledged.
        player: PlayerId,
        /// The State's tick.
        tick: u64,
    },
    /// [`ZoneHost::handle_transfer_in`](crate::ZoneHost::handle_transfer_in).
    TransferIn {
        /// The arriving player's principal.
        principal: String,
        /// The claims it joined its first zone with, as JSON object text.
        player_claims: String,
        /// The claims the zone it comes from handed over, as JSON object text.
        claims: String,
        /// The zone it comes from.
        from_zone: String,
        /// The state that zone handed out.
        state: Vec<u8>,
    },
    /// [`ZoneHost::handle_transfer_return`](crate::ZoneHost::handle_transfer_return).
    TransferReturn {
        /// The returning player's principal.
        principal: String,
        /// The claims it joins with, as JSON object text.
        player_claims: String,
        /// The claims the zone had handed over with the move, as JSON object text.
        claims: String,
        /// The zone the move did not reach.
        from_zone: String,
        /// The state the zone handed out.
        state: Vec<u8>,
    },
    /// [`ZoneHost::handle_transfer_back`](crate::ZoneHost::handle_transfer_back).
    TransferBack(PlayerId),
    /// [`ZoneHost::handle_transfer_in_with_character`](crate::ZoneHost::handle_transfer_in_with_character)
    /// (format version 10).
    TransferInCharacter {
        /// The arriving player's principal.
        principal: String,
        /// The claims it joined its first zone with, as JSON object text.
        player_claims: String,
        /// The claims the zone it comes from handed over, as JSON object text.
        claims: String,
        /// The zone it comes from.
        from_zone: String,
        /// The state that zone handed out.
        state: Vec<u8>,
        /// The character it brought.
        character: Vec<u8>,
    },
    /// [`ZoneHost::handle_transfer_return_with_character`](crate::ZoneHost::handle_transfer_return_with_character)
    /// (format version 10).
    TransferReturnCharacter {
        /// The returning player's principal.
        principal: String,
        /// The claims it joins with, as JSON object text.
        player_claims: String,
        /// The claims the zone had handed over with the move, as JSON object text.
        claims: String,
        /// The zone the move did not reach.
        from_zone: String,
        /// The state the zone handed out.
        state: Vec<u8>,
        /// The character it brought.
        character: Vec<u8>,
    },
    /// [`ZoneHost::handle_transfer_back_with_character`](crate::ZoneHost::handle_transfer_back_with_character)
    /// (format version 10).
    TransferBackCharacter {
        /// The player coming back.
        player: PlayerId,
        /// The character it gets back.
        character: Vec<u8>,
    },
    /// [`ZoneHost::handle_transfer_done`](crate::ZoneHost::handle_transfer_done).
    TransferDone(PlayerId),
    /// [`ZoneHost::handle_message`](crate::ZoneHost::handle_message).
    Message(InboundMessage),
    /// [`ZoneHost::handle_undeliverable`](crate::ZoneHost::handle_undeliverable).
    Undeliverable {
        /// The message's id.
        id: MessageId,
        /// Where it was going.
        to: MessageTarget,
        /// Its topic.
        topic: u16,
        /// What the server said.
        reason: String,
    },
    /// [`ZoneHost::drain_messages`](crate::ZoneHost::drain_messages) (it frees room in the
    /// bounded outbox, so later sends depend on it).
    DrainMessages,
    /// Effect: the host read its clock and got this.
    Clock(Duration),
    /// Effect: what the preceding call returned.
    Outcome(Outcome),
    /// Effect: a tick ran; the zone's state hash after it.
    Tick {
        /// The tick's number (not stored: one more than the previous).
        tick: u64,
        /// [`ZoneHost::state_hash`](crate::ZoneHost::state_hash) after the tick.
        hash: u64,
    },
    /// Effect: the frames a drain handed out.
    Frames {
        /// How many.
        count: u32,
        /// Their bytes in total.
        bytes: u64,
        /// A hash of every frame's recipient, ack, quiet flag and length, and of the bytes of
        /// one participant's frames in 16 by turns (id + tick), so every participant's bytes
        /// are checked every 16 patches.
        hash: u64,
    },
    /// Effect: the facts a drain handed out.
    Facts {
        /// How many.
        count: u32,
        /// A hash of every fact's key, kind, principal, payload and tick.
        hash: u64,
    },
    /// Effect: the calls a drain handed out (format version 10).
    Calls {
        /// How many.
        count: u32,
        /// A hash of every call's key, function, arguments and tick.
        hash: u64,
    },
    /// The recording stopped.
    End(StopReason),
}

impl Record {
    /// Whether this is a call into the host (a stimulus) rather than an effect.
    pub fn is_call(&self) -> bool {
        !matches!(
            self,
            Record::Clock(_)
                | Record::Outcome(_)
                | Record::Tick { .. }
                | Record::Frames { .. }
                | Record::Facts { .. }
                | Record::Calls { .. }
                | Record::End(_)
        )
    }
}

impl std::fmt::Display for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Record::Join {
                principal,
                claims,
                role,
            } => write!(f, "join {principal:?} as {role:?} claims {claims}"),
            Record::JoinCharacter {
                principal,
                claims,
                role,
                character,
            } => write!(
                f,
                "join {principal:?} as {role:?} claims {claims} with a character of {} bytes",
                character.len()
            ),
            Record::Input {
                player,
                seq,
                view_tick,
                payload,
            } => {
                write!(f, "input from {player} seq {seq} view tick {view_tick} [")?;
                for (i, b) in payload.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" ")?;
                    }
                    write!(f, "{b:02x}")?;
                }
                f.write_str("]")
            }
            Record::Drop(p) => write!(f, "drop {p}"),
            Record::Rejoin(p) => write!(f, "rejoin {p}"),
            Record::RejoinFrom { player, from } => write!(
                f,
                "rejoin {player} from tick {} known {} hash {:08x}",
                from.tick, from.count, from.hash
            ),
            Record::Leave { player, reason } => write!(f, "leave {player} ({reason:?})"),
            Record::Settle(s) => match &s.outcome {
                FactOutcome::Ok(v) => write!(f, "settle {} ok {v}", s.key.as_str()),
                FactOutcome::Refused(why) => write!(f, "settle {} refused {why:?}", s.key.as_str()),
            },
            Record::Resync(p) => write!(f, "resync {p}"),
            Record::Relay { player, link } => match link {
                Some(link) => write!(f, "relay {player} over link {link}"),
                None => write!(f, "unrelay {player}"),
            },
            Record::Advance(now) => write!(f, "advance to {} ns", now.as_nanos()),
            Record::DrainFrames => f.write_str("drain frames"),
            Record::DrainFacts => f.write_str("drain facts"),
            Record::CallResult(a) => match &a.result {
                CallResult::Ok(v) => write!(f, "call result {}: ok {v}", a.key),
                CallResult::Err { code, message } => {
                    write!(f, "call result {}: {code}: {message}", a.key)
                }
            },
            Record::DrainCalls => f.write_str("drain calls"),
            Record::Dispose => f.write_str("dispose"),
            Record::TickAtOnce => f.write_str("tick at once"),
            Record::Rtt { player, rtt } => write!(f, "rtt of {player} {} ns", rtt.as_nanos()),
            Record::Datagrams { player, max_frame } => {
                write!(f, "datagrams for {player}, frames up to {max_frame} bytes")
            }
            Record::AckState { player, tick } => write!(f, "{player} acknowledged tick {tick}"),
            Record::TransferIn {
                principal,
                from_zone,
                state,
                ..
            } => write!(
                f,
                "transfer in {principal:?} from {from_zone:?} with {} state bytes",
                state.len()
            ),
            Record::TransferReturn {
                principal,
                from_zone,
                state,
                ..
            } => write!(
                f,
                "transfer return of {principal:?} from {from_zone:?} with {} state bytes",
                state.len()
            ),
            Record::TransferBack(p) => write!(f, "transfer of {p} came back"),
            Record::TransferInCharacter {
                principal,
                from_zone,
                state,
                character,
                ..
            }
            | Record::TransferReturnCharacter {
                principal,
                from_zone,
                state,
                character,
                ..
            } => write!(
                f,
                "{} of {principal:?} from {from_zone:?} with {} state bytes and a character of {} bytes",
                if matches!(self, Record::TransferInCharacter { .. }) {
                    "transfer in"
                } else {
                    "transfer return"
                },
                state.len(),
                character.len()
            ),
            Record::TransferBackCharacter { player, character } => write!(
                f,
                "transfer of {player} came back with a character of {} bytes",
                character.len()
            ),
            Record::TransferDone(p) => write!(f, "transfer of {p} done"),
            Record::Message(m) => write!(
                f,
                "message {}:{}:{} topic {} ({} bytes{})",
                m.id.sender,
                m.id.epoch,
                m.id.seq,
                m.topic,
                m.payload.len(),
                if m.via_parent { ", from a child" } else { "" }
            ),
            Record::Undeliverable {
                id, topic, reason, ..
            } => write!(
                f,
                "message {}:{}:{} topic {topic} undeliverable: {reason}",
                id.sender, id.epoch, id.seq
            ),
            Record::DrainMessages => f.write_str("drain messages"),
            Record::Clock(t) => write!(f, "clock read {} ns", t.as_nanos()),
            Record::Outcome(o) => write!(f, "outcome {o:?}"),
            Record::Tick { tick, hash } => write!(f, "tick {tick} state hash {hash:016x}"),
            Record::Frames { count, bytes, hash } => {
                write!(f, "{count} frames, {bytes} bytes, hash {hash:016x}")
            }
            Record::Facts { count, hash } => write!(f, "{count} facts, hash {hash:016x}"),
            Record::Calls { count, hash } => write!(f, "{count} calls, hash {hash:016x}"),
            Record::End(why) => write!(f, "end: {why}"),
        }
    }
}

pub(super) mod tag {
    pub const JOIN: u8 = 0x01;
    pub const INPUT: u8 = 0x02;
    pub const DROP: u8 = 0x03;
    pub const REJOIN: u8 = 0x04;
    pub const LEAVE: u8 = 0x05;
    pub const SETTLE: u8 = 0x06;
    pub const RESYNC: u8 = 0x07;
    pub const ADVANCE: u8 = 0x08;
    pub const DRAIN_FRAMES: u8 = 0x09;
    pub const DRAIN_FACTS: u8 = 0x0a;
    pub const DISPOSE: u8 = 0x0b;
    pub const TICK_AT_ONCE: u8 = 0x0c;
    pub const RTT: u8 = 0x0d;
    pub const REJOIN_FROM: u8 = 0x0e;
    pub const DATAGRAMS: u8 = 0x0f;
    pub const ACK_STATE: u8 = 0x10;
    pub const TRANSFER_IN: u8 = 0x11;
    pub const TRANSFER_BACK: u8 = 0x12;
    pub const TRANSFER_DONE: u8 = 0x13;
    pub const MESSAGE: u8 = 0x14;
    pub const UNDELIVERABLE: u8 = 0x15;
    pub const DRAIN_MESSAGES: u8 = 0x16;
    pub const TRANSFER_RETURN: u8 = 0x17;
    pub const JOIN_CHARACTER: u8 = 0x18;
    pub const TRANSFER_IN_CHARACTER: u8 = 0x20;
    pub const TRANSFER_RETURN_CHARACTER: u8 = 0x21;
    pub const TRANSFER_BACK_CHARACTER: u8 = 0x22;
    pub const CALL_RESULT: u8 = 0x1a;
    pub const DRAIN_CALLS: u8 = 0x1b;
    pub const RELAY: u8 = 0x1c;
    pub const CLOCK: u8 = 0x40;
    pub const OUTCOME: u8 = 0x41;
    pub const TICK: u8 = 0x42;
    pub const FRAMES: u8 = 0x43;
    pub const FACTS: u8 = 0x44;
    pub const CALLS: u8 = 0x45;
    pub const END: u8 = 0x7f;
}

/// What the encoder and decoder of one stream both track, so times are written as differences
/// and view ticks relative to the current tick.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StreamState {
    /// Nanoseconds of the last time written (clock reads and advances).
    pub last_time: u64,
    /// The last tick run.
    pub tick: u64,
}

pub(super) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Appends `tag`, the body's length and the body.
fn frame(out: &mut Vec<u8>, tag: u8, body: &[u8]) {
    out.push(tag);
    put_varint(out, body.len() as u64);
    out.extend_from_slice(body);
}

pub(super) fn put_blob(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_time(out: &mut Vec<u8>, state: &mut StreamState, t: Duration) {
    let n = nanos(t);
    put_zigzag64(out, n.wrapping_sub(state.last_time) as i64);
    state.last_time = n;
}

fn role_code(r: Role) -> u8 {
    match r {
        Role::Player => 0,
        Role::Observer => 1,
    }
}

fn leave_code(r: LeaveReason) -> u8 {
    match r {
        LeaveReason::Left => 0,
        LeaveReason::Dropped => 1,
        LeaveReason::Kicked => 2,
        LeaveReason::Transferred => 3,
    }
}

fn put_outcome(out: &mut Vec<u8>, o: Outcome) {
    let (code, detail) = match o {
        Outcome::Ok => (0, None),
        Outcome::Joined(p) => (1, Some(u64::from(p.0))),
        Outcome::Refused(c) => (2, Some(u64::from(c))),
        Outcome::Full => (3, None),
        Outcome::Disposed => (4, None),
        Outcome::IdsExhausted => (5, None),
        Outcome::UnknownPlayer => (6, None),
        Outcome::NotDropped => (7, None),
        Outcome::GraceExpired => (8, None),
        Outcome::DroppedOldest => (9, None),
        Outcome::Duplicate => (10, None),
        Outcome::Stale => (11, None),
        Outcome::Observer => (12, None),
        Outcome::Disconnected => (13, None),
        Outcome::ResumedDelta => (14, None),
        Outcome::ResumedBaseline => (15, None),
        Outcome::Moving => (16, None),
    };
    out.push(code);
    if let Some(d) = detail {
        put_varint(out, d);
    }
}

fn put_stop(out: &mut Vec<u8>, why: &StopReason) {
    match why {
        StopReason::Requested => out.push(0),
        StopReason::SizeCap => out.push(1),
        StopReason::BufferFull => out.push(2),
        StopReason::WriterFailed(s) => {
            out.push(3);
            put_blob(out, s.as_bytes());
        }
        StopReason::ZoneEnded => out.push(4),
    }
}

/// Appends `record` to `out`, writing its body through `scratch` (reused between records).
pub(crate) fn encode_record(
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    state: &mut StreamState,
    record: &Record,
) {
    scratch.clear();
    let b = &mut *scratch;
    let t = match record {
        Record::Join {
            principal,
            claims,
            role,
        } => {
            put_blob(b, principal.as_bytes());
            put_blob(b, claims.as_bytes());
            b.push(role_code(*role));
            tag::JOIN
        }
        Record::JoinCharacter {
            principal,
            claims,
            role,
            character,
        } => {
            put_blob(b, principal.as_bytes());
            put_blob(b, claims.as_bytes());
            b.push(role_code(*role));
            b.extend_from_slice(character);
            tag::JOIN_CHARACTER
        }
        Record::Input {
            player,
            seq,
            view_tick,
            payload,
        } => {
            put_input(b, state, *player, *seq, *view_tick, payload);
            tag::INPUT
        }
        Record::Drop(p) => {
            put_varint(b, u64::from(p.0));
            tag::DROP
        }
        Record::Rejoin(p) => {
            put_varint(b, u64::from(p.0));
            tag::REJOIN
        }
        Record::RejoinFrom { player, from } => {
            put_varint(b, u64::from(player.0));
            put_varint(b, from.tick);
            put_varint(b, u64::from(from.count));
            b.extend_from_slice(&from.hash.to_le_bytes());
            tag::REJOIN_FROM
        }
        Record::Leave { player, reason } => {
            put_varint(b, u64::from(player.0));
            b.push(leave_code(*reason));
            tag::LEAVE
        }
        Record::Settle(s) => {
            put_blob(b, s.key.as_str().as_bytes());
            match &s.outcome {
                FactOutcome::Ok(v) => {
                    b.push(0);
                    b.extend_from_slice(v.to_string().as_bytes());
                }
                FactOutcome::Refused(why) => {
                    b.push(1);
                    b.extend_from_slice(why.as_bytes());
                }
            }
            tag::SETTLE
        }
        Record::Resync(p) => {
            put_varint(b, u64::from(p.0));
            tag::RESYNC
        }
        Record::Relay { player, link } => {
            put_varint(b, u64::from(player.0));
            match link {
                None => b.push(0),
                Some(link) => {
                    b.push(1);
                    put_varint(b, *link);
                }
            }
            tag::RELAY
        }
        Record::Advance(now) => {
            put_time(b, state, *now);
            tag::ADVANCE
        }
        Record::DrainFrames => tag::DRAIN_FRAMES,
        Record::DrainFacts => tag::DRAIN_FACTS,
        Record::CallResult(a) => {
            put_blob(b, a.key.as_str().as_bytes());
            match &a.result {
                CallResult::Ok(v) => {
                    b.push(0);
                    b.extend_from_slice(v.to_string().as_bytes());
                }
                CallResult::Err { code, message } => {
                    b.push(1);
                    put_blob(b, code.as_bytes());
                    b.extend_from_slice(message.as_bytes());
                }
            }
            tag::CALL_RESULT
        }
        Record::DrainCalls => tag::DRAIN_CALLS,
        Record::Dispose => tag::DISPOSE,
        Record::TickAtOnce => tag::TICK_AT_ONCE,
        Record::Rtt { player, rtt } => {
            put_varint(b, u64::from(player.0));
            put_varint(b, u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX));
            tag::RTT
        }
        Record::Datagrams { player, max_frame } => {
            put_varint(b, u64::from(player.0));
            put_varint(b, u64::from(*max_frame));
            tag::DATAGRAMS
        }
        Record::AckState { player, tick } => {
            put_varint(b, u64::from(player.0));
            put_varint(b, *tick);
            tag::ACK_STATE
        }
        Record::TransferIn {
            principal,
            player_claims,
            claims,
            from_zone,
            state: bytes,
        } => {
            put_blob(b, principal.as_bytes());
            put_blob(b, player_claims.as_bytes());
            put_blob(b, claims.as_bytes());
            put_blob(b, from_zone.as_bytes());
            b.extend_from_slice(bytes);
            tag::TRANSFER_IN
        }
        Record::TransferReturn {
            principal,
            player_claims,
            claims,
            from_zone,
            state: bytes,
        } => {
            put_blob(b, principal.as_bytes());
            put_blob(b, player_claims.as_bytes());
            put_blob(b, claims.as_bytes());
            put_blob(b, from_zone.as_bytes());
            b.extend_from_slice(bytes);
            tag::TRANSFER_RETURN
        }
        Record::TransferBack(p) => {
            put_varint(b, u64::from(p.0));
            tag::TRANSFER_BACK
        }
        Record::TransferInCharacter {
            principal,
            player_claims,
            claims,
            from_zone,
            state: bytes,
            character,
        }
        | Record::TransferReturnCharacter {
            principal,
            player_claims,
            claims,
            from_zone,
            state: bytes,
            character,
        } => {
            for text in [principal, player_claims, claims, from_zone] {
                put_blob(b, text.as_bytes());
            }
            put_blob(b, bytes);
            b.extend_from_slice(character);
            if matches!(record, Record::TransferInCharacter { .. }) {
                tag::TRANSFER_IN_CHARACTER
            } else {
                tag::TRANSFER_RETURN_CHARACTER
            }
        }
        Record::TransferBackCharacter { player, character } => {
            put_varint(b, u64::from(player.0));
            b.extend_from_slice(character);
            tag::TRANSFER_BACK_CHARACTER
        }
        Record::TransferDone(p) => {
            put_varint(b, u64::from(p.0));
            tag::TRANSFER_DONE
        }
        Record::Message(m) => {
            put_message_id(b, &m.id);
            match &m.from {
                MessageFrom::Zone(z) => {
                    b.push(0);
                    put_blob(b, z.as_bytes());
                }
                MessageFrom::Admin => b.push(1),
            }
            put_varint(b, u64::from(m.topic));
            b.push(u8::from(m.via_parent));
            b.extend_from_slice(&m.payload);
            tag::MESSAGE
        }
        Record::Undeliverable {
            id,
            to,
            topic,
            reason,
        } => {
            put_message_id(b, id);
            let (kind, name) = match to {
                MessageTarget::Zone(z) => (0, z),
                MessageTarget::Group(g) => (1, g),
            };
            b.push(kind);
            put_blob(b, name.as_bytes());
            put_varint(b, u64::from(*topic));
            b.extend_from_slice(reason.as_bytes());
            tag::UNDELIVERABLE
        }
        Record::DrainMessages => tag::DRAIN_MESSAGES,
        Record::Clock(t) => {
            put_time(b, state, *t);
            tag::CLOCK
        }
        Record::Outcome(o) => {
            put_outcome(b, *o);
            tag::OUTCOME
        }
        Record::Tick { tick, hash } => {
            state.tick = *tick;
            b.extend_from_slice(&hash.to_le_bytes());
            tag::TICK
        }
        Record::Frames { count, bytes, hash } => {
            put_varint(b, u64::from(*count));
            put_varint(b, *bytes);
            b.extend_from_slice(&hash.to_le_bytes());
            tag::FRAMES
        }
        Record::Facts { count, hash } => {
            put_varint(b, u64::from(*count));
            b.extend_from_slice(&hash.to_le_bytes());
            tag::FACTS
        }
        Record::Calls { count, hash } => {
            put_varint(b, u64::from(*count));
            b.extend_from_slice(&hash.to_le_bytes());
            tag::CALLS
        }
        Record::End(why) => {
            put_stop(b, why);
            tag::END
        }
    };
    frame(out, t, scratch);
}

fn put_message_id(b: &mut Vec<u8>, id: &MessageId) {
    put_blob(b, id.sender.as_bytes());
    put_varint(b, id.epoch);
    put_varint(b, id.seq);
}

/// An input record's body.
fn put_input(
    b: &mut Vec<u8>,
    state: &StreamState,
    player: PlayerId,
    seq: u32,
    view_tick: u32,
    payload: &[u8],
) {
    put_varint(b, u64::from(player.0));
    put_varint(b, u64::from(seq));
    put_zigzag64(b, state.tick.wrapping_sub(u64::from(view_tick)) as i64);
    b.extend_from_slice(payload);
}

/// Appends an input record from borrowed parts: the most frequent record, written without
/// building a [`Record`] (which would copy the payload once more).
pub(crate) fn encode_input_record(
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    state: &StreamState,
    input: (PlayerId, u32, u32, &[u8]),
) {
    scratch.clear();
    let (player, seq, view_tick, payload) = input;
    put_input(scratch, state, player, seq, view_tick, payload);
    frame(out, tag::INPUT, scratch);
}
