//! The host's replication wiring: frames follow the roster, views, `can_see`, events and acks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use zonekeep_protocol::mirror::Mirror;
use zonekeep_protocol::schema::{FieldDef, FieldType, KindDef};

use crate::replicate::SubscriberId;
use crate::{
    Claims, Clock, Ctx, EntityId, EventTarget, InputRefusal, JoinRefusal, KindId, ManualClock,
    PlayerId, PlayerInfo, Principal, ReplicationSettings, Role, Zone, ZoneConfig, ZoneError,
    ZoneHost, ZoneInit,
};

/// Each player gets a "walker" at x = 10 * id; input bytes move it by (dx, 0).
/// A "ghost" at (0, 0) is hidden from every player by `can_see`; observers focus on (500, 0).
/// Replication asks through `sight`, which counts how often it is asked for a viewer.
struct Walkers {
    walker: KindId,
    ghost: EntityId,
    mine: BTreeMap<PlayerId, EntityId>,
    sights: std::cell::Cell<u32>,
}

impl Zone for Walkers {
    type Input = i8;

    fn create(_init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let w = ctx.world();
        let walker = w
            .declare_kind(KindDef {
                name: "walker".into(),
                fields: vec![FieldDef {
                    name: "steps".into(),
                    ty: FieldType::UInt,
                }],
            })
            .map_err(|e| ZoneError::Failed(e.to_string()))?;
        let ghost_kind = w
            .declare_kind(KindDef {
                name: "ghost".into(),
                fields: vec![],
            })
            .map_err(|e| ZoneError::Failed(e.to_string()))?;
        let ghost = w
            .spawn(ghost_kind, 0.0, 0.0)
            .map_err(|e| ZoneError::Failed(e.to_string()))?;
        Ok(Walkers {
            walker,
            ghost,
            mine: BTreeMap::new(),
            sights: std::cell::Cell::new(0),
        })
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, p: &PlayerInfo) -> Result<(), JoinRefusal> {
        let x = 10.0 * p.id.0 as f32;
        let e = ctx.world().spawn(self.walker, x, 0.0).unwrap();
        ctx.set_control(p.id, Some(e));
        self.mine.insert(p.id, e);
        Ok(())
    }

    fn on_observe(&mut self, ctx: &mut Ctx<'_>, o: &PlayerInfo) -> Result<(), JoinRefusal> {
        ctx.set_view(o.id, Some(50.0), Some((500.0, 0.0)));
        Ok(())
    }

    fn on_leave(&mut self, ctx: &mut Ctx<'_>, p: PlayerId, _why: crate::LeaveReason) {
        if let Some(e) = self.mine.remove(&p) {
            ctx.world().despawn(e).unwrap();
        }
    }

    fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<i8, InputRefusal> {
        match payload {
            [b] => Ok(*b as i8),
            _ => Err(InputRefusal::new(1, "one byte")),
        }
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, p: PlayerId, dx: i8) {
        let Some(&e) = self.mine.get(&p) else { return };
        let (x, y) = ctx.world_ref().pos(e).unwrap();
        let w = ctx.world();
        w.set_pos(e, x + f32::from(dx), y).unwrap();
        let steps = w.get_uint(e, 0).unwrap();
        w.set_uint(e, 0, steps + 1).unwrap();
        if dx == 7 {
            ctx.emit_event(EventTarget::Player(p), 9, vec![1, 2]);
            ctx.emit_event(EventTarget::All, 3, vec![]);
        }
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}

    fn can_see(&self, _viewer: PlayerId, entity: EntityId, _world: &crate::World) -> bool {
        entity != self.ghost
    }

    fn sight<'a>(
        &'a self,
        viewer: PlayerId,
        world: &'a crate::World,
    ) -> impl FnMut(EntityId) -> bool + 'a {
        self.sights.set(self.sights.get() + 1);
        move |entity| self.can_see(viewer, entity, world)
    }
}

