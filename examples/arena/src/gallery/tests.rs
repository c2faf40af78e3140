#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The gallery driven through a real `ZoneHost` with a manual clock; verdicts are read from the
//! frames the host builds, decoded as a client decodes them.

use std::sync::Arc;

use zonekeep_core::{Claims, Clock, ManualClock, PlayerId, Principal, Role, ZoneHost, ZoneInit};
use zonekeep_protocol::Mirror;

use super::*;

/// Every target and its world position at one tick.
type Targets = Vec<(EntityId, (f32, f32))>;

struct Rig {
    host: ZoneHost,
    clock: ManualClock,
    mirror: Mirror,
    player: PlayerId,
    seq: u32,
    verdicts: Vec<Verdict>,
    /// Every target's world position after each tick, by tick.
    seen: BTreeMap<u64, Targets>,
}

impl Rig {
    fn new(seed: u64) -> Rig {
        let clock = ManualClock::new();
        let mut config = gallery_config();
        config.world_seed = seed;
        let init = ZoneInit {
            zone_id: "gallery-test".into(),
            kind: "gallery".into(),
            params: serde_json::Value::Null,
        };
        let mut host = ZoneHost::new::<Gallery>(init, config, Arc::new(clock.clone())).unwrap();
        let player = host
            .handle_join(Principal::new("ann"), Claims::new(), Role::Player)
            .unwrap();
        Rig {
            host,
            clock,
            mirror: Mirror::new(),
            player,
            seq: 0,
            verdicts: Vec::new(),
            seen: BTreeMap::new(),
        }
    }

    fn gallery(&self) -> &Gallery {
        self.host.zone::<Gallery>().unwrap()
    }

    /// Runs `n` ticks, decoding the player's frames and noting where every target is.
    fn ticks(&mut self, n: u32) {
        let schema = self.host.schema();
        for _ in 0..n {
            self.clock.advance(self.host.config().dt());
            let report = self.host.advance(self.clock.now());
            assert_eq!(report.ticks_run, 1);
            let frames: Vec<Vec<u8>> = self
                .host
                .drain_frames()
                .unwrap()
                .map(|f| f.bytes.to_vec())
                .collect();
            for bytes in frames {
                let d = self.mirror.decode_apply(&bytes, &schema).unwrap();
                for e in d.events.unwrap_or_default() {
                    assert_eq!(e.topic, TOPIC_VERDICT);
                    self.verdicts.push(Verdict::decode(&e.payload).unwrap());
                }
            }
            let targets: Vec<EntityId> = self.gallery().targets().flatten().collect();
            let world = self.host.world();
            let at = targets
                .into_iter()
                .map(|id| (id, world.pos(id).unwrap()))
                .collect();
            self.seen.insert(self.host.tick(), at);
        }
    }

    fn shoot(&mut self, view_tick: u32, aim: (f32, f32), compensated: bool) -> u32 {
        self.seq += 1;
        let shot = Shot {
            x: aim.0,
            y: aim.1,
            compensated,
        };
        assert!(self
            .host
            .handle_input(self.player, self.seq, view_tick, &shot.encode())
            .is_accepted());
        self.seq
    }

    fn verdict(&self, seq: u32) -> Verdict {
        *self
            .verdicts
            .iter()
            .find(|v| v.seq == seq)
            .unwrap_or_else(|| panic!("no verdict for shot {seq}"))
    }
}

#[test]
fn a_compensated_shot_at_the_drawn_target_hits_and_an_uncompensated_one_misses() {
    let mut rig = Rig::new(7);
    // A 150 ms each-way link, as the host measures it from its Pings.
    rig.host
        .set_rtt(rig.player, std::time::Duration::from_millis(300));
    rig.ticks(20);
    // The player drew tick 10; both shots aim at the centre of a target as it was then.
    let drawn = rig.seen[&10].clone();
    let (first, at_first) = drawn[0];
    let (second, at_second) = drawn[1];
    let on = rig.shoot(10, at_first, true);
    let off = rig.shoot(10, at_second, false);
    rig.ticks(1);

    let hit = rig.verdict(on);
    assert_eq!(hit.outcome, Outcome::Hit);
    assert_eq!(hit.target, first.0);
    assert!(hit.compensated);
    assert_eq!(
        hit.ticks_behind, 11,
        "applied in tick 21, judged at tick 10"
    );

    // Eleven ticks later every target is more than its radius away from where it was drawn.
    let miss = rig.verdict(off);
    assert_eq!(miss.outcome, Outcome::Miss);
    assert!(!miss.compensated);
    assert_eq!((miss.target, miss.ticks_behind), (0, 0));
    assert_eq!((miss.hits, miss.shots), (1, 2));

    // The same uncompensated shot at where the target is now hits.
    let now = rig.seen[&21]
        .iter()
        .find(|(id, _)| *id == second)
        .unwrap()
        .1;
    let present = rig.shoot(21, now, false);
    rig.ticks(1);
    assert_eq!(rig.verdict(present).outcome, Outcome::Hit);
    let s = rig.gallery().stats();
    assert_eq!(
        (
            s.compensated_shots,
            s.compensated_hits,
            s.present_shots,
            s.present_hits
        ),
        (1, 1, 2, 1)
    );
}

