//! The runtime/host contract, driven the way a server drives it but with no socket: calls in
//! (joins, inputs, settlements, `advance` with a manual clock), typed outputs out (frames decoded
//! with the protocol crate's `Mirror`, facts, kicks, departures), and a replay of recorded calls.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use zonekeep_core::{
    Claims, Clock, Ctx, EntityId, EventTarget, FactOutcome, InputOutcome, InputRefusal,
    JoinRefusal, KindId, LeaveReason, ManualClock, PlayerId, PlayerInfo, Principal, Role,
    Settlement, Zone, ZoneConfig, ZoneError, ZoneHost, ZoneInit,
};
use zonekeep_protocol::mirror::Mirror;
use zonekeep_protocol::schema::KindDef;

/// Input byte that makes the zone kick its sender.
const QUIT: u8 = 0x7f;
/// Input byte that scores: a fact for the sender and an event to it.
const SCORE: u8 = 100;
/// Event topics.
const SCORED: u16 = 1;
const SETTLED: u16 = 2;

/// Each player runs a "runner" at x = 10 * id; an input byte (signed) moves it along x.
struct Runners {
    runner: KindId,
    mine: BTreeMap<PlayerId, EntityId>,
    settled: Vec<Settlement>,
}

impl Zone for Runners {
    type Input = i8;

    fn create(_init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let runner = ctx
            .world()
            .declare_kind(KindDef {
                name: "runner".into(),
                fields: vec![],
            })
            .map_err(|e| ZoneError::Failed(e.to_string()))?;
        Ok(Runners {
            runner,
            mine: BTreeMap::new(),
            settled: Vec::new(),
        })
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, p: &PlayerInfo) -> Result<(), JoinRefusal> {
        let e = ctx
            .world()
            .spawn(self.runner, 10.0 * p.id.0 as f32, 0.0)
            .map_err(|e| JoinRefusal::new(1, e.to_string()))?;
        ctx.set_control(p.id, Some(e));
        self.mine.insert(p.id, e);
        Ok(())
    }

    fn on_leave(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, _why: LeaveReason) {
        if let Some(e) = self.mine.remove(&player) {
            let _ = ctx.world().despawn(e);
        }
    }

    fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<i8, InputRefusal> {
        match payload {
            [b] => Ok(*b as i8),
            _ => Err(InputRefusal::new(2, "one byte")),
        }
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, input: i8) {
        match input as u8 {
            QUIT => ctx.kick(player, "asked to quit".into()),
            SCORE => {
                let who = ctx.player(player).map(|p| p.principal.as_str().to_owned());
                let _ = ctx.emit_fact("scored", serde_json::json!({}), who.as_deref(), None);
                ctx.emit_event(EventTarget::Player(player), SCORED, vec![]);
            }
            _ => {
                let Some(&e) = self.mine.get(&player) else {
                    return;
                };
                let (x, y) = ctx.world().pos(e).unwrap();
                ctx.world().set_pos(e, x + f32::from(input), y).unwrap();
            }
        }
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}

    fn on_fact_settled(&mut self, ctx: &mut Ctx<'_>, settlement: &Settlement) {
        self.settled.push(settlement.clone());
        ctx.emit_event(EventTarget::All, SETTLED, vec![]);
    }
}

fn host() -> (ZoneHost, ManualClock) {
    let clock = ManualClock::new();
    let init = ZoneInit {
        zone_id: "runners-1".into(),
        kind: "runners".into(),
        params: serde_json::Value::Null,
    };
    let host =
        ZoneHost::new::<Runners>(init, ZoneConfig::default(), Arc::new(clock.clone())).unwrap();
    (host, clock)
}

fn join(h: &mut ZoneHost, name: &str) -> PlayerId {
    h.handle_join(Principal::new(name), Claims::new(), Role::Player)
        .unwrap()
}

/// What one participant received in one patch.
#[derive(Debug)]
struct Got {
    ack: u32,
    quiet: bool,
    events: Vec<u16>,
}

