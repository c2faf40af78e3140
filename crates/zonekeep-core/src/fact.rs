//! Facts: durable side effects a zone emits during a tick (XP granted, item
//! looted), committed off the tick by the server and settled back later.
//!
//! A zone calls [`Ctx::emit_fact`](crate::Ctx::emit_fact); the fact gets an
//! idempotency [`FactKey`] and joins the zone's bounded **in-flight** set. The
//! server takes new facts with [`ZoneHost::drain_facts`](crate::ZoneHost::drain_facts),
//! commits them to a sink, and hands back a [`Settlement`] with
//! [`ZoneHost::handle_settlement`](crate::ZoneHost::handle_settlement); the zone sees it on its next
//! tick through [`Zone::on_fact_settled`](crate::Zone::on_fact_settled), and
//! only then does the fact leave the in-flight set.
//!
//! In-flight facts are part of every snapshot and are re-sent under the same
//! keys after a restore, so delivery is at-least-once and the sink's
//! idempotency by key makes each fact take effect exactly once. Generated keys
//! are `"{zone_id}:{boot_epoch}:{counter}"`: the boot epoch is the owner epoch
//! the host was created or restored with (strictly increasing per zone), and
//! the counter is saved with the zone, so a key is never reused for a
//! different fact.

pub(crate) mod image;

use std::collections::{BTreeMap, VecDeque};

/// Longest accepted fact key or kind, in bytes (the store's identifier limit).
pub const MAX_FACT_ID_LEN: usize = 512;

/// A fact's idempotency key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FactKey(pub String);

impl FactKey {
    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for FactKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One durable side effect, as handed to the server.
#[derive(Debug, Clone, PartialEq)]
pub struct Fact {
    /// Idempotency key: the sink applies a key at most once.
    pub key: FactKey,
    /// What happened, e.g. `"mob_killed"`.
    pub kind: String,
    /// Game-defined payload (the built-in ledger adds `{"add": {"score": 50}}` to totals).
    pub payload: serde_json::Value,
    /// The principal the effect applies to, if any.
    pub principal: Option<String>,
    /// The tick that emitted it.
    pub tick: u64,
}

/// How a sink answered a fact.
#[derive(Debug, Clone, PartialEq)]
pub enum FactOutcome {
    /// Committed; the sink's result (for the ledger, the principal's totals after it).
    Ok(serde_json::Value),
    /// Refused for good (malformed, rejected by the app); retrying cannot help.
    Refused(String),
}

/// A sink's answer for one fact, delivered to the zone on its next tick.
#[derive(Debug, Clone, PartialEq)]
pub struct Settlement {
    /// The settled fact's key.
    pub key: FactKey,
    /// The answer.
    pub outcome: FactOutcome,
}

/// Why a fact could not be emitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FactError {
    /// The zone already has `capacity` facts in flight. The fact was not
    /// emitted; the overflow is counted in the advance report.
    #[error("fact queue full ({capacity} in flight)")]
    QueueFull {
        /// The configured bound ([`ZoneConfig::max_facts_in_flight`](crate::ZoneConfig::max_facts_in_flight)).
        capacity: usize,
    },
    /// A game-supplied key equals a fact still in flight.
    #[error("fact key {0:?} is already in flight")]
    DuplicateKey(String),
    /// An empty or over-long key or kind.
    #[error("invalid fact: {0}")]
    Invalid(String),
    /// The payload's JSON text is longer than the zone allows. The fact was not emitted; the
    /// refusal is counted in the advance report.
    #[error("fact payload of {bytes} bytes exceeds the zone's max_fact_bytes of {max}")]
    TooLarge {
        /// The payload's length as JSON text.
        bytes: usize,
        /// [`ZoneConfig::max_fact_bytes`](crate::ZoneConfig::max_fact_bytes).
        max: usize,
    },
    /// The zone already emitted its most facts this second of zone time. The fact was not
    /// emitted; the refusal is counted in the advance report.
    #[error("fact rate limit: the zone's max_facts_per_second of {max_per_second} was reached this second")]
    RateLimited {
        /// [`ZoneConfig::max_facts_per_second`](crate::ZoneConfig::max_facts_per_second).
        max_per_second: u32,
    },
}

/// The size and rate limits on new facts (from the zone's config; not part of an image).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FactLimits {
    /// Longest payload, in bytes of JSON text.
    pub(crate) max_bytes: usize,
    /// Most facts per window.
    pub(crate) per_second: u32,
    /// Ticks in a window (one second of zone time).
    pub(crate) window_ticks: u64,
}

