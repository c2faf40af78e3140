//! The WebTransport endpoint (PROTOCOL.md §1.1): the same zones and tickets over HTTP/3, States and
//! Inputs in datagrams, and hostile input answered as on the WebSocket path.

use std::time::Duration;

use serde_json::Value;
use wtransport::{ClientConfig, Connection, Endpoint, RecvStream, SendStream};
use zonekeep_protocol::messages::{ClientMessage, Hello, Input, Inputs, KickCode, ServerMessage};
use zonekeep_protocol::wire::put_varint;

use crate::common::*;

/// A client session: the connection and its control stream.
struct Wt {
    conn: Connection,
    send: SendStream,
    recv: RecvStream,
}

/// Opens a session to `zone` at the endpoint the host publishes, trusting `pin` (or the
/// certificate hash the host publishes).
async fn open_pinned(server: &TestServer, zone: &str, pin: Option<[u8; 32]>) -> Result<Wt, String> {
    let (status, body) = http(server, "GET", "/webtransport", None, None).await;
    assert_eq!(status, 200, "{body}");
    let info: Value = serde_json::from_str(&body).unwrap();
    let url = info["url"].as_str().unwrap();
    let port = url.strip_prefix("https://test:").expect(url);
    let url = format!("https://127.0.0.1:{port}");
    let published = info["certificate_hashes"].as_array().unwrap();
    let hash = match pin {
        Some(h) => {
            assert!(
                published.is_empty(),
                "a configured certificate is not pinned: {body}"
            );
            h
        }
        None => {
            use base64::Engine;
            assert_eq!(
                published.len(),
                1,
                "a development host pins its own certificate"
            );
            assert_eq!(published[0]["algorithm"], "sha-256");
            base64::engine::general_purpose::STANDARD
                .decode(published[0]["value"].as_str().unwrap())
                .unwrap()
                .try_into()
                .unwrap()
        }
    };
    let cfg = ClientConfig::builder()
        .with_bind_default()
        .with_server_certificate_hashes([wtransport::tls::Sha256Digest::new(hash)])
        .build();
    let conn = Endpoint::client(cfg)
        .unwrap()
        .connect(format!("{url}/zones/{zone}"))
        .await
        .map_err(|e| e.to_string())?;
    let (send, recv) = conn
        .open_bi()
        .await
        .unwrap()
        .await
        .map_err(|e| e.to_string())?;
    Ok(Wt { conn, send, recv })
}

/// Opens a session to `zone` with the certificate hash the host publishes.
async fn open(server: &TestServer, zone: &str) -> Result<Wt, String> {
    open_pinned(server, zone, None).await
}

impl Wt {
    async fn send_message(&mut self, bytes: &[u8]) {
        let mut framed = Vec::new();
        put_varint(&mut framed, bytes.len() as u64);
        framed.extend_from_slice(bytes);
        self.send.write_all(&framed).await.unwrap();
    }

    /// The next message on the control stream, `None` when it ended.
    async fn next_message(&mut self) -> Option<ServerMessage> {
        let mut len = 0u64;
        for i in 0..5 {
            let mut b = [0u8; 1];
            match self.recv.read(&mut b).await {
                Ok(Some(1)) => {}
                _ => return None,
            }
            len |= u64::from(b[0] & 0x7f) << (7 * i);
            if b[0] & 0x80 == 0 {
                break;
            }
        }
        let mut body = vec![0u8; len as usize];
        self.recv.read_exact(&mut body).await.ok()?;
        Some(ServerMessage::decode(&body, None).unwrap_or_else(|e| panic!("{e}: {body:?}")))
    }

    async fn hello(&mut self, versions: Vec<u32>, ticket: &str) {
        let hello = ClientMessage::Hello(Hello {
            versions,
            ticket: ticket.into(),
            reconnect_token: vec![],
            content_version: String::new(),
            resume_from: None,
        });
        self.send_message(&hello.to_bytes().unwrap()).await;
    }

