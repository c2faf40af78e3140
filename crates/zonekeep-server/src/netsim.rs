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
//!
//! Datagrams (a WebTransport session's States and Inputs) are what TCP is not: the same
//! setting applies to them per datagram, but a loss **drops** it, and each one's jitter is its
//! own, so they arrive out of order ([`DatagramDelay`]).

use std::collections::VecDeque;
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

impl Link {
    /// What becomes of a datagram handed over at `now`: `None` when NetSim is off, else dropped
    /// (`Some(None)`, with probability `loss`, or always with `block_udp`) or due at its own time
    /// (`Some(Some(at))`).
    pub fn datagram_at(&mut self, cfg: &NetSimConfig, now: Instant) -> Option<Option<Instant>> {
        if cfg.block_udp {
            return Some(None);
        }
        if cfg.is_off() {
            return None;
        }
        if self.next_f64() < cfg.loss {
            return Some(None);
        }
        let jitter = (self.next_f64() * f64::from(cfg.jitter_ms)).round() as u64;
        Some(Some(
            now + Duration::from_millis(u64::from(cfg.latency_ms) + jitter),
        ))
    }
}

/// Datagrams held back by NetSim on one direction of a session: each is dropped with the loss
/// probability or released at its own time, so they reorder. Bounded: a datagram handed over
/// while it is full is dropped, as a full network queue drops it.
#[derive(Debug)]
pub struct DatagramDelay<T> {
    link: Link,
    /// `(due, order, item)`, a min-heap on `(due, order)`.
    items: std::collections::BinaryHeap<std::cmp::Reverse<Held<T>>>,
    next: u64,
    cap: usize,
}

#[derive(Debug)]
struct Held<T> {
    at: Instant,
    order: u64,
    item: T,
}

impl<T> PartialEq for Held<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.order) == (other.at, other.order)
    }
}
impl<T> Eq for Held<T> {}
impl<T> PartialOrd for Held<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Held<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.order).cmp(&(other.at, other.order))
    }
}

/// What [`DatagramDelay::offer`] did with a datagram.
#[derive(Debug, PartialEq, Eq)]
pub enum Datagram<T> {
    /// NetSim is off: send it now.
    Now(T),
    /// Held until [`DatagramDelay::pop_due`] releases it.
    Held,
    /// Lost (the simulated loss) or the queue was full.
    Dropped,
}

impl<T> DatagramDelay<T> {
    /// An empty queue holding at most `cap` datagrams (at least 1).
    pub fn new(seed: u64, cap: usize) -> Self {
        Self {
            link: Link::new(seed),
            items: std::collections::BinaryHeap::new(),
            next: 0,
            cap: cap.max(1),
        }
    }

    /// Hand over a datagram at `now`.
    pub fn offer(&mut self, cfg: &NetSimConfig, now: Instant, item: T) -> Datagram<T> {
        match self.link.datagram_at(cfg, now) {
            None => Datagram::Now(item),
            Some(None) => Datagram::Dropped,
            Some(Some(_)) if self.items.len() >= self.cap => Datagram::Dropped,
            Some(Some(at)) => {
                self.next += 1;
                self.items.push(std::cmp::Reverse(Held {
                    at,
                    order: self.next,
                    item,
                }));
                Datagram::Held
            }
        }
    }

    /// When the next held datagram is due, if any.
    pub fn next_release(&self) -> Option<Instant> {
        self.items.peek().map(|h| h.0.at)
    }

    /// The next held datagram, if it is due at `now`.
    pub fn pop_due(&mut self, now: Instant) -> Option<T> {
        if self.items.peek().is_some_and(|h| h.0.at <= now) {
            return self.items.pop().map(|h| h.0.item);
        }
        None
    }
}

/// Messages held back by NetSim on one direction of a connection: each is stamped when it is
/// handed over (so a message never waits for its predecessor's whole delay on top of its own),
/// released in order (head-of-line blocking, never reordered or dropped), and bounded.
#[derive(Debug)]
pub struct DelayQueue<T> {
    link: Link,
    items: VecDeque<(Instant, T)>,
    cap: usize,
}

impl<T> DelayQueue<T> {
    /// An empty queue holding at most `cap` messages (at least 1).
    pub fn new(seed: u64, cap: usize) -> Self {
        Self {
            link: Link::new(seed),
            items: VecDeque::new(),
            cap: cap.max(1),
        }
    }

    /// Whether the queue holds `cap` messages: stop taking more until one is released.
    pub fn is_full(&self) -> bool {
        self.items.len() >= self.cap
    }

