//! The replication side of [`ZoneHost`]: subscribers follow the roster, and once a patch tick ran,
//! [`drain_frames`](ZoneHost::drain_frames) builds every connected participant's Delta once into a
//! reused buffer and hands them out.

use std::collections::BTreeMap;

use zonekeep_protocol::schema::Schema;

use super::observers::{ObserverRate, Plan};
use super::slot::EventsFor;
use super::ZoneHost;
use crate::ctx::{Event, EventTarget};
use crate::player::{PlayerId, Role};
use crate::replicate::{
    BuildStats, FrameHead, ReplicateError, ResumeOutcome, SubscriberId, MAX_FRAME_EVENT_BYTES,
};
use crate::view::subscriber_config;
use crate::world::World;
use zonekeep_protocol::limits::MAX_EVENTS;
use zonekeep_protocol::ResumeFrom;

/// One participant's Delta for a patch, taken with [`drain_frames`](ZoneHost::drain_frames).
///
/// The header facts a host acts on travel beside the bytes, so no layer parses back a header
/// the replicator wrote. `bytes` borrows the host's frame buffer, which the next build reuses:
/// a driver copies or writes them before it calls the host again, and a patch costs no
/// allocation per frame inside the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Who the frame is for.
    pub player: PlayerId,
    /// The input ack in its header (the last input sequence the zone processed; 0 = none).
    pub ack: u32,
    /// It says nothing new: not a BASELINE, no CONTROL, no events, no entity changes. A host may
    /// skip sending it when the ack is the one it last sent (keeping an occasional keep-alive).
    pub quiet: bool,
    /// The encoded Delta message (PROTOCOL.md §5.5), ready to send; a State (§5.8) for a
    /// participant on datagrams ([`ZoneHost::use_datagrams`]).
    pub bytes: &'a [u8],
    /// `Some(base)` when `bytes` is a State: the acknowledged tick it applies to (0 = none).
    pub base: Option<u64>,
    /// For a participant on datagrams: an Events message (§5.9) to send reliably before the
    /// State, or empty. Other participants' events are inside their Delta.
    pub events: &'a [u8],
}

/// Where a frame's bytes end in [`FrameQueue::bytes`].
#[derive(Debug, Clone, Copy)]
struct Queued {
    player: PlayerId,
    head: FrameHead,
    /// Bytes of the Events message in front of the frame (datagram participants only).
    events: usize,
    end: usize,
}

/// The frames of the last build, back to back in one buffer that every build reuses. A zone's
/// host and a relay ([`crate::relay::RelayZone`]) queue and hand out frames the same way.
#[derive(Debug, Default)]
pub(crate) struct FrameQueue {
    bytes: Vec<u8>,
    items: Vec<Queued>,
}

impl FrameQueue {
    pub(crate) fn clear(&mut self) {
        self.items.clear();
        self.bytes.clear();
    }

    /// Queues the frame the replicator wrote for `sub`. A State may be lost: its participant's
    /// `events` go before it in an Events message, which the host sends on its reliable path.
    pub(crate) fn push_built(
        &mut self,
        tick: u64,
        events: &[(u16, &[u8])],
        sub: SubscriberId,
        head: FrameHead,
        bytes: &[u8],
    ) {
        let player = PlayerId(sub.0);
        let events = match head.base {
            Some(_) => {
                let start = self.bytes.len();
                zonekeep_protocol::messages::write_events(&mut self.bytes, tick, events);
                self.bytes.len() - start
            }
            None => 0,
        };
        self.bytes.extend_from_slice(bytes);
        self.items.push(Queued {
            player,
            head,
            events,
            end: self.bytes.len(),
        });
    }

    /// Whether a frame for `id` is queued (frames are queued in participant id order).
    pub(crate) fn has(&self, id: PlayerId) -> bool {
        self.items
            .binary_search_by_key(&id.0, |q| q.player.0)
            .is_ok()
    }

    /// Hands the queued frames out, in the order they were queued.
    pub(crate) fn drain(&mut self) -> Frames<'_> {
        Frames {
            bytes: &self.bytes,
            items: self.items.drain(..),
            at: 0,
        }
    }
}

