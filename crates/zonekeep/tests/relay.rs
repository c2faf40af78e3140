//! Relays (`zonekeep relay`): real processes on loopback, a host and its relays. A client
//! through a relay is admitted, replicated and heard as a direct one; a relay without the
//! relay credential gets nothing, and cannot make the host take a principal its client's
//! ticket does not prove; a killed relay's clients resume at the host; a client that stops
//! reading does not hold back the others.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../../zonekeep-wasm/tests/support/guest_build.rs"]
mod guest_build;
mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use support::relay::{Relay, RELAY_TOKEN};
use support::{Server, StoreSpec};
use tokio_tungstenite::tungstenite::Message;
use zonekeep_protocol::messages::{
    tag, ClientMessage, Hello, Input, KickCode, ServerMessage, Welcome,
};
use zonekeep_protocol::mirror::{Mirror, MirrorEntity};

const KIND: &str = "arena-workload";

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A host that takes relays, on a SQLite store in `dir`.
async fn origin(dir: &Path) -> Server {
    let store = StoreSpec::Sqlite(dir.join("zonekeep.db"));
    let args = [
        "--relay-token",
        RELAY_TOKEN,
        "--admin-token",
        support::ADMIN_TOKEN,
    ];
    Server::start(&store, &args, &dir.join("host.log")).await
}

/// A ticket for `sub` to the arena workload zone `zone` (few NPCs, all of them in view).
fn ticket(sub: &str, zone: &str) -> String {
    ticket_npcs(sub, zone, 30)
}

/// A ticket for `sub` to the arena workload zone `zone` of `npcs` NPCs (the zone's first
/// ticket decides).
fn ticket_npcs(sub: &str, zone: &str, npcs: u32) -> String {
    support::sign(&json!({
        "sub": sub, "zone": zone, "kind": KIND, "exp": now() + 120,
        "params": {"npcs": npcs},
        "jti": format!("relay-{sub}-{}", support::unique_run()),
    }))
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Opens a session at `addr` with `hello`.
async fn connect(addr: &str, zone: &str, hello: Hello) -> Ws {
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/zones/{zone}"))
        .await
        .unwrap();
    let bytes = ClientMessage::Hello(hello).to_bytes().unwrap();
    ws.send(Message::Binary(bytes.into())).await.unwrap();
    ws
}

fn hello(ticket: String) -> Hello {
    Hello {
        versions: vec![zonekeep_protocol::limits::PROTOCOL_VERSION],
        ticket,
        reconnect_token: vec![],
        content_version: String::new(),
        resume_from: None,
    }
}

/// The next server message; a Kick or a close is an error carrying the code.
async fn next(ws: &mut Ws) -> Result<Vec<u8>, Option<KickCode>> {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(20), ws.next())
            .await
            .expect("the server went silent");
        match m {
            Some(Ok(Message::Binary(b))) => {
                if b.first() == Some(&tag::KICK) {
                    if let Ok(ServerMessage::Kick(k)) = ServerMessage::decode(&b, None) {
                        return Err(Some(k.code));
                    }
                }
                return Ok(b.to_vec());
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            _ => return Err(None),
        }
    }
}

async fn welcome(ws: &mut Ws) -> Result<Welcome, Option<KickCode>> {
    let b = next(ws).await?;
    match ServerMessage::decode(&b, None) {
        Ok(ServerMessage::Welcome(w)) => Ok(w),
        other => panic!("expected a Welcome, got {other:?}"),
    }
}

/// A client: its Welcome, and its mirror of the world with a copy of it at every tick it applied.
struct Client {
    ws: Ws,
    welcome: Welcome,
    mirror: Mirror,
    seen: BTreeMap<u64, Vec<(u32, MirrorEntity)>>,
    seq: u32,
}

impl Client {
    async fn join(addr: &str, zone: &str, sub: &str) -> Client {
        Client::join_with(addr, zone, ticket(sub, zone)).await
    }

