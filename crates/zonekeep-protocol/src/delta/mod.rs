//! The Delta message (PROTOCOL.md §5.5): one subscriber's patch. [`write`](mod@write) is the streaming encoder the
//! host uses to build frames without intermediate structures; [`read`] decodes a Delta against the
//! client's known set into the owned [`Delta`] value. A State (§5.8) is a Delta with a `base` tick
//! after its own tick; both share this code.

pub mod read;
pub mod write;

pub use read::{decode_delta, decode_delta_head, Delta, DeltaHead, Event, Spawn, Update};
pub use write::{write_spawn_body, write_update_record, DeltaHeader, DeltaWriter, PosUpdate};

/// The Delta message tag.
pub const TAG_DELTA: u8 = 0x82;
/// The State message tag (PROTOCOL.md §5.8): a Delta against an acknowledged base, sent as a
/// datagram on a WebTransport session.
pub const TAG_STATE: u8 = 0x89;
/// Flag bit: the client clears its known set first.
pub const FLAG_BASELINE: u8 = 1;
/// Flag bit: a control field follows.
pub const FLAG_CONTROL: u8 = 2;
/// Flag bit: an events section ends the message.
pub const FLAG_EVENTS: u8 = 4;

/// The mask bit of field `i` (0 for `i >= 32`, which no valid kind has).
pub(crate) fn field_bit(i: usize) -> u32 {
    u32::try_from(i)
        .ok()
        .and_then(|i| 1u32.checked_shl(i))
        .unwrap_or(0)
}

/// An update record's position part exactly as it appears on the wire (§5.5.3), so a decoded Delta
/// re-encodes to the same bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PosForm {
    /// Header-only tiny move, both in −5..=5; carries no fields.
    Tiny {
        /// Change of `qx`.
        dx: i32,
        /// Change of `qy`.
        dy: i32,
    },
    /// Pos mode 1: one byte of two 4-bit two's complement nibbles, each −8..=7.
    Nibbles {
        /// Change of `qx`.
        dx: i32,
        /// Change of `qy`.
        dy: i32,
    },
    /// Pos mode 2: zig-zag deltas.
    Delta {
        /// Change of `qx`.
        dx: i32,
        /// Change of `qy`.
        dy: i32,
    },
    /// Pos mode 3: absolute quantized position.
    Absolute {
        /// New `qx`.
        qx: i32,
        /// New `qy`.
        qy: i32,
    },
}

impl PosForm {
    /// The new quantized position given the one the client holds; `None` if it leaves the `i32` range
    /// (a Delta that does so is invalid).
    pub fn apply(&self, qx: i32, qy: i32) -> Option<(i32, i32)> {
        match *self {
            PosForm::Tiny { dx, dy } | PosForm::Nibbles { dx, dy } | PosForm::Delta { dx, dy } => {
                Some((qx.checked_add(dx)?, qy.checked_add(dy)?))
            }
            PosForm::Absolute { qx, qy } => Some((qx, qy)),
        }
    }
}
