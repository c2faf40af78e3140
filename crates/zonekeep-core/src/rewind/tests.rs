//! Lag compensation: what was sent, how it is drawn, the clamps and the hit tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::player::PlayerId;
use crate::replicate::{
    Focus, FrameInput, ReplicationConfig, Replicator, SubscriberConfig, SubscriberId,
};
use crate::world::{KindId, World};
use zonekeep_protocol::mirror::Mirror;
use zonekeep_protocol::schema::KindDef;

/// A power of two, so positions on the grid are exact.
const STEP: f32 = 0.0625;
/// 30 Hz.
const DT: Duration = Duration::from_nanos(33_333_333);

/// A world, a replicator and a history, patched by hand.
struct Scene {
    world: World,
    kind: KindId,
    rep: Replicator,
    history: RewindHistory,
    tick: u64,
    /// What each subscriber's client holds, decoded from its frames.
    mirrors: BTreeMap<u32, Mirror>,
}

impl Scene {
    fn new(lc: &LagCompensation) -> Self {
        let mut world = World::new(STEP).unwrap();
        let kind = world
            .declare_kind(KindDef {
                name: "unit".into(),
                fields: vec![],
            })
            .unwrap();
        Self {
            world,
            kind,
            rep: Replicator::new(ReplicationConfig::default()),
            history: RewindHistory::new(lc, DT, STEP),
            tick: 0,
            mirrors: BTreeMap::new(),
        }
    }

    fn spawn(&mut self, x: f32, y: f32) -> EntityId {
        self.world.spawn(self.kind, x, y).unwrap()
    }

    fn subscribe(&mut self, id: u32, at: (f32, f32), radius: f32, budget: Option<usize>) {
        let cfg = SubscriberConfig {
            radius,
            margin: 0.0,
            budget,
            focus: Focus::Point(at.0, at.1),
            control: None,
        };
        self.rep.add_subscriber(SubscriberId(id), cfg).unwrap();
        self.mirrors.insert(id, Mirror::new());
    }

    /// Runs ticks up to `tick` and sends a patch there.
    fn patch_at(&mut self, tick: u64) {
        self.tick = tick;
        let mut frames = Vec::new();
        self.rep
            .build_with_heads(
                &self.world,
                tick,
                None::<fn(SubscriberId, EntityId) -> bool>,
                |_| FrameInput::default(),
                |s, head, bytes: &[u8]| frames.push((s, head.quiet, bytes.to_vec())),
            )
            .unwrap();
        let schema = self.world.schema();
        for (s, _, bytes) in &frames {
            let m = self.mirrors.get_mut(&s.0).unwrap();
            m.decode_apply(bytes, &schema).unwrap();
        }
        let quiet: BTreeMap<u32, bool> = frames.iter().map(|(s, q, _)| (s.0, *q)).collect();
        self.history.record(
            tick,
            &self.world,
            self.rep.sent_views(),
            |s: SubscriberId| quiet.get(&s.0).copied().unwrap_or(false),
        );
    }

    fn rewind(&self, player: u32, view: u32, now: u64) -> Rewind<'_> {
        self.history
            .rewind_for(PlayerId(player), view, now)
            .expect("a recorded subscriber")
    }
}

fn circle(r: f32) -> impl FnMut(EntityId) -> Option<Shape> {
    move |_| Some(Shape::Circle { radius: r })
}

#[test]
fn drawn_between_the_two_sent_states_around_the_view_tick() {
    let mut s = Scene::new(&LagCompensation::default());
    let e = s.spawn(0.0, 0.0);
    s.subscribe(1, (0.0, 0.0), f32::INFINITY, None);
    s.patch_at(2);
    s.world.set_pos(e, 8.0, -4.0).unwrap();
    s.patch_at(4);
    let r = s.rewind(1, 3, 5);
    assert_eq!(r.tick(), 3);
    assert_eq!(r.ticks_behind(), 2);
    assert_eq!(r.position_at(e), Some((4.0, -2.0)));
    assert_eq!(s.rewind(1, 2, 5).position_at(e), Some((0.0, 0.0)));
    assert_eq!(s.rewind(1, 4, 5).position_at(e), Some((8.0, -4.0)));
}

