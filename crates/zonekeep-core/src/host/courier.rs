//! A zone that transfers players and trades messages, for the host's transfer and message tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::hash::Hasher;
use std::sync::Arc;
use std::time::Duration;

use zonekeep_protocol::mirror::Mirror;
use zonekeep_protocol::schema::KindDef;

use crate::transfer::Arrival;
use crate::{
    ChildEvent, Claims, Clock, Ctx, EntityId, InputRefusal, JoinRefusal, KindId, LeaveReason,
    ManualClock, MessageFrom, MessageTarget, PlayerId, PlayerInfo, Principal, ReplicationSettings,
    Role, StateHasher, Tier, Zone, ZoneConfig, ZoneError, ZoneHost, ZoneInit,
};

/// The zone's id in the tests.
pub(super) const ID: &str = "courier-1";

/// Each player walks a "walker" (spawned at x = 10 * id, or where its arrival state says).
/// Inputs: a positive byte moves it by that much; -1 asks to transfer the sender to `zone-b`
/// with claims `{"hp": 7}`. Messages drive everything else (see `on_message`). Everything the
/// zone hears is logged, and the log is in its state hash and its save.
pub(super) struct Courier {
    walker: KindId,
    pub(super) walkers: BTreeMap<PlayerId, (EntityId, i32)>,
    pub(super) log: Vec<String>,
    /// The answers of every `ctx.transfer` and `ctx.send`, in order.
    pub(super) answers: Vec<String>,
    /// `transfer_out` returns this many bytes instead of the position, when set.
    pub(super) big_state: Option<usize>,
    /// `transfer_in` refuses returning players (the host keeps them anyway).
    pub(super) refuse_returns: bool,
}

impl Courier {
    fn spawn(&mut self, ctx: &mut Ctx<'_>, id: PlayerId, x: i32) {
        let e = ctx.world().spawn(self.walker, x as f32, 0.0).unwrap();
        ctx.set_control(id, Some(e));
        self.walkers.insert(id, (e, x));
    }

    fn transfer(&mut self, ctx: &mut Ctx<'_>, p: PlayerId, target: &str, claims: Claims) {
        let answer = ctx.transfer(p, target, claims);
        self.answers.push(format!("transfer {p}: {answer:?}"));
    }
}

fn u32s(payload: &[u8]) -> impl Iterator<Item = u32> + '_ {
    payload
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
}

fn text(payload: &[u8]) -> &str {
    std::str::from_utf8(payload).unwrap()
}

fn hp(n: i64) -> Claims {
    let mut c = Claims::new();
    c.insert("hp".into(), n.into());
    c
}

impl Zone for Courier {
    type Input = i8;

    fn create(_init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let walker = ctx
            .world()
            .declare_kind(KindDef {
                name: "walker".into(),
                fields: vec![],
            })
            .map_err(|e| ZoneError::Failed(e.to_string()))?;
        Ok(Courier {
            walker,
            walkers: BTreeMap::new(),
            log: Vec::new(),
            answers: Vec::new(),
            big_state: None,
            refuse_returns: false,
        })
    }

    fn restore(init: &ZoneInit, ctx: &mut Ctx<'_>, bytes: &[u8]) -> Result<Self, ZoneError> {
        let mut z = Self::create(init, ctx)?;
        z.log = serde_json::from_slice(bytes).map_err(|e| ZoneError::Restore(e.to_string()))?;
        Ok(z)
    }

    fn save(&self) -> Option<Vec<u8>> {
        serde_json::to_vec(&self.log).ok()
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, p: &PlayerInfo) -> Result<(), JoinRefusal> {
        if p.principal.as_str() == "banned" {
            return Err(JoinRefusal::new(7, "banned"));
        }
        self.log.push(format!("join {}", p.id));
        self.spawn(ctx, p.id, 10 * p.id.0 as i32);
        Ok(())
    }

