//! The context a zone's hooks receive, and the outputs it collects.

use std::time::Duration;

use crate::fact::{FactBook, FactError, FactKey};
use crate::input::InputMeta;
use crate::player::{PlayerId, PlayerInfo, Roster};
use crate::rng::ZoneRng;
use crate::tier::Tier;
use crate::timer::Timers;
use crate::view::ViewRequests;
use crate::world::{EntityId, World};

/// Who an event is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventTarget {
    /// Every participant (players and observers).
    All,
    /// One participant.
    Player(PlayerId),
}

/// A transient message from the zone to clients (a sound, a chat line, a hit marker).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The tick that emitted it (the last tick run, if emitted outside a tick).
    pub tick: u64,
    /// Recipients.
    pub target: EventTarget,
    /// Game-defined topic.
    pub topic: u16,
    /// Game-defined bytes.
    pub payload: Vec<u8>,
}

/// A zone's request to remove a participant; the host applies it after the
/// hook returns (the player leaves with [`LeaveReason::Kicked`](crate::LeaveReason::Kicked)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kick {
    /// The tick of the request.
    pub tick: u64,
    /// Who is removed.
    pub player: PlayerId,
    /// Why (sent to the client).
    pub reason: String,
}

/// Outputs collected between two `advance` calls; bounded.
#[derive(Debug)]
pub(crate) struct Outputs {
    pub(crate) events: Vec<Event>,
    pub(crate) events_dropped: u64,
    max_events: usize,
    /// Payload bytes of `events`.
    pub(crate) event_bytes: usize,
    max_event_bytes: usize,
    /// Kick requests not yet applied by the host.
    pub(crate) kicks: Vec<Kick>,
}

impl Outputs {
    pub(crate) fn new(max_events: usize, max_event_bytes: usize) -> Self {
        Self {
            events: Vec::new(),
            events_dropped: 0,
            max_events,
            event_bytes: 0,
            max_event_bytes,
            kicks: Vec::new(),
        }
    }
}

/// Everything a hook may read or produce: simulation time, the RNG, timers,
/// the participants present and the output queues.
///
/// Built by the host for each hook call; a zone never constructs one.
/// (Later layers add fields, such as the replicated world, beside these.)
pub struct Ctx<'a> {
    tick: u64,
    dt: Duration,
    tier: Tier,
    rng: &'a mut ZoneRng,
    timers: &'a mut Timers,
    roster: &'a Roster,
    out: &'a mut Outputs,
    input: Option<InputMeta>,
    facts: &'a mut FactBook,
    world: &'a mut World,
    views: &'a mut ViewRequests,
}

