//! The relay's side: a replica of the zone's world and a replicator over it, building each
//! attached client's frame from the origin's link messages.

use std::collections::BTreeMap;

use super::link::{LinkPatch, LinkWorld, PlayerRecord, Told};
use super::RelayError;
use crate::feed::Replica;
use crate::host::{FrameQueue, Frames, HeldEvents, ObserverRate, Plan, RoutedEvents};
use crate::player::PlayerId;
use crate::replicate::{
    BuildStats, FrameInput, ReplicationConfig, Replicator, ResumeOutcome, SubscriberConfig,
    SubscriberId,
};
use crate::world::{EntityId, World};
use zonekeep_protocol::error::DecodeError;
use zonekeep_protocol::ResumeFrom;

/// Where a participant attached to the relay stands with the replicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seat {
    /// Its client is attached; it is subscribed at the first patch that lists it.
    Waiting,
    /// Subscribed: it gets a frame each patch that lists it.
    Live,
    /// Subscribed and parked because the last patch did not list it (say it is moving to
    /// another zone): the next patch that lists it continues from what its client holds, as the
    /// origin's frames do.
    Held,
    /// Its client went away; what it was sent is kept for a resume
    /// ([`RelayZone::reattach`]).
    Away,
}

/// One participant attached to the relay.
#[derive(Debug, Clone, Copy)]
struct Attached {
    seat: Seat,
    /// The view its subscription was last given.
    view: Option<SubscriberConfig>,
    /// Frames as States on datagrams, asked for before it was subscribed.
    datagrams: Option<Option<usize>>,
}

/// A zone as a relay serves it (see the [module docs](super)): the replica of its world, the
/// replicator over it, what its link said of each relayed participant, and the participants
/// whose clients are attached here.
///
/// Sans-I/O like the rest of the core: a driver hands in each link message
/// ([`apply`](Self::apply)) and client events ([`attach`](Self::attach),
/// [`detach`](Self::detach), [`reattach`](Self::reattach), [`ack_state`](Self::ack_state), ...),
/// and takes the frames out ([`drain_frames`](Self::drain_frames)).
#[derive(Debug)]
pub struct RelayZone {
    replica: Option<Replica>,
    /// The zone's replicator settings, from its link's last image.
    config: Option<ReplicationConfig>,
    /// The zone's observer rate, from its link's last image.
    rate: ObserverRate,
    /// Events addressed to observers that sat patches out, until their next frames.
    held: HeldEvents,
    replicator: Replicator,
    max_entities: usize,
    max_players: usize,
    /// The tick of the last message applied (0 before the first).
    tick: u64,
    /// What the link said of each participant it relays through here.
    told: BTreeMap<PlayerId, Told>,
    attached: BTreeMap<PlayerId, Attached>,
    frames: FrameQueue,
    last_build: BuildStats,
}

impl RelayZone {
    /// A relay for a zone, holding at most `max_entities` entities and `max_players` relayed
    /// participants whatever its link sends. Its replicator takes the zone's settings from the
    /// link's image.
    pub fn new(max_entities: usize, max_players: usize) -> Self {
        Self {
            replica: None,
            config: None,
            rate: ObserverRate::default(),
            held: HeldEvents::default(),
            replicator: Replicator::new(ReplicationConfig::default()),
            max_entities,
            max_players,
            tick: 0,
            told: BTreeMap::new(),
            attached: BTreeMap::new(),
            frames: FrameQueue::default(),
            last_build: BuildStats::default(),
        }
    }

    /// The tick of the last message applied (0 before the first).
    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// The replica of the zone's world, once the link's image came.
    pub fn world(&self) -> Option<&World> {
        self.replica.as_ref().map(Replica::world)
    }

    /// Clients attached (live, waiting or away).
    pub fn attached(&self) -> usize {
        self.attached.len()
    }

    /// Counters of the last build.
    pub fn last_build_stats(&self) -> BuildStats {
        self.last_build
    }