    fn on_leave(&mut self, ctx: &mut Ctx<'_>, p: PlayerId, why: LeaveReason) {
        self.log.push(format!("leave {p} {why:?}"));
        if let Some((e, _)) = self.walkers.remove(&p) {
            ctx.world().despawn(e).unwrap();
        }
    }

    fn transfer_out(&mut self, ctx: &mut Ctx<'_>, p: PlayerId) -> Vec<u8> {
        self.log.push(format!("out {p}"));
        let (e, x) = self.walkers.remove(&p).unwrap();
        ctx.world().despawn(e).unwrap();
        match self.big_state {
            Some(n) => vec![0; n],
            None => x.to_le_bytes().to_vec(),
        }
    }

    fn transfer_in(
        &mut self,
        ctx: &mut Ctx<'_>,
        p: &PlayerInfo,
        arrival: &Arrival<'_>,
    ) -> Result<(), JoinRefusal> {
        self.log.push(format!(
            "in {} from {} returning {} new {} claims {}",
            p.id,
            arrival.from_zone,
            arrival.returning,
            arrival.new_to_run,
            serde_json::Value::Object(arrival.claims.clone())
        ));
        if !arrival.returning && p.principal.as_str() == "banned" {
            return Err(JoinRefusal::new(7, "banned"));
        }
        let x = arrival
            .state
            .try_into()
            .map(i32::from_le_bytes)
            .unwrap_or(-1);
        self.spawn(ctx, p.id, x);
        if arrival.returning && self.refuse_returns {
            return Err(JoinRefusal::new(9, "not wanted back"));
        }
        Ok(())
    }

    fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<i8, InputRefusal> {
        match payload {
            [b] => Ok(*b as i8),
            _ => Err(InputRefusal::new(1, "one byte")),
        }
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, p: PlayerId, cmd: i8) {
        self.log.push(format!("input {p} {cmd}"));
        if cmd == -1 {
            self.transfer(ctx, p, "zone-b", hp(7));
            return;
        }
        let Some((e, x)) = self.walkers.get_mut(&p) else {
            return;
        };
        *x += i32::from(cmd);
        let x = *x as f32;
        ctx.world().set_pos(*e, x, 0.0).unwrap();
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}

    /// Topics: 10 transfer the players listed (u32 ids) to `zone-b`; 11 transfer player 1 to the
    /// zone named by the payload; 12 transfer player 1 with claims of the payload's length in
    /// bytes; 13 kick the players listed; 20 join the group named; 21 leave it; 22 set the
    /// parent named (empty: none); 23 send the payload to the parent with topic 5; 24 send the
    /// payload's first byte's count of messages to `zone-b`; 25 send to topic 0xFFFF. Every
    /// message is logged first.
    fn on_message(&mut self, ctx: &mut Ctx<'_>, from: &MessageFrom, topic: u16, payload: &[u8]) {
        self.log
            .push(format!("message {from:?} topic {topic} {payload:?}"));
        match topic {
            10 => {
                for id in u32s(payload) {
                    self.transfer(ctx, PlayerId(id), "zone-b", hp(1));
                }
            }
            11 => self.transfer(ctx, PlayerId(1), text(payload), Claims::new()),
            12 => {
                let mut c = Claims::new();
                c.insert("pad".into(), "x".repeat(payload.len()).into());
                self.transfer(ctx, PlayerId(1), "zone-b", c);
            }
            13 => {
                for id in u32s(payload) {
                    ctx.kick(PlayerId(id), "told to".into());
                }
            }
            20 => {
                let a = ctx.join_group(text(payload));
                self.answers.push(format!("join {a:?}"));
            }
            21 => ctx.leave_group(text(payload)),
            22 => ctx.set_parent(Some(text(payload)).filter(|p| !p.is_empty())),
            23 => {
                let a = ctx.to_parent(5, payload);
                self.answers.push(format!("to parent {a:?}"));
            }
            24 => {
                for i in 0..payload[0] {
                    let a = ctx.send(MessageTarget::Zone("zone-b".into()), 1, &[i]);
                    self.answers.push(format!("send {a:?}"));
                }
            }
            25 => {
                let a = ctx.send(MessageTarget::Zone("zone-b".into()), 0xFFFF, &[]);
                self.answers.push(format!("send {a:?}"));
            }
            _ => {}
        }
    }

