//! `ZoneHost`: drives one zone at a fixed timestep; the contract between the
//! simulation and its driver (see the [crate docs](crate) for calls in and
//! outputs out).
//!
//! # The life of a tick
//!
//! A driver (the server's simulation thread, a test, a replay) does, per
//! wake-up, at the zone's [`next_tick_due`](ZoneHost::next_tick_due):
//!
//! 1. **Calls in.** Joins, drops, rejoins and leaves run the zone's hooks at
//!    once. Inputs ([`handle_input`](ZoneHost::handle_input)) are sequence
//!    checked and sanitized at once, then wait in the player's bounded buffer.
//! 2. **[`advance`](ZoneHost::advance)`(now)`**: expire reconnect graces,
//!    update the tier, count the schedule slots due by `now` (at most
//!    `max_catch_up` run; the rest are dropped, counted). Each tick run:
//!    deliver queued fact settlements (`on_fact_settled`), take each player's
//!    inputs under the [`InputPolicy`](crate::InputPolicy) and apply them
//!    (`on_input`), run `tick`, fire due timers (`on_timer`), apply the zone's
//!    kicks. The report lists the ticks run, the patch ticks, the departures,
//!    kicks and tier changes, and every counter.
//! 3. **Outputs out.** After a patch tick, [`drain_frames`](ZoneHost::drain_frames)
//!    builds every connected participant's Delta once (interest, diff against
//!    what it was last sent, byte budget, ack, events) and hands them out with
//!    their ack and quiet flag; [`drain_facts`](ZoneHost::drain_facts) hands
//!    new facts to a sink; [`snapshot`](ZoneHost::snapshot) saves when asked.
//!
//! Nothing here waits: no I/O, no clock but the `now` handed in (tick
//! durations are measured with the injected [`Clock`]).

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use crate::call::{Call, CallAnswer, CallBook};
use crate::character::CharacterBook;
use crate::clock::Clock;
use crate::config::ZoneConfig;
use crate::ctx::{Ctx, CtxParts, Event, Kick, Outputs};
use crate::fact::{Fact, FactBook, Settlement};
use crate::input::InputMeta;
use crate::message::Mailbox;
use crate::player::{PlayerId, PlayerInfo, Roster};
use crate::replicate::{BuildStats, Replicator, SubscriberId};
use crate::report::{AdvanceReport, InputCounters};
use crate::rewind::RewindHistory;
use crate::rng::ZoneRng;
use crate::snapshot::Snapshot;
use crate::stages::Stage;
use crate::tier::{IdlePolicy, Tier, TierState, TierTransition};
use crate::timer::Timers;
use crate::transfer::Transfers;
use crate::view::ViewRequests;
use crate::world::World;
use crate::zone::{LeaveReason, ZoneInit};
pub use frames::{Frame, Frames};
pub(crate) use frames::{FrameQueue, RoutedEvents};
pub use observers::ObserverRate;
pub(crate) use observers::{HeldEvents, Plan};
use slot::ZoneSlot;

/// The state hooks borrow through [`Ctx`]; kept apart from the zone value so
/// both can be borrowed at once.
pub(crate) struct Core {
    tick: u64,
    dt: Duration,
    tier: TierState,
    rng: ZoneRng,
    timers: Timers,
    roster: Roster,
    out: Outputs,
    facts: FactBook,
    world: World,
    views: ViewRequests,
    transfers: Transfers,
    mail: Mailbox,
    characters: CharacterBook,
    calls: CallBook,
}

impl Core {
    pub(crate) fn ctx(&mut self, input: Option<InputMeta>) -> Ctx<'_> {
        Ctx::new(CtxParts {
            tick: self.tick,
            dt: self.dt,
            tier: self.tier.tier,
            rng: &mut self.rng,
            timers: &mut self.timers,
            roster: &self.roster,
            out: &mut self.out,
            input,
            facts: &mut self.facts,
            world: &mut self.world,
            views: &mut self.views,
            transfers: &mut self.transfers,
            mail: &mut self.mail,
            characters: &mut self.characters,
            calls: &mut self.calls,
        })
    }
}

/// What accumulates between two `advance` calls and is returned in the report.
#[derive(Default)]
struct Pending {
    inputs: InputCounters,
    transitions: Vec<TierTransition>,
    left: Vec<(PlayerId, LeaveReason)>,
    kicks: Vec<Kick>,
}

