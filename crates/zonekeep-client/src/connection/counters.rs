//! Byte and message counters, shared between the connection's task and its handle.
//!
//! Payload bytes are the protocol messages themselves; WebSocket frame header bytes are counted
//! apart so a benchmark can report both what the protocol costs and what goes on the wire (TCP/IP
//! headers are not counted: they depend on segmentation the client cannot see).

use std::sync::atomic::{AtomicU64, Ordering};

/// Size of the WebSocket frame header (RFC 6455 §5.2) of one unfragmented message of `len`
/// payload bytes. Client frames are masked (4 more bytes), server frames are not.
pub fn ws_header_len(len: usize, masked: bool) -> u64 {
    let ext = if len < 126 {
        0
    } else if len <= usize::from(u16::MAX) {
        2
    } else {
        8
    };
    2 + ext + if masked { 4 } else { 0 }
}

/// A point-in-time copy of every counter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CountersSnapshot {
    /// Protocol bytes received (binary message payloads).
    pub bytes_in: u64,
    /// WebSocket frame header bytes received (estimated for unfragmented frames).
    pub frame_bytes_in: u64,
    /// Binary messages received.
    pub messages_in: u64,
    /// Protocol bytes sent.
    pub bytes_out: u64,
    /// WebSocket frame header bytes sent (masked client frames).
    pub frame_bytes_out: u64,
    /// Binary messages sent.
    pub messages_out: u64,
    /// Delta messages received.
    pub deltas: u64,
    /// Bytes of those Deltas.
    pub delta_bytes: u64,
    /// Inputs written to the socket.
    pub inputs_sent: u64,
    /// Pings sent.
    pub pings: u64,
    /// Pongs received.
    pub pongs: u64,
    /// Successful reconnects (resumed or fresh).
    pub reconnects: u64,
    /// Reconnects that resumed the same player with the reconnect token.
    pub resumes: u64,
    /// Welcomes that started a new player: the first join, and every reconnect that could not
    /// resume (past the grace window, or the token refused).
    pub fresh_joins: u64,
    /// Redirects followed during handshakes (PROTOCOL.md §5.3.1), the first join's included.
    pub redirects: u64,
    /// Reconnects that landed through an entry URL a Welcome listed, the application's entry
    /// URL being unreachable (PROTOCOL.md §5.3.1).
    pub entry_fallbacks: u64,
    /// `send_input` calls refused because the outgoing queue was full.
    pub outgoing_full: u64,
    /// Inputs given up on: queued or unacknowledged ones when the connection rejoined as a new
    /// player, and those beyond what a resume sends at once (the oldest of a long outage).
    pub inputs_discarded: u64,
    /// Times the event channel was full and the connection waited for the application.
    pub events_full: u64,
    /// Inputs the host refused (InputRefused received).
    pub inputs_refused: u64,
    /// Resync requests sent (a failed known-set check or an undecodable Delta).
    pub resyncs: u64,
    /// Deltas skipped while a BASELINE was awaited after a Resync.
    pub deltas_skipped: u64,
    /// WebTransport: States not newer than the newest applied (late or repeated datagrams).
    pub states_stale: u64,
    /// WebTransport: States whose base was no longer held (dropped; the host sends another).
    pub states_without_base: u64,
    /// WebTransport: Inputs datagrams sent for an acknowledgement that no input carried within
    /// [`super::webtransport::STATE_ACK_HOLD`] of its State.
    pub acks_alone: u64,
}

impl CountersSnapshot {
    /// Bytes received including WebSocket framing.
    pub fn wire_bytes_in(&self) -> u64 {
        self.bytes_in + self.frame_bytes_in
    }

    /// Bytes sent including WebSocket framing.
    pub fn wire_bytes_out(&self) -> u64 {
        self.bytes_out + self.frame_bytes_out
    }
}

/// The live counters (relaxed atomics: each is independent, read for reporting only).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub bytes_in: AtomicU64,
    pub frame_bytes_in: AtomicU64,
    pub messages_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub frame_bytes_out: AtomicU64,
    pub messages_out: AtomicU64,
    pub deltas: AtomicU64,
    pub delta_bytes: AtomicU64,
    pub inputs_sent: AtomicU64,
    pub pings: AtomicU64,
    pub pongs: AtomicU64,
    pub reconnects: AtomicU64,
    pub resumes: AtomicU64,
    pub fresh_joins: AtomicU64,
    pub redirects: AtomicU64,
    pub entry_fallbacks: AtomicU64,
    pub outgoing_full: AtomicU64,
    pub inputs_discarded: AtomicU64,
    pub events_full: AtomicU64,
    pub inputs_refused: AtomicU64,
    pub resyncs: AtomicU64,
    pub deltas_skipped: AtomicU64,
    pub states_stale: AtomicU64,
    pub states_without_base: AtomicU64,
    pub acks_alone: AtomicU64,
}

pub(crate) fn add(c: &AtomicU64, v: u64) {
    c.fetch_add(v, Ordering::Relaxed);
}

impl Counters {
    pub fn received(&self, len: usize) {
        add(&self.bytes_in, len as u64);
        add(&self.frame_bytes_in, ws_header_len(len, false));
        add(&self.messages_in, 1);
    }

    pub fn sent(&self, len: usize) {
        add(&self.bytes_out, len as u64);
        add(&self.frame_bytes_out, ws_header_len(len, true));
        add(&self.messages_out, 1);
    }

    pub fn snapshot(&self) -> CountersSnapshot {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CountersSnapshot {
            bytes_in: g(&self.bytes_in),
            frame_bytes_in: g(&self.frame_bytes_in),
            messages_in: g(&self.messages_in),
            bytes_out: g(&self.bytes_out),
            frame_bytes_out: g(&self.frame_bytes_out),
            messages_out: g(&self.messages_out),
            deltas: g(&self.deltas),
            delta_bytes: g(&self.delta_bytes),
            inputs_sent: g(&self.inputs_sent),
            pings: g(&self.pings),
            pongs: g(&self.pongs),
            reconnects: g(&self.reconnects),
            resumes: g(&self.resumes),
            fresh_joins: g(&self.fresh_joins),
            redirects: g(&self.redirects),
            entry_fallbacks: g(&self.entry_fallbacks),
            outgoing_full: g(&self.outgoing_full),
            inputs_discarded: g(&self.inputs_discarded),
            events_full: g(&self.events_full),
            inputs_refused: g(&self.inputs_refused),
            resyncs: g(&self.resyncs),
            deltas_skipped: g(&self.deltas_skipped),
            states_stale: g(&self.states_stale),
            states_without_base: g(&self.states_without_base),
            acks_alone: g(&self.acks_alone),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_sizes_follow_rfc6455() {
        assert_eq!(ws_header_len(0, false), 2);
        assert_eq!(ws_header_len(125, false), 2);
        assert_eq!(ws_header_len(126, false), 4);
        assert_eq!(ws_header_len(65_535, true), 8);
        assert_eq!(ws_header_len(65_536, false), 10);
        assert_eq!(ws_header_len(10, true), 6);
    }
}
