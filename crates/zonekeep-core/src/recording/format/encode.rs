//! Writing records: each [`Record`] framed as its tag, body length and body, the body laid out
//! as the [recording docs](crate::recording) say, and the input record written from borrowed
//! parts. `read.rs` decodes what this writes.

use std::time::Duration;

use zonekeep_protocol::wire::{put_varint, put_zigzag64};

use super::{nanos, put_blob, tag, Outcome, Record, StopReason, StreamState};
use crate::call::CallResult;
use crate::fact::FactOutcome;
use crate::message::{MessageFrom, MessageId, MessageTarget};
use crate::player::{PlayerId, Role};
use crate::zone::LeaveReason;

/// Appends `tag`, the body's length and the body.
fn frame(out: &mut Vec<u8>, tag: u8, body: &[u8]) {
    out.push(tag);
    put_varint(out, body.len() as u64);
    out.extend_from_slice(body);
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