/// The borrowed parts a [`Ctx`] is made of (keeps `Ctx::new` readable).
pub(crate) struct CtxParts<'a> {
    pub(crate) tick: u64,
    pub(crate) dt: Duration,
    pub(crate) tier: Tier,
    pub(crate) rng: &'a mut ZoneRng,
    pub(crate) timers: &'a mut Timers,
    pub(crate) roster: &'a Roster,
    pub(crate) out: &'a mut Outputs,
    pub(crate) input: Option<InputMeta>,
    pub(crate) facts: &'a mut FactBook,
    pub(crate) world: &'a mut World,
    pub(crate) views: &'a mut ViewRequests,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(p: CtxParts<'a>) -> Self {
        p.timers.set_current(p.tick);
        Self {
            tick: p.tick,
            dt: p.dt,
            tier: p.tier,
            rng: p.rng,
            timers: p.timers,
            roster: p.roster,
            out: p.out,
            input: p.input,
            facts: p.facts,
            world: p.world,
            views: p.views,
        }
    }

    /// The current tick: inside a tick, its number (the first tick is 1);
    /// outside (create, join hooks), the last tick run (0 before any).
    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// Simulation time at the end of the current tick: `tick * dt`.
    pub fn time(&self) -> Duration {
        let nanos = self.dt.as_nanos().saturating_mul(u128::from(self.tick));
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// The fixed step length, `1s / tick_hz` rounded down to whole nanoseconds.
    pub fn dt(&self) -> Duration {
        self.dt
    }

    /// The zone's deterministic RNG (use `zonekeep_core::rand_core::RngCore`).
    pub fn rng(&mut self) -> &mut ZoneRng {
        self.rng
    }

    /// The zone's timers.
    pub fn timers(&mut self) -> &mut Timers {
        self.timers
    }

    /// Participants present (connected or within grace), in id order.
    pub fn players(&self) -> impl Iterator<Item = &PlayerInfo> + '_ {
        self.roster.values()
    }

    /// One participant, if present.
    pub fn player(&self, id: PlayerId) -> Option<&PlayerInfo> {
        self.roster.get(&id)
    }

    /// The zone's current activity tier.
    pub fn tier(&self) -> Tier {
        self.tier
    }

    /// During `on_input`: the sequence number and view tick of the input being applied.
    pub fn input_meta(&self) -> Option<InputMeta> {
        self.input
    }

    /// Queue an event for clients. The queue holds at most
    /// [`ZoneConfig::max_pending_events`](crate::ZoneConfig::max_pending_events) events and
    /// [`ZoneConfig::max_pending_event_bytes`](crate::ZoneConfig::max_pending_event_bytes) of
    /// payload not yet sent; beyond that, or for a payload longer than the protocol carries
    /// ([`MAX_EVENT_PAYLOAD`](zonekeep_protocol::limits::MAX_EVENT_PAYLOAD)), the new event is
    /// dropped and counted in [`AdvanceReport::events_dropped`](crate::AdvanceReport::events_dropped).
    /// A patch carries at most [`MAX_FRAME_EVENT_BYTES`](crate::replicate::MAX_FRAME_EVENT_BYTES)
    /// and [`MAX_EVENTS`](zonekeep_protocol::limits::MAX_EVENTS) events to each participant;
    /// the rest wait, in order, for the next patch.
    pub fn emit_event(&mut self, target: EventTarget, topic: u16, payload: Vec<u8>) {
        let bytes = self.out.event_bytes.saturating_add(payload.len());
        if self.out.events.len() >= self.out.max_events
            || bytes > self.out.max_event_bytes
            || payload.len() > zonekeep_protocol::limits::MAX_EVENT_PAYLOAD
        {
            self.out.events_dropped = self.out.events_dropped.saturating_add(1);
            return;
        }
        self.out.event_bytes = bytes;
        self.out.events.push(Event {
            tick: self.tick,
            target,
            topic,
            payload,
        });
    }

    /// Emit a durable side effect (see [`crate::fact`]). It is committed off
    /// the tick and settled back through
    /// [`Zone::on_fact_settled`](crate::Zone::on_fact_settled). Without a
    /// `key`, the key is `"{zone_id}:{boot_epoch}:{counter}"`; a game key must
    /// be unique among facts in flight. Never blocks: when
    /// [`ZoneConfig::max_facts_in_flight`](crate::ZoneConfig::max_facts_in_flight)
    /// facts are in flight it returns [`FactError::QueueFull`] (counted in
    /// [`AdvanceReport::facts_overflowed`](crate::AdvanceReport::facts_overflowed)); a payload
    /// whose JSON text is longer than
    /// [`ZoneConfig::max_fact_bytes`](crate::ZoneConfig::max_fact_bytes) gets
    /// [`FactError::TooLarge`], and a fact past
    /// [`ZoneConfig::max_facts_per_second`](crate::ZoneConfig::max_facts_per_second) in the
    /// current second of zone time gets [`FactError::RateLimited`] (both counted in
    /// [`AdvanceReport::facts_refused`](crate::AdvanceReport::facts_refused)). A refused fact
    /// is not emitted and never settles: the error is the zone's only answer.
    pub fn emit_fact(
        &mut self,
        kind: &str,
        payload: serde_json::Value,
        principal: Option<&str>,
        key: Option<String>,
    ) -> Result<FactKey, FactError> {
        self.facts.emit(self.tick, kind, payload, principal, key)
    }

    /// The owner epoch this run of the zone started under: the part of a generated fact key
    /// (`"{zone_id}:{boot_epoch}:…"`) that keeps keys of a zone restarted from an older save
    /// from ever meeting keys of the run before.
    pub fn boot_epoch(&self) -> u64 {
        self.facts.boot_epoch()
    }

    /// How many facts are in flight (emitted, not yet settled).
    pub fn facts_in_flight(&self) -> usize {
        self.facts.in_flight_len()
    }

    /// The replicated world: declare entity kinds in [`Zone::create`](crate::Zone::create), then
    /// spawn, move, set fields and despawn; every participant is sent what its view holds.
    pub fn world(&mut self) -> &mut World {
        self.world
    }

    /// The replicated world, read-only.
    pub fn world_ref(&self) -> &World {
        self.world
    }

    /// Say which entity `player` controls (`None`: none). The player's client learns it through
    /// the Delta CONTROL field, the entity is always in its view, and (unless the view is pinned
    /// with [`set_view`](Ctx::set_view)) the view follows it. Ignored for absent participants.
    pub fn set_control(&mut self, player: PlayerId, entity: Option<EntityId>) {
        self.views.update(player, |v| v.control = entity);
    }

    /// Override a participant's view: `radius` (`None`: the zone default) and a fixed centre
    /// `focus` (`None`: follow the controlled entity). Observers use this for their focus area.
    /// Ignored for absent participants.
    pub fn set_view(&mut self, player: PlayerId, radius: Option<f32>, focus: Option<(f32, f32)>) {
        self.views.update(player, |v| {
            v.radius = radius;
            v.focus = focus;
        });
    }

    /// Ask the host to remove `player` after this hook returns. Ignored if the
    /// player is not present or already being kicked (so requests stay bounded
    /// by the number of participants).
    pub fn kick(&mut self, player: PlayerId, reason: String) {
        if !self.roster.contains_key(&player) || self.out.kicks.iter().any(|k| k.player == player) {
            return;
        }
        self.out.kicks.push(Kick {
            tick: self.tick,
            player,
            reason,
        });
    }
}
