//! Timers in simulation ticks.
//!
//! Timers count ticks that actually run, never wall time, so a zone that is
//! slowed, paused or drops ticks under load still sees its timers fire at the
//! same simulation tick; that keeps replays deterministic.

use std::collections::{BTreeMap, HashMap};

use crate::error::TimerError;

/// Identifies one scheduled timer; never reused within a host's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimerId(pub u64);

impl std::fmt::Display for TimerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "timer#{}", self.0)
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    tag: u64,
    /// `Some(n)` for a repeating timer.
    period: Option<u64>,
}

/// The zone's timer wheel.
///
/// Timers fire after the zone's `tick` hook in the tick they are due, in
/// order of due tick and then id (so in scheduling order within a tick).
/// A timer scheduled during tick `t` with `after(n, _)` fires in tick `t + n`;
/// scheduled outside a tick (in `create` or a join hook) it counts from the
/// last tick that ran. The number of live timers is bounded by
/// [`ZoneConfig::max_timers`](crate::ZoneConfig::max_timers).
#[derive(Debug)]
pub struct Timers {
    queue: BTreeMap<(u64, u64), Entry>,
    due_of: HashMap<u64, u64>,
    next_id: u64,
    current: u64,
    capacity: usize,
    refused: u64,
}

impl Timers {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            queue: BTreeMap::new(),
            due_of: HashMap::new(),
            next_id: 1,
            current: 0,
            capacity,
            refused: 0,
        }
    }

    pub(crate) fn set_current(&mut self, tick: u64) {
        self.current = tick;
    }

    fn schedule(
        &mut self,
        ticks: u64,
        tag: u64,
        period: Option<u64>,
    ) -> Result<TimerId, TimerError> {
        if ticks == 0 {
            return Err(TimerError::ZeroTicks);
        }
        if self.queue.len() >= self.capacity {
            self.refused = self.refused.saturating_add(1);
            return Err(TimerError::Full {
                capacity: self.capacity,
            });
        }
        let due = self.current.checked_add(ticks).ok_or(TimerError::TooFar)?;
        let id = self.next_id;
        self.next_id = self.next_id.saturating_add(1);
        self.queue.insert((due, id), Entry { tag, period });
        self.due_of.insert(id, due);
        Ok(TimerId(id))
    }

    /// Fire once, `ticks` ticks from now (`ticks >= 1`).
    pub fn after(&mut self, ticks: u64, tag: u64) -> Result<TimerId, TimerError> {
        self.schedule(ticks, tag, None)
    }

    /// Fire every `ticks` ticks (`ticks >= 1`), first `ticks` ticks from now,
    /// until cancelled. The id stays the same across firings.
    pub fn every(&mut self, ticks: u64, tag: u64) -> Result<TimerId, TimerError> {
        self.schedule(ticks, tag, Some(ticks))
    }

    /// Cancel a timer; returns whether it was still scheduled.
    /// Cancelling a repeating timer from its own `on_timer` stops it.
    pub fn cancel(&mut self, id: TimerId) -> bool {
        match self.due_of.remove(&id.0) {
            Some(due) => self.queue.remove(&(due, id.0)).is_some(),
            None => false,
        }
    }

    /// The tick at which `id` next fires, if it is scheduled.
    pub fn due_at(&self, id: TimerId) -> Option<u64> {
        self.due_of.get(&id.0).copied()
    }

    /// Number of scheduled timers.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether no timer is scheduled.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Schedule requests refused because the wheel was full, over the host's life.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Remove and return the first timer due at or before `tick`.
    /// A repeating timer is rescheduled before it is returned, so the zone's
    /// `on_timer` may cancel it.
    pub(crate) fn pop_due(&mut self, tick: u64) -> Option<(TimerId, u64)> {
        let (&(due, id), _) = self.queue.first_key_value()?;
        if due > tick {
            return None;
        }
        let entry = self.queue.remove(&(due, id))?;
        match entry.period.and_then(|p| due.checked_add(p)) {
            Some(next) => {
                self.queue.insert((next, id), entry);
                self.due_of.insert(id, next);
            }
            None => {
                self.due_of.remove(&id);
            }
        }
        Some((TimerId(id), entry.tag))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn fire_all(t: &mut Timers, tick: u64) -> Vec<(TimerId, u64)> {
        t.set_current(tick);
        std::iter::from_fn(|| t.pop_due(tick)).collect()
    }

    #[test]
    fn after_fires_once_at_due_tick() {
        let mut t = Timers::new(8);
        let id = t.after(3, 7).unwrap();
        assert_eq!(t.due_at(id), Some(3));
        assert!(fire_all(&mut t, 1).is_empty());
        assert!(fire_all(&mut t, 2).is_empty());
        assert_eq!(fire_all(&mut t, 3), vec![(id, 7)]);
        assert!(fire_all(&mut t, 4).is_empty());
        assert!(t.is_empty());
    }

    #[test]
    fn every_repeats_until_cancelled() {
        let mut t = Timers::new(8);
        let id = t.every(2, 1).unwrap();
        let mut fired = vec![];
        for tick in 1..=7 {
            if !fire_all(&mut t, tick).is_empty() {
                fired.push(tick);
            }
        }
        assert_eq!(fired, vec![2, 4, 6]);
        assert!(t.cancel(id));
        assert!(!t.cancel(id));
        assert!(fire_all(&mut t, 8).is_empty());
    }

    #[test]
    fn cancel_before_due() {
        let mut t = Timers::new(8);
        let a = t.after(1, 1).unwrap();
        let b = t.after(1, 2).unwrap();
        assert!(t.cancel(a));
        assert_eq!(fire_all(&mut t, 1), vec![(b, 2)]);
    }

    #[test]
    fn order_is_due_then_id() {
        let mut t = Timers::new(8);
        let late = t.after(2, 0).unwrap();
        let a = t.after(1, 1).unwrap();
        let b = t.after(1, 2).unwrap();
        // Both ticks processed at once (as if tick 2 checks everything <= 2).
        t.set_current(2);
        let got: Vec<_> = std::iter::from_fn(|| t.pop_due(2)).collect();
        assert_eq!(got, vec![(a, 1), (b, 2), (late, 0)]);
    }

    #[test]
    fn counts_from_current_tick() {
        let mut t = Timers::new(8);
        t.set_current(10);
        let id = t.after(5, 0).unwrap();
        assert_eq!(t.due_at(id), Some(15));
    }

    #[test]
    fn zero_ticks_and_capacity_are_refused() {
        let mut t = Timers::new(1);
        assert_eq!(t.after(0, 0), Err(TimerError::ZeroTicks));
        assert_eq!(t.every(0, 0), Err(TimerError::ZeroTicks));
        t.after(1, 0).unwrap();
        assert_eq!(t.after(1, 0), Err(TimerError::Full { capacity: 1 }));
        assert_eq!(t.refused(), 1);
    }

    #[test]
    fn too_far_is_refused_not_wrapped() {
        let mut t = Timers::new(4);
        t.set_current(u64::MAX - 1);
        assert_eq!(t.after(5, 0), Err(TimerError::TooFar));
    }
}
