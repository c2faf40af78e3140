//! A native game joining through the lobby: its back end (here, the test) asks a host's lobby for
//! a seat, the game reads the answer with `Seat::from_json` and connects where it says with its
//! ticket, and is welcomed into that zone; a refusal reads as a `SeatError` that says whether to
//! try again.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zonekeep_client::{connect, ConnectOptions, Seat, SeatError};
use zonekeep_core::ZoneConfig;
use zonekeep_server::config::Secret;
use zonekeep_server::examples::Dots;
use zonekeep_server::persist::{PersistConfig, Persistence};
use zonekeep_server::{Host, ServerConfig};

const LOBBY: &str = "lobby-token-of-the-native-backend";

/// POSTs `body` to `path` with the lobby credential: the status and the body.
async fn post(addr: std::net::SocketAddr, path: &str, body: &str) -> (u16, Vec<u8>) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {LOBBY}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let status = String::from_utf8_lossy(&out[..split])
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    (status, out[split + 4..].to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_game_joins_the_zone_its_seat_names() {
    let dir = tempfile::tempdir().unwrap();
    let p = Persistence::open(PersistConfig {
        data_dir: dir.path().to_path_buf(),
        ..PersistConfig::default()
    })
    .await
    .unwrap();
    let host = Host::builder()
        .config(ServerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            sim_threads: 1,
            dev: true,
            data_dir: dir.path().to_path_buf(),
            lobby_token: Some(Secret::new(LOBBY)),
            ..ServerConfig::default()
        })
        .zone_with::<Dots>(
            "dots",
            ZoneConfig {
                max_players: 1,
                ..ZoneConfig::default()
            },
            serde_json::Value::Null,
        )
        .persistence(Arc::clone(&p))
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        host.serve(listener, async {
            let _ = stop_rx.await;
        })
        .await
        .unwrap();
    });

    let (status, body) = post(
        addr,
        "/lobby/join_or_create",
        r#"{"kind": "dots", "principal": "native-player", "name": "Nat"}"#,
    )
    .await;
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
    let seat = Seat::from_json(&body).unwrap();
    assert_eq!(seat.url, format!("ws://{addr}/zones/{}", seat.zone));
    let (conn, welcome) = connect(&seat.url, ConnectOptions::new(seat.ticket.clone()))
        .await
        .unwrap();
    assert!(welcome.player_id > 0, "welcomed into the seat's zone");

    // The room seats one: another player is refused, in words that say to try again later.
    let (status, body) = post(
        addr,
        &format!("/lobby/rooms/{}/join", seat.zone),
        r#"{"principal": "second"}"#,
    )
    .await;
    let refusal = SeatError::from_answer(status, &body);
    assert_eq!((status, refusal.code.as_str()), (409, "room_full"));
    assert!(refusal.retryable());

    drop(conn);
    let _ = stop.send(());
    task.await.unwrap();
}