/// The frames of one patch, in participant id order; see [`ZoneHost::drain_frames`].
/// Frames not iterated are discarded when it is dropped (the replicator counts them as sent).
#[derive(Debug)]
pub struct Frames<'a> {
    bytes: &'a [u8],
    items: std::vec::Drain<'a, Queued>,
    at: usize,
}

impl<'a> Iterator for Frames<'a> {
    type Item = Frame<'a>;

    fn next(&mut self) -> Option<Frame<'a>> {
        let q = self.items.next()?;
        let split = self.at + q.events;
        let events = self.bytes.get(self.at..split).unwrap_or_default();
        let bytes = self.bytes.get(split..q.end).unwrap_or_default();
        self.at = q.end;
        Some(Frame {
            player: q.player,
            ack: q.head.ack,
            quiet: q.head.quiet,
            bytes,
            base: q.head.base,
            events,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.items.size_hint()
    }
}

impl ExactSizeIterator for Frames<'_> {}

/// A recording hashes the bytes of one participant's frame in this many per patch, by turns.
const FRAME_BYTES_SAMPLE: u64 = 16;

impl FrameQueue {
    /// How many frames, their bytes in total, and a hash of each one's recipient, header facts
    /// and length, and of the bytes of the frames of participants whose id + `tick` is a multiple
    /// of [`FRAME_BYTES_SAMPLE`]: every participant's bytes are checked every 16 patches, at a
    /// sixteenth of the cost of reading every frame (a crowded broadcast patch is hundreds of
    /// kilobytes, most of it one shared body repeated), while a frame that grows, shrinks, goes
    /// to someone else or acknowledges another input shows at once.
    fn digest(&self, tick: u64) -> crate::recording::Record {
        let mut h = crate::hash::WordHasher::new(tick);
        let mut at = 0;
        for q in &self.items {
            let bytes = self.bytes.get(at..q.end).unwrap_or_default();
            h.pair(q.player.0, q.head.ack);
            h.pair(u32::from(q.head.quiet), bytes.len() as u32);
            if (u64::from(q.player.0) + tick) % FRAME_BYTES_SAMPLE == 0 {
                h.bytes(bytes);
            }
            at = q.end;
        }
        crate::recording::Record::Frames {
            count: u32::try_from(self.items.len()).unwrap_or(u32::MAX),
            bytes: self.bytes.len() as u64,
            hash: h.finish(),
        }
    }
}

impl ZoneHost {
    /// Record the digest of the frames about to be handed out, when recording.
    fn tap_frames(&mut self) {
        if self.recording() {
            let digest = self.frames.digest(self.core.tick);
            self.tap_effect(digest);
        }
    }

    /// The entity schema clients decode with (what Welcome carries).
    pub fn schema(&self) -> Schema {
        self.core.world.schema()
    }

    /// The zone kind's client contract ([`crate::Zone::contract`]): with [`Self::schema`],
    /// what `zonekeep codegen` writes typed client code from.
    pub fn contract(&self) -> zonekeep_protocol::contract::Contract {
        self.zone.contract()
    }

    /// The replicated world.
    pub fn world(&self) -> &World {
        &self.core.world
    }

    /// Counters of the last frame build.
    pub fn last_build_stats(&self) -> BuildStats {
        self.last_build
    }

    /// The participant's next frame is a BASELINE (full state), e.g. after its client
    /// reconnected or lost track. Unknown or dropped participants are ignored.
    pub fn resync(&mut self, id: PlayerId) {
        self.tap_call(|| crate::recording::Record::Resync(id));
        let _ = self.replicator.reset_subscriber(SubscriberId(id.0));
    }

    /// The participant's client takes state in datagrams (a WebTransport session): from its next
    /// frame on, each is a State against the newest state it acknowledged ([`Self::ack_state`]),
    /// at most `max_frame` bytes where its budget allows, and its events come apart in an Events
    /// message (see [`Frame`]). Its next frame is a BASELINE. Unknown or dropped participants are
    /// ignored; a later [`handle_rejoin`](ZoneHost::handle_rejoin) returns it to Deltas.
    pub fn use_datagrams(&mut self, id: PlayerId, max_frame: Option<usize>) {
        self.tap_call(|| crate::recording::Record::Datagrams {
            player: id,
            max_frame: max_frame.map_or(0, |m| u32::try_from(m).unwrap_or(u32::MAX)),
        });
        let _ = self
            .replicator
            .acknowledge_states(SubscriberId(id.0), max_frame);
    }

