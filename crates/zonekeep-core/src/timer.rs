//! Timers in simulation ticks.
//!
//! Timers count ticks that actually run, never wall time, so a zone that is
//! slowed, paused or drops ticks under load still sees its timers fire at the
//! same simulation tick; that keeps replays deterministic.

use std::collections::{BTreeMap, HashMap};

use zonekeep_protocol::error::DecodeError;
use zonekeep_protocol::wire::{put_varint, Reader};

use crate::error::TimerError;

/// The fewest bytes a timer takes in an image (due, id, tag, period flag): what bounds the count
/// against the input before anything is reserved.
const MIN_IMAGE_ENTRY: usize = 4;

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

    /// Appends the timers' part of a zone image: `varint Q` and the `Q` scheduled timers in
    /// firing order, each `varint due`, `varint id`, `varint tag` and its period (`u8 0` for a
    /// one-shot timer, `u8 1` and `varint period` for a repeating one); then `varint next_id`,
    /// `varint current`, `varint capacity` and `varint refused`. `due_of` is not written: it is
    /// the queue's keys the other way round.
    pub(crate) fn put_image(&self, out: &mut Vec<u8>) {
        put_varint(out, self.queue.len() as u64);
        for (&(due, id), entry) in &self.queue {
            put_varint(out, due);
            put_varint(out, id);
            put_varint(out, entry.tag);
            match entry.period {
                None => out.push(0),
                Some(period) => {
                    out.push(1);
                    put_varint(out, period);
                }
            }
        }
        put_varint(out, self.next_id);
        put_varint(out, self.current);
        put_varint(out, self.capacity as u64);
        put_varint(out, self.refused);
    }

    /// Reads what [`Timers::put_image`] wrote. Refused: timers out of firing order, an id seen
    /// twice or not below `next_id` (ids are issued from 1, so `next_id` is never 0), and a
    /// repeating timer with period 0 (it would fire forever within one tick).
    pub(crate) fn get_image(r: &mut Reader<'_>) -> Result<Timers, DecodeError> {
        let n = r.count("timers", r.remaining() / MIN_IMAGE_ENTRY)?;
        let mut queue = BTreeMap::new();
        let mut due_of = HashMap::with_capacity(n);
        let mut last: Option<(u64, u64)> = None;
        for _ in 0..n {
            let due = r.varint_u64()?;
            let id = r.varint_u64()?;
            let tag = r.varint_u64()?;
            let period = match r.u8()? {
                0 => None,
                1 => match r.varint_u64()? {
                    0 => return Err(DecodeError::Invalid("a repeating timer with period 0")),
                    p => Some(p),
                },
                _ => return Err(DecodeError::Invalid("timer period flag other than 0 or 1")),
            };
            if last.is_some_and(|k| k >= (due, id)) {
                return Err(DecodeError::Invalid("timers out of firing order"));
            }
            last = Some((due, id));
            if due_of.insert(id, due).is_some() {
                return Err(DecodeError::Invalid("a timer id scheduled twice"));
            }
            queue.insert((due, id), Entry { tag, period });
        }
        let next_id = r.varint_u64()?;
        if next_id == 0 {
            return Err(DecodeError::Invalid("timer ids start at 1"));
        }
        if due_of.keys().any(|&id| id >= next_id) {
            return Err(DecodeError::Invalid("a timer id was never issued"));
        }
        let current = r.varint_u64()?;
        let capacity = usize::try_from(r.varint_u64()?).map_err(|_| DecodeError::Overflow)?;
        let refused = r.varint_u64()?;
        Ok(Self {
            queue,
            due_of,
            next_id,
            current,
            capacity,
            refused,
        })
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

    fn image(t: &Timers) -> Vec<u8> {
        let mut out = Vec::new();
        t.put_image(&mut out);
        out
    }

    fn read(bytes: &[u8]) -> Result<Timers, DecodeError> {
        let mut r = Reader::new(bytes);
        let t = Timers::get_image(&mut r)?;
        r.finish()?;
        Ok(t)
    }

    /// Schedules, cancels and fires the same way on any wheel; returns what fired, and where.
    fn run(t: &mut Timers, from: u64) -> Vec<(u64, TimerId, u64)> {
        let mut fired = Vec::new();
        for tick in from..from + 40 {
            for (id, tag) in fire_all(t, tick) {
                fired.push((tick, id, tag));
                if tag % 5 == 0 {
                    t.cancel(id);
                }
            }
            let _ = t.after(tick % 7 + 1, tick * 10);
            if tick % 5 == 0 {
                let _ = t.every(tick % 4 + 1, tick * 10 + 1);
            }
            if tick % 13 == 0 {
                t.cancel(TimerId(tick / 2));
            }
        }
        fired
    }

    #[test]
    fn image_round_trip_fires_the_same() {
        let mut t = Timers::new(9);
        for i in 1..=8 {
            t.after(i * 2, i).unwrap();
        }
        let every = t.every(3, 100).unwrap();
        t.cancel(TimerId(2));
        let first = run(&mut t, 1);
        assert!(!first.is_empty());
        assert!(t.refused() > 0, "the wheel filled up at least once");
        let bytes = image(&t);
        let mut copy = read(&bytes).unwrap();
        assert_eq!(image(&copy), bytes);
        assert_eq!(
            (copy.len(), copy.refused(), copy.due_at(every)),
            (t.len(), t.refused(), t.due_at(every))
        );
        for id in 0..t.next_id + 2 {
            assert_eq!(copy.due_at(TimerId(id)), t.due_at(TimerId(id)));
        }
        let a = run(&mut t, 41);
        let b = run(&mut copy, 41);
        assert!(!a.is_empty());
        assert_eq!(a, b);
        assert_eq!(image(&t), image(&copy));
    }

    #[test]
    fn damaged_timer_images_are_refused() {
        let mut t = Timers::new(4);
        t.after(2, 7).unwrap();
        t.every(5, 8).unwrap();
        let bytes = image(&t);
        for len in 0..bytes.len() {
            assert!(read(&bytes[..len]).is_err(), "cut at {len}");
        }
        let entry = |out: &mut Vec<u8>, due: u64, id: u64, period: Option<u64>| {
            put_varint(out, due);
            put_varint(out, id);
            put_varint(out, 0);
            match period {
                None => out.push(0),
                Some(p) => {
                    out.push(1);
                    put_varint(out, p);
                }
            }
        };
        let tail = |out: &mut Vec<u8>, next_id: u64| {
            for v in [next_id, 0, 4, 0] {
                put_varint(out, v);
            }
        };
        // (what, entries as (due, id, period), next_id)
        type Case<'a> = (&'a str, &'a [(u64, u64, Option<u64>)], u64);
        let cases: [Case; 5] = [
            ("id twice", &[(1, 1, None), (2, 1, None)], 5),
            ("id never issued", &[(1, 5, None)], 5),
            ("zero period", &[(1, 1, Some(0))], 5),
            ("out of order", &[(2, 1, None), (1, 2, None)], 5),
            ("next id 0", &[], 0),
        ];
        for (what, entries, next_id) in cases {
            let mut out = Vec::new();
            put_varint(&mut out, entries.len() as u64);
            for &(due, id, period) in entries {
                entry(&mut out, due, id, period);
            }
            tail(&mut out, next_id);
            assert!(
                matches!(read(&out), Err(DecodeError::Invalid(_))),
                "{what} was accepted"
            );
        }
        let mut ok = Vec::new();
        put_varint(&mut ok, 1);
        entry(&mut ok, 1, 4, Some(2));
        tail(&mut ok, 5);
        assert!(read(&ok).is_ok());
    }

    #[test]
    fn too_far_is_refused_not_wrapped() {
        let mut t = Timers::new(4);
        t.set_current(u64::MAX - 1);
        assert_eq!(t.after(5, 0), Err(TimerError::TooFar));
    }
}
