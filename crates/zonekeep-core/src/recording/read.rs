//! Reading a recording: record bodies decoded back to [`Record`]s, and [`RecordReader`], the
//! total decoder of a whole file (see the [module docs](super) for the layout).

use std::time::Duration;

use zonekeep_protocol::error::DecodeError;
use zonekeep_protocol::wire::Reader;

use super::format::{
    nanos, tag, Outcome, Record, RecordingError, StopReason, StreamState, MAX_HEADER_BODY,
    MAX_RECORD_BODY, OLDEST_READ_VERSION, PREAMBLE_LEN, RECORDING_MAGIC, RECORDING_VERSION,
};
use super::header::{decode_header, Header};
use crate::call::{CallAnswer, CallKey, CallResult};
use crate::fact::{FactKey, FactOutcome, Settlement};
use crate::message::{InboundMessage, MessageFrom, MessageId, MessageTarget};
use crate::player::{PlayerId, Role};
use crate::zone::LeaveReason;

/// A reading error inside one record body, before its offset is known.
pub(super) fn bad(e: DecodeError) -> String {
    e.to_string()
}

pub(super) fn u64_le(r: &mut Reader<'_>) -> Result<u64, String> {
    let b = r.take(8).map_err(bad)?;
    let arr: [u8; 8] = b.try_into().map_err(|_| "short u64".to_owned())?;
    Ok(u64::from_le_bytes(arr))
}

pub(super) fn text<'a>(r: &mut Reader<'a>, what: &'static str) -> Result<&'a str, String> {
    r.str_named(what, MAX_RECORD_BODY).map_err(bad)
}

fn rest_text(r: &mut Reader<'_>) -> Result<String, String> {
    let b = r.take(r.remaining()).map_err(bad)?;
    std::str::from_utf8(b)
        .map(str::to_owned)
        .map_err(|_| "text is not UTF-8".to_owned())
}

pub(super) fn player(r: &mut Reader<'_>) -> Result<PlayerId, String> {
    r.varint_u32().map(PlayerId).map_err(bad)
}

fn get_time(r: &mut Reader<'_>, state: &mut StreamState) -> Result<Duration, String> {
    let d = r.zigzag64().map_err(bad)?;
    let n = state.last_time.wrapping_add(d as u64);
    state.last_time = n;
    Ok(Duration::from_nanos(n))
}

fn get_outcome(r: &mut Reader<'_>) -> Result<Outcome, String> {
    Ok(match r.u8().map_err(bad)? {
        0 => Outcome::Ok,
        1 => Outcome::Joined(player(r)?),
        2 => Outcome::Refused(r.varint_u16().map_err(bad)?),
        3 => Outcome::Full,
        4 => Outcome::Disposed,
        5 => Outcome::IdsExhausted,
        6 => Outcome::UnknownPlayer,
        7 => Outcome::NotDropped,
        8 => Outcome::GraceExpired,
        9 => Outcome::DroppedOldest,
        10 => Outcome::Duplicate,
        11 => Outcome::Stale,
        12 => Outcome::Observer,
        13 => Outcome::Disconnected,
        14 => Outcome::ResumedDelta,
        15 => Outcome::ResumedBaseline,
        16 => Outcome::Moving,
        n => return Err(format!("unknown outcome {n}")),
    })
}

fn message_id(r: &mut Reader<'_>) -> Result<MessageId, String> {
    Ok(MessageId {
        sender: text(r, "sender")?.to_owned(),
        epoch: r.varint_u64().map_err(bad)?,
        seq: r.varint_u64().map_err(bad)?,
    })
}

fn get_stop(r: &mut Reader<'_>) -> Result<StopReason, String> {
    Ok(match r.u8().map_err(bad)? {
        0 => StopReason::Requested,
        1 => StopReason::SizeCap,
        2 => StopReason::BufferFull,
        3 => StopReason::WriterFailed(text(r, "reason")?.to_owned()),
        4 => StopReason::ZoneEnded,
        n => return Err(format!("unknown stop reason {n}")),
    })
}

fn get_role(code: u8) -> Result<Role, String> {
    match code {
        0 => Ok(Role::Player),
        1 => Ok(Role::Observer),
        n => Err(format!("unknown role {n}")),
    }
}