    fn datagram(&self, m: &ClientMessage) {
        self.conn.send_datagram(m.to_bytes().unwrap()).unwrap();
    }

    /// The Kick that ends the session and the session's close code.
    async fn kicked(&mut self) -> (KickCode, u64) {
        let kick = loop {
            match self.next_message().await {
                Some(ServerMessage::Kick(k)) => break k.code,
                Some(_) => continue,
                None => panic!("the stream ended without a Kick"),
            }
        };
        (kick, close_code(&self.conn).await)
    }
}

/// The application close code the host ended the session with.
async fn close_code(conn: &Connection) -> u64 {
    match conn.closed().await {
        wtransport::error::ConnectionError::ApplicationClosed(c) => c.code().into_inner(),
        other => panic!("the session ended without an application close: {other}"),
    }
}

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

#[tokio::test]
async fn a_session_plays_over_datagrams_acknowledging_states_and_repeating_inputs() {
    let server = TestServer::start().await;
    let mut wt = open(&server, "dots").await.unwrap();
    wt.hello(
        vec![zonekeep_protocol::limits::PROTOCOL_VERSION],
        &ticket("wt-a", "dots"),
    )
    .await;
    let welcome = match within("welcome", wt.next_message()).await {
        Some(ServerMessage::Welcome(w)) => w,
        other => panic!("expected Welcome, got {other:?}"),
    };
    assert_eq!(welcome.version, zonekeep_protocol::limits::PROTOCOL_VERSION);
    // The zone's welcome event comes on the stream, apart from the State.
    let welcomed = within("the zone's event", async {
        loop {
            if let Some(ServerMessage::Events(e)) = wt.next_message().await {
                break e;
            }
        }
    })
    .await;
    assert_eq!(welcomed.events[0].payload, welcome.player_id.to_le_bytes());

    // Inputs 1, 2, 3, each datagram repeating the unacknowledged ones before it.
    let input = |seq| Input {
        seq,
        view_tick: 0,
        payload: vec![1, 0],
    };
    let mut acked_tick = 0u64;
    let mut based_on_ack = false;
    let mut input_ack = 0u32;
    for last in 1..=3u32 {
        let inputs = (1..=last).map(input).collect();
        wt.datagram(&ClientMessage::Inputs(Inputs {
            state_ack: acked_tick,
            inputs,
        }));
        // Until a State acknowledges this input, acknowledge each State received.
        while input_ack < last {
            let d = within("a State", wt.conn.receive_datagram()).await.unwrap();
            let state = zonekeep_protocol::delta::decode_delta_head(d.payload().as_ref()).unwrap();
            let base = state.base.expect("States arrive as datagrams");
            based_on_ack |= acked_tick != 0 && base == acked_tick;
            input_ack = state.ack;
            acked_tick = state.tick;
            wt.datagram(&ClientMessage::Inputs(Inputs {
                state_ack: acked_tick,
                inputs: vec![],
            }));
        }
    }
    assert_eq!(input_ack, 3);
    // Each input moved the dot once, although inputs 1 and 2 arrived two and three times.
    let dots = within("the dots event", async {
        loop {
            if let Some(ServerMessage::Events(e)) = wt.next_message().await {
                if let Some(ev) = e
                    .events
                    .iter()
                    .find(|ev| ev.topic == zonekeep_server::examples::TOPIC_DOTS)
                {
                    let x = i32::from_le_bytes(ev.payload[4..8].try_into().unwrap());
                    if x == 3 {
                        break x;
                    }
                    assert!(x < 3, "an input was applied twice: x = {x}");
                }
            }
        }
    })
    .await;
    assert_eq!(dots, 3);
    assert!(
        based_on_ack,
        "a State was written against an acknowledged one"
    );
    server.stop().await;
}

