//! The origin's side of relays (see [`crate::relay`]): participants whose frames a relay
//! builds, the world feed they are built from, and each patch's relay output.

use std::collections::{BTreeMap, BTreeSet};

use super::ZoneHost;
use crate::ctx::Event;
use crate::feed::WorldFeed;
use crate::player::PlayerId;
use crate::recording::Record;
use crate::relay::{RelayOutput, RelayQueue, RelayRefusal, Told};
use crate::replicate::SubscriberId;
use crate::view::subscriber_config;

/// What the host keeps for relays.
#[derive(Debug, Default)]
pub(super) struct Relays {
    /// Participants whose frames a relay builds, and the link each is relayed over.
    pub(super) players: BTreeMap<PlayerId, u64>,
    /// What links were told of each relayed participant, while the feed runs.
    told: BTreeMap<PlayerId, Told>,
    /// Participants links were told of that are relayed over them no more, to tell them next
    /// patch.
    gone: BTreeSet<(PlayerId, u64)>,
    /// The world feed, while a relay follows the zone.
    feed: Option<WorldFeed>,
    /// The next patch carries the world's image.
    image_wanted: bool,
    /// The relay side of the last patch.
    pub(super) out: RelayQueue,
    /// The tick of the last patch the feed carried (0: none).
    last_tick: u64,
    /// Relayed participants whose listing, ack or view may have changed since the last patch:
    /// only they are looked at, so the host's cost per patch does not grow with idle ones.
    dirty: BTreeSet<PlayerId>,
    /// Scratch: the players whose ack moved this tick.
    pub(super) applied: Vec<PlayerId>,
}

