//! Server → client messages (PROTOCOL.md §5): Welcome, Delta, Pong, Kick, Redirect, Transfer,
//! InputRefused, KnownSetCheck, Events, Entries, and chat's ChatLines and ChatReply (whose types
//! and codec live in [`super::chat`]).
//!
//! A Delta cannot be decoded alone: it names entities by their index in the client's known set and its
//! values by the schema's field types. [`ServerMessage::decode`] therefore takes an optional
//! [`DeltaContext`] (the schema from Welcome and the known set before this Delta); without one, a Delta is
//! refused. Clients that route by tag first can use [`peek_tag`] and call
//! [`crate::delta::decode_delta`] directly.

mod elsewhere;
mod kick;

pub use elsewhere::{Entries, Redirect, Transfer};
pub use kick::{Kick, KickCode};

use super::chat::{ChatLines, ChatReply};
use super::tag;
use crate::delta::{decode_delta, Delta, Event};
use crate::error::{DecodeError, EncodeError};
use crate::limits::{
    MAX_CONTENT_VERSION, MAX_EVENTS, MAX_EVENT_PAYLOAD, MAX_KICK_REASON, MAX_RECONNECT_TOKEN,
    MAX_SERVER_MESSAGE, MAX_TICKET, MAX_URL, MAX_ZONE_ID,
};
use crate::schema::Schema;
use crate::wire::{put_bytes_named, put_str_named, put_varint, Reader};
use elsewhere::{is_websocket_url, put_entries, read_entries};

/// Whether the connection plays or only watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Wire value 0.
    Player,
    /// Wire value 1.
    Observer,
}

/// The version that added [`Welcome::content_version`] and [`KickCode::CONTENT_OUTDATED`]
/// (§4.1.2): a Welcome built for an older version carries no content version.
pub const CONTENT_VERSION_PROTOCOL: u32 = 5;

/// The version that added [`Welcome::entries`] (§5.3.1): a Welcome built for an older version
/// lists no entry URLs.
pub const ENTRIES_PROTOCOL: u32 = 7;

/// The version that added [`Transfer`] (§5.3.2): a host sends it only to a session that
/// negotiated this version or a later one, and refuses to move a player whose session did not.
pub const TRANSFER_PROTOCOL: u32 = 8;

/// The version that added [`KickCode::WORLD_HALTED`] (§5.3): a lasting world whose saves failed
/// stopped, and resumes from its last committed save once its store answers. A session of an
/// older version is told INTERNAL_ERROR instead, which it retries just the same.
pub const HALT_PROTOCOL: u32 = 9;

/// The version that added [`KickCode::CHARACTER_MOVED`] and [`KickCode::CHARACTER_ELSEWHERE`]
/// (§5.3): the player's character went into another zone (another game or device), or is held by
/// a zone that could not give it back yet. A session of an older version is told KICKED and
/// INTERNAL_ERROR instead: it stops, or retries, as it should.
pub const CHARACTER_PROTOCOL: u32 = 10;

/// The server's answer to a valid Hello (§5.1).
#[derive(Debug, Clone, PartialEq)]
pub struct Welcome {
    /// The negotiated protocol version.
    pub version: u32,
    /// This connection's player (or observer) id in the zone.
    pub player_id: u32,
    /// The zone's id (≤ 128 bytes).
    pub zone_id: String,
    /// Player or observer.
    pub role: Role,
    /// Simulation ticks per second, 1..=1000.
    pub tick_hz: u32,
    /// Ticks per Delta, ≥ 1.
    pub patch_every: u32,
    /// The zone's current tick.
    pub tick: u64,
    /// Feature bits (none defined yet; clients ignore unknown bits).
    pub features: u32,
    /// Milliseconds without any message from the client (an Input, a Ping, a Resync) after which the
    /// host kicks it with IDLE_TIMEOUT; a client that has nothing else to send pings more often.
    pub idle_timeout_ms: u32,
    /// Milliseconds the host waits for a Hello after the WebSocket opens (HANDSHAKE_TIMEOUT).
    pub handshake_timeout_ms: u32,
    /// Milliseconds a dropped player stays in the zone, resumable with `reconnect_token`.
    pub reconnect_grace_ms: u32,
    /// Token for resuming this player (≤ 64 bytes).
    pub reconnect_token: Vec<u8>,
    /// How to decode entities.
    pub schema: Schema,
    /// The game content version the host runs (≤ 64 bytes; empty = none), so a client can tell
    /// it was built for other content (§4.1.2). Only a Welcome of version 5 or later carries it
    /// ([`CONTENT_VERSION_PROTOCOL`]): for an older `version` it must be empty, and it decodes as
    /// empty.
    pub content_version: String,
    /// Where else the client may enter the zone when its entry URL is unreachable (§5.3.1): at
    /// most [`MAX_ENTRIES`] WebSocket URLs of the zone (each ≤ 512 bytes), the zone's owner first,
    /// then the fleet's other live hosts. Only a Welcome of version 7 or later carries them
    /// ([`ENTRIES_PROTOCOL`]): for an older `version` it must be empty, and it decodes as empty.
    ///
    /// [`MAX_ENTRIES`]: crate::limits::MAX_ENTRIES
    pub entries: Vec<String>,
}

