//! Encoding of the frames the session layer sends itself (Welcome, Pong,
//! Kick). Deltas come from the zone host's replicator (`build_frames`).

use bytes::Bytes;
use zonekeep_protocol::limits::MAX_KICK_REASON;
use zonekeep_protocol::messages::tag;
use zonekeep_protocol::messages::{Kick, KickCode, Pong, ServerMessage, Welcome};
use zonekeep_protocol::wire::Reader;
use zonekeep_protocol::EncodeError;

/// A Welcome frame.
pub(crate) fn welcome_frame(w: Welcome) -> Result<Bytes, EncodeError> {
    Ok(Bytes::from(ServerMessage::Welcome(w).to_bytes(None)?))
}

/// A Kick frame; the reason is cut to the protocol limit on a char boundary.
pub(crate) fn kick_frame(code: KickCode, reason: &str) -> Bytes {
    let mut cut = reason.len().min(MAX_KICK_REASON);
    while !reason.is_char_boundary(cut) {
        cut -= 1;
    }
    let reason = reason.get(..cut).unwrap_or_default().to_owned();
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

/// The ack of a Delta that carries nothing but its header: not a BASELINE, no CONTROL, no events,
/// and no despawns, updates or spawns. `None` for any other frame.
pub(crate) fn quiet_delta_ack(frame: &[u8]) -> Option<u32> {
    let mut r = Reader::new(frame);
    if r.u8().ok()? != tag::DELTA {
        return None;
    }
    r.varint_u64().ok()?;
    let ack = r.varint_u32().ok()?;
    let flags = r.u8().ok()?;
    (flags == 0 && r.remaining() == 3 && frame.ends_with(&[0, 0, 0])).then_some(ack)
}

/// The ack field of any Delta frame (0 when the frame is not a well-formed Delta header).
pub(crate) fn delta_ack(frame: &[u8]) -> u32 {
    let mut r = Reader::new(frame);
    match (r.u8(), r.varint_u64(), r.varint_u32()) {
        (Ok(tag::DELTA), Ok(_), Ok(ack)) => ack,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zonekeep_protocol::delta::{DeltaHeader, DeltaWriter};

    fn delta(ack: u32, baseline: bool, despawns: &[u32]) -> Vec<u8> {
        let mut out = Vec::new();
        let h = DeltaHeader {
            tick: 300,
            ack,
            baseline,
            control: None,
            has_events: false,
        };
        let mut w = DeltaWriter::new(&mut out, &h);
        assert!(w.despawns(despawns).is_ok());
        assert!(w.updates(0, &[], &[]).is_ok());
        assert!(w.spawns(std::iter::empty()).is_ok());
        assert!(w.finish().is_ok());
        out
    }

    #[test]
    fn only_header_only_deltas_are_quiet() {
        assert_eq!(quiet_delta_ack(&delta(7, false, &[])), Some(7));
        assert_eq!(quiet_delta_ack(&delta(7, true, &[])), None);
        assert_eq!(quiet_delta_ack(&delta(7, false, &[3])), None);
        assert_eq!(quiet_delta_ack(&[0x83, 0, 0, 0]), None);
        assert_eq!(quiet_delta_ack(&[]), None);
        assert_eq!(delta_ack(&delta(9, false, &[3])), 9);
        assert_eq!(delta_ack(&[0x84]), 0);
    }
}
