//! The arena workload (`docs/WORKLOADS.md`, its arena chapter): its formulas ([`math`]) and its
//! parameters ([`ArenaParams`]). The bench's native zone, the same workload as a zone module
//! (`examples/workload-module`), the bots and the probe's validator all compute from here, so they
//! agree bit for bit.
//!
//! This crate owns the definition only. It depends on the protocol's schema types and serde, and
//! must never depend on a host, a runtime or I/O: it is compiled into a WebAssembly module too.

pub mod math;

use serde::{Deserialize, Serialize};
use zonekeep_protocol::schema::{FieldDef, FieldType, KindDef};

use math::ArenaConsts;

/// Kind index of NPC entities in the schema.
pub const KIND_NPC: u32 = 0;
/// Kind index of player entities in the schema.
pub const KIND_PLAYER: u32 = 1;

/// Which scenario of WORKLOADS.md arena §4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Scenario {
    /// A "broadcast": every client receives every change of every entity.
    #[default]
    #[serde(rename = "A")]
    Broadcast,
    /// B "interest": each client receives the entities within `R` of its player.
    #[serde(rename = "B")]
    Interest,
}

impl Scenario {
    /// `"A"` or `"B"`.
    pub fn letter(self) -> &'static str {
        match self {
            Scenario::Broadcast => "A",
            Scenario::Interest => "B",
        }
    }
}

/// The workload's parameters: what the zone is created with and what bots and the probe assume.
/// Serialized as the zone's create params (`{"scenario":"B","npcs":1000,…}`); absent keys take the
/// The workload's defaults (WORKLOADS.md arena §1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ArenaParams {
    /// Scenario A or B.
    pub scenario: Scenario,
    /// `M`, server-driven NPCs.
    pub npcs: u32,
    /// NPC PRNG seed.
    pub seed: u32,
    /// Interest radius `R` (scenario B).
    pub radius: f64,
    /// Declared position quantum (PROTOCOL.md §3.4); the probe checks positions against it.
    pub pos_step: f32,
    /// Byte budget per patch per client (`None` = unlimited; the crowded B run uses 1,200).
    pub budget: Option<usize>,
    /// Crowded variant: players spawn and stay inside the square of half side `crowd_half` around
    /// the world centre (their clamp bounds instead of `[0, W]`), so with `crowd_half <= R / √2 / 2`
    /// every player is always within one view radius of every other. Bots send the same inputs.
    pub crowd_half: Option<f64>,
    /// Most players the zone admits.
    pub max_players: u32,
    /// The fixed formula constants (WORKLOADS.md arena §1).
    #[serde(skip)]
    pub consts: ArenaConsts,
}

impl Default for ArenaParams {
    fn default() -> Self {
        Self {
            scenario: Scenario::Broadcast,
            npcs: 1000,
            seed: 42,
            radius: 150.0,
            pos_step: 0.1,
            budget: None,
            crowd_half: None,
            max_players: 10_000,
            consts: ArenaConsts::default(),
        }
    }
}

impl ArenaParams {
    /// The schema kinds, in [`KIND_NPC`], [`KIND_PLAYER`] order.
    pub fn kinds() -> [KindDef; 2] {
        [
            KindDef {
                name: "npc".into(),
                fields: vec![FieldDef {
                    name: "hp".into(),
                    ty: FieldType::UInt,
                }],
            },
            KindDef {
                name: "player".into(),
                fields: Vec::new(),
            },
        ]
    }

    /// The clamp bounds of player coordinates: `(0, W)`, or the crowd square.
    pub fn player_bounds(&self) -> (f64, f64) {
        let w = self.consts.world;
        match self.crowd_half {
            None => (0.0, w),
            Some(h) => (w / 2.0 - h, w / 2.0 + h),
        }
    }

    /// Bot `b`'s spawn: WORKLOADS.md arena §2.4, or in the crowded variant a point on a golden-angle spiral
    /// within `crowd_half` of the world centre (deterministic, evenly spread).
    pub fn spawn(&self, b: u32) -> (f32, f32) {
        match self.crowd_half {
            None => {
                let p = math::BotParams::new(b, self.consts.world);
                (p.x, p.y)
            }
            Some(r) => {
                let c = self.consts.world / 2.0;
                let golden = std::f64::consts::PI * (3.0 - 5f64.sqrt());
                // Radius grows with sqrt(b) up to r, wrapping after 1000 bots.
                let frac = ((b % 1000) as f64 + 0.5) / 1000.0;
                let d = r * frac.sqrt();
                let a = golden * f64::from(b);
                ((c + d * a.cos()) as f32, (c + d * a.sin()) as f32)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn params_round_trip_and_default_missing_keys() {
        let p: ArenaParams = serde_json::from_str(r#"{"scenario":"B","budget":1200}"#).unwrap();
        assert_eq!(p.scenario, Scenario::Interest);
        assert_eq!(p.budget, Some(1200));
        assert_eq!(p.npcs, 1000);
        let back: ArenaParams = serde_json::from_value(serde_json::to_value(p).unwrap()).unwrap();
        assert_eq!(back, p);
        assert!(serde_json::from_str::<ArenaParams>(r#"{"bogus":1}"#).is_err());
    }

    #[test]
    fn crowded_spawns_are_within_the_crowd_square() {
        let p = ArenaParams {
            crowd_half: Some(53.0),
            ..ArenaParams::default()
        };
        let (lo, hi) = p.player_bounds();
        assert_eq!((lo, hi), (447.0, 553.0));
        for b in 0..300 {
            let (x, y) = p.spawn(b);
            assert!(math::within((500.0, 500.0), (x, y), 53.0), "bot {b}");
        }
        // Opposite corners of the crowd square are within one view radius.
        assert!(math::within((447.0, 447.0), (553.0, 553.0), 150.0));
        assert_eq!(ArenaParams::default().spawn(0), (795.194_9, 827.687_9));
    }
}
