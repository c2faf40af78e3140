//! The arena's game constants: what both the native zone and the module agree on, and what the
//! page reads off the wire (kind and field names, event topics).

/// How far a player sees, in world units: farther entities are not sent to it.
pub const VIEW_RADIUS: f32 = 24.0;
/// Radius of the area around the arena's centre where players appear (well inside each other's view,
/// so two new players always see each other).
pub const SPAWN_RADIUS: f32 = 8.0;
/// A pickup's radius; touching it (centres closer than this plus the player's radius) collects it.
pub const PICKUP_RADIUS: f32 = 0.5;
/// Ticks before a collected pickup appears again elsewhere (5 s at 30 Hz).
pub const RESPAWN_TICKS: u64 = 150;
/// Default number of drones.
pub const DEFAULT_DRONES: u32 = 32;
/// Default number of pickups.
pub const DEFAULT_PICKUPS: u32 = 24;
/// Most drones or pickups a zone may be created with.
pub const MAX_NPCS: u32 = 512;
/// Score added by one pickup.
pub const PICKUP_SCORE: u32 = 1;
/// The fact kind a pickup emits.
pub const FACT_PICKUP: &str = "arena.pickup";
/// Most players in one arena.
pub const MAX_PLAYERS: u32 = 64;

/// Event topic: you collected a pickup (payload: `u32` LE amount, pending until saved).
pub const TOPIC_PICKED: u16 = 1;
/// Event topic: a pickup's fact settled (payload: `u32` LE amount, then `u32` LE saved total).
pub const TOPIC_SAVED: u16 = 2;
/// Event topic: a pickup's fact was refused by the sink (payload: UTF-8 reason).
pub const TOPIC_REFUSED: u16 = 3;

/// Input refusal code: the payload is not one or two bytes.
pub const REFUSE_BAD_INPUT: u16 = 1;

/// Entity kind names, in schema order.
pub const KIND_PLAYER: &str = "player";
/// Drone kind name.
pub const KIND_DRONE: &str = "drone";
/// Pickup kind name.
pub const KIND_PICKUP: &str = "pickup";
/// Pillar kind name.
pub const KIND_PILLAR: &str = "pillar";

/// Player field: display name.
pub const F_NAME: usize = 0;
/// Player field: hue in degrees.
pub const F_HUE: usize = 1;
/// Player field: saved score.
pub const F_SCORE: usize = 2;
/// Player field: whether the player's connection is up. False while a dropped player waits out the
/// reconnect grace (its avatar stays in the world so it can resume), so pages can show it as gone.
pub const F_CONNECTED: usize = 3;
/// Pillar field: radius (exact `f32`, so clients collide with the same value).
pub const F_RADIUS: usize = 0;

/// Version of an arena save's format (JSON: scores, unsettled facts, pickups), the same for the
/// native zone and the module ([`save`](crate::save)).
pub const SAVE_VERSION: u32 = 1;

/// Whether a player at `(x, y)` touches a pickup at `(px, py)`.
pub fn touches(x: f32, y: f32, px: f32, py: f32) -> bool {
    let reach = PICKUP_RADIUS + crate::movement::PLAYER_RADIUS;
    let (dx, dy) = (x - px, y - py);
    dx * dx + dy * dy <= reach * reach
}

/// The create param `key` (`drones` or `pickups`) of a params object: absent or null is
/// `default`, else a whole number up to [`MAX_NPCS`].
pub fn count_param(
    value: Option<&serde_json::Value>,
    key: &str,
    default: u32,
) -> Result<u32, String> {
    match value {
        None | Some(serde_json::Value::Null) => Ok(default),
        Some(v) => v
            .as_u64()
            .filter(|n| *n <= u64::from(MAX_NPCS))
            .map(|n| n as u32)
            .ok_or_else(|| format!("{key} must be 0..={MAX_NPCS}")),
    }
}
