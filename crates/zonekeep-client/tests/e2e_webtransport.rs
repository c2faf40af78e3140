//! The client over WebTransport against the real host (in process, dev mode, 127.0.0.1:0): it finds
//! the endpoint through `GET /webtransport`, pins the development certificate, plays with States in
//! datagrams, and, with the host's NetSim losing and reordering datagrams, the patches it hands
//! the application still add up to exactly the zone's world.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use zonekeep_client::{connect, ConnectOptions, Connection, Event, Transport};
use zonekeep_core::{
    Ctx, EntityId, InputRefusal, JoinRefusal, KindId, PlayerId, PlayerInfo, Role, Zone, ZoneConfig,
    ZoneError, ZoneInit,
};
use zonekeep_protocol::schema::{FieldDef, FieldType, KindDef};
use zonekeep_server::ticket::MintRequest;
use zonekeep_server::{Host, Secret, ServerConfig};

const ZONE: &str = "walk-wt";

/// Each player walks an entity by its input's signed byte; a crowd of 40 drifters moves every
/// tick, so every State carries changes.
struct Walk {
    walker: KindId,
    drifters: Vec<EntityId>,
    mine: BTreeMap<PlayerId, EntityId>,
}

impl Zone for Walk {
    type Input = i8;

    fn create(_init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let w = ctx.world();
        let walker = w
            .declare_kind(KindDef {
                name: "walker".into(),
                fields: vec![FieldDef {
                    name: "steps".into(),
                    ty: FieldType::UInt,
                }],
            })
            .map_err(|e| ZoneError::Failed(e.to_string()))?;
        let drifters = (0..40)
            .map(|i| w.spawn(walker, i as f32, 0.0))
            .collect::<Result<_, _>>()
            .map_err(|e| ZoneError::Failed(e.to_string()))?;
        Ok(Walk {
            walker,
            drifters,
            mine: BTreeMap::new(),
        })
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, p: &PlayerInfo) -> Result<(), JoinRefusal> {
        let e = ctx.world().spawn(self.walker, 0.0, 5.0).unwrap();
        ctx.set_control(p.id, Some(e));
        self.mine.insert(p.id, e);
        Ok(())
    }

    fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<i8, InputRefusal> {
        match payload {
            [b] => Ok(*b as i8),
            _ => Err(InputRefusal::new(1, "one byte")),
        }
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, p: PlayerId, dx: i8) {
        if let Some(&e) = self.mine.get(&p) {
            let w = ctx.world();
            let (x, y) = w.pos(e).unwrap();
            w.set_pos(e, x + f32::from(dx), y).unwrap();
            let steps = w.get(e).unwrap().values[0].clone();
            if let zonekeep_protocol::schema::FieldValue::U(n) = steps {
                w.set_uint(e, 0, n + 1).unwrap();
            }
        }
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        let t = ctx.tick() as f32;
        let w = ctx.world();
        for (i, &e) in self.drifters.iter().enumerate() {
            w.set_pos(e, i as f32, (t * 0.1 + i as f32).sin() * 20.0)
                .unwrap();
        }
    }
}

/// The world as the patches handed to the application build it: id → (x, y, steps).
#[derive(Default)]
struct Seen {
    entities: BTreeMap<u32, (f32, f32, u32)>,
    tick: u64,
    ack: u32,
}

impl Seen {
    fn apply(&mut self, p: &zonekeep_client::Patch) {
        if p.baseline {
            self.entities.clear();
        }
        for id in &p.despawns {
            self.entities.remove(id);
        }
        for u in &p.updates {
            let e = self
                .entities
                .get_mut(&u.id)
                .expect("an update of an entity shown");
            if let Some((x, y)) = u.pos {
                (e.0, e.1) = (x, y);
            }
            for (_, v) in &u.fields {
                if let zonekeep_protocol::schema::FieldValue::U(n) = v {
                    e.2 = *n;
                }
            }
        }
        for s in &p.spawns {
            assert!(
                self.entities.insert(s.id, (s.x, s.y, 0)).is_none(),
                "a spawn of an entity already shown"
            );
            if let Some(zonekeep_protocol::schema::FieldValue::U(n)) = s.fields.first() {
                self.entities.get_mut(&s.id).unwrap().2 = *n;
            }
        }
        self.tick = p.tick;
        self.ack = self.ack.max(p.ack);
    }
}

async fn next_patch(conn: &mut Connection) -> zonekeep_client::Patch {
    loop {
        match conn.recv().await.expect("connection ended") {
            Event::Delta(p) => return p,
            Event::Event { .. } => {}
            other => panic!("unexpected event {other:?}"),
        }
    }
}

/// A dev host serving the walk zone on 127.0.0.1:0 (WebTransport on), a ticket for `sub`, and
/// what stops it.
struct Served {
    url: String,
    addr: std::net::SocketAddr,
    ticket: String,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<()>,
}