fn get_leave(code: u8) -> Result<LeaveReason, String> {
    Ok(match code {
        0 => LeaveReason::Left,
        1 => LeaveReason::Dropped,
        2 => LeaveReason::Kicked,
        3 => LeaveReason::Transferred,
        n => return Err(format!("unknown leave reason {n}")),
    })
}

fn decode_body(t: u8, r: &mut Reader<'_>, state: &mut StreamState) -> Result<Record, String> {
    let rec = match t {
        tag::JOIN => Record::Join {
            principal: text(r, "principal")?.to_owned(),
            claims: text(r, "claims")?.to_owned(),
            role: get_role(r.u8().map_err(bad)?)?,
        },
        tag::JOIN_CHARACTER => Record::JoinCharacter {
            principal: text(r, "principal")?.to_owned(),
            claims: text(r, "claims")?.to_owned(),
            role: get_role(r.u8().map_err(bad)?)?,
            character: r.take(r.remaining()).map_err(bad)?.to_vec(),
        },
        tag::INPUT => {
            let player = player(r)?;
            let seq = r.varint_u32().map_err(bad)?;
            let back = r.zigzag64().map_err(bad)?;
            let view_tick = u32::try_from(state.tick.wrapping_sub(back as u64))
                .map_err(|_| "view tick out of range".to_owned())?;
            Record::Input {
                player,
                seq,
                view_tick,
                payload: r.take(r.remaining()).map_err(bad)?.to_vec(),
            }
        }
        tag::DROP => Record::Drop(player(r)?),
        tag::REJOIN => Record::Rejoin(player(r)?),
        tag::REJOIN_FROM => Record::RejoinFrom {
            player: player(r)?,
            from: zonekeep_protocol::ResumeFrom {
                tick: r.varint_u64().map_err(bad)?,
                count: r.varint_u32().map_err(bad)?,
                hash: r.u32_le().map_err(bad)?,
            },
        },
        tag::LEAVE => Record::Leave {
            player: player(r)?,
            reason: get_leave(r.u8().map_err(bad)?)?,
        },
        tag::SETTLE => {
            let key = FactKey(text(r, "fact key")?.to_owned());
            let outcome = match r.u8().map_err(bad)? {
                0 => FactOutcome::Ok(
                    serde_json::from_str(&rest_text(r)?)
                        .map_err(|e| format!("settlement result: {e}"))?,
                ),
                1 => FactOutcome::Refused(rest_text(r)?),
                n => return Err(format!("unknown settlement outcome {n}")),
            };
            Record::Settle(Settlement { key, outcome })
        }
        tag::RESYNC => Record::Resync(player(r)?),
        tag::RELAY => Record::Relay {
            player: player(r)?,
            link: match r.u8().map_err(bad)? {
                0 => None,
                1 => Some(r.varint_u64().map_err(bad)?),
                n => return Err(format!("a relay flag of {n}")),
            },
        },
        tag::ADVANCE => Record::Advance(get_time(r, state)?),
        tag::DRAIN_FRAMES => Record::DrainFrames,
        tag::DRAIN_FACTS => Record::DrainFacts,
        tag::CALL_RESULT => {
            let key = CallKey(text(r, "call key")?.to_owned());
            let result = match r.u8().map_err(bad)? {
                0 => CallResult::Ok(
                    serde_json::from_str(&rest_text(r)?)
                        .map_err(|e| format!("call result: {e}"))?,
                ),
                1 => CallResult::Err {
                    code: text(r, "call error code")?.to_owned(),
                    message: rest_text(r)?,
                },
                n => return Err(format!("unknown call result kind {n}")),
            };
            Record::CallResult(CallAnswer { key, result })
        }
        tag::DRAIN_CALLS => Record::DrainCalls,
        tag::DISPOSE => Record::Dispose,
        tag::TICK_AT_ONCE => Record::TickAtOnce,
        tag::RTT => Record::Rtt {
            player: player(r)?,
            rtt: Duration::from_nanos(r.varint_u64().map_err(bad)?),
        },
        tag::DATAGRAMS => Record::Datagrams {
            player: player(r)?,
            max_frame: r.varint_u32().map_err(bad)?,
        },
        tag::ACK_STATE => Record::AckState {
            player: player(r)?,
            tick: r.varint_u64().map_err(bad)?,
        },
        tag::TRANSFER_IN => Record::TransferIn {
            principal: text(r, "principal")?.to_owned(),
            player_claims: text(r, "player claims")?.to_owned(),
            claims: text(r, "claims")?.to_owned(),
            from_zone: text(r, "from zone")?.to_owned(),
            state: r.take(r.remaining()).map_err(bad)?.to_vec(),
        },
        tag::TRANSFER_RETURN => Record::TransferReturn {
            principal: text(r, "principal")?.to_owned(),
            player_claims: text(r, "player claims")?.to_owned(),
            claims: text(r, "claims")?.to_owned(),
            from_zone: text(r, "from zone")?.to_owned(),
            state: r.take(r.remaining()).map_err(bad)?.to_vec(),
        },
        tag::TRANSFER_BACK => Record::TransferBack(player(r)?),
        tag::TRANSFER_IN_CHARACTER | tag::TRANSFER_RETURN_CHARACTER => {
            let principal = text(r, "principal")?.to_owned();
            let player_claims = text(r, "player claims")?.to_owned();
            let claims = text(r, "claims")?.to_owned();
            let from_zone = text(r, "from zone")?.to_owned();
            let state = r
                .bytes_named("state", MAX_RECORD_BODY)
                .map_err(bad)?
                .to_vec();
            let character = r.take(r.remaining()).map_err(bad)?.to_vec();
            if t == tag::TRANSFER_IN_CHARACTER {
                Record::TransferInCharacter {
                    principal,
                    player_claims,
                    claims,
                    from_zone,
                    state,
                    character,
                }
            } else {
                Record::TransferReturnCharacter {
                    principal,
                    player_claims,
                    claims,
                    from_zone,
                    state,
                    character,
                }
            }
        }
        tag::TRANSFER_BACK_CHARACTER => Record::TransferBackCharacter {
            player: player(r)?,
            character: r.take(r.remaining()).map_err(bad)?.to_vec(),
        },
        tag::TRANSFER_DONE => Record::TransferDone(player(r)?),
        tag::MESSAGE => {
            let id = message_id(r)?;
            let from = match r.u8().map_err(bad)? {
                0 => MessageFrom::Zone(text(r, "sender zone")?.to_owned()),
                1 => MessageFrom::Admin,
                n => return Err(format!("unknown message sender kind {n}")),
            };
            let topic = r.varint_u16().map_err(bad)?;
            let via_parent = match r.u8().map_err(bad)? {
                0 => false,
                1 => true,
                n => return Err(format!("via-parent flag {n}")),
            };
            Record::Message(InboundMessage {
                id,
                from,
                topic,
                payload: r.take(r.remaining()).map_err(bad)?.to_vec(),
                via_parent,
            })
        }
        tag::UNDELIVERABLE => {
            let id = message_id(r)?;
            let to = match r.u8().map_err(bad)? {
                0 => MessageTarget::Zone(text(r, "target zone")?.to_owned()),
                1 => MessageTarget::Group(text(r, "target group")?.to_owned()),
                n => return Err(format!("unknown message target kind {n}")),
            };
            Record::Undeliverable {
                id,
                to,
                topic: r.varint_u16().map_err(bad)?,
                reason: rest_text(r)?,
            }
        }
        tag::DRAIN_MESSAGES => Record::DrainMessages,
        tag::CLOCK => Record::Clock(get_time(r, state)?),
        tag::OUTCOME => Record::Outcome(get_outcome(r)?),
        tag::TICK => {
            let hash = u64_le(r)?;
            state.tick = state.tick.wrapping_add(1);
            Record::Tick {
                tick: state.tick,
                hash,
            }
        }
        tag::FRAMES => Record::Frames {
            count: r.varint_u32().map_err(bad)?,
            bytes: r.varint_u64().map_err(bad)?,
            hash: u64_le(r)?,
        },
        tag::FACTS => Record::Facts {
            count: r.varint_u32().map_err(bad)?,
            hash: u64_le(r)?,
        },
        tag::CALLS => Record::Calls {
            count: r.varint_u32().map_err(bad)?,
            hash: u64_le(r)?,
        },
        tag::END => Record::End(get_stop(r)?),
        other => return Err(format!("unknown record tag 0x{other:02x}")),
    };
    r.finish().map_err(bad)?;
    Ok(rec)
}

