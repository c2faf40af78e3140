//! Client → server messages (PROTOCOL.md §4): Hello, Input, Ping, Resync, the Inputs datagram, and
//! chat's Chat, ChatReport and ChatHistory (whose types and codec live in [`super::chat`]).

use super::chat::{Chat, ChatHistory, ChatReport};
use super::tag;
use crate::error::{DecodeError, EncodeError};
use crate::limits::{
    MAX_CLIENT_MESSAGE, MAX_CONTENT_VERSION, MAX_DATAGRAM_INPUTS, MAX_INPUT_PAYLOAD,
    MAX_RECONNECT_TOKEN, MAX_TICKET, MAX_VERSIONS,
};
use crate::wire::{put_bytes_named, put_str_named, put_varint, Reader};

/// The version that added [`ResumeFrom`] to Hello (§4.1.1).
pub const RESUME_FROM_VERSION: u32 = 4;
/// The byte that announces a [`ResumeFrom`] after a Hello's content version (§4.1.1).
const RESUME_FROM_PRESENT: u8 = 1;

/// The client's opening message (§4.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// Protocol versions the client speaks: 1..=8, distinct.
    pub versions: Vec<u32>,
    /// The signed ticket (≤ 4096 bytes).
    pub ticket: String,
    /// Reconnect token from an earlier Welcome; empty = none (≤ 64 bytes).
    pub reconnect_token: Vec<u8>,
    /// The game content the client was built for, a dotted number such as `1.4.0` (§4.1.2);
    /// empty = none (≤ 64 bytes).
    pub content_version: String,
    /// Where a resuming client's known set stands (§4.1.1, version 4): with it the host may
    /// continue with a Delta against that state instead of a BASELINE. Only with a reconnect
    /// token and only when `versions` offers 4 or a later version.
    pub resume_from: Option<ResumeFrom>,
}

/// What a resuming client holds (§4.1.1): the tick of the last Delta it applied and the count and
/// [`known_set_hash`](crate::known_set_hash) of its known set, exactly as a KnownSetCheck (§5.7)
/// states them. The host continues with an ordinary Delta only when all three match what it last
/// built for that player.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResumeFrom {
    /// The tick of the last Delta the client applied.
    pub tick: u64,
    /// How many entities its known set holds.
    pub count: u32,
    /// FNV-1a (32 bit) of the known set's ids, ascending, each as 4 little-endian bytes.
    pub hash: u32,
}

/// One input (§4.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    /// Sequence number, from 1, +1 per input; 0 is invalid.
    pub seq: u32,
    /// The server tick the client was displaying.
    pub view_tick: u64,
    /// The game's opaque input bytes (≤ 4096).
    pub payload: Vec<u8>,
}

/// A clock probe (§4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ping {
    /// Opaque client time, echoed in Pong.
    pub client_time: u64,
}

/// A request for a BASELINE (§4.4): the client's known set no longer matches the host's check, so
/// it asks to start over from full state instead of applying Deltas to the wrong entities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resync {
    /// The tick of the last Delta the client applied (0 = none); for the host's logs and metrics.
    pub tick: u64,
}

/// A WebTransport client's datagram (§4.5, version 6): its acknowledgement of the newest State it
/// applied, and its newest inputs with the unacknowledged ones before them, so that a lost datagram
/// costs nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inputs {
    /// The tick of the newest State the client applied (0 = none yet): a tick, where a Delta's
    /// or State's `ack` is an input `seq`.
    pub state_ack: u64,
    /// At most [`MAX_DATAGRAM_INPUTS`], `seq` strictly ascending; may be empty (an ack alone).
    pub inputs: Vec<Input>,
}

