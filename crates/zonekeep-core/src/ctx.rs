//! The context a zone's hooks receive, and the outputs it collects.

use std::time::Duration;

use crate::call::{CallBook, CallError};
use crate::character::CharacterBook;
use crate::fact::{FactBook, FactError, FactKey};
use crate::input::InputMeta;
use crate::message::{Mailbox, MessageTarget, SendError};
use crate::player::{Claims, PlayerId, PlayerInfo, Role, Roster};
use crate::rng::ZoneRng;
use crate::tier::Tier;
use crate::timer::Timers;
use crate::transfer::{Ask, TransferError, Transfers, MAX_TRANSFER_CLAIMS};
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
    /// The zone asked for a save (see [`Ctx::save_now`]).
    pub(crate) save_requested: bool,
    /// The listing the zone published last and the host has not taken yet.
    pub(crate) listing: Option<crate::Listing>,
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
            save_requested: false,
            listing: None,
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
    transfers: &'a mut Transfers,
    mail: &'a mut Mailbox,
    characters: &'a mut CharacterBook,
    calls: &'a mut CallBook,
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
    pub(crate) transfers: &'a mut Transfers,
    pub(crate) mail: &'a mut Mailbox,
    pub(crate) characters: &'a mut CharacterBook,
    pub(crate) calls: &'a mut CallBook,
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
            transfers: p.transfers,
            mail: p.mail,
            characters: p.characters,
            calls: p.calls,
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

    /// Ask for an external effect under the zone's own `key` (see [`crate::call`]): the host
    /// journals it, delivers it at least once to its call sink, and the result comes back through
    /// [`Zone::on_call_result`](crate::Zone::on_call_result) on a later tick. A key names one
    /// effect for good: the journal answers a key used before with the same function and
    /// arguments with the same result, and with other ones with the error code
    /// [`KEY_REUSED`](crate::KEY_REUSED). Never blocks: past
    /// [`ZoneConfig::max_calls_in_flight`](crate::ZoneConfig::max_calls_in_flight) calls in
    /// flight it returns [`CallError::QueueFull`] (counted in
    /// [`AdvanceReport::calls_overflowed`](crate::AdvanceReport::calls_overflowed)). A refused
    /// call never gets a result.
    pub fn call(
        &mut self,
        key: &str,
        function: &str,
        args: serde_json::Value,
    ) -> Result<(), CallError> {
        self.calls.call(self.tick, key, function, args)
    }

    /// How many calls are in flight (made, result not yet delivered).
    pub fn calls_in_flight(&self) -> usize {
        self.calls.in_flight_len()
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

    /// `player`'s character: the state it brought into this zone and takes along when it leaves
    /// (see [`crate::character`]), as the zone last set it. `None` for an observer, a player of
    /// a kind without characters ([`ZoneConfig::characters`](crate::ZoneConfig::characters)),
    /// or one who left.
    pub fn character(&self, player: PlayerId) -> Option<&[u8]> {
        self.characters.get(player)
    }

    /// Replaces `player`'s character. The host writes it at the zone's next save, at once after
    /// [`commit_character`](Ctx::commit_character), and last when the player leaves. Refused for
    /// a player without a character here, or past
    /// [`MAX_CHARACTER_BYTES`](crate::MAX_CHARACTER_BYTES) (the character is then unchanged).
    pub fn set_character(
        &mut self,
        player: PlayerId,
        data: Vec<u8>,
    ) -> Result<(), crate::CharacterError> {
        self.characters.set(player, data)
    }

    /// Asks the host to write `player`'s character now, at the end of this call, rather than at
    /// the zone's next save: for a change the player must never lose (a purchase, a level).
    pub fn commit_character(&mut self, player: PlayerId) -> Result<(), crate::CharacterError> {
        self.characters.ask_commit(player)
    }

    /// Asks the host to save the zone at the end of this tick instead of at its next periodic
    /// save: for a durable change (a purchase, a level, a score) that must not wait for the
    /// save interval, while movement and other volatile state are saved on the periodic cadence
    /// (`--save-every`, per kind with `save_every_by_kind`). Several requests make one save; the
    /// host takes asked-for saves at most every 100 ms, so a later one waits, never lost. A host
    /// that keeps nothing ignores it.
    pub fn save_now(&mut self) {
        self.out.save_requested = true;
    }

    /// Publishes whether the zone takes players now and what it says of itself, for a lobby
    /// listing it (docs/LOBBY.md): a match closes itself when it starts, a room names its map.
    /// The newest call wins; the host reports it within about a second. Refused (and nothing
    /// published) when `metadata` is not a JSON object or is over
    /// [`MAX_LISTING_BYTES`](crate::MAX_LISTING_BYTES) of JSON.
    pub fn publish_listing(
        &mut self,
        open: bool,
        metadata: serde_json::Value,
    ) -> Result<(), crate::ListingError> {
        self.out.listing = Some(crate::Listing::new(open, metadata)?);
        Ok(())
    }

    /// The zone's own id.
    pub fn zone_id(&self) -> &str {
        self.mail.zone_id()
    }

    /// Move `player` to zone `target_zone`, handing it `claims` (see [`crate::transfer`]). After
    /// this hook returns, the host calls [`Zone::transfer_out`](crate::Zone::transfer_out) for the
    /// player's state and queues the request for the server; from then on the player is moving
    /// (inputs refused, no frames) until the server reports the outcome. Refused for an unknown
    /// participant, an observer, a player already moving, this zone's own id, an id that is not
    /// 1..=128 bytes, claims over 16 KiB as JSON, or past 64 transfers in one tick.
    pub fn transfer(
        &mut self,
        player: PlayerId,
        target_zone: &str,
        claims: Claims,
    ) -> Result<(), TransferError> {
        if !crate::message::valid_name(target_zone) {
            return Err(TransferError::BadZoneId);
        }
        if target_zone == self.mail.zone_id() {
            return Err(TransferError::SameZone);
        }
        match self.roster.get(&player) {
            None => return Err(TransferError::UnknownPlayer),
            Some(p) if p.role == Role::Observer => return Err(TransferError::Observer),
            Some(_) => {}
        }
        if self.transfers.busy(player) || self.out.kicks.iter().any(|k| k.player == player) {
            return Err(TransferError::AlreadyMoving);
        }
        // A map of JSON values always serializes.
        let json_len = serde_json::to_string(&claims).map_or(usize::MAX, |s| s.len());
        if json_len > MAX_TRANSFER_CLAIMS {
            return Err(TransferError::TooLarge);
        }
        if !self.transfers.count_ask(self.tick) {
            return Err(TransferError::TooMany);
        }
        self.transfers.asked.push(Ask {
            player,
            target: target_zone.to_owned(),
            claims,
            tick: self.tick,
        });
        Ok(())
    }

    /// Whether `player` is moving to another zone (asked for, or waiting for the outcome).
    pub fn is_moving(&self, player: PlayerId) -> bool {
        self.transfers.busy(player)
    }

    /// Send a message to a zone or a group (see [`crate::message`]). Never waits: the server
    /// carries it after the hook returns. Refused for a target name that is not 1..=128 bytes,
    /// the reserved topic `0xFFFF`, a payload over 16 KiB, or past 256 sends in one tick (or
    /// 4096 waiting for the server); refusals are counted in
    /// [`AdvanceReport::messages_refused`](crate::AdvanceReport::messages_refused).
    pub fn send(&mut self, to: MessageTarget, topic: u16, payload: &[u8]) -> Result<(), SendError> {
        self.mail.send(self.tick, to, topic, payload, false)
    }

    /// Send a message to this zone's parent ([`set_parent`](Ctx::set_parent)); the parent
    /// receives it in [`Zone::on_child`](crate::Zone::on_child). [`SendError::NoParent`] without
    /// one; otherwise as [`send`](Ctx::send).
    pub fn to_parent(&mut self, topic: u16, payload: &[u8]) -> Result<(), SendError> {
        let Some(parent) = self.mail.parent.clone() else {
            self.mail.sends_refused = self.mail.sends_refused.saturating_add(1);
            return Err(SendError::NoParent);
        };
        self.mail
            .send(self.tick, MessageTarget::Zone(parent), topic, payload, true)
    }

    /// Join a group: messages sent to it reach this zone. Membership is zone state the host
    /// keeps and saves; the server learns changes through
    /// [`ZoneHost::group_changes`](crate::ZoneHost::group_changes). Joining a group it is in
    /// changes nothing. [`SendError::BadTarget`] for a name that is not 1..=128 bytes,
    /// [`SendError::TooLarge`] past 32 groups.
    pub fn join_group(&mut self, group: &str) -> Result<(), SendError> {
        self.mail.join_group(group)
    }

    /// Leave a group (nothing happens when the zone is not in it).
    pub fn leave_group(&mut self, group: &str) {
        self.mail.groups.remove(group);
    }

    /// The groups this zone is in, in name order.
    pub fn groups(&self) -> impl Iterator<Item = &str> {
        self.mail.groups.iter().map(String::as_str)
    }

    /// Name this zone's parent (`None`: it has none), saved with the zone. The host tells the
    /// parent of every tier change, and [`to_parent`](Ctx::to_parent) reaches it. A name that is
    /// not 1..=128 bytes (or this zone's own id) is ignored.
    pub fn set_parent(&mut self, parent: Option<&str>) {
        match parent {
            None => self.mail.parent = None,
            Some(p) if crate::message::valid_name(p) && p != self.mail.zone_id() => {
                self.mail.parent = Some(p.to_owned());
            }
            Some(_) => {}
        }
    }

    /// This zone's parent, if it named one.
    pub fn parent(&self) -> Option<&str> {
        self.mail.parent.as_deref()
    }
}
