#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::ctx::{Handles, SdkState};
use crate::testing::{decode_commands, input, Command, TestHost};
use crate::{
    dispatch, returning, Ctx, DecodeError, Entity, EventTarget, Fatal, FieldType, Guest, Input,
    Kind, KindDef, LeaveReason, Op, Player, PlayerId, Reader, Refusal, Rng, Role, Writer, Zone,
    REFUSE_UNDECODABLE, SAVE_FORMAT, SAVE_HEADER_LEN,
};

// ---------------------------------------------------------------------------------------------
// Reader and Writer

#[test]
fn writer_and_reader_round_trip_every_type() {
    let mut w = Writer::new();
    w.u8(0xab)
        .u16(0xbeef)
        .u32(0xdead_beef)
        .u64(0x0123_4567_89ab_cdef)
        .i8(-2)
        .i16(-300)
        .i32(-70_000)
        .i64(-5)
        .f32(1.5)
        .bool(true)
        .bytes(&[1, 2, 3])
        .str("héllo");
    let bytes = w.into_vec();
    let mut r = Reader::new(&bytes);
    assert_eq!(r.u8(), Ok(0xab));
    assert_eq!(r.u16(), Ok(0xbeef));
    assert_eq!(r.u32(), Ok(0xdead_beef));
    assert_eq!(r.u64(), Ok(0x0123_4567_89ab_cdef));
    assert_eq!(r.i8(), Ok(-2));
    assert_eq!(r.i16(), Ok(-300));
    assert_eq!(r.i32(), Ok(-70_000));
    assert_eq!(r.i64(), Ok(-5));
    assert_eq!(r.f32(), Ok(1.5));
    assert_eq!(r.bool(), Ok(true));
    assert_eq!(r.bytes(), Ok(&[1u8, 2, 3][..]));
    assert_eq!(r.str(), Ok("héllo"));
    assert_eq!(r.finish(), Ok(()));
}

#[test]
fn writer_is_little_endian() {
    let mut w = Writer::new();
    w.u16(0x0102).u32(0x0304_0506).f32(1.0).str("ab");
    assert_eq!(
        w.as_bytes(),
        &[0x02, 0x01, 0x06, 0x05, 0x04, 0x03, 0, 0, 0x80, 0x3f, 2, 0, 0, 0, b'a', b'b']
    );
}

#[test]
fn reader_refuses_every_truncation() {
    let mut w = Writer::new();
    w.u8(1)
        .u16(2)
        .u32(3)
        .u64(4)
        .f32(5.0)
        .bytes(&[6, 7])
        .str("eight");
    let bytes = w.into_vec();
    let read_all = |b: &[u8]| -> Result<(), DecodeError> {
        let mut r = Reader::new(b);
        r.u8()?;
        r.u16()?;
        r.u32()?;
        r.u64()?;
        r.f32()?;
        r.bytes()?;
        r.str()?;
        r.finish()
    };
    assert_eq!(read_all(&bytes), Ok(()));
    for cut in 0..bytes.len() {
        let err = read_all(&bytes[..cut]).unwrap_err();
        assert!(
            matches!(err, DecodeError::Truncated { .. }),
            "cut {cut}: {err:?}"
        );
    }
}

#[test]
fn reader_checks_lengths_before_taking() {
    // A length of 4 GiB - 1 with two bytes behind it.
    let bytes = [0xff, 0xff, 0xff, 0xff, 1, 2];
    let mut r = Reader::new(&bytes);
    assert_eq!(
        r.bytes(),
        Err(DecodeError::Truncated {
            needed: 0xffff_ffff,
            remaining: 2
        })
    );
    // Nothing was consumed but the length.
    assert_eq!(r.remaining(), 2);
}

#[test]
fn reader_refuses_bad_values_and_trailing_bytes() {
    assert!(matches!(
        Reader::new(&[2]).bool(),
        Err(DecodeError::Invalid(_))
    ));
    assert!(matches!(
        Reader::new(&[2, 0, 0, 0, 0xc3, 0x28]).str(),
        Err(DecodeError::Invalid(_))
    ));
    let mut r = Reader::new(&[1, 2, 3]);
    r.u8().unwrap();
    assert_eq!(r.finish(), Err(DecodeError::Trailing(2)));
}

// ---------------------------------------------------------------------------------------------
// Commands

