//! The world feed: a zone's world carried to a replica in another process (a relay), so that the
//! replicator run over the replica writes each subscriber exactly the frames the zone's own host
//! would have written it.
//!
//! Delta frames cannot serve for this: they carry what a client needs, and the replicator reads
//! more. The feed carries the true positions (interest works on them, not on the quantized ones),
//! the global flag, each field's change stamp and the world's version. With those the replica's
//! replicator sees what the origin's sees: the same visible set, the same fields changed since a
//! subscriber's last frame, the same priorities, so the same bytes.
//!
//! The origin encodes the feed **once per patch** for every replica that follows it
//! ([`WorldFeed::delta`]), the changes since the previous patch. A replica starts from the world's
//! image ([`WorldFeed::image`], taken right after a delta, so at its version) and then applies each
//! delta in turn ([`Replica::apply`]). Each delta names the version it starts from, so a delta
//! missed or applied twice is refused ([`FeedError::Gap`]), never misapplied; the replica then
//! starts over from a fresh image.
//!
//! A replica checks a whole delta before it changes anything: a delta that is malformed, or that
//! does not fit the replica (an id it does not hold, a spawn under an id already used, a value its
//! field cannot hold, a stamp outside the delta's versions), is refused with a typed error and the
//! replica is left as it was.
//!
//! # Format
//!
//! An image is the world's part of a zone image ([`crate::image`]): bit-exact.
//!
//! A delta: `varint base` (the version it starts from), `varint version`, `varint next_id`, then
//! `varint D` and the `D` despawned ids, then `varint R` and `R` rows, one per entity spawned,
//! moved, changed or made (not) global since `base`. Ids in each list ascend and are written as
//! gaps: the first as itself, each later one as its difference from the one before (never 0).
//!
//! A row: `varint gap`, `u8 parts`, then by the bits of `parts`:
//! - `SPAWN` (1): `varint kind`, and the row lists every field of the kind, in order;
//! - `SPAWN` or `MOVE` (2): `f32 x`, `f32 y` (bit patterns);
//! - `FIELDS` (4): `varint n`, then `n` times `varint field`, the value in its wire form
//!   ([`FieldType::encode_value`]) and `varint stamp`, fields ascending;
//! - `GLOBAL` (8): set when the entity is global after the delta, clear when it is not.
//!
//! [`FieldType::encode_value`]: zonekeep_protocol::schema::FieldType::encode_value

mod read;
mod write;

#[cfg(test)]
mod tests;

pub use read::Replica;
pub use write::WorldFeed;

use crate::world::WorldError;
use zonekeep_protocol::error::{DecodeError, EncodeError};

/// A row's parts (see the [module docs](self)).
const SPAWN: u8 = 1;
const MOVE: u8 = 2;
const FIELDS: u8 = 4;
const GLOBAL: u8 = 8;

/// Why a feed could not be written or applied.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    /// The bytes are not a feed image or delta.
    #[error("feed malformed: {0}")]
    Decode(#[from] DecodeError),
    /// A delta starts from another version than the replica holds: one was missed or repeated.
    /// The replica must start over from an image.
    #[error("feed delta starts at version {got}, the replica is at {expected}")]
    Gap {
        /// The replica's version.
        expected: u64,
        /// The delta's base.
        got: u64,
    },
    /// A spawn would take the replica past its entity cap.
    #[error("the replica holds its cap of {cap} entities")]
    EntityCap {
        /// The cap ([`Replica::set_max_entities`]).
        cap: usize,
    },
    /// The origin's world holds a value its own schema refuses (a bug, never input).
    #[error("feed not written: {0}")]
    Encode(#[from] EncodeError),
    /// A checked delta still did not fit the replica's world (a bug, never input). The replica
    /// must start over from an image.
    #[error("replica out of step: {0}")]
    Replica(#[from] WorldError),
}