/// Runs one zone at a fixed timestep, whatever its type: the contract between the simulation and
/// whatever drives it (a server, a test, a replay tool). See the [module docs](self).
///
/// Tick `k` (the first is 1) is due at `start + k * dt`, where `start` is the
/// clock's time at [`new`](ZoneHost::new) and `dt` is
/// [`ZoneConfig::dt`] (whole nanoseconds, so wall schedule and simulation
/// time agree exactly). Each `advance(now)` runs the
/// ticks due by `now`, at most `max_catch_up` of them; the rest are dropped
/// (counted) by moving the schedule forward, so a stall never snowballs.
/// Simulation time only advances for ticks that run.
pub struct ZoneHost {
    init: ZoneInit,
    config: ZoneConfig,
    clock: Arc<dyn Clock>,
    /// The game code and its typed input buffers: the only zone-typed part.
    zone: Box<dyn ZoneSlot>,
    core: Core,
    dropped_at: graces::Graces,
    next_player: u32,
    start: Duration,
    /// Index of the next wall-clock slot not yet accounted for.
    next_slot: u64,
    /// [`ZoneHost::tick_at_once`] was used (it may be, once, before the first tick).
    ticked_at_once: bool,
    /// Due slots seen while Idle, for `IdlePolicy::Slow` (slot runs when `phase % n == 0`).
    idle_phase: u64,
    pending: Pending,
    disposed: bool,
    /// Builds every connected participant's Delta on patch ticks.
    replicator: Replicator,
    /// A patch tick ran since the frames were last built.
    patch_due: bool,
    /// The frames of the last build, until drained.
    frames: FrameQueue,
    /// Counters of the last frame build.
    last_build: BuildStats,
    /// The tick of the last patch built (0: none yet): an observer's turn is counted from it
    /// ([`ObserverRate::turn`]).
    last_patch: u64,
    /// Events addressed to observers that sat patches out, until their next frames.
    held: HeldEvents,
    /// What every subscriber was sent, for a zone that opted in to lag compensation.
    rewind: Option<RewindHistory>,
    /// Participants whose frames relays build, and the feed they follow.
    relays: relayed::Relays,
    /// The recording in progress, if any (one branch per call when there is none).
    pub(crate) recorder: Option<Box<crate::recording::Recorder>>,
    /// Something was called since the host was built: a recording starting now starts from a
    /// snapshot rather than from the creation.
    pub(crate) touched: bool,
    /// The build of the zone's code, stamped on every save (see [`ZoneHost::set_build_id`]).
    build: String,
    /// The clock stage timings are read from; `None`: stages are not timed.
    stage_clock: Option<crate::stages::StageClock>,
    /// Recent durations of every stage.
    stages: crate::stages::StageTimes,
    /// Stage durations since [`ZoneHost::take_stage_durations`] was last called.
    stage_pending: crate::stages::StageDurations,
    /// Frame builds since stages were first timed (one in sixteen is split into its stages).
    stage_builds: u64,
}

impl std::fmt::Debug for ZoneHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZoneHost")
            .field("zone_id", &self.init.zone_id)
            .field("kind", &self.init.kind)
            .field("tick", &self.core.tick)
            .field("tier", &self.core.tier.tier)
            .field("players", &self.core.roster.len())
            .field("disposed", &self.disposed)
            .finish_non_exhaustive()
    }
}

impl ZoneHost {
    /// The zone's create parameters.
    pub fn init(&self) -> &ZoneInit {
        &self.init
    }

    /// The zone's id.
    pub fn zone_id(&self) -> &str {
        &self.init.zone_id
    }

    /// The zone's kind.
    pub fn kind(&self) -> &str {
        &self.init.kind
    }

    /// The configuration in force.
    pub fn config(&self) -> &ZoneConfig {
        &self.config
    }

    /// The character writes due (see [`crate::character`]): each player's last write as it
    /// left, which gives its lease up, and a write of each character the zone asked to commit
    /// (or that changed before a save, after [`commit_characters`](ZoneHost::commit_characters)).
    /// The host makes them under the characters' leases, in order.
    pub fn drain_character_writes(&mut self) -> Vec<crate::CharacterWrite> {
        self.core.characters.drain()
    }

    /// The zone is saving: every character changed since its last write is to be written too
    /// (drained by [`drain_character_writes`](ZoneHost::drain_character_writes)).
    pub fn commit_characters(&mut self) {
        self.core.characters.commit_dirty();
    }

