//! Dispatch: each op reaching its hook on a zone that records every call, saves and restores
//! carrying the RNG, and the fatal errors (a hook before CREATE, a second CREATE, unknown ops,
//! truncated, trailing or malformed inputs).

use super::{valid_input, Ledger, Probe, REFUSE_BANNED};
use crate::testing::{decode_commands, input, Command, TestHost};
use crate::{
    dispatch, returning, Ctx, DecodeError, Fatal, FieldType, Guest, Input, LeaveReason, Op, Rng,
    Role, Writer, Zone, REFUSE_UNDECODABLE, SAVE_FORMAT, SAVE_HEADER_LEN,
};

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

#[test]
fn a_joining_player_brings_its_ticket_claims() {
    let mut host = TestHost::<Ledger>::new(50_000);
    host.create(1, "bank-1", "{}").unwrap();
    host.join_with_claims(1, "alice", Role::Player, r#"{"name":"Al"}"#)
        .unwrap();
    host.join(2, "bob", Role::Player).unwrap();
    assert_eq!(host.zone().unwrap().claims, [r#"{"name":"Al"}"#, "{}"]);
}
