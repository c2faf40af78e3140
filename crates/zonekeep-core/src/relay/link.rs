//! The link message (see the [module docs](super)): written at the origin from its patch, read
//! whole at the relay.

use std::collections::BTreeMap;

use super::{get_view, put_view, RelayError};
use crate::config::MAX_OBSERVER_PATCH_EVERY;
use crate::ctx::{Event, EventTarget};
use crate::host::ObserverRate;
use crate::player::PlayerId;
use crate::replicate::{ReplicationConfig, SubscriberConfig};
use zonekeep_protocol::error::DecodeError;
use zonekeep_protocol::limits::{MAX_EVENTS, MAX_EVENT_PAYLOAD};
use zonekeep_protocol::wire::{put_f32, put_varint, Reader};

/// The `world` byte of a message carrying a feed delta.
const WORLD_DELTA: u8 = 1;
/// The `world` byte of a message carrying a feed image.
const WORLD_IMAGE: u8 = 2;

/// A record's parts.
const LISTED: u8 = 1;
const ACK: u8 = 2;
const VIEW: u8 = 4;
/// The participant is no longer relayed (it left, or its frames are built at its host again).
const GONE: u8 = 8;
/// The participant is an observer: it gets frames at the zone's observer rate.
const OBSERVER: u8 = 16;

/// What a relay was last told of one relayed participant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Told {
    /// The link it is relayed over (the driver's name for it).
    pub(crate) link: u64,
    /// It gets a frame this patch (connected, not moving).
    pub(crate) listed: bool,
    /// The input ack its frame carries.
    pub(crate) ack: u32,
    /// Its view.
    pub(crate) view: SubscriberConfig,
    /// It is an observer (a participant's role never changes).
    pub(crate) observer: bool,
}

/// Appends a participant's record with the given parts.
fn put_record(out: &mut Vec<u8>, player: PlayerId, parts: u8, told: &Told) {
    put_varint(out, u64::from(player.0));
    let listed = if told.listed { LISTED } else { 0 };
    let observer = if told.observer { OBSERVER } else { 0 };
    out.push(parts | listed | observer);
    if parts & ACK != 0 {
        put_varint(out, u64::from(told.ack));
    }
    if parts & VIEW != 0 {
        put_view(out, &told.view);
    }
}

/// The origin's relay side of its last patch, kept until the next one, encoded once and shared
/// by every link: the feed's part, the events carried, and the records of the relayed
/// participants that changed.
#[derive(Debug, Default)]
pub(crate) struct RelayQueue {
    /// A patch was built with a feed following the world.
    pub(crate) built: bool,
    pub(crate) tick: u64,
    /// The tick of the patch before (0: none yet).
    pub(crate) since: u64,
    /// The zone's replicator settings, which a relay's replicator must share.
    pub(crate) config: ReplicationConfig,
    /// The zone's observer rate, which a relay's turns must follow.
    pub(crate) rate: ObserverRate,
    /// The tick of the host's patch before this one (0: none), whether or not a feed ran then:
    /// a relay starting counts its observers' turns from it.
    pub(crate) before: u64,
    /// The feed delta of this patch; `None` when the feed started at it or broke.
    pub(crate) delta: Option<Vec<u8>>,
    /// The world's image at the end of this patch, when one was asked for.
    pub(crate) image: Option<Vec<u8>>,
    /// The events this patch carries, each `varint topic, varint len, payload`, back to back.
    events: Vec<u8>,
    /// Each event's recipient (`None`: everyone) and where it ends in `events`.
    event_items: Vec<(Option<PlayerId>, usize)>,
    /// The records of participants that changed, back to back.
    records: Vec<u8>,
    /// Whose each record is, the link it goes to, and where it ends in `records`, ascending by
    /// participant.
    record_items: Vec<(PlayerId, u64, usize)>,
}

impl RelayQueue {
    /// Forgets the last patch, keeping the buffers.
    pub(crate) fn clear(&mut self) {
        self.built = false;
        self.delta = None;
        self.image = None;
        self.events.clear();
        self.event_items.clear();
        self.records.clear();
        self.record_items.clear();
    }