    /// Applies one link message and builds the frames of the attached participants it lists,
    /// ready for [`drain_frames`](Self::drain_frames). A message refused (malformed, out of
    /// turn, not fitting the replica) changes nothing but dropping the last message's frames;
    /// after [`RelayError::Feed`], [`RelayError::Gap`] or [`RelayError::NoImage`] the link must
    /// start over from an image.
    pub fn apply(&mut self, message: &[u8]) -> Result<(), RelayError> {
        self.frames.clear();
        let patch = LinkPatch::read(message)?;
        if patch.tick <= self.tick {
            return Err(RelayError::Stale {
                at: self.tick,
                got: patch.tick,
            });
        }
        let image = matches!(patch.world, LinkWorld::Image { .. });
        if !image && self.replica.is_none() {
            return Err(RelayError::NoImage);
        }
        if !image && patch.since != self.tick {
            return Err(RelayError::Gap {
                at: self.tick,
                since: patch.since,
            });
        }
        self.check_records(&patch.records, image)?;
        // Observers' turns count from the origin's patch before this one.
        let before = match patch.world {
            LinkWorld::Image { before, .. } => before,
            LinkWorld::Delta(_) => patch.since,
        };
        match patch.world {
            LinkWorld::Image {
                config,
                rate,
                image,
                ..
            } => {
                self.rate = rate;
                let mut replica = Replica::from_image(image)?;
                replica.set_max_entities(self.max_entities);
                self.replica = Some(replica);
                if self.config != Some(config) {
                    // Another zone's settings (the zone restarted with others): every client
                    // starts over, as a new one.
                    self.config = Some(config);
                    self.replicator = Replicator::new(config);
                    self.held = HeldEvents::default();
                    for a in self.attached.values_mut() {
                        a.seat = match a.seat {
                            Seat::Away => Seat::Away,
                            _ => Seat::Waiting,
                        };
                        a.view = None;
                    }
                }
                // Every subscriber's sent state refers to the old world's ids and version.
                for (id, a) in &self.attached {
                    if matches!(a.seat, Seat::Live | Seat::Held) {
                        let _ = self.replicator.reset_subscriber(SubscriberId(id.0));
                    }
                }
                self.told.clear();
            }
            LinkWorld::Delta(delta) => {
                self.replica
                    .as_mut()
                    .ok_or(RelayError::NoImage)?
                    .apply(delta)?;
            }
        }
        for r in &patch.records {
            if r.gone {
                self.told.remove(&r.player);
                continue;
            }
            let before = self.told.get(&r.player);
            let (Some(ack), Some(view)) = (
                r.ack.or(before.map(|t| t.ack)),
                r.view.or(before.map(|t| t.view)),
            ) else {
                continue;
            };
            self.told.insert(
                r.player,
                Told {
                    // A relay holds one link's participants.
                    link: 0,
                    listed: r.listed,
                    ack,
                    view,
                    observer: r.observer,
                },
            );
        }
        self.tick = patch.tick;
        self.seat_listed();
        self.build(&patch, before)
    }

    /// Refuses records that do not fit what the relay holds: a first record without its ack
    /// and view, or more participants than the relay takes.
    fn check_records(&self, records: &[PlayerRecord], image: bool) -> Result<(), RelayError> {
        let mut new = 0usize;
        for r in records {
            if r.gone {
                continue;
            }
            if image || !self.told.contains_key(&r.player) {
                if r.ack.is_none() || r.view.is_none() {
                    return Err(RelayError::Decode(DecodeError::Invalid(
                        "a relay participant's first record without its ack and view",
                    )));
                }
                new += 1;
            }
        }
        let held = if image { 0 } else { self.told.len() };
        if held.saturating_add(new) > self.max_players {
            return Err(RelayError::Players {
                cap: self.max_players,
            });
        }
        Ok(())
    }

    /// Brings every attached participant's subscription in line with what the link said:
    /// subscribe the newly listed, park the live ones not listed, continue the held ones listed
    /// again, and give each its view.
    fn seat_listed(&mut self) {
        for (id, a) in self.attached.iter_mut() {
            let told = self.told.get(id).filter(|t| t.listed);
            let sub = SubscriberId(id.0);
            match (a.seat, told) {
                (Seat::Waiting, Some(t)) => {
                    if self.replicator.add_subscriber(sub, t.view).is_ok() {
                        a.seat = Seat::Live;
                        if let Some(max_frame) = a.datagrams.take() {
                            let _ = self.replicator.acknowledge_states(sub, max_frame);
                        }
                    }
                }
                (Seat::Live, Some(t)) => {
                    if a.view != Some(t.view) {
                        let _ = self.replicator.update_subscriber(sub, t.view);
                    }
                }
                (Seat::Live, None) => {
                    let _ = self.replicator.park_subscriber(sub);
                    self.held.forget(*id);
                    a.seat = Seat::Held;
                }
                (Seat::Held, Some(t)) => {
                    if self.replicator.resume_subscriber(sub, t.view).is_ok() {
                        a.seat = Seat::Live;
                    }
                }
                (Seat::Waiting | Seat::Held | Seat::Away, _) => {}
            }
            if let Some(t) = told {
                a.view = Some(t.view);
            }
        }
    }