#[test]
fn a_hit_target_leaves_its_rail_and_a_new_one_comes_later() {
    let mut rig = Rig::new(3);
    rig.ticks(5);
    let (target, at) = rig.seen[&5][0];
    let seq = rig.shoot(5, at, true);
    rig.ticks(1);
    assert_eq!(rig.verdict(seq).target, target.0);
    assert_eq!(rig.gallery().targets().next(), Some(None));
    assert!(!rig.host.world().contains(target));
    assert!(
        rig.mirror.get(target.0).is_none(),
        "the client is told it is gone"
    );

    // The same target cannot be hit twice. A shot that drew it before it fell is told it was
    // taken (a fair shot, beaten to it), which counts as a shot and not a hit; judged against
    // the present, where the target no longer is, the same shot is a miss.
    let again = rig.shoot(5, at, true);
    let late = rig.shoot(5, at, false);
    rig.ticks(1);
    let taken = rig.verdict(again);
    assert_eq!(taken.outcome, Outcome::Taken);
    assert_eq!(taken.target, target.0);
    assert_eq!((taken.hits, taken.shots), (1, 2));
    assert_eq!(rig.verdict(late).outcome, Outcome::Miss);
    assert_eq!(rig.gallery().stats().taken, 1);

    rig.ticks(u32::try_from(RESPAWN_TICKS).unwrap());
    let new = rig.gallery().targets().next().unwrap().expect("respawned");
    assert_ne!(new, target);
    assert_eq!(rig.host.world().pos(new).unwrap().1, RAILS[0].y);
    assert!(rig.mirror.get(new.0).is_some());
}

#[test]
fn a_shot_before_any_frame_or_without_a_view_tick_is_not_judged() {
    let mut rig = Rig::new(1);
    let early = rig.shoot(1, (10.0, 10.0), true);
    rig.ticks(3);
    let blind = rig.shoot(0, (10.0, 10.0), true);
    rig.ticks(1);
    for seq in [early, blind] {
        let v = rig.verdict(seq);
        assert_eq!(v.outcome, Outcome::Unjudged);
        assert_eq!(v.shots, 0, "not counted against the shooter");
    }
    assert_eq!(rig.gallery().stats().unjudged, 2);
}

#[test]
fn a_shot_cannot_reach_further_back_than_the_view_delay_allows() {
    let mut rig = Rig::new(5);
    rig.ticks(100);
    let seq = rig.shoot(2, (10.0, 10.0), true);
    rig.ticks(1);
    let limit = MAX_VIEW_DELAY.as_millis() as u64 * u64::from(TICK_HZ) / 1000;
    assert!(u64::from(rig.verdict(seq).ticks_behind) <= limit);
}

#[test]
fn malformed_shots_are_refused_before_the_tick() {
    let mut rig = Rig::new(1);
    for bad in [&[][..], &[1, 2, 3][..], &[0xff; SHOT_LEN][..]] {
        rig.seq += 1;
        let outcome = rig.host.handle_input(rig.player, rig.seq, 0, bad);
        assert!(!outcome.is_accepted(), "{bad:?}");
    }
    rig.ticks(1);
    assert!(rig.verdicts.is_empty());
}

#[test]
fn the_same_seed_and_shots_give_the_same_gallery() {
    let run = || {
        let mut rig = Rig::new(11);
        rig.ticks(10);
        let at = rig.seen[&8][2].1;
        rig.shoot(8, at, true);
        rig.ticks(40);
        (rig.host.state_hash(), rig.seen[&50].clone())
    };
    assert_eq!(run(), run());
}

#[test]
fn params_are_refused() {
    let init = ZoneInit {
        zone_id: "g".into(),
        kind: "gallery".into(),
        params: serde_json::json!({"rails": 9}),
    };
    let clock = ManualClock::new();
    let made = ZoneHost::new::<Gallery>(init, gallery_config(), Arc::new(clock));
    assert!(matches!(made, Err(ZoneError::InvalidParams(_))));
}
