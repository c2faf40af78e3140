//! The replication side of [`ZoneHost`]: subscribers follow the roster, and on patch ticks
//! [`ZoneHost::build_frames`] turns the world into one Delta per connected participant.

use std::collections::BTreeMap;

use zonekeep_protocol::schema::Schema;

use super::ZoneHost;
use crate::ctx::{Event, EventTarget};
use crate::player::PlayerId;
use crate::replicate::{BuildStats, FrameInput, ReplicateError, SubscriberId};
use crate::view::subscriber_config;
use crate::world::World;
use crate::zone::Zone;

impl<Z: Zone> ZoneHost<Z> {
    /// The entity schema clients decode with (what Welcome carries).
    pub fn schema(&self) -> Schema {
        self.core.world.schema()
    }

    /// The replicated world.
    pub fn world(&self) -> &World {
        &self.core.world
    }

    /// Counters of the last [`build_frames`](ZoneHost::build_frames).
    pub fn last_build_stats(&self) -> BuildStats {
        self.last_build
    }

    /// Events dropped because more than `max_pending_events` waited for the next frames.
    pub fn frame_events_dropped(&self) -> u64 {
        self.frame_events_dropped
    }

    /// The participant's next frame is a BASELINE (full state), e.g. after its client
    /// reconnected or lost track. Unknown or dropped participants are ignored.
    pub fn resync(&mut self, id: PlayerId) {
        let _ = self.replicator.reset_subscriber(SubscriberId(id.0));
    }

    /// The count and hash of the participant's known set as of its last frame (what a
    /// KnownSetCheck carries); `None` for an unknown or unsubscribed participant.
    pub fn known_set_check(&self, id: PlayerId) -> Option<(u32, u32)> {
        self.replicator.known_check(SubscriberId(id.0)).ok()
    }

    /// Build every connected participant's Delta for the current tick and hand each to `sink`
    /// (in participant id order; the buffer is reused, so copy what you keep). Call after
    /// [`advance`](ZoneHost::advance) when its report lists patch ticks. Each frame carries the
    /// participant's input ack, its control entity when that changed, the events addressed to
    /// it since the last frames, and the changes in its view (a BASELINE first).
    pub fn build_frames(
        &mut self,
        sink: &mut dyn FnMut(PlayerId, &[u8]),
    ) -> Result<BuildStats, ReplicateError> {
        self.apply_view_requests();
        let events = std::mem::take(&mut self.frame_events);
        let routed = route_events(&events);
        let acks: BTreeMap<PlayerId, u32> = self
            .buffers
            .iter()
            .map(|(id, b)| (*id, b.last_processed().unwrap_or(0)))
            .collect();
        let zone = &self.zone;
        let world = &self.core.world;
        let inputs = |sub: SubscriberId| FrameInput {
            ack: acks.get(&PlayerId(sub.0)).copied().unwrap_or(0),
            events: routed.for_player(PlayerId(sub.0)),
        };
        let out = |sub: SubscriberId, bytes: &[u8]| sink(PlayerId(sub.0), bytes);
        let stats = if zone.uses_can_see() {
            self.replicator.build(
                world,
                self.core.tick,
                |sub, entity| zone.can_see(PlayerId(sub.0), entity, world),
                inputs,
                out,
            )?
        } else {
            self.replicator
                .build_unfiltered(world, self.core.tick, inputs, out)?
        };
        self.last_build = stats;
        Ok(stats)
    }

    /// Register a (re)connected participant with the replicator; its first frame is a BASELINE.
    pub(super) fn subscribe(&mut self, id: PlayerId) {
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

    /// Events emitted this `advance` wait for the next frames; bounded by `max_pending_events`.
    pub(super) fn queue_frame_events(&mut self, events: &[Event]) {
        for e in events {
            if self.frame_events.len() >= self.config.max_pending_events {
                self.frame_events_dropped = self.frame_events_dropped.saturating_add(1);
                continue;
            }
            self.frame_events.push(e.clone());
        }
    }

    /// Push the zone's changed view requests (control, radius, focus) to the replicator.
    fn apply_view_requests(&mut self) {
        for id in self.core.views.take_dirty() {
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

/// Events split by recipient, keeping emission order within each recipient's list.
struct RoutedEvents<'a> {
    all: Vec<(u16, &'a [u8])>,
    /// Participants with events of their own: their full list (broadcast ones included).
    personal: BTreeMap<PlayerId, Vec<(u16, &'a [u8])>>,
}

impl<'a> RoutedEvents<'a> {
    fn for_player(&self, id: PlayerId) -> &[(u16, &'a [u8])] {
        self.personal.get(&id).map_or(&self.all[..], |v| &v[..])
    }
}

fn route_events(events: &[Event]) -> RoutedEvents<'_> {
    let mut routed = RoutedEvents {
        all: Vec::new(),
        personal: BTreeMap::new(),
    };
    for e in events {
        if let EventTarget::Player(p) = e.target {
            routed.personal.entry(p).or_default();
        }
    }
    for e in events {
        let item = (e.topic, e.payload.as_slice());
        match e.target {
            EventTarget::All => {
                routed.all.push(item);
                for list in routed.personal.values_mut() {
                    list.push(item);
                }
            }
            EventTarget::Player(p) => {
                if let Some(list) = routed.personal.get_mut(&p) {
                    list.push(item);
                }
            }
        }
    }
    routed
}
