//! Encoding of the frames the host sends. Until the replicated world is wired
//! into `ZoneHost`, a Delta carries the tick, the input ack and the zone's
//! events (no entities); `ZoneRun::build_frames` is the single call that a
//! replicator will take over.

use std::collections::VecDeque;

use bytes::Bytes;
use zonekeep_protocol::delta::{DeltaHeader, DeltaWriter};
use zonekeep_protocol::limits::{
    MAX_EVENTS, MAX_EVENT_PAYLOAD, MAX_KICK_REASON, MAX_SERVER_MESSAGE,
};
use zonekeep_protocol::messages::{Kick, KickCode, Pong, ServerMessage, Welcome};
use zonekeep_protocol::EncodeError;

/// Room kept for the Delta header and counts when packing events.
const HEADER_SLACK: usize = 64;

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

/// An entity-less Delta: tick, ack, BASELINE flag and as many pending events
/// as fit in one message (the rest stay queued for the next patch).
pub(crate) fn delta_frame(
    tick: u64,
    ack: u32,
    baseline: bool,
    events: &mut VecDeque<(u16, Vec<u8>)>,
) -> Result<Bytes, EncodeError> {
    let mut take = 0;
    let mut size = HEADER_SLACK;
    for (_, p) in events.iter() {
        let cost = p.len() + 8;
        if take >= MAX_EVENTS || size + cost > MAX_SERVER_MESSAGE {
            break;
        }
        size += cost;
        take += 1;
    }
    let batch: Vec<(u16, Vec<u8>)> = events.drain(..take).collect();
    let mut out = Vec::with_capacity(size);
    let mut w = DeltaWriter::new(
        &mut out,
        &DeltaHeader {
            tick,
            ack,
            baseline,
            control: None,
            has_events: !batch.is_empty(),
        },
    );
    w.despawns(&[])?;
    w.updates(0, &[], &[])?;
    w.spawns(std::iter::empty::<(u32, &[u8])>())?;
    if !batch.is_empty() {
        w.events(batch.iter().map(|(t, p)| (*t, p.as_slice())))?;
    }
    w.finish()?;
    Ok(Bytes::from(out))
}

/// Whether an event payload can ever be sent (the zone's oversize events are dropped and counted).
pub(crate) fn event_fits(payload: &[u8]) -> bool {
    payload.len() <= MAX_EVENT_PAYLOAD
}
