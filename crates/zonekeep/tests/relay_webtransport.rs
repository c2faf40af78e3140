//! WebTransport clients at a relay (PROTOCOL.md §1.1): real processes on loopback, a host in dev
//! mode (WebTransport on) and a relay serving WebTransport with a development certificate. A
//! client over WebTransport through the relay is admitted by the host as itself, gets the States
//! a direct WebTransport client gets (in datagrams), and its inputs move its entity; a ticket the
//! host does not accept is refused through the relay too; a killed relay's WebTransport clients
//! resume at the host; a client that breaks the rules is kicked with a typed code while the
//! others play on; a relay shutting down sends them (and its WebSocket clients) to resume with
//! ZONE_MOVED; the relay's client cap counts both transports; its endpoint validates addresses
//! and bounds handshakes as a host's does; datagrams alone keep a session from the relay's idle
//! timeout, and silence ends it with IDLE_TIMEOUT.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::json;
use support::quic_prober::{is_retry, Prober};
use support::raw_wt::RawSession;
use support::relay::{Relay, RELAY_TOKEN};
use support::view::View;
use support::{Server, StoreSpec};
use zonekeep_client::connection::webtransport::discover;
use zonekeep_client::{connect, ClientError, ConnectOptions, Event, Transport};
use zonekeep_protocol::messages::{tag, ClientMessage, Inputs, KickCode, Ping, ServerMessage};
use zonekeep_protocol::wire::put_varint;

const KIND: &str = "arena-workload";

/// A host in dev mode (WebTransport on) that takes relays, on a SQLite store in `dir`.
async fn origin(dir: &Path) -> Server {
    let store = StoreSpec::Sqlite(dir.join("zonekeep.db"));
    let args = [
        "--dev",
        "--relay-token",
        RELAY_TOKEN,
        "--admin-token",
        support::ADMIN_TOKEN,
    ];
    Server::start(&store, &args, &dir.join("host.log")).await
}