#[test]
fn a_view_tick_is_clamped_to_the_newest_state_sent() {
    let mut s = Scene::new(&LagCompensation::default());
    let e = s.spawn(0.0, 0.0);
    s.subscribe(1, (0.0, 0.0), f32::INFINITY, None);
    s.patch_at(10);
    s.world.set_pos(e, 5.0, 0.0).unwrap();
    s.patch_at(12);
    // The world moved on after the last patch: no client saw that yet.
    s.world.set_pos(e, 50.0, 0.0).unwrap();
    let r = s.rewind(1, 13, 13);
    assert_eq!(r.tick(), 12);
    assert_eq!(r.position_at(e), Some((5.0, 0.0)));
}

#[test]
fn a_view_tick_is_clamped_to_the_history_window() {
    let lc = LagCompensation {
        history_ticks: 4,
        max_view_delay: Duration::from_secs(10),
        colliders: vec![],
    };
    let mut s = Scene::new(&lc);
    let e = s.spawn(0.0, 0.0);
    s.subscribe(1, (0.0, 0.0), f32::INFINITY, None);
    for t in 1..=20u64 {
        s.world.set_pos(e, t as f32, 0.0).unwrap();
        s.patch_at(t);
    }
    let r = s.rewind(1, 3, 21);
    assert_eq!(r.tick(), 17, "21 − 4 history ticks");
    assert_eq!(r.position_at(e), Some((17.0, 0.0)));
    assert_eq!(r.ticks_behind(), 4);
}

#[test]
fn the_reach_is_bounded_by_round_trip_plus_max_view_delay() {
    let lc = LagCompensation {
        history_ticks: 60,
        max_view_delay: Duration::from_millis(100),
        colliders: vec![],
    };
    let mut s = Scene::new(&lc);
    let e = s.spawn(0.0, 0.0);
    s.subscribe(1, (0.0, 0.0), f32::INFINITY, None);
    for t in 1..=40u64 {
        s.world.set_pos(e, t as f32, 0.0).unwrap();
        s.patch_at(t);
    }
    // No round trip known: 100 ms = 3 ticks at 30 Hz.
    assert_eq!(s.rewind(1, 5, 41).tick(), 38);
    // 100 ms round trip + 100 ms: 6 ticks.
    s.history.set_rtt(PlayerId(1), Duration::from_millis(100));
    let r = s.rewind(1, 5, 41);
    assert_eq!(r.tick(), 35);
    assert_eq!(r.position_at(e), Some((35.0, 0.0)));
    // A view tick within the reach is taken as is.
    assert_eq!(s.rewind(1, 36, 41).tick(), 36);
    // Forgotten with the participant.
    s.history.forget(PlayerId(1));
    assert_eq!(s.rewind(1, 5, 41).tick(), 38);
}

/// A client whose playout delay grew under loss draws well behind its round trip: at 150 ms round
/// trip a view tick more than 400 ms back is what it drew (the SDKs draw up to 500 ms behind the fastest
/// delivery), so it is judged there; a view tick further back than the round trip and that
/// playout ceiling explain is still clamped.
#[test]
fn a_view_behind_by_the_playout_ceiling_is_judged_where_it_was_drawn() {
    let lc = LagCompensation {
        history_ticks: 90,
        ..LagCompensation::default()
    };
    let mut s = Scene::new(&lc);
    let e = s.spawn(0.0, 0.0);
    s.subscribe(1, (0.0, 0.0), f32::INFINITY, None);
    for t in 1..=80u64 {
        s.world.set_pos(e, t as f32, 0.0).unwrap();
        s.patch_at(t);
    }
    s.history.set_rtt(PlayerId(1), Duration::from_millis(150));
    // 14 ticks at 30 Hz = 467 ms behind the tick the input is applied in.
    let r = s.rewind(1, 67, 81);
    assert_eq!(r.tick(), 67, "judged at its view tick, not at 150 + 250 ms");
    assert_eq!(r.position_at(e), Some((67.0, 0.0)));
    // 2 s back: more than 150 ms + the 600 ms ceiling (22 ticks) explains.
    assert_eq!(s.rewind(1, 21, 81).tick(), 81 - 22);
}