impl Welcome {
    /// The entry URLs a client may connect to: those that are absolute `ws://` or `wss://` URLs
    /// (any other is skipped, as a Redirect to it would be refused: a ticket goes to zone hosts
    /// only).
    pub fn websocket_entries(&self) -> impl Iterator<Item = &str> {
        self.entries
            .iter()
            .map(String::as_str)
            .filter(|u| is_websocket_url(u))
    }
}

/// The answer to a Ping (§5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pong {
    /// Echoed from the Ping.
    pub client_time: u64,
    /// The host's monotonic clock in microseconds when it answered.
    pub server_time_us: u64,
    /// The zone tick at that moment.
    pub tick: u64,
}

/// The zone refused one input (§5.6): the client's predictor drops it instead of waiting for an ack
/// that will never cover it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputRefused {
    /// The refused input's `seq` (≥ 1).
    pub seq: u32,
    /// The zone's reason code (game-defined).
    pub code: u16,
}

/// A check of the client's known set (§5.7): the entities it should hold after applying every
/// Delta up to and including the one for `tick`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownSetCheck {
    /// The tick of the last Delta this check covers.
    pub tick: u64,
    /// How many entities the known set holds.
    pub count: u32,
    /// [`known_set_hash`](crate::known::known_set_hash) of the known set's ids, ascending.
    pub hash: u32,
}

/// A tick's zone events on a WebTransport session's control stream (§5.9, version 6): there they
/// cannot ride in the State, which may be lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Events {
    /// The tick whose patch carried them.
    pub tick: u64,
    /// 1..=1024 events, in the order the zone raised them.
    pub events: Vec<Event>,
}

/// Appends an Events message (§5.9) of `events` within the protocol's limits: payloads over
/// 16,384 bytes and events past the 1,024th are left out, as a Delta leaves them out. Writes
/// nothing when none is left; returns how many were left out.
pub fn write_events(out: &mut Vec<u8>, tick: u64, events: &[(u16, &[u8])]) -> usize {
    let kept = || {
        events
            .iter()
            .filter(|(_, p)| p.len() <= MAX_EVENT_PAYLOAD)
            .take(MAX_EVENTS)
    };
    let n = kept().count();
    if n > 0 {
        out.push(tag::EVENTS);
        put_varint(out, tick);
        put_varint(out, n as u64);
        for (topic, payload) in kept() {
            put_varint(out, u64::from(*topic));
            put_varint(out, payload.len() as u64);
            out.extend_from_slice(payload);
        }
    }
    events.len() - n
}

/// What a Delta needs to be encoded or decoded: the schema from Welcome and the client's known set
/// before the Delta (`(id, kind)` strictly ascending by id).
#[derive(Debug, Clone, Copy)]
pub struct DeltaContext<'a> {
    /// The schema from Welcome.
    pub schema: &'a Schema,
    /// The known set before this Delta.
    pub known: &'a [(u32, u32)],
}

