//! Observers at a lower patch rate (`ZoneConfig::observer_patch_every`): each gets frames on
//! its staggered patches only, every event addressed to it arrives in order with its next
//! frame, and players get exactly the frames they would get without it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use zonekeep_protocol::mirror::Mirror;
use zonekeep_protocol::schema::KindDef;

use crate::{
    Claims, Clock, Ctx, EntityId, EventTarget, InputRefusal, JoinRefusal, ManualClock, PlayerId,
    PlayerInfo, Principal, Role, Zone, ZoneConfig, ZoneError, ZoneHost, ZoneInit,
};

/// A ball rolls every tick. Each tick the zone tells everyone the tick (topic 1), each observer
/// the tick again (topic 2) and each player its own (topic 4); with `"flood"` it also sends each
/// observer ten 16 kB events (topic 3), far more than one frame carries over a few patches.
struct Pitch {
    ball: EntityId,
    observers: Vec<PlayerId>,
    players: Vec<PlayerId>,
    flood: bool,
}

impl Zone for Pitch {
    type Input = u8;

    fn create(init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let w = ctx.world();
        let kind = w
            .declare_kind(KindDef {
                name: "ball".into(),
                fields: vec![],
            })
            .map_err(|e| ZoneError::Failed(e.to_string()))?;
        let ball = w
            .spawn(kind, 0.0, 0.0)
            .map_err(|e| ZoneError::Failed(e.to_string()))?;
        Ok(Pitch {
            ball,
            observers: Vec::new(),
            players: Vec::new(),
            flood: init.params.get("flood").is_some(),
        })
    }

    fn on_join(&mut self, _ctx: &mut Ctx<'_>, p: &PlayerInfo) -> Result<(), JoinRefusal> {
        self.players.push(p.id);
        Ok(())
    }

    fn on_observe(&mut self, _ctx: &mut Ctx<'_>, o: &PlayerInfo) -> Result<(), JoinRefusal> {
        self.observers.push(o.id);
        Ok(())
    }

    fn sanitize(&mut self, _p: PlayerId, _payload: &[u8]) -> Result<u8, InputRefusal> {
        Err(InputRefusal::new(1, "no inputs"))
    }

    fn on_input(&mut self, _ctx: &mut Ctx<'_>, _p: PlayerId, _input: u8) {}

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        let t = ctx.tick();
        let _ = ctx.world().set_pos(self.ball, t as f32 * 0.75, 1.0);
        let stamp = t.to_le_bytes().to_vec();
        ctx.emit_event(EventTarget::All, 1, stamp.clone());
        for &o in &self.observers {
            ctx.emit_event(EventTarget::Player(o), 2, stamp.clone());
            if self.flood {
                for n in 0..10u8 {
                    let mut big = stamp.clone();
                    big.push(n);
                    big.resize(16_000, n);
                    ctx.emit_event(EventTarget::Player(o), 3, big);
                }
            }
        }
        for &p in &self.players {
            ctx.emit_event(EventTarget::Player(p), 4, stamp.clone());
        }
    }
}

fn host(patch_every: u32, observer_patch_every: u32, flood: bool) -> (ZoneHost, ManualClock) {
    let clock = ManualClock::new();
    let config = ZoneConfig {
        tick_hz: 10,
        patch_every,
        observer_patch_every,
        ..ZoneConfig::default()
    };
    let params = match flood {
        true => serde_json::json!({ "flood": true }),
        false => serde_json::json!({}),
    };
    let init = ZoneInit {
        zone_id: "pitch-1".into(),
        kind: "pitch".into(),
        params,
    };
    let h = ZoneHost::new::<Pitch>(init, config, Arc::new(clock.clone())).unwrap();
    (h, clock)
}

/// What each participant received, as its client would.
#[derive(Default)]
struct Seen {
    /// Ticks of its frames.
    frames: Vec<u64>,
    /// Its events, `(topic, payload)`, in the order they arrived.
    events: Vec<(u16, Vec<u8>)>,
    mirror: Mirror,
    /// The frames' bytes.
    bytes: Vec<Vec<u8>>,
}

/// Runs `steps[i]` ticks per `advance` and returns what each participant got, with the tick of
/// every patch built and of the one before it.
fn run(
    h: &mut ZoneHost,
    clock: &ManualClock,
    steps: &[u32],
) -> (BTreeMap<PlayerId, Seen>, Vec<(u64, u64)>) {
    let mut seen: BTreeMap<PlayerId, Seen> = BTreeMap::new();
    let mut patches = Vec::new();
    let mut last = 0;
    let ball = h.zone::<Pitch>().unwrap().ball;
    for &ticks in steps {
        clock.advance(Duration::from_millis(100) * ticks);
        let report = h.advance(clock.now());
        assert_eq!(report.ticks_run, u64::from(ticks));
        if report.patch_ticks.is_empty() {
            assert_eq!(h.drain_frames().unwrap().len(), 0);
            continue;
        }
        let tick = h.tick();
        patches.push((last, tick));
        last = tick;
        let schema = h.schema();
        let frames: Vec<(PlayerId, Vec<u8>)> = h
            .drain_frames()
            .unwrap()
            .map(|f| (f.player, f.bytes.to_vec()))
            .collect();
        assert_eq!(h.last_build_stats().events_dropped, 0);
        for (player, bytes) in frames {
            let s = seen.entry(player).or_default();
            let d = s.mirror.decode_apply(&bytes, &schema).unwrap();
            s.frames.push(tick);
            s.events.extend(
                d.events
                    .unwrap_or_default()
                    .into_iter()
                    .map(|e| (e.topic, e.payload)),
            );
            // What it holds is the world as of this patch, however long it sat out.
            assert_eq!(
                s.mirror.get(ball.0).map(|e| (e.qx, e.qy)),
                h.world().qpos(ball).ok(),
                "{player} at {tick}"
            );
            s.bytes.push(bytes);
        }
    }
    (seen, patches)
}

