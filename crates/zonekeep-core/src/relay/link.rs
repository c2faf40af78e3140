//! The link message (see the [module docs](super)): written at the origin from its patch, read
//! whole at the relay.

use super::{get_view, put_view, RelayError};
use crate::player::PlayerId;
use crate::replicate::SubscriberConfig;
use zonekeep_protocol::error::DecodeError;
use zonekeep_protocol::limits::{MAX_EVENTS, MAX_EVENT_PAYLOAD};
use zonekeep_protocol::wire::{put_varint, varint_len, Reader};

/// The `world` byte of a message carrying a feed delta.
const WORLD_DELTA: u8 = 1;
/// The `world` byte of a message carrying a feed image.
const WORLD_IMAGE: u8 = 2;

/// The fewest bytes a participant takes: id, ack, two floats, budget, focus and its entity,
/// control flag, event count.
const MIN_PLAYER_BYTES: usize = 1 + 1 + 8 + 1 + 2 + 1 + 1;

/// The origin's relay side of its last patch, kept until the next one: the feed's part and each
/// relayed participant's, encoded once and shared by every link.
#[derive(Debug, Default)]
pub(crate) struct RelayQueue {
    /// A patch was built with a feed following the world.
    pub(crate) built: bool,
    pub(crate) tick: u64,
    /// The feed delta of this patch; `None` when the feed started at it or broke.
    pub(crate) delta: Option<Vec<u8>>,
    /// The world's image at the end of this patch, when one was asked for.
    pub(crate) image: Option<Vec<u8>>,
    /// Each listed participant's part, back to back.
    players: Vec<u8>,
    /// Who each part is for and where it ends in `players`, ascending by id.
    items: Vec<(PlayerId, usize)>,
}

impl RelayQueue {
    /// Forgets the last patch, keeping the buffers.
    pub(crate) fn clear(&mut self) {
        self.built = false;
        self.delta = None;
        self.image = None;
        self.players.clear();
        self.items.clear();
    }

    /// Lists a participant (in ascending id order) with what its frame is built from.
    pub(crate) fn push_player(
        &mut self,
        player: PlayerId,
        ack: u32,
        view: &SubscriberConfig,
        events: &[(u16, &[u8])],
    ) {
        let out = &mut self.players;
        put_varint(out, u64::from(player.0));
        put_varint(out, u64::from(ack));
        put_view(out, view);
        put_varint(out, events.len() as u64);
        for (topic, payload) in events {
            put_varint(out, u64::from(*topic));
            put_varint(out, payload.len() as u64);
            out.extend_from_slice(payload);
        }
        self.items.push((player, out.len()));
    }
}

/// The relay side of the host's last patch ([`ZoneHost::relay_output`](crate::ZoneHost::relay_output)):
/// what every relay link's message is written from.
#[derive(Debug, Clone, Copy)]
pub struct RelayOutput<'a> {
    pub(crate) queue: &'a RelayQueue,
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

    /// The relayed participants listed in this patch (connected, not moving), ascending.
    pub fn players(&self) -> impl Iterator<Item = PlayerId> + 'a {
        self.queue.items.iter().map(|(p, _)| *p)
    }

    /// Appends one link's message: the feed's image (`image`, for a link starting) or its delta,
    /// and the parts of the listed participants that `on_link` says the link serves.
    /// [`RelayError::Unavailable`] when the patch has no such feed part; nothing is appended.
    pub fn write_link(
        &self,
        out: &mut Vec<u8>,
        image: bool,
        mut on_link: impl FnMut(PlayerId) -> bool,
    ) -> Result<(), RelayError> {
        let (kind, feed) = match image {
            true => (
                WORLD_IMAGE,
                self.image().ok_or(RelayError::Unavailable("image"))?,
            ),
            false => (
                WORLD_DELTA,
                self.delta().ok_or(RelayError::Unavailable("delta"))?,
            ),
        };
        put_varint(out, self.queue.tick);
        out.push(kind);
        put_varint(out, feed.len() as u64);
        out.extend_from_slice(feed);
        let count_at = out.len();
        let mut count = 0u64;
        let mut start = 0;
        for &(player, end) in &self.queue.items {
            if on_link(player) {
                out.extend_from_slice(self.queue.players.get(start..end).unwrap_or_default());
                count += 1;
            }
            start = end;
        }
        // The count goes in front of the parts it counts.
        let mut head = Vec::with_capacity(varint_len(count));
        put_varint(&mut head, count);
        out.splice(count_at..count_at, head);
        Ok(())
    }
}

/// The feed part of a link message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkWorld<'a> {
    /// A delta from the version the relay's replica is at.
    Delta(&'a [u8]),
    /// The world's image: the relay starts (over) from it.
    Image(&'a [u8]),
}

/// One participant's part of a link message: what its frame is built from beside the world.
#[derive(Debug, Clone, PartialEq)]
pub struct PlayerPatch<'a> {
    /// The participant.
    pub player: PlayerId,
    /// The input ack its frame carries.
    pub ack: u32,
    /// Its view.
    pub view: SubscriberConfig,
    /// The events addressed to it this patch, in order.
    pub events: Vec<(u16, &'a [u8])>,
}

/// A link message, read whole and checked (see the [module docs](super)).
#[derive(Debug, Clone, PartialEq)]
pub struct LinkPatch<'a> {
    /// The patch's tick.
    pub tick: u64,
    /// The feed part.
    pub world: LinkWorld<'a>,
    /// The participants listed, ascending by id.
    pub players: Vec<PlayerPatch<'a>>,
}

impl<'a> LinkPatch<'a> {
    /// Reads a whole link message. Refused: a message cut short or with bytes after its end,
    /// an unknown world byte, participants out of order, a participant with more than
    /// [`MAX_EVENTS`] events or an event payload over [`MAX_EVENT_PAYLOAD`] bytes.
    pub fn read(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let tick = r.varint_u64()?;
        let kind = r.u8()?;
        let feed = r.bytes_named("relay feed", r.remaining())?;
        let world = match kind {
            WORLD_DELTA => LinkWorld::Delta(feed),
            WORLD_IMAGE => LinkWorld::Image(feed),
            _ => {
                return Err(DecodeError::Invalid(
                    "a relay link world byte other than 1 or 2",
                ))
            }
        };
        let n = r.count("relay participants", r.remaining() / MIN_PLAYER_BYTES)?;
        let mut players = Vec::with_capacity(n);
        let mut last: Option<u32> = None;
        for _ in 0..n {
            let player = r.varint_u32()?;
            if last.is_some_and(|l| l >= player) {
                return Err(DecodeError::Invalid("relay participants do not ascend"));
            }
            last = Some(player);
            let ack = r.varint_u32()?;
            let view = get_view(&mut r)?;
            // An event takes at least its topic and length.
            let e = r.count("relay events", MAX_EVENTS.min(r.remaining() / 2))?;
            let mut events = Vec::with_capacity(e);
            for _ in 0..e {
                let topic = r.varint_u16()?;
                let payload = r.bytes_named("relay event payload", MAX_EVENT_PAYLOAD)?;
                events.push((topic, payload));
            }
            players.push(PlayerPatch {
                player: PlayerId(player),
                ack,
                view,
                events,
            });
        }
        r.finish()?;
        Ok(Self {
            tick,
            world,
            players,
        })
    }
}