/// Any client → server message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientMessage {
    /// Tag `0x01`.
    Hello(Hello),
    /// Tag `0x02`.
    Input(Input),
    /// Tag `0x03`.
    Ping(Ping),
    /// Tag `0x04` (protocol version 2).
    Resync(Resync),
    /// Tag `0x05` (protocol version 6, datagrams only).
    Inputs(Inputs),
    /// Tag `0x06` (protocol version 11).
    Chat(Chat),
    /// Tag `0x07` (protocol version 11).
    ChatReport(ChatReport),
    /// Tag `0x08` (protocol version 11).
    ChatHistory(ChatHistory),
}

/// The highest version in both lists (§4.1); `None` means the host answers `Kick(VERSION_MISMATCH)`.
pub fn negotiate_version(offered: &[u32], supported: &[u32]) -> Option<u32> {
    offered
        .iter()
        .filter(|v| supported.contains(v))
        .max()
        .copied()
}

/// A `resume_from` needs a reconnect token to resume and a version that defines it.
fn check_resume_from(h: &Hello) -> Result<(), &'static str> {
    if h.resume_from.is_none() {
        return Ok(());
    }
    may_resume_from(&h.versions, &h.reconnect_token)
}

/// Whether a Hello offering `versions` with `reconnect_token` may carry `resume_from`: only when
/// it resumes (a token) and offers a version that defines it (4 or later).
fn may_resume_from(versions: &[u32], reconnect_token: &[u8]) -> Result<(), &'static str> {
    if reconnect_token.is_empty() {
        return Err("Hello has resume_from without a reconnect token");
    }
    // Any version from 4 on defines it: a version 5 client offers only 5.
    if !versions.iter().any(|v| *v >= RESUME_FROM_VERSION) {
        return Err("Hello has resume_from without offering version 4 or later");
    }
    Ok(())
}

fn check_versions(versions: &[u32]) -> Result<(), &'static str> {
    if versions.is_empty() {
        return Err("Hello offers no version");
    }
    for (i, v) in versions.iter().enumerate() {
        if versions.get(..i).is_some_and(|before| before.contains(v)) {
            return Err("Hello offers a version twice");
        }
    }
    Ok(())
}

/// One input's fields (§4.2), as Input and the Inputs datagram both carry them.
fn put_input(out: &mut Vec<u8>, i: &Input) -> Result<(), EncodeError> {
    if i.seq == 0 {
        return Err(EncodeError::Invalid("input seq 0"));
    }
    put_varint(out, u64::from(i.seq));
    put_varint(out, i.view_tick);
    put_bytes_named(out, "input payload", &i.payload, MAX_INPUT_PAYLOAD)
}

fn read_input(r: &mut Reader<'_>) -> Result<Input, DecodeError> {
    let seq = r.varint_u32()?;
    if seq == 0 {
        return Err(DecodeError::Invalid("input seq 0"));
    }
    let view_tick = r.varint_u64()?;
    let payload = r.bytes_named("input payload", MAX_INPUT_PAYLOAD)?.to_vec();
    Ok(Input {
        seq,
        view_tick,
        payload,
    })
}

