//! Durable calls through the SDK: the CALL command's bytes, what the SDK refuses before sending,
//! CALL_RESULT reaching the zone (or ignored by a zone without the hook), and the host's side
//! as [`TestHost`] keeps it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::ctx::SdkState;
use crate::testing::{decode_commands, input, Call, Command, TestHost};
use crate::{
    CallError, CallResult, Ctx, DecodeError, Fatal, Op, PlayerId, Rng, Writer, Zone, KEY_REUSED,
    MAX_CALL_ARGS_BYTES, MAX_CALL_FUNCTION_LEN, MAX_CALL_KEY_LEN,
};

/// Buys what an input names: `[n]` calls `buy` under `order-n` with `{"item":n}`; `[0]` tries
/// a call with arguments that are not JSON. Keeps the results it saw and the refusals.
#[derive(Default)]
struct Shop {
    results: Vec<(String, CallResult)>,
    refused: Vec<CallError>,
}

impl Zone for Shop {
    type Input = Vec<u8>;

    fn create(_ctx: &mut Ctx<'_>, _params: &str) -> Result<Self, String> {
        Ok(Self::default())
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, _player: PlayerId, input: Vec<u8>) {
        let made = match input.first() {
            Some(0) => ctx.call("order-0", "buy", "{not json"),
            Some(n) => ctx.call(&format!("order-{n}"), "buy", &format!("{{\"item\":{n}}}")),
            None => Ok(()),
        };
        if let Err(e) = made {
            self.refused.push(e);
        }
    }

    fn on_call_result(&mut self, ctx: &mut Ctx<'_>, key: &str, result: &CallResult) {
        // Shows the result: an event with the key.
        ctx.event(crate::EventTarget::All, 9, key.as_bytes());
        self.results.push((key.to_owned(), result.clone()));
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
}

/// A zone without `on_call_result`.
struct Deaf;

impl Zone for Deaf {
    type Input = Vec<u8>;