/// The events the zone addressed to a player or an observer in ticks `1..=through`, in order.
fn addressed(observer: bool, through: u64) -> Vec<(u16, Vec<u8>)> {
    let mut out = Vec::new();
    for t in 1..=through {
        let stamp = t.to_le_bytes().to_vec();
        out.push((1, stamp.clone()));
        match observer {
            true => out.push((2, stamp)),
            false => out.push((4, stamp)),
        }
    }
    out
}

/// Whether observer `id` is served by the patch of `tick` after the patch of `before`, by
/// brute force over the patch indices in between: the first patch serves everyone, then patch
/// index `i` is `id`'s when `(i + id) % every == 0`.
fn expected_turn(before: u64, tick: u64, per: u64, every: u64, id: PlayerId) -> bool {
    before == 0 || (before / per + 1..=tick / per).any(|i| (i + u64::from(id.0)) % every == 0)
}

fn join(h: &mut ZoneHost, name: &str, role: Role) -> PlayerId {
    h.handle_join(Principal::new(name), Claims::new(), role)
        .unwrap()
}

#[test]
fn observers_get_frames_on_their_staggered_patches_and_every_event_in_order() {
    let (mut h, clock) = host(2, 3, false);
    let player = join(&mut h, "p", Role::Player);
    let observers: Vec<PlayerId> = (0..3)
        .map(|i| join(&mut h, &format!("o{i}"), Role::Observer))
        .collect();
    // One tick at a time, then a host catching up: five ticks (two or three patch ticks) in
    // one advance, built once.
    let mut steps = vec![1; 40];
    steps.extend([5, 1, 1, 5, 3, 1, 1, 1, 1, 1, 1, 1]);
    let (seen, patches) = run(&mut h, &clock, &steps);
    let all: Vec<u64> = patches.iter().map(|&(_, t)| t).collect();

    // The player gets a frame every patch, and every event addressed to it, in order.
    assert_eq!(seen[&player].frames, all);
    let last = *all.last().unwrap();
    assert_eq!(seen[&player].events, addressed(false, last));

    let mut served_per_patch = vec![0usize; patches.len()];
    for &o in &observers {
        let s = &seen[&o];
        let want: Vec<u64> = patches
            .iter()
            .filter(|&&(before, tick)| expected_turn(before, tick, 2, 3, o))
            .map(|&(_, t)| t)
            .collect();
        assert_eq!(s.frames, want, "observer {o}'s patches");
        assert!(
            s.frames.len() * 2 < all.len(),
            "{o}: {} frames",
            s.frames.len()
        );
        for (i, &(_, t)) in patches.iter().enumerate() {
            served_per_patch[i] += usize::from(s.frames.contains(&t));
        }
        // Every event addressed to it until its last frame came, in order, none twice.
        let through = *s.frames.last().unwrap();
        assert_eq!(s.events, addressed(true, through), "observer {o}'s events");
    }
    // Staggered: after the first patch, one tick at a time, each patch serves one of the
    // three observers, not all or none.
    assert!(
        served_per_patch[1..20].iter().all(|&n| n == 1),
        "{served_per_patch:?}"
    );
}

#[test]
fn players_get_the_same_frames_whatever_the_observers_rate() {
    let play = |every: u32| {
        let (mut h, clock) = host(1, every, false);
        let p = join(&mut h, "p", Role::Player);
        let q = join(&mut h, "q", Role::Player);
        for i in 0..5 {
            join(&mut h, &format!("o{i}"), Role::Observer);
        }
        let (seen, _) = run(&mut h, &clock, &[1; 30]);
        (seen[&p].bytes.clone(), seen[&q].bytes.clone())
    };
    assert_eq!(play(1), play(4));
    assert_eq!(play(1), play(1000));
}

#[test]
fn an_observer_whose_events_would_overflow_a_frame_gets_one_early_and_loses_none() {
    let (mut h, clock) = host(1, 1000, true);
    let o = join(&mut h, "o", Role::Observer);
    let (seen, patches) = run(&mut h, &clock, &[1; 40]);
    let s = &seen[&o];
    // 160 kB a patch, 256 kB a frame: a frame about every other patch, not one in 1000.
    assert!(s.frames.len() > 10, "{:?}", s.frames);
    assert!(s.frames.len() < patches.len(), "{:?}", s.frames);
    // Every event, in order, through the last one its last frame carried.
    let mut want = Vec::new();
    for t in 1..=40u64 {
        let stamp = t.to_le_bytes().to_vec();
        want.push((1, stamp.clone()));
        want.push((2, stamp.clone()));
        for n in 0..10u8 {
            let mut big = stamp.clone();
            big.push(n);
            big.resize(16_000, n);
            want.push((3, big));
        }
    }
    assert_eq!(s.events.len() + h.held.kept(), want.len());
    assert!(s.events == want[..s.events.len()], "in order, none lost");
}
