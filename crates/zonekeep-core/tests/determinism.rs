//! Determinism: the same seed and the same input log, fed at the same ticks
//! through a manual clock, give identical state hashes at every tick; one
//! changed input (or another seed) changes them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use zonekeep_core::rand_core::RngCore;
use zonekeep_core::{
    Claims, Clock, Ctx, InputPolicy, InputRefusal, ManualClock, PlayerId, Principal, Role,
    StateHasher, TimerId, Zone, ZoneConfig, ZoneError, ZoneHost, ZoneInit,
};

/// Walkers on a grid. Inputs are a direction; each tick every walker drifts
/// by a random step; a timer drops a coin at a random cell every 7 ticks and
/// a walker on a coin's cell scores it.
struct Walkers {
    pos: Vec<(PlayerId, i32, i32, u32)>,
    coins: Vec<(i32, i32)>,
}

impl Zone for Walkers {
    type Input = (i8, i8);

    fn create(_init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        ctx.timers()
            .every(7, 1)
            .map_err(|e| ZoneError::Failed(e.to_string()))?;
        Ok(Walkers {
            pos: Vec::new(),
            coins: Vec::new(),
        })
    }

    fn on_join(
        &mut self,
        ctx: &mut Ctx<'_>,
        player: &zonekeep_core::PlayerInfo,
    ) -> Result<(), zonekeep_core::JoinRefusal> {
        let x = (ctx.rng().next_u32() % 16) as i32;
        let y = (ctx.rng().next_u32() % 16) as i32;
        self.pos.push((player.id, x, y, 0));
        Ok(())
    }

    fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<(i8, i8), InputRefusal> {
        match payload {
            [dx, dy] => Ok(((*dx as i8).clamp(-1, 1), (*dy as i8).clamp(-1, 1))),
            _ => Err(InputRefusal::new(1, "two bytes")),
        }
    }

    fn on_input(&mut self, _ctx: &mut Ctx<'_>, player: PlayerId, (dx, dy): (i8, i8)) {
        if let Some(w) = self.pos.iter_mut().find(|w| w.0 == player) {
            w.1 += i32::from(dx) * 2;
            w.2 += i32::from(dy) * 2;
        }
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        for i in 0..self.pos.len() {
            let r = ctx.rng().next_u32();
            let w = &mut self.pos[i];
            w.1 = (w.1 + (r % 3) as i32 - 1).rem_euclid(32);
            w.2 = (w.2 + ((r >> 8) % 3) as i32 - 1).rem_euclid(32);
            if let Some(c) = self.coins.iter().position(|c| *c == (w.1, w.2)) {
                self.coins.swap_remove(c);
                w.3 += 1;
            }
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, _id: TimerId, _tag: u64) {
        let c = (
            (ctx.rng().next_u32() % 32) as i32,
            (ctx.rng().next_u32() % 32) as i32,
        );
        self.coins.push(c);
    }

    fn state_hash(&self) -> Option<u64> {
        let mut h = StateHasher::new();
        self.pos.hash(&mut h);
        self.coins.hash(&mut h);
        Some(h.finish())
    }
}

/// (tick at which it is pushed, player index, seq, payload)
type InputLog = Vec<(u64, usize, u32, [u8; 2])>;

fn input_log() -> InputLog {
    let mut log = Vec::new();
    for tick in 1..=120u64 {
        for player in 0..3usize {
            if (tick + player as u64) % 3 == 0 {
                let seq = u32::try_from(tick).unwrap();
                let dx = ((tick * 7 + player as u64) % 3) as u8; // 0, 1 or 2 (2 clamps to 1)
                let dy = (((tick * 5 + player as u64) % 3) as u8).wrapping_sub(1); // 255 = -1
                log.push((tick, player, seq, [dx, dy]));
            }
        }
    }
    log
}

fn run(world_seed: u64, log: &InputLog) -> Vec<(u64, u64)> {
    let clock = ManualClock::new();
    let config = ZoneConfig {
        world_seed,
        input_policy: InputPolicy::Drain,
        ..ZoneConfig::default()
    };
    let init = ZoneInit {
        zone_id: "walkers-1".into(),
        kind: "walkers".into(),
        params: zonekeep_core::serde_json::Value::Null,
    };
    let mut host = ZoneHost::new::<Walkers>(init, config, Arc::new(clock.clone())).unwrap();
    let players: Vec<PlayerId> = (0..3)
        .map(|i| {
            host.handle_join(Principal::new(format!("p{i}")), Claims::new(), Role::Player)
                .unwrap()
        })
        .collect();
    let dt = host.config().dt();
    let mut hashes = Vec::new();
    for tick in 1..=120u64 {
        for (_, player, seq, payload) in log.iter().filter(|e| e.0 == tick) {
            assert!(host
                .handle_input(players[*player], *seq, 0, payload)
                .is_accepted());
        }
        clock.advance(dt);
        let report = host.advance(clock.now());
        assert_eq!(report.ticks_run, 1);
        // Asked for after every tick: the host computes a hash only when asked.
        if let Some(hash) = host.state_hash() {
            hashes.push((host.tick(), hash));
        }
    }
    hashes
}

#[test]
fn same_seed_and_inputs_give_identical_hashes_every_tick() {
    let log = input_log();
    let a = run(1234, &log);
    let b = run(1234, &log);
    assert_eq!(a.len(), 120);
    assert_eq!(
        a.iter().map(|h| h.0).collect::<Vec<_>>(),
        (1..=120).collect::<Vec<u64>>()
    );
    assert_eq!(a, b);
}

#[test]
fn one_changed_input_changes_the_hash_from_its_tick() {
    let log = input_log();
    let mut changed = log.clone();
    let entry = changed.iter_mut().find(|e| e.0 == 60).unwrap();
    // Byte 0 means dx 0; 1 and 2 both clamp to dx +1: flip between the two classes.
    entry.3[0] = if entry.3[0] == 0 { 1 } else { 0 };
    let a = run(1234, &log);
    let b = run(1234, &changed);
    let first_diff = a.iter().zip(&b).position(|(x, y)| x != y).unwrap();
    assert_eq!(
        a[first_diff].0, 60,
        "identical before the changed input, different at its tick"
    );
}

#[test]
fn another_world_seed_gives_another_run() {
    let log = input_log();
    assert_ne!(run(1234, &log), run(1235, &log));
}