/// The reach follows the worst round trip of the last few reports, not only the newest: a
/// stalled link (a loss held every later message back) leaves the client's delay high after the
/// round trip is short again.
#[test]
fn the_reach_follows_the_worst_recent_round_trip() {
    let lc = LagCompensation {
        history_ticks: 90,
        max_view_delay: Duration::from_millis(100),
        colliders: vec![],
    };
    let mut s = Scene::new(&lc);
    let e = s.spawn(0.0, 0.0);
    s.subscribe(1, (0.0, 0.0), f32::INFINITY, None);
    for t in 1..=80u64 {
        s.world.set_pos(e, t as f32, 0.0).unwrap();
        s.patch_at(t);
    }
    let p = PlayerId(1);
    s.history.set_rtt(p, Duration::from_millis(100));
    s.history.set_rtt(p, Duration::from_millis(500));
    s.history.set_rtt(p, Duration::from_millis(100));
    // 500 + 100 ms = 18 ticks.
    assert_eq!(s.rewind(1, 5, 81).tick(), 63);
    // Once the stall is older than the samples kept, the reach is 100 + 100 ms again.
    for _ in 0..RTT_SAMPLES {
        s.history.set_rtt(p, Duration::from_millis(100));
    }
    assert_eq!(s.rewind(1, 5, 81).tick(), 75);
}

#[test]
fn a_deferred_entity_is_drawn_where_the_client_last_got_it() {
    let mut s = Scene::new(&LagCompensation::default());
    let ids: Vec<EntityId> = (0..40).map(|i| s.spawn(i as f32, 0.0)).collect();
    s.subscribe(1, (0.0, 0.0), f32::INFINITY, None);
    s.subscribe(2, (0.0, 0.0), f32::INFINITY, Some(120));
    // Let the budgeted client catch up with every spawn.
    for t in 1..=20u64 {
        s.patch_at(t);
    }
    for (i, &e) in ids.iter().enumerate() {
        s.world.set_pos(e, i as f32 + 30.0, 7.0).unwrap();
    }
    s.patch_at(21);
    let unbudgeted = s.rewind(1, 21, 22);
    let budgeted = s.rewind(2, 21, 22);
    let mirror = &s.mirrors[&2];
    let mut deferred = 0;
    for &e in &ids {
        let world = s.world.pos(e).unwrap();
        assert_eq!(unbudgeted.position_at(e), Some(world));
        let held = mirror.get(e.0).expect("held by the client");
        let sent = (held.qx as f32 * STEP, held.qy as f32 * STEP);
        assert_eq!(budgeted.position_at(e), Some(sent), "entity {e:?}");
        deferred += usize::from(sent != world);
    }
    assert!(deferred > 0, "the budget deferred some moves");
}

#[test]
fn entities_the_client_was_not_sent_are_not_drawn() {
    let mut s = Scene::new(&LagCompensation::default());
    let near = s.spawn(1.0, 0.0);
    let far = s.spawn(500.0, 0.0);
    s.subscribe(1, (0.0, 0.0), 50.0, None);
    s.patch_at(2);
    let later = s.spawn(2.0, 0.0);
    s.world.despawn(near).unwrap();
    s.patch_at(4);
    let at3 = s.rewind(1, 3, 5);
    assert_eq!(at3.position_at(far), None, "outside interest");
    assert_eq!(at3.position_at(later), None, "spawned at the later patch");
    assert_eq!(
        at3.position_at(near),
        Some((1.0, 0.0)),
        "despawned at the later patch: held until then"
    );
    let at4 = s.rewind(1, 4, 5);
    assert_eq!(at4.position_at(near), None);
    assert_eq!(at4.position_at(later), Some((2.0, 0.0)));
    let drawn: Vec<EntityId> = at3.drawn().map(|(id, _)| id).collect();
    assert_eq!(drawn, vec![near]);
}

