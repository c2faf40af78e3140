//! The Kick message (PROTOCOL.md §5.3) and its codes: the table of every code this version
//! defines with its name, which codes resume elsewhere, and which older code a session of an
//! older protocol version is sent instead of a newer one.

use super::{CHARACTER_PROTOCOL, HALT_PROTOCOL};
use crate::messages::chat::CHAT_PROTOCOL;

/// A Kick code (§5.3). Unknown codes are valid: a newer host may add some.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KickCode(pub u16);

macro_rules! kick_codes {
    ($($name:ident = $v:expr, $doc:expr;)*) => {
        impl KickCode {
    /// The code a session of protocol `version` is sent for this one: a code added after that
    /// version is replaced by the older code a client of that version treats alike
    /// (WORLD_HALTED below version 9 and CHARACTER_ELSEWHERE below version 10 are INTERNAL_ERROR:
    /// retry with backoff; CHARACTER_MOVED below version 10 is KICKED: stop; BANNED below
    /// version 11 is JOIN_REFUSED, with the same reason).
    pub fn for_version(self, version: u32) -> KickCode {
        match self {
            KickCode::BANNED if version < CHAT_PROTOCOL => KickCode::JOIN_REFUSED,
            KickCode::WORLD_HALTED if version < HALT_PROTOCOL => KickCode::INTERNAL_ERROR,
            KickCode::CHARACTER_MOVED if version < CHARACTER_PROTOCOL => KickCode::KICKED,
            KickCode::CHARACTER_ELSEWHERE if version < CHARACTER_PROTOCOL => {
                KickCode::INTERNAL_ERROR
            }
            code => code,
        }
    }

            $(#[doc = $doc] pub const $name: KickCode = KickCode($v);)*

            /// The code's name in PROTOCOL.md §5.3, or `None` for a code this version does not define.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($v => Some(stringify!($name)),)*
                    _ => None,
                }
            }
        }
    };
}

kick_codes! {
    BAD_TICKET = 1, "Malformed, tampered or unverifiable ticket.";
    TICKET_EXPIRED = 2, "`exp` passed (beyond the leeway).";
    TICKET_NOT_YET_VALID = 3, "`nbf` in the future (beyond the leeway).";
    TICKET_UNKNOWN_KEY = 4, "`kid` names no key the host knows.";
    TICKET_RETIRED_KEY = 5, "`kid` names a retired key.";
    TICKET_BAD_ALGORITHM = 6, "`alg` other than HS256 (including `none`).";
    TICKET_WRONG_ZONE = 7, "The ticket does not admit this zone.";
    TICKET_REPLAYED = 8, "The ticket's `jti` was already used.";
    ZONE_FULL = 9, "No player (or observer) slot left.";
    VERSION_MISMATCH = 10, "No common protocol version, or content version refused.";
    KICKED = 11, "Removed by an admin or by the zone.";
    SHUTTING_DOWN = 12, "The server is restarting; reconnect shortly.";
    RATE_LIMITED = 13, "Sustained input or Pings above the allowed rate.";
    PROTOCOL_ERROR = 14, "Undecodable message, text frame, message out of place.";
    MESSAGE_TOO_LARGE = 15, "A frame or message over the host's limit.";
    HANDSHAKE_TIMEOUT = 16, "No Hello in time.";
    IDLE_TIMEOUT = 17, "Nothing received for too long.";
    SLOW_CONSUMER = 18, "The client did not read fast enough: its outbox overflowed, or a WebSocket Ping went unanswered.";
    JOIN_REFUSED = 19, "The zone refused the join; the reason says why.";
    RECONNECT_REFUSED = 20, "The reconnect token is unknown, expired, not this principal's, or for another role.";
    ZONE_STOPPED = 21, "The zone was stopped.";
    TOO_MANY_CONNECTIONS = 22, "Per-address connection cap.";
    INTERNAL_ERROR = 23, "The host failed; the client may retry.";
    ZONE_MOVED = 24, "The zone moved to another host; resume there (protocol version 3).";
    HOST_FENCED = 25, "This host lost its lease on the zone; resume elsewhere (protocol version 3).";
    TOO_MANY_REDIRECTS = 26, "The connection attempt was redirected too often; the host refused another hop (protocol version 3).";
    CONTENT_OUTDATED = 27, "The client's content version is older than the host accepts; reload the client (protocol version 5).";
    WORLD_HALTED = 28, "The lasting world stopped because its saves failed; it resumes from its last committed save once its store answers, so retry with backoff (protocol version 9).";
    CHARACTER_MOVED = 29, "The player's character was taken into another zone (another game or device); this session is over, so do not reconnect by yourself: tell the player it moved (protocol version 10).";
    CHARACTER_ELSEWHERE = 30, "The player's character is held by another zone that could not give it back yet; retry with backoff (protocol version 10).";
    BANNED = 31, "The principal is banned from this zone, its group or the fleet; the reason reads `banned from <scope> until <until_ms>: <reason>`. Do not reconnect by yourself before then (protocol version 11).";
}

impl KickCode {
    /// Whether the code ends this connection but not the session: ZONE_MOVED and HOST_FENCED say
    /// the zone now runs (or is about to run) on another host, so the client resumes at once
    /// through its entry URL with its reconnect token, and any host redirects it to the owner.
    pub fn resumes_elsewhere(self) -> bool {
        matches!(self, KickCode::ZONE_MOVED | KickCode::HOST_FENCED)
    }
}

impl std::fmt::Display for KickCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}"),
            None => write!(f, "kick code {}", self.0),
        }
    }
}

/// The host's last word before it closes (§5.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kick {
    /// Why.
    pub code: KickCode,
    /// Human-readable detail (≤ 256 bytes).
    pub reason: String,
}
