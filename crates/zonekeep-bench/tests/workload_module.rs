//! The arena workload as a zone module plays the same game as the native zone: stepped side by
//! side with the same bots' inputs, both worlds hash the same after every tick, and in scenario A
//! every player is sent the same bytes. What the module benchmark compares is therefore the cost
//! of running a game as a module, not two different games.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../zonekeep-wasm/tests/support/guest_build.rs"]
mod guest_build;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use zonekeep_bench::arena::local::join_bot;
use zonekeep_bench::arena::math::{encode_input, BotParams};
use zonekeep_bench::arena::zone::{zone_config, ArenaZone};
use zonekeep_bench::arena::{module, ArenaParams, KIND};
use zonekeep_core::{Clock, ManualClock, PlayerId, ZoneHost, ZoneInit};

const BOTS: u32 = 20;

fn join_bots(host: &mut ZoneHost) -> Vec<PlayerId> {
    (0..BOTS).map(|b| join_bot(host, b)).collect()
}

/// Steps a native and a module host of the workload with `params` for `ticks` ticks, every bot
/// moving every tick; asserts the worlds hash the same after each, and (`same_bytes`) that each
/// player is sent the same bytes.
fn side_by_side(params: Value, ticks: u64, same_bytes: bool) {
    let clock = ManualClock::new();
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    let init = ZoneInit {
        zone_id: "arena-a".into(),
        kind: KIND.into(),
        params: params.clone(),
    };
    let mut native = ZoneHost::new::<ArenaZone>(init, zone_config(None), shared.clone()).unwrap();
    let bytes = std::fs::read(guest_build::workload_module()).unwrap();
    let m = module::load(&bytes).unwrap();
    let mut wasm = module::host(&m, "arena-a", params, shared).unwrap();
    assert_eq!(
        native.config(),
        wasm.config(),
        "the module asks for the kind's settings"
    );
    let a = join_bots(&mut native);
    let b = join_bots(&mut wasm);
    assert_eq!(a, b);
    let c = ArenaParams::default().consts;
    let bots: Vec<BotParams> = (0..BOTS).map(|b| BotParams::new(b, c.world)).collect();
    let dt = Duration::from_millis(50);
    for k in 1..=ticks {
        for (i, (player, bot)) in a.iter().zip(&bots).enumerate() {
            let (dx, dy) = bot.input(&c, k);
            let seq = u32::try_from(k).unwrap();
            let payload = encode_input(dx, dy);
            assert!(native.handle_input(*player, seq, 0, &payload).is_accepted());
            assert!(
                wasm.handle_input(*player, seq, 0, &payload).is_accepted(),
                "bot {i}"
            );
        }
        clock.advance(dt);
        assert_eq!(native.advance(clock.now()).ticks_run, 1);
        assert_eq!(wasm.advance(clock.now()).ticks_run, 1);
        assert_eq!(native.state_hash(), wasm.state_hash(), "tick {k}");
        let frames = |h: &mut ZoneHost| -> Vec<(PlayerId, Vec<u8>)> {
            h.drain_frames()
                .unwrap()
                .map(|f| (f.player, f.bytes.to_vec()))
                .collect()
        };
        let (fa, fb) = (frames(&mut native), frames(&mut wasm));
        assert_eq!(fa.len(), fb.len(), "tick {k}");
        if same_bytes {
            assert_eq!(fa, fb, "tick {k}");
        }
    }
}

#[test]
fn scenario_a_as_a_module_sends_every_player_the_native_zones_bytes() {
    side_by_side(json!({ "npcs": 200 }), 90, true);
}

#[test]
fn scenario_b_as_a_module_keeps_the_native_zones_world() {
    side_by_side(json!({ "npcs": 200, "scenario": "B" }), 90, false);
}

#[test]
fn the_module_refuses_what_the_native_zone_refuses() {
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new());
    let bytes = std::fs::read(guest_build::workload_module()).unwrap();
    let m = module::load(&bytes).unwrap();
    let err = module::host(&m, "bad", json!({ "radius": -1.0 }), clock.clone()).unwrap_err();
    assert!(err.to_string().contains("radius"), "{err}");
    let mut host = module::host(&m, "ok", Value::Null, clock).unwrap();
    let p = join_bots(&mut host)[0];
    let short = host.handle_input(p, 1, 0, &[0; 15]);
    assert!(!short.is_accepted(), "{short:?}");
    let nan = encode_input(f64::NAN, 0.0);
    assert!(!host.handle_input(p, 2, 0, &nan).is_accepted());
}
