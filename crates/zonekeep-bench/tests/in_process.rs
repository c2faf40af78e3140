//! `zonekeep bench` against an in-process host (small N): the report's counts are consistent with
//! what was asked and with what the host itself counted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use zonekeep_bench::arena::zone::{zone_config, ArenaZone, BUDGET_BYTES, KIND_BUDGET};
use zonekeep_bench::arena::{ArenaParams, Scenario, KIND};
use zonekeep_bench::http::Http;
use zonekeep_bench::prom::Scrape;
use zonekeep_bench::{run, Auth, BenchConfig, DecodeMode, Report, ServerSource, Workload};
use zonekeep_server::examples::Dots;
use zonekeep_server::{Host, Secret, ServerConfig};

const SECRET: &str = "in-process-bench-test-secret-0123456789";

/// A host on 127.0.0.1:0 with the arena kinds and `dots`; returns its ws URL and a stopper.
async fn start_host() -> (String, oneshot::Sender<()>) {
    start_host_with(ServerConfig::default()).await
}

async fn start_host_with(base: ServerConfig) -> (String, oneshot::Sender<()>) {
    let cfg = ServerConfig {
        ticket_secret: Some(Secret::new(SECRET)),
        max_connections_per_ip: 1000,
        sim_threads: 1,
        ..base
    };
    let host = Host::builder()
        .config(cfg)
        .zone_with::<ArenaZone>(KIND, zone_config(None), serde_json::Value::Null)
        .zone_with::<ArenaZone>(
            KIND_BUDGET,
            zone_config(Some(BUDGET_BYTES)),
            serde_json::json!({ "budget": BUDGET_BYTES }),
        )
        .zone::<Dots>("dots")
        .zone_with::<zonekeep_arena::Gallery>(
            "gallery",
            zonekeep_arena::gallery_config(),
            serde_json::Value::Null,
        )
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        host.serve(listener, async {
            let _ = rx.await;
        })
        .await
        .unwrap();
    });
    (format!("ws://{addr}"), tx)
}

fn config(url: &str, zone: &str, bots: u32, workload: Workload) -> BenchConfig {
    let mut c = BenchConfig::new(
        url,
        zone,
        bots,
        Auth::Secret {
            secret: SECRET.into(),
            kid: "default".into(),
        },
    );
    c.workload = workload;
    c.warmup = Duration::from_millis(300);
    c.duration = Duration::from_millis(1500);
    c.join_deadline = Duration::from_secs(10);
    c.server = ServerSource {
        pid: Some(std::process::id()),
        metrics_url: Some(zonekeep_bench::http::metrics_url_for(url)),
    };
    c
}

async fn host_bytes(url: &str) -> (f64, f64) {
    let text = Http::default()
        .get_text(&zonekeep_bench::http::metrics_url_for(url))
        .await
        .unwrap();
    let s = Scrape::parse(&text);
    (
        s.sum("zonekeep_bytes_out_total").unwrap(),
        s.sum("zonekeep_frames_out_total").unwrap(),
    )
}

/// Most frames a host can have queued for one connection when the bot closes (its outbox).
const OUTBOX_FRAMES: f64 = 64.0;

fn assert_consistent(r: &Report, bots: u32) {
    assert_eq!(
        r.counts.joined,
        u64::from(bots),
        "joined = requested: {:?}",
        r.counts
    );
    assert!(
        r.counts.join_failed.is_empty(),
        "{:?}",
        r.counts.join_failed
    );
    assert_eq!(r.counts.whole_window, u64::from(bots));
    assert_eq!(r.raw.clients.len(), bots as usize);
    assert!(r.counts.inputs_sent > 0);
    assert!(
        r.counts.inputs_acked > 0
            && r.counts.inputs_acked <= r.counts.inputs_sent + u64::from(bots) * 20
    );
    for c in &r.raw.clients {
        // ~18 inputs went out before the window ended; acks must have followed them.
        assert!(
            c.last_ack >= 10,
            "bot {} acks did not advance: {}",
            c.bot,
            c.last_ack
        );
        assert!(
            c.recv_patches_per_s > 5.0,
            "bot {} patches/s {}",
            c.bot,
            c.recv_patches_per_s
        );
        assert!(c.recv_wire_bytes_per_s > c.recv_payload_bytes_per_s);
    }
    assert!(r.rtt_ms.n > 0 && r.patch_interval_ms_at_client.n > 0);
    assert_eq!(r.server.source, "proc");
    assert!(r.server.cpu_s.is_some() && r.server.rss_peak_mb_vmhwm.is_some());
    assert!(r.server.ticks.unwrap() > 0.0);
    // The host's own view of the window: it accepted the inputs the bots sent in it (give or
    // take those in flight at the window's edges).
    let accepted = r.server.inputs_accepted.unwrap();
    let sent = r.counts.inputs_sent as f64;
    assert!(
        accepted > sent * 0.5 && accepted <= sent + f64::from(bots) * 10.0,
        "{accepted} vs {sent}"
    );
}

