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

use crate::call::CallBook;
use crate::character::CharacterBook;
use crate::clock::Clock;
use crate::config::ZoneConfig;
use crate::ctx::{Ctx, CtxParts, Event, Kick, Outputs};
use crate::fact::FactBook;
use crate::input::InputMeta;
use crate::message::Mailbox;
use crate::player::{PlayerId, PlayerInfo, Roster};
use crate::replicate::{BuildStats, Replicator};
use crate::report::InputCounters;
use crate::rewind::RewindHistory;
use crate::rng::ZoneRng;
use crate::tier::{Tier, TierState, TierTransition};
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

    /// The listing the zone published since the last call, if it published one (see
    /// [`Ctx::publish_listing`]); taken.
    pub fn take_listing(&mut self) -> Option<crate::Listing> {
        self.core.out.listing.take()
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

    /// Take the events emitted so far, for a driver that does not replicate
    /// (otherwise the next frame build delivers them inside the Deltas; each
    /// event goes one way or the other, never both).
    pub fn drain_events(&mut self) -> std::vec::Drain<'_, Event> {
        self.core.out.event_bytes = 0;
        self.core.out.events.drain(..)
    }
}

mod build;
mod calls;
mod characters;
#[cfg(test)]
mod courier;
mod departures;
mod facts;
mod frames;
mod graces;
mod image;
mod links;
mod observers;
#[cfg(test)]
mod probe;
mod record;
mod relayed;
mod save;
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
mod tick;
