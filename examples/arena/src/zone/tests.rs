#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The arena zone driven through a real `ZoneHost` with a manual clock; what players see is read
//! from the Delta frames the host builds, decoded by the protocol crate's `Mirror`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use zonekeep_core::fact::{FactKey, FactOutcome, Settlement};
use zonekeep_core::{
    Claims, Clock, ManualClock, PlayerId, Principal, Role, ZoneError, ZoneHost, ZoneInit,
};
use zonekeep_protocol::{FieldValue, Mirror};

use super::*;
use crate::movement::{snap, MAX_X, MIN_X, PLAYER_RADIUS, SPEED};
use crate::movement::{DIR_DOWN, DIR_LEFT, DIR_RIGHT};

struct Rig {
    host: ZoneHost,
    clock: ManualClock,
    mirrors: BTreeMap<PlayerId, Mirror>,
    events: BTreeMap<PlayerId, Vec<(u16, Vec<u8>)>>,
    seqs: BTreeMap<PlayerId, u32>,
}

fn init(params: serde_json::Value) -> ZoneInit {
    ZoneInit {
        zone_id: "arena-test".into(),
        kind: "arena".into(),
        params,
    }
}

impl Rig {
    fn new(params: serde_json::Value, seed: u64) -> Rig {
        let clock = ManualClock::new();
        let mut config = zone_config();
        config.world_seed = seed;
        let host = ZoneHost::new::<Arena>(init(params), config, Arc::new(clock.clone())).unwrap();
        Rig {
            host,
            clock,
            mirrors: BTreeMap::new(),
            events: BTreeMap::new(),
            seqs: BTreeMap::new(),
        }
    }

    fn join(&mut self, principal: &str, name: Option<&str>, role: Role) -> PlayerId {
        let mut claims = Claims::new();
        if let Some(n) = name {
            claims.insert("name".into(), json!(n));
        }
        let p = self
            .host
            .handle_join(Principal::new(principal), claims, role)
            .unwrap();
        self.mirrors.insert(p, Mirror::new());
        p
    }

    /// Runs `n` ticks, building and decoding every player's frames after each.
    fn ticks(&mut self, n: u32) {
        let schema = self.host.schema();
        for _ in 0..n {
            self.clock.advance(self.host.config().dt());
            let report = self.host.advance(self.clock.now());
            if report.patch_ticks.is_empty() {
                continue;
            }
            let frames: Vec<(PlayerId, Vec<u8>)> = self
                .host
                .drain_frames()
                .unwrap()
                .map(|f| (f.player, f.bytes.to_vec()))
                .collect();
            for (p, bytes) in frames {
                let d = self
                    .mirrors
                    .get_mut(&p)
                    .unwrap()
                    .decode_apply(&bytes, &schema)
                    .unwrap();
                for e in d.events.unwrap_or_default() {
                    self.events.entry(p).or_default().push((e.topic, e.payload));
                }
            }
        }
    }

    fn input(&mut self, p: PlayerId, payload: &[u8]) {
        let seq = self.seqs.entry(p).or_insert(0);
        *seq += 1;
        assert!(self.host.handle_input(p, *seq, 0, payload).is_accepted());
    }

    /// One input per tick for `n` ticks.
    fn hold(&mut self, p: PlayerId, dir: u8, n: u32) {
        for _ in 0..n {
            self.input(p, &[dir]);
            self.ticks(1);
        }
    }

    fn put(&mut self, p: PlayerId, x: f32, y: f32) {
        let state = MoveState {
            x: snap(x),
            y: snap(y),
        };
        self.host
            .zone_mut::<Arena>()
            .unwrap()
            .players
            .get_mut(&p)
            .unwrap()
            .state = state;
    }

    fn pos(&self, p: PlayerId) -> MoveState {
        self.host.zone::<Arena>().unwrap().position(p).unwrap()
    }

    fn sees(&self, viewer: PlayerId, entity: EntityId) -> bool {
        self.mirrors[&viewer].get(entity.0).is_some()
    }

    fn kind_count(&self, viewer: PlayerId, kind: &str) -> usize {
        let k = self
            .host
            .schema()
            .kinds
            .iter()
            .position(|d| d.name == kind)
            .unwrap() as u32;
        self.mirrors[&viewer]
            .iter()
            .filter(|(_, e)| e.kind == k)
            .count()
    }
}