fn host(radius: f32) -> (ZoneHost, ManualClock) {
    let clock = ManualClock::new();
    let config = ZoneConfig {
        tick_hz: 10,
        replication: ReplicationSettings {
            view_radius: radius,
            cell_size: 32.0,
            margin: 2.0,
            ..ReplicationSettings::default()
        },
        ..ZoneConfig::default()
    };
    let init = ZoneInit {
        zone_id: "walkers-1".into(),
        kind: "walkers".into(),
        params: serde_json::Value::Null,
    };
    (
        ZoneHost::new::<Walkers>(init, config, Arc::new(clock.clone())).unwrap(),
        clock,
    )
}

fn join(h: &mut ZoneHost, name: &str, role: Role) -> PlayerId {
    h.handle_join(Principal::new(name), Claims::new(), role)
        .unwrap()
}

/// One tick, then every frame applied to its participant's mirror.
fn step(h: &mut ZoneHost, clock: &ManualClock, mirrors: &mut BTreeMap<PlayerId, Mirror>) {
    clock.advance(Duration::from_millis(100));
    let report = h.advance(clock.now());
    assert_eq!(report.patch_ticks.len(), 1);
    let schema = h.schema();
    for f in h.drain_frames().unwrap() {
        mirrors
            .entry(f.player)
            .or_default()
            .decode_apply(f.bytes, &schema)
            .unwrap();
    }
}

#[test]
fn players_see_each_other_but_not_hidden_entities_and_control_is_sent() {
    let (mut h, clock) = host(f32::INFINITY);
    let a = join(&mut h, "a", Role::Player);
    let b = join(&mut h, "b", Role::Player);
    let mut m = BTreeMap::new();
    step(&mut h, &clock, &mut m);
    for p in [a, b] {
        let mirror = &m[&p];
        assert_eq!(mirror.len(), 2, "both walkers, never the ghost");
        let control = mirror.control().unwrap();
        assert_eq!(
            Some(&EntityId(control)),
            h.zone::<Walkers>().unwrap().mine.get(&p)
        );
    }
}

#[test]
fn each_viewer_is_asked_for_its_sight_once_a_patch() {
    let (mut h, clock) = host(f32::INFINITY);
    let players = ["a", "b", "c"].map(|n| join(&mut h, n, Role::Player));
    let mut m = BTreeMap::new();
    step(&mut h, &clock, &mut m);
    step(&mut h, &clock, &mut m);
    // Three walkers and a ghost in everyone's range: two patches, three viewers, six sights,
    // however many entities each one was asked about.
    assert_eq!(h.zone::<Walkers>().unwrap().sights.get(), 6);
    for p in players {
        assert_eq!(m[&p].len(), 3, "every walker, never the ghost");
    }
}

#[test]
fn inputs_move_entities_and_the_ack_advances() {
    let (mut h, clock) = host(f32::INFINITY);
    let a = join(&mut h, "a", Role::Player);
    let mut m = BTreeMap::new();
    step(&mut h, &clock, &mut m);
    assert_eq!(m[&a].ack(), 0);
    h.handle_input(a, 1, 0, &[5]);
    step(&mut h, &clock, &mut m);
    let e = h.zone::<Walkers>().unwrap().mine[&a];
    let got = m[&a].get(e.0).unwrap();
    assert_eq!((got.qx, got.qy), h.world().qpos(e).unwrap());
    assert_eq!(m[&a].ack(), 1);
}

#[test]
fn view_radius_limits_what_a_player_sees_and_observers_use_their_focus() {
    let (mut h, clock) = host(25.0);
    let a = join(&mut h, "a", Role::Player); // x = 10
    let _b = join(&mut h, "b", Role::Player); // x = 20
    let far: Vec<PlayerId> = (0..4)
        .map(|i| join(&mut h, &format!("f{i}"), Role::Player))
        .collect(); // x = 30..60
    let obs = join(&mut h, "o", Role::Observer);
    let mut m = BTreeMap::new();
    step(&mut h, &clock, &mut m);
    let seen: Vec<u32> = m[&a].known().iter().map(|(id, _)| *id).collect();
    let expect: Vec<u32> = [a, _b, far[0]]
        .iter()
        .map(|p| h.zone::<Walkers>().unwrap().mine[p].0)
        .collect();
    assert_eq!(seen, expect, "within 25 of x = 10: x = 10, 20, 30");
    assert!(m[&obs].is_empty(), "the observer looks at (500, 0)");
}

