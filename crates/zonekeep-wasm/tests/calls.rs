//! Durable calls in module zones: the guest SDK's example module making calls
//! (`crates/zonekeep-guest/examples/calls.rs`), built for wasm32 and run by the host, makes calls
//! that come out of `drain_calls`, sees their results on the next tick, and keeps what it waits
//! for across a snapshot whose calls a restored zone sends again; and modules written by hand
//! whose CALL commands the host refuses, or cannot read.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/guest_build.rs"]
mod guest_build;

use std::sync::Arc;

use zonekeep_core::call::{MAX_CALL_ARGS_BYTES, MAX_CALL_FUNCTION_LEN, MAX_CALL_KEY_LEN};
use zonekeep_core::serde_json::json;
use zonekeep_core::{
    AdvanceReport, CallAnswer, CallKey, CallResult, Claims, Clock, EventTarget, ManualClock,
    PlayerId, Principal, Role, Snapshot, ZoneConfig, ZoneHost, ZoneInit, ZoneKinds, KEY_REUSED,
};
use zonekeep_protocol::schema::FieldValue;
use zonekeep_wasm::{register, ModuleEngine, ModuleKind, Sandbox, ZoneModule};

fn init(kind: &str) -> ZoneInit {
    ZoneInit {
        zone_id: format!("{kind}-1"),
        kind: kind.into(),
        params: json!({}),
    }
}

/// Kind `kind` running `bytes`.
fn kinds_of(kind: &str, bytes: &[u8]) -> ZoneKinds {
    let engine = ModuleEngine::new(Sandbox::default()).unwrap();
    let module = ZoneModule::load(&engine, bytes).unwrap();
    let mut kinds = ZoneKinds::new();
    register(&mut kinds, &ModuleKind::new(kind, module));
    kinds
}

/// The SDK's example module making calls, as kind `shop`.
fn shop_kinds() -> ZoneKinds {
    kinds_of("shop", &std::fs::read(guest_build::calls_module()).unwrap())
}

/// A zone of the example module, on a manual clock, with ann (a player) in it.
struct Shop {
    host: ZoneHost,
    clock: Arc<ManualClock>,
    ann: PlayerId,
    seq: u32,
}

impl Shop {
    fn new(kinds: &ZoneKinds) -> Self {
        let clock = Arc::new(ManualClock::new());
        let mut host = kinds
            .create(init("shop"), ZoneConfig::default(), clock.clone())
            .unwrap();
        let ann = host
            .handle_join(Principal::new("ann"), Claims::new(), Role::Player)
            .unwrap();
        Self {
            host,
            clock,
            ann,
            seq: 0,
        }
    }

    /// One tick.
    fn tick(&mut self) -> AdvanceReport {
        tick(&mut self.host, &self.clock)
    }

    /// Ann sends `input`, and a tick applies it.
    fn input(&mut self, input: &[u8]) -> AdvanceReport {
        self.seq += 1;
        assert!(self
            .host
            .handle_input(self.ann, self.seq, 0, input)
            .is_accepted());
        self.tick()
    }
}

/// One tick of `host`; the zone must run on.
fn tick(host: &mut ZoneHost, clock: &ManualClock) -> AdvanceReport {
    clock.advance(host.config().dt());
    let report = host.advance(clock.now());
    assert_eq!(report.ticks_run, 1);
    assert_eq!(host.failure(), None, "the zone runs on");
    report
}

/// The till's `gold`, `waiting`, `failed` and `refused`.
fn till(host: &ZoneHost) -> [u32; 4] {
    let tills: Vec<_> = host.world().iter().map(|e| e.values.to_vec()).collect();
    match tills.as_slice() {
        [v] => match v.as_slice() {
            [FieldValue::U(a), FieldValue::U(b), FieldValue::U(c), FieldValue::U(d)] => {
                [*a, *b, *c, *d]
            }
            other => panic!("the till's fields: {other:?}"),
        },
        other => panic!("one till, found {other:?}"),
    }
}

/// The payloads of the events sent to everyone since the last drain, as text.
fn events(host: &mut ZoneHost) -> Vec<String> {
    host.drain_events()
        .filter(|e| e.target == EventTarget::All)
        .map(|e| String::from_utf8(e.payload).unwrap())
        .collect()
}

