//! Recording a running zone from its image: the replay starts where the zone was, bit for bit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rand_core::RngCore;

use super::*;
use crate::{
    Claims, Clock, Ctx, EntityId, FactOutcome, ImageError, InputPolicy, InputRefusal, JoinRefusal,
    KindId, LeaveReason, ManualClock, PlayerId, PlayerInfo, Principal, Role, Settlement, TimerId,
    Zone, ZoneConfig, ZoneError, ZoneHost, ZoneInit, ZoneKinds,
};

/// Drifters wander by the zone's RNG every tick; an input turns a drifter and starts a cooldown
/// kept outside the world; a timer every 7 ticks emits a fact; leaving despawns. Its save keeps
/// only the score, so a replay from a snapshot would diverge at once; its image keeps it all.
struct Drifters {
    kind: KindId,
    /// Per player: entity, position, heading, cooldown ticks.
    drifters: BTreeMap<PlayerId, (EntityId, (i32, i32), i32, u32)>,
    score: u64,
}

type DrifterImage = (u32, Vec<(u32, u32, (i32, i32), i32, u32)>, u64);

impl Zone for Drifters {
    type Input = i8;

    fn create(_init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let kind = ctx
            .world()
            .declare_kind(zonekeep_protocol::schema::KindDef {
                name: "drifter".into(),
                fields: vec![],
            })
            .map_err(|e| ZoneError::Failed(e.to_string()))?;
        ctx.timers()
            .every(7, 1)
            .map_err(|e| ZoneError::Failed(e.to_string()))?;
        Ok(Self {
            kind,
            drifters: BTreeMap::new(),
            score: 0,
        })
    }

    fn save(&self) -> Option<Vec<u8>> {
        serde_json::to_vec(&self.score).ok()
    }

    fn restore(init: &ZoneInit, ctx: &mut Ctx<'_>, bytes: &[u8]) -> Result<Self, ZoneError> {
        let mut z = Self::create(init, ctx)?;
        z.score = serde_json::from_slice(bytes).map_err(|e| ZoneError::Restore(e.to_string()))?;
        Ok(z)
    }

    fn image(&self) -> Option<Vec<u8>> {
        let drifters = self
            .drifters
            .iter()
            .map(|(p, (e, pos, h, c))| (p.0, e.0, *pos, *h, *c))
            .collect();
        let image: DrifterImage = (self.kind.0, drifters, self.score);
        serde_json::to_vec(&image).ok()
    }

    fn from_image(_init: &ZoneInit, _ctx: &mut Ctx<'_>, bytes: &[u8]) -> Result<Self, ZoneError> {
        let (kind, drifters, score): DrifterImage =
            serde_json::from_slice(bytes).map_err(|e| ZoneError::Restore(e.to_string()))?;
        Ok(Self {
            kind: KindId(kind),
            drifters: drifters
                .into_iter()
                .map(|(p, e, pos, h, c)| (PlayerId(p), (EntityId(e), pos, h, c)))
                .collect(),
            score,
        })
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, p: &PlayerInfo) -> Result<(), JoinRefusal> {
        let x = (ctx.rng().next_u32() % 50) as i32;
        let e = ctx
            .world()
            .spawn(self.kind, x as f32, 0.0)
            .map_err(|e| JoinRefusal::new(1, e.to_string()))?;
        self.drifters.insert(p.id, (e, (x, 0), 1, 0));
        Ok(())
    }

    fn on_leave(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, _why: LeaveReason) {
        if let Some((e, ..)) = self.drifters.remove(&player) {
            let _ = ctx.world().despawn(e);
        }
    }

    fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<i8, InputRefusal> {
        match payload {
            [b] => Ok(*b as i8),
            _ => Err(InputRefusal::new(1, "one byte")),
        }
    }

    fn on_input(&mut self, _ctx: &mut Ctx<'_>, player: PlayerId, turn: i8) {
        if let Some((_, _, heading, cooldown)) = self.drifters.get_mut(&player) {
            if *cooldown == 0 {
                *heading = i32::from(turn.signum());
                *cooldown = 3;
            }
        }
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        for (e, (x, y), heading, cooldown) in self.drifters.values_mut() {
            *cooldown = cooldown.saturating_sub(1);
            *x += *heading;
            *y += (ctx.rng().next_u32() % 3) as i32 - 1;
            let _ = ctx.world().set_pos(*e, *x as f32, *y as f32);
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, _id: TimerId, _tag: u64) {
        let _ = ctx.emit_fact(
            "drift",
            serde_json::json!({"n": self.drifters.len()}),
            None,
            None,
        );
    }

    fn on_fact_settled(&mut self, _ctx: &mut Ctx<'_>, _s: &Settlement) {
        self.score += 1;
    }
}

fn kinds() -> ZoneKinds {
    let mut k = ZoneKinds::new();
    k.register::<Drifters>("drifters");
    k
}

struct Run {
    host: ZoneHost,
    clock: ManualClock,
    file: Vec<u8>,
}

impl Run {
    fn new() -> Self {
        let clock = ManualClock::new();
        clock.set(Duration::from_millis(500));
        let init = ZoneInit {
            zone_id: "drift-1".into(),
            kind: "drifters".into(),
            params: serde_json::json!({}),
        };
        let config = ZoneConfig {
            world_seed: 7,
            input_policy: InputPolicy::Next,
            input_buffer: 8,
            ..ZoneConfig::default()
        };
        let host = kinds()
            .create_at(init, config, Arc::new(clock.clone()), 2)
            .unwrap();
        Self {
            host,
            clock,
            file: Vec::new(),
        }
    }