#[test]
fn events_reach_their_recipients_in_order() {
    let (mut h, clock) = host(f32::INFINITY);
    let a = join(&mut h, "a", Role::Player);
    let b = join(&mut h, "b", Role::Player);
    let mut m = BTreeMap::new();
    step(&mut h, &clock, &mut m);
    h.handle_input(a, 1, 0, &[7]);
    clock.advance(Duration::from_millis(100));
    h.advance(clock.now());
    let schema = h.schema();
    let mut topics: BTreeMap<PlayerId, Vec<u16>> = BTreeMap::new();
    for f in h.drain_frames().unwrap() {
        let d = m
            .get_mut(&f.player)
            .unwrap()
            .decode_apply(f.bytes, &schema)
            .unwrap();
        let t = d
            .events
            .unwrap_or_default()
            .iter()
            .map(|e| e.topic)
            .collect();
        topics.insert(f.player, t);
    }
    assert_eq!(topics[&a], vec![9, 3]);
    assert_eq!(topics[&b], vec![3]);
}

#[test]
fn dropped_players_get_no_frames_and_rejoin_or_resync_starts_from_a_baseline() {
    let (mut h, clock) = host(f32::INFINITY);
    let a = join(&mut h, "a", Role::Player);
    let b = join(&mut h, "b", Role::Player);
    let mut m = BTreeMap::new();
    step(&mut h, &clock, &mut m);
    h.handle_drop(b).unwrap();
    let mut got = Vec::new();
    clock.advance(Duration::from_millis(100));
    h.advance(clock.now());
    got.extend(h.drain_frames().unwrap().map(|f| f.player));
    assert_eq!(got, vec![a]);

    h.handle_rejoin(b).unwrap();
    h.resync(a);
    clock.advance(Duration::from_millis(100));
    h.advance(clock.now());
    let schema = h.schema();
    let mut baselines = Vec::new();
    for f in h.drain_frames().unwrap() {
        let d = zonekeep_protocol::delta::decode_delta(f.bytes, &schema, &[]).unwrap();
        baselines.push((f.player, d.baseline));
    }
    assert_eq!(baselines, vec![(a, true), (b, true)]);
}

#[test]
fn leaving_despawns_for_the_others_and_the_default_hash_follows_the_world() {
    let (mut h, clock) = host(f32::INFINITY);
    let a = join(&mut h, "a", Role::Player);
    let b = join(&mut h, "b", Role::Player);
    let mut m = BTreeMap::new();
    step(&mut h, &clock, &mut m);
    let before = h.state_hash().unwrap();
    assert_eq!(before, h.world().hash());
    h.handle_leave(b, crate::LeaveReason::Left).unwrap();
    step(&mut h, &clock, &mut m);
    assert_eq!(m[&a].len(), 1);
    assert_ne!(h.state_hash().unwrap(), before);
}

/// What a resuming client sends: where its mirror stands.
fn resume_point(m: &Mirror) -> zonekeep_protocol::ResumeFrom {
    m.resume_from().expect("the mirror applied a Delta")
}