/// Moves the clock one tick, advances, and applies every frame to its participant's mirror.
fn tick(
    h: &mut ZoneHost,
    clock: &ManualClock,
    mirrors: &mut BTreeMap<PlayerId, Mirror>,
) -> (zonekeep_core::AdvanceReport, BTreeMap<PlayerId, Got>) {
    clock.advance(h.config().dt());
    let report = h.advance(clock.now());
    assert_eq!(report.patch_ticks, vec![report.tick], "every tick patches");
    let schema = h.schema();
    let mut got = BTreeMap::new();
    for f in h.drain_frames().unwrap() {
        let d = mirrors
            .entry(f.player)
            .or_default()
            .decode_apply(f.bytes, &schema)
            .unwrap();
        assert_eq!(d.ack, f.ack, "the frame's ack is the one in its header");
        let events = d
            .events
            .unwrap_or_default()
            .iter()
            .map(|e| e.topic)
            .collect();
        got.insert(
            f.player,
            Got {
                ack: f.ack,
                quiet: f.quiet,
                events,
            },
        );
    }
    (report, got)
}

#[test]
fn a_zone_is_driven_purely_through_calls_in_and_typed_outputs() {
    let (mut h, clock) = host();
    let ann = join(&mut h, "ann");
    let bob = join(&mut h, "bob");
    let mut m = BTreeMap::new();

    // First patch: a BASELINE each, with both runners and each player's own as control.
    let (_, got) = tick(&mut h, &clock, &mut m);
    assert_eq!(got.keys().copied().collect::<Vec<_>>(), vec![ann, bob]);
    assert!(got.values().all(|g| !g.quiet && g.ack == 0));
    let runners = h.zone::<Runners>().unwrap().mine.clone();
    for p in [ann, bob] {
        assert_eq!(m[&p].len(), 2);
        assert_eq!(m[&p].control(), Some(runners[&p].0));
    }

    // Inputs: the outcome comes back to the caller; the applied one moves the runner and is acked.
    assert_eq!(h.handle_input(ann, 1, 0, &[5]), InputOutcome::Accepted);
    assert_eq!(h.handle_input(ann, 1, 0, &[5]), InputOutcome::Duplicate);
    assert!(matches!(
        h.handle_input(ann, 2, 0, &[1, 2]),
        InputOutcome::Refused(r) if r.code == 2
    ));
    let (report, got) = tick(&mut h, &clock, &mut m);
    assert_eq!(report.inputs.accepted, 1);
    assert_eq!(report.inputs.duplicate, 1);
    assert_eq!(report.inputs.refused, 1);
    assert_eq!(got[&ann].ack, 1);
    assert!(!got[&ann].quiet && !got[&bob].quiet, "a runner moved");
    let e = runners[&ann];
    let seen = m[&bob].get(e.0).unwrap();
    assert_eq!((seen.qx, seen.qy), h.world().qpos(e).unwrap());

    // Nothing changed: both frames are quiet, with the same acks.
    let (_, got) = tick(&mut h, &clock, &mut m);
    assert!(got[&ann].quiet && got[&bob].quiet);
    assert_eq!((got[&ann].ack, got[&bob].ack), (1, 0));

    // A fact leaves once through drain_facts; its event reaches only its player, inside a frame.
    assert!(h.handle_input(bob, 1, 0, &[SCORE]).is_accepted());
    let (_, got) = tick(&mut h, &clock, &mut m);
    assert_eq!(got[&bob].events, vec![SCORED]);
    assert!(got[&ann].events.is_empty());
    assert_eq!(h.drain_events().count(), 0, "frames delivered the event");
    let facts = h.drain_facts();
    assert_eq!(facts.len(), 1);
    assert_eq!(facts[0].principal.as_deref(), Some("bob"));
    assert!(h.drain_facts().is_empty(), "each fact is handed out once");
    assert_eq!(h.facts_in_flight(), 1);

    // The sink's answer goes back in as a call; the zone sees it on its next tick.
    h.handle_settlement(Settlement {
        key: facts[0].key.clone(),
        outcome: FactOutcome::Ok(serde_json::json!({"score": 1})),
    });
    let (report, got) = tick(&mut h, &clock, &mut m);
    assert_eq!(report.facts_settled, 1);
    assert_eq!(h.facts_in_flight(), 0);
    assert_eq!(got[&ann].events, vec![SETTLED]);
    assert_eq!(got[&bob].events, vec![SETTLED]);

    // A zone's kick comes out in the report; the kicked player gets no more frames and the
    // others see its runner despawned.
    assert!(h.handle_input(ann, 2, 0, &[QUIT]).is_accepted());
    let (report, got) = tick(&mut h, &clock, &mut m);
    assert_eq!(report.kicks.len(), 1);
    assert_eq!(
        (report.kicks[0].player, report.kicks[0].reason.as_str()),
        (ann, "asked to quit")
    );
    assert_eq!(report.left, vec![(ann, LeaveReason::Kicked)]);
    assert_eq!(got.keys().copied().collect::<Vec<_>>(), vec![bob]);
    assert_eq!(m[&bob].len(), 1);
    assert!(h.player(ann).is_none());

    // Without a patch tick since the last drain there is nothing to take.
    assert_eq!(h.drain_frames().unwrap().count(), 0);
}