fn dist(a: MoveState, b: MoveState) -> f32 {
    ((a.x - b.x).powi(2) + (a.y - b.y).powi(2)).sqrt()
}

#[test]
fn players_spawn_near_the_centre_with_name_colour_and_control() {
    let mut rig = Rig::new(json!({}), 1);
    let a = rig.join("alice", Some("  Ada <3 "), Role::Player);
    rig.ticks(1);
    let s = rig.pos(a);
    assert!(
        (s.x - ARENA_W / 2.0).abs() <= SPAWN_RADIUS && (s.y - ARENA_H / 2.0).abs() <= SPAWN_RADIUS
    );
    let entity = rig.host.zone::<Arena>().unwrap().avatar(a).unwrap();
    let m = &rig.mirrors[&a];
    assert_eq!(
        m.control(),
        Some(entity.0),
        "the player controls its avatar"
    );
    let e = m.get(entity.0).unwrap();
    assert_eq!(e.fields[F_NAME], FieldValue::Str("Ada 3".into()));
    assert_eq!(e.fields[F_HUE], FieldValue::U(hue("alice")));
    assert_eq!(e.fields[F_SCORE], FieldValue::U(0));
    // What the client decodes is exactly the server's position (the prediction's starting point).
    assert_eq!(
        (
            zonekeep_protocol::quant::pos_decode(e.qx, POS_STEP),
            zonekeep_protocol::quant::pos_decode(e.qy, POS_STEP)
        ),
        (s.x, s.y)
    );
}

#[test]
fn movement_is_one_step_per_tick_whatever_the_client_sends() {
    let mut rig = Rig::new(json!({ "drones": 0, "pickups": 0 }), 1);
    let a = rig.join("alice", None, Role::Player);
    rig.put(a, 60.0, 20.0);
    // A burst of 10 inputs in one tick moves one step: the buffer hands out one per tick.
    for _ in 0..10 {
        rig.input(a, &[DIR_RIGHT]);
    }
    rig.ticks(1);
    let s = rig.pos(a);
    assert!((s.x - 60.0 - SPEED * DT).abs() <= POS_STEP, "{s:?}");
    // The rest follow, one per tick, never faster than the speed limit.
    let mut prev = s;
    for _ in 0..9 {
        rig.ticks(1);
        let now = rig.pos(a);
        assert!(dist(prev, now) <= SPEED * DT + POS_STEP);
        prev = now;
    }
    assert_eq!(rig.host.last_processed_seq(a), Some(10));
    assert!((prev.x - 60.0 - 10.0 * SPEED * DT).abs() <= 10.0 * POS_STEP);
    // Garbage payloads are refused, never applied.
    assert!(!rig.host.handle_input(a, 11, 0, &[]).is_accepted());
    assert!(!rig.host.handle_input(a, 12, 0, &[1, 2, 3]).is_accepted());
}

#[test]
fn players_stay_in_bounds_and_pillars_block() {
    let mut rig = Rig::new(json!({ "drones": 0, "pickups": 0 }), 1);
    let a = rig.join("alice", None, Role::Player);
    rig.put(a, 3.0, 3.0);
    rig.hold(a, DIR_LEFT, 30);
    assert_eq!(rig.pos(a).x, snap(MIN_X));
    rig.put(a, ARENA_W - 3.0, 3.0);
    rig.hold(a, DIR_RIGHT, 30);
    assert_eq!(rig.pos(a).x, snap(MAX_X));
    // Pillar 4 is at (46, 40) with radius 4: walking straight at it stops at its rim.
    let p = PILLARS[4];
    rig.put(a, p.x + p.r + 6.0, p.y);
    rig.hold(a, DIR_LEFT, 60);
    let s = rig.pos(a);
    assert!(
        dist(s, MoveState { x: p.x, y: p.y }) >= p.r + PLAYER_RADIUS - POS_STEP,
        "{s:?}"
    );
    assert!(s.x > p.x);
}