impl Default for FactLimits {
    fn default() -> Self {
        Self {
            max_bytes: usize::MAX,
            per_second: u32::MAX,
            window_ticks: 1,
        }
    }
}

/// The zone's in-flight facts, new facts not yet taken, and settlements not
/// yet delivered. Owned by the host; reached by hooks through `Ctx`.
#[derive(Debug)]
pub(crate) struct FactBook {
    zone_id: String,
    boot_epoch: u64,
    counter: u64,
    capacity: usize,
    /// In-flight facts by emission order (the order they are re-sent in).
    in_flight: BTreeMap<u64, Fact>,
    /// Key → emission order, to find a settled fact.
    by_key: BTreeMap<FactKey, u64>,
    next_order: u64,
    /// Emission orders of facts not yet taken by the server.
    unsent: VecDeque<u64>,
    settlements: VecDeque<Settlement>,
    pub(crate) overflowed: u64,
    pub(crate) unknown_settlements: u64,
    limits: FactLimits,
    /// The current rate window: its first tick and the facts accepted in it.
    window: (u64, u32),
    /// Facts refused by the limits since the host last took the counts.
    pub(crate) refused: crate::report::FactRefusals,
}

impl FactBook {
    pub(crate) fn new(zone_id: &str, boot_epoch: u64, capacity: usize) -> Self {
        Self {
            zone_id: zone_id.to_owned(),
            boot_epoch,
            counter: 0,
            capacity,
            in_flight: BTreeMap::new(),
            by_key: BTreeMap::new(),
            next_order: 0,
            unsent: VecDeque::new(),
            settlements: VecDeque::new(),
            overflowed: 0,
            unknown_settlements: 0,
            limits: FactLimits::default(),
            window: (0, 0),
            refused: crate::report::FactRefusals::default(),
        }
    }

    /// Applies the zone's size and rate limits to facts emitted from now on.
    pub(crate) fn set_limits(&mut self, limits: FactLimits) {
        self.limits = limits;
    }

    /// The persisted key counter.
    pub(crate) fn counter(&self) -> u64 {
        self.counter
    }

    pub(crate) fn set_counter(&mut self, counter: u64) {
        self.counter = counter;
    }

    pub(crate) fn boot_epoch(&self) -> u64 {
        self.boot_epoch
    }

    pub(crate) fn in_flight(&self) -> impl Iterator<Item = &Fact> + '_ {
        self.in_flight.values()
    }

    pub(crate) fn in_flight_len(&self) -> usize {
        self.in_flight.len()
    }

    pub(crate) fn emit(
        &mut self,
        tick: u64,
        kind: &str,
        payload: serde_json::Value,
        principal: Option<&str>,
        key: Option<String>,
    ) -> Result<FactKey, FactError> {
        check_id("kind", kind)?;
        if let Some(k) = &key {
            check_id("key", k)?;
            if self.by_key.contains_key(&FactKey(k.clone())) {
                return Err(FactError::DuplicateKey(k.clone()));
            }
        }
        let bytes = json_len(&payload);
        if bytes > self.limits.max_bytes {
            self.refused.too_large = self.refused.too_large.saturating_add(1);
            return Err(FactError::TooLarge {
                bytes,
                max: self.limits.max_bytes,
            });
        }
        // A window is one second of zone time, opened by the first fact after the last closed.
        let (start, count) = &mut self.window;
        if *count == 0 || tick.saturating_sub(*start) >= self.limits.window_ticks {
            *start = tick;
            *count = 0;
        }
        if *count >= self.limits.per_second {
            self.refused.rate = self.refused.rate.saturating_add(1);
            return Err(FactError::RateLimited {
                max_per_second: self.limits.per_second,
            });
        }
        if self.in_flight.len() >= self.capacity {
            self.overflowed = self.overflowed.saturating_add(1);
            return Err(FactError::QueueFull {
                capacity: self.capacity,
            });
        }
        let key = match key {
            Some(k) => FactKey(k),
            None => {
                let k = FactKey(format!(
                    "{}:{}:{}",
                    self.zone_id, self.boot_epoch, self.counter
                ));
                self.counter = self.counter.saturating_add(1);
                k
            }
        };
        self.window.1 = self.window.1.saturating_add(1);
        self.insert(Fact {
            key: key.clone(),
            kind: kind.to_owned(),
            payload,
            principal: principal.map(str::to_owned),
            tick,
        });
        Ok(key)
    }

    /// Adds a fact to the in-flight set and marks it to be sent. Used by
    /// `emit` and by restore (which may exceed the capacity: saved facts are
    /// never dropped).
    pub(crate) fn insert(&mut self, fact: Fact) {
        if self.by_key.contains_key(&fact.key) {
            return;
        }
        let order = self.next_order;
        self.next_order = self.next_order.saturating_add(1);
        self.by_key.insert(fact.key.clone(), order);
        self.in_flight.insert(order, fact);
        self.unsent.push_back(order);
    }

    pub(crate) fn take_unsent(&mut self) -> Vec<Fact> {
        let mut out = Vec::with_capacity(self.unsent.len());
        while let Some(order) = self.unsent.pop_front() {
            if let Some(f) = self.in_flight.get(&order) {
                out.push(f.clone());
            }
        }
        out
    }

    /// Queues a settlement for the next tick. Settlements for keys not in
    /// flight (already settled, or never emitted here) are dropped and
    /// counted, which also bounds the queue by the in-flight bound.
    pub(crate) fn queue_settlement(&mut self, s: Settlement) {
        if !self.by_key.contains_key(&s.key) || self.settlements.iter().any(|q| q.key == s.key) {
            self.unknown_settlements = self.unknown_settlements.saturating_add(1);
            return;
        }
        self.settlements.push_back(s);
    }

    /// Removes the next queued settlement's fact from flight and returns it.
    pub(crate) fn next_settlement(&mut self) -> Option<Settlement> {
        let s = self.settlements.pop_front()?;
        if let Some(order) = self.by_key.remove(&s.key) {
            self.in_flight.remove(&order);
        }
        Some(s)
    }
}