#[test]
fn quiet_frames_give_no_sample_of_their_own() {
    let mut s = Scene::new(&LagCompensation::default());
    let e = s.spawn(0.0, 0.0);
    s.subscribe(1, (0.0, 0.0), f32::INFINITY, None);
    s.patch_at(2);
    s.patch_at(4); // nothing changed: quiet, a server does not send it
    s.world.set_pos(e, 6.0, 0.0).unwrap();
    s.patch_at(6);
    // The SDK holds the entity at its tick-2 sample and moves it from there to tick 6.
    assert_eq!(s.rewind(1, 3, 7).position_at(e), Some((1.5, 0.0)));
    assert_eq!(s.rewind(1, 5, 7).position_at(e), Some((4.5, 0.0)));
}

#[test]
fn a_subscriber_never_sent_a_frame_has_no_rewind_and_view_tick_zero_has_none() {
    let mut s = Scene::new(&LagCompensation::default());
    s.spawn(0.0, 0.0);
    s.subscribe(1, (0.0, 0.0), f32::INFINITY, None);
    s.patch_at(2);
    assert!(s.history.rewind_for(PlayerId(1), 0, 3).is_none());
    assert!(s.history.rewind_for(PlayerId(9), 2, 3).is_none());
}

#[test]
fn the_history_keeps_only_its_window() {
    let lc = LagCompensation {
        history_ticks: 10,
        ..LagCompensation::default()
    };
    let mut s = Scene::new(&lc);
    for i in 0..100 {
        s.spawn(i as f32, 0.0);
    }
    s.subscribe(1, (0.0, 0.0), f32::INFINITY, None);
    for t in 1..=50 {
        s.patch_at(t);
    }
    let after_50 = s.history.heap_bytes();
    assert!(s.history.patches() <= 12);
    for t in 51..=200 {
        s.patch_at(t);
    }
    assert_eq!(s.history.heap_bytes(), after_50, "steady state: no growth");
}

/// One entity of radius 1 at (10, 0) and a wall capsule from (20, -5) to (20, 5), radius 1.
fn target_scene() -> (Scene, EntityId) {
    let lc = LagCompensation {
        colliders: vec![Collider::Capsule {
            a: (20.0, -5.0),
            b: (20.0, 5.0),
            radius: 1.0,
        }],
        ..LagCompensation::default()
    };
    let mut s = Scene::new(&lc);
    let e = s.spawn(10.0, 0.0);
    s.subscribe(1, (0.0, 0.0), f32::INFINITY, None);
    s.patch_at(1);
    (s, e)
}

#[test]
fn a_ray_hits_the_nearest_circle_and_stops_at_walls() {
    let (s, e) = target_scene();
    let r = s.rewind(1, 1, 2);
    let hit = r
        .raycast((0.0, 0.0), (2.0, 0.0), 100.0, circle(1.0))
        .unwrap();
    assert_eq!(hit.target, HitTarget::Entity(e));
    assert_eq!(hit.distance, 9.0);
    assert_eq!(hit.point, (9.0, 0.0));
    // Past the target the wall is next; from behind the wall the target is out of reach.
    let hit = r
        .raycast((0.0, 3.0), (1.0, 0.0), 100.0, circle(1.0))
        .unwrap();
    assert_eq!(hit.target, HitTarget::Collider(0));
    assert_eq!(hit.distance, 19.0);
    assert!(r
        .raycast((30.0, 0.0), (1.0, 0.0), 100.0, circle(1.0))
        .is_none());
    assert!(
        r.raycast((0.0, 0.0), (1.0, 0.0), 8.5, circle(1.0))
            .is_none(),
        "short"
    );
    let hit = r
        .raycast((30.0, 0.0), (-1.0, 0.0), 100.0, circle(1.0))
        .unwrap();
    assert_eq!(
        hit.target,
        HitTarget::Collider(0),
        "the wall covers the target"
    );
    // An entity with no shape cannot be hit.
    let hit = r.raycast((0.0, 0.0), (1.0, 0.0), 100.0, |_| None).unwrap();
    assert_eq!(hit.target, HitTarget::Collider(0));
}

