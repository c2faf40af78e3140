//! A seat the lobby handed out (docs/LOBBY.md), as a native game receives it from its back end:
//! where to connect and the ticket to connect with. The game's back end calls the lobby with its
//! own credential and relays the answer; the game checks it here ([`Seat::from_json`]) and
//! connects to [`Seat::url`] with [`Seat::ticket`]. A refusal the back end relays is a
//! [`SeatError`] that says whether the same request may get a seat later.

use serde_json::Value;

/// A seat in a lobby room.
#[derive(Debug, Clone, PartialEq)]
pub struct Seat {
    /// The room's zone.
    pub zone: String,
    /// The zone's kind.
    pub kind: String,
    /// True when the room was made for this seat.
    pub created: bool,
    /// A private room's code, when the answer carries one.
    pub code: Option<String>,
    /// WebSocket URL of the zone at its owner.
    pub url: String,
    /// The owner's host id, when known.
    pub host: Option<String>,
    /// A single-use ticket for the seat's principal and zone.
    pub ticket: String,
    /// When the ticket and the held seat lapse, in UNIX seconds.
    pub expires_at: u64,
    /// Seats of players still free in the room when the seat was handed out.
    pub free_players: u32,
}

/// Why no seat was had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no seat ({code}, {status}): {message}")]
pub struct SeatError {
    /// The lobby's refusal code (`room_full`, `address_full`, `room_closed`, `no_room`,
    /// `bad_request`, `unauthorized`, `unavailable`, ...), or `malformed` for an answer that is
    /// not a seat.
    pub code: String,
    /// The HTTP status (0 when there was none).
    pub status: u16,
    /// What the lobby said.
    pub message: String,
}

impl SeatError {
    /// Whether the same request may get a seat later: a full or closed room, a per-address cap,
    /// a store or host in trouble.
    pub fn retryable(&self) -> bool {
        matches!(
            self.code.as_str(),
            "room_full" | "room_closed" | "unavailable" | "address_full" | "network"
        )
    }

    /// The refusal an answer of `status` with JSON `body` stands for.
    pub fn from_answer(status: u16, body: &[u8]) -> Self {
        let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let error = &json["error"];
        let code = error["code"].as_str().map_or_else(
            || {
                if status == 401 {
                    "unauthorized".to_owned()
                } else {
                    "unavailable".to_owned()
                }
            },
            str::to_owned,
        );
        let message = error["message"]
            .as_str()
            .map_or_else(|| format!("the lobby answered {status}"), str::to_owned);
        Self {
            code,
            status,
            message,
        }
    }

    fn malformed(what: &str) -> Self {
        Self {
            code: "malformed".into(),
            status: 0,
            message: format!("not a seat: {what}"),
        }
    }
}

impl Seat {
    /// Checks a seat answer (JSON bytes).
    pub fn from_json(body: &[u8]) -> Result<Self, SeatError> {
        let v: Value =
            serde_json::from_slice(body).map_err(|e| SeatError::malformed(&e.to_string()))?;
        let text = |k: &str| -> Result<String, SeatError> {
            match v[k].as_str() {
                Some(s) if !s.is_empty() => Ok(s.to_owned()),
                _ => Err(SeatError::malformed(&format!("{k} missing"))),
            }
        };
        let url = text("url")?;
        if !(url.starts_with("ws://") || url.starts_with("wss://")) {
            return Err(SeatError::malformed(&format!(
                "url {url} is not a WebSocket URL"
            )));
        }
        Ok(Self {
            zone: text("zone")?,
            kind: text("kind")?,
            created: v["created"] == true,
            code: v["code"].as_str().map(str::to_owned),
            url,
            host: v["host"].as_str().map(str::to_owned),
            ticket: text("ticket")?,
            expires_at: v["expires_at"]
                .as_u64()
                .ok_or_else(|| SeatError::malformed("expires_at missing"))?,
            free_players: v["room"]["free_players"]
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| SeatError::malformed("room missing"))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANSWER: &str = r#"{"zone":"arena-1f2e","kind":"arena","created":true,"code":null,
        "url":"ws://127.0.0.1:7350/zones/arena-1f2e","host":"host-a","ticket":"t.k.s",
        "expires_at":1800000000,"room":{"free_players":3}}"#;

    #[test]
    fn a_seat_answer_is_read_and_checked() {
        let seat = Seat::from_json(ANSWER.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(seat.zone, "arena-1f2e");
        assert!(seat.created);
        assert_eq!(seat.code, None);
        assert_eq!(seat.host.as_deref(), Some("host-a"));
        assert_eq!((seat.expires_at, seat.free_players), (1_800_000_000, 3));
        for bad in [
            "",
            "[]",
            r#"{"zone":"z"}"#,
            &ANSWER.replace("ws://", "http://"),
            &ANSWER.replace(r#""ticket":"t.k.s","#, ""),
        ] {
            let Err(e) = Seat::from_json(bad.as_bytes()) else {
                panic!("{bad} read as a seat");
            };
            assert_eq!(e.code, "malformed", "{bad}");
            assert!(!e.retryable());
        }
    }

    #[test]
    fn refusals_say_whether_to_try_again() {
        let full = SeatError::from_answer(
            409,
            br#"{"error":{"code":"room_full","message":"room r has no free seat"}}"#,
        );
        assert_eq!(full.code, "room_full");
        assert!(full.retryable());
        assert!(full.to_string().contains("room r has no free seat"));
        let wrong = SeatError::from_answer(401, b"");
        assert_eq!(
            (wrong.code.as_str(), wrong.retryable()),
            ("unauthorized", false)
        );
        let bad = SeatError::from_answer(400, br#"{"error":{"code":"bad_request","message":"x"}}"#);
        assert!(!bad.retryable());
        assert!(SeatError::from_answer(503, b"<html>").retryable());
    }
}