/// Players a, b and d see each other; b drops after `before` patches and, while it is away, a
/// walks, d leaves (a despawn for b) and c joins (a spawn). Returns the host, b, b's mirror as
/// of its drop (every frame it was sent applied) and the clock.
fn away_while_the_world_changes() -> (ZoneHost, ManualClock, PlayerId, Mirror) {
    let (mut h, clock) = host(f32::INFINITY);
    let a = join(&mut h, "a", Role::Player);
    let b = join(&mut h, "b", Role::Player);
    let d = join(&mut h, "d", Role::Player);
    let mut m = BTreeMap::new();
    step(&mut h, &clock, &mut m);
    h.handle_input(b, 1, 0, &[3]);
    step(&mut h, &clock, &mut m);
    h.handle_drop(b).unwrap();
    for seq in 1..=3 {
        h.handle_input(a, seq, 0, &[2]);
        step(&mut h, &clock, &mut m);
    }
    h.handle_leave(d, crate::LeaveReason::Left).unwrap();
    join(&mut h, "c", Role::Player);
    step(&mut h, &clock, &mut m);
    let mirror = m.remove(&b).unwrap();
    (h, clock, b, mirror)
}

/// b's first frame after rejoining (with `resume` or without), whether it is a BASELINE, and
/// b's mirror after applying it.
fn first_frame_after(
    resume: Option<fn(&Mirror) -> zonekeep_protocol::ResumeFrom>,
) -> (crate::ResumeOutcome, bool, usize, Mirror) {
    let (mut h, clock, b, mut mirror) = away_while_the_world_changes();
    let outcome = match resume {
        Some(from) => h.handle_rejoin_from(b, from(&mirror)).unwrap(),
        None => {
            h.handle_rejoin(b).unwrap();
            crate::ResumeOutcome::Baseline
        }
    };
    clock.advance(Duration::from_millis(100));
    h.advance(clock.now());
    let schema = h.schema();
    let frame = h.drain_frames().unwrap().find(|f| f.player == b).unwrap();
    let len = frame.bytes.len();
    let d = mirror.decode_apply(frame.bytes, &schema).unwrap();
    (outcome, d.baseline, len, mirror)
}

#[test]
fn a_resume_from_the_last_frame_continues_with_a_delta_equal_to_a_baseline() {
    let (outcome, baseline, delta_len, resumed) =
        first_frame_after(Some(resume_point as fn(&Mirror) -> _));
    assert_eq!(outcome, crate::ResumeOutcome::Delta);
    assert!(
        !baseline,
        "the first frame after the resume is an ordinary Delta"
    );
    let (outcome, baseline, baseline_len, fresh) = first_frame_after(None);
    assert_eq!(outcome, crate::ResumeOutcome::Baseline);
    assert!(baseline);
    // Same tick, same ack, same control, same entities with the same positions and fields.
    assert_eq!(resumed, fresh);
    assert_eq!(resumed.len(), 3, "a, b and c; d left while b was away");
    assert!(delta_len < baseline_len, "{delta_len} vs {baseline_len}");
}

#[test]
fn a_resume_from_another_tick_or_known_set_starts_from_a_baseline() {
    let older = |m: &Mirror| zonekeep_protocol::ResumeFrom {
        tick: m.tick() - 1,
        ..resume_point(m)
    };
    let newer = |m: &Mirror| zonekeep_protocol::ResumeFrom {
        tick: m.tick() + 100,
        ..resume_point(m)
    };
    let other_hash = |m: &Mirror| zonekeep_protocol::ResumeFrom {
        hash: resume_point(m).hash ^ 1,
        ..resume_point(m)
    };
    let other_count = |m: &Mirror| zonekeep_protocol::ResumeFrom {
        count: resume_point(m).count + 1,
        ..resume_point(m)
    };
    let cases: [fn(&Mirror) -> zonekeep_protocol::ResumeFrom; 4] =
        [older, newer, other_hash, other_count];
    for from in cases {
        let (outcome, baseline, _, resumed) = first_frame_after(Some(from));
        assert_eq!(outcome, crate::ResumeOutcome::Baseline);
        assert!(baseline);
        assert_eq!(resumed.len(), 3);
    }
}