#[test]
fn drones_fly_deterministically_from_the_seed() {
    let run = |seed: u64| {
        let mut rig = Rig::new(json!({ "drones": 12, "pickups": 4 }), seed);
        let mut hashes = Vec::new();
        let mut positions = Vec::new();
        for _ in 0..60 {
            rig.ticks(1);
            hashes.push(rig.host.state_hash().unwrap());
            positions.push(
                rig.host
                    .zone::<Arena>()
                    .unwrap()
                    .drones
                    .iter()
                    .map(|d| d.path.pos())
                    .collect::<Vec<_>>(),
            );
        }
        (hashes, positions)
    };
    let (h1, p1) = run(5);
    let (h2, p2) = run(5);
    assert_eq!(h1, h2);
    assert_eq!(p1, p2);
    assert_eq!(p1[0].len(), 12);
    assert!(
        p1[0].iter().zip(&p1[59]).all(|(a, b)| a != b),
        "every drone moved"
    );
    assert_ne!(run(6).1, p1, "another seed, other paths");
}

#[test]
fn far_players_do_not_see_each_other_near_ones_do() {
    let mut rig = Rig::new(json!({ "drones": 0, "pickups": 0 }), 1);
    let a = rig.join("alice", None, Role::Player);
    let b = rig.join("bob", None, Role::Player);
    rig.put(a, 5.0, 5.0);
    rig.put(b, ARENA_W - 5.0, ARENA_H - 5.0);
    // Positions reach the world on the next move.
    rig.input(a, &[DIR_DOWN]);
    rig.input(b, &[DIR_LEFT]);
    rig.ticks(2);
    let (ea, eb) = (
        rig.host.zone::<Arena>().unwrap().avatar(a).unwrap(),
        rig.host.zone::<Arena>().unwrap().avatar(b).unwrap(),
    );
    assert!(rig.sees(a, ea) && rig.sees(b, eb));
    assert!(!rig.sees(a, eb) && !rig.sees(b, ea), "far apart: hidden");
    // Pillars are global: everyone can predict collisions with all of them.
    assert_eq!(rig.kind_count(a, KIND_PILLAR), PILLARS.len());
    // Bob walks up to Alice: she sees him once he is inside her view radius.
    rig.put(b, 5.0 + VIEW_RADIUS - 4.0, 5.0);
    rig.input(b, &[DIR_LEFT]);
    rig.ticks(2);
    assert!(rig.sees(a, eb) && rig.sees(b, ea));
    // An observer sees both from the centre.
    let o = rig.join("olive", None, Role::Observer);
    rig.ticks(1);
    assert!(rig.sees(o, ea) && rig.sees(o, eb));
}

#[test]
fn pickups_emit_facts_and_settlements_raise_the_saved_score() {
    let mut rig = Rig::new(json!({ "drones": 0, "pickups": 3 }), 9);
    let a = rig.join("alice", None, Role::Player);
    rig.ticks(1);
    assert_eq!(rig.host.zone::<Arena>().unwrap().pickups().len(), 3);
    let (px, py) = rig.host.zone::<Arena>().unwrap().pickups()[0];
    rig.put(a, px, py);
    rig.ticks(1);

    let facts = rig.host.drain_facts();
    assert_eq!(facts.len(), 1);
    let fact = &facts[0];
    assert_eq!(fact.kind, FACT_PICKUP);
    assert_eq!(fact.principal.as_deref(), Some("alice"));
    assert_eq!(fact.payload, json!({ "add": { "score": 1 } }));
    assert_eq!(
        rig.host.zone::<Arena>().unwrap().pickups().len(),
        2,
        "the pickup is gone"
    );
    assert_eq!(rig.host.zone::<Arena>().unwrap().stats().picked, 1);
    assert_eq!(
        rig.events[&a],
        vec![(TOPIC_PICKED, 1u32.to_le_bytes().to_vec())]
    );
    // Standing on the spot does not pick it again.
    rig.ticks(3);
    assert!(rig.host.drain_facts().is_empty());

    // The ledger settles with the principal's totals: the score becomes that total.
    rig.host.handle_settlement(Settlement {
        key: fact.key.clone(),
        outcome: FactOutcome::Ok(json!({ "score": 7 })),
    });
    rig.ticks(1);
    assert_eq!(rig.host.zone::<Arena>().unwrap().score("alice"), 7);
    let mut saved = 1u32.to_le_bytes().to_vec();
    saved.extend_from_slice(&7u32.to_le_bytes());
    assert_eq!(rig.events[&a].last(), Some(&(TOPIC_SAVED, saved)));
    let entity = rig.host.zone::<Arena>().unwrap().avatar(a).unwrap();
    assert_eq!(
        rig.mirrors[&a].get(entity.0).unwrap().fields[F_SCORE],
        FieldValue::U(7)
    );
    assert_eq!(rig.host.zone::<Arena>().unwrap().pending_facts(), 0);

    // A refusal is reported to the player and changes nothing.
    let (qx, qy) = rig.host.zone::<Arena>().unwrap().pickups()[0];
    rig.put(a, qx, qy);
    rig.ticks(1);
    let second = rig.host.drain_facts();
    assert_eq!(second.len(), 1);
    rig.host.handle_settlement(Settlement {
        key: second[0].key.clone(),
        outcome: FactOutcome::Refused("nope".into()),
    });
    rig.ticks(1);
    assert_eq!(rig.host.zone::<Arena>().unwrap().score("alice"), 7);
    assert_eq!(
        rig.events[&a].last(),
        Some(&(TOPIC_REFUSED, b"nope".to_vec()))
    );
    // An unknown settlement is ignored.
    rig.host.handle_settlement(Settlement {
        key: FactKey("other".into()),
        outcome: FactOutcome::Ok(json!({ "score": 100 })),
    });
    rig.ticks(1);
    assert_eq!(rig.host.zone::<Arena>().unwrap().score("alice"), 7);
}