fn answer(key: &str, result: CallResult) -> CallAnswer {
    CallAnswer {
        key: CallKey(key.into()),
        result,
    }
}

fn gold(n: u64) -> CallResult {
    CallResult::Ok(json!({ "gold": n }))
}

#[test]
fn the_abi_and_the_core_agree_on_the_call_limits() {
    // The guest SDK refuses past the ABI's limits, the core past its own: one number each.
    assert_eq!(zonekeep_abi::MAX_CALL_KEY_LEN, MAX_CALL_KEY_LEN);
    assert_eq!(zonekeep_abi::MAX_CALL_FUNCTION_LEN, MAX_CALL_FUNCTION_LEN);
    assert_eq!(zonekeep_abi::MAX_CALL_ARGS_BYTES, MAX_CALL_ARGS_BYTES);
    assert_eq!(zonekeep_abi::call_result::KEY_REUSED, KEY_REUSED);
    assert_eq!(
        (zonekeep_abi::tag::CALL, zonekeep_abi::op::CALL_RESULT),
        (29, 21)
    );
    assert_eq!(zonekeep_abi::ABI_VERSION, 6);
}

#[test]
fn a_modules_call_comes_out_of_drain_calls_with_its_key_function_and_args() {
    let mut shop = Shop::new(&shop_kinds());
    shop.input(&[1, 7]);
    let calls = shop.host.drain_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].key.as_str(), "order-7");
    assert_eq!(calls[0].function, "buy");
    assert_eq!(calls[0].args, json!({"item": 7}));
    assert_eq!(calls[0].tick, 1);
    assert!(shop.host.drain_calls().is_empty(), "handed out once");
    assert_eq!(shop.host.calls_in_flight(), 1);
    assert_eq!(till(&shop.host), [0, 1, 0, 0]);
}

#[test]
fn a_result_reaches_the_module_on_the_next_tick() {
    let mut shop = Shop::new(&shop_kinds());
    shop.input(&[1, 7]);
    shop.input(&[1, 8]);
    assert_eq!(shop.host.drain_calls().len(), 2);

    shop.host.handle_call_result(answer("order-7", gold(30)));
    shop.host.handle_call_result(answer(
        "order-8",
        CallResult::Err {
            code: "NO_STOCK".into(),
            message: "sold out".into(),
        },
    ));
    assert_eq!(till(&shop.host), [0, 2, 0, 0], "results wait for a tick");
    let report = shop.tick();
    assert_eq!(report.calls_answered, 2);
    assert_eq!(till(&shop.host), [30, 0, 1, 0]);
    assert_eq!(events(&mut shop.host), ["order-7=ok", "order-8=NO_STOCK"]);
    assert_eq!(shop.host.calls_in_flight(), 0);

    // A result for a call answered already is dropped by the host: the module never sees it.
    shop.host.handle_call_result(answer("order-7", gold(30)));
    let report = shop.tick();
    assert_eq!(report.call_results_unknown, 1);
    assert_eq!(till(&shop.host), [30, 0, 1, 0]);
    assert!(events(&mut shop.host).is_empty());
}

#[test]
fn a_key_in_flight_is_refused_by_the_host_and_bad_args_by_the_sdk() {
    let mut shop = Shop::new(&shop_kinds());
    shop.input(&[1, 7]);
    // The module cannot know order-7 is in flight: the host refuses the second CALL.
    shop.input(&[1, 7]);
    assert_eq!(shop.host.drain_calls().len(), 1);
    assert_eq!(shop.host.calls_in_flight(), 1);
    // Arguments that are not JSON: the SDK refuses the call and the module counts it.
    shop.input(&[2]);
    assert_eq!(till(&shop.host), [0, 1, 0, 1]);
    assert!(shop.host.drain_calls().is_empty());
}

