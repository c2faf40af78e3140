//! A tiny WebSocket "host" for loopback tests: it accepts connections on 127.0.0.1 and hands each to
//! the test, which speaks the protocol by hand with `zonekeep-protocol`.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use zonekeep_protocol::delta::{Delta, Spawn};
use zonekeep_protocol::messages::{
    ClientMessage, DeltaContext, Hello, Input, Kick, KickCode, Pong, Redirect, Role, ServerMessage,
    Welcome,
};
use zonekeep_protocol::schema::{FieldDef, FieldType, FieldValue, KindDef, Schema};

/// Guards a test against a hang (a bug), not a performance bound.
pub async fn guarded<F: std::future::Future<Output = ()>>(f: F) {
    tokio::time::timeout(std::time::Duration::from_secs(30), f)
        .await
        .expect("test hung");
}

/// Client options for these tests: only the immediate first Ping (the tests answer it
/// explicitly) and reconnect backoff of a few milliseconds.
pub fn options(ticket: &str) -> zonekeep_client::ConnectOptions {
    let mut o = zonekeep_client::ConnectOptions::new(ticket);
    o.ping_interval = std::time::Duration::from_secs(3600);
    o.reconnect = zonekeep_client::ReconnectPolicy {
        backoff_min: std::time::Duration::from_millis(1),
        backoff_max: std::time::Duration::from_millis(5),
        ..zonekeep_client::ReconnectPolicy::default()
    };
    o
}

/// Accepted server-side sockets, in order.
pub struct TestHost {
    pub url: String,
    /// `ws://127.0.0.1:port`, for URLs of other paths on this host.
    pub base: String,
    conns: mpsc::Receiver<HostConn>,
}

impl TestHost {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = mpsc::channel(8);
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let mut target = String::new();
                // The callback's signature is tungstenite's, error response included.
                #[allow(clippy::result_large_err)]
                let record = |req: &Request, resp: Response| {
                    target = req.uri().to_string();
                    Ok(resp)
                };
                let Ok(ws) = tokio_tungstenite::accept_hdr_async(tcp, record).await else {
                    continue;
                };
                let conn = HostConn {
                    ws,
                    target,
                    bytes_in: 0,
                    bytes_out: 0,
                    messages_in: 0,
                    messages_out: 0,
                    pings: 0,
                };
                if tx.send(conn).await.is_err() {
                    return;
                }
            }
        });
        Self {
            url: format!("ws://{addr}/zones/z1"),
            base: format!("ws://{addr}"),
            conns: rx,
        }
    }

    /// The next connection a client opened.
    pub async fn accept(&mut self) -> HostConn {
        self.conns.recv().await.expect("host listener stopped")
    }
}

/// One accepted connection with the byte tallies the client's counters must match.
pub struct HostConn {
    pub ws: WebSocketStream<TcpStream>,
    /// The request target the client asked for (path and query).
    pub target: String,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub messages_in: u64,
    pub messages_out: u64,
    pub pings: u64,
}

impl HostConn {
    /// The next client message, or `None` when the client closed. Pings are answered with a Pong
    /// at `tick` (server time = client time + 1 s, an arbitrary offset).
    pub async fn recv_skip_pings(&mut self, tick: u64) -> Option<ClientMessage> {
        loop {
            let m = self.recv().await?;
            if let ClientMessage::Ping(p) = m {
                self.pong(p.client_time, tick).await;
                continue;
            }
            return Some(m);
        }
    }

