//! Per-connection bookkeeping for the protocol's feedback messages (PROTOCOL.md §5.6–§5.7, §4.4):
//! InputRefused notices (bounded per second, so a client sending garbage cannot make the host
//! answer every message), KnownSetCheck cadence, and how often a Resync is honoured (each one
//! costs a full BASELINE).

use bytes::Bytes;
use zonekeep_protocol::messages::{InputRefused, KnownSetCheck, ServerMessage};

/// InputRefused notices sent to one connection per second of zone time; the rest are counted.
pub(crate) const MAX_REFUSALS_PER_SECOND: u32 = 16;
/// A KnownSetCheck follows every this many Deltas sent to a connection (keep-alives included), so
/// a desync is found within a few seconds at any patch rate while an idle connection pays about
/// eight bytes every sixteen keep-alives.
pub(crate) const KNOWN_CHECK_EVERY_FRAMES: u32 = 16;

/// One connection's state for the notices above.
#[derive(Debug, Default)]
pub(crate) struct Notices {
    /// Start tick of the current one-second refusal window and the notices sent in it.
    refusal_window: (u64, u32),
    /// Deltas sent since the last KnownSetCheck.
    frames_since_check: u32,
    /// The tick a Resync was last honoured at.
    last_resync: Option<u64>,
}

impl Notices {
    /// Whether an InputRefused may be sent at `tick` (at most [`MAX_REFUSALS_PER_SECOND`] per
    /// `tick_hz` ticks); counts it when so.
    pub fn allow_refusal(&mut self, tick: u64, tick_hz: u32) -> bool {
        let (start, sent) = &mut self.refusal_window;
        // A window opens at the first refusal after the last one closed.
        if *sent == 0 || tick.saturating_sub(*start) >= u64::from(tick_hz) {
            *start = tick;
            *sent = 0;
        }
        if *sent >= MAX_REFUSALS_PER_SECOND {
            return false;
        }
        *sent += 1;
        true
    }

    /// Note a Delta sent; true when a KnownSetCheck is due after it.
    pub fn frame_sent(&mut self) -> bool {
        self.frames_since_check += 1;
        if self.frames_since_check >= KNOWN_CHECK_EVERY_FRAMES {
            self.frames_since_check = 0;
            return true;
        }
        false
    }

    /// Whether a Resync asked at `tick` is honoured: at most one per second of zone time (a client
    /// whose BASELINE is still on its way asks again only after the next failed check).
    pub fn allow_resync(&mut self, tick: u64, tick_hz: u32) -> bool {
        if self
            .last_resync
            .is_some_and(|t| tick.saturating_sub(t) < u64::from(tick_hz))
        {
            return false;
        }
        self.last_resync = Some(tick);
        // The BASELINE restarts the known set: the next check comes a full period after it.
        self.frames_since_check = 0;
        true
    }
}

/// When a connection was last sent a frame, for skipping frames that say nothing new (PROTOCOL.md
/// §6): a zone's host and a relay deliver frames by the same rule.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct LastFrame {
    /// The ack of the last frame sent, and the tick it was sent at.
    ack: Option<u32>,
    tick: u64,
}

impl LastFrame {
    /// Whether a frame may go unsent: it is quiet, acknowledges what the last one did, and a
    /// frame went out within `keepalive` ticks (so an idle connection still hears once a second).
    pub(crate) fn skips(&self, quiet: bool, ack: u32, tick: u64, keepalive: u64) -> bool {
        quiet && self.ack == Some(ack) && tick.saturating_sub(self.tick) < keepalive
    }

    /// Notes a frame sent at `tick` with `ack`.
    pub(crate) fn sent(&mut self, ack: u32, tick: u64) {
        self.ack = Some(ack);
        self.tick = tick;
    }
}

/// An InputRefused frame.
pub(crate) fn input_refused_frame(seq: u32, code: u16) -> Option<Bytes> {
    ServerMessage::InputRefused(InputRefused { seq, code })
        .to_bytes(None)
        .ok()
        .map(Bytes::from)
}

/// A KnownSetCheck frame.
pub(crate) fn known_set_check_frame(tick: u64, count: u32, hash: u32) -> Bytes {
    let mut out = Vec::with_capacity(16);
    // A KnownSetCheck has no value that fails to encode.
    let _ =
        ServerMessage::KnownSetCheck(KnownSetCheck { tick, count, hash }).encode(None, &mut out);
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_bounded_per_second_of_ticks() {
        let mut n = Notices::default();
        let sent = (0..100).filter(|_| n.allow_refusal(5, 30)).count();
        assert_eq!(sent, MAX_REFUSALS_PER_SECOND as usize);
        assert!(!n.allow_refusal(34, 30), "still the same second");
        assert!(n.allow_refusal(35, 30), "a new second opens a new window");
    }

    #[test]
    fn a_check_follows_every_period_of_frames_and_resync_restarts_it() {
        let mut n = Notices::default();
        let due: Vec<bool> = (0..KNOWN_CHECK_EVERY_FRAMES * 2)
            .map(|_| n.frame_sent())
            .collect();
        assert_eq!(due.iter().filter(|d| **d).count(), 2);
        assert!(due[KNOWN_CHECK_EVERY_FRAMES as usize - 1]);
        assert!(n.allow_resync(100, 30));
        assert!(!n.allow_resync(110, 30), "one BASELINE per second");
        assert!(n.allow_resync(130, 30));
    }
}