    fn create(_ctx: &mut Ctx<'_>, _params: &str) -> Result<Self, String> {
        Ok(Deaf)
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
}

fn shop() -> TestHost<Shop> {
    let mut host = TestHost::<Shop>::new(50_000);
    host.create(1, "shop-1", "{}").unwrap();
    host
}

fn ok(value: &str) -> CallResult {
    CallResult::Ok(value.to_owned())
}

#[test]
fn a_call_writes_its_exact_bytes() {
    let mut sdk = SdkState::new(Rng::for_zone(1, "z"));
    let mut w = Writer::new();
    let mut ctx = Ctx::new(0, Duration::ZERO, &mut sdk, &mut w);
    ctx.call("k1", "grant", "[1]").unwrap();
    let mut expected = vec![29];
    for s in ["k1", "grant", "[1]"] {
        expected.extend_from_slice(&(s.len() as u32).to_le_bytes());
        expected.extend_from_slice(s.as_bytes());
    }
    assert_eq!(w.as_bytes(), expected);
    assert_eq!(crate::tag::CALL, 29);
    assert_eq!(
        decode_commands(w.as_bytes()).unwrap(),
        [Command::Call {
            key: "k1".into(),
            function: "grant".into(),
            args: "[1]".into(),
        }]
    );
}

#[test]
fn what_the_host_would_refuse_is_refused_here_and_sends_nothing() {
    let mut sdk = SdkState::new(Rng::for_zone(1, "z"));
    let mut w = Writer::new();
    let mut ctx = Ctx::new(0, Duration::ZERO, &mut sdk, &mut w);
    let long_key = "k".repeat(MAX_CALL_KEY_LEN + 1);
    let long_function = "f".repeat(MAX_CALL_FUNCTION_LEN + 1);
    for (key, function) in [
        ("", "f"),
        (long_key.as_str(), "f"),
        ("k", ""),
        ("k", &long_function),
    ] {
        assert!(
            matches!(ctx.call(key, function, "{}"), Err(CallError::Invalid(_))),
            "{} {}",
            key.len(),
            function.len()
        );
    }
    for args in ["", "{", "{\"a\":1} x", "'a'"] {
        assert!(
            matches!(ctx.call("k", "f", args), Err(CallError::NotJson(_))),
            "{args:?}"
        );
    }
    // Longer than any zone accepts, though valid JSON.
    let big = format!("\"{}\"", "x".repeat(MAX_CALL_ARGS_BYTES - 1));
    assert_eq!(
        ctx.call("k", "f", &big),
        Err(CallError::TooLarge {
            bytes: MAX_CALL_ARGS_BYTES + 1,
            max: MAX_CALL_ARGS_BYTES
        })
    );
    assert!(ctx.commands().is_empty(), "nothing was sent");

    // The limits themselves are accepted.
    let key = "k".repeat(MAX_CALL_KEY_LEN);
    let function = "f".repeat(MAX_CALL_FUNCTION_LEN);
    let args = format!("\"{}\"", "x".repeat(MAX_CALL_ARGS_BYTES - 2));
    ctx.call(&key, &function, &args).unwrap();
    assert_eq!(decode_commands(ctx.commands()).unwrap().len(), 1);
    let e = CallError::TooLarge { bytes: 9, max: 8 };
    assert_eq!(
        e.to_string(),
        "call arguments of 9 bytes are over the 8-byte limit"
    );
}

#[test]
fn call_result_reaches_the_zone_with_its_key_and_result() {
    let mut host = shop();
    let failed = CallResult::Err {
        code: KEY_REUSED.into(),
        message: "order-2 was used for another purchase".into(),
    };
    for (key, result) in [
        ("order-1", ok(r#"{"gold":5}"#)),
        ("order-2", failed.clone()),
    ] {
        let commands = host
            .call_raw(
                Op::CallResult.number(),
                &input::call_result(3, key, &result),
            )
            .unwrap();
        assert_eq!(
            decode_commands(&commands).unwrap(),
            [Command::Event {
                player: 0,
                topic: 9,
                payload: key.as_bytes().to_vec(),
            }],
            "answered with the hook's commands"
        );
    }
    assert_eq!(
        host.zone().unwrap().results,
        [
            ("order-1".to_owned(), ok(r#"{"gold":5}"#)),
            ("order-2".to_owned(), failed)
        ]
    );
    assert_eq!(KEY_REUSED, "KEY_REUSED");
}

#[test]
fn call_result_lays_out_key_kind_and_fields() {
    let ok_input = input::call_result(7, "k", &ok("1"));
    let mut w = Writer::new();
    w.u64(7).str("k").u8(0).str("1");
    assert_eq!(ok_input, w.into_vec());
    let err_input = input::call_result(
        7,
        "k",
        &CallResult::Err {
            code: "C".into(),
            message: "m".into(),
        },
    );
    let mut w = Writer::new();
    w.u64(7).str("k").u8(1).str("C").str("m");
    assert_eq!(err_input, w.into_vec());
    assert_eq!(Op::from_number(21), Some(Op::CallResult));
}

#[test]
fn a_result_kind_other_than_0_or_1_is_malformed() {
    let mut host = shop();
    let mut w = Writer::new();
    w.u64(0).str("k").u8(2).str("x");
    assert!(matches!(
        host.call_raw(Op::CallResult.number(), w.as_bytes()),
        Err(Fatal::Malformed {
            op: Op::CallResult,
            error: DecodeError::Invalid(_)
        })
    ));
    assert!(host.zone().unwrap().results.is_empty());
}

#[test]
fn a_zone_without_the_hook_ignores_results() {
    let mut host = TestHost::<Deaf>::new(50_000);
    host.create(1, "deaf-1", "{}").unwrap();
    let out = host
        .call_raw(
            Op::CallResult.number(),
            &input::call_result(0, "k", &ok("{}")),
        )
        .unwrap();
    assert!(out.is_empty(), "no commands, no trap");
}

#[test]
fn the_test_host_hands_out_each_call_once_and_a_result_ends_it() {
    let mut host = shop();
    host.input(1, &[7]).unwrap();
    host.input(1, &[8]).unwrap();
    assert_eq!(host.calls_in_flight(), 2);
    assert_eq!(
        host.drain_calls(),
        [
            Call {
                key: "order-7".into(),
                function: "buy".into(),
                args: r#"{"item":7}"#.into(),
            },
            Call {
                key: "order-8".into(),
                function: "buy".into(),
                args: r#"{"item":8}"#.into(),
            }
        ]
    );
    assert!(
        host.drain_calls().is_empty(),
        "a drained call is not handed out twice"
    );

    let commands = host.call_result("order-8", &ok("{}")).unwrap();
    assert_eq!(commands.len(), 1, "the zone's event");
    assert_eq!(host.calls_in_flight(), 1);
    assert_eq!(host.zone().unwrap().results.len(), 1);

    // A second result, or one for a key never called, is dropped as a host drops it.
    assert!(host.call_result("order-8", &ok("{}")).unwrap().is_empty());
    assert!(host.call_result("order-9", &ok("{}")).unwrap().is_empty());
    assert_eq!(host.zone().unwrap().results.len(), 1);
}

#[test]
fn the_test_host_refuses_a_key_in_flight_and_the_sdk_what_is_not_json() {
    let mut host = shop();
    host.input(1, &[7]).unwrap();
    // The SDK cannot know the key is in flight: it sends the call, and the host refuses it.
    let commands = host.input(1, &[7]).unwrap();
    assert!(matches!(commands[..], [Command::Call { .. }]));
    assert_eq!(host.drain_calls().len(), 1);
    assert_eq!(host.calls_in_flight(), 1);
    // Not JSON: refused by the SDK, never sent.
    assert!(host.input(1, &[0]).unwrap().is_empty());
    assert!(matches!(
        host.zone().unwrap().refused[..],
        [CallError::NotJson(_)]
    ));
    // Once answered, the key may be called again (the host's journal answers it).
    host.call_result("order-7", &ok("{}")).unwrap();
    host.input(1, &[7]).unwrap();
    assert_eq!(host.drain_calls().len(), 1);
}
