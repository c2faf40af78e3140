//! Holding one direction's messages back by a NetSim setting: the simulated link's timing (TCP's
//! in-order delivery with retransmission stalls, or datagrams lost and reordered), and the
//! bounded queues that keep messages and datagrams until they are due.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use super::NetSimConfig;

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