#[test]
fn a_client_that_missed_a_frame_in_flight_gets_a_baseline_but_skipped_quiet_frames_do_not_matter() {
    let (mut h, clock) = host(f32::INFINITY);
    let a = join(&mut h, "a", Role::Player);
    let b = join(&mut h, "b", Role::Player);
    let mut m = BTreeMap::new();
    step(&mut h, &clock, &mut m);
    let schema = h.schema();
    // Quiet frames (nothing moved) that a host does not send: b's client never sees them.
    for _ in 0..3 {
        clock.advance(Duration::from_millis(100));
        h.advance(clock.now());
        assert!(h.drain_frames().unwrap().all(|f| f.quiet));
    }
    let held = m[&b].clone();
    h.handle_drop(b).unwrap();
    h.handle_rejoin_from(b, resume_point(&held))
        .map(|o| {
            assert_eq!(
                o,
                crate::ResumeOutcome::Delta,
                "quiet frames change nothing it holds"
            );
        })
        .unwrap();

    // Now a frame that moves a is built for b but lost with its connection.
    h.handle_input(a, 1, 0, &[4]);
    clock.advance(Duration::from_millis(100));
    h.advance(clock.now());
    let lost: Vec<_> = h
        .drain_frames()
        .unwrap()
        .map(|f| (f.player, f.quiet))
        .collect();
    assert!(lost.contains(&(b, false)));
    h.handle_drop(b).unwrap();
    let outcome = h.handle_rejoin_from(b, resume_point(&held)).unwrap();
    assert_eq!(outcome, crate::ResumeOutcome::Baseline);
    clock.advance(Duration::from_millis(100));
    h.advance(clock.now());
    let mut mirror = held;
    for f in h.drain_frames().unwrap().filter(|f| f.player == b) {
        assert!(mirror.decode_apply(f.bytes, &schema).unwrap().baseline);
    }
    let e = h.zone::<Walkers>().unwrap().mine[&a];
    let got = mirror.get(e.0).unwrap();
    assert_eq!((got.qx, got.qy), h.world().qpos(e).unwrap());
}

#[test]
fn the_kept_state_goes_with_the_grace_or_a_leave() {
    let (mut h, clock) = host(f32::INFINITY);
    let _a = join(&mut h, "a", Role::Player);
    let b = join(&mut h, "b", Role::Player);
    let c = join(&mut h, "c", Role::Player);
    let mut m = BTreeMap::new();
    step(&mut h, &clock, &mut m);
    h.handle_drop(b).unwrap();
    h.handle_drop(c).unwrap();
    assert!(h.replicator.is_parked(SubscriberId(b.0)));
    h.handle_leave(c, crate::LeaveReason::Left).unwrap();
    assert!(
        !h.replicator.is_parked(SubscriberId(c.0)),
        "a leave frees it"
    );
    clock.advance(ZoneConfig::default().reconnect_grace + Duration::from_millis(100));
    h.advance(clock.now());
    assert!(
        !h.replicator.is_parked(SubscriberId(b.0)),
        "the grace's end frees it"
    );
    assert!(matches!(
        h.handle_rejoin_from(b, resume_point(&m[&b])),
        Err(crate::RejoinError::UnknownPlayer(_))
    ));
}

#[test]
fn the_default_transfer_in_gives_a_player_new_to_the_run_its_join() {
    // A zone that writes no transfer code: a move of its previous run was returned after it
    // restarted, and the player joined again. The player has no entity in this run, so the
    // default hands it to `on_join`, and it plays as any joiner does.
    let (mut h, clock) = host(f32::INFINITY);
    let p = h
        .handle_transfer_return(
            Principal::new("ann"),
            Claims::new(),
            Claims::new(),
            "elsewhere",
            &[],
        )
        .unwrap();
    let walker = *h.zone::<Walkers>().unwrap().mine.get(&p).unwrap();
    let mut m = BTreeMap::new();
    step(&mut h, &clock, &mut m);
    assert_eq!(m[&p].control(), Some(walker.0));
    assert!(h.handle_input(p, 1, 0, &[3]).is_accepted());
}
