//! Client-side network simulation: latency, jitter and loss, as a WebSocket over TCP feels them.
//!
//! A WebSocket never loses or reorders a message: TCP retransmits. So loss shows up as a
//! retransmission delay on the lost message *and* on every message behind it (head-of-line
//! blocking). The model: each message is delivered `delay ± jitter` after it was sent; with
//! probability `loss` its first transmission is lost and it arrives one retransmission timeout later
//! (doubling per consecutive loss, as TCP backs off); delivery times never decrease (in-order stream).
//!
//! Pure and seeded: [`NetSim::schedule`] maps a send time to a delivery time. The connection applies
//! one instance to outgoing and one to incoming messages.
//!
//! Datagrams (a WebTransport session's States and Inputs) are not retransmitted and not ordered:
//! [`NetSim::schedule_datagram`] loses one with probability `loss` and delays each by its own
//! `delay ± jitter`, so they reorder.

use std::time::Duration;

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Retransmissions simulated per message at most; past that the message goes through (a real TCP
/// connection would be timing out, which the simulation does not model).
const MAX_RETRANSMISSIONS: u32 = 8;

/// Network simulation settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NetSimConfig {
    /// One-way latency added to every message.
    pub delay: Duration,
    /// Maximum deviation from `delay`, uniformly distributed in `[-jitter, +jitter]`.
    pub jitter: Duration,
    /// Probability (0..=1) that a transmission is lost and must be retransmitted.
    pub loss: f64,
    /// The first retransmission timeout; `None` = TCP's usual `max(200 ms, 2 × delay)`.
    pub rto: Option<Duration>,
    /// Seed of the simulation's random numbers (runs are reproducible).
    pub seed: u64,
}

impl Default for NetSimConfig {
    fn default() -> Self {
        Self {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            loss: 0.0,
            rto: None,
            seed: 0x5eed,
        }
    }
}

impl NetSimConfig {
    /// Whether the simulation changes nothing (messages pass straight through).
    pub fn is_off(&self) -> bool {
        self.delay.is_zero() && self.jitter.is_zero() && self.loss <= 0.0
    }

    fn rto_us(&self) -> u64 {
        self.rto
            .map_or_else(|| (2 * duration_us(self.delay)).max(200_000), duration_us)
    }
}

fn duration_us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// What the simulation did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetSimStats {
    /// Messages scheduled.
    pub messages: u64,
    /// Simulated retransmissions (lost transmissions).
    pub retransmissions: u64,
    /// Messages held back behind an earlier, later-arriving one (head-of-line blocking).
    pub head_of_line_waits: u64,
    /// Datagrams lost.
    pub datagrams_lost: u64,
}

/// One direction of a simulated link.
#[derive(Debug, Clone)]
pub struct NetSim {
    cfg: NetSimConfig,
    rng: Xoshiro256PlusPlus,
    last_delivery_us: u64,
    stats: NetSimStats,
}