    /// The participant's client applied the State of `tick` (PROTOCOL.md §4.5): its next State
    /// may be written against it. Stale or unknown acknowledgements are ignored.
    pub fn ack_state(&mut self, id: PlayerId, tick: u64) {
        self.tap_call(|| crate::recording::Record::AckState { player: id, tick });
        let _ = self.replicator.ack_state(SubscriberId(id.0), tick);
    }

    /// The count and hash of the participant's known set as of its last frame (what a
    /// KnownSetCheck carries); `None` for an unknown or unsubscribed participant.
    pub fn known_set_check(&self, id: PlayerId) -> Option<(u32, u32)> {
        self.replicator.known_check(SubscriberId(id.0)).ok()
    }

    /// [`known_set_check`](Self::known_set_check) for each of `ids`, in order, hashing each
    /// known set that participants share once (everyone in a small arena holds the same).
    pub fn known_set_checks<'a>(
        &'a self,
        ids: &'a [PlayerId],
    ) -> impl Iterator<Item = (PlayerId, Option<(u32, u32)>)> + 'a {
        let checks = self
            .replicator
            .known_checks(ids.iter().map(|id| SubscriberId(id.0)));
        ids.iter().copied().zip(checks.map(Result::ok))
    }

    /// The patch: when a patch tick ran since the last call, build every connected
    /// participant's Delta for the current tick and hand them out (see [`Frame`]); otherwise
    /// nothing. An observer gets one on its turns only, when the zone serves observers at a
    /// lower rate ([`ZoneConfig::observer_patch_every`](crate::ZoneConfig::observer_patch_every)).
    /// Call it after each [`advance`](ZoneHost::advance) whose report lists a patch tick; a
    /// driver that never replicates never calls it and pays nothing for replication (its events
    /// stay for [`drain_events`](ZoneHost::drain_events)).
    ///
    /// Each Delta is a diff against the previous one built for its participant, so every
    /// frame handed out must reach the client (or the client be resynced). An error is a
    /// broken invariant: the participant it hit starts over from a BASELINE, the rest of that
    /// patch is not built, and a host should drop its connections.
    pub fn drain_frames(&mut self) -> Result<Frames<'_>, ReplicateError> {
        self.tap_call(|| crate::recording::Record::DrainFrames);
        self.frames.clear();
        self.relays.out.clear();
        if std::mem::take(&mut self.patch_due) {
            let mark = self.stage_build_start();
            let built = self.build_frames();
            self.stage_build_done(mark);
            if let Err(e) = built {
                self.frames.clear();
                self.tap_frames();
                return Err(e);
            }
        }
        self.tap_frames();
        Ok(self.frames.drain())
    }

    /// Build every connected participant's Delta for the current tick into the (empty) frame queue.
    /// Each carries the participant's input ack, its control entity when that changed, the
    /// events addressed to it since the last build, and the changes in its view (a BASELINE
    /// first). An observer whose turn it is not ([`ZoneConfig::observer_patch_every`]) sits the
    /// patch out; the events addressed to it wait for its next frame. Consumes the queued
    /// events.
    ///
    /// [`ZoneConfig::observer_patch_every`]: crate::ZoneConfig::observer_patch_every
    pub(super) fn build_frames(&mut self) -> Result<BuildStats, ReplicateError> {
        self.apply_view_requests();
        let mut events = std::mem::take(&mut self.core.out.events);
        // What no frame can carry this patch waits, in order, ahead of later events.
        let carried = events_for_patch(&events);
        let mut spilled = events.split_off(carried);
        let rate = ObserverRate::of(&self.config);
        let staggered = rate.staggered();
        if staggered {
            self.held.begin(event_items(&events));
        }
        let (tick, before) = (self.core.tick, self.last_patch);
        let mut sat_out = Vec::new();
        let (built, rest) = {
            let routed = route_events(&events);
            let plan = match staggered {
                true => self.held.plan(&rate, before, tick),
                false => Plan::default(),
            };
            let for_player =
                |id: PlayerId| plan.events(id).unwrap_or_else(|| routed.for_player(id));
            let events_for: &EventsFor<'_> = &for_player;
            let roster = &self.core.roster;
            let mut due = |sub: SubscriberId| {
                let id = PlayerId(sub.0);
                let observer = || roster.get(&id).is_some_and(|p| p.role == Role::Observer);
                if !staggered || rate.turn(before, tick, id) || plan.early(id) || !observer() {
                    return true;
                }
                sat_out.push(id);
                false
            };
            let queue = &mut self.frames;
            let mut sink = |sub: SubscriberId, head: FrameHead, bytes: &[u8]| {
                queue.push_built(tick, events_for(PlayerId(sub.0)), sub, head, bytes);
            };
            let built = self.zone.build_frames(
                &mut self.replicator,
                &self.core.world,
                tick,
                &mut due,
                events_for,
                &mut sink,
            );
            (built, plan.into_rest())
        };
        if staggered {
            let frames = &self.frames;
            self.held.end(&sat_out, rest, |id| frames.has(id));
        }
        if built.is_ok() {
            self.build_relay_output(&events, before);
            self.last_patch = tick;
        }
        // Hand the emptied queue back so the next events reuse its allocation; the spilled
        // events go first (a zone hook emits nothing while frames are built).
        events.clear();
        let deferred = spilled.len() as u64;
        spilled.append(&mut self.core.out.events);
        events.append(&mut spilled);
        self.core.out.event_bytes = events.iter().map(|e| e.payload.len()).sum();
        self.core.out.events = events;
        let mut stats = built?;
        stats.events_deferred = deferred;
        self.last_build = stats;
        self.record_sent();
        Ok(stats)
    }

    /// For a zone with lag compensation: keep what every subscriber holds after this patch.
    fn record_sent(&mut self) {
        let Some(history) = self.rewind.as_mut() else {
            return;
        };
        let items = &self.frames.items;
        // The frames are in participant id order, like the replicator's subscribers.
        let quiet = |sub: SubscriberId| {
            items
                .binary_search_by_key(&sub.0, |q| q.player.0)
                .ok()
                .and_then(|i| items.get(i))
                .is_some_and(|q| q.head.quiet)
        };
        history.record(
            self.core.tick,
            &self.core.world,
            self.replicator.sent_views(),
            quiet,
        );
    }

    /// Register a (re)connected participant with the replicator; its first frame is a BASELINE.
    pub(super) fn subscribe(&mut self, id: PlayerId) {
        if !self.builds_here(id) {
            return;
        }
        let (Some(info), Some(view)) = (self.core.roster.get(&id), self.core.views.get(id)) else {
            return;
        };
        let cfg = subscriber_config(&self.config.replication, info.role, view);
        let sub = SubscriberId(id.0);
        if self.replicator.add_subscriber(sub, cfg).is_err() {
            // Already subscribed: start it over from a baseline with the current settings.
            let _ = self.replicator.update_subscriber(sub, cfg);
            let _ = self.replicator.reset_subscriber(sub);
        }
    }

    /// Register a rejoining participant again: its parked replication state continues when
    /// `from` matches it, else it starts over from a BASELINE (as it does when nothing was kept,
    /// say in a zone restored from a save).
    pub(super) fn resubscribe(&mut self, id: PlayerId, from: Option<&ResumeFrom>) -> ResumeOutcome {
        if !self.builds_here(id) {
            // Its relay resumes it from what it was sent.
            return ResumeOutcome::Baseline;
        }
        let (Some(info), Some(view)) = (self.core.roster.get(&id), self.core.views.get(id)) else {
            return ResumeOutcome::Baseline;
        };
        let cfg = subscriber_config(&self.config.replication, info.role, view);
        match self
            .replicator
            .unpark_subscriber(SubscriberId(id.0), cfg, from)
        {
            Ok(outcome) => outcome,
            Err(_) => {
                self.subscribe(id);
                ResumeOutcome::Baseline
            }
        }
    }

    /// Push the zone's changed view requests (control, radius, focus) to the replicator.
    fn apply_view_requests(&mut self) {
        let dirty = self.core.views.take_dirty();
        self.relays_changed(&dirty);
        for id in dirty {
            let (Some(info), Some(view)) = (self.core.roster.get(&id), self.core.views.get(id))
            else {
                continue;
            };
            if !info.connected {
                continue;
            }
            let cfg = subscriber_config(&self.config.replication, info.role, view);
            let _ = self.replicator.update_subscriber(SubscriberId(id.0), cfg);
        }
    }
}

