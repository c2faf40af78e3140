//! The relay link's messages: one WebSocket binary message each, a tag byte first.
//!
//! Origin to relay:
//! - `0x01` PATCH: the rest is a link message ([`zonekeep_core::relay`]): the feed and the
//!   relayed participants' records for one patch.
//! - `0x02` TO_CLIENT: `varint client`, then the rest is one server message for that client,
//!   exactly as a direct connection would get it (its Welcome, notices, chat).
//! - `0x03` KICK: `varint client`, `varint code`, then the rest is the reason (UTF-8, at most
//!   256 bytes): close that client with this Kick.
//!
//! Relay to origin:
//! - `0x11` HELLO: `varint client`, then the rest is the client's Hello, as it sent it.
//! - `0x12` FROM_CLIENT: `varint client`, then the rest is one message the client sent after
//!   its Welcome.
//! - `0x13` GONE: `varint client`: the client's connection ended.
//! - `0x14` LOAD: `varint clients`, `varint max_clients`, then the rest is the URL the relay's
//!   clients connect to (`ws://` or `wss://`, at most 512 bytes): where the origin may send new
//!   players (sent when the link opens, then every second).
//!
//! A client is named by a number its relay picks, unique on the link for the link's life.

use bytes::Bytes;
use zonekeep_protocol::error::DecodeError;
use zonekeep_protocol::limits::{clip, MAX_KICK_REASON, MAX_URL};
use zonekeep_protocol::messages::KickCode;
use zonekeep_protocol::wire::{put_varint, Reader};

const PATCH: u8 = 0x01;
const TO_CLIENT: u8 = 0x02;
const KICK: u8 = 0x03;
const HELLO: u8 = 0x11;
const FROM_CLIENT: u8 = 0x12;
const GONE: u8 = 0x13;
const LOAD: u8 = 0x14;

/// A message from the origin, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Down<'a> {
    /// One patch's link message.
    Patch(&'a [u8]),
    /// One server message for a client.
    ToClient {
        /// The client.
        client: u32,
        /// The message.
        bytes: &'a [u8],
    },
    /// Close a client with a Kick.
    Kick {
        /// The client.
        client: u32,
        /// The Kick's code.
        code: KickCode,
        /// Why.
        reason: &'a str,
    },
}

/// A message from a relay, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Up<'a> {
    /// A client's Hello.
    Hello {
        /// The client.
        client: u32,
        /// The Hello.
        bytes: &'a [u8],
    },
    /// A message a client sent after its Welcome.
    FromClient {
        /// The client.
        client: u32,
        /// The message.
        bytes: &'a [u8],
    },
    /// A client's connection ended.
    Gone {
        /// The client.
        client: u32,
    },
    /// The relay's clients, room, and where its clients connect.
    Load {
        /// Clients connected to the relay.
        clients: u32,
        /// Most it takes.
        max: u32,
        /// Its clients' base URL.
        url: &'a str,
    },
}

fn tagged(tag: u8, client: u32, rest: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(rest.len() + 6);
    out.push(tag);
    put_varint(&mut out, u64::from(client));
    out.extend_from_slice(rest);
    Bytes::from(out)
}

/// A PATCH message around `link_message`.
pub(crate) fn patch(link_message: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(link_message.len() + 1);
    out.push(PATCH);
    out.extend_from_slice(link_message);
    Bytes::from(out)
}

/// A TO_CLIENT message.
pub(crate) fn to_client(client: u32, bytes: &[u8]) -> Bytes {
    tagged(TO_CLIENT, client, bytes)
}

/// A KICK message; the reason is cut to the protocol's limit on a char boundary.
pub(crate) fn kick(client: u32, code: KickCode, reason: &str) -> Bytes {
    let mut out = Vec::with_capacity(reason.len().min(MAX_KICK_REASON) + 9);
    out.push(KICK);
    put_varint(&mut out, u64::from(client));
    put_varint(&mut out, u64::from(code.0));
    out.extend_from_slice(clip(reason, MAX_KICK_REASON).as_bytes());
    Bytes::from(out)
}

/// A HELLO message.
pub(crate) fn hello(client: u32, bytes: &[u8]) -> Bytes {
    tagged(HELLO, client, bytes)
}

/// A FROM_CLIENT message.
pub(crate) fn from_client(client: u32, bytes: &[u8]) -> Bytes {
    tagged(FROM_CLIENT, client, bytes)
}

/// A GONE message.
pub(crate) fn gone(client: u32) -> Bytes {
    tagged(GONE, client, &[])
}

/// A LOAD message.
pub(crate) fn load(clients: u32, max: u32, url: &str) -> Bytes {
    let mut out = vec![LOAD];
    put_varint(&mut out, u64::from(clients));
    put_varint(&mut out, u64::from(max));
    out.extend_from_slice(url.as_bytes());
    Bytes::from(out)
}

/// The rest of a message as text of at most `max` bytes.
fn rest_text<'a>(
    r: &mut Reader<'a>,
    what: &'static str,
    max: usize,
) -> Result<&'a str, DecodeError> {
    let bytes = r.take(r.remaining())?;
    if bytes.len() > max {
        return Err(DecodeError::TooLong {
            what,
            len: bytes.len() as u64,
            max: max as u64,
        });
    }
    std::str::from_utf8(bytes).map_err(|_| DecodeError::InvalidUtf8)
}