#[test]
fn tangent_inside_and_parallel_rays() {
    let (s, e) = target_scene();
    let r = s.rewind(1, 1, 2);
    // Tangent to the circle's top at (10, 1).
    let hit = r
        .raycast((0.0, 1.0), (1.0, 0.0), 15.0, circle(1.0))
        .unwrap();
    assert_eq!(hit.target, HitTarget::Entity(e));
    assert_eq!(hit.point, (10.0, 1.0));
    // Just above it: a miss.
    assert!(r
        .raycast((0.0, 1.01), (1.0, 0.0), 15.0, circle(1.0))
        .is_none());
    // Starting inside: distance 0.
    let hit = r
        .raycast((10.5, 0.0), (0.0, 1.0), 5.0, circle(1.0))
        .unwrap();
    assert_eq!((hit.target, hit.distance), (HitTarget::Entity(e), 0.0));
    // Parallel to the wall's side, along its edge line x = 21: touches it.
    let hit = r
        .raycast((21.0, -20.0), (0.0, 1.0), 100.0, circle(1.0))
        .unwrap();
    assert_eq!(hit.target, HitTarget::Collider(0));
    assert_eq!(hit.point, (21.0, -5.0));
    // Parallel beyond it: a miss.
    assert!(r
        .raycast((21.5, -20.0), (0.0, 1.0), 100.0, circle(1.0))
        .is_none());
    // Entering the wall's flat side.
    let hit = r
        .raycast((25.0, 2.0), (-1.0, 0.0), 100.0, |_| None)
        .unwrap();
    assert_eq!((hit.distance, hit.point), (4.0, (21.0, 2.0)));
}

#[test]
fn segments_points_and_capsule_shapes() {
    let (s, e) = target_scene();
    let r = s.rewind(1, 1, 2);
    assert!(r.segment((0.0, 0.0), (8.0, 0.0), circle(1.0)).is_none());
    let hit = r.segment((0.0, 0.0), (9.0, 0.0), circle(1.0)).unwrap();
    assert_eq!((hit.target, hit.distance), (HitTarget::Entity(e), 9.0));
    // A zero-length segment is a point test.
    assert_eq!(
        r.segment((10.5, 0.5), (10.5, 0.5), circle(1.0))
            .map(|h| h.target),
        Some(HitTarget::Entity(e))
    );
    assert!(r.segment((12.0, 0.0), (12.0, 0.0), circle(1.0)).is_none());
    assert_eq!(
        r.point((20.0, 5.5), circle(1.0)).map(|h| h.target),
        Some(HitTarget::Collider(0))
    );
    assert_eq!(
        r.point((11.0, 0.0), circle(1.0)).map(|h| h.target),
        Some(HitTarget::Entity(e)),
        "on the edge counts"
    );
    // A standing capsule from 2 below to 2 above the position.
    let tall = |_| {
        Some(Shape::Capsule {
            a: (0.0, -2.0),
            b: (0.0, 2.0),
            radius: 0.5,
        })
    };
    let hit = r.raycast((0.0, 2.0), (1.0, 0.0), 100.0, tall).unwrap();
    assert_eq!((hit.target, hit.point), (HitTarget::Entity(e), (9.5, 2.0)));
    let hit = r.raycast((10.0, 10.0), (0.0, -1.0), 100.0, tall).unwrap();
    assert_eq!((hit.target, hit.point), (HitTarget::Entity(e), (10.0, 2.5)));
    assert!(r.point((10.0, 3.0), tall).is_none());
}

