//! `Patch`: one Delta as the application sees it — absolute positions instead of wire deltas.
//!
//! The connection decodes each Delta against its mirror (which tracks the quantized positions the
//! server last sent), then hands out a `Patch` whose positions are plain `f32` world coordinates, so
//! the replica and the game never deal with quantization or the known set.

use zonekeep_protocol::schema::FieldValue;

/// An entity that entered the view, with its full state.
#[derive(Debug, Clone, PartialEq)]
pub struct SpawnedEntity {
    /// Entity id.
    pub id: u32,
    /// Kind index into the schema.
    pub kind: u32,
    /// Position x (dequantized).
    pub x: f32,
    /// Position y (dequantized).
    pub y: f32,
    /// Every field of the kind, in schema order.
    pub fields: Vec<FieldValue>,
}

/// A change to an entity already known.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdatedEntity {
    /// Entity id.
    pub id: u32,
    /// The new position, if it moved.
    pub pos: Option<(f32, f32)>,
    /// Changed fields as (field index, new value), ascending by index.
    pub fields: Vec<(u8, FieldValue)>,
}

/// One decoded Delta, resolved to ids and absolute positions. Events travel as separate
/// [`crate::Event::Event`]s right after the patch.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Patch {
    /// The server tick of this patch.
    pub tick: u64,
    /// The last input sequence the zone processed for this player (0 = none).
    pub ack: u32,
    /// The known set was cleared before this patch (first after Welcome, after a resume).
    pub baseline: bool,
    /// `Some(x)` when the controlled entity changed: `Some(Some(id))` or `Some(None)` for none.
    pub control: Option<Option<u32>>,
    /// Entities that left the view or the world.
    pub despawns: Vec<u32>,
    /// Entities already known that changed.
    pub updates: Vec<UpdatedEntity>,
    /// Entities that entered the view.
    pub spawns: Vec<SpawnedEntity>,
    /// Size of the Delta message (payload bytes, without WebSocket framing).
    pub bytes: usize,
}
