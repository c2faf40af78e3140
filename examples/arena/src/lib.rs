//! The Zonekeep demo game: a top-down arena.
//!
//! Players move with WASD/arrows; the page sends intents ([`MoveInput`], a direction bitmask) and the
//! zone moves players with the shared [`step`] at 30 Hz, inside the arena and around pillars. NPC
//! drones fly loops, pickups respawn, and each pickup is a durable fact that raises the player's
//! saved score.
//!
//! The crate also holds a second game, the shooting [`gallery`]: targets on rails, hitscan shots
//! judged with lag compensation (or, when the page switches it off, against the present world);
//! and a third, the [`cells`]: one world cut into a grid of zones that players walk across.
//!
//! This crate owns the game rules ([`Arena`], registered by a host with [`zone_config`]) and the
//! page's built files ([`web_routes`], merged into the host's router). It depends on
//! `zonekeep-core`, `zonekeep-protocol` and axum's `Router` type, never on the server.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod cells;
pub mod gallery;
/// The rules shared with the arena module and the page: movement, layout, drones, identity.
pub use zonekeep_arena_rules::{drones, identity, map, movement};
pub mod web;
pub mod zone;

pub use cells::{cells_config, Cell};
pub use gallery::{gallery_config, Gallery};
pub use movement::{step, MoveInput, MoveState, Pillar};
pub use web::{embedded, web_routes, WebFile, FAVICON, WEB_FILES};
pub use zone::{
    arena_contract, character_score, character_with_score, zone_config, Arena, ArenaStats,
};