    /// The zone stops (unloaded, stopped or shut down): every character still here is handed
    /// back as it stands, as releasing writes (drained next). Called before the zone's final
    /// save; players still present are no longer the zone's to keep.
    pub fn release_characters(&mut self) {
        self.core.characters.release_all();
    }

    /// How many players hold a character in this zone.
    pub fn characters(&self) -> usize {
        self.core.characters.len()
    }

    /// Whether the zone asked for a save since the last call (see [`Ctx::save_now`]); the
    /// request is taken.
    pub fn take_save_request(&mut self) -> bool {
        std::mem::take(&mut self.core.out.save_requested)
    }

    /// The listing the zone published since the last call, if it published one (see
    /// [`Ctx::publish_listing`]); taken.
    pub fn take_listing(&mut self) -> Option<crate::Listing> {
        self.core.out.listing.take()
    }

    /// Names the build of the zone's code (the host's version for a native kind, the module's
    /// content hash for a module): every save records it beside the state version, so an
    /// operator facing a save this code cannot read knows which build wrote it.
    pub fn set_build_id(&mut self, build: impl Into<String>) {
        self.build = build.into();
    }

    /// The build of the zone's code, as [`set_build_id`](ZoneHost::set_build_id) named it (empty
    /// until then).
    pub fn build_id(&self) -> &str {
        &self.build
    }

    /// The last tick run (0 before the first).
    pub fn tick(&self) -> u64 {
        self.core.tick
    }

    /// The current activity tier.
    pub fn tier(&self) -> Tier {
        self.core.tier.tier
    }

