//! Drives one counter zone for three seconds of simulated time with a manual
//! clock and prints what each `advance` reports.
//!
//! This is host-less on purpose: no network, no server, no real time. It shows
//! the zone lifecycle exactly as the server will drive it (join, inputs,
//! advance, report, drop/rejoin, leave, dispose), deterministically.

use std::sync::Arc;
use std::time::Duration;

use zonekeep_core::serde_json::json;
use zonekeep_core::{
    Claims, Clock, LeaveReason, ManualClock, Principal, Role, ZoneConfig, ZoneError, ZoneHost,
    ZoneInit,
};
use zonekeep_example_counter::Counter;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("counter example: host-less, simulated time, no network");
    let clock = ManualClock::new();
    let config = ZoneConfig {
        world_seed: 7,
        ..ZoneConfig::default()
    };
    let init = ZoneInit {
        zone_id: "counter-1".into(),
        kind: "counter".into(),
        params: json!({ "start": 0, "limit": 50 }),
    };
    let mut host: ZoneHost = ZoneHost::new::<Counter>(init, config, Arc::new(clock.clone()))
        .map_err(|e: ZoneError| format!("create: {e}"))?;

    let alice = host.handle_join(Principal::new("alice"), Claims::new(), Role::Player)?;
    let bob = host.handle_join(Principal::new("bob"), Claims::new(), Role::Player)?;
    let _watcher = host.handle_join(Principal::new("watcher"), Claims::new(), Role::Observer)?;
    match host.handle_join(Principal::new("mallory"), Claims::new(), Role::Player) {
        Ok(_) => println!("mallory joined (unexpected)"),
        Err(e) => println!("mallory refused: {e}"),
    }

    // The server would call advance about once per tick; here every 50 ms of
    // simulated time (1-2 ticks at 30 Hz), for 3 seconds.
    let mut seq = 0u32;
    for step in 1..=60u32 {
        seq += 1;
        host.handle_input(alice, seq, 0, &[1]); // alice pushes up
        if step % 3 == 0 {
            host.handle_input(bob, seq, 0, &[0xff]); // bob pushes down (-1)
        }
        if step == 20 {
            host.handle_drop(bob)?;
            println!("bob's connection dropped at tick {}", host.tick());
        }
        if step == 30 {
            host.handle_rejoin(bob)?;
            println!("bob rejoined at tick {}", host.tick());
        }
        clock.advance(Duration::from_millis(50));
        let report = host.advance(clock.now());
        // Nothing here replicates, so the events wait to be drained (a server would
        // take the frames instead, which carry them to the clients).
        for e in host.drain_events() {
            let value = e
                .payload
                .get(..8)
                .and_then(|b| b.try_into().ok())
                .map(i64::from_le_bytes);
            println!("tick {:>3}: announce value={value:?}", e.tick);
        }
        if step % 20 == 0 {
            println!(
                "t={:?} tick={} ran={} dropped={} inputs={:?} hash={:?}",
                clock.now(),
                report.tick,
                report.ticks_run,
                report.ticks_dropped,
                report.inputs,
                host.state_hash(),
            );
        }
    }

    host.handle_leave(bob, LeaveReason::Left)?;
    let report = host.advance(clock.now());
    println!("left: {:?}", report.left);
    println!(
        "final: tick={} value={:?} pushes={:?} alice acked seq {:?}",
        host.tick(),
        host.zone::<Counter>().map(|c| c.value),
        host.zone::<Counter>().map(|c| &c.pushes),
        host.last_processed_seq(alice)
    );
    host.dispose();
    Ok(())
}
