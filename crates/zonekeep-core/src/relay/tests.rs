//! A relay writes each client the frames its zone's host would have written it.
//!
//! Two hosts run the same zone on the same calls: one builds every participant's frames itself
//! (as for direct connections); the other relays some participants, and relays fed by its link
//! messages build theirs. Every frame must be the same: bytes, ack, quiet flag, State base and
//! Events message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use zonekeep_protocol::mirror::Mirror;
use zonekeep_protocol::schema::{FieldDef, FieldType, KindDef};

use super::{RelayRefusal, RelayZone};
use crate::{
    Claims, Clock, Ctx, EntityId, EventTarget, InputRefusal, JoinRefusal, KindId, ManualClock,
    PlayerId, PlayerInfo, Principal, ReplicationSettings, ResumeOutcome, Role, Zone, ZoneConfig,
    ZoneError, ZoneHost, ZoneInit,
};

/// Players walk; a global beacon drifts and is made (not) global; inputs change views and emit
/// events, to the player and to every observer. Observers watch a point.
pub(super) struct Crowd {
    walker: KindId,
    beacon: EntityId,
    mine: BTreeMap<PlayerId, EntityId>,
    watchers: std::collections::BTreeSet<PlayerId>,
}

fn failed(e: impl std::fmt::Display) -> ZoneError {
    ZoneError::Failed(e.to_string())
}

impl Zone for Crowd {
    type Input = i8;

    fn create(_init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let w = ctx.world();
        let walker = w
            .declare_kind(KindDef {
                name: "walker".into(),
                fields: vec![
                    FieldDef {
                        name: "steps".into(),
                        ty: FieldType::UInt,
                    },
                    FieldDef {
                        name: "tag".into(),
                        ty: FieldType::Str { max_len: 8 },
                    },
                ],
            })
            .map_err(failed)?;
        let beacon_kind = w
            .declare_kind(KindDef {
                name: "beacon".into(),
                fields: vec![],
            })
            .map_err(failed)?;
        let beacon = w.spawn(beacon_kind, 0.0, 0.0).map_err(failed)?;
        w.set_global(beacon, true).map_err(failed)?;
        Ok(Crowd {
            walker,
            beacon,
            mine: BTreeMap::new(),
            watchers: Default::default(),
        })
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, p: &PlayerInfo) -> Result<(), JoinRefusal> {
        let x = (13 * p.id.0 % 160) as f32;
        let e = ctx.world().spawn(self.walker, x, 0.0).unwrap();
        ctx.set_control(p.id, Some(e));
        self.mine.insert(p.id, e);
        Ok(())
    }

    fn on_observe(&mut self, ctx: &mut Ctx<'_>, o: &PlayerInfo) -> Result<(), JoinRefusal> {
        ctx.set_view(o.id, Some(40.0), Some((100.0, 0.0)));
        self.watchers.insert(o.id);
        Ok(())
    }

    fn on_leave(&mut self, ctx: &mut Ctx<'_>, p: PlayerId, _why: crate::LeaveReason) {
        self.watchers.remove(&p);
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
        match dx {
            7 => {
                ctx.emit_event(EventTarget::Player(p), 9, vec![1, 2, p.0 as u8]);
                ctx.emit_event(EventTarget::All, 3, vec![]);
                for &o in &self.watchers {
                    ctx.emit_event(EventTarget::Player(o), 5, vec![ctx.tick() as u8, o.0 as u8]);
                }
            }
            8 => ctx.set_view(p, Some(25.0), None),
            9 => ctx.set_view(p, None, Some((x, 40.0))),
            10 => ctx.set_view(p, None, None),
            11 => {
                let beacon = self.beacon;
                let global = ctx.world_ref().is_global(beacon).unwrap();
                ctx.world().set_global(beacon, !global).unwrap();
            }
            12 => ctx
                .world()
                .set_str(e, 1, &format!("tag{}", p.0 % 5))
                .unwrap(),
            // Its client keeps its connection while the move is under way: a move that comes
            // back continues its frames from what it holds.
            13 => {
                let _ = ctx.transfer(p, "crowd-2", Claims::new());
            }
            _ => {}
        }
        let w = ctx.world();
        w.set_pos(e, x + f32::from(dx) * 0.37, y - f32::from(dx) * 0.11)
            .unwrap();
        let steps = w.get_uint(e, 0).unwrap();
        w.set_uint(e, 0, steps + 1).unwrap();
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        let t = ctx.tick() as f32;
        let _ = ctx.world().set_pos(self.beacon, t * 0.5, 0.0);
        // A view the zone changes by itself, with no input behind it.
        if ctx.tick() % 9 == 0 {
            if let Some(&p) = self.mine.keys().next() {
                let radius = 20.0 + (ctx.tick() % 27) as f32;
                ctx.set_view(p, Some(radius), None);
            }
        }
    }

