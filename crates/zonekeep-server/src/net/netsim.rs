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

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
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

/// Why [`NetSim::set_own`] refused a new subject.
pub const TOO_MANY_OWN: &str = "too many subjects hold their own setting; clear one first";

/// Subjects that may hold their own setting at once (those with live connections come on top).
pub const MAX_OWN_SETTINGS: usize = 1024;

/// The runtime-switchable settings: the host-wide one and each subject's own.
#[derive(Debug, Clone, Default)]
pub struct NetSim {
    cfg: Arc<RwLock<NetSimConfig>>,
    subjects: Arc<Mutex<HashMap<Arc<str>, Arc<SubjectSim>>>>,
    /// Whether any setting, host-wide or a subject's own, was ever made. Until then every
    /// message's lookup is one load instead of two lock round trips: a host that never uses
    /// NetSim (any host outside dev mode) pays nothing per message for it.
    used: Arc<AtomicBool>,
}

/// One subject's own setting and what NetSim did to its connections' messages.
#[derive(Debug, Default)]
struct SubjectSim {
    own: RwLock<Option<NetSimConfig>>,
    /// Messages and datagrams held back (or dropped) on their way to the client.
    held_to_client: AtomicU64,
    /// Messages and datagrams held back (or dropped) on their way from the client.
    held_from_client: AtomicU64,
    /// The longest delay applied towards the client since the last round-trip report, µs.
    worst_to_client_us: AtomicU64,
    /// The longest delay applied from the client since the last round-trip report, µs.
    worst_from_client_us: AtomicU64,
}

/// What NetSim does for one subject (`GET /dev/netsim?sub=`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SubjectReport {
    /// The subject.
    pub sub: String,
    /// Its own setting, if it set one.
    pub own: Option<NetSimConfig>,
    /// The setting its connections' messages go through: its own, else the host-wide one.
    pub applies: NetSimConfig,
    /// Its live connections.
    pub connections: usize,
    /// Messages and datagrams NetSim held back or dropped on their way to its client.
    pub held_to_client: u64,
    /// Messages and datagrams NetSim held back or dropped on their way from its client.
    pub held_from_client: u64,
}