impl ClientMessage {
    /// Appends the message (tag first). Refuses values a decoder would reject and messages over
    /// [`MAX_CLIENT_MESSAGE`]; on error `out` is left as it was.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = out.len();
        let r = self.encode_inner(out).and_then(|()| {
            let len = out.len() - start;
            if len > MAX_CLIENT_MESSAGE {
                return Err(EncodeError::TooLong {
                    what: "client message",
                    len: len as u64,
                    max: MAX_CLIENT_MESSAGE as u64,
                });
            }
            Ok(())
        });
        if r.is_err() {
            out.truncate(start);
        }
        r
    }

    fn encode_inner(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match self {
            ClientMessage::Hello(h) => {
                if h.versions.len() > MAX_VERSIONS {
                    return Err(EncodeError::TooLong {
                        what: "versions",
                        len: h.versions.len() as u64,
                        max: MAX_VERSIONS as u64,
                    });
                }
                check_versions(&h.versions).map_err(EncodeError::Invalid)?;
                check_resume_from(h).map_err(EncodeError::Invalid)?;
                out.push(tag::HELLO);
                put_varint(out, h.versions.len() as u64);
                for v in &h.versions {
                    put_varint(out, u64::from(*v));
                }
                put_str_named(out, "ticket", &h.ticket, MAX_TICKET)?;
                put_bytes_named(
                    out,
                    "reconnect token",
                    &h.reconnect_token,
                    MAX_RECONNECT_TOKEN,
                )?;
                put_str_named(
                    out,
                    "content version",
                    &h.content_version,
                    MAX_CONTENT_VERSION,
                )?;
                if let Some(from) = h.resume_from {
                    out.push(RESUME_FROM_PRESENT);
                    put_varint(out, from.tick);
                    put_varint(out, u64::from(from.count));
                    out.extend_from_slice(&from.hash.to_le_bytes());
                }
            }
            ClientMessage::Input(i) => {
                out.push(tag::INPUT);
                put_input(out, i)?;
            }
            ClientMessage::Inputs(b) => {
                if b.inputs.len() > MAX_DATAGRAM_INPUTS {
                    return Err(EncodeError::TooLong {
                        what: "inputs in a datagram",
                        len: b.inputs.len() as u64,
                        max: MAX_DATAGRAM_INPUTS as u64,
                    });
                }
                if b.inputs.windows(2).any(|w| w[0].seq >= w[1].seq) {
                    return Err(EncodeError::Invalid("datagram inputs not ascending by seq"));
                }
                out.push(tag::INPUTS);
                put_varint(out, b.state_ack);
                put_varint(out, b.inputs.len() as u64);
                for i in &b.inputs {
                    put_input(out, i)?;
                }
            }
            ClientMessage::Ping(p) => {
                out.push(tag::PING);
                put_varint(out, p.client_time);
            }
            ClientMessage::Resync(r) => {
                out.push(tag::RESYNC);
                put_varint(out, r.tick);
            }
            ClientMessage::Chat(c) => {
                out.push(tag::CHAT);
                c.write(out)?;
            }
            ClientMessage::ChatReport(c) => {
                out.push(tag::CHAT_REPORT);
                c.write(out)?;
            }
            ClientMessage::ChatHistory(c) => {
                out.push(tag::CHAT_HISTORY);
                c.write(out)?;
            }
        }
        Ok(())
    }

    /// Encodes into a fresh buffer.
    pub fn to_bytes(&self) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::new();
        self.encode(&mut out)?;
        Ok(out)
    }

    /// Decodes one whole message; total (every input yields a message or a typed error).
    pub fn decode(bytes: &[u8]) -> Result<ClientMessage, DecodeError> {
        if bytes.len() > MAX_CLIENT_MESSAGE {
            return Err(DecodeError::TooLong {
                what: "client message",
                len: bytes.len() as u64,
                max: MAX_CLIENT_MESSAGE as u64,
            });
        }
        let mut r = Reader::new(bytes);
        let msg = match r.u8()? {
            tag::HELLO => {
                let n = r.count("versions", MAX_VERSIONS)?;
                let mut versions = Vec::with_capacity(n);
                for _ in 0..n {
                    versions.push(r.varint_u32()?);
                }
                check_versions(&versions).map_err(DecodeError::Invalid)?;
                let ticket = r.str_named("ticket", MAX_TICKET)?.to_owned();
                let reconnect_token = r
                    .bytes_named("reconnect token", MAX_RECONNECT_TOKEN)?
                    .to_vec();
                let content_version = r
                    .str_named("content version", MAX_CONTENT_VERSION)?
                    .to_owned();
                // Absent unless bytes follow the content version (§4.1.1).
                let resume_from = if r.remaining() == 0 {
                    None
                } else {
                    if r.u8()? != RESUME_FROM_PRESENT {
                        return Err(DecodeError::Invalid("Hello resume_from marker is not 1"));
                    }
                    // Refused at the marker (§4.1.1): what follows it is not read.
                    may_resume_from(&versions, &reconnect_token).map_err(DecodeError::Invalid)?;
                    Some(ResumeFrom {
                        tick: r.varint_u64()?,
                        count: r.varint_u32()?,
                        hash: r.u32_le()?,
                    })
                };
                let hello = Hello {
                    versions,
                    ticket,
                    reconnect_token,
                    content_version,
                    resume_from,
                };
                check_resume_from(&hello).map_err(DecodeError::Invalid)?;
                ClientMessage::Hello(hello)
            }
            tag::INPUT => ClientMessage::Input(read_input(&mut r)?),
            tag::INPUTS => {
                let state_ack = r.varint_u64()?;
                let n = r.count("inputs in a datagram", MAX_DATAGRAM_INPUTS)?;
                let mut inputs: Vec<Input> = Vec::with_capacity(n);
                for _ in 0..n {
                    let i = read_input(&mut r)?;
                    if inputs.last().is_some_and(|p| p.seq >= i.seq) {
                        return Err(DecodeError::Invalid("datagram inputs not ascending by seq"));
                    }
                    inputs.push(i);
                }
                ClientMessage::Inputs(Inputs { state_ack, inputs })
            }
            tag::PING => ClientMessage::Ping(Ping {
                client_time: r.varint_u64()?,
            }),
            tag::RESYNC => ClientMessage::Resync(Resync {
                tick: r.varint_u64()?,
            }),
            tag::CHAT => ClientMessage::Chat(Chat::read(&mut r)?),
            tag::CHAT_REPORT => ClientMessage::ChatReport(ChatReport::read(&mut r)?),
            tag::CHAT_HISTORY => ClientMessage::ChatHistory(ChatHistory::read(&mut r)?),
            t => return Err(DecodeError::UnknownTag(t)),
        };
        r.finish()?;
        Ok(msg)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn hello() -> Hello {
        Hello {
            versions: vec![1, 2],
            ticket: "t.k.s".into(),
            reconnect_token: vec![1, 2, 3],
            content_version: "v7".into(),
            resume_from: None,
        }
    }

    #[test]
    fn resume_from_trails_a_version_4_hello() {
        let mut h = hello();
        h.versions = vec![4];
        h.resume_from = Some(ResumeFrom {
            tick: 300,
            count: 2,
            hash: 0x0403_0201,
        });
        let m = ClientMessage::Hello(h.clone());
        let b = m.to_bytes().unwrap();
        let tail = [1, 0xac, 0x02, 2, 1, 2, 3, 4];
        assert!(b.ends_with(&tail), "{b:02x?}");
        assert_eq!(ClientMessage::decode(&b).unwrap(), m);
        // Without it the Hello is byte for byte a version 3 one.
        h.resume_from = None;
        let plain = ClientMessage::Hello(h.clone()).to_bytes().unwrap();
        assert_eq!(plain, b[..b.len() - tail.len()]);

        // Refused both ways: no token, no version 4, a marker other than 1, cut short.
        let mut no_token = hello();
        no_token.versions = vec![4];
        no_token.reconnect_token.clear();
        no_token.resume_from = Some(ResumeFrom {
            tick: 1,
            count: 0,
            hash: 0,
        });
        assert!(ClientMessage::Hello(no_token.clone()).to_bytes().is_err());
        let mut v3 = hello();
        v3.versions = vec![3];
        v3.resume_from = Some(ResumeFrom {
            tick: 1,
            count: 0,
            hash: 0,
        });
        assert_eq!(
            ClientMessage::Hello(v3).to_bytes(),
            Err(EncodeError::Invalid(
                "Hello has resume_from without offering version 4 or later"
            ))
        );
        // A later version defines it too: a version 5 client offers only 5.
        let mut v5 = hello();
        v5.versions = vec![5];
        v5.resume_from = Some(ResumeFrom {
            tick: 1,
            count: 0,
            hash: 0,
        });
        let m = ClientMessage::Hello(v5);
        assert_eq!(ClientMessage::decode(&m.to_bytes().unwrap()).unwrap(), m);
        let mut wire = plain.clone();
        wire.extend_from_slice(&[2, 1, 0, 0, 0, 0, 0]);
        assert_eq!(
            ClientMessage::decode(&wire),
            Err(DecodeError::Invalid("Hello resume_from marker is not 1"))
        );
        let mut cut = plain.clone();
        cut.extend_from_slice(&tail[..tail.len() - 1]);
        assert_eq!(ClientMessage::decode(&cut), Err(DecodeError::Truncated));
        no_token.resume_from = None;
        let mut wire = ClientMessage::Hello(no_token).to_bytes().unwrap();
        wire.extend_from_slice(&tail);
        assert_eq!(
            ClientMessage::decode(&wire),
            Err(DecodeError::Invalid(
                "Hello has resume_from without a reconnect token"
            ))
        );
    }

    #[test]
    fn hello_round_trip_and_bytes() {
        let m = ClientMessage::Hello(hello());
        let b = m.to_bytes().unwrap();
        assert_eq!(
            b,
            [1, 2, 1, 2, 5, b't', b'.', b'k', b'.', b's', 3, 1, 2, 3, 2, b'v', b'7']
        );
        assert_eq!(ClientMessage::decode(&b).unwrap(), m);
    }

    #[test]
    fn hello_version_rules() {
        let mut h = hello();
        h.versions = vec![];
        assert!(ClientMessage::Hello(h.clone()).to_bytes().is_err());
        h.versions = vec![1, 1];
        assert!(ClientMessage::Hello(h.clone()).to_bytes().is_err());
        h.versions = (1..=9).collect();
        assert!(ClientMessage::Hello(h).to_bytes().is_err());
        assert_eq!(
            ClientMessage::decode(&[1, 0, 0, 0, 0]),
            Err(DecodeError::Invalid("Hello offers no version"))
        );
        assert!(matches!(
            ClientMessage::decode(&[1, 9]),
            Err(DecodeError::TooLong {
                what: "versions",
                ..
            })
        ));
        assert_eq!(negotiate_version(&[1, 3, 2], &[1, 2]), Some(2));
        assert_eq!(negotiate_version(&[3], &[1]), None);
    }

    #[test]
    fn input_and_ping() {
        let m = ClientMessage::Input(Input {
            seq: 5,
            view_tick: 1000,
            payload: vec![9, 9],
        });
        let b = m.to_bytes().unwrap();
        assert_eq!(b, [2, 5, 0xe8, 0x07, 2, 9, 9]);
        assert_eq!(ClientMessage::decode(&b).unwrap(), m);
        assert_eq!(
            ClientMessage::decode(&[2, 0, 0, 0]),
            Err(DecodeError::Invalid("input seq 0"))
        );
        let p = ClientMessage::Ping(Ping { client_time: 42 });
        assert_eq!(ClientMessage::decode(&p.to_bytes().unwrap()).unwrap(), p);
        let r = ClientMessage::Resync(Resync { tick: 300 });
        let b = r.to_bytes().unwrap();
        assert_eq!(b, [4, 0xac, 0x02]);
        assert_eq!(ClientMessage::decode(&b).unwrap(), r);
    }

    #[test]
    fn decode_errors_are_typed() {
        assert_eq!(ClientMessage::decode(&[]), Err(DecodeError::Truncated));
        assert_eq!(
            ClientMessage::decode(&[0x81]),
            Err(DecodeError::UnknownTag(0x81))
        );
        assert_eq!(
            ClientMessage::decode(&[3, 1, 0]),
            Err(DecodeError::TrailingBytes(1))
        );
        assert!(matches!(
            ClientMessage::decode(&vec![3; MAX_CLIENT_MESSAGE + 1]),
            Err(DecodeError::TooLong { .. })
        ));
        let big = ClientMessage::Input(Input {
            seq: 1,
            view_tick: 0,
            payload: vec![0; 4097],
        });
        let mut out = vec![7];
        assert!(big.encode(&mut out).is_err());
        assert_eq!(out, [7]);
    }
}