/// The length of `v` as JSON text, counted without building the text.
pub(crate) fn json_len(v: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    // Writing to a counter cannot fail; a value that could not be written counts as limitless.
    match serde_json::to_writer(&mut n, v) {
        Ok(()) => n.0,
        Err(_) => usize::MAX,
    }
}

fn check_id(what: &str, value: &str) -> Result<(), FactError> {
    if value.is_empty() || value.len() > MAX_FACT_ID_LEN {
        return Err(FactError::Invalid(format!(
            "{what} must be 1..={MAX_FACT_ID_LEN} bytes, got {}",
            value.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn generated_keys_are_stable_and_unique() {
        let mut book = FactBook::new("z1", 7, 16);
        let a = book.emit(1, "kill", json!(1), None, None).unwrap();
        let b = book.emit(1, "kill", json!(2), Some("p"), None).unwrap();
        assert_eq!(a.as_str(), "z1:7:0");
        assert_eq!(b.as_str(), "z1:7:1");
        assert_eq!(book.counter(), 2);
        let facts = book.take_unsent();
        assert_eq!(facts.len(), 2);
        assert!(book.take_unsent().is_empty(), "taken facts are not re-sent");
        assert_eq!(book.in_flight_len(), 2, "taken facts stay in flight");
    }

    #[test]
    fn queue_is_bounded_and_overflow_counted() {
        let mut book = FactBook::new("z", 1, 2);
        book.emit(1, "k", json!(null), None, None).unwrap();
        book.emit(1, "k", json!(null), None, None).unwrap();
        let err = book.emit(1, "k", json!(null), None, None).unwrap_err();
        assert_eq!(err, FactError::QueueFull { capacity: 2 });
        assert_eq!(book.overflowed, 1);
        assert_eq!(book.counter(), 2, "a refused fact uses no counter value");
    }

    #[test]
    fn game_keys_must_be_unique_in_flight() {
        let mut book = FactBook::new("z", 1, 4);
        book.emit(1, "k", json!(null), None, Some("mine".into()))
            .unwrap();
        assert_eq!(
            book.emit(1, "k", json!(null), None, Some("mine".into())),
            Err(FactError::DuplicateKey("mine".into()))
        );
        assert!(matches!(
            book.emit(1, "", json!(null), None, None),
            Err(FactError::Invalid(_))
        ));
    }

    #[test]
    fn settlement_removes_from_flight_once() {
        let mut book = FactBook::new("z", 1, 4);
        let key = book.emit(1, "k", json!(null), None, None).unwrap();
        let s = Settlement {
            key: key.clone(),
            outcome: FactOutcome::Ok(json!(5)),
        };
        book.queue_settlement(s.clone());
        book.queue_settlement(s.clone());
        assert_eq!(book.unknown_settlements, 1, "duplicate settlement dropped");
        assert_eq!(book.next_settlement(), Some(s.clone()));
        assert_eq!(book.in_flight_len(), 0);
        book.queue_settlement(s);
        assert_eq!(
            book.unknown_settlements, 2,
            "settled key is no longer in flight"
        );
        assert_eq!(book.next_settlement(), None);
    }
}

#[cfg(test)]
mod tests_image;
