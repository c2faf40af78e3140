//! An arena's save, written and read by the native zone and the module alike: JSON of the scores
//! as last settled, the pickups' facts not yet settled, and the pickups. Players are not saved
//! (they join again) and drones are drawn again. (A module's save carries the guest SDK's header
//! in front of these bytes, so a zone cannot switch between the two with its save as it is.)

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::game::{MAX_NPCS, SAVE_VERSION};

/// A pickup's fact, emitted and not yet settled: whose score it raises and by how much.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    /// The principal whose score it raises.
    pub principal: String,
    /// By how much.
    pub amount: u32,
}

/// A pickup as saved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedPickup {
    /// Where it is (or was last).
    pub x: f32,
    /// Where it is (or was last).
    pub y: f32,
    /// 0: present; else the ticks until it comes back (at least 1).
    pub respawn_at: u64,
}

/// A whole save.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Saved {
    /// [`SAVE_VERSION`].
    pub version: u32,
    /// Each principal's score as last settled.
    pub scores: BTreeMap<String, u32>,
    /// Facts in flight, by key.
    pub pending: BTreeMap<String, Pending>,
    /// The pickups.
    pub pickups: Vec<SavedPickup>,
}

impl Saved {
    /// Reads a save, refusing another version or more pickups than a zone may have.
    pub fn read(bytes: &[u8]) -> Result<Saved, String> {
        let saved: Saved = serde_json::from_slice(bytes).map_err(|e| format!("arena save: {e}"))?;
        if saved.version != SAVE_VERSION {
            return Err(format!(
                "arena save version {} (this code reads {SAVE_VERSION})",
                saved.version
            ));
        }
        if saved.pickups.len() > MAX_NPCS as usize {
            return Err("arena save: too many pickups".into());
        }
        Ok(saved)
    }

    /// The save's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Serializing these plain maps and numbers cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// What a pickup present or waiting until tick `respawn_at` saves as at tick `now`: waiting
/// ticks are kept relative (at least 1, so it restores as waiting, never as present).
pub fn saved_pickup(x: f32, y: f32, present: bool, respawn_at: u64, now: u64) -> SavedPickup {
    SavedPickup {
        x,
        y,
        respawn_at: if present {
            0
        } else {
            respawn_at.saturating_sub(now).max(1)
        },
    }
}