/// One call into the host, as a recorder would log it.
#[derive(Debug, Clone)]
enum Call {
    Join(&'static str),
    Input(usize, u32, Vec<u8>),
    Drop(usize),
    Rejoin(usize),
    Advance,
}

/// Every frame of a run, in order: (player, bytes).
type Sent = Vec<(PlayerId, Vec<u8>)>;

/// Feeds `calls` to a fresh host; returns every frame and the state hash after each advance.
fn replay(calls: &[Call]) -> (Sent, Vec<Option<u64>>) {
    let (mut h, clock) = host();
    let (mut players, mut frames, mut hashes) = (Vec::new(), Vec::new(), Vec::new());
    for call in calls {
        match call {
            Call::Join(name) => players.push(join(&mut h, name)),
            Call::Input(p, seq, bytes) => {
                h.handle_input(players[*p], *seq, 0, bytes);
            }
            Call::Drop(p) => h.handle_drop(players[*p]).unwrap(),
            Call::Rejoin(p) => h.handle_rejoin(players[*p]).unwrap(),
            Call::Advance => {
                clock.advance(h.config().dt());
                h.advance(clock.now());
                frames.extend(
                    h.drain_frames()
                        .unwrap()
                        .map(|f| (f.player, f.bytes.to_vec())),
                );
                hashes.push(h.state_hash());
            }
        }
    }
    (frames, hashes)
}

#[test]
fn recorded_calls_replay_to_identical_frames_and_hashes() {
    let mut calls = vec![Call::Join("ann"), Call::Join("bob"), Call::Advance];
    for seq in 1..=20u32 {
        calls.push(Call::Input(0, seq, vec![(seq % 5) as u8]));
        if seq % 3 == 0 {
            calls.push(Call::Input(1, seq, vec![0xff]));
        }
        if seq == 8 {
            calls.push(Call::Drop(1));
        }
        if seq == 12 {
            calls.push(Call::Rejoin(1));
        }
        calls.push(Call::Advance);
    }
    let (frames, hashes) = replay(&calls);
    let (again, hashes_again) = replay(&calls);
    assert_eq!(frames, again, "same calls, same bytes on the wire");
    assert_eq!(hashes, hashes_again);
    assert_eq!(hashes.len(), 21);

    // The rejoin starts bob over from a BASELINE; one changed input changes what is sent.
    let schema = host().0.schema();
    let mut bob = Mirror::new();
    let mut baselines = 0;
    for (_, bytes) in frames.iter().filter(|(p, _)| *p == PlayerId(2)) {
        baselines += usize::from(bob.decode_apply(bytes, &schema).unwrap().baseline);
    }
    assert_eq!(baselines, 2);
    let mut changed = calls.clone();
    if let Some(Call::Input(_, _, bytes)) = changed.get_mut(3) {
        bytes[0] = 4;
    }
    assert_ne!(replay(&changed).0, frames);
}