    /// Builds the frames of the attached participants the patch lists, as their host would
    /// have: an observer whose turn it is not sits the patch out, the events addressed to it
    /// waiting for its next frame (`before` is the tick of the origin's patch before).
    fn build(&mut self, patch: &LinkPatch<'_>, before: u64) -> Result<(), RelayError> {
        let Some(replica) = self.replica.as_ref() else {
            return Err(RelayError::NoImage);
        };
        let items = || patch.events.iter().map(|e| (e.to, e.topic, e.payload));
        let rate = self.rate;
        let staggered = rate.staggered();
        if staggered {
            self.held.begin(items());
        }
        let tick = patch.tick;
        let mut sat_out = Vec::new();
        let (built, rest) = {
            let routed = RoutedEvents::new(items());
            let plan = match staggered {
                true => self.held.plan(&rate, before, tick),
                false => Plan::default(),
            };
            let for_player =
                |id: PlayerId| plan.events(id).unwrap_or_else(|| routed.for_player(id));
            let told = &self.told;
            let due = |sub: SubscriberId| {
                let id = PlayerId(sub.0);
                let observer = || told.get(&id).is_some_and(|t| t.observer);
                if !staggered || rate.turn(before, tick, id) || plan.early(id) || !observer() {
                    return true;
                }
                sat_out.push(id);
                false
            };
            let inputs = |sub: SubscriberId| {
                let id = PlayerId(sub.0);
                FrameInput {
                    ack: told.get(&id).map_or(0, |t| t.ack),
                    events: for_player(id),
                }
            };
            let queue = &mut self.frames;
            let sink = |sub: SubscriberId, head, bytes: &[u8]| {
                queue.push_built(tick, for_player(PlayerId(sub.0)), sub, head, bytes);
            };
            let built = self.replicator.build_due(
                replica.world(),
                tick,
                None::<fn(SubscriberId, EntityId) -> bool>,
                due,
                inputs,
                sink,
            );
            (built, plan.into_rest())
        };
        if staggered {
            let frames = &self.frames;
            self.held.end(&sat_out, rest, |id| frames.has(id));
        }
        match built {
            Ok(stats) => {
                self.last_build = stats;
                Ok(())
            }
            Err(e) => {
                self.frames.clear();
                Err(e.into())
            }
        }
    }

    /// The frames of the last message applied, in participant id order (see
    /// [`ZoneHost::drain_frames`](crate::ZoneHost::drain_frames)); each must reach its client or
    /// the client be resynced.
    pub fn drain_frames(&mut self) -> Frames<'_> {
        self.frames.drain()
    }

    /// A client of participant `id` attached: it is subscribed, with a BASELINE first, at the
    /// next message that lists it. A participant attached again starts over.
    pub fn attach(&mut self, id: PlayerId) {
        let _ = self.replicator.remove_subscriber(SubscriberId(id.0));
        self.held.forget(id);
        self.attached.insert(
            id,
            Attached {
                seat: Seat::Waiting,
                view: None,
                datagrams: None,
            },
        );
    }

    /// The client of `id` went away: no frames, and what it was sent is kept until it
    /// [reattaches](Self::reattach) or is [removed](Self::remove).
    pub fn detach(&mut self, id: PlayerId) {
        let Some(a) = self.attached.get_mut(&id) else {
            return;
        };
        if a.seat == Seat::Live {
            let _ = self.replicator.park_subscriber(SubscriberId(id.0));
        }
        self.held.forget(id);
        a.seat = Seat::Away;
    }

    /// The client of `id` is back (PROTOCOL.md §4.1.1): when `from` names what it was last sent,
    /// its frames continue as Deltas ([`ResumeOutcome::Delta`]); otherwise a BASELINE. Unknown
    /// or not away: `None`.
    pub fn reattach(&mut self, id: PlayerId, from: Option<&ResumeFrom>) -> Option<ResumeOutcome> {
        let a = self.attached.get_mut(&id)?;
        if a.seat != Seat::Away {
            return None;
        }
        let sub = SubscriberId(id.0);
        let outcome = a
            .view
            .and_then(|view| self.replicator.unpark_subscriber(sub, view, from).ok());
        match outcome {
            Some(outcome) => {
                a.seat = Seat::Live;
                Some(outcome)
            }
            None => {
                // Never subscribed: it starts as a new client would.
                a.seat = Seat::Waiting;
                Some(ResumeOutcome::Baseline)
            }
        }
    }

    /// The participant left (or its client will not come back): forget it.
    pub fn remove(&mut self, id: PlayerId) {
        let _ = self.replicator.remove_subscriber(SubscriberId(id.0));
        self.held.forget(id);
        self.attached.remove(&id);
    }

    /// The participant's next frame is a BASELINE (see [`ZoneHost::resync`](crate::ZoneHost::resync)).
    pub fn resync(&mut self, id: PlayerId) {
        let _ = self.replicator.reset_subscriber(SubscriberId(id.0));
    }

    /// The participant's client takes state in datagrams (see
    /// [`ZoneHost::use_datagrams`](crate::ZoneHost::use_datagrams)).
    pub fn use_datagrams(&mut self, id: PlayerId, max_frame: Option<usize>) {
        let Some(a) = self.attached.get_mut(&id) else {
            return;
        };
        match a.seat {
            Seat::Waiting => a.datagrams = Some(max_frame),
            _ => {
                let _ = self
                    .replicator
                    .acknowledge_states(SubscriberId(id.0), max_frame);
            }
        }
    }

    /// The participant's client applied the State of `tick` (see
    /// [`ZoneHost::ack_state`](crate::ZoneHost::ack_state)).
    pub fn ack_state(&mut self, id: PlayerId, tick: u64) {
        let _ = self.replicator.ack_state(SubscriberId(id.0), tick);
    }

    /// The count and hash of the participant's known set as of its last frame (what a
    /// KnownSetCheck carries).
    pub fn known_set_check(&self, id: PlayerId) -> Option<(u32, u32)> {
        self.replicator.known_check(SubscriberId(id.0)).ok()
    }
}