#[test]
fn collected_pickups_respawn() {
    let mut rig = Rig::new(json!({ "drones": 0, "pickups": 1 }), 2);
    let a = rig.join("alice", None, Role::Player);
    let (px, py) = rig.host.zone::<Arena>().unwrap().pickups()[0];
    rig.put(a, px, py);
    rig.ticks(1);
    assert!(rig.host.zone::<Arena>().unwrap().pickups().is_empty());
    rig.put(a, 1.0, 1.0);
    rig.ticks(RESPAWN_TICKS as u32 - 1);
    assert!(rig.host.zone::<Arena>().unwrap().pickups().is_empty());
    rig.ticks(1);
    assert_eq!(rig.host.zone::<Arena>().unwrap().pickups().len(), 1);
    assert!(rig.kind_count(a, KIND_PICKUP) <= 1);
}

#[test]
fn save_and_restore_keep_scores_pending_facts_and_pickups() {
    let mut rig = Rig::new(json!({ "drones": 3, "pickups": 4 }), 3);
    let a = rig.join("alice", None, Role::Player);
    let (px, py) = rig.host.zone::<Arena>().unwrap().pickups()[0];
    rig.put(a, px, py);
    rig.ticks(1);
    let fact = rig.host.drain_facts().remove(0);
    rig.host.handle_settlement(Settlement {
        key: fact.key.clone(),
        outcome: FactOutcome::Ok(json!({ "score": 3 })),
    });
    rig.ticks(1);
    let (qx, qy) = rig.host.zone::<Arena>().unwrap().pickups()[0];
    rig.put(a, qx, qy);
    rig.ticks(1);
    let in_flight = rig.host.drain_facts().remove(0);
    let pickups_before = rig.host.zone::<Arena>().unwrap().pickups();
    let envelope = rig.host.snapshot().expect("the arena is persisted");

    let clock = ManualClock::new();
    let mut restored = ZoneHost::restore::<Arena>(
        init(json!({ "drones": 3, "pickups": 4 })),
        zone_config(),
        Arc::new(clock.clone()),
        1,
        &envelope,
    )
    .unwrap();
    assert_eq!(restored.zone::<Arena>().unwrap().score("alice"), 3);
    assert_eq!(restored.zone::<Arena>().unwrap().pending_facts(), 1);
    assert_eq!(restored.zone::<Arena>().unwrap().pickups(), pickups_before);
    // The unsettled fact is sent again under its key; settling it raises the score once.
    let resent = restored.drain_facts();
    assert_eq!(resent.len(), 1);
    assert_eq!(resent[0].key, in_flight.key);
    let b = restored
        .handle_join(Principal::new("alice"), Claims::new(), Role::Player)
        .unwrap();
    restored.handle_settlement(Settlement {
        key: in_flight.key,
        outcome: FactOutcome::Ok(json!({ "score": 4 })),
    });
    clock.advance(restored.config().dt());
    restored.advance(clock.now());
    assert_eq!(restored.zone::<Arena>().unwrap().score("alice"), 4);
    let e = restored.zone::<Arena>().unwrap().avatar(b).unwrap();
    assert_eq!(restored.world().get_uint(e, F_SCORE).unwrap(), 4);

    // A damaged envelope is a typed error, not a panic.
    let mut broken = rig.host.snapshot().unwrap();
    if let Some(b) = broken.last_mut() {
        *b ^= 0xff;
    }
    assert!(ZoneHost::restore::<Arena>(
        init(json!({})),
        zone_config(),
        Arc::new(ManualClock::new()),
        2,
        &broken
    )
    .is_err());
}