/// Any server → client message.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerMessage {
    /// Tag `0x81`.
    Welcome(Welcome),
    /// Tag `0x82`.
    Delta(Delta),
    /// Tag `0x83`.
    Pong(Pong),
    /// Tag `0x84`.
    Kick(Kick),
    /// Tag `0x85` (protocol version 3).
    Redirect(Redirect),
    /// Tag `0x86` (protocol version 8).
    Transfer(Transfer),
    /// Tag `0x87` (protocol version 2).
    InputRefused(InputRefused),
    /// Tag `0x88` (protocol version 2).
    KnownSetCheck(KnownSetCheck),
    /// Tag `0x8a` (protocol version 6).
    Events(Events),
    /// Tag `0x8b` (protocol version 7).
    Entries(Entries),
    /// Tag `0x8c` (protocol version 11).
    ChatLines(ChatLines),
    /// Tag `0x8d` (protocol version 11).
    ChatReply(ChatReply),
}

/// The first byte of a message, or [`DecodeError::Truncated`] for an empty one.
pub fn peek_tag(bytes: &[u8]) -> Result<u8, DecodeError> {
    bytes.first().copied().ok_or(DecodeError::Truncated)
}

/// A content version needs a Welcome of version 5 or later to carry it (§5.1).
fn check_content_version(w: &Welcome) -> Result<(), &'static str> {
    if w.version < CONTENT_VERSION_PROTOCOL && !w.content_version.is_empty() {
        return Err("Welcome content_version needs version 5");
    }
    if w.version < ENTRIES_PROTOCOL && !w.entries.is_empty() {
        return Err("Welcome entries need version 7");
    }
    Ok(())
}

fn welcome_ranges(tick_hz: u32, patch_every: u32) -> Result<(), &'static str> {
    if !(1..=1000).contains(&tick_hz) {
        return Err("tick_hz must be 1..=1000");
    }
    if patch_every == 0 {
        return Err("patch_every must be >= 1");
    }
    Ok(())
}

impl ServerMessage {
    /// Appends the message (tag first). A Delta needs `ctx`. Refuses values a decoder would reject and
    /// messages over [`MAX_SERVER_MESSAGE`]; on error `out` is left as it was.
    pub fn encode(
        &self,
        ctx: Option<DeltaContext<'_>>,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        let start = out.len();
        let r = self.encode_inner(ctx, out).and_then(|()| {
            let len = out.len() - start;
            if len > MAX_SERVER_MESSAGE {
                return Err(EncodeError::TooLong {
                    what: "server message",
                    len: len as u64,
                    max: MAX_SERVER_MESSAGE as u64,
                });
            }
            Ok(())
        });
        if r.is_err() {
            out.truncate(start);
        }
        r
    }