impl NetSim {
    /// A link with the given settings.
    pub fn new(cfg: NetSimConfig) -> Self {
        Self {
            rng: Xoshiro256PlusPlus::seed_from_u64(cfg.seed),
            cfg,
            last_delivery_us: 0,
            stats: NetSimStats::default(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &NetSimConfig {
        &self.cfg
    }

    /// Replaces the settings (the random stream and in-order guarantee continue).
    pub fn set_config(&mut self, cfg: NetSimConfig) {
        self.cfg = cfg;
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The delivery time (µs) of a message sent at `sent_us`. Calls must come in send order.
    pub fn schedule(&mut self, sent_us: u64) -> u64 {
        self.stats.messages += 1;
        let delay = duration_us(self.cfg.delay) as f64;
        let jitter = duration_us(self.cfg.jitter) as f64;
        let mut transit = delay;
        if jitter > 0.0 {
            transit += (self.unit() * 2.0 - 1.0) * jitter;
        }
        let mut transit = transit.max(0.0) as u64;
        if self.cfg.loss > 0.0 {
            let mut rto = self.cfg.rto_us();
            let mut tries = 0;
            while tries < MAX_RETRANSMISSIONS && self.unit() < self.cfg.loss {
                transit = transit.saturating_add(rto);
                rto = rto.saturating_mul(2);
                tries += 1;
                self.stats.retransmissions += 1;
            }
        }
        let mut at = sent_us.saturating_add(transit);
        if at < self.last_delivery_us {
            at = self.last_delivery_us;
            self.stats.head_of_line_waits += 1;
        }
        self.last_delivery_us = at;
        at
    }

    /// The delivery time (µs) of a datagram sent at `sent_us`, or `None` when it is lost. No
    /// retransmission and no order: each keeps its own jitter.
    pub fn schedule_datagram(&mut self, sent_us: u64) -> Option<u64> {
        self.stats.messages += 1;
        if self.cfg.loss > 0.0 && self.unit() < self.cfg.loss {
            self.stats.datagrams_lost += 1;
            return None;
        }
        let delay = duration_us(self.cfg.delay) as f64;
        let jitter = duration_us(self.cfg.jitter) as f64;
        let mut transit = delay;
        if jitter > 0.0 {
            transit += (self.unit() * 2.0 - 1.0) * jitter;
        }
        Some(sent_us.saturating_add(transit.max(0.0) as u64))
    }

    /// Counters.
    pub fn stats(&self) -> NetSimStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn datagrams_are_lost_and_reordered() {
        let mut n = NetSim::new(NetSimConfig {
            delay: ms(50),
            jitter: ms(40),
            loss: 0.1,
            ..NetSimConfig::default()
        });
        let at: Vec<Option<u64>> = (0..1000u64)
            .map(|i| n.schedule_datagram(i * 1000))
            .collect();
        let lost = at.iter().filter(|a| a.is_none()).count();
        assert!((50..150).contains(&lost), "about a tenth lost: {lost}");
        assert_eq!(n.stats().datagrams_lost, lost as u64);
        let kept: Vec<u64> = at.into_iter().flatten().collect();
        assert!(
            kept.windows(2).any(|w| w[0] > w[1]),
            "jitter reorders datagrams"
        );
        assert_eq!(
            NetSim::new(NetSimConfig::default()).schedule_datagram(7),
            Some(7)
        );
    }

    #[test]
    fn off_passes_through() {
        let cfg = NetSimConfig::default();
        assert!(cfg.is_off());
        let mut n = NetSim::new(cfg);
        assert_eq!(n.schedule(5), 5);
        assert_eq!(n.schedule(9), 9);
    }

    #[test]
    fn fixed_delay() {
        let mut n = NetSim::new(NetSimConfig {
            delay: ms(150),
            ..NetSimConfig::default()
        });
        assert_eq!(n.schedule(1_000), 151_000);
        assert_eq!(n.schedule(2_000), 152_000);
    }

    #[test]
    fn jitter_stays_in_bounds_and_never_reorders() {
        let mut n = NetSim::new(NetSimConfig {
            delay: ms(100),
            jitter: ms(40),
            ..NetSimConfig::default()
        });
        let mut last = 0;
        for i in 0..2_000u64 {
            let sent = i * 5_000;
            let at = n.schedule(sent);
            assert!(at >= last, "in order");
            last = at;
            let transit = at - sent;
            assert!((60_000..=140_000).contains(&transit), "{transit}");
        }
        // Sent every 5 ms with ±40 ms jitter: many messages wait behind a slower predecessor.
        assert!(n.stats().head_of_line_waits > 100);
        // Spaced far apart, nothing waits: the transits spread over the whole ±40 ms.
        let waits = n.stats().head_of_line_waits;
        let mut spread = (u64::MAX, 0u64);
        for i in 0..500u64 {
            let sent = 100_000_000 + i * 1_000_000;
            let transit = n.schedule(sent) - sent;
            spread = (spread.0.min(transit), spread.1.max(transit));
        }
        assert_eq!(n.stats().head_of_line_waits, waits);
        assert!(spread.0 < 65_000 && spread.1 > 135_000, "{spread:?}");
    }

    #[test]
    fn loss_is_retransmission_delay_with_head_of_line_blocking() {
        let mut n = NetSim::new(NetSimConfig {
            delay: ms(50),
            loss: 0.2,
            seed: 7,
            ..NetSimConfig::default()
        });
        let mut last = 0;
        let mut delayed = 0;
        for i in 0..1_000u64 {
            let sent = i * 10_000;
            let at = n.schedule(sent);
            assert!(at >= last);
            assert!(at - sent >= 50_000, "never faster than the latency");
            if at - sent > 100_000 {
                delayed += 1;
            }
            last = at;
        }
        let s = n.stats();
        assert_eq!(s.messages, 1_000);
        // 20% loss over 1000 messages: around 250 retransmissions (geometric), all delivered.
        assert!(s.retransmissions > 150 && s.retransmissions < 350, "{s:?}");
        // Messages sent within the 200 ms RTO after a lost one wait behind it.
        assert!(s.head_of_line_waits > s.retransmissions, "{s:?}");
        assert!(delayed > 400, "{delayed}");
    }

    #[test]
    fn seeded_runs_repeat() {
        let cfg = NetSimConfig {
            delay: ms(30),
            jitter: ms(10),
            loss: 0.05,
            ..NetSimConfig::default()
        };
        let a: Vec<u64> = {
            let mut n = NetSim::new(cfg);
            (0..100).map(|i| n.schedule(i * 1_000)).collect()
        };
        let b: Vec<u64> = {
            let mut n = NetSim::new(cfg);
            (0..100).map(|i| n.schedule(i * 1_000)).collect()
        };
        assert_eq!(a, b);
    }
}