#[test]
fn bad_params_and_configs_are_refused() {
    let clock = Arc::new(ManualClock::new());
    for params in [
        json!({ "drones": -1 }),
        json!({ "pickups": 10_000 }),
        json!({ "drones": "x" }),
    ] {
        let err = ZoneHost::new::<Arena>(init(params), zone_config(), clock.clone()).unwrap_err();
        assert!(matches!(err, ZoneError::InvalidParams(_)), "{err}");
    }
    let mut wrong_rate = zone_config();
    wrong_rate.tick_hz = 60;
    assert!(matches!(
        ZoneHost::new::<Arena>(init(json!({})), wrong_rate, clock.clone()),
        Err(ZoneError::InvalidParams(_))
    ));
    let mut wrong_step = zone_config();
    wrong_step.replication.pos_step = 0.05;
    assert!(matches!(
        ZoneHost::new::<Arena>(init(json!({})), wrong_step, clock),
        Err(ZoneError::InvalidParams(_))
    ));
}

#[test]
fn leaving_removes_the_avatar_for_everyone() {
    let mut rig = Rig::new(json!({ "drones": 0, "pickups": 0 }), 1);
    let a = rig.join("alice", None, Role::Player);
    let b = rig.join("bob", None, Role::Player);
    rig.ticks(1);
    let ea = rig.host.zone::<Arena>().unwrap().avatar(a).unwrap();
    assert!(rig.sees(b, ea));
    rig.host
        .handle_leave(a, zonekeep_core::LeaveReason::Left)
        .unwrap();
    rig.mirrors.remove(&a);
    rig.ticks(1);
    assert!(!rig.sees(b, ea));
    assert!(rig.host.zone::<Arena>().unwrap().position(a).is_none());
}

#[test]
fn two_players_asking_for_one_name_get_distinct_names_and_colours() {
    let mut rig = Rig::new(json!({ "drones": 0, "pickups": 0 }), 1);
    let a = rig.join("guest:ann:1", Some("ann"), Role::Player);
    let b = rig.join("guest:ann:2", Some("ann"), Role::Player);
    rig.ticks(1);
    let field = |who: PlayerId, f: usize| {
        let e = rig.host.zone::<Arena>().unwrap().avatar(who).unwrap();
        rig.mirrors[&a].get(e.0).unwrap().fields[f].clone()
    };
    assert_eq!(field(a, F_NAME), FieldValue::Str("ann".into()));
    assert_eq!(field(b, F_NAME), FieldValue::Str("ann-2".into()));
    let (FieldValue::U(ha), FieldValue::U(hb)) = (field(a, F_HUE), field(b, F_HUE)) else {
        panic!("hues are unsigned fields");
    };
    let gap = ha.abs_diff(hb).min(360 - ha.abs_diff(hb));
    assert!(gap >= crate::identity::MIN_HUE_GAP, "hues {ha} and {hb}");
}