    fn uses_can_see(&self) -> bool {
        false
    }
}

/// The same zone with `can_see`: its frames are built at its host only.
struct Hidden(Crowd);

impl Zone for Hidden {
    type Input = i8;
    fn create(init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Crowd::create(init, ctx).map(Hidden)
    }
    fn on_join(&mut self, ctx: &mut Ctx<'_>, p: &PlayerInfo) -> Result<(), JoinRefusal> {
        self.0.on_join(ctx, p)
    }
    fn sanitize(&mut self, p: PlayerId, payload: &[u8]) -> Result<i8, InputRefusal> {
        self.0.sanitize(p, payload)
    }
    fn on_input(&mut self, ctx: &mut Ctx<'_>, p: PlayerId, i: i8) {
        self.0.on_input(ctx, p, i)
    }
    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        self.0.tick(ctx)
    }
    fn can_see(&self, _viewer: PlayerId, entity: EntityId, _world: &crate::World) -> bool {
        entity != self.0.beacon
    }
}

fn settings(budget: Option<usize>) -> ReplicationSettings {
    ReplicationSettings {
        view_radius: 60.0,
        cell_size: 32.0,
        margin: 2.0,
        budget,
        ..ReplicationSettings::default()
    }
}

fn host<Z: Zone>(budget: Option<usize>, clock: &ManualClock) -> ZoneHost {
    host_at::<Z>(budget, (1, 1), clock)
}

/// A host whose patches come every `rates.0` ticks and whose observers get one in `rates.1`.
fn host_at<Z: Zone>(budget: Option<usize>, rates: (u32, u32), clock: &ManualClock) -> ZoneHost {
    let config = ZoneConfig {
        tick_hz: 10,
        patch_every: rates.0,
        observer_patch_every: rates.1,
        replication: settings(budget),
        max_observers: 512,
        ..ZoneConfig::default()
    };
    let init = ZoneInit {
        zone_id: "crowd-1".into(),
        kind: "crowd".into(),
        params: serde_json::Value::Null,
    };
    ZoneHost::new::<Z>(init, config, Arc::new(clock.clone())).unwrap()
}

pub(super) fn relay_zone(_budget: Option<usize>) -> RelayZone {
    RelayZone::new(10_000, 10_000)
}

/// A frame as a client receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Sent {
    player: PlayerId,
    ack: u32,
    quiet: bool,
    bytes: Vec<u8>,
    base: Option<u64>,
    events: Vec<u8>,
}

fn sent(frames: crate::Frames<'_>) -> Vec<Sent> {
    frames
        .map(|f| Sent {
            player: f.player,
            ack: f.ack,
            quiet: f.quiet,
            bytes: f.bytes.to_vec(),
            base: f.base,
            events: f.events.to_vec(),
        })
        .collect()
}

/// A small deterministic generator for the scenario.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One participant, as the test's clients see it.
pub(super) struct Client {
    /// Which relay serves it (`None`: direct).
    relay: Option<usize>,
    connected: bool,
    /// Its move to another zone is under way.
    moving: bool,
    datagrams: bool,
    seq: u32,
    /// What a direct client would hold, to resume from (Delta clients only).
    mirror: Mirror,
    /// The newest State tick sent to it.
    last_state: Option<u64>,
}

/// Both hosts and the relays, driven by the same calls.
pub(super) struct Bench {
    pub(super) clock: ManualClock,
    direct: ZoneHost,
    pub(super) origin: ZoneHost,
    pub(super) relays: Vec<RelayZone>,
    /// Relays still waiting for their image.
    starting: Vec<bool>,
    clients: BTreeMap<PlayerId, Client>,
    budget: Option<usize>,
    names: u32,
    /// Frames compared, relayed and direct.
    pub(super) compared: (usize, usize),
    resumed_as_delta: usize,
    /// Moves that left (and came back or went through).
    moves: usize,
    /// Clients that went over to another relay or to the host.
    switches: usize,
    /// The participants that got a frame at the last step.
    pub(super) served: Vec<PlayerId>,
}

impl Bench {
    pub(super) fn new(budget: Option<usize>) -> Self {
        Self::with_rates(budget, (1, 1))
    }

