//! Per-stage tick diagnostics and work counters in `/admin/zones/{id}` and `/metrics`: a zone
//! that sleeps in its `tick` shows the time in the `tick` stage and no other.

use std::time::Duration;

use serde_json::Value;
use zonekeep_core::{Ctx, InputRefusal, PlayerId, Zone, ZoneConfig, ZoneError, ZoneInit};
use zonekeep_server::examples::Dots;
use zonekeep_server::{Host, ServerConfig};

use crate::common::*;

/// How long [`Sleepy`] sleeps in each tick.
const NAP: Duration = Duration::from_millis(40);

/// A zone whose own tick takes [`NAP`]; everything else it does is cheap.
struct Sleepy;

impl Zone for Sleepy {
    type Input = ();
    fn create(_init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(Sleepy)
    }
    fn sanitize(&mut self, _p: PlayerId, _payload: &[u8]) -> Result<(), InputRefusal> {
        Ok(())
    }
    fn tick(&mut self, _ctx: &mut Ctx<'_>) {
        std::thread::sleep(NAP);
    }
}

async fn serve(config: ServerConfig) -> TestServer {
    let sleepy = ZoneConfig {
        tick_hz: 10,
        ..ZoneConfig::default()
    };
    let host = Host::builder()
        .config(config)
        .zone_with::<Sleepy>("sleepy", sleepy, Value::Null)
        .zone::<Dots>("dots")
        .build()
        .unwrap();
    TestServer::serve(host).await
}

fn ticket_of(sub: &str, zone: &str, kind: &str) -> String {
    let mut c = claims(sub, zone);
    c["kind"] = Value::from(kind);
    sign(&c)
}

async fn detail(server: &TestServer, zone: &str) -> Value {
    let (status, body) = http(
        server,
        "GET",
        &format!("/admin/zones/{zone}"),
        Some(ADMIN),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

fn stage<'a>(detail: &'a Value, name: &str) -> &'a Value {
    detail["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == name)
        .unwrap_or_else(|| panic!("no stage {name} in {detail}"))
}

#[tokio::test]
async fn a_slow_tick_shows_in_the_tick_stage_and_no_other() {
    let server = serve(base_config()).await;
    let (mut ws, _) = join(&server, "nap-1", &ticket_of("a", "nap-1", "sleepy")).await;
    send_input(&mut ws, 1, &[]).await;
    eventually("ten ticks timed", || async {
        stage(&detail(&server, "nap-1").await, "tick")["count"]
            .as_u64()
            .unwrap()
            >= 10
    })
    .await;
    let d = detail(&server, "nap-1").await;
    let nap_us = NAP.as_micros() as u64;
    let tick = stage(&d, "tick");
    assert!(tick["p50_us"].as_u64().unwrap() >= nap_us, "{tick}");
    // Every other stage of the tick and the patch is far below it: the time is where it went.
    for other in [
        "inbox", "sanitize", "inputs", "timers", "interest", "encode", "handoff",
    ] {
        let s = stage(&d, other);
        assert!(s["count"].as_u64().unwrap() > 0, "{other} was timed: {d}");
        assert!(
            s["p50_us"].as_u64().unwrap() < nap_us / 4,
            "{other} took the tick's time: {s}"
        );
    }
    // Without persistence nothing was saved or committed, and no subscriber has a budget.
    for idle in ["save", "facts", "budget"] {
        assert_eq!(stage(&d, idle)["count"], 0, "{idle}");
    }
    // Work counters: plain counts of what the zone did.
    let work = &d["work"];
    assert!(work["ticks"].as_u64().unwrap() >= 10, "{work}");
    assert!(work["patches"].as_u64().unwrap() >= 1, "{work}");
    assert!(work["frames"].as_u64().unwrap() >= 1, "{work}");
    assert!(work["delta_bytes"].as_u64().unwrap() > 0, "{work}");
    assert_eq!(work["inputs_accepted"], 1, "{work}");
    assert!(d["last_patch"]["frames"].as_u64().unwrap() >= 1, "{d}");

    // The same in /metrics, under the zone's label.
    let text = http(&server, "GET", "/metrics", None, None).await.1;
    let samples = parse_metrics(&text);
    let get = |k: &str| {
        samples
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("no {k}"))
    };
    let mean = |stage: &str| {
        get(&format!(
            "zonekeep_zone_stage_seconds_sum{{zone=\"nap-1\",stage=\"{stage}\"}}"
        )) / get(&format!(
            "zonekeep_zone_stage_seconds_count{{zone=\"nap-1\",stage=\"{stage}\"}}"
        ))
    };
    assert!(mean("tick") >= NAP.as_secs_f64(), "{}", mean("tick"));
    assert!(mean("encode") < NAP.as_secs_f64() / 4.0);
    assert!(get("zonekeep_zone_work_total{zone=\"nap-1\",counter=\"ticks\"}") >= 10.0);
    assert!(get("zonekeep_zone_work_total{zone=\"nap-1\",counter=\"frames\"}") >= 1.0);
    server.stop().await;
}

#[tokio::test]
async fn with_stage_timing_off_no_stage_is_timed_and_work_is_still_counted() {
    let server = serve(ServerConfig {
        stage_timing: false,
        ..base_config()
    })
    .await;
    let (_ws, _) = join(&server, "d-1", &ticket_of("a", "d-1", "dots")).await;
    eventually("ticks counted", || async {
        detail(&server, "d-1").await["work"]["ticks"]
            .as_u64()
            .unwrap()
            >= 5
    })
    .await;
    let d = detail(&server, "d-1").await;
    for s in d["stages"].as_array().unwrap() {
        assert_eq!(s["count"], 0, "{s}");
    }
    server.stop().await;
}
