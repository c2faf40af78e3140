//! Activity tiers: how much work an empty zone still gets.

use std::time::Duration;

use zonekeep_protocol::error::DecodeError;
use zonekeep_protocol::wire::{put_varint, Reader};

/// A zone's activity tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tier {
    /// Someone (player or observer, connected or within grace) is present.
    Hot,
    /// Empty for `idle_after`: ticks slower or pauses, per [`IdlePolicy`].
    Idle,
    /// Empty for `dormant_after`: no ticks run; the host should save and unload it.
    Dormant,
}

/// What an Idle zone does with its due ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdlePolicy {
    /// Run only every `n`-th due tick (the others are skipped, not simulated).
    /// Simulation time therefore passes `n` times slower than wall time.
    Slow(u32),
    /// Run no ticks at all until someone joins.
    Pause,
}

/// One observed tier change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TierTransition {
    /// The host's tick when the change happened (the last tick run).
    pub tick: u64,
    /// Tier before.
    pub from: Tier,
    /// Tier after.
    pub to: Tier,
}

/// Tracks emptiness and decides the tier from clock time.
#[derive(Debug)]
pub(crate) struct TierState {
    pub(crate) tier: Tier,
    empty_since: Option<Duration>,
}

impl TierState {
    /// A new zone starts Hot and empty since `now` (players are expected soon).
    pub(crate) fn new(now: Duration) -> Self {
        Self {
            tier: Tier::Hot,
            empty_since: Some(now),
        }
    }

    /// Someone is present: the zone is Hot. Returns the step taken, if any.
    pub(crate) fn occupied(&mut self) -> Option<(Tier, Tier)> {
        self.empty_since = None;
        self.step_to(Tier::Hot)
    }

    /// The zone became empty at `now` (no-op if it already was).
    pub(crate) fn emptied(&mut self, now: Duration) {
        if self.empty_since.is_none() {
            self.empty_since = Some(now);
        }
    }

    /// The next step implied by the time `now`, if any. Call until `None`:
    /// a long gap yields Hot→Idle, then Idle→Dormant, so each step is observed.
    pub(crate) fn update(
        &mut self,
        now: Duration,
        idle_after: Duration,
        dormant_after: Duration,
    ) -> Option<(Tier, Tier)> {
        let since = self.empty_since?;
        let empty_for = now.saturating_sub(since);
        match self.tier {
            Tier::Hot if empty_for >= idle_after => self.step_to(Tier::Idle),
            Tier::Idle if empty_for >= dormant_after => self.step_to(Tier::Dormant),
            _ => None,
        }
    }

    fn step_to(&mut self, to: Tier) -> Option<(Tier, Tier)> {
        let from = self.tier;
        if from == to {
            return None;
        }
        self.tier = to;
        Some((from, to))
    }

    /// Appends the tier's part of a zone image: `u8 tier` (0 Hot, 1 Idle, 2 Dormant), then
    /// `u8 0` if the zone is occupied or `u8 1` and `varint` nanoseconds since the clock's zero
    /// it has been empty since. A time past `u64` nanoseconds (584 years) is written as the
    /// largest, as a recording's config does.
    pub(crate) fn put_image(&self, out: &mut Vec<u8>) {
        out.push(match self.tier {
            Tier::Hot => 0,
            Tier::Idle => 1,
            Tier::Dormant => 2,
        });
        match self.empty_since {
            None => out.push(0),
            Some(since) => {
                out.push(1);
                put_varint(out, u64::try_from(since.as_nanos()).unwrap_or(u64::MAX));
            }
        }
    }

    /// Reads what [`TierState::put_image`] wrote. An Idle or Dormant zone that is not empty is
    /// refused: only an empty zone leaves Hot, and a zone becoming occupied returns to it.
    pub(crate) fn get_image(r: &mut Reader<'_>) -> Result<TierState, DecodeError> {
        let tier = match r.u8()? {
            0 => Tier::Hot,
            1 => Tier::Idle,
            2 => Tier::Dormant,
            _ => return Err(DecodeError::Invalid("unknown tier")),
        };
        let empty_since = match r.u8()? {
            0 => None,
            1 => Some(Duration::from_nanos(r.varint_u64()?)),
            _ => {
                return Err(DecodeError::Invalid(
                    "tier emptiness flag other than 0 or 1",
                ))
            }
        };
        if tier != Tier::Hot && empty_since.is_none() {
            return Err(DecodeError::Invalid(
                "an idle or dormant zone that is occupied",
            ));
        }
        Ok(TierState { tier, empty_since })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    fn all_steps(t: &mut TierState, now: Duration) -> Vec<(Tier, Tier)> {
        std::iter::from_fn(|| t.update(now, S(10), S(60))).collect()
    }

    #[test]
    fn empty_zone_goes_idle_then_dormant() {
        let mut t = TierState::new(S(0));
        assert!(all_steps(&mut t, S(9)).is_empty());
        assert_eq!(all_steps(&mut t, S(10)), vec![(Tier::Hot, Tier::Idle)]);
        assert!(all_steps(&mut t, S(30)).is_empty());
        assert_eq!(all_steps(&mut t, S(60)), vec![(Tier::Idle, Tier::Dormant)]);
    }

    #[test]
    fn long_gap_reports_both_steps() {
        let mut t = TierState::new(S(0));
        assert_eq!(
            all_steps(&mut t, S(100)),
            vec![(Tier::Hot, Tier::Idle), (Tier::Idle, Tier::Dormant)]
        );
    }

    fn image(t: &TierState) -> Vec<u8> {
        let mut out = Vec::new();
        t.put_image(&mut out);
        out
    }

    fn read(bytes: &[u8]) -> Result<TierState, DecodeError> {
        let mut r = Reader::new(bytes);
        let t = TierState::get_image(&mut r)?;
        r.finish()?;
        Ok(t)
    }

    #[test]
    fn image_round_trip() {
        let mut idle = TierState::new(Duration::new(3, 123_456_789));
        all_steps(&mut idle, S(20));
        let mut occupied = TierState::new(S(0));
        occupied.occupied();
        for t in [TierState::new(S(0)), idle, occupied] {
            let bytes = image(&t);
            let mut copy = read(&bytes).unwrap();
            assert_eq!((copy.tier, copy.empty_since), (t.tier, t.empty_since));
            assert_eq!(image(&copy), bytes);
            for len in 0..bytes.len() {
                assert!(read(&bytes[..len]).is_err());
            }
            // And what follows is the same.
            let mut t = t;
            assert_eq!(all_steps(&mut copy, S(100)), all_steps(&mut t, S(100)));
        }
        assert!(read(&[3, 0]).is_err());
        assert!(read(&[0, 2]).is_err());
        assert_eq!(
            read(&[1, 0]).err(),
            Some(DecodeError::Invalid(
                "an idle or dormant zone that is occupied"
            ))
        );
    }

    #[test]
    fn occupied_wakes_and_resets_emptiness() {
        let mut t = TierState::new(S(0));
        all_steps(&mut t, S(20));
        assert_eq!(t.occupied(), Some((Tier::Idle, Tier::Hot)));
        assert!(all_steps(&mut t, S(1000)).is_empty());
        t.emptied(S(1000));
        t.emptied(S(1005)); // already empty: the earlier time counts
        assert_eq!(all_steps(&mut t, S(1010)), vec![(Tier::Hot, Tier::Idle)]);
    }
}