/// Bytes an event takes in a frame: its payload, topic and length varints.
fn event_wire_len(e: &Event) -> usize {
    use zonekeep_protocol::wire::varint_len;
    varint_len(u64::from(e.topic)) + varint_len(e.payload.len() as u64) + e.payload.len()
}

/// How many of the queued events (a prefix, so none overtakes another) this patch carries: as
/// many as keep every recipient's frame within [`MAX_EVENTS`] events and
/// [`MAX_FRAME_EVENT_BYTES`] event bytes. At least one event goes whenever any is queued (a
/// single event always fits: its payload was checked against the protocol's limit when it
/// was emitted).
fn events_for_patch(events: &[Event]) -> usize {
    // What every recipient gets (broadcasts) and, above it, each one's own events; the largest
    // of those is what a broadcast must fit beside.
    let (mut all_count, mut all_bytes) = (0usize, 0usize);
    let mut own: BTreeMap<PlayerId, (usize, usize)> = BTreeMap::new();
    let (mut most_count, mut most_bytes) = (0usize, 0usize);
    for (i, e) in events.iter().enumerate() {
        let len = event_wire_len(e);
        let fits = |count: usize, bytes: usize| {
            count < MAX_EVENTS && bytes.saturating_add(len) <= MAX_FRAME_EVENT_BYTES
        };
        match e.target {
            EventTarget::All => {
                if i > 0 && !fits(all_count + most_count, all_bytes + most_bytes) {
                    return i;
                }
                all_count += 1;
                all_bytes += len;
            }
            EventTarget::Player(p) => {
                let mine = own.entry(p).or_default();
                if i > 0 && !fits(all_count + mine.0, all_bytes + mine.1) {
                    return i;
                }
                mine.0 += 1;
                mine.1 += len;
                most_count = most_count.max(mine.0);
                most_bytes = most_bytes.max(mine.1);
            }
        }
    }
    events.len()
}