#[test]
fn a_snapshot_keeps_the_calls_in_flight_and_a_restored_zone_sends_them_again() {
    let kinds = shop_kinds();
    let mut shop = Shop::new(&kinds);
    shop.input(&[1, 7]);
    shop.input(&[1, 8]);
    assert_eq!(shop.host.drain_calls().len(), 2);
    shop.host.handle_call_result(answer("order-7", gold(5)));
    shop.tick();
    assert_eq!(till(&shop.host), [5, 1, 0, 0]);

    let save = shop.host.snapshot().unwrap();
    let snap = Snapshot::decode(&save).unwrap();
    assert_eq!(
        snap.calls
            .iter()
            .map(|c| c.key.as_str())
            .collect::<Vec<_>>(),
        ["order-8"],
        "the snapshot keeps the call still in flight"
    );

    // A new owner restores the zone: the module finds its till and what it waits for in its
    // save, and the host sends the call again under its key.
    let clock = Arc::new(ManualClock::new());
    clock.set(shop.clock.now());
    let mut restored = kinds
        .restore(init("shop"), ZoneConfig::default(), clock.clone(), 2, &save)
        .unwrap();
    assert_eq!(restored.failure(), None);
    assert_eq!(till(&restored), [5, 1, 0, 0]);
    let again = restored.drain_calls();
    assert_eq!(again.len(), 1);
    assert_eq!(
        (again[0].key.as_str(), again[0].function.as_str()),
        ("order-8", "buy")
    );
    assert_eq!(again[0].args, json!({"item": 8}));

    restored.handle_call_result(answer("order-8", gold(7)));
    tick(&mut restored, &clock);
    assert_eq!(till(&restored), [12, 0, 0, 0]);
    assert_eq!(events(&mut restored), ["order-8=ok"]);
    assert_eq!(restored.calls_in_flight(), 0);
}

fn data(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("\\{b:02x}")).collect()
}

/// A module whose TICK answers the command buffer laid out at 65536 by `segments`
/// (`(offset, bytes)` each, over memory that is otherwise zero, `len` bytes in all) and every
/// other call nothing (CONFIG: every setting the host's).
fn answering_tick(segments: &[(usize, Vec<u8>)], len: usize) -> Vec<u8> {
    let pages = (65536 + len).div_ceil(65536);
    let segments: String = segments
        .iter()
        .map(|(at, b)| format!("(data (i32.const {}) \"{}\")\n", 65536 + at, data(b)))
        .collect();
    wat::parse_str(format!(
        r#"(module
            (memory (export "memory") {pages})
            {segments}
            (func (export "zk_abi") (result i32) i32.const 5)
            (func (export "zk_alloc") (param i32) (result i32) i32.const 4096)
            (func (export "zk_call") (param $op i32) (param $len i32) (result i64)
                (if (i32.eq (local.get $op) (i32.const 8))
                    (then (return (i64.const {tick_out}))))
                i64.const 0))"#,
        tick_out = (65536i64 << 32) | len as i64,
    ))
    .unwrap()
}

fn put(c: &mut Vec<u8>, bytes: &[u8]) {
    c.extend_from_slice(&u32::try_from(bytes.len()).unwrap().to_le_bytes());
    c.extend_from_slice(bytes);
}

/// A CALL command.
fn call(key: &[u8], function: &[u8], args: &[u8]) -> Vec<u8> {
    let mut c = vec![29];
    put(&mut c, key);
    put(&mut c, function);
    put(&mut c, args);
    c
}

/// A CALL command up to its arguments' length (`args_len`), without them.
fn call_head(key: &[u8], function: &[u8], args_len: usize) -> Vec<u8> {
    let mut c = vec![29];
    put(&mut c, key);
    put(&mut c, function);
    c.extend_from_slice(&u32::try_from(args_len).unwrap().to_le_bytes());
    c
}

/// A zone of `module` as kind `k`, with at most 2 calls in flight.
fn hostile_zone(module: &[u8]) -> (ZoneHost, ManualClock) {
    hostile_zone_with(
        module,
        ZoneConfig {
            max_calls_in_flight: 2,
            ..ZoneConfig::default()
        },
    )
}

/// A zone of `module` as kind `k`, configured by `config`.
fn hostile_zone_with(module: &[u8], config: ZoneConfig) -> (ZoneHost, ManualClock) {
    let clock = ManualClock::new();
    let host = kinds_of("k", module)
        .create(init("k"), config, Arc::new(clock.clone()))
        .unwrap();
    (host, clock)
}

