//! NetSim: simulated latency, jitter and loss for development (dev mode only).
//!
//! WebSocket runs over TCP, so a "lost" packet is not lost: TCP retransmits it
//! after a timeout and every later message waits behind it (head-of-line
//! blocking). NetSim models exactly that: each message gets a release time
//! `now + latency + U(0, jitter)`, plus one retransmission delay per simulated
//! loss (each with probability `loss`, at most 16), and is never released
//! before the previous message of the same direction. Messages are therefore
//! delayed but never dropped or reordered. Applied per connection and per
//! direction (server → client frames in the writer, client → server messages
//! before they are processed). Settings are switchable at runtime and apply to
//! the next message.
//!
//! Whose messages a setting delays: a page sets its own (`POST /dev/netsim?sub=SUBJECT`, the
//! subject of its ticket), which applies to that subject's connections only, so moving the
//! slider in one tab slows nobody else. The host-wide setting, which applies to every connection
//! without its own, is an admin action (`POST /admin/netsim`, behind the admin token).
//!
//! Datagrams (a WebTransport session's States and Inputs) are what TCP is not: the same
//! setting applies to them per datagram, but a loss **drops** it, and each one's jitter is its
//! own, so they arrive out of order ([`DatagramDelay`]).
//!
//! The setting itself is here; [`NetSim`] and [`ConnNetSim`] say whose messages go through which
//! setting (`settings`), and [`DelayQueue`] and [`DatagramDelay`] hold one direction's messages
//! back by it (`delay`).

mod delay;
mod settings;
#[cfg(test)]
mod tests;

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use delay::{Datagram, DatagramDelay, DelayQueue, Link};
pub use settings::{ConnNetSim, Direction, NetSim, SubjectReport, MAX_OWN_SETTINGS, TOO_MANY_OWN};

/// Simulated link quality (one-way, per direction).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NetSimConfig {
    /// Added one-way latency, milliseconds (≤ 10000).
    pub latency_ms: u32,
    /// Extra uniform random delay in `[0, jitter_ms]` (≤ 10000).
    pub jitter_ms: u32,
    /// Probability a message's first transmission is lost, in `[0, 0.9]`.
    pub loss: f64,
    /// Retransmission timeout per loss, ms; the effective delay is
    /// `max(rto_ms, 2 × latency_ms)`, and 0 means TCP's usual 200 ms floor.
    pub rto_ms: u32,
    /// A network that drops UDP: new WebTransport sessions get no answer and every datagram is
    /// lost (WebSocket is untouched), so clients fall back to WebSocket.
    pub block_udp: bool,
}

/// Why a NetSim setting was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("netsim: {0}")]
pub struct NetSimError(pub &'static str);

impl NetSimConfig {
    /// Check ranges.
    pub fn validate(&self) -> Result<(), NetSimError> {
        if self.latency_ms > 10_000 || self.jitter_ms > 10_000 || self.rto_ms > 10_000 {
            return Err(NetSimError(
                "latency_ms, jitter_ms and rto_ms must be at most 10000",
            ));
        }
        if !(self.loss.is_finite() && (0.0..=0.9).contains(&self.loss)) {
            return Err(NetSimError("loss must be in [0, 0.9]"));
        }
        Ok(())
    }

    /// True when it adds nothing.
    pub fn is_off(&self) -> bool {
        self.latency_ms == 0 && self.jitter_ms == 0 && self.loss == 0.0
    }

    fn retransmit_delay(&self) -> Duration {
        let rto = if self.rto_ms == 0 { 200 } else { self.rto_ms };
        Duration::from_millis(u64::from(rto.max(self.latency_ms.saturating_mul(2))))
    }
}