    async fn join_with(addr: &str, zone: &str, ticket: String) -> Client {
        let mut ws = connect(addr, zone, hello(ticket)).await;
        let welcome = welcome(&mut ws).await.expect("a Welcome");
        Client {
            ws,
            welcome,
            mirror: Mirror::new(),
            seen: BTreeMap::new(),
            seq: 0,
        }
    }

    /// Reads and applies what comes for `d`.
    async fn read_for(&mut self, d: Duration) {
        let end = tokio::time::Instant::now() + d;
        while let Ok(m) = tokio::time::timeout_at(end, self.ws.next()).await {
            let b = match m {
                Some(Ok(Message::Binary(b))) => b,
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                other => panic!("the session ended: {other:?}"),
            };
            if b.first() == Some(&tag::DELTA) {
                self.mirror
                    .decode_apply(&b, &self.welcome.schema)
                    .expect("every Delta applies");
                let at: Vec<(u32, MirrorEntity)> =
                    self.mirror.iter().map(|(id, e)| (id, e.clone())).collect();
                self.seen.insert(self.mirror.tick(), at);
            } else if b.first() == Some(&tag::KICK) {
                panic!("kicked: {:?}", ServerMessage::decode(&b, None));
            }
        }
    }

    /// Sends a move of (dx, dy).
    async fn walk(&mut self, dx: f64, dy: f64) {
        self.seq += 1;
        let mut payload = dx.to_le_bytes().to_vec();
        payload.extend_from_slice(&dy.to_le_bytes());
        let input = ClientMessage::Input(Input {
            seq: self.seq,
            view_tick: self.mirror.tick(),
            payload,
        });
        self.ws
            .send(Message::Binary(input.to_bytes().unwrap().into()))
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relayed_client_is_admitted_replicated_and_heard_as_a_direct_one() {
    let dir = tempfile::tempdir().unwrap();
    let host = origin(dir.path()).await;
    let relay = Relay::start(&host.addr, RELAY_TOKEN, &dir.path().join("relay.log"), &[]);
    let zone = "relay-1";
    let mut direct = Client::join(&host.addr, zone, "dee").await;
    let mut relayed = Client::join(&relay.addr, zone, "ray").await;
    // Admitted by the host, as itself: its own participant, named by its own ticket.
    assert_eq!(relayed.welcome.zone_id, zone);
    assert_ne!(relayed.welcome.player_id, direct.welcome.player_id);
    assert!(!relayed.welcome.reconnect_token.is_empty());
    assert_eq!(relayed.welcome.schema, direct.welcome.schema);
    let (_, detail) = host
        .admin_request("GET", &format!("/admin/zones/{zone}"), None)
        .await;
    let transports: BTreeMap<&str, &str> = detail["participants"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| Some((p["principal"].as_str()?, p["transport"].as_str()?)))
        .collect();
    assert_eq!(
        transports,
        BTreeMap::from([("dee", "websocket"), ("ray", "relay")]),
        "{detail}"
    );
    // The relayed player walks; both clients watch.
    for _ in 0..10 {
        relayed.walk(3.0, 1.0).await;
        tokio::join!(
            relayed.read_for(Duration::from_millis(60)),
            direct.read_for(Duration::from_millis(60))
        );
    }
    tokio::join!(
        relayed.read_for(Duration::from_millis(600)),
        direct.read_for(Duration::from_millis(600))
    );
    // Its inputs reached the zone: its frames acknowledge every one.
    assert_eq!(relayed.mirror.ack(), 10);
    // At every tick both clients applied, they hold the same world, entity for entity.
    let common: Vec<u64> = relayed
        .seen
        .keys()
        .filter(|t| direct.seen.contains_key(t))
        .copied()
        .collect();
    assert!(common.len() > 10, "only {} ticks in common", common.len());
    for t in &common {
        assert_eq!(relayed.seen[t], direct.seen[t], "the world at tick {t}");
    }
    // The relayed player's own entity moved, as the direct client sees it too.
    let last = common.last().unwrap();
    let first = common.first().unwrap();
    assert_ne!(direct.seen[first], direct.seen[last]);
    // The relay reports its clients (what placement reads).
    let status: serde_json::Value =
        serde_json::from_str(&reqwest_get(&format!("http://{}/relay/status", relay.addr)).await)
            .unwrap();
    assert_eq!(status["clients"], 1, "{status}");
    assert_eq!(host.metric("zonekeep_relay_links").await, 1.0);
}

/// A GET's body.
async fn reqwest_get(url: &str) -> String {
    let addr = url.trim_start_matches("http://");
    let (host, path) = addr.split_once('/').unwrap();
    let mut s = tokio::net::TcpStream::connect(host).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    s.write_all(
        format!("GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).await.unwrap();
    body.split_once("\r\n\r\n").unwrap().1.to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_cannot_forge_who_its_clients_are() {
    let dir = tempfile::tempdir().unwrap();
    let host = origin(dir.path()).await;
    let zone = "relay-2";
    // A relay without the relay credential gets no link: its clients are refused.
    let wrong = Relay::start(
        &host.addr,
        "not-the-relay-token-0123456789",
        &dir.path().join("wrong.log"),
        &[],
    );
    let mut ws = connect(&wrong.addr, zone, hello(ticket("ann", zone))).await;
    assert_eq!(
        welcome(&mut ws).await.err(),
        Some(Some(KickCode::INTERNAL_ERROR))
    );
    assert_eq!(
        host.metric("zonekeep_relay_refused_total{reason=\"wrong\"}")
            .await,
        1.0
    );
    // A relay with it forwards what its clients present; the host judges the ticket. One
    // signed with another secret (a principal the relay would like to claim) is refused.
    let relay = Relay::start(&host.addr, RELAY_TOKEN, &dir.path().join("relay.log"), &[]);
    let forged = zonekeep_server::ticket::sign_parts(
        b"a-secret-the-host-does-not-know-0123456789",
        &json!({"alg": "HS256", "kid": "default"}),
        &json!({"sub": "admin", "zone": zone, "kind": KIND, "exp": now() + 60, "jti": "f-1"}),
    );
    let mut ws = connect(&relay.addr, zone, hello(forged)).await;
    assert_eq!(
        welcome(&mut ws).await.err(),
        Some(Some(KickCode::BAD_TICKET))
    );
    // A ticket is spent once, whichever way it comes.
    let t = ticket("bob", zone);
    let mut first = connect(&relay.addr, zone, hello(t.clone())).await;
    welcome(&mut first).await.expect("admitted once");
    let mut again = connect(&host.addr, zone, hello(t)).await;
    assert_eq!(
        welcome(&mut again).await.err(),
        Some(Some(KickCode::TICKET_REPLAYED))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_of_a_killed_relay_resume_at_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let host = origin(dir.path()).await;
    let mut relay = Relay::start(&host.addr, RELAY_TOKEN, &dir.path().join("relay.log"), &[]);
    let zone = "relay-3";
    let mut c = Client::join(&relay.addr, zone, "cy").await;
    c.walk(1.0, 0.0).await;
    c.read_for(Duration::from_millis(500)).await;
    assert!(c.mirror.tick() > 0);
    let me = c.welcome.player_id;
    // The Welcome names where the zone may be entered: its host.
    assert!(
        c.welcome
            .entries
            .iter()
            .any(|e| e.contains(host.addr.as_str())),
        "{:?}",
        c.welcome.entries
    );
    relay.kill();
    // The relay's socket is gone: the client resumes through its entry URL, with its token.
    while let Ok(Some(Ok(Message::Binary(_)))) =
        tokio::time::timeout(Duration::from_secs(10), c.ws.next()).await
    {}
    let entry = c.welcome.entries[0].clone();
    let addr = entry
        .trim_start_matches("ws://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let mut resumed = Hello {
        reconnect_token: c.welcome.reconnect_token.clone(),
        resume_from: c.mirror.resume_from(),
        ..hello(ticket("cy", zone))
    };
    resumed.versions = vec![zonekeep_protocol::limits::PROTOCOL_VERSION];
    let mut ws = connect(&addr, zone, resumed).await;
    let w = welcome(&mut ws).await.expect("resumed");
    // The same participant, not a fresh join; its frames come from the host now.
    assert_eq!(w.player_id, me);
    let (_, detail) = host
        .admin_request("GET", &format!("/admin/zones/{zone}"), None)
        .await;
    let participants = detail["participants"].as_array().unwrap();
    assert_eq!(participants.len(), 1, "{detail}");
    assert_eq!(participants[0]["transport"], "websocket", "{detail}");
    let mut back = Client {
        ws,
        welcome: w,
        mirror: Mirror::new(),
        seen: BTreeMap::new(),
        seq: c.seq,
    };
    back.walk(1.0, 0.0).await;
    back.read_for(Duration::from_millis(500)).await;
    assert!(!back.mirror.is_empty(), "the host sends it the world");
    assert_eq!(back.mirror.ack(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_does_not_hold_back_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let host = origin(dir.path()).await;
    let relay = Relay::start(
        &host.addr,
        RELAY_TOKEN,
        &dir.path().join("relay.log"),
        &["--outbox-frames", "4", "--socket-send-buffer", "8192"],
    );
    let zone = "relay-4";
    // Hundreds of NPCs moving: a few kilobytes a patch.
    let mut reader = Client {
        ..Client::join_with(&relay.addr, zone, ticket_npcs("fast", zone, 400)).await
    };
    // This one never reads again, and its socket takes next to nothing: the relay's writes
    // to it stall within a second.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(2048).unwrap();
    let tcp = socket.connect(relay.addr.parse().unwrap()).await.unwrap();
    let (mut stalled, _) =
        tokio_tungstenite::client_async(format!("ws://{}/zones/{zone}", relay.addr), tcp)
            .await
            .unwrap();
    let bytes = ClientMessage::Hello(hello(ticket("slow", zone)))
        .to_bytes()
        .unwrap();
    stalled.send(Message::Binary(bytes.into())).await.unwrap();
    reader.read_for(Duration::from_millis(300)).await;
    let from = reader.mirror.tick();
    reader.read_for(Duration::from_secs(3)).await;
    let to = reader.mirror.tick();
    // The zone patches every tick (its NPCs always move): the reader got a frame for every one
    // of them while the other client read nothing.
    let got = reader.seen.range(from..=to).count() as u64;
    assert!(to > from + 20, "{from}..{to}");
    assert_eq!(got, to - from + 1, "frames missed between {from} and {to}");
    // The stalled client was let go (SLOW_CONSUMER, or its writes timed out): what it reads now
    // is what was already on its way, then the end.
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(Ok(m)) = stalled.next().await {
            if matches!(m, Message::Close(_)) {
                break;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the stalled client is still served");
    assert_eq!(
        reader.welcome.zone_id, zone,
        "the reader was never disturbed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_places_new_players_on_a_relay_with_room() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().join("zonekeep.db"));
    let args = ["--relay-token", RELAY_TOKEN, "--relay-placement"];
    let host = Server::start(&store, &args, &dir.path().join("host.log")).await;
    let relay = Relay::start(
        &host.addr,
        RELAY_TOKEN,
        &dir.path().join("relay.log"),
        &["--max-clients", "2"],
    );
    let zone = "relay-5";
    // Before any relay serves the zone, the host serves new players itself.
    let mut first = Client::join(&host.addr, zone, "one").await;
    assert!(first.welcome.player_id > 0);
    // A player through the relay: the zone is now one the relay serves.
    let mut second = Client::join(&relay.addr, zone, "two").await;
    second.read_for(Duration::from_millis(200)).await;
    // A new player at the host is sent to the relay, its ticket unspent: it joins there.
    let t = ticket("three", zone);
    let mut ws = connect(&host.addr, zone, hello(t.clone())).await;
    let b = next(&mut ws).await.expect("a Redirect");
    let Ok(ServerMessage::Redirect(r)) = ServerMessage::decode(&b, None) else {
        panic!("expected a Redirect");
    };
    assert_eq!(r.url, format!("ws://{}/zones/{zone}", relay.addr));
    let mut third = connect(&relay.addr, zone, hello(t)).await;
    welcome(&mut third)
        .await
        .expect("admitted through the relay");
    // The relay is full (two clients): the next new player stays at the host.
    let mut ws = connect(&host.addr, zone, hello(ticket("four", zone))).await;
    welcome(&mut ws).await.expect("admitted at the host");
    // One that comes to the full relay anyway is refused there, and the refusal is counted.
    let mut ws = connect(&relay.addr, zone, hello(ticket("five", zone))).await;
    assert_eq!(
        welcome(&mut ws).await.err(),
        Some(Some(KickCode::TOO_MANY_CONNECTIONS))
    );
    let metrics = reqwest_get(&format!("http://{}/metrics", relay.addr)).await;
    let refused = metrics.lines().find_map(|l| {
        l.strip_prefix("zonekeep_connections_refused_total{reason=\"max_clients\"}")?
            .trim()
            .parse::<f64>()
            .ok()
    });
    assert_eq!(refused, Some(1.0), "the relay counts it: {metrics}");
    // The player already at the host plays on there.
    first.read_for(Duration::from_millis(100)).await;
    assert!(first.mirror.tick() > 0);
}

/// What one relay hop adds to a frame's way (BENCHMARKS.md, "Relays"): a client at the host and
/// one through a relay, on one machine, note when each frame of a tick arrives; the difference
/// is the hop. Run: `cargo test --release -p zonekeep --test relay -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run it on purpose, on a quiet machine"]
async fn bench_the_latency_one_relay_hop_adds() {
    let dir = tempfile::tempdir().unwrap();
    let host = origin(dir.path()).await;
    let relay = Relay::start(&host.addr, RELAY_TOKEN, &dir.path().join("relay.log"), &[]);
    let zone = "relay-hop";
    let direct = Client::join(&host.addr, zone, "at-host").await;
    let relayed = Client::join(&relay.addr, zone, "at-relay").await;
    let window = Duration::from_secs(20);
    let arrivals = |mut c: Client| async move {
        let mut at = BTreeMap::new();
        let end = tokio::time::Instant::now() + window;
        while let Ok(Some(Ok(m))) = tokio::time::timeout_at(end, c.ws.next()).await {
            let now = std::time::Instant::now();
            if let Message::Binary(b) = m {
                if b.first() == Some(&tag::DELTA) {
                    c.mirror.decode_apply(&b, &c.welcome.schema).unwrap();
                    at.insert(c.mirror.tick(), now);
                }
            }
        }
        at
    };
    let (d, r) = tokio::join!(
        tokio::spawn(arrivals(direct)),
        tokio::spawn(arrivals(relayed))
    );
    let (d, r) = (d.unwrap(), r.unwrap());
    let mut added: Vec<f64> = r
        .iter()
        .filter_map(|(t, ra)| {
            let da = d.get(t)?;
            Some(ra.saturating_duration_since(*da).as_secs_f64() * 1000.0)
        })
        .collect();
    added.sort_by(f64::total_cmp);
    assert!(added.len() > 100, "{} ticks in common", added.len());
    let q = |p: f64| added[((added.len() - 1) as f64 * p) as usize];
    println!(
        "one relay hop adds, over {} frames: p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        added.len(),
        q(0.5),
        q(0.9),
        q(0.99),
        added[added.len() - 1]
    );
}

/// A relayed player of a zone whose game is upgraded in place (a module deploy) stays on its
/// relay: the relay gets the new world's image and the player's frames go on from a BASELINE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relayed_player_plays_on_through_a_module_deploy() {
    let dir = tempfile::tempdir().unwrap();
    let tag = std::fs::read(guest_build::tag_module()).unwrap();
    let file = dir.path().join("tag.wasm");
    std::fs::write(&file, &tag).unwrap();
    let store = StoreSpec::Sqlite(dir.path().join("zonekeep.db"));
    let module = format!("tag={}", file.display());
    let args = [
        "--relay-token",
        RELAY_TOKEN,
        "--admin-token",
        support::ADMIN_TOKEN,
        "--module",
        &module,
    ];
    let host = Server::start(&store, &args, &dir.path().join("host.log")).await;
    let relay = Relay::start(&host.addr, RELAY_TOKEN, &dir.path().join("relay.log"), &[]);
    let zone = "tag-relayed";
    let t = support::ticket_for("tagger", zone, "tag");
    let mut c = Client::join_with(&relay.addr, zone, t).await;
    c.read_for(Duration::from_millis(500)).await;
    let before = c.mirror.tick();
    assert!(before > 0 && !c.mirror.is_empty());
    // The same game, another build: the zone is upgraded with its player connected.
    let mut v2 = tag.clone();
    let name = b"zonekeep-build";
    let mut section = vec![u8::try_from(name.len()).unwrap()];
    section.extend_from_slice(name);
    section.extend_from_slice(b"v2");
    v2.push(0);
    v2.push(u8::try_from(section.len()).unwrap());
    v2.extend_from_slice(&section);
    let (status, out) = support::push::push_module(&host.addr, "tag", "", &v2, None).await;
    assert_eq!(status, 200, "{out}");
    let zones = out["upgrade"]["zones"].as_array().unwrap();
    assert_eq!(zones[0]["upgraded"], true, "{out}");
    assert_eq!(zones[0]["kept"], 1, "{out}");
    // Its frames go on, built by the relay from the new world (the host sends the link its
    // patches, not the player its frames): every one applies to what it holds.
    let patches = host.metric("zonekeep_relay_patches_total").await;
    c.read_for(Duration::from_secs(1)).await;
    assert!(
        c.mirror.tick() > before + 5,
        "{} then {}",
        before,
        c.mirror.tick()
    );
    assert!(!c.mirror.is_empty());
    let after = host.metric("zonekeep_relay_patches_total").await;
    assert!(
        after > patches + 5.0,
        "the link got {patches} then {after} patches"
    );
}

/// A relay holds one link per zone, all from one address: once they show the relay credential
/// they do not count against the host's cap on one address's connections, which is for clients,
/// but each holds its connection slot (and shows in the connections gauge) while it is open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_serves_more_zones_than_one_address_may_hold_connections() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().join("zonekeep.db"));
    let args = [
        "--relay-token",
        RELAY_TOKEN,
        "--admin-token",
        support::ADMIN_TOKEN,
        "--max-connections-per-ip",
        "2",
    ];
    let host = Server::start(&store, &args, &dir.path().join("host.log")).await;
    let relay = Relay::start(&host.addr, RELAY_TOKEN, &dir.path().join("relay.log"), &[]);
    // Past the cap and past its courtesy tier (twice the cap), where a client's connection
    // would be closed at accept.
    let mut clients = Vec::new();
    for i in 0..6 {
        let zone = format!("relay-zones-{i}");
        clients.push(Client::join(&relay.addr, &zone, &format!("z{i}")).await);
    }
    for c in &mut clients {
        c.read_for(Duration::from_millis(200)).await;
        assert!(c.mirror.tick() > 0, "{} got no frame", c.welcome.zone_id);
    }
    assert_eq!(host.metric("zonekeep_relay_links").await, 6.0);
    let open = host.metric("zonekeep_connections").await;
    assert!(open >= 6.0, "the links hold their slots: {open} open");
    assert_eq!(
        host.metric("zonekeep_connections_refused_total{reason=\"per_ip\"}")
            .await,
        0.0,
        "no link was refused for its address"
    );
}