#[test]
fn hostile_calls_are_refused_without_harming_the_zone_or_the_host() {
    // Each tick: a good call "a"; arguments that are not JSON; a key one byte too long; "a"
    // again (in flight); an empty function; arguments one byte past what any zone accepts (the
    // zeros after the head, refused before they are parsed); arguments over the zone's
    // max_call_bytes; a good call "c"; and "d", past the 2 calls in flight.
    let long_key = vec![b'k'; MAX_CALL_KEY_LEN + 1];
    let over_zone = format!("\"{}\"", "x".repeat(ZoneConfig::default().max_call_bytes));
    let mut head = call(b"a", b"grant", br#"{"n":1}"#);
    head.extend(call(b"bad-json", b"grant", b"{oops"));
    head.extend(call(&long_key, b"grant", b"1"));
    head.extend(call(b"a", b"grant", b"2"));
    head.extend(call(b"b", b"", b"1"));
    head.extend(call_head(b"big", b"grant", MAX_CALL_ARGS_BYTES + 1));
    let mut tail = call(b"over", b"grant", over_zone.as_bytes());
    tail.extend(call(b"c", b"grant", b"[1,2]"));
    tail.extend(call(b"d", b"grant", b"null"));
    let tail_at = head.len() + MAX_CALL_ARGS_BYTES + 1;
    let len = tail_at + tail.len();
    let (mut host, clock) = hostile_zone(&answering_tick(&[(0, head), (tail_at, tail)], len));

    let report = tick(&mut host, &clock);
    assert_eq!(report.calls_overflowed, 1, "d found the queue full");
    let calls = host.drain_calls();
    assert_eq!(
        calls
            .iter()
            .map(|c| (c.key.as_str(), c.args.clone()))
            .collect::<Vec<_>>(),
        [("a", json!({"n": 1})), ("c", json!([1, 2]))],
        "only the good calls were made"
    );

    // The same buffer again: a and c are in flight, d still finds the queue full.
    let report = tick(&mut host, &clock);
    assert_eq!(report.calls_overflowed, 1);
    assert!(host.drain_calls().is_empty());

    // a's result (which this module ignores) ends it: the next buffer makes a again.
    host.handle_call_result(answer("a", gold(1)));
    let report = tick(&mut host, &clock);
    assert_eq!(report.calls_answered, 1);
    let calls = host.drain_calls();
    assert_eq!(
        calls.iter().map(|c| c.key.as_str()).collect::<Vec<_>>(),
        ["a"]
    );
    assert_eq!(host.calls_in_flight(), 2);
    assert_eq!(host.tick(), 3);
}

#[test]
fn arguments_past_64_kib_are_refused_unparsed_even_if_their_compact_json_would_fit() {
    // A zone taking the largest arguments any zone may: 64 KiB of compact JSON. The arguments
    // are a string of exactly that, with a space on each side: one byte too long as text.
    let config = ZoneConfig {
        max_call_bytes: MAX_CALL_ARGS_BYTES,
        ..ZoneConfig::default()
    };
    let fits = format!("\"{}\"", "x".repeat(MAX_CALL_ARGS_BYTES - 2));
    let padded = format!(" {fits} ");
    let mut buffer = call(b"padded", b"grant", padded.as_bytes());
    buffer.extend(call(b"fits", b"grant", fits.as_bytes()));
    let len = buffer.len();
    let (mut host, clock) = hostile_zone_with(&answering_tick(&[(0, buffer)], len), config);
    tick(&mut host, &clock);
    let calls = host.drain_calls();
    assert_eq!(
        calls.iter().map(|c| c.key.as_str()).collect::<Vec<_>>(),
        ["fits"],
        "the padded arguments were refused by their length as text"
    );
}

#[test]
fn a_call_cut_short_or_not_utf8_fails_only_its_zone() {
    for (cut, why) in [
        // Arguments claiming 100 bytes, with none in the buffer.
        (call_head(b"k", b"f", 100), "call args runs past the end"),
        (call(&[0xff, 0xfe], b"f", b"1"), "call key is not UTF-8"),
    ] {
        let len = cut.len();
        let (mut host, clock) = hostile_zone(&answering_tick(&[(0, cut)], len));
        clock.advance(host.config().dt());
        host.advance(clock.now());
        let failure = host.failure().unwrap().to_owned();
        assert!(failure.contains(why), "{failure}");
        assert!(host.drain_calls().is_empty(), "no call was made");
    }
    // The host runs other zones on: a new one of another module is untouched.
    let mut shop = Shop::new(&shop_kinds());
    shop.input(&[1, 1]);
    assert_eq!(shop.host.drain_calls().len(), 1);
}