/// Events split by recipient, keeping emission order within each recipient's list. A relay
/// routes its link's events the same way ([`crate::relay::RelayZone`]).
pub(crate) struct RoutedEvents<'a> {
    all: Vec<(u16, &'a [u8])>,
    /// Participants with events of their own: their full list (broadcast ones included).
    personal: BTreeMap<PlayerId, Vec<(u16, &'a [u8])>>,
}

impl<'a> RoutedEvents<'a> {
    /// The events `id`'s frame carries.
    pub(crate) fn for_player(&self, id: PlayerId) -> &[(u16, &'a [u8])] {
        self.personal.get(&id).map_or(&self.all[..], |v| &v[..])
    }

    /// Routes `events`, each `(recipient or None for everyone, topic, payload)`, in order.
    pub(crate) fn new<I>(events: I) -> Self
    where
        I: Iterator<Item = (Option<PlayerId>, u16, &'a [u8])> + Clone,
    {
        let mut routed = RoutedEvents {
            all: Vec::new(),
            personal: BTreeMap::new(),
        };
        for (to, _, _) in events.clone() {
            if let Some(p) = to {
                routed.personal.entry(p).or_default();
            }
        }
        for (to, topic, payload) in events {
            let item = (topic, payload);
            match to {
                None => {
                    routed.all.push(item);
                    for list in routed.personal.values_mut() {
                        list.push(item);
                    }
                }
                Some(p) => {
                    if let Some(list) = routed.personal.get_mut(&p) {
                        list.push(item);
                    }
                }
            }
        }
        routed
    }
}

fn route_events(events: &[Event]) -> RoutedEvents<'_> {
    RoutedEvents::new(event_items(events))
}

/// Each event as `(recipient or None for everyone, topic, payload)`, in order.
fn event_items(
    events: &[Event],
) -> impl Iterator<Item = (Option<PlayerId>, u16, &[u8])> + Clone + '_ {
    events.iter().map(|e| {
        let to = match e.target {
            EventTarget::All => None,
            EventTarget::Player(p) => Some(p),
        };
        (to, e.topic, e.payload.as_slice())
    })
}