impl NetSim {
    /// The host-wide setting.
    pub fn get(&self) -> NetSimConfig {
        if !self.used.load(Ordering::Acquire) {
            return NetSimConfig::default();
        }
        *self.cfg.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Replace the host-wide setting (validated).
    pub fn set(&self, cfg: NetSimConfig) -> Result<(), NetSimError> {
        cfg.validate()?;
        *self.cfg.write().unwrap_or_else(|p| p.into_inner()) = cfg;
        self.used.store(true, Ordering::Release);
        Ok(())
    }

    fn subjects(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Arc<SubjectSim>>> {
        self.subjects.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Give `sub` its own setting (validated), or take it away (`None`: back to the host-wide
    /// one). Refused when [`MAX_OWN_SETTINGS`] subjects already hold one.
    pub fn set_own(&self, sub: &str, cfg: Option<NetSimConfig>) -> Result<(), NetSimError> {
        if let Some(cfg) = &cfg {
            cfg.validate()?;
        }
        let mut subjects = self.subjects();
        let has_own = |s: &SubjectSim| s.own.read().unwrap_or_else(|p| p.into_inner()).is_some();
        match subjects.get(sub) {
            Some(entry) => {
                if cfg.is_some()
                    && !has_own(entry)
                    && subjects.values().filter(|s| has_own(s)).count() >= MAX_OWN_SETTINGS
                {
                    return Err(NetSimError(TOO_MANY_OWN));
                }
                *entry.own.write().unwrap_or_else(|p| p.into_inner()) = cfg;
                // Nobody connected and nothing of its own: nothing to keep.
                if cfg.is_none() && Arc::strong_count(entry) == 1 {
                    subjects.remove(sub);
                }
            }
            None if cfg.is_none() => {}
            None => {
                if subjects.values().filter(|s| has_own(s)).count() >= MAX_OWN_SETTINGS {
                    return Err(NetSimError(TOO_MANY_OWN));
                }
                let entry = SubjectSim {
                    own: RwLock::new(cfg),
                    ..SubjectSim::default()
                };
                subjects.insert(Arc::from(sub), Arc::new(entry));
            }
        }
        if cfg.is_some() {
            self.used.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// What NetSim does for `sub`'s connections.
    pub fn report(&self, sub: &str) -> SubjectReport {
        // Read under the lock: a connection's end (which takes it too) then never sees this
        // reader's reference and keeps an entry nobody needs.
        let subjects = self.subjects();
        let entry = subjects.get(sub);
        let own = entry.and_then(|e| *e.own.read().unwrap_or_else(|p| p.into_inner()));
        let count =
            |f: fn(&SubjectSim) -> &AtomicU64| entry.map_or(0, |e| f(e).load(Ordering::Relaxed));
        SubjectReport {
            sub: sub.to_owned(),
            own,
            applies: own.unwrap_or_else(|| self.get()),
            // Less the map's own reference.
            connections: entry.map_or(0, |e| Arc::strong_count(e) - 1),
            held_to_client: count(|e| &e.held_to_client),
            held_from_client: count(|e| &e.held_from_client),
        }
    }

    /// Whether any setting was ever made (host-wide or a subject's own): until then no message
    /// of any connection is held back, so a connection's frames may skip the queue NetSim keeps.
    pub fn in_use(&self) -> bool {
        self.used.load(Ordering::Acquire)
    }

    /// The NetSim of a new connection of `sub`.
    pub fn connection(&self, sub: &str) -> ConnNetSim {
        let subject = self.subjects().entry(Arc::from(sub)).or_default().clone();
        ConnNetSim {
            sim: self.clone(),
            sub: Arc::from(sub),
            subject,
        }
    }
}

/// Which way a message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Host → client.
    ToClient,
    /// Client → host.
    FromClient,
}

/// The NetSim one connection's messages go through: its subject's own setting, else the
/// host-wide one. Dropping the last connection of a subject without its own setting forgets it.
#[derive(Debug)]
pub struct ConnNetSim {
    sim: NetSim,
    sub: Arc<str>,
    subject: Arc<SubjectSim>,
}

impl ConnNetSim {
    /// The setting that applies to this connection's next message.
    pub fn get(&self) -> NetSimConfig {
        if !self.sim.used.load(Ordering::Acquire) {
            return NetSimConfig::default();
        }
        let own = *self.subject.own.read().unwrap_or_else(|p| p.into_inner());
        own.unwrap_or_else(|| self.sim.get())
    }

    /// NetSim held back (or dropped) a message going `dir`, by `delay` when it is known.
    pub fn held(&self, dir: Direction, delay: Option<Duration>) {
        let (count, worst) = match dir {
            Direction::ToClient => (
                &self.subject.held_to_client,
                &self.subject.worst_to_client_us,
            ),
            Direction::FromClient => (
                &self.subject.held_from_client,
                &self.subject.worst_from_client_us,
            ),
        };
        count.fetch_add(1, Ordering::Relaxed);
        if let Some(d) = delay {
            let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
            worst.fetch_max(us, Ordering::Relaxed);
        }
    }

    /// What NetSim added to this connection's round trip since the last call: per direction, the
    /// longest delay it applied (retransmission stalls included) or, when it held nothing back
    /// that way, the setting's mean one-way delay. Zero when NetSim is off.
    pub fn take_added_round_trip(&self) -> Duration {
        let cfg = self.get();
        let mean_us = (u64::from(cfg.latency_ms) * 1000 + u64::from(cfg.jitter_ms) * 500)
            * u64::from(!cfg.is_off());
        let to = self.subject.worst_to_client_us.swap(0, Ordering::Relaxed);
        let from = self.subject.worst_from_client_us.swap(0, Ordering::Relaxed);
        Duration::from_micros(to.max(mean_us).saturating_add(from.max(mean_us)))
    }
}

impl Drop for ConnNetSim {
    fn drop(&mut self) {
        let mut subjects = self.sim.subjects();
        let own = self
            .subject
            .own
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_some();
        // The map's reference and this one: the last connection of a subject with no setting.
        if !own && Arc::strong_count(&self.subject) == 2 {
            subjects.remove(&self.sub);
        }
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
    last_delay: Option<Duration>,
}

impl<T> DelayQueue<T> {
    /// An empty queue holding at most `cap` messages (at least 1).
    pub fn new(seed: u64, cap: usize) -> Self {
        Self {
            link: Link::new(seed),
            items: VecDeque::new(),
            cap: cap.max(1),
            last_delay: None,
        }
    }

    /// How long the last message offered is held (`None`: it went at once).
    pub fn last_delay(&self) -> Option<Duration> {
        self.last_delay
    }

    /// Whether the queue holds `cap` messages: stop taking more until one is released.
    pub fn is_full(&self) -> bool {
        self.items.len() >= self.cap
    }

    /// Hand over `item` at `now`. Returns it straight back when it may go at once (NetSim off
    /// and nothing waiting); otherwise keeps it until [`pop_due`](DelayQueue::pop_due) releases it.
    pub fn offer(&mut self, cfg: &NetSimConfig, now: Instant, item: T) -> Option<T> {
        match self.link.release_at(cfg, now) {
            None if self.items.is_empty() => {
                self.last_delay = None;
                Some(item)
            }
            None => {
                self.last_delay = Some(Duration::ZERO);
                self.items.push_back((now, item));
                None
            }
            Some(at) => {
                self.last_delay = Some(at.saturating_duration_since(now));
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