    /// Keeps the events the patch carries, in order.
    pub(crate) fn push_events(&mut self, events: &[Event]) {
        for e in events {
            put_varint(&mut self.events, u64::from(e.topic));
            put_varint(&mut self.events, e.payload.len() as u64);
            self.events.extend_from_slice(&e.payload);
            let to = match e.target {
                EventTarget::All => None,
                EventTarget::Player(p) => Some(p),
            };
            self.event_items.push((to, self.events.len()));
        }
    }

    /// Records that a participant is relayed no more (in ascending id order with the changes).
    pub(crate) fn push_gone(&mut self, player: PlayerId, link: u64) {
        put_varint(&mut self.records, u64::from(player.0));
        self.records.push(GONE);
        self.record_items.push((player, link, self.records.len()));
    }

    /// Records what changed of a participant (in ascending id order) since `before`; nothing
    /// when nothing did. `before` is `None` for a participant its link was not told of.
    pub(crate) fn push_change(&mut self, player: PlayerId, before: Option<&Told>, now: &Told) {
        let parts = match before.filter(|b| b.link == now.link) {
            None => ACK | VIEW,
            Some(b) => {
                let ack = if b.ack != now.ack { ACK } else { 0 };
                let view = if b.view != now.view { VIEW } else { 0 };
                if ack | view == 0 && b.listed == now.listed {
                    return;
                }
                ack | view
            }
        };
        put_record(&mut self.records, player, parts, now);
        self.record_items
            .push((player, now.link, self.records.len()));
    }
}

/// The relay side of the host's last patch ([`ZoneHost::relay_output`](crate::ZoneHost::relay_output)):
/// what every relay link's message is written from.
#[derive(Debug, Clone, Copy)]
pub struct RelayOutput<'a> {
    pub(crate) queue: &'a RelayQueue,
    /// What links were told of every relayed participant, as of this patch.
    pub(crate) told: &'a BTreeMap<PlayerId, Told>,
    /// The link each relayed participant is relayed over.
    pub(crate) links: &'a BTreeMap<PlayerId, u64>,
}

impl<'a> RelayOutput<'a> {
    /// The patch's tick.
    pub fn tick(&self) -> u64 {
        self.queue.tick
    }