#[test]
fn a_dropped_player_is_shown_disconnected_until_it_rejoins() {
    let mut rig = Rig::new(json!({ "drones": 0, "pickups": 0 }), 1);
    let a = rig.join("alice", Some("ann"), Role::Player);
    let b = rig.join("bob", Some("bo"), Role::Player);
    rig.ticks(1);
    let b_entity = rig.host.zone::<Arena>().unwrap().avatar(b).unwrap();
    let connected =
        |rig: &Rig| rig.mirrors[&a].get(b_entity.0).unwrap().fields[F_CONNECTED].clone();
    assert_eq!(connected(&rig), FieldValue::Bool(true));

    rig.host.handle_drop(b).unwrap();
    rig.ticks(1);
    assert_eq!(
        connected(&rig),
        FieldValue::Bool(false),
        "seen as gone during the grace"
    );

    rig.host.handle_rejoin(b).unwrap();
    rig.ticks(1);
    assert_eq!(
        connected(&rig),
        FieldValue::Bool(true),
        "back after resuming"
    );
}

#[test]
fn an_arena_built_from_its_image_plays_on_exactly_as_the_original() {
    // Players moving, drones mid-path, a pickup collected and its fact in flight, a player who
    // left: the copy built from the image and the original stay equal tick for tick, in the
    // zone's own state hash and in the world's.
    let mut rig = Rig::new(json!({ "drones": 6, "pickups": 4 }), 11);
    let a = rig.join("alice", Some("Alice"), Role::Player);
    let b = rig.join("bob", None, Role::Player);
    let (px, py) = rig.host.zone::<Arena>().unwrap().pickups()[0];
    rig.put(a, px, py);
    rig.hold(b, DIR_RIGHT, 20);
    rig.host
        .handle_leave(b, zonekeep_core::LeaveReason::Left)
        .unwrap();
    rig.input(a, &[DIR_DOWN]);

    let image = rig.host.image().expect("the arena keeps an image");
    let clock = ManualClock::new();
    clock.set(rig.host.next_tick_due() - rig.host.config().dt());
    let mut copy = ZoneHost::from_image::<Arena>(
        init(json!({ "drones": 6, "pickups": 4 })),
        rig.host.config().clone(),
        Arc::new(clock.clone()),
        &image,
    )
    .unwrap();
    assert_eq!(copy.zone::<Arena>().unwrap().position(a), Some(rig.pos(a)));
    for i in 0..60u32 {
        let dir = if i % 10 < 5 { DIR_LEFT } else { DIR_DOWN };
        let seq = 100 + i;
        assert!(rig.host.handle_input(a, seq, 0, &[dir]).is_accepted());
        assert!(copy.handle_input(a, seq, 0, &[dir]).is_accepted());
        rig.clock.advance(rig.host.config().dt());
        clock.set(rig.clock.now());
        rig.host.advance(rig.clock.now());
        copy.advance(clock.now());
        assert_eq!(copy.tick(), rig.host.tick());
        assert_eq!(
            copy.state_hash(),
            rig.host.state_hash(),
            "tick {}",
            copy.tick()
        );
        assert_eq!(
            copy.world().hash(),
            rig.host.world().hash(),
            "tick {}",
            copy.tick()
        );
    }
    let keys = |h: &mut ZoneHost| {
        h.drain_facts()
            .into_iter()
            .map(|f| f.key)
            .collect::<Vec<_>>()
    };
    assert_eq!(keys(&mut copy), keys(&mut rig.host));

    // A damaged image is refused, never built into a different zone.
    let mut damaged = image.clone();
    let at = damaged.len() / 3;
    damaged[at] ^= 0x20;
    assert!(ZoneHost::from_image::<Arena>(
        init(json!({})),
        zone_config(),
        Arc::new(ManualClock::new()),
        &damaged
    )
    .is_err());
}

