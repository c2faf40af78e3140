//! The command buffer a zone writes through `Ctx`: the exact bytes of every command, as the
//! host reads them, and what `decode_commands` refuses.

use super::with_ctx;
use crate::testing::{decode_commands, Command};
use crate::{EventTarget, Kind, KindDef, PlayerId};

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
