//! Activity tiers: how much work an empty zone still gets.

use std::time::Duration;

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
}

#[cfg(test)]
mod tests {
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
