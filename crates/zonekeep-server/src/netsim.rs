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
//! before they are processed). Settings are switchable at runtime
//! (`POST /dev/netsim`) and apply to every connection's next message.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

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

/// The shared, runtime-switchable setting.
#[derive(Debug, Clone, Default)]
pub struct NetSim {
    cfg: Arc<RwLock<NetSimConfig>>,
}

impl NetSim {
    /// The current setting.
    pub fn get(&self) -> NetSimConfig {
        *self.cfg.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Replace the setting (validated).
    pub fn set(&self, cfg: NetSimConfig) -> Result<(), NetSimError> {
        cfg.validate()?;
        *self.cfg.write().unwrap_or_else(|p| p.into_inner()) = cfg;
        Ok(())
    }
}

/// One direction of one connection.
#[derive(Debug)]
pub struct Link {
    rng: u64,
    last_release: Option<Instant>,
}

impl Link {
    /// A link with its own random stream.
    pub fn new(seed: u64) -> Self {
        Self {
            rng: seed | 1,
            last_release: None,
        }
    }

    fn next_f64(&mut self) -> f64 {
        // xorshift64*: plenty for simulated network noise.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let v = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
        (v >> 11) as f64 / (1u64 << 53) as f64
    }

    /// When a message handed over at `now` may be delivered; `None` when NetSim is off.
    pub fn release_at(&mut self, cfg: &NetSimConfig, now: Instant) -> Option<Instant> {
        if cfg.is_off() {
            self.last_release = None;
            return None;
        }
        let jitter = (self.next_f64() * f64::from(cfg.jitter_ms)).round() as u64;
        let mut at = now + Duration::from_millis(u64::from(cfg.latency_ms) + jitter);
        for _ in 0..16 {
            if self.next_f64() >= cfg.loss {
                break;
            }
            at += cfg.retransmit_delay();
        }
        // Head-of-line blocking: never before the previous message.
        if let Some(prev) = self.last_release {
            at = at.max(prev);
        }
        self.last_release = Some(at);
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn releases_are_ordered_and_delayed() {
        let cfg = NetSimConfig {
            latency_ms: 50,
            jitter_ms: 40,
            loss: 0.3,
            rto_ms: 0,
        };
        let mut link = Link::new(7);
        let t0 = Instant::now();
        let mut prev = t0;
        let mut lost_any = false;
        for i in 0..500u64 {
            let now = t0 + Duration::from_millis(i);
            let at = link.release_at(&cfg, now).unwrap();
            assert!(at >= now + Duration::from_millis(50));
            assert!(at >= prev, "never reordered");
            if at >= now + Duration::from_millis(250) {
                lost_any = true;
            }
            prev = at;
        }
        assert!(lost_any, "a 30% loss shows as retransmission delays");
    }

    #[test]
    fn off_means_no_delay_and_validation() {
        let mut link = Link::new(1);
        assert_eq!(
            link.release_at(&NetSimConfig::default(), Instant::now()),
            None
        );
        let bad = NetSimConfig {
            loss: 1.0,
            ..NetSimConfig::default()
        };
        assert!(bad.validate().is_err());
        let sim = NetSim::default();
        assert!(sim.set(bad).is_err());
        sim.set(NetSimConfig {
            latency_ms: 10,
            ..NetSimConfig::default()
        })
        .unwrap();
        assert_eq!(sim.get().latency_ms, 10);
    }
}
