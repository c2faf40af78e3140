//! Relays: a zone's frames built away from its host, for zones with more clients than one host
//! can write to.
//!
//! A relay holds a copy of the zone's world, fed by the [world feed](crate::feed), and runs the
//! core's own [replicator](crate::replicate) over it for the clients connected to it. The zone's
//! host (the origin) keeps every participant: it admits them, takes their inputs and runs the
//! zone. For a participant it *relays* ([`ZoneHost::relay`](crate::ZoneHost::relay)) it builds no
//! frame; it tells the relay what the replicator needs beside the world to build that frame:
//! whether it gets one this patch, its input ack, its view ([`SubscriberConfig`]) and the events
//! addressed to it.
//!
//! The origin's cost per patch does not grow with idle relayed participants: a link message
//! carries the feed's delta, the patch's events once, and a record only for a participant whose
//! ack, view or listing changed. A crowd of observers costs the origin nothing per patch once
//! seated; interest, diffing and byte budgets are paid at the relays.
//!
//! Observers served at a lower rate than players
//! ([`ZoneConfig::observer_patch_every`](crate::ZoneConfig::observer_patch_every)) cost nothing
//! more: a link's image tells its relay the zone's [`ObserverRate`] once, each participant's
//! records say whether it is an observer, and the relay works out each observer's turns and
//! holds its events until its next frame exactly as the origin would have.
//!
//! [`ZoneHost::relay_output`](crate::ZoneHost::relay_output) is the origin's side of a patch, and
//! [`RelayOutput::write_link`] writes one relay link's message from it. [`RelayZone`] is the
//! relay's side: it applies each message ([`RelayZone::apply`]) and hands out each attached
//! client's frame. For every participant the relay serves, those are the bytes, acks and quiet
//! flags its host would have built for a direct connection.
//!
//! What a relay cannot serve: a zone that filters entities per viewer
//! ([`Zone::can_see`](crate::Zone::can_see)) reads its own state to decide, which no relay holds,
//! and a zone with lag compensation judges inputs against what each client was sent, which only
//! the relay knows. The host refuses to relay their participants ([`RelayRefusal`]).
//!
//! # Link message format
//!
//! One message per patch per link, origin to relay, each following the one before:
//!
//! `varint tick`, `varint since` (the tick of the patch before; `0` in a message with an image),
//! `u8 world` (`1`: a feed delta follows, `2`: a feed image follows, after the zone's replicator
//! settings as `f32 cell_size` and `f32 priority_distance`, its observer rate as
//! `varint patch_every` (at least 1) and `varint observer_patch_every` (1 to 1000), and
//! `varint before`, the tick of the origin's patch before this one, `0`: none), the feed bytes
//! as `varint len` and `len` bytes; then `varint E` and `E` events, each `varint to` (`0`:
//! everyone, else the participant's id + 1), `varint topic`, `varint len` and the payload, in
//! emission order; then `varint R` and `R` records ascending by participant.
//!
//! A record: `varint player`, `u8 parts`, then by its bits: `ACK` (2): `varint ack`; `VIEW` (4):
//! the view. `LISTED` (1) set: the participant gets frames from this patch on (connected, not
//! moving); an observer, on its turns only. `OBSERVER` (16) set, in every record of one: the
//! participant is an observer. `GONE` (8), alone: it is relayed no more. A message with an
//! image holds a full record (`ACK` and `VIEW`) of every participant of the link; a following
//! one, records of those that changed, and a participant's first record is full.
//!
//! An observer's turns follow from the tick of each message and of the patch before it
//! (`since`, or an image's `before`), by [`ObserverRate`]'s rule; an observer that sits a patch
//! out holds the events addressed to it there for its next frame, and gets that frame early
//! when they would no longer fit one.
//!
//! A view: `f32 radius`, `f32 margin` (bit patterns), `varint budget` (`0`: none), the focus as
//! `u8 0` and `varint entity` or `u8 1`, `f32 x` and `f32 y`, then the control entity as `u8 0`
//! (none) or `u8 1` and `varint entity`.

mod link;
mod zone;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_link;
#[cfg(test)]
mod tests_observers;

pub use crate::host::ObserverRate;
pub use link::{LinkEvent, LinkPatch, LinkWorld, PlayerRecord, RelayOutput};
pub(crate) use link::{RelayQueue, Told};
pub use zone::RelayZone;

