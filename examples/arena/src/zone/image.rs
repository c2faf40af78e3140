//! The arena's image: its whole in-memory state, so a running arena can be recorded and the
//! recording replayed tick for tick (see `zonekeep_core::image`). Unlike a save it keeps entity
//! ids, positions, drone paths and pending pickups' ticks exactly; it is JSON, whose `f32`
//! text round-trips every finite value bit for bit.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use zonekeep_core::world::{EntityId, KindId, World};
use zonekeep_core::{Ctx, PlayerId, ZoneError};

use super::pickups::Pickup;
use super::{Arena, ArenaStats, Avatar, Drone, Kinds};
use crate::drones::DronePath;
use crate::movement::MoveState;
use zonekeep_arena_rules::save::Pending;

/// The image's layout version (an image is read back only by the build that wrote it; the
/// version makes a mismatch a clear refusal rather than a confusing one).
const IMAGE_VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct Image {
    version: u32,
    /// Kind ids of player, drone, pickup, pillar.
    kinds: [u32; 4],
    tick: u64,
    /// Player id, entity id, principal, x, y.
    players: Vec<(u32, u32, String, f32, f32)>,
    /// Entity id and path.
    drones: Vec<(u32, DronePath)>,
    /// Each pickup and its entity, if present.
    pickups: Vec<(Pickup, Option<u32>)>,
    scores: BTreeMap<String, u32>,
    pending: BTreeMap<String, Pending>,
    /// Picked, saved, refused, fact overflow.
    stats: [u64; 4],
}

fn refused(why: impl std::fmt::Display) -> ZoneError {
    ZoneError::Restore(format!("arena image: {why}"))
}

/// An entity id from the image, which must be alive in the world the host brought back.
fn entity(world: &World, id: u32) -> Result<EntityId, ZoneError> {
    let id = EntityId(id);
    if world.contains(id) {
        Ok(id)
    } else {
        Err(refused(format!("entity {} is not in the world", id.0)))
    }
}

impl Arena {
    /// The arena's image (see the module docs).
    pub(super) fn take_image(&self) -> Option<Vec<u8>> {
        let k = &self.kinds;
        let image = Image {
            version: IMAGE_VERSION,
            kinds: [k.player.0, k.drone.0, k.pickup.0, k.pillar.0],
            tick: self.tick,
            players: self
                .players
                .iter()
                .map(|(id, a)| (id.0, a.entity.0, a.principal.clone(), a.state.x, a.state.y))
                .collect(),
            drones: self
                .drones
                .iter()
                .map(|d| (d.entity.0, d.path.clone()))
                .collect(),
            pickups: self
                .pickups
                .iter()
                .map(|p| (p.clone(), p.entity.map(|e| e.0)))
                .collect(),
            scores: self.scores.clone(),
            pending: self.pending.clone(),
            stats: [
                self.stats.picked,
                self.stats.saved,
                self.stats.refused,
                self.stats.fact_overflow,
            ],
        };
        serde_json::to_vec(&image).ok()
    }

    /// Reads an image back; the world in `ctx` is the one the image was taken with.
    pub(super) fn from_image_bytes(ctx: &mut Ctx<'_>, bytes: &[u8]) -> Result<Arena, ZoneError> {
        let image: Image = serde_json::from_slice(bytes).map_err(refused)?;
        if image.version != IMAGE_VERSION {
            return Err(refused(format!(
                "version {} (this code reads {IMAGE_VERSION})",
                image.version
            )));
        }
        let world = ctx.world_ref();
        let declared = world.kinds().len();
        if let Some(k) = image.kinds.iter().find(|k| **k as usize >= declared) {
            return Err(refused(format!("kind {k} is not declared")));
        }
        let [player, drone, pickup, pillar] = image.kinds.map(KindId);
        let mut players = BTreeMap::new();
        for (id, e, principal, x, y) in image.players {
            let avatar = Avatar {
                entity: entity(world, e)?,
                principal,
                state: MoveState { x, y },
            };
            players.insert(PlayerId(id), avatar);
        }
        let drones = image
            .drones
            .into_iter()
            .map(|(e, path)| {
                Ok(Drone {
                    entity: entity(world, e)?,
                    path,
                })
            })
            .collect::<Result<Vec<_>, ZoneError>>()?;
        let pickups = image
            .pickups
            .into_iter()
            .map(|(mut p, e)| {
                p.entity = e.map(|e| entity(world, e)).transpose()?;
                Ok(p)
            })
            .collect::<Result<Vec<_>, ZoneError>>()?;
        let [picked, saved, refused_inputs, fact_overflow] = image.stats;
        Ok(Arena {
            kinds: Kinds {
                player,
                drone,
                pickup,
                pillar,
            },
            tick: image.tick,
            players,
            drones,
            pickups,
            scores: image.scores,
            pending: image.pending,
            stats: ArenaStats {
                picked,
                saved,
                refused: refused_inputs,
                fact_overflow,
            },
        })
    }
}