    fn encode_inner(
        &self,
        ctx: Option<DeltaContext<'_>>,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        match self {
            ServerMessage::Welcome(w) => {
                welcome_ranges(w.tick_hz, w.patch_every).map_err(EncodeError::Invalid)?;
                check_content_version(w).map_err(EncodeError::Invalid)?;
                out.push(tag::WELCOME);
                put_varint(out, u64::from(w.version));
                put_varint(out, u64::from(w.player_id));
                put_str_named(out, "zone id", &w.zone_id, MAX_ZONE_ID)?;
                out.push(match w.role {
                    Role::Player => 0,
                    Role::Observer => 1,
                });
                put_varint(out, u64::from(w.tick_hz));
                put_varint(out, u64::from(w.patch_every));
                put_varint(out, w.tick);
                put_varint(out, u64::from(w.features));
                put_varint(out, u64::from(w.idle_timeout_ms));
                put_varint(out, u64::from(w.handshake_timeout_ms));
                put_varint(out, u64::from(w.reconnect_grace_ms));
                put_bytes_named(
                    out,
                    "reconnect token",
                    &w.reconnect_token,
                    MAX_RECONNECT_TOKEN,
                )?;
                w.schema.encode(out)?;
                if w.version >= CONTENT_VERSION_PROTOCOL {
                    put_str_named(
                        out,
                        "content version",
                        &w.content_version,
                        MAX_CONTENT_VERSION,
                    )?;
                }
                if w.version >= ENTRIES_PROTOCOL {
                    put_entries(out, &w.entries)?;
                }
            }
            ServerMessage::Delta(d) => {
                let ctx = ctx.ok_or(EncodeError::Invalid(
                    "a Delta needs the schema and known set",
                ))?;
                d.encode(ctx.schema, ctx.known, out)?;
            }
            ServerMessage::Pong(p) => {
                out.push(tag::PONG);
                put_varint(out, p.client_time);
                put_varint(out, p.server_time_us);
                put_varint(out, p.tick);
            }
            ServerMessage::Kick(k) => {
                out.push(tag::KICK);
                put_varint(out, u64::from(k.code.0));
                put_str_named(out, "kick reason", &k.reason, MAX_KICK_REASON)?;
            }
            ServerMessage::Redirect(r) => {
                out.push(tag::REDIRECT);
                put_str_named(out, "url", &r.url, MAX_URL)?;
                put_str_named(out, "zone id", &r.zone_id, MAX_ZONE_ID)?;
            }
            ServerMessage::Transfer(t) => {
                out.push(tag::TRANSFER);
                put_str_named(out, "zone id", &t.zone_id, MAX_ZONE_ID)?;
                put_str_named(out, "ticket", &t.ticket, MAX_TICKET)?;
                put_str_named(out, "url", &t.url, MAX_URL)?;
            }
            ServerMessage::InputRefused(i) => {
                if i.seq == 0 {
                    return Err(EncodeError::Invalid("input seq 0"));
                }
                out.push(tag::INPUT_REFUSED);
                put_varint(out, u64::from(i.seq));
                put_varint(out, u64::from(i.code));
            }
            ServerMessage::KnownSetCheck(k) => {
                out.push(tag::KNOWN_SET_CHECK);
                put_varint(out, k.tick);
                put_varint(out, u64::from(k.count));
                out.extend_from_slice(&k.hash.to_le_bytes());
            }
            ServerMessage::Entries(e) => {
                out.push(tag::ENTRIES);
                put_entries(out, &e.entries)?;
            }
            ServerMessage::ChatLines(c) => {
                out.push(tag::CHAT_LINES);
                c.write(out)?;
            }
            ServerMessage::ChatReply(c) => {
                out.push(tag::CHAT_REPLY);
                c.write(out)?;
            }
            ServerMessage::Events(e) => {
                if e.events.is_empty() || e.events.len() > MAX_EVENTS {
                    return Err(EncodeError::TooLong {
                        what: "events",
                        len: e.events.len() as u64,
                        max: MAX_EVENTS as u64,
                    });
                }
                if let Some(ev) = e
                    .events
                    .iter()
                    .find(|ev| ev.payload.len() > MAX_EVENT_PAYLOAD)
                {
                    return Err(EncodeError::TooLong {
                        what: "event payload",
                        len: ev.payload.len() as u64,
                        max: MAX_EVENT_PAYLOAD as u64,
                    });
                }
                let items: Vec<(u16, &[u8])> = e
                    .events
                    .iter()
                    .map(|ev| (ev.topic, &ev.payload[..]))
                    .collect();
                write_events(out, e.tick, &items);
            }
        }
        Ok(())
    }

    /// Encodes into a fresh buffer.
    pub fn to_bytes(&self, ctx: Option<DeltaContext<'_>>) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::new();
        self.encode(ctx, &mut out)?;
        Ok(out)
    }

    /// Decodes one whole message; total. A Delta without `ctx` is
    /// `DecodeError::Invalid("a Delta needs the schema and known set")`.
    pub fn decode(
        bytes: &[u8],
        ctx: Option<DeltaContext<'_>>,
    ) -> Result<ServerMessage, DecodeError> {
        if bytes.len() > MAX_SERVER_MESSAGE {
            return Err(DecodeError::TooLong {
                what: "server message",
                len: bytes.len() as u64,
                max: MAX_SERVER_MESSAGE as u64,
            });
        }
        let mut r = Reader::new(bytes);
        let msg = match r.u8()? {
            tag::WELCOME => {
                let version = r.varint_u32()?;
                let player_id = r.varint_u32()?;
                let zone_id = r.str_named("zone id", MAX_ZONE_ID)?.to_owned();
                let role = match r.u8()? {
                    0 => Role::Player,
                    1 => Role::Observer,
                    _ => return Err(DecodeError::Invalid("unknown role")),
                };
                let tick_hz = r.varint_u32()?;
                let patch_every = r.varint_u32()?;
                welcome_ranges(tick_hz, patch_every).map_err(DecodeError::Invalid)?;
                let tick = r.varint_u64()?;
                let features = r.varint_u32()?;
                let idle_timeout_ms = r.varint_u32()?;
                let handshake_timeout_ms = r.varint_u32()?;
                let reconnect_grace_ms = r.varint_u32()?;
                let reconnect_token = r
                    .bytes_named("reconnect token", MAX_RECONNECT_TOKEN)?
                    .to_vec();
                let schema = Schema::decode(&mut r)?;
                // Only a version 5 (or later) Welcome carries it, after the schema (§5.1).
                let content_version = if version >= CONTENT_VERSION_PROTOCOL {
                    r.str_named("content version", MAX_CONTENT_VERSION)?
                        .to_owned()
                } else {
                    String::new()
                };
                // Only a version 7 (or later) Welcome lists them, after the content version.
                let entries = if version >= ENTRIES_PROTOCOL {
                    read_entries(&mut r)?
                } else {
                    Vec::new()
                };
                ServerMessage::Welcome(Welcome {
                    version,
                    player_id,
                    zone_id,
                    role,
                    tick_hz,
                    patch_every,
                    tick,
                    features,
                    idle_timeout_ms,
                    handshake_timeout_ms,
                    reconnect_grace_ms,
                    reconnect_token,
                    schema,
                    content_version,
                    entries,
                })
            }
            tag::DELTA | tag::STATE => {
                let ctx = ctx.ok_or(DecodeError::Invalid(
                    "a Delta needs the schema and known set",
                ))?;
                // decode_delta reads the whole message itself, tag included.
                return decode_delta(bytes, ctx.schema, ctx.known).map(ServerMessage::Delta);
            }
            tag::PONG => ServerMessage::Pong(Pong {
                client_time: r.varint_u64()?,
                server_time_us: r.varint_u64()?,
                tick: r.varint_u64()?,
            }),
            tag::KICK => ServerMessage::Kick(Kick {
                code: KickCode(r.varint_u16()?),
                reason: r.str_named("kick reason", MAX_KICK_REASON)?.to_owned(),
            }),
            tag::REDIRECT => ServerMessage::Redirect(Redirect {
                url: r.str_named("url", MAX_URL)?.to_owned(),
                zone_id: r.str_named("zone id", MAX_ZONE_ID)?.to_owned(),
            }),
            tag::TRANSFER => ServerMessage::Transfer(Transfer {
                zone_id: r.str_named("zone id", MAX_ZONE_ID)?.to_owned(),
                ticket: r.str_named("ticket", MAX_TICKET)?.to_owned(),
                url: r.str_named("url", MAX_URL)?.to_owned(),
            }),
            tag::ENTRIES => ServerMessage::Entries(Entries {
                entries: read_entries(&mut r)?,
            }),
            tag::CHAT_LINES => ServerMessage::ChatLines(ChatLines::read(&mut r)?),
            tag::CHAT_REPLY => ServerMessage::ChatReply(ChatReply::read(&mut r)?),
            tag::EVENTS => {
                let tick = r.varint_u64()?;
                let n = r.count("events", MAX_EVENTS)?;
                if n == 0 {
                    return Err(DecodeError::Invalid("an Events message carries no events"));
                }
                let mut events = Vec::with_capacity(n.min(r.remaining()));
                for _ in 0..n {
                    let topic = r.varint_u16()?;
                    let payload = r.bytes_named("event payload", MAX_EVENT_PAYLOAD)?.to_vec();
                    events.push(Event { topic, payload });
                }
                ServerMessage::Events(Events { tick, events })
            }
            tag::INPUT_REFUSED => {
                let seq = r.varint_u32()?;
                if seq == 0 {
                    return Err(DecodeError::Invalid("input seq 0"));
                }
                ServerMessage::InputRefused(InputRefused {
                    seq,
                    code: r.varint_u16()?,
                })
            }
            tag::KNOWN_SET_CHECK => {
                let tick = r.varint_u64()?;
                let count = r.varint_u32()?;
                let hash = r.u32_le()?;
                ServerMessage::KnownSetCheck(KnownSetCheck { tick, count, hash })
            }
            t => return Err(DecodeError::UnknownTag(t)),
        };
        r.finish()?;
        Ok(msg)
    }
}

#[cfg(test)]
mod tests;