use crate::feed::FeedError;
use crate::player::PlayerId;
use crate::replicate::{ReplicateError, SubscriberConfig};
use zonekeep_protocol::error::DecodeError;

/// Why the host would not relay a participant's frames.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RelayRefusal {
    /// No such participant.
    #[error("unknown player {0}")]
    UnknownPlayer(PlayerId),
    /// The zone filters entities per viewer (`can_see`), which a relay cannot do. A zone that
    /// shows everything in range says so with [`Zone::uses_can_see`](crate::Zone::uses_can_see).
    #[error("the zone filters what each viewer sees (can_see); its frames are built at its host")]
    PerViewer,
    /// The zone judges inputs against what each client was sent (lag compensation).
    #[error("the zone uses lag compensation; its frames are built at its host")]
    LagCompensation,
}

/// Why a relay link message could not be written or applied.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// The bytes are not a link message.
    #[error("relay link message malformed: {0}")]
    Decode(#[from] DecodeError),
    /// The feed part could not be applied; after [`FeedError::Gap`] the link needs an image.
    #[error("relay feed: {0}")]
    Feed(#[from] FeedError),
    /// A feed delta came before any image: the relay has no world to apply it to.
    #[error("a feed delta came before the feed's image")]
    NoImage,
    /// A link message follows another patch than the last one applied: one was missed. The
    /// link must start over from an image.
    #[error("relay link message follows tick {since}, the relay is at tick {at}")]
    Gap {
        /// The relay's tick.
        at: u64,
        /// The patch the message follows.
        since: u64,
    },
    /// The link relays more participants through here than the relay takes.
    #[error("the relay holds its cap of {cap} relayed participants")]
    Players {
        /// The cap ([`RelayZone::new`]).
        cap: usize,
    },
    /// The message is for a tick not after the relay's last one.
    #[error("relay link message for tick {got}, the relay is at tick {at}")]
    Stale {
        /// The relay's tick.
        at: u64,
        /// The message's.
        got: u64,
    },
    /// The origin's patch has no feed part of the kind asked for (no image was asked for, or
    /// the feed broke and links must start over from an image).
    #[error("the patch carries no feed {0}")]
    Unavailable(&'static str),
    /// The relay's replicator refused (a broken invariant: its clients start over).
    #[error("relay replicator: {0}")]
    Replicate(#[from] ReplicateError),
}

/// Appends `cfg` as the format's view.
pub(crate) fn put_view(out: &mut Vec<u8>, cfg: &SubscriberConfig) {
    use crate::replicate::Focus;
    use zonekeep_protocol::wire::{put_f32, put_varint};
    put_f32(out, cfg.radius);
    put_f32(out, cfg.margin);
    put_varint(out, cfg.budget.map_or(0, |b| b as u64));
    match cfg.focus {
        Focus::Entity(e) => {
            out.push(0);
            put_varint(out, u64::from(e.0));
        }
        Focus::Point(x, y) => {
            out.push(1);
            put_f32(out, x);
            put_f32(out, y);
        }
    }
    match cfg.control {
        None => out.push(0),
        Some(e) => {
            out.push(1);
            put_varint(out, u64::from(e.0));
        }
    }
}

/// Reads a view [`put_view`] wrote. Floats are taken as they come (the origin's replicator
/// took the same values); a budget must fit the platform's `usize`.
pub(crate) fn get_view(
    r: &mut zonekeep_protocol::wire::Reader<'_>,
) -> Result<SubscriberConfig, DecodeError> {
    use crate::replicate::Focus;
    use crate::world::EntityId;
    let radius = r.f32()?;
    let margin = r.f32()?;
    let budget = match r.varint_u64()? {
        0 => None,
        b => Some(usize::try_from(b).map_err(|_| DecodeError::Overflow)?),
    };
    let focus = match r.u8()? {
        0 => Focus::Entity(EntityId(r.varint_u32()?)),
        1 => Focus::Point(r.f32()?, r.f32()?),
        _ => return Err(DecodeError::Invalid("a relay view focus other than 0 or 1")),
    };
    let control = match r.u8()? {
        0 => None,
        1 => Some(EntityId(r.varint_u32()?)),
        _ => {
            return Err(DecodeError::Invalid(
                "a relay view control flag other than 0 or 1",
            ))
        }
    };
    Ok(SubscriberConfig {
        radius,
        margin,
        budget,
        focus,
        control,
    })
}