    /// The feed delta from the previous patch; `None` when the feed started at this patch (no
    /// link can be following it yet) or could not be written (every link starts over from an
    /// image).
    pub fn delta(&self) -> Option<&'a [u8]> {
        self.queue.delta.as_deref()
    }

    /// The world's image at this patch, when [`ZoneHost::want_relay_image`](crate::ZoneHost::want_relay_image)
    /// asked for one: where a link starts.
    pub fn image(&self) -> Option<&'a [u8]> {
        self.queue.image.as_deref()
    }

    /// Appends the message of relay link `link` (the name its participants were relayed under,
    /// [`ZoneHost::relay`](crate::ZoneHost::relay)). A link `starting` gets the feed's image and
    /// a full record of each of its participants; a link following gets the feed's delta and
    /// the records of its participants that changed or left. Every link gets the events for
    /// everyone and those addressed to its participants. Each patch must reach every following
    /// link, in order. [`RelayError::Unavailable`] when the patch has no such feed part;
    /// nothing is appended.
    pub fn write_link(
        &self,
        out: &mut Vec<u8>,
        starting: bool,
        link: u64,
    ) -> Result<(), RelayError> {
        let on_link = |p: PlayerId| self.links.get(&p) == Some(&link);
        let q = self.queue;
        let (kind, feed, since) = match starting {
            true => (
                WORLD_IMAGE,
                self.image().ok_or(RelayError::Unavailable("image"))?,
                0,
            ),
            false => (
                WORLD_DELTA,
                self.delta().ok_or(RelayError::Unavailable("delta"))?,
                q.since,
            ),
        };
        put_varint(out, q.tick);
        put_varint(out, since);
        out.push(kind);
        if starting {
            put_f32(out, q.config.cell_size);
            put_f32(out, q.config.priority_distance);
            put_varint(out, u64::from(q.rate.patch_every));
            put_varint(out, u64::from(q.rate.observer_patch_every));
            put_varint(out, q.before);
        }
        put_varint(out, feed.len() as u64);
        out.extend_from_slice(feed);

        let mut start = 0;
        let events: Vec<(Option<PlayerId>, &[u8])> = q
            .event_items
            .iter()
            .map(|&(to, end)| {
                let bytes = q.events.get(start..end).unwrap_or_default();
                start = end;
                (to, bytes)
            })
            .filter(|(to, _)| to.is_none_or(on_link))
            .collect();
        put_varint(out, events.len() as u64);
        for (to, bytes) in events {
            put_varint(out, to.map_or(0, |p| u64::from(p.0) + 1));
            out.extend_from_slice(bytes);
        }

        if starting {
            let mine: Vec<_> = self.told.iter().filter(|(_, t)| t.link == link).collect();
            put_varint(out, mine.len() as u64);
            for (p, told) in mine {
                put_record(out, *p, ACK | VIEW, told);
            }
        } else {
            let mut start = 0;
            let mine: Vec<&[u8]> = q
                .record_items
                .iter()
                .map(|&(_, to, end)| {
                    let bytes = q.records.get(start..end).unwrap_or_default();
                    start = end;
                    (to, bytes)
                })
                .filter(|(to, _)| *to == link)
                .map(|(_, b)| b)
                .collect();
            put_varint(out, mine.len() as u64);
            for bytes in mine {
                out.extend_from_slice(bytes);
            }
        }
        Ok(())
    }
}

/// The feed part of a link message.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LinkWorld<'a> {
    /// A delta from the version the relay's replica is at.
    Delta(&'a [u8]),
    /// The world's image, and the zone's replicator settings and observer rate: the relay
    /// starts (over) from them.
    Image {
        /// The zone's replicator settings.
        config: ReplicationConfig,
        /// The zone's observer rate.
        rate: ObserverRate,
        /// The tick of the origin's patch before this one (0: none): where the observers'
        /// turns are counted from, as a following message's `since` says.
        before: u64,
        /// The feed's image.
        image: &'a [u8],
    },
}

/// One event of a link message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkEvent<'a> {
    /// Its recipient; `None`: everyone.
    pub to: Option<PlayerId>,
    /// The zone's topic.
    pub topic: u16,
    /// The payload.
    pub payload: &'a [u8],
}

/// What a link message says of one relayed participant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlayerRecord {
    /// The participant.
    pub player: PlayerId,
    /// It is relayed no more: forget it (nothing else is set).
    pub gone: bool,
    /// It gets a frame from this patch on (connected, not moving).
    pub listed: bool,
    /// It is an observer, served at the zone's observer rate (set in every record of one).
    pub observer: bool,
    /// Its frame's input ack, when it changed.
    pub ack: Option<u32>,
    /// Its view, when it changed.
    pub view: Option<SubscriberConfig>,
}

/// A link message, read whole and checked (see the [module docs](super)).
#[derive(Debug, Clone, PartialEq)]
pub struct LinkPatch<'a> {
    /// The patch's tick.
    pub tick: u64,
    /// The tick of the patch it follows (0 for a message with an image).
    pub since: u64,
    /// The feed part.
    pub world: LinkWorld<'a>,
    /// The events, in order.
    pub events: Vec<LinkEvent<'a>>,
    /// The records, ascending by participant (with an image: every participant of the link).
    pub records: Vec<PlayerRecord>,
}

/// The fewest bytes a record takes: its id and parts.
const MIN_RECORD_BYTES: usize = 2;