#[test]
fn hostile_numbers_hit_nothing() {
    let (s, _) = target_scene();
    let r = s.rewind(1, 1, 2);
    assert!(r
        .raycast((f32::NAN, 0.0), (1.0, 0.0), 100.0, circle(1.0))
        .is_none());
    assert!(r
        .raycast((0.0, 0.0), (f32::INFINITY, 0.0), 100.0, circle(1.0))
        .is_none());
    assert!(r
        .raycast((0.0, 0.0), (1.0, 0.0), -1.0, circle(1.0))
        .is_none());
    let nan_shape = r
        .raycast((0.0, 0.0), (1.0, 0.0), 100.0, circle(f32::NAN))
        .unwrap();
    assert_eq!(
        nan_shape.target,
        HitTarget::Collider(0),
        "a NaN shape is never hit"
    );
    let walls_only = r
        .raycast((0.0, 0.0), (1.0, 0.0), 100.0, circle(-1.0))
        .unwrap();
    assert_eq!(walls_only.target, HitTarget::Collider(0));
}

#[test]
fn entities_near_a_point() {
    let mut s = Scene::new(&LagCompensation::default());
    let a = s.spawn(3.0, 4.0);
    let b = s.spawn(3.0, 4.5);
    s.subscribe(1, (0.0, 0.0), f32::INFINITY, None);
    s.patch_at(1);
    let r = s.rewind(1, 1, 2);
    let near: Vec<EntityId> = r.entities_near((0.0, 0.0), 5.0).map(|(id, _)| id).collect();
    assert_eq!(near, vec![a], "on the circle counts; beyond it does not");
    let hit = r
        .raycast_among(
            (0.0, 0.0),
            (3.0, 4.0),
            10.0,
            r.entities_near((0.0, 0.0), 6.0),
            circle(0.5),
        )
        .unwrap();
    assert_eq!(hit.target, HitTarget::Entity(a));
    assert_eq!(r.entities_near((0.0, 0.0), -1.0).count(), 0);
    let _ = b;
}

/// An entity id and where it is drawn.
type Placed = (u32, (f32, f32));

#[test]
fn long_deferrals_are_drawn_from_the_patch_that_sent_them() {
    let lc = LagCompensation {
        history_ticks: 12,
        max_view_delay: Duration::from_secs(60),
        colliders: vec![],
    };
    let mut s = Scene::new(&lc);
    let ids: Vec<EntityId> = (0..60).map(|i| s.spawn(i as f32, 0.0)).collect();
    s.subscribe(2, (0.0, 0.0), f32::INFINITY, Some(60));
    let mut held_at: BTreeMap<u64, Vec<Placed>> = BTreeMap::new();
    for t in 1..=80u64 {
        for (i, &e) in ids.iter().enumerate() {
            let (x, y) = s.world.pos(e).unwrap();
            s.world.set_pos(e, x + 0.5, y + (i % 3) as f32).unwrap();
        }
        s.patch_at(t);
        let held: Vec<Placed> = s.mirrors[&2]
            .iter()
            .map(|(id, m)| (id, (m.qx as f32 * STEP, m.qy as f32 * STEP)))
            .collect();
        held_at.insert(t, held);
    }
    assert!(
        s.history.max_age() > 3,
        "moves deferred over several patches"
    );
    for t in 69..=80u64 {
        let r = s.rewind(2, t as u32, 81);
        assert_eq!(r.tick(), t);
        let drawn: Vec<Placed> = r.drawn().map(|(id, p)| (id.0, p)).collect();
        assert_eq!(drawn, held_at[&t], "what the client held after patch {t}");
    }
}