#[tokio::test]
async fn hostile_sessions_are_refused_like_hostile_websockets() {
    let server = TestServer::start().await;

    // A datagram before the Hello.
    let wt = open(&server, "dots").await.unwrap();
    wt.conn.send_datagram(vec![0x05, 0x00, 0x00]).unwrap();
    let mut wt = wt;
    wt.send_message(&[]).await;
    let code = within("close", close_code(&wt.conn)).await;
    assert_eq!(code, 4000 + u64::from(KickCode::PROTOCOL_ERROR.0));

    // A Hello that does not offer version 6.
    let mut wt = open(&server, "dots").await.unwrap();
    wt.hello(vec![5], &ticket("wt-b", "dots")).await;
    let (kick, code) = within("kick", wt.kicked()).await;
    assert_eq!(kick, KickCode::VERSION_MISMATCH);
    assert_eq!(code, 4000 + u64::from(KickCode::VERSION_MISMATCH.0));

    // A length over the host's message limit on the control stream.
    let mut wt = open(&server, "dots").await.unwrap();
    let mut framed = Vec::new();
    put_varint(&mut framed, 1 << 20);
    wt.send.write_all(&framed).await.unwrap();
    let (kick, _) = within("kick", wt.kicked()).await;
    assert_eq!(kick, KickCode::MESSAGE_TOO_LARGE);

    // After the Welcome: an undecodable datagram.
    let mut wt = open(&server, "dots").await.unwrap();
    wt.hello(vec![6], &ticket("wt-c", "dots")).await;
    assert!(matches!(
        within("welcome", wt.next_message()).await,
        Some(ServerMessage::Welcome(_))
    ));
    wt.conn.send_datagram(vec![0x05, 0xff]).unwrap();
    let (kick, code) = within("kick", wt.kicked()).await;
    assert_eq!(kick, KickCode::PROTOCOL_ERROR);
    assert_eq!(code, 4014);

    // A flood of datagrams that bring nothing new.
    let mut wt = open(&server, "dots").await.unwrap();
    wt.hello(vec![6], &ticket("wt-d", "dots")).await;
    assert!(matches!(
        within("welcome", wt.next_message()).await,
        Some(ServerMessage::Welcome(_))
    ));
    let flood = ClientMessage::Inputs(Inputs {
        state_ack: 0,
        inputs: vec![],
    })
    .to_bytes()
    .unwrap();
    for _ in 0..3000 {
        if wt.conn.send_datagram(flood.clone()).is_err() {
            break;
        }
        tokio::task::yield_now().await;
    }
    let (kick, _) = within("kick", wt.kicked()).await;
    assert_eq!(kick, KickCode::RATE_LIMITED);
    assert!(metric(&server, "zonekeep_datagrams_rate_limited_total").await > 0.0);

    // Everyone else is still served: a well-behaved session joins.
    let mut wt = open(&server, "dots").await.unwrap();
    wt.hello(vec![6], &ticket("wt-e", "dots")).await;
    assert!(matches!(
        within("welcome", wt.next_message()).await,
        Some(ServerMessage::Welcome(_))
    ));

    // A path naming no zone is refused before a session opens.
    assert!(open(&server, "no zone here").await.is_err());
    server.stop().await;
}

#[tokio::test]
async fn a_configured_certificate_is_served_and_not_published() {
    // What an operator has: a certificate chain and its key in PEM files.
    let identity = wtransport::Identity::self_signed(["localhost", "127.0.0.1"]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, identity.certificate_chain().as_slice()[0].to_pem()).unwrap();
    std::fs::write(&key, identity.private_key().to_secret_pem()).unwrap();
    let hash: [u8; 32] = *identity.certificate_chain().as_slice()[0].hash().as_ref();
    let server = TestServer::start_with(zonekeep_server::ServerConfig {
        webtransport: Some("127.0.0.1:0".parse().unwrap()),
        webtransport_cert: Some(cert),
        webtransport_key: Some(key),
        ..base_config()
    })
    .await;
    let mut wt = open_pinned(&server, "dots", Some(hash)).await.unwrap();
    wt.hello(vec![6], &ticket("wt-cert", "dots")).await;
    assert!(matches!(
        within("welcome", wt.next_message()).await,
        Some(ServerMessage::Welcome(_))
    ));
    server.stop().await;
}

