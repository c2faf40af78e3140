//! The "arena" workload (defined in `docs/WORKLOADS.md`; section numbers below are its arena
//! chapter's): its formulas ([`math`]), the zone kind a
//! host runs ([`zone::ArenaZone`], registered as [`KIND`]), and the probe client's validator
//! ([`probe::Probe`]).
//!
//! Mapping onto Zonekeep (WORKLOADS.md arena §2.5): the root `tick` is the Delta's `tick`; `npcs` are
//! entities of kind `npc` (id = NPC index, spawned first so ids are `0..M`) with the position as
//! the entity position and `hp` as a `uint` field; `players` are entities of kind `player` (id ≥ M)
//! with the position only, controlled by their client (the Delta's CONTROL field names it).
//! Positions travel quantized with the declared `pos_step` (PROTOCOL.md §3.4).

pub mod local;
pub mod module;
pub mod probe;
pub mod zone;

/// The workload's definition, from `zonekeep-workload` (shared with its zone module).
pub use zonekeep_workload::{math, ArenaParams, Scenario, KIND_NPC, KIND_PLAYER};

/// The zone kind name hosts register the arena workload under.
pub const KIND: &str = "arena-workload";