fn with_ctx(f: impl FnOnce(&mut Ctx<'_>)) -> Vec<u8> {
    let mut sdk = SdkState::new(Rng::for_zone(1, "z"));
    sdk.fact_prefix = "z:0:m".to_owned();
    let mut w = Writer::new();
    let mut ctx = Ctx::new(0, Duration::ZERO, &mut sdk, &mut w);
    f(&mut ctx);
    w.into_vec()
}

fn le(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

#[test]
fn declare_kind_encodes_every_field_type() {
    let kind = KindDef::new("k")
        .quant("q", -1.0, 1.0, 8)
        .centered("c", 2.0, 10)
        .angle("a", 12)
        .uint("u")
        .sint("s")
        .bool("b")
        .str("t", 24)
        .f32("f");
    let bytes = with_ctx(|ctx| assert_eq!(ctx.declare_kind(kind.clone()), Kind(0)));
    let s = |v: &str| le(&[&(v.len() as u32).to_le_bytes(), v.as_bytes()]);
    let expected = le(&[
        &[1],
        &s("k"),
        &[8],
        &s("q"),
        &[0],
        &(-1.0f32).to_le_bytes(),
        &1.0f32.to_le_bytes(),
        &[8],
        &s("c"),
        &[1],
        &2.0f32.to_le_bytes(),
        &[10],
        &s("a"),
        &[2, 12],
        &s("u"),
        &[3],
        &s("s"),
        &[4],
        &s("b"),
        &[5],
        &s("t"),
        &[6, 24],
        &s("f"),
        &[7],
    ]);
    assert_eq!(bytes, expected);
    assert_eq!(
        decode_commands(&bytes).unwrap(),
        vec![Command::DeclareKind {
            name: "k".into(),
            fields: kind.fields().to_vec()
        }]
    );
}

#[test]
fn kinds_are_numbered_in_declaration_order() {
    with_ctx(|ctx| {
        assert_eq!(ctx.declare_kind(KindDef::new("a")), Kind(0));
        assert_eq!(ctx.declare_kind(KindDef::new("b")), Kind(1));
    });
}

#[test]
fn every_entity_command_has_its_exact_bytes() {
    let bytes = with_ctx(|ctx| {
        let e = ctx.spawn(Kind(3), 1.5, -2.0);
        assert_eq!(e.handle(), 1);
        ctx.set_pos(e, 4.0, 5.0);
        ctx.set_f32(e, 1, 0.25);
        ctx.set_uint(e, 2, 70_000);
        ctx.set_sint(e, 3, -9);
        ctx.set_bool(e, 4, true);
        ctx.set_str(e, 5, "hi");
        ctx.set_global(e, true);
        ctx.despawn(e);
    });
    let h = 1u32.to_le_bytes();
    let expected = le(&[
        &[2],
        &h,
        &3u16.to_le_bytes(),
        &1.5f32.to_le_bytes(),
        &(-2.0f32).to_le_bytes(),
        &[4],
        &h,
        &4.0f32.to_le_bytes(),
        &5.0f32.to_le_bytes(),
        &[5],
        &h,
        &[1],
        &0.25f32.to_le_bytes(),
        &[6],
        &h,
        &[2],
        &70_000u32.to_le_bytes(),
        &[7],
        &h,
        &[3],
        &(-9i32).to_le_bytes(),
        &[8],
        &h,
        &[4, 1],
        &[9],
        &h,
        &[5],
        &2u32.to_le_bytes(),
        b"hi",
        &[10],
        &h,
        &[1],
        &[3],
        &h,
    ]);
    assert_eq!(bytes, expected);
    assert_eq!(
        decode_commands(&bytes).unwrap(),
        vec![
            Command::Spawn {
                handle: 1,
                kind: 3,
                x: 1.5,
                y: -2.0
            },
            Command::SetPos {
                handle: 1,
                x: 4.0,
                y: 5.0
            },
            Command::SetF32 {
                handle: 1,
                field: 1,
                value: 0.25
            },
            Command::SetUint {
                handle: 1,
                field: 2,
                value: 70_000
            },
            Command::SetSint {
                handle: 1,
                field: 3,
                value: -9
            },
            Command::SetBool {
                handle: 1,
                field: 4,
                value: 1
            },
            Command::SetStr {
                handle: 1,
                field: 5,
                value: "hi".into()
            },
            Command::SetGlobal {
                handle: 1,
                global: 1
            },
            Command::Despawn { handle: 1 },
        ]
    );
}

#[test]
fn every_player_and_timer_command_has_its_exact_bytes() {
    let p = PlayerId(7);
    let bytes = with_ctx(|ctx| {
        let e = ctx.spawn(Kind(0), 0.0, 0.0);
        ctx.set_control(p, Some(e));
        ctx.set_control(p, None);
        ctx.set_view(p, Some(30.0), Some((1.0, 2.0)));
        ctx.set_view(p, None, None);
        ctx.kick(p, "bye");
        ctx.event(EventTarget::All, 9, &[1, 2]);
        ctx.event(EventTarget::Player(p), 10, &[]);
        ctx.timer_after(5, 11);
        ctx.timer_every(6, 12);
        ctx.timer_cancel(13);
        assert_eq!(
            ctx.emit_fact("score", "{\"n\":1}", Some("alice"), Some("k1")),
            "k1"
        );
        assert_eq!(ctx.emit_fact("ping", "null", None, None), "z:0:m0");
        ctx.refuse(3, "full");
    });
    let p7 = 7u32.to_le_bytes();
    let s = |v: &str| le(&[&(v.len() as u32).to_le_bytes(), v.as_bytes()]);
    let expected = le(&[
        &[2],
        &1u32.to_le_bytes(),
        &0u16.to_le_bytes(),
        &0f32.to_le_bytes(),
        &0f32.to_le_bytes(),
        &[11],
        &p7,
        &1u32.to_le_bytes(),
        &[11],
        &p7,
        &0u32.to_le_bytes(),
        &[12],
        &p7,
        &30f32.to_le_bytes(),
        &[1],
        &1f32.to_le_bytes(),
        &2f32.to_le_bytes(),
        &[12],
        &p7,
        &f32::NAN.to_le_bytes(),
        &[0],
        &0f32.to_le_bytes(),
        &0f32.to_le_bytes(),
        &[13],
        &p7,
        &s("bye"),
        &[14],
        &0u32.to_le_bytes(),
        &9u16.to_le_bytes(),
        &2u32.to_le_bytes(),
        &[1, 2],
        &[14],
        &p7,
        &10u16.to_le_bytes(),
        &0u32.to_le_bytes(),
        &[15],
        &5u64.to_le_bytes(),
        &11u64.to_le_bytes(),
        &[16],
        &6u64.to_le_bytes(),
        &12u64.to_le_bytes(),
        &[17],
        &13u64.to_le_bytes(),
        &[19],
        &s("score"),
        &s("{\"n\":1}"),
        &s("alice"),
        &s("k1"),
        &[19],
        &s("ping"),
        &s("null"),
        &s(""),
        &s("z:0:m0"),
        &[18],
        &3u16.to_le_bytes(),
        &s("full"),
    ]);
    assert_eq!(bytes, expected);
    let commands = decode_commands(&bytes).unwrap();
    assert_eq!(commands.len(), 14);
    assert!(matches!(
        commands[4],
        Command::SetView { player: 7, radius, focus: 0, .. } if radius.is_nan()
    ));
    assert_eq!(
        commands[13],
        Command::Refuse {
            code: 3,
            reason: "full".into()
        }
    );
}

#[test]
fn decode_commands_refuses_truncated_and_unknown() {
    let bytes = with_ctx(|ctx| {
        let e = ctx.spawn(Kind(0), 1.0, 2.0);
        ctx.set_str(e, 0, "abc");
    });
    // Every cut but the one between the two commands (SPAWN is 15 bytes).
    for cut in (1..bytes.len()).filter(|c| *c != 15) {
        assert!(decode_commands(&bytes[..cut]).is_err(), "cut {cut}");
    }
    assert_eq!(decode_commands(&bytes[..15]).unwrap().len(), 1);
    assert!(decode_commands(&[0]).is_err());
    assert!(decode_commands(&[20]).is_err());
}

// ---------------------------------------------------------------------------------------------
// Handles

#[test]
fn handles_are_never_zero_unique_and_reused_after_despawn() {
    let mut h = Handles::new();
    let a = h.allocate();
    let b = h.allocate();
    let c = h.allocate();
    assert_eq!((a.handle(), b.handle(), c.handle()), (1, 2, 3));
    assert!(h.release(b));
    assert!(!h.release(b), "a second release changes nothing");
    assert!(!h.is_live(b));
    assert_eq!(h.live_count(), 2);
    let d = h.allocate();
    assert_eq!(d.handle(), 2, "the freed handle is reused");
    let e = h.allocate();
    assert_eq!(e.handle(), 4);
    assert_eq!(h.live_count(), 4);
    assert!(!h.release(Entity::from_handle(99).unwrap()));
    assert_eq!(Entity::from_handle(0), None);
}

#[test]
fn ctx_spawn_and_despawn_share_the_handle_pool() {
    with_ctx(|ctx| {
        let a = ctx.spawn(Kind(0), 0.0, 0.0);
        let b = ctx.spawn(Kind(0), 0.0, 0.0);
        ctx.despawn(a);
        let c = ctx.spawn(Kind(0), 0.0, 0.0);
        assert_eq!(c, a);
        assert_ne!(b, c);
    });
}

// ---------------------------------------------------------------------------------------------
// RNG

#[test]
fn rng_matches_the_native_zone_derivation() {
    // Reference values: rand_xoshiro's Xoshiro256StarStar seeded as zonekeep-core's
    // `zone_rng(42, "tag-1")`.
    let mut r = Rng::for_zone(42, "tag-1");
    assert_eq!(r.next_u64(), 0xc0d2_427c_675f_5444);
    assert_eq!(r.next_u64(), 0x7f11_a81f_cf15_19d8);
    assert_eq!(r.next_u64(), 0xb5cb_8eb4_d61b_534b);
    assert_eq!(r.next_u32(), 0xc5cb_9e14);
}

#[test]
fn rng_helpers_stay_in_range() {
    let mut r = Rng::for_zone(7, "z");
    for n in [1u32, 2, 3, 10, 1000, u32::MAX] {
        for _ in 0..200 {
            assert!(r.below(n) < n);
        }
    }
    assert_eq!(r.below(0), 0);
    for _ in 0..1000 {
        let f = r.next_f32();
        assert!((0.0..1.0).contains(&f));
        let g = r.range_f32(-5.0, 5.0);
        assert!((-5.0..5.0).contains(&g));
        assert!((0.0..1.0).contains(&r.next_f64()));
    }
    assert_eq!(r.range_f32(3.0, 3.0), 3.0);
    assert!(!r.chance(0.0));
    assert!(r.chance(1.0));
}

#[test]
fn rng_state_round_trips() {
    let mut a = Rng::for_zone(1, "x");
    a.next_u64();
    let mut b = Rng::from_state(a.state());
    for _ in 0..10 {
        assert_eq!(a.next_u64(), b.next_u64());
    }
}

// ---------------------------------------------------------------------------------------------
// Dispatch: a zone that records every hook.

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

fn created() -> TestHost<Probe> {
    let mut host = TestHost::<Probe>::new(50_000);
    let commands = host.create(42, "probe-1", "{}").unwrap();
    assert_eq!(
        commands,
        vec![Command::DeclareKind {
            name: "thing".into(),
            fields: vec![("n".into(), FieldType::Uint)]
        }]
    );
    host
}

fn last_call(host: &TestHost<Probe>) -> &str {
    host.zone().unwrap().calls.last().unwrap()
}

#[test]
fn create_seeds_the_rng_from_seed_and_zone_id() {
    let host = created();
    let zone = host.zone().unwrap();
    assert_eq!(zone.calls, vec!["create {} tick=0"]);
    let mut expected = Rng::for_zone(42, "probe-1");
    assert_eq!(zone.draws, vec![expected.next_u32()]);
    assert_eq!(host.guest().rng_state(), expected.state());
}

#[test]
fn join_runs_on_join_and_a_refusal_becomes_refuse() {
    let mut host = created();
    let commands = host.join(3, "alice", Role::Player).unwrap();
    assert_eq!(last_call(&host), "join 3 alice Player tick=0");
    assert_eq!(
        commands,
        vec![
            Command::Spawn {
                handle: 1,
                kind: 0,
                x: 1.0,
                y: 2.0
            },
            Command::SetControl {
                player: 3,
                handle: 1
            }
        ]
    );
    let commands = host.join(4, "banned", Role::Observer).unwrap();
    assert_eq!(last_call(&host), "join 4 banned Observer tick=0");
    assert_eq!(
        commands,
        vec![Command::Refuse {
            code: REFUSE_BANNED,
            reason: "banned".into()
        }]
    );
}

#[test]
fn leave_drop_rejoin_and_settled_reach_their_hooks() {
    let mut host = created();
    for (why, name) in [
        (LeaveReason::Left, "Left"),
        (LeaveReason::Dropped, "Dropped"),
        (LeaveReason::Kicked, "Kicked"),
        (LeaveReason::Transferred, "Transferred"),
    ] {
        assert_eq!(host.leave(5, why).unwrap(), vec![]);
        assert_eq!(last_call(&host), format!("leave 5 {name}"));
    }
    host.drop_player(6).unwrap();
    assert_eq!(last_call(&host), "drop 6");
    host.rejoin(6).unwrap();
    assert_eq!(last_call(&host), "rejoin 6");
    host.settled("k1", true, "{\"total\":3}").unwrap();
    assert_eq!(last_call(&host), "settled k1 Ok(\"{\\\"total\\\":3}\")");
    host.settled("k2", false, "nope").unwrap();
    assert_eq!(last_call(&host), "settled k2 Err(\"nope\")");
}

#[test]
fn sanitize_answers_empty_or_a_refusal_and_input_reaches_on_input() {
    let mut host = created();
    assert_eq!(host.sanitize(2, &[1, 2]).unwrap(), None);
    assert_eq!(
        host.sanitize(2, &[]).unwrap(),
        Some((9, "empty from 2".into()))
    );
    let before = host.zone().unwrap().calls.len();
    assert_eq!(host.input(2, &[7]).unwrap(), vec![]);
    assert_eq!(last_call(&host), "input 2 [7] tick=1");
    // An input refused when applied is dropped (and logged), not applied.
    host.input(2, &[]).unwrap();
    assert_eq!(host.zone().unwrap().calls.len(), before + 1);
}

#[test]
fn default_sanitize_refuses_undecodable_payloads() {
    #[derive(Debug, PartialEq, Input)]
    struct Two {
        a: u8,
        b: u8,
    }
    struct Strict;
    impl Zone for Strict {
        type Input = Two;
        fn create(_ctx: &mut Ctx<'_>, _params: &str) -> Result<Self, String> {
            Ok(Self)
        }
        fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
    }
    let mut host = TestHost::<Strict>::new(1000);
    host.create(0, "s", "").unwrap();
    assert_eq!(host.sanitize(1, &[1, 2]).unwrap(), None);
    let (code, reason) = host.sanitize(1, &[1]).unwrap().unwrap();
    assert_eq!(code, REFUSE_UNDECODABLE);
    assert!(reason.contains("truncated"), "{reason}");
    assert_eq!(
        host.sanitize(1, &[1, 2, 3]).unwrap().unwrap().0,
        REFUSE_UNDECODABLE
    );
    // The defaults: no save, no restore, no hash.
    assert_eq!(host.state_hash().unwrap(), None);
    let save = host.save().unwrap();
    assert_eq!(save.len(), SAVE_HEADER_LEN);
    let mut other = TestHost::<Strict>::new(1000);
    assert!(matches!(
        other.restore(0, "s", "", &save),
        Err(Fatal::Restore(_))
    ));
}

#[test]
fn tick_sets_time_and_dt_and_other_hooks_see_tick_times_dt() {
    let mut host = created();
    let commands = host.tick().unwrap();
    assert_eq!(last_call(&host), "tick 1 time=50ms dt=50ms");
    assert_eq!(commands, vec![Command::TimerAfter { ticks: 2, tag: 77 }]);
    host.tick().unwrap();
    assert_eq!(last_call(&host), "tick 2 time=100ms dt=50ms");
    host.timer(77).unwrap();
    assert_eq!(last_call(&host), "timer 77 tick=2 time=100ms");
}

#[test]
fn state_hash_is_empty_or_eight_bytes() {
    let mut host = created();
    assert_eq!(host.state_hash().unwrap(), Some(1));
    let out = host
        .call_raw(Op::StateHash.number(), &input::bare(0))
        .unwrap();
    assert_eq!(out, 1u64.to_le_bytes());
}

#[test]
fn save_carries_the_rng_and_restore_puts_it_back() {
    let mut host = created();
    host.tick().unwrap();
    host.tick().unwrap();
    let save = host.save().unwrap();
    assert_eq!(save[0], SAVE_FORMAT);
    assert_eq!(save.len(), SAVE_HEADER_LEN + 4);
    assert_eq!(&save[SAVE_HEADER_LEN..], &3u32.to_le_bytes());

    // The original goes on drawing...
    host.tick().unwrap();
    let next = *host.zone().unwrap().draws.last().unwrap();

    // ...and a restored copy (with another seed: the save's RNG wins) draws the same.
    let mut copy = TestHost::<Probe>::new(50_000);
    let commands = copy.restore(999, "probe-1", "{\"p\":1}", &save).unwrap();
    assert_eq!(commands.len(), 1, "restore declares the kind again");
    assert_eq!(
        copy.zone().unwrap().calls,
        vec!["restore {\"p\":1} n=3 tick=0"]
    );
    assert_eq!(copy.zone().unwrap().saved, 3u32.to_le_bytes());
    copy.tick().unwrap();
    assert_eq!(*copy.zone().unwrap().draws.last().unwrap(), next);
}

#[test]
fn a_save_of_the_first_format_restores_with_no_fact_keys_made() {
    let mut host = TestHost::<Ledger>::new(1000);
    let mut save = vec![1];
    save.extend_from_slice(&[7; 32]);
    host.restore(0, "bank-1", "{}", &save).unwrap();
    assert_eq!(host.guest().rng_state(), [u64::from_le_bytes([7; 8]); 4]);
    host.tick().unwrap();
    assert_eq!(host.zone().unwrap().keys, ["bank-1:0:m0"]);
}

#[test]
fn restore_refuses_a_save_without_the_sdk_header() {
    let mut host = TestHost::<Probe>::new(1000);
    assert!(matches!(
        host.restore(0, "p", "", &[]),
        Err(Fatal::BadSave(_))
    ));
    assert!(matches!(
        host.restore(0, "p", "", &[9; SAVE_HEADER_LEN]),
        Err(Fatal::BadSave(_))
    ));
    assert!(matches!(
        host.restore(0, "p", "", &[SAVE_FORMAT, 0, 0]),
        Err(Fatal::BadSave(_))
    ));
    // A good header with zone bytes the zone refuses.
    let mut save = vec![SAVE_FORMAT];
    save.extend_from_slice(&[0; SAVE_HEADER_LEN - 1]);
    save.push(1);
    assert!(matches!(
        host.restore(0, "p", "", &save),
        Err(Fatal::Restore(_))
    ));
    assert!(host.zone().is_none());
}

#[test]
fn create_errors_are_fatal() {
    let mut host = TestHost::<Probe>::new(1000);
    let err = host.create(0, "p", "fail").unwrap_err();
    assert_eq!(err, Fatal::Create("params say fail".into()));
    assert_eq!(err.to_string(), "create failed: params say fail");
    assert!(host.zone().is_none());
}

#[test]
fn hooks_before_create_are_fatal() {
    for op in Op::ALL {
        // CONFIG and MIGRATE are asked of an instance no zone uses.
        if matches!(op, Op::Create | Op::Restore | Op::Config | Op::Migrate) {
            continue;
        }
        let mut guest = Guest::<Probe>::new();
        let mut out = Vec::new();
        let input = valid_input(op);
        assert_eq!(
            dispatch(&mut guest, op.number(), &input, &mut out),
            Err(Fatal::NotCreated(op)),
            "{op:?}"
        );
    }
}

#[test]
fn a_second_create_or_restore_is_fatal() {
    let mut host = created();
    assert_eq!(
        host.create(1, "p", "{}").unwrap_err(),
        Fatal::AlreadyCreated(Op::Create)
    );
    let save = host.save().unwrap();
    assert_eq!(
        host.restore(1, "p", "{}", &save).unwrap_err(),
        Fatal::AlreadyCreated(Op::Restore)
    );
}

#[test]
fn unknown_ops_are_fatal() {
    let mut host = created();
    for op in [0, 22, u32::MAX] {
        assert_eq!(
            host.call_raw(op, &input::bare(0)).unwrap_err(),
            Fatal::UnknownOp(op)
        );
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

#[test]
fn every_op_runs_on_its_valid_input_and_refuses_truncated_or_trailing_input() {
    for op in Op::ALL {
        let good = valid_input(op);
        let fresh = || {
            if matches!(op, Op::Create | Op::Restore) {
                Guest::<Probe>::new()
            } else {
                let mut g = Guest::<Probe>::new();
                dispatch(&mut g, 1, &valid_input(Op::Create), &mut Vec::new()).unwrap();
                g
            }
        };
        let mut out = Vec::new();
        dispatch(&mut fresh(), op.number(), &good, &mut out)
            .unwrap_or_else(|e| panic!("{op:?}: {e}"));
        for cut in 0..good.len() {
            let err = dispatch(&mut fresh(), op.number(), &good[..cut], &mut out).unwrap_err();
            assert!(
                matches!(err, Fatal::Malformed { op: o, error: DecodeError::Truncated { .. } } if o == op),
                "{op:?} cut at {cut}: {err:?}"
            );
        }
        let mut long = good.clone();
        long.push(0);
        let err = dispatch(&mut fresh(), op.number(), &long, &mut out).unwrap_err();
        assert!(
            matches!(
                err,
                Fatal::Malformed {
                    error: DecodeError::Trailing(1),
                    ..
                }
            ),
            "{op:?}: {err:?}"
        );
    }
}

#[test]
fn bad_enum_bytes_are_malformed() {
    let mut host = created();
    let mut join = input::join(0, 1, "a", Role::Player, "", &[]);
    // The role byte, before the empty claims and the empty character (`u32` length 0 each).
    let role = join.len() - 9;
    join[role] = 2;
    assert!(matches!(
        host.call_raw(Op::Join.number(), &join),
        Err(Fatal::Malformed {
            op: Op::Join,
            error: DecodeError::Invalid(_)
        })
    ));
    let mut leave = input::leave(0, 1, LeaveReason::Left);
    *leave.last_mut().unwrap() = 4;
    assert!(matches!(
        host.call_raw(Op::Leave.number(), &leave),
        Err(Fatal::Malformed { op: Op::Leave, .. })
    ));
    let mut settled = Writer::new();
    settled.u64(0).str("k").u8(2).str("x");
    assert!(matches!(
        host.call_raw(Op::Settled.number(), settled.as_bytes()),
        Err(Fatal::Malformed {
            op: Op::Settled,
            ..
        })
    ));
    let beyond = input::transfer_in(
        0,
        1,
        "a",
        "{}",
        "z",
        returning::RETURN_NEW_TO_RUN + 1,
        &[],
        &[],
    );
    assert!(matches!(
        host.call_raw(Op::TransferIn.number(), &beyond),
        Err(Fatal::Malformed {
            op: Op::TransferIn,
            error: DecodeError::Invalid(_)
        })
    ));
    let mut bad_utf8 = Writer::new();
    bad_utf8.u64(0).u32(1).bytes(&[0xff]).u8(0);
    assert!(matches!(
        host.call_raw(Op::Join.number(), bad_utf8.as_bytes()),
        Err(Fatal::Malformed {
            op: Op::Join,
            error: DecodeError::Invalid(_)
        })
    ));
}

#[test]
fn output_is_cleared_between_calls() {
    let mut guest = Guest::<Probe>::new();
    let mut out = vec![0xee; 10];
    dispatch(&mut guest, 1, &valid_input(Op::Create), &mut out).unwrap();
    assert!(decode_commands(&out).is_ok());
    dispatch(&mut guest, 4, &valid_input(Op::Drop), &mut out).unwrap();
    assert!(out.is_empty());
    assert_eq!(guest.live_entities(), 0);
}

#[test]
fn op_numbers_match_the_abi() {
    for (i, op) in Op::ALL.iter().enumerate() {
        assert_eq!(op.number() as usize, i + 1);
        assert_eq!(Op::from_number(op.number()), Some(*op));
    }
    assert_eq!(Op::from_number(0), None);
    assert_eq!(Op::from_number(22), None);
}

// ---------------------------------------------------------------------------------------------
// The runtime behind the exports (natively: addresses are placeholders, but the checks hold).

#[test]
fn runtime_runs_calls_written_to_its_buffer() {
    let mut rt = crate::Runtime::<Probe>::new();
    let create = valid_input(Op::Create);
    rt.alloc(create.len() as i32);
    rt.write_input(&create);
    let packed = rt.call(1, create.len() as i32);
    let out_len = (packed as u64 & 0xffff_ffff) as usize;
    assert_eq!(out_len, rt.output().len());
    assert_eq!(decode_commands(rt.output()).unwrap().len(), 1);
    // A smaller alloc keeps the buffer; the next call reads only its own length.
    let drop = valid_input(Op::Drop);
    rt.alloc(drop.len() as i32);
    rt.write_input(&drop);
    assert_eq!(rt.call(4, drop.len() as i32) as u64 & 0xffff_ffff, 0);
}

#[test]
#[should_panic(expected = "zk_call with 9 input bytes, but zk_alloc gave 8")]
fn runtime_refuses_a_length_beyond_the_buffer() {
    let mut rt = crate::Runtime::<Probe>::new();
    rt.alloc(8);
    rt.call(1, 9);
}

#[test]
#[should_panic(expected = "malformed Create input")]
fn runtime_refuses_malformed_input() {
    let mut rt = crate::Runtime::<Probe>::new();
    rt.alloc(8);
    rt.call(1, 8);
}

#[test]
#[should_panic(expected = "a negative length")]
fn runtime_refuses_a_negative_alloc() {
    let mut rt = crate::Runtime::<Probe>::new();
    rt.alloc(-1);
}

// ---------------------------------------------------------------------------------------------
// Input

#[test]
fn derived_input_reads_fields_in_order_little_endian() {
    #[derive(Debug, PartialEq, Input)]
    struct All {
        a: u8,
        b: u16,
        c: u32,
        d: u64,
        e: i8,
        f: i16,
        g: i32,
        h: f32,
        i: bool,
    }
    let mut w = Writer::new();
    w.u8(1)
        .u16(2)
        .u32(3)
        .u64(4)
        .i8(-5)
        .i16(-6)
        .i32(-7)
        .f32(8.5)
        .bool(true);
    let bytes = w.into_vec();
    assert_eq!(
        All::decode(&bytes),
        Ok(All {
            a: 1,
            b: 2,
            c: 3,
            d: 4,
            e: -5,
            f: -6,
            g: -7,
            h: 8.5,
            i: true
        })
    );
    for cut in 0..bytes.len() {
        assert!(All::decode(&bytes[..cut]).is_err());
    }
    let mut long = bytes.clone();
    long.push(0);
    assert_eq!(All::decode(&long), Err(DecodeError::Trailing(1)));
    let mut bad_bool = bytes;
    *bad_bool.last_mut().unwrap() = 2;
    assert!(matches!(
        All::decode(&bad_bool),
        Err(DecodeError::Invalid(_))
    ));
}

#[test]
fn vec_input_takes_the_payload_as_is() {
    assert_eq!(Vec::<u8>::decode(&[1, 2]), Ok(vec![1, 2]));
    assert_eq!(Vec::<u8>::decode(&[]), Ok(vec![]));
}

#[test]
fn seen_by_lists_its_players_or_everyone_again() {
    let bytes = with_ctx(|ctx| {
        let e = ctx.spawn(Kind(0), 0.0, 0.0);
        ctx.set_seen_by(e, Some(&[PlayerId(3), PlayerId(9)]));
        ctx.set_seen_by(e, None);
    });
    let commands = decode_commands(&bytes).unwrap();
    assert_eq!(
        commands[1..],
        [
            Command::SetSeenBy {
                handle: 1,
                players: Some(vec![3, 9])
            },
            Command::SetSeenBy {
                handle: 1,
                players: None
            },
        ]
    );
    let h = 1u32.to_le_bytes();
    let tail = le(&[
        &[20],
        &h,
        &2u32.to_le_bytes(),
        &3u32.to_le_bytes(),
        &9u32.to_le_bytes(),
        &[20],
        &h,
        &u32::MAX.to_le_bytes(),
    ]);
    assert!(bytes.ends_with(&tail));
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

#[test]
fn fact_keys_the_sdk_makes_carry_the_hosts_prefix_and_go_on_counting_across_a_save() {
    let mut host = TestHost::<Ledger>::new(50_000);
    host.create(1, "bank-1", "{}").unwrap();
    host.tick().unwrap();
    let commands = host.tick().unwrap();
    assert!(matches!(&commands[..], [Command::Fact { key, .. }] if key == "bank-1:0:m1"));
    let save = host.save().unwrap();

    // Restored in a new instance (an in-place upgrade keeps the prefix): no key is made twice.
    let mut next = TestHost::<Ledger>::new(50_000);
    next.restore(1, "bank-1", "{}", &save).unwrap();
    next.tick().unwrap();
    let keys = &next.zone().unwrap().keys;
    assert_eq!(keys, &["bank-1:0:m2".to_owned()]);
}

#[test]
fn a_joining_player_brings_its_ticket_claims() {
    let mut host = TestHost::<Ledger>::new(50_000);
    host.create(1, "bank-1", "{}").unwrap();
    host.join_with_claims(1, "alice", Role::Player, r#"{"name":"Al"}"#)
        .unwrap();
    host.join(2, "bob", Role::Player).unwrap();
    assert_eq!(host.zone().unwrap().claims, [r#"{"name":"Al"}"#, "{}"]);
}

/// Asks the host for 30 Hz and a 0.01 quantum, leaving the rest to it.
struct Tuned;

impl Zone for Tuned {
    type Input = Vec<u8>;

    fn settings() -> crate::Settings {
        crate::Settings::new().tick_hz(30).pos_step(0.01)
    }

    fn create(_ctx: &mut Ctx<'_>, _params: &str) -> Result<Self, String> {
        Ok(Self)
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
}

#[test]
fn config_answers_the_zones_settings_before_any_zone_is_built() {
    let mut host = TestHost::<Tuned>::new(1000);
    assert_eq!(
        host.settings().unwrap(),
        crate::Settings::new().tick_hz(30).pos_step(0.01)
    );
    // A zone that asks for nothing answers zeros: the host's own settings.
    let mut plain = TestHost::<Ledger>::new(1000);
    assert_eq!(plain.settings().unwrap(), crate::Settings::default());
    // A lasting world says so after the seven.
    let mut w = Writer::new();
    crate::Settings::new().lasting().encode(&mut w);
    let bytes = w.into_vec();
    assert_eq!(bytes.len(), 7 * 4 + 4 + 1);
    assert_eq!(bytes.last(), Some(&1));
}

/// A zone that moves players and trades messages, through the SDK's new calls and commands.
#[derive(Default)]
struct Mover {
    heard: Vec<String>,
}

impl Zone for Mover {
    type Input = Vec<u8>;

    fn create(ctx: &mut Ctx<'_>, _params: &str) -> Result<Self, String> {
        ctx.set_parent(Some("world"));
        ctx.join_group("north");
        Ok(Mover::default())
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, _input: Vec<u8>) {
        ctx.transfer(player, "zone-b", r#"{"hp":3}"#);
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}

    fn transfer_out(&mut self, ctx: &mut Ctx<'_>, player: PlayerId) -> Vec<u8> {
        ctx.kick(player, "gone");
        vec![7, player.0 as u8]
    }

    fn transfer_in(
        &mut self,
        _ctx: &mut Ctx<'_>,
        player: Player,
        arrival: crate::Arrival<'_>,
    ) -> Result<(), Refusal> {
        self.heard.push(format!(
            "in {} {} {} {} {} {:?}",
            player.id,
            arrival.from_zone,
            arrival.claims,
            arrival.returning,
            arrival.new_to_run,
            arrival.state
        ));
        if player.principal == "banned" {
            return Err(Refusal::new(3, "no"));
        }
        Ok(())
    }

    fn on_message(
        &mut self,
        ctx: &mut Ctx<'_>,
        from: crate::MessageFrom<'_>,
        topic: u16,
        payload: &[u8],
    ) {
        self.heard
            .push(format!("message {from:?} {topic} {payload:?}"));
        ctx.send_to_zone("zone-b", 1, b"a");
        ctx.send_to_group("north", 2, b"b");
        ctx.to_parent(3, b"c");
        ctx.leave_group("north");
        ctx.set_parent(None);
        ctx.save_now();
        ctx.publish_listing(false, r#"{"round":2}"#);
    }

    fn on_child(&mut self, _ctx: &mut Ctx<'_>, child: &str, event: crate::ChildEvent<'_>) {
        self.heard.push(format!("child {child} {event:?}"));
    }

    fn on_undeliverable(
        &mut self,
        _ctx: &mut Ctx<'_>,
        to: &str,
        to_group: bool,
        topic: u16,
        reason: &str,
    ) {
        self.heard
            .push(format!("undeliverable {to} {to_group} {topic} {reason}"));
    }
}

#[test]
fn transfers_messages_groups_and_the_parent_go_through_the_abi() {
    let mut host = TestHost::<Mover>::new(50_000);
    assert_eq!(
        host.create(1, "mover-1", "{}").unwrap(),
        vec![
            Command::SetParent("world".into()),
            Command::JoinGroup("north".into())
        ]
    );
    assert_eq!(
        host.input(4, &[1]).unwrap(),
        vec![Command::Transfer {
            player: 4,
            target: "zone-b".into(),
            claims: r#"{"hp":3}"#.into()
        }]
    );
    let (state, commands) = host.transfer_out(4).unwrap();
    assert_eq!(state, vec![7, 4]);
    assert_eq!(
        commands,
        vec![Command::Kick {
            player: 4,
            reason: "gone".into()
        }]
    );
    assert!(host
        .transfer_in(5, "ann", r#"{"hp":3}"#, "zone-a", returning::ARRIVAL, &[1])
        .unwrap()
        .is_empty());
    let refused = host
        .transfer_in(6, "banned", "{}", "zone-a", returning::ARRIVAL, &[])
        .unwrap();
    assert_eq!(
        refused,
        vec![Command::Refuse {
            code: 3,
            reason: "no".into()
        }]
    );
    let sent = host.message("zone:zone-c", 9, b"hi").unwrap();
    assert_eq!(
        sent,
        vec![
            Command::Send {
                kind: 0,
                to: "zone-b".into(),
                topic: 1,
                payload: b"a".to_vec()
            },
            Command::Send {
                kind: 1,
                to: "north".into(),
                topic: 2,
                payload: b"b".to_vec()
            },
            Command::Send {
                kind: 2,
                to: String::new(),
                topic: 3,
                payload: b"c".to_vec()
            },
            Command::LeaveGroup("north".into()),
            Command::SetParent(String::new()),
            Command::SaveNow,
            Command::PublishListing {
                open: false,
                metadata: r#"{"round":2}"#.into()
            },
        ]
    );
    host.message("admin", 1, b"").unwrap();
    host.child("zone-c", 0xFFFF, &[1, 2]).unwrap();
    host.child("zone-c", 4, b"x").unwrap();
    host.undeliverable(true, "south", 2, "no bus").unwrap();
    assert_eq!(
        host.zone().unwrap().heard,
        vec![
            "in 5 zone-a {\"hp\":3} false false [1]",
            "in 6 zone-a {} false false []",
            "message Zone(\"zone-c\") 9 [104, 105]",
            "message Admin 1 []",
            "child zone-c Tier { from: Idle, to: Dormant }",
            "child zone-c Message { topic: 4, payload: [120] }",
            "undeliverable south true 2 no bus",
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// State versions and MIGRATE.

/// Version 2 of a counter: version 1 saved a `u32`; version 2 saves a `u64` then a flag byte.
/// It migrates version 1, refuses (fails) a version-1 count of `u32::MAX` as corrupt, and has
/// no migration from anything else.
struct CounterV2 {
    n: u64,
    flag: u8,
}

impl Zone for CounterV2 {
    type Input = Vec<u8>;

    fn settings() -> crate::Settings {
        crate::Settings::new().state_version(2)
    }

    fn create(_ctx: &mut Ctx<'_>, _params: &str) -> Result<Self, String> {
        Ok(Self { n: 0, flag: 0 })
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}

    fn save(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u64(self.n).u8(self.flag);
        w.into_vec()
    }

    fn restore(_ctx: &mut Ctx<'_>, _params: &str, bytes: &[u8]) -> Result<Self, String> {
        let mut r = Reader::new(bytes);
        let n = r.u64().map_err(|e| e.to_string())?;
        let flag = r.u8().map_err(|e| e.to_string())?;
        r.finish().map_err(|e| e.to_string())?;
        Ok(Self { n, flag })
    }

    fn migrate(from: u32, save: &[u8]) -> Result<Vec<u8>, crate::MigrateError> {
        if from != 1 {
            return Err(crate::MigrateError::NoMigration);
        }
        let mut r = Reader::new(save);
        let n = r.u32()?;
        r.finish()?;
        if n == u32::MAX {
            return Err(crate::MigrateError::Failed(
                "a version-1 count of u32::MAX is corrupt".into(),
            ));
        }
        let mut w = Writer::new();
        w.u64(u64::from(n)).u8(1);
        Ok(w.into_vec())
    }
}

/// A version-1 save as the SDK writes it: its header (RNG `rng`, `facts` keys made), then the
/// count as a `u32`.
fn v1_save(rng: [u64; 4], facts: u64, n: u32) -> Vec<u8> {
    let mut w = Writer::new();
    w.u8(SAVE_FORMAT);
    for word in rng {
        w.u64(word);
    }
    w.u64(facts).u32(n);
    w.into_vec()
}

#[test]
fn migrate_turns_an_older_save_into_the_zones_version_and_keeps_the_sdk_header() {
    let save = v1_save([1, 2, 3, 4], 9, 41);
    let mut host = TestHost::<CounterV2>::new(50_000);
    let migrated = host.migrate(1, &save).unwrap().unwrap();
    assert_eq!(
        &migrated[..SAVE_HEADER_LEN],
        &save[..SAVE_HEADER_LEN],
        "the RNG and the count of fact keys are kept"
    );
    assert_eq!(&migrated[SAVE_HEADER_LEN..], &[41, 0, 0, 0, 0, 0, 0, 0, 1]);
    assert!(host.zone().is_none(), "MIGRATE builds no zone");
    host.restore(0, "c-1", "{}", &migrated).unwrap();
    assert_eq!(host.zone().unwrap().n, 41);
    assert_eq!(host.zone().unwrap().flag, 1);
    assert_eq!(host.guest().rng_state(), [1, 2, 3, 4]);
    // Asked of a running zone's instance too, it leaves the zone alone.
    assert!(host.migrate(1, &save).unwrap().is_ok());
    assert_eq!(host.zone().unwrap().n, 41);
}

#[test]
fn migrate_answers_no_migration_or_a_failure_with_its_reason() {
    let mut host = TestHost::<CounterV2>::new(50_000);
    let save = v1_save([0; 4], 0, 1);
    // No migration from version 3: the single byte 0.
    let out = host
        .call_raw(Op::Migrate.number(), &input::migrate(3, &save))
        .unwrap();
    assert_eq!(out, [zonekeep_abi::migration::NONE]);
    assert_eq!(
        host.migrate(3, &save).unwrap(),
        Err(crate::MigrateError::NoMigration)
    );
    // A failure says why.
    let corrupt = v1_save([0; 4], 0, u32::MAX);
    let out = host
        .call_raw(Op::Migrate.number(), &input::migrate(1, &corrupt))
        .unwrap();
    let mut r = Reader::new(&out);
    assert_eq!(r.u8(), Ok(zonekeep_abi::migration::FAILED));
    assert_eq!(r.str(), Ok("a version-1 count of u32::MAX is corrupt"));
    assert_eq!(r.finish(), Ok(()));
    // An old save that does not decode fails through `?`, naming the decoding error.
    let mut short = v1_save([0; 4], 0, 1);
    short.pop();
    match host.migrate(1, &short).unwrap() {
        Err(crate::MigrateError::Failed(why)) => {
            assert!(why.contains("does not decode"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    // A save without the SDK's header is a failed migration, not a trap.
    match host.migrate(1, &[9, 9]).unwrap() {
        Err(crate::MigrateError::Failed(why)) => assert!(why.starts_with("bad save"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_zone_without_a_migration_answers_no_migration() {
    // Probe implements no `migrate`: the default.
    let mut host = TestHost::<Probe>::new(50_000);
    assert_eq!(
        host.migrate(1, &v1_save([0; 4], 0, 3)).unwrap(),
        Err(crate::MigrateError::NoMigration)
    );
    assert_eq!(
        crate::MigrateError::NoMigration.to_string(),
        "no migration from that state version"
    );
}

#[test]
fn config_carries_the_state_version_as_its_tenth_setting() {
    let mut host = TestHost::<CounterV2>::new(1000);
    assert_eq!(host.settings().unwrap().state_version, 2);
    let encoded = |s: crate::Settings| {
        let mut w = Writer::new();
        s.encode(&mut w);
        w.into_vec()
    };
    // Seven, then `max_entities` 0 and `lasting` 0, then the version.
    let bytes = encoded(crate::Settings::new().state_version(2));
    assert_eq!(bytes.len(), 7 * 4 + 4 + 1 + 4);
    assert_eq!(bytes[7 * 4 + 4], 0, "not lasting");
    assert_eq!(&bytes[bytes.len() - 4..], &2u32.to_le_bytes());
    let lasting = encoded(crate::Settings::new().lasting().state_version(3));
    assert_eq!(lasting[7 * 4 + 4], 1);
    assert_eq!(&lasting[lasting.len() - 4..], &3u32.to_le_bytes());
    // No version: nothing after the nine (or the seven) settings, as before.
    assert_eq!(encoded(crate::Settings::new()).len(), 7 * 4);
    assert_eq!(
        encoded(crate::Settings::new().lasting()).len(),
        7 * 4 + 4 + 1
    );
}
