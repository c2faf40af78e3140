//! What a recording holds: each [`Record`], a call into the host or an effect that answered it,
//! with the [`Outcome`] and [`StopReason`] records carry, and how a record reads in a report
//! (its `Display`). How records are written is `encode.rs`; the layout is in the
//! [recording docs](crate::recording).

use std::time::Duration;

use crate::call::{CallAnswer, CallResult};
use crate::fact::{FactOutcome, Settlement};
use crate::message::{InboundMessage, MessageId, MessageTarget};
use crate::player::{PlayerId, Role};
use crate::zone::LeaveReason;

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
