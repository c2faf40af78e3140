//! The fixed timestep: which schedule slots are due, and running them as ticks (fact
//! settlements and call results, inbox, inputs, the zone's tick, timers, kicks), with the tier
//! deciding how many of them run. See the [module docs](super) for the life of a tick.

use std::time::Duration;

use super::ZoneHost;
use crate::report::AdvanceReport;
use crate::stages::Stage;
use crate::tier::{IdlePolicy, Tier, TierTransition};

impl ZoneHost {
    /// Whether a replication patch follows `tick` (`tick % patch_every == 0`;
    /// tick 0 never runs, so it is never a patch tick).
    pub fn is_patch_tick(&self, tick: u64) -> bool {
        tick != 0 && tick % u64::from(self.config.patch_every) == 0
    }

    /// Clock time at which the next schedule slot falls due: a driver can
    /// sleep until then and call [`advance`](ZoneHost::advance).
    pub fn next_tick_due(&self) -> Duration {
        let nanos = self
            .core
            .dt
            .as_nanos()
            .saturating_mul(u128::from(self.next_slot));
        self.start.saturating_add(Duration::from_nanos(
            u64::try_from(nanos).unwrap_or(u64::MAX),
        ))
    }

    /// Makes the first tick due at once instead of one tick interval after the zone was built
    /// or restored, for a zone started because a client waits on it (a deploy moved it here
    /// and the player resumed with its start): the next [`advance`](ZoneHost::advance) runs a
    /// tick and its patch carries that player's BASELINE. The schedule keeps its phase. Once
    /// the zone has ticked, this does nothing.
    pub fn tick_at_once(&mut self) {
        self.tap_call(|| crate::recording::Record::TickAtOnce);
        // Slot 0 is the build itself: it runs only when asked for here, and only once.
        if self.next_slot == 1 && !self.ticked_at_once {
            self.next_slot = 0;
            self.ticked_at_once = true;
        }
    }

    /// Bring the zone up to clock time `now`: expire reconnect graces, update
    /// the tier, run the due ticks (within `max_catch_up`) and report. When a
    /// patch tick ran, the next [`drain_frames`](ZoneHost::drain_frames) builds
    /// and returns the patch. A disposed host reports nothing.
    pub fn advance(&mut self, now: Duration) -> AdvanceReport {
        self.tap_call(|| crate::recording::Record::Advance(now));
        if self.disposed {
            return AdvanceReport {
                tick: self.core.tick,
                ..AdvanceReport::default()
            };
        }
        self.expire_graces(now);
        let idle_after = self.config.idle_after;
        // A lasting world stays loaded when empty: its tier stops at Idle.
        let dormant_after = if self.config.lasting {
            Duration::MAX
        } else {
            self.config.dormant_after
        };
        while let Some((from, to)) = self.core.tier.update(now, idle_after, dormant_after) {
            self.transition(from, to);
        }
        self.apply_kicks();

        let due = self.take_due_slots(now);
        let runnable = match (self.core.tier.tier, self.config.idle_policy) {
            (Tier::Hot, _) => due,
            (Tier::Idle, IdlePolicy::Slow(n)) => {
                let n = u64::from(n.max(1));
                let from = self.idle_phase;
                self.idle_phase = from.saturating_add(due);
                // Slots with phase p in [from, from + due) and p % n == 0.
                self.idle_phase.div_ceil(n) - from.div_ceil(n)
            }
            (Tier::Idle, IdlePolicy::Pause) | (Tier::Dormant, _) => 0,
        };
        let run = runnable.min(u64::from(self.config.max_catch_up));

        let mut report = AdvanceReport {
            ticks_skipped: due - runnable,
            ticks_dropped: runnable - run,
            ..AdvanceReport::default()
        };
        for _ in 0..run {
            self.run_tick(&mut report);
        }
        report.ticks_run = run;
        report.tick = self.core.tick;
        let pending = std::mem::take(&mut self.pending);
        report.inputs = pending.inputs;
        report.tier_transitions = pending.transitions;
        report.left = pending.left;
        report.kicks = pending.kicks;
        report.facts_overflowed = std::mem::take(&mut self.core.facts.overflowed);
        report.settlements_unknown = std::mem::take(&mut self.core.facts.unknown_settlements);
        report.facts_refused = std::mem::take(&mut self.core.facts.refused);
        report.calls_overflowed = std::mem::take(&mut self.core.calls.overflowed);
        report.call_results_unknown = std::mem::take(&mut self.core.calls.unknown_results);
        report.spawns_refused = self.core.world.take_spawns_refused();
        self.patch_due |= !report.patch_ticks.is_empty();
        report.events_dropped = std::mem::take(&mut self.core.out.events_dropped);
        report.messages_refused = std::mem::take(&mut self.core.mail.sends_refused);
        report.messages_full = std::mem::take(&mut self.core.mail.inbox_full);
        report.tier_messages_dropped = std::mem::take(&mut self.core.mail.tier_messages_dropped);
        report.transfers_refused = std::mem::take(&mut self.core.transfers.refused);
        report.transfer_returns_refused = std::mem::take(&mut self.core.transfers.returns_refused);
        report
    }