/// Reads a recording's records one by one from a byte slice, never allocating more than the
/// slice holds.
#[derive(Debug)]
pub struct RecordReader<'a> {
    bytes: &'a [u8],
    pos: usize,
    state: StreamState,
    ended: bool,
}

impl<'a> RecordReader<'a> {
    /// Reads the preamble and the header of `bytes`, leaving the reader at the first record.
    pub fn open(bytes: &'a [u8]) -> Result<(Header, Self), RecordingError> {
        let truncated = RecordingError::Truncated { offset: 0 };
        let magic = bytes.get(0..4).ok_or(truncated.clone())?;
        if magic != RECORDING_MAGIC {
            return Err(RecordingError::BadMagic);
        }
        let version = bytes
            .get(4..6)
            .map(|v| u16::from_le_bytes([v[0], v[1]]))
            .ok_or(truncated.clone())?;
        if !(OLDEST_READ_VERSION..=RECORDING_VERSION).contains(&version) {
            return Err(RecordingError::UnsupportedVersion { found: version });
        }
        let flags = bytes
            .get(6..8)
            .map(|v| u16::from_le_bytes([v[0], v[1]]))
            .ok_or(truncated)?;
        let corrupt = |offset: usize, reason: String| RecordingError::Corrupt { offset, reason };
        if flags != 0 {
            return Err(corrupt(4, format!("unknown flags {flags:#06x}")));
        }
        let mut r = Reader::new(bytes.get(PREAMBLE_LEN..).unwrap_or_default());
        let len = r.count("header", MAX_HEADER_BODY).map_err(|e| match e {
            DecodeError::Truncated => RecordingError::Truncated {
                offset: PREAMBLE_LEN,
            },
            e => corrupt(PREAMBLE_LEN, e.to_string()),
        })?;
        let body = r.take(len).map_err(|_| RecordingError::Truncated {
            offset: PREAMBLE_LEN,
        })?;
        let header =
            decode_header(&mut Reader::new(body), version).map_err(|e| corrupt(PREAMBLE_LEN, e))?;
        let reader = Self {
            bytes,
            pos: PREAMBLE_LEN + r.position(),
            state: StreamState {
                last_time: nanos(header.start),
                tick: header.start_tick,
            },
            ended: false,
        };
        Ok((header, reader))
    }