    /// Hosts whose patches come every `rates.0` ticks and whose observers get one in `rates.1`.
    pub(super) fn with_rates(budget: Option<usize>, rates: (u32, u32)) -> Self {
        let clock = ManualClock::new();
        let direct = host_at::<Crowd>(budget, rates, &clock);
        let mut origin = host_at::<Crowd>(budget, rates, &clock);
        origin.want_relay_image();
        Bench {
            clock,
            direct,
            origin,
            relays: vec![relay_zone(budget)],
            starting: vec![true],
            clients: BTreeMap::new(),
            budget,
            names: 0,
            compared: (0, 0),
            resumed_as_delta: 0,
            moves: 0,
            switches: 0,
            served: Vec::new(),
        }
    }

    pub(super) fn add_relay(&mut self) {
        self.relays.push(relay_zone(self.budget));
        self.starting.push(true);
        self.origin.want_relay_image();
    }

    pub(super) fn join(&mut self, role: Role, relay: Option<usize>) -> PlayerId {
        self.names += 1;
        let name = format!("p{}", self.names);
        let a = self
            .direct
            .handle_join(Principal::new(&name), Claims::new(), role)
            .unwrap();
        let b = self
            .origin
            .handle_join(Principal::new(&name), Claims::new(), role)
            .unwrap();
        assert_eq!(a, b);
        if let Some(r) = relay {
            self.origin.relay(b, r as u64).unwrap();
            self.relays[r].attach(b);
        }
        self.clients.insert(
            a,
            Client {
                relay,
                connected: true,
                moving: false,
                datagrams: false,
                seq: 0,
                mirror: Mirror::new(),
                last_state: None,
            },
        );
        a
    }

    pub(super) fn input(&mut self, id: PlayerId, dx: i8) {
        let c = self.clients.get_mut(&id).unwrap();
        c.seq += 1;
        let seq = c.seq;
        let a = self.direct.handle_input(id, seq, 0, &[dx as u8]);
        let b = self.origin.handle_input(id, seq, 0, &[dx as u8]);
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
    }

    pub(super) fn drop_client(&mut self, id: PlayerId) {
        let c = self.clients.get_mut(&id).unwrap();
        c.connected = false;
        self.direct.handle_drop(id).unwrap();
        self.origin.handle_drop(id).unwrap();
        if let Some(r) = c.relay {
            self.relays[r].detach(id);
        }
    }

    pub(super) fn rejoin(&mut self, id: PlayerId) {
        let c = self.clients.get_mut(&id).unwrap();
        c.connected = true;
        // A client on datagrams resumes with a BASELINE (its mirror holds no Delta's state).
        let from = match c.datagrams {
            true => None,
            false => c.mirror.resume_from(),
        };
        c.datagrams = false;
        c.last_state = None;
        let a = match from {
            Some(from) => self.direct.handle_rejoin_from(id, from).unwrap(),
            None => {
                self.direct.handle_rejoin(id).unwrap();
                ResumeOutcome::Baseline
            }
        };
        let b = match c.relay {
            Some(r) => {
                self.origin.handle_rejoin(id).unwrap();
                self.relays[r].reattach(id, from.as_ref()).unwrap()
            }
            None => match from {
                Some(from) => self.origin.handle_rejoin_from(id, from).unwrap(),
                None => {
                    self.origin.handle_rejoin(id).unwrap();
                    ResumeOutcome::Baseline
                }
            },
        };
        assert_eq!(a, b, "{id}'s resume");
        if a == ResumeOutcome::Delta {
            self.resumed_as_delta += 1;
        } else {
            c.mirror = Mirror::new();
        }
    }

    /// The client of `id` loses its relay and resumes through another (or directly, `to`
    /// `None`), without a state to resume from: a BASELINE.
    fn switch(&mut self, id: PlayerId, to: Option<usize>) {
        let c = self.clients.get_mut(&id).unwrap();
        if let Some(r) = c.relay {
            self.relays[r].remove(id);
        }
        self.direct.handle_drop(id).unwrap();
        self.origin.handle_drop(id).unwrap();
        self.direct.handle_rejoin(id).unwrap();
        self.origin.handle_rejoin(id).unwrap();
        match to {
            Some(r) => {
                self.origin.relay(id, r as u64).unwrap();
                self.relays[r].attach(id);
            }
            None => {
                self.origin.unrelay(id);
                self.origin.resync(id);
            }
        }
        self.direct.resync(id);
        c.relay = to;
        c.datagrams = false;
        c.last_state = None;
        c.mirror = Mirror::new();
        self.switches += 1;
    }

