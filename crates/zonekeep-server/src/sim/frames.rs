//! Encoding of the frames the session layer sends itself (Welcome, Pong,
//! Kick). Deltas come from the zone host (`ZoneHost::drain_frames`), with the
//! header facts the server acts on (ack, quiet) beside the bytes.

use bytes::Bytes;
use zonekeep_protocol::limits::{clip, MAX_KICK_REASON};
use zonekeep_protocol::messages::{Kick, KickCode, Pong, ServerMessage, Welcome};
use zonekeep_protocol::EncodeError;

/// A Welcome frame.
pub(crate) fn welcome_frame(w: Welcome) -> Result<Bytes, EncodeError> {
    Ok(Bytes::from(ServerMessage::Welcome(w).to_bytes(None)?))
}

/// A Kick frame; the reason is cut to the protocol limit on a char boundary.
pub(crate) fn kick_frame(code: KickCode, reason: &str) -> Bytes {
    let reason = clip(reason, MAX_KICK_REASON).to_owned();
    let msg = ServerMessage::Kick(Kick { code, reason });
    // A Kick with a reason within the limit always encodes.
    Bytes::from(
        msg.to_bytes(None)
            .unwrap_or_else(|_| vec![0x84, code.0 as u8 & 0x7f, 0]),
    )
}

/// A Pong frame.
pub(crate) fn pong_frame(client_time: u64, server_time_us: u64, tick: u64) -> Bytes {
    let msg = ServerMessage::Pong(Pong {
        client_time,
        server_time_us,
        tick,
    });
    Bytes::from(msg.to_bytes(None).unwrap_or_default())
}