impl ZoneHost {
    /// From the next patch on, the relay at the other end of link `link` (the driver's name for
    /// it) builds `id`'s frames: this host builds none for it and tells that link, in
    /// [`relay_output`](Self::relay_output), its ack, view and events. Refused for a zone that
    /// filters per viewer or uses lag compensation ([`RelayRefusal`]). A participant relayed
    /// over another link moves to this one (the old link is told it is gone, the new one gets
    /// its full record); relaying it again over the same link changes nothing.
    pub fn relay(&mut self, id: PlayerId, link: u64) -> Result<(), RelayRefusal> {
        self.tap_call(|| Record::Relay {
            player: id,
            link: Some(link),
        });
        if !self.core.roster.contains_key(&id) {
            return Err(RelayRefusal::UnknownPlayer(id));
        }
        if self.zone.uses_can_see() {
            return Err(RelayRefusal::PerViewer);
        }
        if self.rewind.is_some() {
            return Err(RelayRefusal::LagCompensation);
        }
        self.relays.dirty.insert(id);
        match self.relays.players.insert(id, link) {
            None => {
                let _ = self.replicator.remove_subscriber(SubscriberId(id.0));
                self.held.forget(id);
            }
            Some(old) if old != link => {
                if self.relays.told.remove(&id).is_some() {
                    self.relays.gone.insert((id, old));
                }
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// `id`'s frames are built here again (its client connected to this host directly): its
    /// next frame is a BASELINE. Unknown or not relayed: nothing changes.
    pub fn unrelay(&mut self, id: PlayerId) {
        self.tap_call(|| Record::Relay {
            player: id,
            link: None,
        });
        let Some(link) = self.relays.players.remove(&id) else {
            return;
        };
        if self.relays.told.remove(&id).is_some() {
            self.relays.gone.insert((id, link));
        }
        let connected = self.core.roster.get(&id).is_some_and(|p| p.connected);
        if connected && !self.is_moving(id) {
            self.subscribe(id);
        }
    }

    /// Whether a relay builds `id`'s frames.
    pub fn is_relayed(&self, id: PlayerId) -> bool {
        self.relays.players.contains_key(&id)
    }

    /// The next patch carries the world's image ([`RelayOutput::image`]), where a relay link
    /// starts; from then on every patch carries the feed's delta. The feed runs until
    /// [`end_relay_feed`](Self::end_relay_feed).
    pub fn want_relay_image(&mut self) {
        self.relays.image_wanted = true;
    }

    /// No relay follows the zone any more: patches stop carrying the feed (it costs a pass
    /// over the world per patch). Relayed participants stay relayed.
    pub fn end_relay_feed(&mut self) {
        self.relays.feed = None;
        self.relays.told.clear();
        self.relays.gone.clear();
        self.relays.dirty.clear();
        self.relays.image_wanted = false;
        self.relays.out.clear();
    }

    /// The relay side of the last patch [`drain_frames`](Self::drain_frames) built, while a
    /// relay follows the zone: the feed's part and the listed participants'. `None` when that
    /// call built no patch or no feed runs.
    pub fn relay_output(&self) -> Option<RelayOutput<'_>> {
        self.relays.out.built.then_some(RelayOutput {
            queue: &self.relays.out,
            told: &self.relays.told,
            links: &self.relays.players,
        })
    }

    /// Whether the participant's frames are built by this host's replicator.
    pub(super) fn builds_here(&self, id: PlayerId) -> bool {
        !self.relays.players.contains_key(&id)
    }

    /// What a relay is told of these participants (those of them relayed) may have changed:
    /// their listing (a drop, a rejoin, a move), ack or view.
    pub(super) fn relays_changed(&mut self, ids: &[PlayerId]) {
        if self.relays.players.is_empty() {
            return;
        }
        for id in ids {
            if self.relays.players.contains_key(id) {
                self.relays.dirty.insert(*id);
            }
        }
    }

    /// Forgets a participant that left.
    pub(super) fn forget_relayed(&mut self, id: PlayerId) {
        if let Some(link) = self.relays.players.remove(&id) {
            if self.relays.told.remove(&id).is_some() {
                self.relays.gone.insert((id, link));
            }
        }
        self.relays.dirty.remove(&id);
    }

    /// The relay side of this patch, built after the host's own frames. `events` are the
    /// events this patch's frames carry, in order; `before` is the tick of the patch before
    /// (0: none).
    pub(super) fn build_relay_output(&mut self, events: &[Event], before: u64) {
        let relays = &mut self.relays;
        let since = relays.last_tick;
        relays.out.clear();
        if relays.feed.is_none() && !relays.image_wanted {
            return;
        }
        let world = &self.core.world;
        relays.out.tick = self.core.tick;
        relays.out.since = since;
        relays.out.config = crate::replicate::ReplicationConfig {
            cell_size: self.config.replication.cell_size,
            priority_distance: self.config.replication.priority_distance,
        };
        relays.out.rate = crate::host::ObserverRate::of(&self.config);
        relays.out.before = before;
        relays.last_tick = self.core.tick;
        match relays.feed.as_mut() {
            None => relays.feed = Some(WorldFeed::new(world)),
            Some(feed) => {
                let mut delta = Vec::new();
                match feed.delta(world, &mut delta) {
                    Ok(()) => relays.out.delta = Some(delta),
                    // A broken invariant: every link starts over from a fresh image.
                    Err(_) => {
                        relays.feed = Some(WorldFeed::new(world));
                        relays.image_wanted = true;
                    }
                }
            }
        }
        // A link starting gets every participant's full record: all are looked at anew.
        let image = std::mem::take(&mut relays.image_wanted);
        if image {
            let mut bytes = Vec::new();
            WorldFeed::image(world, &mut bytes);
            relays.out.image = Some(bytes);
        }
        let dirty = std::mem::take(&mut relays.dirty);
        let changed: Box<dyn Iterator<Item = (&PlayerId, &u64)>> = match image {
            true => Box::new(relays.players.iter()),
            false => Box::new(
                dirty
                    .iter()
                    .filter_map(|id| relays.players.get_key_value(id)),
            ),
        };
        relays.out.push_events(events);
        // Records ascend by id: the participants gone and those relayed, merged.
        let gone = std::mem::take(&mut relays.gone);
        let mut gone = gone.into_iter().peekable();
        for (&id, &link) in changed {
            while let Some((g, from)) = gone.next_if(|(g, _)| *g <= id) {
                relays.out.push_gone(g, from);
            }
            let (Some(info), Some(view)) = (self.core.roster.get(&id), self.core.views.get(id))
            else {
                continue;
            };
            let now = Told {
                link,
                // The host holds back a dropped or moving participant's frames.
                listed: info.connected && !self.core.transfers.moving.contains_key(&id),
                ack: self.zone.last_processed(id).unwrap_or(0),
                view: subscriber_config(&self.config.replication, info.role, view),
                observer: info.role == crate::Role::Observer,
            };
            relays.out.push_change(id, relays.told.get(&id), &now);
            relays.told.insert(id, now);
        }
        for (g, from) in gone {
            relays.out.push_gone(g, from);
        }
        relays.out.built = true;
    }
}