    /// Count the wall-clock slots due by `now` and consume them.
    fn take_due_slots(&mut self, now: Duration) -> u64 {
        let elapsed = now.saturating_sub(self.start).as_nanos();
        let last_due = elapsed / self.core.dt.as_nanos().max(1);
        let last_due = u64::try_from(last_due).unwrap_or(u64::MAX);
        if last_due < self.next_slot {
            return 0;
        }
        let due = last_due - self.next_slot + 1;
        self.next_slot = last_due.saturating_add(1);
        due
    }

    fn run_tick(&mut self, report: &mut AdvanceReport) {
        let started = self.read_clock();
        let mark = self.stage_now();
        self.core.tick = self.core.tick.saturating_add(1);
        let tick = self.core.tick;

        while let Some(settlement) = self.core.facts.next_settlement() {
            self.zone
                .on_fact_settled(&mut self.core.ctx(None), &settlement);
            report.facts_settled = report.facts_settled.saturating_add(1);
        }
        while let Some(answer) = self.core.calls.next_result() {
            self.zone
                .on_call_result(&mut self.core.ctx(None), &answer.key, &answer.result);
            report.calls_answered = report.calls_answered.saturating_add(1);
        }
        self.deliver_inbox();
        let mark = self.stage_done(Stage::Inbox, mark);

        let mut applied = std::mem::take(&mut self.relays.applied);
        let superseded = self.zone.apply_inputs(
            &mut self.core,
            self.config.input_policy,
            self.rewind.as_ref(),
            &mut applied,
        );
        self.relays_changed(&applied);
        applied.clear();
        self.relays.applied = applied;
        let c = &mut self.pending.inputs.superseded;
        *c = c.saturating_add(superseded);
        let mark = self.stage_done(Stage::Inputs, mark);

        self.zone.tick(&mut self.core.ctx(None));
        let mark = self.stage_done(Stage::Tick, mark);
        while let Some((id, tag)) = self.core.timers.pop_due(tick) {
            self.zone.on_timer(&mut self.core.ctx(None), id, tag);
        }
        self.apply_kicks();
        self.stage_done(Stage::Timers, mark);

        if self.is_patch_tick(tick) {
            report.patch_ticks.push(tick);
        }
        self.tap_tick();
        let ended = self.read_clock();
        report.tick_durations.push(ended.saturating_sub(started));
    }

    pub(super) fn transition(&mut self, from: Tier, to: Tier) {
        if to == Tier::Idle {
            self.idle_phase = 0;
        }
        self.pending.transitions.push(TierTransition {
            tick: self.core.tick,
            from,
            to,
        });
        // The parent hears of it first: a Dormant zone is unloaded right after this advance.
        self.core.mail.tier_changed(self.core.tick, from, to);
        self.zone.on_tier(&mut self.core.ctx(None), from, to);
    }
}