async fn assert_bytes_match_host(url: &str, r: &Report, bots: u32) {
    let (bytes, frames) = host_bytes(url).await;
    let got_bytes = r.counts.total_delta_bytes as f64;
    let got_frames = r.counts.total_deltas as f64;
    // Every Delta a bot counted was counted by the host when it queued it …
    assert!(
        got_bytes <= bytes && got_frames <= frames,
        "bots {got_bytes}/{got_frames} host {bytes}/{frames}"
    );
    // … and the host counted nothing else but frames still queued when a bot closed.
    let lost = frames - got_frames;
    assert!(
        lost <= f64::from(bots) * OUTBOX_FRAMES,
        "{lost} frames unaccounted"
    );
    let max_frame = r.counts.total_delta_bytes as f64 / got_frames.max(1.0) * 4.0 + 64.0;
    assert!(
        bytes - got_bytes <= lost * max_frame,
        "bytes {bytes} vs {got_bytes}, {lost} frames lost"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aiming_bot_hits_the_gallery_targets_where_it_draws_them() {
    let (url, stop) = start_host().await;
    let target = zonekeep_bench::AimTarget::Kind("target".into());
    let mut cfg = config(&url, "gallery-aim", 1, Workload::Aim(target));
    cfg.decode = DecodeMode::All;
    cfg.zone_kind = Some("gallery".into());
    cfg.rate = 10.0;
    cfg.duration = Duration::from_secs(2);
    let r = run(cfg).await.unwrap();
    let a = r.aim.expect("the aim workload counts shots");
    assert!(a.shots >= 10, "{a:?}");
    // Every shot is accounted for: judged, or sent too late in the window for its verdict.
    assert_eq!(a.hits + a.misses + a.unanswered, a.shots, "{a:?}");
    assert_eq!((a.refused, a.unjudged), (0, 0), "{a:?}");
    assert!(a.unanswered <= 2, "{a:?}");
    // Aimed at the centre as drawn, judged as drawn: a miss would be a disagreement between the
    // bot's replica and the host's rewind.
    assert!(a.hit_rate().unwrap() >= 0.95, "{a:?}");
    assert_eq!(r.params.workload, "aim");
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arena_a_probe_run_is_consistent_and_correct() {
    let (url, stop) = start_host().await;
    let params = ArenaParams {
        npcs: 100,
        ..ArenaParams::default()
    };
    let r = run(config(&url, "arena-a", 4, Workload::Arena(params)))
        .await
        .unwrap();
    assert_consistent(&r, 4);
    let p = r.probe.expect("bot 0 is the probe");
    assert_eq!(p.mismatches(), 0, "{p:?}");
    assert!(p.patches > 5 && p.npcs_checked >= p.patches * 100, "{p:?}");
    // Every client sees every NPC: at least 100 tiny updates per patch.
    assert!(
        r.per_client.recv_payload_bytes_per_s.min > 2000.0,
        "{:?}",
        r.per_client
    );
    assert_bytes_match_host(&url, &r, 4).await;
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arena_b_all_decode_run_validates() {
    let (url, stop) = start_host().await;
    let params = ArenaParams {
        npcs: 200,
        scenario: Scenario::Interest,
        ..ArenaParams::default()
    };
    let mut cfg = config(&url, "arena-b", 3, Workload::Arena(params));
    cfg.decode = DecodeMode::All;
    let r = run(cfg).await.unwrap();
    assert_consistent(&r, 3);
    assert_eq!(r.probe.unwrap().mismatches(), 0, "{:?}", r.probe);
    assert_eq!(r.params.scenario.as_deref(), Some("B"));
    assert_bytes_match_host(&url, &r, 3).await;
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_and_many_zones_are_counted() {
    let (url, stop) = start_host().await;
    let mut cfg = config(
        &url,
        "idle-{i}",
        12,
        Workload::Idle {
            ping_every: Duration::from_millis(200),
        },
    );
    cfg.zones.count = 4;
    cfg.zone_kind = Some("dots".into());
    cfg.decode = DecodeMode::None;
    let r = run(cfg).await.unwrap();
    assert_eq!(r.counts.joined, 12);
    assert_eq!(r.params.zone_count, 4);
    assert_eq!(r.counts.whole_window, 12);
    assert_eq!(r.counts.inputs_sent, 0);
    assert!(r.server.rss_per_connection_bytes.is_some());
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_joins_are_counted_by_kick_code() {
    let (url, stop) = start_host().await;
    let mut cfg = config(
        &url,
        "arena-x",
        3,
        Workload::Idle {
            ping_every: Duration::from_secs(1),
        },
    );
    cfg.auth = Auth::Secret {
        secret: "a-different-secret-that-is-long-enough-000".into(),
        kid: "default".into(),
    };
    cfg.duration = Duration::from_millis(200);
    cfg.warmup = Duration::ZERO;
    let r = run(cfg).await.unwrap();
    assert_eq!(r.counts.joined, 0);
    assert_eq!(
        r.counts.join_failed.get("BAD_TICKET"),
        Some(&3),
        "{:?}",
        r.counts.join_failed
    );
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crowded_budget_run_checks_what_is_sent_and_measures_staleness() {
    let (url, stop) = start_host().await;
    let params = ArenaParams {
        npcs: 300,
        scenario: Scenario::Interest,
        budget: Some(zonekeep_bench::arena::zone::BUDGET_BYTES),
        crowd_half: Some(53.0),
        ..ArenaParams::default()
    };
    let r = run(config(&url, "arena-crowd", 4, Workload::Arena(params)))
        .await
        .unwrap();
    assert_consistent(&r, 4);
    let p = r.probe.unwrap();
    assert_eq!(p.mismatches(), 0, "{p:?}");
    assert!(p.npcs_checked > 0, "{p:?}");
    // The budget caps every Delta (the baseline aside, which the window excludes); Pongs add
    // about one byte per patch to the payload rate.
    let per_patch = r.per_client.recv_payload_bytes_per_s.max / r.per_client.recv_patches_per_s.min;
    assert!(per_patch <= 1200.0 + 16.0, "{per_patch} bytes per patch");
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_netsim_delays_every_bot_both_ways() {
    let (url, stop) = start_host().await;
    let params = ArenaParams {
        npcs: 10,
        ..ArenaParams::default()
    };
    // Bot 0 decodes (zonekeep-client's NetSim), bot 1 does not (the light bot's own queue).
    let mut cfg = config(&url, "arena-net", 2, Workload::Arena(params));
    cfg.netsim.delay = Duration::from_millis(30);
    let r = run(cfg).await.unwrap();
    assert_consistent(&r, 2);
    assert_eq!(r.probe.unwrap().mismatches(), 0);
    // An input is acked no sooner than one simulated trip out and one back.
    assert!(r.rtt_ms.min >= 60.0, "{:?}", r.rtt_ms);
    assert_eq!(r.params.net, (30.0, 0.0, 0.0));
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_bots_reconnect_with_their_token() {
    // The host kicks a connection silent for 400 ms (IDLE_TIMEOUT invites a reconnect); idle bots
    // ping only every 10 s, so each is kicked and comes back as the same player.
    let (url, stop) = start_host_with(ServerConfig {
        idle_timeout_ms: 400,
        ..ServerConfig::default()
    })
    .await;
    let mut cfg = config(
        &url,
        "recon-1",
        2,
        Workload::Idle {
            ping_every: Duration::from_secs(10),
        },
    );
    cfg.zone_kind = Some("dots".into());
    // Bot 0 runs zonekeep-client's Connection, bot 1 the light bot: both reconnect paths.
    cfg.decode = DecodeMode::Probe;
    cfg.warmup = Duration::ZERO;
    let r = run(cfg).await.unwrap();
    assert_eq!(r.counts.joined, 2);
    assert!(
        r.counts.kicks.get("IDLE_TIMEOUT").copied().unwrap_or(0) >= 2,
        "{:?}",
        r.counts
    );
    assert!(r.counts.reconnects >= 2, "{:?}", r.counts);
    assert!(
        r.counts.resumes >= 2,
        "the reconnect token resumed the same player: {:?}",
        r.counts
    );
    assert_eq!(r.counts.fresh_joins, 0, "{:?}", r.counts);
    assert_eq!(r.counts.redirects, 0, "a lone host redirects nobody");
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tickets_can_come_from_a_join_endpoint() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (url, stop) = start_host().await;
    // A minimal app endpoint: GET /join?bot=B&zone=Z → {"zone": Z, "ticket": …} for bot-B.
    let key =
        zonekeep_ticket::TicketKey::new("default", SECRET.as_bytes().to_vec(), false).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let join_url = format!("http://{}/join", listener.local_addr().unwrap());
    let served = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let count = served.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let mut buf = vec![0u8; 4096];
            let n = sock.read(&mut buf).await.unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]).into_owned();
            let query = head
                .split_whitespace()
                .nth(1)
                .unwrap_or("")
                .split('?')
                .nth(1)
                .unwrap_or("")
                .to_owned();
            let arg = |k: &str| {
                query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix(&format!("{k}=")).map(str::to_owned))
                    .unwrap_or_default()
            };
            let (bot, zone) = (arg("bot"), arg("zone"));
            let mut claims = serde_json::Map::new();
            claims.insert("kind".into(), "dots".into());
            let req = zonekeep_ticket::MintRequest {
                sub: format!("app-user-{bot}"),
                zone: zone.clone(),
                role: zonekeep_core::Role::Player,
                ttl_secs: 60,
                params: None,
                claims,
            };
            let ticket = zonekeep_ticket::mint(&key, &req, zonekeep_ticket::unix_now()).unwrap();
            let body = serde_json::json!({ "zone": zone, "ticket": ticket }).to_string();
            let resp = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let _ = sock.write_all(resp.as_bytes()).await;
        }
    });
    let mut cfg = config(
        &url,
        "joined-1",
        3,
        Workload::Idle {
            ping_every: Duration::from_secs(1),
        },
    );
    cfg.auth = Auth::Join { url: join_url };
    cfg.decode = DecodeMode::None;
    cfg.duration = Duration::from_millis(300);
    cfg.warmup = Duration::ZERO;
    let r = run(cfg).await.unwrap();
    assert_eq!(r.counts.joined, 3, "{:?}", r.counts);
    assert_eq!(served.load(std::sync::atomic::Ordering::Relaxed), 3);
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generic_templates_drive_a_zone() {
    use zonekeep_bench::template::{InputFormat, Template};
    let (url, stop) = start_host().await;
    // `dots` takes two bytes [dx, dy]: random steps in -1..=1 from a raw-bytes template.
    let mut cfg = config(
        &url,
        "dots-1",
        3,
        Workload::Generic {
            templates: vec![Template::parse(r#"["$int:-1:1", "$int:-1:1"]"#).unwrap()],
            format: InputFormat::Bytes,
        },
    );
    cfg.zone_kind = Some("dots".into());
    cfg.rate = 20.0;
    cfg.decode = DecodeMode::All;
    let r = run(cfg).await.unwrap();
    assert_eq!(r.counts.joined, 3);
    assert!(
        r.per_client.sent_inputs_per_s.mean > 15.0,
        "{:?}",
        r.per_client
    );
    // The zone accepted them: acks advance to (nearly) every input sent.
    for c in &r.raw.clients {
        assert!(c.last_ack >= 20, "bot {} ack {}", c.bot, c.last_ack);
    }
    assert!(r.counts.inputs_acked > 0);
    let _ = stop.send(());
}
