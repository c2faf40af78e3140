//! The guest SDK's unit tests, one module per part of the SDK, and what several of them share:
//! a `Ctx` writing into a buffer, a zone that records every hook it is called on, a zone that
//! keeps a ledger of facts and claims, and a well-formed input for each op.
//!
//! Durable calls and characters are tested in modules of their own beside this one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod between_zones;
mod commands;
mod dispatch;
mod facts;
mod handles;
mod migrate;
mod rng;
mod runtime;
mod settings;
mod wire;
mod zone_input;

use std::time::Duration;

use crate::ctx::SdkState;
use crate::testing::input;
use crate::{
    Ctx, Kind, KindDef, LeaveReason, Op, Player, PlayerId, Reader, Refusal, Rng, Role, Writer,
    Zone, SAVE_FORMAT, SAVE_HEADER_LEN,
};

fn with_ctx(f: impl FnOnce(&mut Ctx<'_>)) -> Vec<u8> {
    let mut sdk = SdkState::new(Rng::for_zone(1, "z"));
    sdk.fact_prefix = "z:0:m".to_owned();
    let mut w = Writer::new();
    let mut ctx = Ctx::new(0, Duration::ZERO, &mut sdk, &mut w);
    f(&mut ctx);
    w.into_vec()
}

// A zone that records every hook.

#[derive(Debug, Default, PartialEq)]
struct Probe {
    calls: Vec<String>,
    kind: Option<Kind>,
    draws: Vec<u32>,
    saved: Vec<u8>,
}

const REFUSE_BANNED: u16 = 4;

impl Zone for Probe {
    type Input = Vec<u8>;

    fn create(ctx: &mut Ctx<'_>, params: &str) -> Result<Self, String> {
        if params == "fail" {
            return Err("params say fail".into());
        }
        let kind = ctx.declare_kind(KindDef::new("thing").uint("n"));
        let draw = ctx.rng().next_u32();
        Ok(Self {
            calls: vec![format!("create {params} tick={}", ctx.tick())],
            kind: Some(kind),
            draws: vec![draw],
            saved: Vec::new(),
        })
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, player: Player) -> Result<(), Refusal> {
        self.calls.push(format!(
            "join {} {} {:?} tick={}",
            player.id,
            player.principal,
            player.role,
            ctx.tick()
        ));
        if player.principal == "banned" {
            return Err(Refusal::new(REFUSE_BANNED, "banned"));
        }
        if let Some(kind) = self.kind {
            let e = ctx.spawn(kind, 1.0, 2.0);
            ctx.set_control(player.id, Some(e));
        }
        Ok(())
    }

    fn on_leave(&mut self, _ctx: &mut Ctx<'_>, player: PlayerId, why: LeaveReason) {
        self.calls.push(format!("leave {player} {why:?}"));
    }

    fn on_drop(&mut self, _ctx: &mut Ctx<'_>, player: PlayerId) {
        self.calls.push(format!("drop {player}"));
    }

    fn on_rejoin(&mut self, _ctx: &mut Ctx<'_>, player: PlayerId) {
        self.calls.push(format!("rejoin {player}"));
    }

    fn sanitize(&mut self, player: PlayerId, payload: &[u8]) -> Result<Vec<u8>, Refusal> {
        if payload.is_empty() {
            return Err(Refusal::new(9, format!("empty from {player}")));
        }
        Ok(payload.to_vec())
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, input: Vec<u8>) {
        self.calls
            .push(format!("input {player} {input:?} tick={}", ctx.tick()));
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        self.calls.push(format!(
            "tick {} time={:?} dt={:?}",
            ctx.tick(),
            ctx.time(),
            ctx.dt()
        ));
        let draw = ctx.rng().next_u32();
        self.draws.push(draw);
        ctx.timer_after(2, 77);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, tag: u64) {
        self.calls.push(format!(
            "timer {tag} tick={} time={:?}",
            ctx.tick(),
            ctx.time()
        ));
    }

    fn save(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u32(self.calls.len() as u32);
        w.into_vec()
    }

    fn restore(ctx: &mut Ctx<'_>, params: &str, bytes: &[u8]) -> Result<Self, String> {
        let mut r = Reader::new(bytes);
        let n = r.u32().map_err(|e| e.to_string())?;
        r.finish().map_err(|e| e.to_string())?;
        let kind = ctx.declare_kind(KindDef::new("thing").uint("n"));
        Ok(Self {
            calls: vec![format!("restore {params} n={n} tick={}", ctx.tick())],
            kind: Some(kind),
            draws: Vec::new(),
            saved: bytes.to_vec(),
        })
    }

    fn state_hash(&self) -> Option<u64> {
        (!self.calls.is_empty()).then_some(self.calls.len() as u64)
    }

    fn on_fact_settled(&mut self, _ctx: &mut Ctx<'_>, key: &str, outcome: Result<&str, &str>) {
        self.calls.push(format!("settled {key} {outcome:?}"));
    }
}

/// A well-formed input for each op.
fn valid_input(op: Op) -> Vec<u8> {
    match op {
        Op::Create => input::create(0, 1, "p", "{}"),
        Op::Join => input::join(0, 1, "a", Role::Player, "{}", b"gold"),
        Op::Leave => input::leave(0, 1, LeaveReason::Left),
        Op::Drop | Op::Rejoin => input::player(0, 1),
        Op::Sanitize => input::payload(0, 1, &[1]),
        Op::Inputs => input::inputs(0, &[(1, &[1])]),
        Op::Tick => input::tick(1, 1000, 1000),
        Op::Timer => input::timer(0, 1),
        Op::Save | Op::StateHash | Op::Config => input::bare(0),
        Op::Restore => {
            let mut save = vec![SAVE_FORMAT];
            save.extend_from_slice(&[0; SAVE_HEADER_LEN - 1]);
            save.extend_from_slice(&0u32.to_le_bytes());
            input::restore(0, 1, "p", "{}", &save)
        }
        Op::Settled => input::settled(0, "k", true, "{}"),
        Op::TransferOut => input::player(0, 1),
        Op::TransferIn => {
            let mut w = crate::Writer::new();
            w.u64(0)
                .u32(1)
                .str("a")
                .str("{}")
                .str("zone-a")
                .u8(1)
                .bytes(&[1, 2])
                .bytes(b"gold");
            w.into_vec()
        }
        Op::Message => {
            let mut w = crate::Writer::new();
            w.u64(0).str("zone:zone-a").u16(3).bytes(b"hi");
            w.into_vec()
        }
        Op::Child => {
            let mut w = crate::Writer::new();
            w.u64(0).str("zone-c").u16(0xFFFF).bytes(&[0, 1]);
            w.into_vec()
        }
        Op::Undeliverable => {
            let mut w = crate::Writer::new();
            w.u64(0).u8(1).str("south").u16(2).str("no bus");
            w.into_vec()
        }
        Op::Migrate => {
            let mut save = vec![SAVE_FORMAT];
            save.extend_from_slice(&[0; SAVE_HEADER_LEN - 1]);
            input::migrate(1, &save)
        }
        Op::CallResult => input::call_result(0, "order-1", &crate::CallResult::Ok("{}".into())),
    }
}

/// Emits one fact per tick under an SDK-made key and keeps the claims of whoever joins.
#[derive(Default)]
struct Ledger {
    keys: Vec<String>,
    claims: Vec<String>,
}

impl Zone for Ledger {
    type Input = Vec<u8>;

    fn create(_ctx: &mut Ctx<'_>, _params: &str) -> Result<Self, String> {
        Ok(Self::default())
    }

    fn on_join(&mut self, _ctx: &mut Ctx<'_>, player: Player) -> Result<(), Refusal> {
        self.claims.push(player.claims);
        Ok(())
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        let key = ctx.emit_fact("point", "{}", Some("alice"), None);
        self.keys.push(key);
    }

    fn restore(_ctx: &mut Ctx<'_>, _params: &str, _bytes: &[u8]) -> Result<Self, String> {
        Ok(Self::default())
    }
}
