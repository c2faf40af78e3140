//! Session errors and the ONE place they become Kick codes.
//!
//! Each layer has its own error enum (`TicketError`, `ReconnectError`,
//! `JoinFailure`, the session's own protocol errors); [`SessionError`] wraps
//! them and [`SessionError::kick`] maps every case to PROTOCOL.md §5.3.

use zonekeep_protocol::messages::KickCode;

use crate::content::ContentRefusal;
use crate::net::conn::KickNotice;
use crate::reconnect::ReconnectError;
use crate::sim::JoinFailure;
use crate::ticket::TicketError;

/// Why a session ends with a Kick.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SessionError {
    /// The ticket was refused.
    #[error(transparent)]
    Ticket(#[from] TicketError),
    /// The reconnect token was refused.
    #[error(transparent)]
    Reconnect(#[from] ReconnectError),
    /// The zone (or the host) refused the join.
    #[error(transparent)]
    Join(#[from] JoinFailure),
    /// The ticket's create params are over the limit the directory keeps (PROTOCOL.md §8).
    #[error("the ticket's params are refused: {0}")]
    Params(String),
    /// No common protocol version: the host speaks `min..=max` on this transport.
    #[error("no common protocol version (the host speaks {})", spoken(*min, *max))]
    Version {
        /// The oldest version the host speaks here.
        min: u32,
        /// The newest.
        max: u32,
    },
    /// The Hello's content version (or its protocol version, below 5) is refused by a host that
    /// requires a minimum content version (PROTOCOL.md §4.1.2).
    #[error(transparent)]
    Content(#[from] ContentRefusal),
    /// A text frame, an undecodable message or a message out of place.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A message over the host's limit.
    #[error("message of {len} bytes exceeds the limit of {max}")]
    TooLarge {
        /// Its size (0 when unknown).
        len: usize,
        /// The limit.
        max: usize,
    },
    /// No Hello in time.
    #[error("no Hello within the handshake timeout")]
    HandshakeTimeout,
    /// Nothing received for too long.
    #[error("nothing received within the idle timeout")]
    IdleTimeout,
    /// Sustained input or Pings above the allowed rate.
    #[error("sustained input or pings above the allowed rate")]
    RateLimited,
    /// Too many connections from this address.
    #[error("too many connections from this address")]
    TooManyConnections,
    /// The host is shutting down.
    #[error("the server is restarting")]
    ShuttingDown,
    /// The zone id in the URL is not acceptable.
    #[error("bad zone id")]
    BadZoneId,
    /// A Kick decided elsewhere (sim thread, admin).
    #[error("{}", .0.reason)]
    Notice(KickNotice),
}

impl SessionError {
    /// The Kick code for this error (PROTOCOL.md §5.3).
    pub fn code(&self) -> KickCode {
        match self {
            SessionError::Ticket(t) => match t {
                TicketError::Malformed(_)
                | TicketError::BadSignature
                | TicketError::LifetimeTooLong => KickCode::BAD_TICKET,
                TicketError::BadAlgorithm(_) => KickCode::TICKET_BAD_ALGORITHM,
                TicketError::UnknownKey => KickCode::TICKET_UNKNOWN_KEY,
                TicketError::RetiredKey => KickCode::TICKET_RETIRED_KEY,
                TicketError::Expired => KickCode::TICKET_EXPIRED,
                TicketError::NotYetValid => KickCode::TICKET_NOT_YET_VALID,
                TicketError::WrongZone(_) => KickCode::TICKET_WRONG_ZONE,
                TicketError::Replayed => KickCode::TICKET_REPLAYED,
                // Not the client's fault: it may retry once old ids expire.
                TicketError::ReplayCacheFull => KickCode::INTERNAL_ERROR,
            },
            SessionError::Reconnect(r) => match r {
                ReconnectError::Unknown
                | ReconnectError::Expired
                | ReconnectError::NotYours
                | ReconnectError::WrongRole { .. } => KickCode::RECONNECT_REFUSED,
                ReconnectError::Full | ReconnectError::Random => KickCode::INTERNAL_ERROR,
            },
            SessionError::Join(j) => match j {
                JoinFailure::Full => KickCode::ZONE_FULL,
                JoinFailure::Refused(_) => KickCode::JOIN_REFUSED,
                JoinFailure::Failed(_) => KickCode::ZONE_STOPPED,
                // A session below protocol version 9 is told INTERNAL_ERROR instead (see
                // `KickCode::for_version`), which it retries just the same.
                JoinFailure::Halted(_) => KickCode::WORLD_HALTED,
                // INTERNAL_ERROR below protocol version 10, retried just the same.
                JoinFailure::CharacterElsewhere(_) => KickCode::CHARACTER_ELSEWHERE,
                JoinFailure::Unavailable(_) | JoinFailure::TooManyZones => KickCode::JOIN_REFUSED,
                // Both SDKs retry INTERNAL_ERROR with backoff (keeping the reconnect token), which
                // outlasts a host fencing itself and the zone's takeover elsewhere.
                JoinFailure::StoreUnreachable(_) => KickCode::INTERNAL_ERROR,
                JoinFailure::ReconnectRefused(_) => KickCode::RECONNECT_REFUSED,
                JoinFailure::Busy => KickCode::INTERNAL_ERROR,
                // Both SDKs reconnect on SHUTTING_DOWN, which is what a client of a
                // zone that moved to another host must do.
                JoinFailure::ShuttingDown => KickCode::SHUTTING_DOWN,
                JoinFailure::Fenced => KickCode::HOST_FENCED,
                JoinFailure::Moved { .. } => KickCode::ZONE_MOVED,
                // JOIN_REFUSED below protocol version 11, with the same reason.
                JoinFailure::Banned(_) => KickCode::BANNED,
            },
            SessionError::Params(_) => KickCode::JOIN_REFUSED,
            SessionError::Version { .. } => KickCode::VERSION_MISMATCH,
            SessionError::Content(c) => c.code(),
            SessionError::Protocol(_) | SessionError::BadZoneId => KickCode::PROTOCOL_ERROR,
            SessionError::TooLarge { .. } => KickCode::MESSAGE_TOO_LARGE,
            SessionError::HandshakeTimeout => KickCode::HANDSHAKE_TIMEOUT,
            SessionError::IdleTimeout => KickCode::IDLE_TIMEOUT,
            SessionError::RateLimited => KickCode::RATE_LIMITED,
            SessionError::TooManyConnections => KickCode::TOO_MANY_CONNECTIONS,
            SessionError::ShuttingDown => KickCode::SHUTTING_DOWN,
            SessionError::Notice(n) => n.code,
        }
    }

    /// This refusal as a session of protocol `version` is told it: a halted lasting world is
    /// a store that does not answer (INTERNAL_ERROR) below version 9, which such a client retries
    /// just the same.
    pub fn for_version(self, version: u32) -> SessionError {
        match self {
            SessionError::Join(JoinFailure::Halted(why))
                if KickCode::WORLD_HALTED.for_version(version) != KickCode::WORLD_HALTED =>
            {
                SessionError::Join(JoinFailure::StoreUnreachable(why))
            }
            SessionError::Join(JoinFailure::CharacterElsewhere(why))
                if KickCode::CHARACTER_ELSEWHERE.for_version(version)
                    != KickCode::CHARACTER_ELSEWHERE =>
            {
                SessionError::Join(JoinFailure::StoreUnreachable(why))
            }
            other => other,
        }
    }

    /// The Kick sent to the client.
    pub fn kick(&self) -> KickNotice {
        match self {
            SessionError::Notice(n) => n.clone(),
            other => KickNotice {
                code: other.code(),
                reason: other.to_string(),
            },
        }
    }
}

/// The versions a host speaks, as VERSION_MISMATCH's reason names them: "version 6" or
/// "versions 2 to 6".
fn spoken(min: u32, max: u32) -> String {
    if min == max {
        format!("version {min}")
    } else {
        format!("versions {min} to {max}")
    }
}

/// The metric label for a Kick code (its PROTOCOL.md name in lower case).
pub fn kick_label(code: KickCode) -> String {
    code.name()
        .map(str::to_ascii_lowercase)
        .unwrap_or_else(|| format!("code_{}", code.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ticket_error_has_its_code() {
        let cases = [
            (TicketError::Expired, KickCode::TICKET_EXPIRED),
            (TicketError::NotYetValid, KickCode::TICKET_NOT_YET_VALID),
            (TicketError::BadSignature, KickCode::BAD_TICKET),
            (TicketError::UnknownKey, KickCode::TICKET_UNKNOWN_KEY),
            (TicketError::RetiredKey, KickCode::TICKET_RETIRED_KEY),
            (
                TicketError::BadAlgorithm("none".into()),
                KickCode::TICKET_BAD_ALGORITHM,
            ),
            (
                TicketError::WrongZone("z".into()),
                KickCode::TICKET_WRONG_ZONE,
            ),
            (TicketError::Replayed, KickCode::TICKET_REPLAYED),
        ];
        for (e, code) in cases {
            assert_eq!(SessionError::from(e).code(), code);
        }
        let outdated = SessionError::from(ContentRefusal::Missing { min: "1.4".into() });
        assert_eq!(outdated.code(), KickCode::CONTENT_OUTDATED);
        assert_eq!(outdated.kick().reason, outdated.to_string());
        let old = SessionError::from(ContentRefusal::OldProtocol {
            version: 4,
            min: "1.4".into(),
        });
        assert_eq!(old.code(), KickCode::VERSION_MISMATCH);
        // VERSION_MISMATCH names every version the host speaks, not only its newest.
        let mismatch = SessionError::Version { min: 2, max: 6 };
        assert_eq!(mismatch.code(), KickCode::VERSION_MISMATCH);
        assert_eq!(
            mismatch.to_string(),
            "no common protocol version (the host speaks versions 2 to 6)"
        );
        let webtransport = SessionError::Version { min: 6, max: 6 };
        assert!(webtransport
            .to_string()
            .ends_with("(the host speaks version 6)"));
        assert_eq!(kick_label(KickCode::SLOW_CONSUMER), "slow_consumer");
        assert_eq!(kick_label(KickCode::CONTENT_OUTDATED), "content_outdated");
        assert_eq!(kick_label(KickCode(999)), "code_999");
    }
}