async fn serve_walk(sub: &str) -> Served {
    let config = ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        sim_threads: 1,
        dev: true,
        ticket_secret: Some(Secret::new("e2e-client-secret-0123456789abcdef")),
        ..ServerConfig::default()
    };
    let host = Host::builder()
        .config(config)
        .zone_with::<Walk>("walk", ZoneConfig::default(), serde_json::Value::Null)
        .default_kind("walk")
        .build()
        .unwrap();
    let ticket = host
        .mint_ticket(&MintRequest {
            sub: sub.into(),
            zone: ZONE.into(),
            role: Role::Player,
            ttl_secs: 60,
            params: None,
            claims: Default::default(),
        })
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        host.serve(listener, async {
            let _ = stop_rx.await;
        })
        .await
        .unwrap();
    });
    Served {
        url: format!("ws://{addr}/zones/{ZONE}"),
        addr,
        ticket,
        stop,
        server,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plays_over_webtransport_and_loss_never_corrupts_what_it_shows() {
    let Served {
        url,
        addr,
        ticket,
        stop: stop_tx,
        server,
    } = serve_walk("wt-walker").await;
    let netsim = |body: &'static str| async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = format!(
                "POST /dev/netsim?sub=wt-walker HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        tcp.write_all(req.as_bytes()).await.unwrap();
        let mut answer = String::new();
        tcp.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 2"), "{answer}");
    };

    let body = async {
        let mut opts = ConnectOptions::new(ticket);
        opts.transport = Transport::WebTransport;
        let (mut conn, welcome) = connect(&url, opts).await.unwrap();
        // The newest version this client offers: the host speaks chat's version 11 too, which
        // this client does not offer yet.
        assert_eq!(
            welcome.version,
            zonekeep_protocol::messages::CHARACTER_PROTOCOL,
            "a WebTransport session speaks the newest version both offer"
        );
        assert_eq!(conn.transport(), Transport::WebTransport);
        let mut seen = Seen::default();
        seen.apply(&next_patch(&mut conn).await);
        assert_eq!(
            seen.entities.len(),
            41,
            "the drifters and the player's walker"
        );

        // A lossy, reordering path for datagrams: 20 % lost, 0–150 ms of jitter each (several
        // patch intervals, so States overtake each other).
        netsim(r#"{"latency_ms": 10, "jitter_ms": 150, "loss": 0.2}"#).await;
        let mut sent = 0u32;
        while sent < 40 {
            sent = conn.send_input(&[1]).unwrap();
            let p = next_patch(&mut conn).await;
            seen.apply(&p);
        }
        netsim(r#"{}"#).await;
        // The client's own NetSim loses and reorders datagrams both ways too.
        conn.set_netsim(zonekeep_client::NetSimConfig {
            delay: Duration::from_millis(20),
            jitter: Duration::from_millis(60),
            loss: 0.2,
            ..zonekeep_client::NetSimConfig::default()
        })
        .await
        .unwrap();
        while sent < 60 {
            sent = conn.send_input(&[1]).unwrap();
            let p = next_patch(&mut conn).await;
            seen.apply(&p);
        }
        conn.set_netsim(zonekeep_client::NetSimConfig::default())
            .await
            .unwrap();
        // Clear paths; once the zone acknowledged every input and the next States came
        // through, what the application was shown is exactly the zone's world.
        while seen.ack < sent {
            seen.apply(&next_patch(&mut conn).await);
        }
        for _ in 0..10 {
            seen.apply(&next_patch(&mut conn).await);
        }
        let mine = seen
            .entities
            .values()
            .find(|e| e.1 == 5.0)
            .copied()
            .expect("the walker is shown");
        assert_eq!(mine.0, 60.0, "every input moved the walker once: {mine:?}");
        assert_eq!(mine.2, 60, "and counted once");
        assert_eq!(seen.entities.len(), 41);
        let c = conn.counters();
        assert!(
            c.states_stale + c.states_without_base > 0,
            "the path reordered States (some arrived late): {c:?}"
        );
        conn.close().await;
    };
    tokio::time::timeout(Duration::from_secs(60), body)
        .await
        .expect("the WebTransport session plays");
    let _ = stop_tx.send(());
    server.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_states_acknowledgement_rides_the_next_input_or_goes_alone_after_the_hold() {
    let served = serve_walk("wt-acker").await;
    let body = async {
        let mut opts = ConnectOptions::new(served.ticket.clone());
        opts.transport = Transport::WebTransport;
        let (mut conn, _) = connect(&served.url, opts).await.unwrap();
        next_patch(&mut conn).await;
        // An input right after each State: it carries the State's acknowledgement, and no
        // Inputs datagram goes for the acknowledgement alone. (A scheduler stalled past the
        // hold sends one alone; most must ride.)
        const STATES: u64 = 30;
        let mut baselines = 0;
        for _ in 0..STATES {
            conn.send_input(&[1]).unwrap();
            baselines += u64::from(next_patch(&mut conn).await.baseline);
        }
        let riding = conn.counters();
        assert!(
            riding.acks_alone * 2 < STATES,
            "acknowledgements rode the inputs: {riding:?}"
        );
        assert_eq!(
            baselines, 0,
            "the host wrote each State against one the inputs acknowledged"
        );
        // No input: each State is acknowledged alone once the hold ends, and the host keeps
        // writing States against acknowledged ones.
        for _ in 0..STATES {
            baselines += u64::from(next_patch(&mut conn).await.baseline);
        }
        let alone = conn.counters().acks_alone - riding.acks_alone;
        assert!(
            alone * 2 >= STATES,
            "a State no input follows is acknowledged alone: {alone} of {STATES}"
        );
        assert_eq!(baselines, 0, "the acknowledgements arrived");
        conn.close().await;
    };
    tokio::time::timeout(Duration::from_secs(60), body)
        .await
        .expect("the WebTransport session plays");
    let _ = served.stop.send(());
    served.server.await.unwrap();
}