    fn join(&mut self, name: &str, role: Role) -> PlayerId {
        self.host
            .handle_join(Principal::new(name), Claims::new(), role)
            .unwrap()
    }

    /// `ms` later: advance, hand out frames, settle every fact (the odd ones refused).
    fn step(&mut self, ms: u64) {
        self.clock.advance(Duration::from_millis(ms));
        let report = self.host.advance(self.clock.now());
        if !report.patch_ticks.is_empty() {
            let _ = self.host.drain_frames().unwrap().count();
        }
        for (i, f) in self.host.drain_facts().into_iter().enumerate() {
            let outcome = if i % 2 == 0 {
                FactOutcome::Ok(serde_json::json!({}))
            } else {
                FactOutcome::Refused("full".into())
            };
            self.host.handle_settlement(Settlement {
                key: f.key,
                outcome,
            });
        }
        self.file.extend(self.host.take_recorded());
    }
}

/// Plays with churn: joins, leaves (many, so the world compacts its tombstones), a drop, inputs
/// that queue up (one is consumed per tick).
fn warm_up(run: &mut Run) -> (PlayerId, PlayerId) {
    let a = run.join("ann", Role::Player);
    let b = run.join("bob", Role::Player);
    run.join("eve", Role::Observer);
    for i in 0..90u32 {
        let extra = run.join(&format!("guest{i}"), Role::Player);
        if i % 3 != 0 {
            run.host.handle_leave(extra, LeaveReason::Left).unwrap();
        }
        run.host
            .handle_input(a, i + 1, 0, &[if i % 2 == 0 { 1 } else { 255 }]);
        run.step(if i % 4 == 0 { 50 } else { 33 });
    }
    run.host.handle_drop(b).unwrap();
    // Three inputs wait in a's queue when the recording starts.
    for seq in 100..103u32 {
        run.host.handle_input(a, seq, 0, &[(seq % 2) as u8]);
    }
    (a, b)
}

#[test]
fn a_running_zone_is_recorded_from_its_image_and_replays_tick_for_tick() {
    let mut run = Run::new();
    let (a, b) = warm_up(&mut run);
    run.host.start_recording(RecordLimits::default()).unwrap();
    run.file.extend(run.host.take_recorded());
    for i in 0..80u32 {
        run.host.handle_input(a, 200 + i, 0, &[(i % 3) as u8]);
        if i == 10 {
            run.host.handle_rejoin(b).unwrap();
        }
        if i == 40 {
            let c = run.join("cat", Role::Player);
            run.host.handle_input(c, 1, 0, &[1]);
        }
        run.step(33);
    }
    let (rest, _) = run.host.end_recording().unwrap();
    run.file.extend(rest);

    let (header, _) = RecordReader::open(&run.file).unwrap();
    assert!(matches!(header.origin, Origin::Image { .. }));
    assert!(header.start_tick > 90);
    let report = replay(&kinds(), &run.file).unwrap();
    assert!(report.matched(), "{report}");
    assert!(report.from_image && !report.from_creation);
    assert!(report.ticks_matched >= 79, "{report}");
}

#[test]
fn the_image_brings_back_what_the_next_ticks_depend_on() {
    // Two hosts: the original, and one built from its image. Fed the same calls, they stay equal
    // tick for tick (world hash, facts in flight, acknowledged input sequence).
    let mut run = Run::new();
    let (a, _b) = warm_up(&mut run);
    let image = run.host.image().unwrap();
    let init = run.host.init().clone();
    let config = run.host.config().clone();
    let clock = ManualClock::new();
    // A host built from an image starts its schedule at the clock reading, with one slot to
    // wait: this reading puts its next slot where the original's is.
    clock.set(run.host.next_tick_due() - run.host.config().dt());
    let mut copy = kinds()
        .from_image(init, config, Arc::new(clock.clone()), &image)
        .unwrap();
    assert_eq!(copy.tick(), run.host.tick());
    assert_eq!(copy.state_hash(), run.host.state_hash());
    assert_eq!(copy.facts_in_flight(), run.host.facts_in_flight());
    for i in 0..40u32 {
        for host in [&mut run.host, &mut copy] {
            host.handle_input(a, 300 + i, 0, &[(i % 2) as u8]);
        }
        run.clock.advance(Duration::from_millis(33));
        clock.set(run.clock.now());
        run.host.advance(run.clock.now());
        copy.advance(clock.now());
        assert_eq!(copy.tick(), run.host.tick());
        assert_eq!(
            copy.state_hash(),
            run.host.state_hash(),
            "tick {}",
            copy.tick()
        );
        assert_eq!(copy.last_processed_seq(a), run.host.last_processed_seq(a));
        let keys = |h: &mut ZoneHost| {
            h.drain_facts()
                .into_iter()
                .map(|f| f.key)
                .collect::<Vec<_>>()
        };
        assert_eq!(keys(&mut copy), keys(&mut run.host));
    }
}

#[test]
fn a_damaged_image_is_refused_with_its_reason() {
    let mut run = Run::new();
    warm_up(&mut run);
    let image = run.host.image().unwrap();
    let build = |bytes: &[u8]| {
        kinds()
            .from_image(
                run.host.init().clone(),
                run.host.config().clone(),
                Arc::new(ManualClock::new()),
                bytes,
            )
            .map(|_| ())
    };
    let mut flipped = image.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 1;
    assert_eq!(build(&flipped), Err(ImageError::Checksum));
    for cut in [0, 3, 10, image.len() / 2, image.len() - 1] {
        assert!(build(&image[..cut]).is_err(), "cut at {cut}");
    }
    assert_eq!(build(&image), Ok(()));
}