    /// Hand over `item` at `now`. Returns it straight back when it may go at once (NetSim off
    /// and nothing waiting); otherwise keeps it until [`pop_due`](DelayQueue::pop_due) releases it.
    pub fn offer(&mut self, cfg: &NetSimConfig, now: Instant, item: T) -> Option<T> {
        match self.link.release_at(cfg, now) {
            None if self.items.is_empty() => Some(item),
            None => {
                self.items.push_back((now, item));
                None
            }
            Some(at) => {
                self.items.push_back((at, item));
                None
            }
        }
    }

    /// When the next held message is due, if any.
    pub fn next_release(&self) -> Option<Instant> {
        self.items.front().map(|(at, _)| *at)
    }

    /// The next held message, if it is due at `now`.
    pub fn pop_due(&mut self, now: Instant) -> Option<T> {
        match self.items.front() {
            Some((at, _)) if *at <= now => self.items.pop_front().map(|(_, item)| item),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn datagrams_are_lost_and_reordered_but_never_late_beyond_their_own_delay() {
        let cfg = NetSimConfig {
            latency_ms: 100,
            jitter_ms: 40,
            loss: 0.2,
            rto_ms: 0,
            ..NetSimConfig::default()
        };
        let mut q = DatagramDelay::new(7, 10_000);
        let t0 = Instant::now();
        let (mut dropped, mut held) = (0, 0);
        for i in 0..1000u32 {
            match q.offer(&cfg, t0 + Duration::from_millis(u64::from(i)), i) {
                Datagram::Dropped => dropped += 1,
                Datagram::Held => held += 1,
                Datagram::Now(_) => panic!("NetSim is on"),
            }
        }
        assert!(
            (120..280).contains(&dropped),
            "about a fifth lost: {dropped}"
        );
        let mut out = Vec::new();
        let mut now = t0;
        while let Some(at) = q.next_release() {
            now = now.max(at);
            while let Some(i) = q.pop_due(now) {
                // Sent at t0 + i ms, due within [100, 140] ms of that.
                let sent = t0 + Duration::from_millis(u64::from(i));
                assert!(now >= sent + Duration::from_millis(100));
                assert!(now <= sent + Duration::from_millis(140));
                out.push(i);
            }
        }
        assert_eq!(out.len(), held);
        assert!(
            out.windows(2).any(|w| w[0] > w[1]),
            "jitter reorders datagrams"
        );
        let off = NetSimConfig::default();
        assert_eq!(q.offer(&off, now, 5), Datagram::Now(5));
        let mut full = DatagramDelay::new(1, 1);
        let lossless = NetSimConfig { loss: 0.0, ..cfg };
        assert_eq!(full.offer(&lossless, t0, 1), Datagram::Held);
        assert_eq!(full.offer(&lossless, t0, 2), Datagram::Dropped, "bounded");
    }

    #[test]
    fn releases_are_ordered_and_delayed() {
        let cfg = NetSimConfig {
            latency_ms: 50,
            jitter_ms: 40,
            loss: 0.3,
            rto_ms: 0,
            ..NetSimConfig::default()
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
    fn a_delay_queue_pipelines_messages_instead_of_serializing_their_delays() {
        let cfg = NetSimConfig {
            latency_ms: 150,
            ..NetSimConfig::default()
        };
        let mut q = DelayQueue::new(3, 64);
        let t0 = Instant::now();
        // 30 frames a second for one second: all in flight at once, each 150 ms late.
        for i in 0..30u64 {
            assert_eq!(q.offer(&cfg, t0 + Duration::from_millis(33 * i), i), None);
        }
        assert_eq!(q.pop_due(t0 + Duration::from_millis(149)), None);
        let mut released = Vec::new();
        let end = t0 + Duration::from_millis(150 + 33 * 29);
        while let Some(i) = q.pop_due(end) {
            released.push(i);
        }
        assert_eq!(released, (0..30).collect::<Vec<_>>(), "all due, in order");
        // Switching NetSim off while frames wait keeps them in order behind the held ones.
        assert_eq!(q.offer(&cfg, end, 30), None);
        assert_eq!(q.offer(&NetSimConfig::default(), end, 31), None);
        assert_eq!(q.pop_due(end + Duration::from_millis(150)), Some(30));
        assert_eq!(q.pop_due(end + Duration::from_millis(150)), Some(31));
        assert_eq!(q.offer(&NetSimConfig::default(), end, 32), Some(32));
    }

    #[test]
    fn a_full_delay_queue_says_so() {
        let cfg = NetSimConfig {
            latency_ms: 10,
            ..NetSimConfig::default()
        };
        let mut q = DelayQueue::new(3, 2);
        let t0 = Instant::now();
        assert!(!q.is_full());
        assert_eq!(q.offer(&cfg, t0, 1), None);
        assert_eq!(q.offer(&cfg, t0, 2), None);
        assert!(q.is_full());
        assert_eq!(q.next_release(), Some(t0 + Duration::from_millis(10)));
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