impl<'a> LinkPatch<'a> {
    /// Reads a whole link message. Refused: a message cut short or with bytes after its end, an
    /// unknown world byte or record part, an image message following a patch, replicator
    /// settings no replicator takes or an observer rate no zone runs, records out of
    /// order, a message with more than [`MAX_EVENTS`] events or an event payload over
    /// [`MAX_EVENT_PAYLOAD`] bytes, and a participant's first record without its ack and view.
    pub fn read(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let tick = r.varint_u64()?;
        let since = r.varint_u64()?;
        let kind = r.u8()?;
        let config = match kind {
            WORLD_IMAGE => {
                let positive = |v: f32| v.is_finite() && v > 0.0;
                let (cell_size, priority_distance) = (r.f32()?, r.f32()?);
                if !positive(cell_size) || !positive(priority_distance) {
                    return Err(DecodeError::Invalid(
                        "relay replicator settings not finite and positive",
                    ));
                }
                let rate = ObserverRate {
                    patch_every: r.varint_u32()?,
                    observer_patch_every: r.varint_u32()?,
                };
                if rate.patch_every == 0
                    || !(1..=MAX_OBSERVER_PATCH_EVERY).contains(&rate.observer_patch_every)
                {
                    return Err(DecodeError::Invalid("relay observer rate out of range"));
                }
                let before = r.varint_u64()?;
                Some((
                    ReplicationConfig {
                        cell_size,
                        priority_distance,
                    },
                    rate,
                    before,
                ))
            }
            _ => None,
        };
        let feed = r.bytes_named("relay feed", r.remaining())?;
        let world = match (kind, since, config) {
            (WORLD_DELTA, _, _) => LinkWorld::Delta(feed),
            (WORLD_IMAGE, 0, Some((config, rate, before))) => LinkWorld::Image {
                config,
                rate,
                before,
                image: feed,
            },
            (WORLD_IMAGE, _, _) => {
                return Err(DecodeError::Invalid(
                    "a relay image message following a patch",
                ))
            }
            _ => {
                return Err(DecodeError::Invalid(
                    "a relay link world byte other than 1 or 2",
                ))
            }
        };
        // An event takes at least its recipient, topic and length.
        let n = r.count("relay events", MAX_EVENTS.min(r.remaining() / 3))?;
        let mut events = Vec::with_capacity(n);
        for _ in 0..n {
            let to = match r.varint_u32()? {
                0 => None,
                p => Some(PlayerId(p - 1)),
            };
            let topic = r.varint_u16()?;
            let payload = r.bytes_named("relay event payload", MAX_EVENT_PAYLOAD)?;
            events.push(LinkEvent { to, topic, payload });
        }
        let n = r.count("relay records", r.remaining() / MIN_RECORD_BYTES)?;
        let mut records = Vec::with_capacity(n);
        let mut last: Option<u32> = None;
        for _ in 0..n {
            let player = r.varint_u32()?;
            if last.is_some_and(|l| l >= player) {
                return Err(DecodeError::Invalid("relay records do not ascend"));
            }
            last = Some(player);
            let parts = r.u8()?;
            if parts & !(LISTED | ACK | VIEW | GONE | OBSERVER) != 0 {
                return Err(DecodeError::Invalid("a relay record part not defined"));
            }
            let gone = parts & GONE != 0;
            if gone && (parts != GONE || matches!(world, LinkWorld::Image { .. })) {
                return Err(DecodeError::Invalid("a relay record both gone and not"));
            }
            let ack = match parts & ACK {
                0 => None,
                _ => Some(r.varint_u32()?),
            };
            let view = match parts & VIEW {
                0 => None,
                _ => Some(get_view(&mut r)?),
            };
            if matches!(world, LinkWorld::Image { .. }) && (ack.is_none() || view.is_none()) {
                return Err(DecodeError::Invalid(
                    "a full relay record without its ack and view",
                ));
            }
            records.push(PlayerRecord {
                player: PlayerId(player),
                gone,
                listed: parts & LISTED != 0,
                observer: parts & OBSERVER != 0,
                ack,
                view,
            });
        }
        r.finish()?;
        Ok(Self {
            tick,
            since,
            world,
            events,
            records,
        })
    }
}
