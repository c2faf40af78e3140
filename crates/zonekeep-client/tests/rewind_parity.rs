//! Lag compensation draws what the SDK drew: a zone's frames for one player, quiet ones skipped as
//! the server skips them and with a byte budget deferring moves, go through the client's mirror
//! into its `Replica`; at every tick the replica draws, the host's `Rewind` for that view tick
//! places every entity where the replica did and draws exactly the same set.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use zonekeep_client::{Patch, Replica, ReplicaConfig, SpawnedEntity, Timing, UpdatedEntity};
use zonekeep_core::{
    Claims, Clock, Ctx, EntityId, InputRefusal, LagCompensation, ManualClock, PlayerId, Principal,
    Role, Zone, ZoneConfig, ZoneError, ZoneHost, ZoneInit,
};
use zonekeep_protocol::mirror::Mirror;
use zonekeep_protocol::quant::pos_decode;
use zonekeep_protocol::schema::KindDef;

/// Entities on scripted paths: some walk, some stand still for a stretch, some come and go.
struct Paths {
    kind: zonekeep_core::KindId,
    live: BTreeMap<u32, EntityId>,
}

impl Zone for Paths {
    type Input = ();

    fn create(_init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let kind = ctx
            .world()
            .declare_kind(KindDef {
                name: "walker".into(),
                fields: vec![],
            })
            .unwrap();
        Ok(Self {
            kind,
            live: BTreeMap::new(),
        })
    }

    fn lag_compensation(&self) -> Option<LagCompensation> {
        Some(LagCompensation {
            history_ticks: 1_000,
            max_view_delay: Duration::from_secs(1_000),
            colliders: vec![],
        })
    }

    fn sanitize(&mut self, _p: PlayerId, _payload: &[u8]) -> Result<(), InputRefusal> {
        Ok(())
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        let t = ctx.tick();
        for n in 0..24u32 {
            let born = u64::from(n % 5) * 9;
            let dies = 60 + u64::from(n % 4) * 13;
            let alive = (born..dies).contains(&t);
            match (alive, self.live.get(&n).copied()) {
                (true, None) => {
                    let id = ctx.world().spawn(self.kind, n as f32, 0.0).unwrap();
                    self.live.insert(n, id);
                }
                (false, Some(id)) => {
                    ctx.world().despawn(id).unwrap();
                    self.live.remove(&n);
                }
                _ => {}
            }
            if let Some(&id) = self.live.get(&n) {
                // Everything stands still from tick 40 to 52 (quiet frames), and every third
                // entity pauses every other stretch of seven ticks.
                let still = (40..52).contains(&t) || (n % 3 == 0 && (t / 7) % 2 == 1);
                if !still {
                    let (x, y) = ctx.world_ref().pos(id).unwrap();
                    let dx = 0.25 + 0.125 * (n % 4) as f32;
                    let dy = if (t / 11) % 2 == 0 { 0.5 } else { -0.375 };
                    ctx.world().set_pos(id, x + dx, y + dy).unwrap();
                }
            }
        }
    }
}

#[test]
fn the_rewind_draws_what_the_sdk_replica_drew() {
    let clock = ManualClock::new();
    let mut config = ZoneConfig {
        patch_every: 3,
        ..ZoneConfig::default()
    };
    config.replication.pos_step = 1.0 / 64.0;
    // Small enough that moves are deferred.
    config.replication.budget = Some(48);
    let init = ZoneInit {
        zone_id: "paths-1".into(),
        kind: "paths".into(),
        params: serde_json::Value::Null,
    };
    let mut host = ZoneHost::new::<Paths>(init, config, Arc::new(clock.clone())).unwrap();
    let me = host
        .handle_join(Principal::new("ann"), Claims::new(), Role::Player)
        .unwrap();
    let schema = host.schema();
    let step = schema.pos_step;

    // Collect the frames the server would send (quiet ones skipped: the ack never changes).
    let mut mirror = Mirror::new();
    let mut patches = Vec::new();
    let (mut quiet, mut deferred) = (0, 0);
    for _ in 0..100 {
        clock.advance(host.config().dt());
        host.advance(clock.now());
        let frames: Vec<(bool, Vec<u8>)> = host
            .drain_frames()
            .unwrap()
            .filter(|f| f.player == me)
            .map(|f| (f.quiet, f.bytes.to_vec()))
            .collect();
        deferred += host.last_build_stats().deferred;
        for (is_quiet, bytes) in frames {
            if is_quiet && !patches.is_empty() {
                quiet += 1;
                continue;
            }
            let delta = mirror.decode_apply(&bytes, &schema).unwrap();
            let dec = |id: u32| {
                let e = mirror.get(id).unwrap();
                (pos_decode(e.qx, step), pos_decode(e.qy, step))
            };
            patches.push(Patch {
                tick: delta.tick,
                ack: delta.ack,
                baseline: delta.baseline,
                control: delta.control,
                despawns: delta.despawns.clone(),
                updates: delta
                    .updates
                    .iter()
                    .map(|u| UpdatedEntity {
                        id: u.id,
                        pos: u.pos.map(|_| dec(u.id)),
                        fields: u.fields.clone(),
                    })
                    .collect(),
                spawns: delta
                    .spawns
                    .iter()
                    .map(|s| SpawnedEntity {
                        id: s.id,
                        kind: s.kind,
                        x: pos_decode(s.qx, step),
                        y: pos_decode(s.qy, step),
                        fields: s.fields.clone(),
                    })
                    .collect(),
                bytes: bytes.len(),
            });
        }
    }
    assert!(quiet > 0, "the still stretch gives quiet frames");
    assert!(deferred > 0, "the budget defers moves");

    // The replica draws a fixed delay behind: render tick = server tick − delay.
    let delay = 6.0;
    let mut cfg = ReplicaConfig::for_zone(30, 3);
    cfg.min_delay_ticks = delay;
    cfg.max_delay_ticks = delay;
    let mut replica = Replica::new(cfg);
    for p in &patches {
        replica.apply(p);
    }
    let first = patches.first().unwrap().tick;
    let last = patches.last().unwrap().tick;
    let mut compared = 0;
    for view in first..=last {
        let render = replica.frame(Timing {
            server_tick: view as f64 + delay,
            one_way_ticks: 0.0,
            jitter_ticks: 0.0,
        });
        assert_eq!(render, view as f64);
        let rewind = host.rewind_at(me, u32::try_from(view).unwrap()).unwrap();
        assert_eq!(rewind.tick(), view);
        let sdk: Vec<(u32, (f32, f32))> = replica.iter().map(|e| (e.id, (e.x, e.y))).collect();
        let ours: Vec<(u32, (f32, f32))> = rewind.drawn().map(|(id, p)| (id.0, p)).collect();
        let ids = |v: &[(u32, (f32, f32))]| v.iter().map(|e| e.0).collect::<Vec<_>>();
        assert_eq!(ids(&ours), ids(&sdk), "drawn set at tick {view}");
        for ((id, a), (_, b)) in ours.iter().zip(&sdk) {
            let close = (a.0 - b.0).abs() < 1e-4 && (a.1 - b.1).abs() < 1e-4;
            assert!(close, "entity {id} at tick {view}: rewind {a:?}, sdk {b:?}");
            assert_eq!(rewind.position_at(EntityId(*id)), Some(*a));
            compared += 1;
        }
    }
    assert!(compared > 500, "compared {compared} positions");
}