#[test]
fn the_score_is_a_stat_of_the_players_character() {
    let mut rig = Rig::new(json!({ "drones": 0, "pickups": 3 }), 9);
    // Alice comes from another arena with 12 points on her character.
    let a = rig
        .host
        .handle_join_with_character(
            Principal::new("alice"),
            Claims::new(),
            Role::Player,
            crate::character_with_score(12),
        )
        .unwrap();
    rig.mirrors.insert(a, Mirror::new());
    rig.ticks(1);
    assert_eq!(rig.host.zone::<Arena>().unwrap().score("alice"), 12);
    let entity = rig.host.zone::<Arena>().unwrap().avatar(a).unwrap();
    assert_eq!(
        rig.host.world().get_uint(entity, F_SCORE).ok(),
        Some(12),
        "her avatar shows the character's score"
    );
    // A pickup settles: the new score is written to her character at once.
    let (px, py) = rig.host.zone::<Arena>().unwrap().pickups()[0];
    rig.put(a, px, py);
    rig.ticks(1);
    let fact = rig.host.drain_facts().remove(0);
    rig.host.handle_settlement(Settlement {
        key: fact.key,
        outcome: FactOutcome::Ok(json!({ "score": 13 })),
    });
    rig.ticks(1);
    let writes = rig.host.drain_character_writes();
    assert_eq!(writes.len(), 1);
    assert!(!writes[0].release);
    assert_eq!(crate::character_score(&writes[0].data), Some(13));
    // Leaving hands it back with that score.
    rig.host.handle_leave(a, LeaveReason::Left).unwrap();
    let writes = rig.host.drain_character_writes();
    assert!(writes[0].release);
    assert_eq!(crate::character_score(&writes[0].data), Some(13));
}

/// The Rust client code `zonekeep codegen --kind arena --lang rust` writes (committed, checked
/// fresh by the binary's tests), used against the zone itself.
#[path = "../../tests/generated/arena.rs"]
#[allow(dead_code)]
mod api;

#[test]
fn generated_inputs_are_the_bytes_the_zone_decodes() {
    for dir in 0..=u8::MAX {
        for flags in [0u8, 1, 2, 255] {
            let generated = api::MoveInput { dir, flags }.encode();
            assert_eq!(
                generated,
                MoveInput { dir, flags }.encode(),
                "{dir} {flags}"
            );
            let decoded = MoveInput::decode(&generated).unwrap();
            assert_eq!(decoded.dir, dir & DIR_MASK);
            assert_eq!(decoded.flags, flags & FLAG_MASK);
        }
    }
    assert_eq!(api::DIR_MASK, i64::from(DIR_MASK));
    assert_eq!(api::FLAG_WALK, i64::from(FLAG_WALK));
    assert_eq!(api::MAX_PLAYERS, i64::from(MAX_PLAYERS));
}

#[test]
fn generated_code_reads_the_zones_entities_and_events() {
    let mut rig = Rig::new(json!({ "drones": 0, "pickups": 3 }), 9);
    let kinds = api::ArenaKinds::bind(&rig.host.schema()).unwrap();
    let a = rig.join("alice", Some("Alice"), Role::Player);
    rig.ticks(1);
    let entity = rig.host.zone::<Arena>().unwrap().avatar(a).unwrap();
    let seen = rig.mirrors[&a].get(entity.0).unwrap();
    assert_eq!(seen.kind, kinds.player);
    let player = api::PlayerEntity::read(&seen.fields);
    assert_eq!(player.name, "Alice");
    assert!(player.connected);
    assert_eq!(player.score, 0);
    let pillars = rig.mirrors[&a]
        .iter()
        .filter(|(_, e)| e.kind == kinds.pillar)
        .map(|(_, e)| api::PillarEntity::read(&e.fields).radius)
        .collect::<Vec<_>>();
    assert!(!pillars.is_empty() && pillars.iter().all(|r| *r > 0.0));

    // A pickup, then its settlement: both events read through the generated decoder.
    let (px, py) = rig.host.zone::<Arena>().unwrap().pickups()[0];
    rig.put(a, px, py);
    rig.ticks(1);
    let fact = rig.host.drain_facts().remove(0);
    rig.host.handle_settlement(Settlement {
        key: fact.key.clone(),
        outcome: FactOutcome::Ok(json!({ "score": 7 })),
    });
    rig.ticks(1);
    let events: Vec<api::ArenaEvent> = rig.events[&a]
        .iter()
        .map(|(topic, payload)| api::decode_event(*topic, payload).unwrap().unwrap())
        .collect();
    assert_eq!(
        events,
        vec![
            api::ArenaEvent::Picked(api::PickedEvent { amount: 1 }),
            api::ArenaEvent::Saved(api::SavedEvent {
                amount: 1,
                total: 7
            }),
        ]
    );
    let seen = rig.mirrors[&a].get(entity.0).unwrap();
    assert_eq!(api::PlayerEntity::read(&seen.fields).score, 7);
}