#[tokio::test]
async fn messages_on_the_wrong_path_of_a_session_are_protocol_errors() {
    use zonekeep_protocol::messages::Resync;
    let server = TestServer::start().await;
    let input = ClientMessage::Input(Input {
        seq: 1,
        view_tick: 0,
        payload: vec![1, 0],
    });
    let resync = ClientMessage::Resync(Resync { tick: 0 });
    let inputs = ClientMessage::Inputs(Inputs {
        state_ack: 0,
        inputs: vec![],
    });
    // Input, Resync and Inputs on the control stream; Input and Resync as datagrams (§1.1).
    let cases = [
        (&input, false),
        (&resync, false),
        (&inputs, false),
        (&input, true),
        (&resync, true),
    ];
    for (n, (m, as_datagram)) in cases.into_iter().enumerate() {
        let mut wt = open(&server, "dots").await.unwrap();
        wt.hello(vec![6], &ticket(&format!("wt-path-{n}"), "dots"))
            .await;
        assert!(matches!(
            within("welcome", wt.next_message()).await,
            Some(ServerMessage::Welcome(_))
        ));
        if as_datagram {
            wt.datagram(m);
        } else {
            wt.send_message(&m.to_bytes().unwrap()).await;
        }
        let (kick, code) = within("kick", wt.kicked()).await;
        assert_eq!(
            kick,
            KickCode::PROTOCOL_ERROR,
            "{m:?} (datagram: {as_datagram})"
        );
        assert_eq!(code, 4014);
    }

    // A Hello without version 6, 7 or 8 is told the versions a session speaks.
    let mut wt = open(&server, "dots").await.unwrap();
    wt.hello(vec![2, 3, 4, 5], &ticket("wt-old", "dots")).await;
    let kick = loop {
        match within("kick", wt.next_message()).await {
            Some(ServerMessage::Kick(k)) => break k,
            Some(_) => continue,
            None => panic!("the stream ended without a Kick"),
        }
    };
    assert_eq!(kick.code, KickCode::VERSION_MISMATCH);
    assert!(
        kick.reason.contains("the host speaks versions 6 to 11"),
        "{}",
        kick.reason
    );
    server.stop().await;
}

#[tokio::test]
async fn datagrams_alone_keep_a_session_from_its_idle_timeout_and_silence_ends_it() {
    let server = TestServer::start_with(zonekeep_server::ServerConfig {
        idle_timeout_ms: 1_500,
        ..base_config()
    })
    .await;
    let mut wt = open(&server, "dots").await.unwrap();
    wt.hello(
        vec![zonekeep_protocol::limits::PROTOCOL_VERSION],
        &ticket("wt-idle", "dots"),
    )
    .await;
    assert!(matches!(
        within("welcome", wt.next_message()).await,
        Some(ServerMessage::Welcome(_))
    ));
    // Only acknowledgements, ten a second, for well over two idle timeouts: the control stream
    // stays silent, and the session must still be there.
    let mut every = tokio::time::interval(Duration::from_millis(100));
    for _ in 0..40 {
        every.tick().await;
        wt.datagram(&ClientMessage::Inputs(Inputs {
            state_ack: 0,
            inputs: vec![],
        }));
    }
    let ping = ClientMessage::Ping(zonekeep_protocol::messages::Ping { client_time: 7 });
    wt.send_message(&ping.to_bytes().unwrap()).await;
    within("the Pong of a session datagrams kept", async {
        loop {
            match wt.next_message().await {
                Some(ServerMessage::Pong(p)) => break assert_eq!(p.client_time, 7),
                Some(ServerMessage::Kick(k)) => panic!("kicked while sending datagrams: {k:?}"),
                Some(_) => continue,
                None => panic!("the stream ended"),
            }
        }
    })
    .await;
    // Silence on both paths: the idle timeout ends it.
    let (code, _) = within("the idle Kick", wt.kicked()).await;
    assert_eq!(code, KickCode::IDLE_TIMEOUT);
    server.stop().await;
}