    /// Participants present (connected or within grace), in id order: how many is known without
    /// walking them (`len`), and so is the newest (`next_back`).
    pub fn players(&self) -> impl ExactSizeIterator<Item = &PlayerInfo> + DoubleEndedIterator + '_ {
        self.core.roster.values()
    }

    /// One participant, if present.
    pub fn player(&self, id: PlayerId) -> Option<&PlayerInfo> {
        self.core.roster.get(&id)
    }

    /// The game code, when it is a `Z` (for tests and tools).
    pub fn zone<Z: Any>(&self) -> Option<&Z> {
        self.zone.zone_any().downcast_ref()
    }

    /// The game code, mutably, when it is a `Z` (for tests and tools; changing
    /// simulation state from outside the hooks breaks determinism).
    pub fn zone_mut<Z: Any>(&mut self) -> Option<&mut Z> {
        self.zone.zone_any_mut().downcast_mut()
    }

    /// The zone's current state hash: its own when it supplies one, else the
    /// replicated world's ([`World::hash`]). Computed when asked (tests,
    /// replay checks), never by the tick itself.
    pub fn state_hash(&self) -> Option<u64> {
        self.zone
            .state_hash()
            .or_else(|| Some(self.core.world.hash()))
    }

    /// Inputs accepted and not yet applied, over every participant: what a save leaves out (a
    /// zone rebuilt from its save starts with empty queues).
    pub fn inputs_queued(&self) -> usize {
        self.zone.inputs_queued()
    }

    /// Why the zone can no longer run ([`Zone::failure`](crate::Zone::failure)): `Some` once its
    /// sandboxed game code trapped, panicked or overran its budget. The caller stops the zone.
    pub fn failure(&self) -> Option<&str> {
        self.zone.failure()
    }

    /// The flag that stops the zone's running call from another thread, when its game code can
    /// be interrupted ([`Zone::stop_handle`](crate::Zone::stop_handle)).
    pub fn stop_handle(&self) -> Option<std::sync::Arc<std::sync::atomic::AtomicBool>> {
        self.zone.stop_handle()
    }

    /// Log lines the zone's game code wrote that its rate limit dropped, since it started
    /// ([`Zone::log_lines_suppressed`](crate::Zone::log_lines_suppressed)).
    pub fn log_lines_suppressed(&self) -> u64 {
        self.zone.log_lines_suppressed()
    }

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

    /// Whether [`dispose`](ZoneHost::dispose) has run.
    pub fn is_disposed(&self) -> bool {
        self.disposed
    }

    /// The newest input sequence number handed to the zone for `id` (the ack).
    pub fn last_processed_seq(&self, id: PlayerId) -> Option<u32> {
        self.zone.last_processed(id)
    }

    /// Heap bytes of the lag compensation history (what every subscriber was sent over the
    /// zone's `history_ticks`); `None` for a zone that did not opt in.
    pub fn rewind_history_bytes(&self) -> Option<usize> {
        self.rewind.as_ref().map(RewindHistory::heap_bytes)
    }

    /// The world as `player` drew it at `view_tick`, judged as an input arriving now would be in
    /// the next tick (with the same clamps), for tools, tests and benchmarks; `None` for a zone
    /// without lag compensation, view tick 0 or a participant not sent a frame yet.
    pub fn rewind_at(&self, player: PlayerId, view_tick: u32) -> Option<crate::Rewind<'_>> {
        self.rewind
            .as_ref()?
            .rewind_for(player, view_tick, self.core.tick.saturating_add(1))
    }

    /// The owner epoch this host was created or restored with.
    pub fn boot_epoch(&self) -> u64 {
        self.core.facts.boot_epoch()
    }

    /// Facts emitted since the last call, to hand to a fact sink. They stay
    /// in flight (and in snapshots) until settled with
    /// [`handle_settlement`](ZoneHost::handle_settlement).
    pub fn drain_facts(&mut self) -> Vec<Fact> {
        self.tap_call(|| crate::recording::Record::DrainFacts);
        let facts = self.core.facts.take_unsent();
        if self.recording() {
            self.tap_effect(crate::recording::facts_digest(&facts));
        }
        facts
    }

    /// How many facts are in flight (emitted, not yet settled and delivered).
    pub fn facts_in_flight(&self) -> usize {
        self.core.facts.in_flight_len()
    }

    /// The zone's state and in-flight facts as a checksummed envelope (see
    /// [`crate::snapshot`]), or `None` when the zone kind is not persisted. The envelope keeps
    /// the participants (except those moving to another zone), the parent, the groups, the
    /// message deduplication table and the messages received and not yet delivered.
    /// Call between two `advance` calls (a tick boundary).
    pub fn snapshot(&self) -> Option<Vec<u8>> {
        let zone = self.zone.save()?;
        Some(
            Snapshot {
                tick: self.core.tick,
                boot_epoch: self.core.facts.boot_epoch(),
                fact_counter: self.core.facts.counter(),
                facts: self.core.facts.in_flight().cloned().collect(),
                zone,
                next_player: self.next_player,
                // A moving player belongs to the server's transfer record, not to a save.
                roster: self
                    .core
                    .roster
                    .values()
                    .filter(|p| !self.core.transfers.moving.contains_key(&p.id))
                    .map(|p| crate::snapshot::SavedParticipant {
                        id: p.id,
                        principal: p.principal.clone(),
                        role: p.role,
                        claims: p.claims.clone(),
                        last_seq: self.zone.last_processed(p.id),
                    })
                    .collect(),
                state_version: self.config.state_version,
                build: self.build.clone(),
                characters: Vec::new(),
                calls: self.core.calls.in_flight().cloned().collect(),
            }
            .encode_with(&self.core.mail.saved_links()),
        )
    }

    /// Take the events emitted so far, for a driver that does not replicate
    /// (otherwise the next frame build delivers them inside the Deltas; each
    /// event goes one way or the other, never both).
    pub fn drain_events(&mut self) -> std::vec::Drain<'_, Event> {
        self.core.out.event_bytes = 0;
        self.core.out.events.drain(..)
    }

    /// Calls made since the last call, to journal and hand to a call sink. They stay in flight
    /// (and in snapshots) until answered with
    /// [`handle_call_result`](ZoneHost::handle_call_result).
    pub fn drain_calls(&mut self) -> Vec<Call> {
        self.tap_call(|| crate::recording::Record::DrainCalls);
        let calls = self.core.calls.take_unsent();
        if self.recording() {
            self.tap_effect(crate::recording::calls_digest(&calls));
        }
        calls
    }

    /// How many calls are in flight (made, result not yet delivered).
    pub fn calls_in_flight(&self) -> usize {
        self.core.calls.in_flight_len()
    }

    /// Queue a call's result; the zone receives it through
    /// [`Zone::on_call_result`](crate::Zone::on_call_result) at the start of its next tick. A
    /// result for a key not in flight is dropped and counted.
    pub fn handle_call_result(&mut self, answer: CallAnswer) {
        self.tap_call(|| crate::recording::Record::CallResult(answer.clone()));
        self.core.calls.queue_result(answer);
    }

    /// Queue a fact sink's answer; the zone receives it through
    /// [`Zone::on_fact_settled`](crate::Zone::on_fact_settled) at the start of its next tick. A settlement
    /// for a key not in flight is dropped and counted.
    pub fn handle_settlement(&mut self, settlement: Settlement) {
        self.tap_call(|| crate::recording::Record::Settle(settlement.clone()));
        self.core.facts.queue_settlement(settlement);
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

    /// Shut the zone down: call `dispose`, then forget every participant.
    /// Later joins, rejoins and inputs are refused and `advance` runs nothing.
    pub fn dispose(&mut self) {
        if self.disposed {
            return;
        }
        self.tap_call(|| crate::recording::Record::Dispose);
        self.zone.dispose(&mut self.core.ctx(None));
        self.disposed = true;
        self.core.roster.clear();
        self.core.out.kicks.clear();
        self.core.transfers.asked.clear();
        self.core.transfers.moving.clear();
        self.dropped_at.clear();
        self.stop_recording(crate::recording::StopReason::ZoneEnded);
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

    fn grace_expired(&self, id: PlayerId, now: Duration) -> bool {
        self.dropped_at
            .expired(id, now, self.config.reconnect_grace)
    }

    fn expire_graces(&mut self, now: Duration) {
        let expired = self
            .dropped_at
            .all_expired(now, self.config.reconnect_grace);
        for id in expired {
            self.remove_player(id, LeaveReason::Dropped);
        }
        self.apply_kicks();
    }

    fn transition(&mut self, from: Tier, to: Tier) {
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

    /// Remove without applying kicks (callers do, once, afterwards).
    fn remove_player(&mut self, id: PlayerId, why: LeaveReason) {
        if self.core.roster.remove(&id).is_none() {
            return;
        }
        self.dropped_at.remove(id);
        self.core.views.remove(id);
        self.core.transfers.moving.remove(&id);
        self.core.transfers.asked.retain(|a| a.player != id);
        // A request not yet handed out is withdrawn: there is nobody left to move.
        self.core.transfers.out.retain(|r| r.player != id);
        if let Some(history) = self.rewind.as_mut() {
            history.forget(id);
        }
        let _ = self.replicator.remove_subscriber(SubscriberId(id.0));
        self.held.forget(id);
        self.forget_relayed(id);
        self.pending.left.push((id, why));
        if self.core.roster.is_empty() {
            let now = self.read_clock();
            self.core.tier.emptied(now);
        }
        self.zone.leave(&mut self.core.ctx(None), id, why);
        // Handed back after the leave hook, which may still set it.
        self.core.characters.release(id);
    }

    /// Apply the zone's kick and transfer requests, including any made by the hooks they
    /// trigger (`on_leave`, `transfer_out`). Terminates: each applied kick removes a
    /// participant, each applied transfer makes a player moving (and a moving player cannot be
    /// asked for again), and a refused transfer's return asks for nothing the loop runs again.
    fn apply_kicks(&mut self) {
        while !self.core.out.kicks.is_empty() || !self.core.transfers.asked.is_empty() {
            let kicks = std::mem::take(&mut self.core.out.kicks);
            for kick in kicks {
                if self.core.roster.contains_key(&kick.player) {
                    self.remove_player(kick.player, LeaveReason::Kicked);
                    self.pending.kicks.push(kick);
                }
            }
            self.apply_transfers();
        }
    }
}

mod build;
mod calls;
#[cfg(test)]
mod courier;
mod frames;
mod graces;
mod image;
mod links;
mod observers;
#[cfg(test)]
mod probe;
mod record;
mod relayed;
mod slot;
mod stage_times;
#[cfg(test)]
mod tests_calls;
#[cfg(test)]
mod tests_characters;
#[cfg(test)]
mod tests_frames;
#[cfg(test)]
mod tests_lifecycle;
#[cfg(test)]
mod tests_limits;
#[cfg(test)]
mod tests_message;
#[cfg(test)]
mod tests_observers;
#[cfg(test)]
mod tests_persist;
#[cfg(test)]
mod tests_schedule;
#[cfg(test)]
mod tests_stages;
#[cfg(test)]
mod tests_state_version;
#[cfg(test)]
mod tests_transfer;