    pub(super) fn leave(&mut self, id: PlayerId) {
        let c = self.clients.remove(&id).unwrap();
        self.direct
            .handle_leave(id, crate::LeaveReason::Left)
            .unwrap();
        self.origin
            .handle_leave(id, crate::LeaveReason::Left)
            .unwrap();
        if let Some(r) = c.relay {
            self.relays[r].remove(id);
        }
    }

    fn use_datagrams(&mut self, id: PlayerId, max_frame: Option<usize>) {
        let c = self.clients.get_mut(&id).unwrap();
        c.datagrams = true;
        self.direct.use_datagrams(id, max_frame);
        match c.relay {
            Some(r) => self.relays[r].use_datagrams(id, max_frame),
            None => self.origin.use_datagrams(id, max_frame),
        }
    }

    fn ack_state(&mut self, id: PlayerId) {
        let c = self.clients.get(&id).unwrap();
        let Some(tick) = c.last_state else { return };
        self.direct.ack_state(id, tick);
        match c.relay {
            Some(r) => self.relays[r].ack_state(id, tick),
            None => self.origin.ack_state(id, tick),
        }
    }

    /// The move of `id` failed: it is back, its frames continuing.
    fn move_back(&mut self, id: PlayerId) {
        self.clients.get_mut(&id).unwrap().moving = false;
        self.direct.handle_transfer_back(id).unwrap();
        self.origin.handle_transfer_back(id).unwrap();
    }

    /// The move of `id` went through: it left.
    fn move_done(&mut self, id: PlayerId) {
        let c = self.clients.remove(&id).unwrap();
        self.direct.handle_transfer_done(id).unwrap();
        self.origin.handle_transfer_done(id).unwrap();
        if let Some(r) = c.relay {
            self.relays[r].remove(id);
        }
    }

    fn resync(&mut self, id: PlayerId) {
        let c = self.clients.get_mut(&id).unwrap();
        c.mirror = Mirror::new();
        self.direct.resync(id);
        match c.relay {
            Some(r) => self.relays[r].resync(id),
            None => self.origin.resync(id),
        }
    }

    /// One tick: both hosts advance, the origin's link messages reach the relays, and every
    /// frame is compared with the direct host's.
    pub(super) fn step(&mut self) {
        self.step_ticks(1);
    }

    /// [`step`](Self::step) over `ticks` ticks at once (a host catching up builds one patch).
    pub(super) fn step_ticks(&mut self, ticks: u32) {
        self.clock.advance(Duration::from_millis(100) * ticks);
        let now = self.clock.now();
        let ra = self.direct.advance(now);
        let rb = self.origin.advance(now);
        assert_eq!(ra.patch_ticks, rb.patch_ticks);
        let moves = self.direct.drain_transfers();
        assert_eq!(moves.len(), self.origin.drain_transfers().len());
        for m in moves {
            self.clients.get_mut(&m.player).unwrap().moving = true;
            self.moves += 1;
        }
        let want = sent(self.direct.drain_frames().unwrap());
        let mut got = sent(self.origin.drain_frames().unwrap());
        self.served = want.iter().map(|s| s.player).collect();
        let Some(out) = self.origin.relay_output() else {
            assert!(rb.patch_ticks.is_empty() && want.is_empty() && got.is_empty());
            return;
        };
        for (r, relay) in self.relays.iter_mut().enumerate() {
            let mut message = Vec::new();
            out.write_link(&mut message, self.starting[r], r as u64)
                .unwrap();
            self.starting[r] = false;
            relay.apply(&message).unwrap();
            got.extend(sent(relay.drain_frames()));
        }
        got.sort_by_key(|s| s.player);
        assert_eq!(
            want.iter().map(|s| s.player).collect::<Vec<_>>(),
            got.iter().map(|s| s.player).collect::<Vec<_>>(),
            "the same participants get frames"
        );
        let schema = self.direct.schema();
        for (w, g) in want.iter().zip(&got) {
            assert_eq!(w, g, "{}'s frame at tick {}", w.player, self.direct.tick());
            let c = self.clients.get_mut(&w.player).unwrap();
            match c.relay {
                Some(_) => self.compared.0 += 1,
                None => self.compared.1 += 1,
            }
            match w.base {
                Some(_) => c.last_state = Some(self.direct.tick()),
                None => {
                    c.mirror.decode_apply(&w.bytes, &schema).unwrap();
                }
            }
        }
    }
}

/// Runs a seeded churn of joins, inputs (moves, view changes, events, global toggles), drops,
/// resumes, leaves, datagram clients and resyncs, with a second relay starting mid-way.
fn churn(seed: u64, budget: Option<usize>) -> Bench {
    churn_on(Bench::new(budget), seed, false)
}