    /// The next client message, or `None` when the client closed.
    pub async fn recv(&mut self) -> Option<ClientMessage> {
        loop {
            match self.ws.next().await? {
                Ok(Message::Binary(b)) => {
                    self.bytes_in += b.len() as u64;
                    self.messages_in += 1;
                    let m = ClientMessage::decode(&b).expect("client sent an undecodable message");
                    if matches!(m, ClientMessage::Ping(_)) {
                        self.pings += 1;
                    }
                    return Some(m);
                }
                Ok(Message::Close(_)) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }

    /// Keeps reading (answering nothing) until the client closes, so its close handshake completes.
    pub fn drain(mut self) {
        tokio::spawn(async move { while self.recv().await.is_some() {} });
    }

    pub async fn hello(&mut self) -> Hello {
        match self.recv().await {
            Some(ClientMessage::Hello(h)) => h,
            other => panic!("expected Hello, got {other:?}"),
        }
    }

    /// The next Input, answering Pings on the way.
    pub async fn input(&mut self, tick: u64) -> Input {
        match self.recv_skip_pings(tick).await {
            Some(ClientMessage::Input(i)) => i,
            other => panic!("expected Input, got {other:?}"),
        }
    }

    /// Reads until a Ping arrives and answers it.
    pub async fn answer_ping(&mut self, tick: u64) {
        loop {
            match self.recv().await {
                Some(ClientMessage::Ping(p)) => {
                    self.pong(p.client_time, tick).await;
                    return;
                }
                Some(_) => {}
                None => panic!("client closed before pinging"),
            }
        }
    }

    pub async fn pong(&mut self, client_time: u64, tick: u64) {
        let msg = ServerMessage::Pong(Pong {
            client_time,
            server_time_us: client_time + 1_000_000,
            tick,
        });
        self.send(&msg, None).await;
    }

    pub async fn send(&mut self, msg: &ServerMessage, known: Option<&[(u32, u32)]>) {
        let schema = schema();
        let ctx = known.map(|known| DeltaContext {
            schema: &schema,
            known,
        });
        let bytes = msg.to_bytes(ctx).unwrap();
        self.bytes_out += bytes.len() as u64;
        self.messages_out += 1;
        self.ws.send(Message::binary(bytes)).await.unwrap();
    }

    pub async fn welcome(&mut self, player_id: u32, token: &[u8], tick: u64) {
        self.send(
            &ServerMessage::Welcome(welcome(player_id, token, tick)),
            None,
        )
        .await;
    }

    pub async fn delta(&mut self, d: Delta, known: &[(u32, u32)]) {
        self.send(&ServerMessage::Delta(d), Some(known)).await;
    }

    pub async fn kick(&mut self, code: KickCode, reason: &str) {
        let k = ServerMessage::Kick(Kick {
            code,
            reason: reason.to_owned(),
        });
        self.send(&k, None).await;
    }

    /// Answers the Hello with a Redirect to `url` and waits for the client to go (a host closes
    /// after a Redirect; reading until the client's close keeps the Redirect from being lost to a
    /// TCP reset).
    pub async fn redirect(mut self, url: &str) {
        let r = ServerMessage::Redirect(Redirect {
            url: url.to_owned(),
            zone_id: "z1".into(),
        });
        self.send(&r, None).await;
        while self.recv().await.is_some() {}
    }

    /// Welcome followed by the BASELINE Delta spawning entities 5 (controlled) and 9.
    pub async fn admit(&mut self, player_id: u32, token: &[u8], tick: u64) {
        self.welcome(player_id, token, tick).await;
        self.delta(baseline(tick), &[]).await;
    }

    /// [`admit`](Self::admit) with a Welcome negotiating `version`.
    pub async fn admit_at(&mut self, version: u32, player_id: u32, token: &[u8], tick: u64) {
        let mut w = welcome(player_id, token, tick);
        w.version = version;
        self.send(&ServerMessage::Welcome(w), None).await;
        self.delta(baseline(tick), &[]).await;
    }
}

/// One kind, `ship`, with a uint and an angle field; positions in hundredths.
pub fn schema() -> Schema {
    Schema {
        pos_step: 0.01,
        kinds: vec![KindDef {
            name: "ship".into(),
            fields: vec![
                FieldDef {
                    name: "hp".into(),
                    ty: FieldType::UInt,
                },
                FieldDef {
                    name: "dir".into(),
                    ty: FieldType::Angle { bits: 8 },
                },
            ],
        }],
    }
}

pub fn welcome(player_id: u32, token: &[u8], tick: u64) -> Welcome {
    Welcome {
        // A version 5 host: what this crate's WebSocket sessions speak either way.
        version: 5,
        player_id,
        zone_id: "z1".into(),
        role: Role::Player,
        tick_hz: 30,
        patch_every: 2,
        tick,
        features: 0,
        idle_timeout_ms: 30_000,
        handshake_timeout_ms: 5_000,
        reconnect_grace_ms: 15_000,
        reconnect_token: token.to_vec(),
        schema: schema(),
        content_version: String::new(),
        entries: Vec::new(),
    }
}

pub fn baseline(tick: u64) -> Delta {
    Delta {
        base: None,
        tick,
        ack: 0,
        baseline: true,
        control: Some(Some(5)),
        despawns: vec![],
        updates: vec![],
        spawns: vec![
            Spawn {
                id: 5,
                kind: 0,
                qx: 100,
                qy: 200,
                fields: vec![FieldValue::U(10), FieldValue::Q(0)],
            },
            Spawn {
                id: 9,
                kind: 0,
                qx: -300,
                qy: 0,
                fields: vec![FieldValue::U(3), FieldValue::Q(64)],
            },
        ],
        events: None,
    }
}

/// The known set right after [`baseline`].
pub const KNOWN: &[(u32, u32)] = &[(5, 0), (9, 0)];

/// A Delta acknowledging `ack` with no entity changes.
pub fn ack_only(tick: u64, ack: u32) -> Delta {
    Delta {
        base: None,
        tick,
        ack,
        baseline: false,
        control: None,
        despawns: vec![],
        updates: vec![],
        spawns: vec![],
        events: None,
    }
}