    fn on_child(&mut self, _ctx: &mut Ctx<'_>, child: &str, event: ChildEvent<'_>) {
        self.log.push(format!("child {child} {event:?}"));
    }

    fn on_undeliverable(
        &mut self,
        _ctx: &mut Ctx<'_>,
        to: &MessageTarget,
        topic: u16,
        reason: &str,
    ) {
        self.log
            .push(format!("undeliverable to {to:?} topic {topic}: {reason}"));
    }

    fn on_tier(&mut self, _ctx: &mut Ctx<'_>, from: Tier, to: Tier) {
        self.log.push(format!("tier {from:?}->{to:?}"));
    }

    fn state_hash(&self) -> Option<u64> {
        let mut h = StateHasher::new();
        for line in &self.log {
            h.write(line.as_bytes());
        }
        for (p, (_, x)) in &self.walkers {
            h.write_u32(p.0);
            h.write_i32(*x);
        }
        Some(h.finish())
    }
}

/// Ten ticks a second, a patch every tick, everyone sees everything.
pub(super) fn config() -> ZoneConfig {
    ZoneConfig {
        tick_hz: 10,
        max_players: 100,
        idle_after: Duration::from_secs(5),
        dormant_after: Duration::from_secs(10),
        replication: ReplicationSettings {
            view_radius: f32::INFINITY,
            ..ReplicationSettings::default()
        },
        ..ZoneConfig::default()
    }
}

pub(super) fn init() -> ZoneInit {
    ZoneInit {
        zone_id: ID.into(),
        kind: "courier".into(),
        params: serde_json::Value::Null,
    }
}

pub(super) fn host() -> (ZoneHost, ManualClock) {
    let clock = ManualClock::new();
    let h =
        ZoneHost::with_boot_epoch::<Courier>(init(), config(), Arc::new(clock.clone()), 7).unwrap();
    (h, clock)
}

pub(super) fn join(h: &mut ZoneHost, name: &str, role: Role) -> PlayerId {
    h.handle_join(Principal::new(name), Claims::new(), role)
        .unwrap()
}

pub(super) fn zone(h: &ZoneHost) -> &Courier {
    h.zone::<Courier>().unwrap()
}

/// One tick; every frame applied to its participant's mirror. Returns who got a frame and
/// whether it was a BASELINE.
pub(super) fn step(
    h: &mut ZoneHost,
    clock: &ManualClock,
    mirrors: &mut BTreeMap<PlayerId, Mirror>,
) -> Vec<(PlayerId, bool)> {
    clock.advance(Duration::from_millis(100));
    h.advance(clock.now());
    let schema = h.schema();
    let mut got = Vec::new();
    for f in h.drain_frames().unwrap() {
        let d = mirrors
            .entry(f.player)
            .or_default()
            .decode_apply(f.bytes, &schema)
            .unwrap();
        got.push((f.player, d.baseline));
    }
    got
}

/// An inbound message from zone `sender` with `seq` under epoch 1.
pub(super) fn msg(sender: &str, seq: u64, topic: u16, payload: &[u8]) -> crate::InboundMessage {
    crate::InboundMessage {
        id: crate::MessageId {
            sender: sender.into(),
            epoch: 1,
            seq,
        },
        from: MessageFrom::Zone(sender.into()),
        topic,
        payload: payload.to_vec(),
        via_parent: false,
    }
}

/// An operator's message (each with its own sequence number).
pub(super) fn admin(seq: u64, topic: u16, payload: &[u8]) -> crate::InboundMessage {
    crate::InboundMessage {
        id: crate::MessageId {
            sender: "admin:test".into(),
            epoch: 1,
            seq,
        },
        from: MessageFrom::Admin,
        topic,
        payload: payload.to_vec(),
        via_parent: false,
    }
}