/// A relay of `host` serving WebTransport with a development certificate, with `extra` flags.
fn relay(host: &Server, dir: &Path, extra: &[&str]) -> Relay {
    let mut flags = vec!["--dev"];
    flags.extend_from_slice(extra);
    Relay::start(&host.addr, RELAY_TOKEN, &dir.join("relay.log"), &flags)
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A ticket for `sub` to the arena workload zone `zone` (few NPCs, all of them in view),
/// expiring at `exp`.
fn ticket_until(sub: &str, zone: &str, exp: u64) -> String {
    support::sign(&json!({
        "sub": sub, "zone": zone, "kind": KIND, "exp": exp,
        "params": {"npcs": 30},
        "jti": format!("relay-wt-{sub}-{}", support::unique_run()),
    }))
}

fn ticket(sub: &str, zone: &str) -> String {
    ticket_until(sub, zone, now() + 120)
}

/// Options for a WebTransport connection with `ticket`.
fn over_webtransport(ticket: String) -> ConnectOptions {
    let mut opts = ConnectOptions::new(ticket);
    opts.transport = Transport::WebTransport;
    opts
}

/// An arena move of (dx, dy).
fn walk(dx: f64, dy: f64) -> Vec<u8> {
    let mut payload = dx.to_le_bytes().to_vec();
    payload.extend_from_slice(&dy.to_le_bytes());
    payload
}

/// The transport of each participant of `zone`, by principal, as the host's admin API lists them.
async fn transports(host: &Server, zone: &str) -> BTreeMap<String, String> {
    let (_, detail) = host
        .admin_request("GET", &format!("/admin/zones/{zone}"), None)
        .await;
    detail["participants"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| {
            Some((
                p["principal"].as_str()?.to_owned(),
                p["transport"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webtransport_client_through_a_relay_is_served_as_a_direct_one() {
    let dir = tempfile::tempdir().unwrap();
    let host = origin(dir.path()).await;
    let relay = relay(&host, dir.path(), &[]);
    let zone = "relay-wt-1";
    let (mut direct, dw) = connect(
        &format!("ws://{}/zones/{zone}", host.addr),
        over_webtransport(ticket("dee", zone)),
    )
    .await
    .unwrap();
    let (mut relayed, rw) = connect(
        &format!("ws://{}/zones/{zone}", relay.addr),
        over_webtransport(ticket("ray", zone)),
    )
    .await
    .unwrap();
    // Over WebTransport, at the relay's own endpoint (it was not redirected to the host's).
    assert_eq!(relayed.transport(), Transport::WebTransport);
    assert_eq!(relayed.counters().redirects, 0);
    assert!(rw.version >= 6, "a WebTransport session: {}", rw.version);
    // Admitted by the host as itself, its frames built by the relay.
    assert_eq!(rw.zone_id, zone);
    assert_ne!(rw.player_id, dw.player_id);
    assert_eq!(rw.schema, dw.schema);
    assert_eq!(
        transports(&host, zone).await,
        BTreeMap::from([
            ("dee".to_owned(), "webtransport".to_owned()),
            ("ray".to_owned(), "relay".to_owned())
        ])
    );
    // The relayed player walks; both clients watch.
    let (mut dv, mut rv) = (View::default(), View::default());
    for _ in 0..10 {
        relayed.send_input(&walk(3.0, 1.0)).unwrap();
        tokio::join!(
            rv.read_for(&mut relayed, Duration::from_millis(60)),
            dv.read_for(&mut direct, Duration::from_millis(60))
        );
    }
    tokio::join!(
        rv.read_for(&mut relayed, Duration::from_millis(800)),
        dv.read_for(&mut direct, Duration::from_millis(800))
    );
    // Its inputs reached the zone: the acknowledgement it is shown rises to the last one.
    assert_eq!(rv.acks.last(), Some(&10), "{:?}", rv.acks);
    assert!(rv.acks.windows(2).all(|w| w[0] <= w[1]), "{:?}", rv.acks);
    assert!(rv.acks.iter().any(|a| (1..10).contains(a)), "{:?}", rv.acks);
    // At every tick both clients were shown, they hold the same world, entity for entity.
    let common: Vec<u64> = rv
        .seen
        .keys()
        .filter(|t| dv.seen.contains_key(t))
        .copied()
        .collect();
    assert!(common.len() > 10, "only {} ticks in common", common.len());
    for t in &common {
        assert_eq!(rv.seen[t], dv.seen[t], "the world at tick {t}");
    }
    // The relayed player's own entity moved, as the direct client sees it too.
    let me = rv.control.expect("the relayed player controls an entity");
    let (first, last) = (common[0], common[common.len() - 1]);
    let at = |t: u64| dv.seen[&t].get(&me).map(|e| (e.1, e.2));
    assert!(
        at(first).is_some() && at(first) != at(last),
        "{:?}",
        (at(first), at(last))
    );
    // Nothing arrived without its base on loopback: every State applied.
    let (rc, dc) = (relayed.counters(), direct.counters());
    assert_eq!(rc.states_without_base, 0);
    // Its States build on what it acknowledged, as the host's do: no larger than the direct
    // client's (a State against nothing would carry every entity whole).
    assert!(rc.deltas > 10 && dc.deltas > 10, "{rc:?} {dc:?}");
    assert!(
        rc.delta_bytes * dc.deltas * 2 <= dc.delta_bytes * rc.deltas * 3,
        "relayed {} bytes in {} States, direct {} in {}",
        rc.delta_bytes,
        rc.deltas,
        dc.delta_bytes,
        dc.deltas
    );
    // What each client was sent per State (BENCHMARKS.md, "Relays"): the relay builds the same
    // frames against acknowledged States as the host.
    println!(
        "bytes per State: relayed {:.1} over {} States, direct {:.1} over {}",
        rc.delta_bytes as f64 / rc.deltas.max(1) as f64,
        rc.deltas,
        dc.delta_bytes as f64 / dc.deltas.max(1) as f64,
        dc.deltas
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_over_webtransport_cannot_forge_who_its_clients_are() {
    let dir = tempfile::tempdir().unwrap();
    let host = origin(dir.path()).await;
    let relay = relay(&host, dir.path(), &[]);
    let zone = "relay-wt-2";
    let url = format!("ws://{}/zones/{zone}", relay.addr);
    // Signed with another secret: a principal the host's key does not vouch for.
    let forged = zonekeep_server::ticket::sign_parts(
        b"a-secret-the-host-does-not-know-0123456789",
        &json!({"alg": "HS256", "kid": "default"}),
        &json!({"sub": "admin", "zone": zone, "kind": KIND, "exp": now() + 60, "jti": "f-1"}),
    );
    let refused = connect(&url, over_webtransport(forged)).await.err();
    assert!(
        matches!(&refused, Some(ClientError::Kicked(k)) if k.code == KickCode::BAD_TICKET),
        "{refused:?}"
    );
    // An expired one is refused too.
    let expired = ticket_until("late", zone, now() - 3600);
    let refused = connect(&url, over_webtransport(expired)).await.err();
    assert!(
        matches!(&refused, Some(ClientError::Kicked(k)) if k.code == KickCode::TICKET_EXPIRED),
        "{refused:?}"
    );
    // A Hello of no version a WebTransport session speaks is refused as a host refuses it.
    let mut old = RawSession::hello_of(&relay.addr, zone, ticket("old", zone), vec![5]).await;
    let (kick, code) = tokio::time::timeout(Duration::from_secs(10), old.kicked())
        .await
        .expect("the session ends");
    assert_eq!(kick, Some(KickCode::VERSION_MISMATCH));
    assert_eq!(code, 4000 + u64::from(KickCode::VERSION_MISMATCH.0));
    // A good one is admitted as the principal it names, and no other.
    let (_c, _) = connect(&url, over_webtransport(ticket("bob", zone)))
        .await
        .unwrap();
    assert_eq!(
        transports(&host, zone).await,
        BTreeMap::from([("bob".to_owned(), "relay".to_owned())])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webtransport_clients_of_a_killed_relay_resume_at_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let host = origin(dir.path()).await;
    let mut relay = relay(&host, dir.path(), &[]);
    let zone = "relay-wt-3";
    let (mut c, w) = connect(
        &format!("ws://{}/zones/{zone}", relay.addr),
        over_webtransport(ticket("cy", zone)),
    )
    .await
    .unwrap();
    let mut view = View::default();
    c.send_input(&walk(1.0, 0.0)).unwrap();
    view.read_for(&mut c, Duration::from_millis(500)).await;
    assert!(!view.seen.is_empty());
    // The Welcome names where the zone may be entered: its host.
    assert!(
        w.entries.iter().any(|e| e.contains(host.addr.as_str())),
        "{:?}",
        w.entries
    );
    relay.kill();
    // The relay is gone: the client notices, its entry URL (the relay) does not answer, and it
    // resumes through the entry URL its Welcome listed, with its reconnect token, over
    // WebTransport at the host.
    let (again, resumed) = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            match c.recv().await {
                Some(Event::Welcome { welcome, resumed }) => return (welcome, resumed),
                Some(Event::Closed(r)) => panic!("closed: {r:?}"),
                None => panic!("the connection ended"),
                Some(_) => {}
            }
        }
    })
    .await
    .expect("the client resumes");
    // The same participant, not a fresh join; its frames come from the host now.
    assert!(resumed);
    assert_eq!(again.player_id, w.player_id);
    let counters = c.counters();
    assert_eq!((counters.resumes, counters.fresh_joins), (1, 1));
    assert_eq!(counters.entry_fallbacks, 1);
    assert_eq!(c.transport(), Transport::WebTransport);
    assert_eq!(
        transports(&host, zone).await,
        BTreeMap::from([("cy".to_owned(), "webtransport".to_owned())])
    );
    // It plays on: its next input is acknowledged by the host.
    c.send_input(&walk(1.0, 0.0)).unwrap();
    let acked = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match c.recv().await {
                Some(Event::Delta(d)) if d.ack >= 2 => return d.ack,
                Some(Event::Closed(r)) => panic!("closed: {r:?}"),
                None => panic!("the connection ended"),
                _ => {}
            }
        }
    })
    .await
    .expect("the input is acknowledged");
    assert_eq!(acked, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_webtransport_client_is_kicked_and_the_relay_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    let host = origin(dir.path()).await;
    let relay = relay(&host, dir.path(), &[]);
    let zone = "relay-wt-4";
    let (mut good, _) = connect(
        &format!("ws://{}/zones/{zone}", relay.addr),
        over_webtransport(ticket("good", zone)),
    )
    .await
    .unwrap();
    let mut view = View::default();
    view.read_for(&mut good, Duration::from_millis(300)).await;

    // One that sends a datagram that is no Inputs, once it is served.
    let mut garbage = RawSession::hello(&relay.addr, zone, ticket("junk", zone)).await;
    assert!(matches!(
        garbage.next().await,
        Some(ServerMessage::Welcome(_))
    ));
    // Its States come as datagrams.
    let d = tokio::time::timeout(Duration::from_secs(10), garbage.conn.receive_datagram())
        .await
        .expect("a State datagram")
        .unwrap();
    assert_eq!(d.payload().first(), Some(&tag::STATE));
    garbage
        .conn
        .send_datagram(vec![0xff, 0x00, 0x13, 0x37])
        .unwrap();
    let (kick, code) = tokio::time::timeout(Duration::from_secs(10), garbage.kicked())
        .await
        .expect("the session ends");
    assert_eq!(kick, Some(KickCode::PROTOCOL_ERROR));
    assert_eq!(code, 4000 + u64::from(KickCode::PROTOCOL_ERROR.0));

    // One that announces a control-stream message over the limit.
    let mut oversized = RawSession::hello(&relay.addr, zone, ticket("big", zone)).await;
    assert!(matches!(
        oversized.next().await,
        Some(ServerMessage::Welcome(_))
    ));
    let mut huge = Vec::new();
    put_varint(
        &mut huge,
        (zonekeep_protocol::limits::MAX_CLIENT_MESSAGE + 1) as u64,
    );
    huge.extend_from_slice(&[0u8; 64]);
    oversized.send.write_all(&huge).await.unwrap();
    let (kick, code) = tokio::time::timeout(Duration::from_secs(10), oversized.kicked())
        .await
        .expect("the session ends");
    assert_eq!(kick, Some(KickCode::MESSAGE_TOO_LARGE));
    assert_eq!(code, 4000 + u64::from(KickCode::MESSAGE_TOO_LARGE.0));

    // The well-behaved client played on throughout, and still does.
    let before = view.seen.keys().last().copied().unwrap_or(0);
    view.read_for(&mut good, Duration::from_millis(500)).await;
    let after = view.seen.keys().last().copied().unwrap_or(0);
    assert!(after > before + 5, "{before} then {after}");
    assert_eq!(
        transports(&host, zone).await,
        BTreeMap::from([("good".to_owned(), "relay".to_owned())])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relays_client_cap_counts_both_transports() {
    let dir = tempfile::tempdir().unwrap();
    let host = origin(dir.path()).await;
    let relay = relay(&host, dir.path(), &["--max-clients", "1"]);
    let zone = "relay-wt-5";
    let url = format!("ws://{}/zones/{zone}", relay.addr);
    // A WebSocket client takes the one slot.
    let (_ws, _) = connect(&url, ConnectOptions::new(ticket("one", zone)))
        .await
        .unwrap();
    // A WebTransport client is refused, and told why.
    let refused = connect(&url, over_webtransport(ticket("two", zone)))
        .await
        .err();
    assert!(
        matches!(&refused, Some(ClientError::Kicked(k)) if k.code == KickCode::TOO_MANY_CONNECTIONS),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_shutting_down_sends_its_clients_of_both_transports_to_resume_at_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let host = origin(dir.path()).await;
    let relay = relay(&host, dir.path(), &[]);
    let zone = "relay-wt-7";
    let url = format!("ws://{}/zones/{zone}", relay.addr);
    let (mut dora, dora_w) = connect(&url, over_webtransport(ticket("dora", zone)))
        .await
        .unwrap();
    let (mut eli, eli_w) = connect(&url, ConnectOptions::new(ticket("eli", zone)))
        .await
        .unwrap();
    let mut view = View::default();
    view.read_for(&mut dora, Duration::from_millis(300)).await;
    relay.terminate();
    // Each is told why (ZONE_MOVED: its zone thread queues that Kick before the relay's I/O
    // stops, which would say SHUTTING_DOWN) and resumes at once at the host.
    for (c, w) in [(&mut dora, &dora_w), (&mut eli, &eli_w)] {
        let (kick, again, resumed) = tokio::time::timeout(Duration::from_secs(30), async {
            let mut kick = None;
            loop {
                match c.recv().await {
                    Some(Event::Kick(k)) => kick = Some(k.code),
                    Some(Event::Welcome { welcome, resumed }) => return (kick, welcome, resumed),
                    Some(Event::Closed(r)) => panic!("closed: {r:?}"),
                    None => panic!("the connection ended"),
                    Some(_) => {}
                }
            }
        })
        .await
        .expect("the client resumes");
        assert_eq!(kick, Some(KickCode::ZONE_MOVED));
        assert!(resumed);
        assert_eq!(again.player_id, w.player_id);
    }
    assert_eq!(
        transports(&host, zone).await,
        BTreeMap::from([
            ("dora".to_owned(), "webtransport".to_owned()),
            ("eli".to_owned(), "websocket".to_owned())
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datagrams_alone_keep_a_relayed_session_from_its_idle_timeout_and_silence_ends_it() {
    let dir = tempfile::tempdir().unwrap();
    let host = origin(dir.path()).await;
    let relay = relay(&host, dir.path(), &["--idle-timeout-secs", "1"]);
    let zone = "relay-wt-idle";
    let mut s = RawSession::hello(&relay.addr, zone, ticket("idler", zone)).await;
    assert!(matches!(s.next().await, Some(ServerMessage::Welcome(_))));
    // Only acknowledgements, ten a second, for three idle timeouts: the control stream stays
    // silent, and the session must still be there.
    let ack = ClientMessage::Inputs(Inputs {
        state_ack: 0,
        inputs: vec![],
    })
    .to_bytes()
    .unwrap();
    let mut every = tokio::time::interval(Duration::from_millis(100));
    for _ in 0..30 {
        every.tick().await;
        s.conn.send_datagram(&ack).unwrap();
    }
    let ping = ClientMessage::Ping(Ping { client_time: 7 });
    s.write(&ping.to_bytes().unwrap()).await;
    let pong = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match s.next().await {
                Some(ServerMessage::Pong(p)) => break p.client_time,
                Some(ServerMessage::Kick(k)) => panic!("kicked while sending datagrams: {k:?}"),
                Some(_) => continue,
                None => panic!("the session ended while sending datagrams"),
            }
        }
    })
    .await
    .expect("the Pong of a session datagrams kept");
    assert_eq!(pong, 7);
    // Silence on both paths: the idle timeout ends it, with its Kick.
    let (kick, code) = tokio::time::timeout(Duration::from_secs(10), s.kicked())
        .await
        .expect("the idle session ends");
    assert_eq!(kick, Some(KickCode::IDLE_TIMEOUT));
    assert_eq!(code, 4000 + u64::from(KickCode::IDLE_TIMEOUT.0));
}

/// A GET's body from `addr` (`host:port`).
async fn http_get(addr: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).await.unwrap();
    body.split_once("\r\n\r\n").unwrap().1.to_owned()
}

/// A metric of the relay at `addr` (0 when it has none yet).
async fn relay_metric(addr: &str, name: &str) -> f64 {
    http_get(addr, "/metrics")
        .await
        .lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relays_endpoint_validates_addresses_and_bounds_handshakes_as_a_hosts_does() {
    let dir = tempfile::tempdir().unwrap();
    let host = origin(dir.path()).await;
    let relay = relay(&host, dir.path(), &["--webtransport-max-handshakes", "2"]);
    // Published as a host publishes it: an https URL and the development certificate's hash.
    let found = discover(&format!("ws://{}/zones/x", relay.addr))
        .await
        .unwrap();
    assert!(found.certificate_hash.is_some());
    let port: u16 = found.url.rsplit(':').next().unwrap().parse().unwrap();
    let udp = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    // An Initial from an address that has not proved it receives gets a Retry, and nothing else.
    let mut prober = Prober::new(udp).await;
    prober.initial().await;
    let reply = prober
        .receive(Duration::from_secs(5))
        .await
        .expect("an answer");
    assert!(is_retry(&reply));
    // Five that prove their address and then stall: two handshakes are held, the rest refused.
    for _ in 0..5 {
        prober.initial().await;
        let retry = prober
            .receive_retry(Duration::from_secs(5))
            .await
            .expect("an unvalidated Initial gets a Retry");
        prober.answer(retry).await;
    }
    let refused = "zonekeep_connections_refused_total{reason=\"handshakes\"}";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while relay_metric(&relay.addr, refused).await < 3.0 {
        assert!(tokio::time::Instant::now() < deadline, "handshakes refused");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        relay_metric(&relay.addr, "zonekeep_webtransport_handshakes").await,
        2.0
    );
    assert_eq!(
        relay_metric(&relay.addr, "zonekeep_webtransport_retries_total").await,
        6.0
    );
    // They hold no client slot: a WebSocket client joins meanwhile.
    let url = format!("ws://{}/zones/relay-wt-6", relay.addr);
    connect(&url, ConnectOptions::new(ticket("ws", "relay-wt-6")))
        .await
        .unwrap();
}

/// What one relay hop adds to a State's way over WebTransport (BENCHMARKS.md, "Relays"): a
/// WebTransport client at the host and one through a relay, on one machine, note when each tick's
/// State is shown to them; the difference (negative when the relayed one was first) is the hop.
/// Run: `cargo test --release -p zonekeep --test relay_webtransport -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run it on purpose, on a quiet machine"]
async fn bench_the_latency_one_relay_hop_adds_over_webtransport() {
    let dir = tempfile::tempdir().unwrap();
    let host = origin(dir.path()).await;
    let relay = relay(&host, dir.path(), &[]);
    let zone = "relay-wt-hop";
    let (direct, _) = connect(
        &format!("ws://{}/zones/{zone}", host.addr),
        over_webtransport(ticket("at-host", zone)),
    )
    .await
    .unwrap();
    let (relayed, _) = connect(
        &format!("ws://{}/zones/{zone}", relay.addr),
        over_webtransport(ticket("at-relay", zone)),
    )
    .await
    .unwrap();
    let window = Duration::from_secs(20);
    let arrivals = |mut c: zonekeep_client::Connection| async move {
        let mut at = BTreeMap::new();
        let end = tokio::time::Instant::now() + window;
        while let Ok(Some(ev)) = tokio::time::timeout_at(end, c.recv()).await {
            if let Event::Delta(p) = ev {
                at.entry(p.tick).or_insert_with(std::time::Instant::now);
            }
        }
        (at, c.counters())
    };
    let (d, r) = tokio::join!(
        tokio::spawn(arrivals(direct)),
        tokio::spawn(arrivals(relayed))
    );
    let ((d, dc), (r, rc)) = (d.unwrap(), r.unwrap());
    let mut added: Vec<f64> = r
        .iter()
        .filter_map(|(t, ra)| {
            // Signed: the host's own WebTransport session may be the later one.
            let da = *d.get(t)?;
            let ms = |x: Duration| x.as_secs_f64() * 1000.0;
            Some(if *ra >= da {
                ms(*ra - da)
            } else {
                -ms(da - *ra)
            })
        })
        .collect();
    added.sort_by(f64::total_cmp);
    assert!(added.len() > 100, "{} ticks in common", added.len());
    let q = |p: f64| added[((added.len() - 1) as f64 * p) as usize];
    println!(
        "one relay hop adds over WebTransport, over {} States: p50 {:.3} ms, p90 {:.3} ms, \
         p99 {:.3} ms, max {:.3} ms; bytes per State relayed {:.1}, direct {:.1}",
        added.len(),
        q(0.5),
        q(0.9),
        q(0.99),
        added[added.len() - 1],
        rc.delta_bytes as f64 / rc.deltas.max(1) as f64,
        dc.delta_bytes as f64 / dc.deltas.max(1) as f64,
    );
}