    /// Byte offset of the next record.
    pub fn offset(&self) -> usize {
        self.pos
    }

    /// The next record; `None` at the end of the bytes or after an [`Record::End`]. Records
    /// after an `End` are an error.
    pub fn next_record(&mut self) -> Result<Option<Record>, RecordingError> {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        if rest.is_empty() {
            return Ok(None);
        }
        let offset = self.pos;
        if self.ended {
            return Err(RecordingError::Corrupt {
                offset,
                reason: "bytes after the end record".into(),
            });
        }
        let mut r = Reader::new(rest);
        let corrupt = |reason: String| RecordingError::Corrupt { offset, reason };
        let trunc = |e: DecodeError| match e {
            DecodeError::Truncated => RecordingError::Truncated { offset },
            e => RecordingError::Corrupt {
                offset,
                reason: e.to_string(),
            },
        };
        let t = r.u8().map_err(trunc)?;
        let len = r.count("record", MAX_RECORD_BODY).map_err(trunc)?;
        let body = r.take(len).map_err(trunc)?;
        let record = decode_body(t, &mut Reader::new(body), &mut self.state).map_err(corrupt)?;
        self.pos += r.position();
        self.ended = matches!(record, Record::End(_));
        Ok(Some(record))
    }
}

/// Reads one framed record (the replay decodes what its own host recorded with this).
pub(crate) fn decode_one(r: &mut Reader<'_>, state: &mut StreamState) -> Result<Record, String> {
    let t = r.u8().map_err(bad)?;
    let len = r.count("record", MAX_RECORD_BODY).map_err(bad)?;
    let body = r.take(len).map_err(bad)?;
    decode_body(t, &mut Reader::new(body), state)
}