/// [`churn`] on `b`; with `catch_up`, one step in eight runs three ticks at once.
pub(super) fn churn_on(mut b: Bench, seed: u64, catch_up: bool) -> Bench {
    let mut dice = Dice(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    for _ in 0..4 {
        b.join(Role::Player, Some(0));
    }
    b.join(Role::Player, None);
    b.join(Role::Observer, Some(0));
    for round in 0..60 {
        if round == 20 {
            b.add_relay();
        }
        let ids: Vec<PlayerId> = b.clients.keys().copied().collect();
        for _ in 0..4 {
            let Some(&id) = ids.get(dice.below(ids.len().max(1) as u64) as usize) else {
                break;
            };
            let Some(c) = b.clients.get(&id) else {
                continue;
            };
            let connected = c.connected;
            if c.moving {
                match dice.below(6) {
                    0 => b.move_done(id),
                    1 | 2 => b.move_back(id),
                    _ => {}
                }
                continue;
            }
            match dice.below(40) {
                0 if connected => b.drop_client(id),
                1 | 2 if !connected => b.rejoin(id),
                3 if b.clients.len() > 3 => b.leave(id),
                4 if connected => {
                    let max = [None, Some(300), Some(1200)][dice.below(3) as usize];
                    b.use_datagrams(id, max);
                }
                5 => b.resync(id),
                39 if connected => {
                    let to = match dice.below(3) {
                        0 => None,
                        _ => Some(dice.below(b.relays.len() as u64) as usize),
                    };
                    b.switch(id, to);
                }
                6..=9 => {
                    let relay = match dice.below(3) {
                        0 => None,
                        _ => Some(dice.below(b.relays.len() as u64) as usize),
                    };
                    let role = match dice.below(4) {
                        0 => Role::Observer,
                        _ => Role::Player,
                    };
                    b.join(role, relay);
                }
                _ => {
                    let dx = [1, -2, 3, 7, 8, 9, 10, 11, 12, 13, 25, -25][dice.below(12) as usize];
                    b.input(id, dx);
                }
            }
        }
        let ids: Vec<PlayerId> = b.clients.keys().copied().collect();
        for id in ids {
            if dice.below(2) == 0 {
                b.ack_state(id);
            }
        }
        match catch_up && dice.below(8) == 0 {
            true => b.step_ticks(3),
            false => b.step(),
        }
    }
    b
}

#[test]
fn relayed_frames_are_the_frames_a_direct_connection_gets() {
    let (mut relayed, mut direct, mut resumed, mut moves, mut switches) = (0, 0, 0, 0, 0);
    for seed in 1..=12 {
        for budget in [None, Some(400)] {
            let b = churn(seed, budget);
            relayed += b.compared.0;
            direct += b.compared.1;
            resumed += b.resumed_as_delta;
            moves += b.moves;
            switches += b.switches;
        }
    }
    // The churn reached what it is meant to: many relayed frames, and resumes from state.
    assert!(relayed > 2_000, "{relayed} relayed frames compared");
    assert!(direct > 500, "{direct} direct frames compared");
    assert!(resumed > 5, "{resumed} resumes continued from state");
    assert!(moves > 10, "{moves} moves");
    assert!(switches > 10, "{switches} clients switched relays");
}

#[test]
fn a_zone_that_filters_per_viewer_is_not_relayed() {
    let clock = ManualClock::new();
    let mut h = host::<Hidden>(None, &clock);
    let p = h
        .handle_join(Principal::new("a"), Claims::new(), Role::Player)
        .unwrap();
    assert_eq!(h.relay(p, 0), Err(RelayRefusal::PerViewer));
    assert!(!h.is_relayed(p));
    let mut c = host::<Crowd>(None, &clock);
    assert_eq!(
        c.relay(PlayerId(42), 0),
        Err(RelayRefusal::UnknownPlayer(PlayerId(42)))
    );
}

#[test]
fn an_unrelayed_participant_gets_a_baseline_from_its_host_again() {
    let mut b = Bench::new(None);
    b.join(Role::Player, Some(0));
    b.join(Role::Player, Some(0));
    b.step();
    let id = PlayerId(1);
    b.input(id, 3);
    b.step();
    // Its client now connects to the origin directly.
    b.origin.unrelay(id);
    b.relays[0].remove(id);
    b.clients.get_mut(&id).unwrap().relay = None;
    b.resync(id);
    b.step();
    assert!(!b.origin.is_relayed(id));
    // Two frames from the relay each patch, then one: the last came from the host.
    assert_eq!(b.compared, (5, 1));
}