/// The client number and what follows it.
fn client_and_rest<'a>(r: &mut Reader<'a>) -> Result<(u32, &'a [u8]), DecodeError> {
    let client = r.varint_u32()?;
    let rest = r.take(r.remaining())?;
    Ok((client, rest))
}

impl<'a> Down<'a> {
    /// Reads a message from the origin.
    pub(crate) fn read(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        match r.u8()? {
            PATCH => Ok(Down::Patch(r.take(r.remaining())?)),
            TO_CLIENT => {
                let (client, bytes) = client_and_rest(&mut r)?;
                if bytes.is_empty() {
                    return Err(DecodeError::Invalid(
                        "an empty message for a relayed client",
                    ));
                }
                Ok(Down::ToClient { client, bytes })
            }
            KICK => {
                let client = r.varint_u32()?;
                let code = KickCode(r.varint_u16()?);
                let reason = rest_text(&mut r, "relay kick reason", MAX_KICK_REASON)?;
                Ok(Down::Kick {
                    client,
                    code,
                    reason,
                })
            }
            _ => Err(DecodeError::Invalid(
                "an unknown relay link message from the origin",
            )),
        }
    }
}

impl<'a> Up<'a> {
    /// Reads a message from a relay.
    pub(crate) fn read(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        match r.u8()? {
            HELLO => {
                let (client, bytes) = client_and_rest(&mut r)?;
                Ok(Up::Hello { client, bytes })
            }
            FROM_CLIENT => {
                let (client, bytes) = client_and_rest(&mut r)?;
                Ok(Up::FromClient { client, bytes })
            }
            GONE => {
                let client = r.varint_u32()?;
                r.finish()?;
                Ok(Up::Gone { client })
            }
            LOAD => {
                let clients = r.varint_u32()?;
                let max = r.varint_u32()?;
                let url = rest_text(&mut r, "relay URL", MAX_URL)?;
                if !(url.starts_with("ws://") || url.starts_with("wss://")) {
                    return Err(DecodeError::Invalid(
                        "a relay URL that is not ws:// or wss://",
                    ));
                }
                Ok(Up::Load { clients, max, url })
            }
            _ => Err(DecodeError::Invalid(
                "an unknown relay link message from a relay",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn messages_read_back_as_written() {
        assert_eq!(
            Down::read(&patch(&[1, 2, 3])).unwrap(),
            Down::Patch(&[1, 2, 3])
        );
        assert_eq!(
            Down::read(&to_client(300, &[9, 8])).unwrap(),
            Down::ToClient {
                client: 300,
                bytes: &[9, 8]
            }
        );
        let long = "é".repeat(200);
        let k = kick(7, KickCode::SLOW_CONSUMER, &long);
        let Down::Kick {
            client,
            code,
            reason,
        } = Down::read(&k).unwrap()
        else {
            panic!("a kick")
        };
        assert_eq!((client, code), (7, KickCode::SLOW_CONSUMER));
        assert!(reason.len() <= MAX_KICK_REASON && long.starts_with(reason));
        assert_eq!(
            Up::read(&hello(1, &[5])).unwrap(),
            Up::Hello {
                client: 1,
                bytes: &[5]
            }
        );
        assert_eq!(
            Up::read(&from_client(u32::MAX, &[])).unwrap(),
            Up::FromClient {
                client: u32::MAX,
                bytes: &[]
            }
        );
        assert_eq!(Up::read(&gone(4)).unwrap(), Up::Gone { client: 4 });
        assert_eq!(
            Up::read(&load(3, 10, "ws://r:1")).unwrap(),
            Up::Load {
                clients: 3,
                max: 10,
                url: "ws://r:1"
            }
        );
    }

    #[test]
    fn malformed_messages_are_typed_errors() {
        assert!(Down::read(&[]).is_err());
        assert!(Up::read(&[]).is_err());
        // A message of the other direction, or of no direction.
        assert!(Down::read(&hello(1, &[5])).is_err());
        assert!(Up::read(&patch(&[1])).is_err());
        assert!(Up::read(&[0x7f, 1]).is_err());
        // A client number past u32, cut varints, an empty message, bytes after GONE.
        assert!(Up::read(&[HELLO, 0xff, 0xff, 0xff, 0xff, 0x7f]).is_err());
        assert!(Up::read(&[GONE, 0x80]).is_err());
        assert!(Down::read(&[TO_CLIENT, 1]).is_err());
        assert!(Up::read(&[GONE, 1, 0]).is_err());
        // A relay URL of another scheme, or too long.
        assert!(Up::read(&load(1, 2, "http://r:1")).is_err());
        assert!(Up::read(&load(1, 2, &format!("ws://{}", "r".repeat(MAX_URL)))).is_err());
        // A kick reason that is not UTF-8, or longer than the protocol allows.
        assert!(Down::read(&[KICK, 1, 2, 0xff]).is_err());
        let mut long = vec![KICK, 1, 2];
        long.extend(std::iter::repeat_n(b'a', MAX_KICK_REASON + 1));
        assert!(Down::read(&long).is_err());
    }
}
