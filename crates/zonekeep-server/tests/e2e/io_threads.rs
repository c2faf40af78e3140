//! WebSocket connections on the host's I/O threads: nothing a client sends right after its Hello
//! is lost when the socket moves from the async runtime to its I/O thread.

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::Message;
use zonekeep_protocol::messages::{ClientMessage, Input, ServerMessage};

use crate::common::*;

fn input(seq: u32) -> Vec<u8> {
    ClientMessage::Input(Input {
        seq,
        view_tick: 0,
        payload: vec![1, 0],
    })
    .to_bytes()
    .unwrap()
}

/// Read until a Delta acknowledges input `seq`; with `welcome`, a Welcome must come first.
async fn until_acked<S>(ws: &mut tokio_tungstenite::WebSocketStream<S>, seq: u32, welcome: bool)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut welcomed = false;
    loop {
        let m = tokio::time::timeout(HANG_GUARD, ws.next())
            .await
            .expect("no message from the host within the hang guard")
            .expect("the host closed")
            .expect("socket error");
        let Message::Binary(b) = m else { continue };
        let ctx = zonekeep_protocol::messages::DeltaContext {
            schema: &empty_schema(),
            known: &[],
        };
        // Deltas after the BASELINE may name entities; only their header matters here.
        match ServerMessage::decode(&b, Some(ctx)) {
            Ok(ServerMessage::Welcome(_)) => welcomed = true,
            Ok(ServerMessage::Kick(k)) => panic!("kicked: {k:?}"),
            Ok(ServerMessage::Delta(d)) if d.ack >= seq => {
                assert!(welcomed || !welcome, "the Welcome comes first");
                return;
            }
            _ => {}
        }
    }
}

#[tokio::test]
async fn inputs_written_together_with_the_hello_are_all_applied() {
    let server = TestServer::start().await;
    let mut ws = connect(&server, "pipe-1").await;
    // `feed` buffers; one flush writes the Hello and two Inputs in one go.
    let hello = hello_bytes(&ticket("alice", "pipe-1"), &[]);
    ws.feed(Message::Binary(hello.into())).await.unwrap();
    ws.feed(Message::Binary(input(1).into())).await.unwrap();
    ws.feed(Message::Binary(input(2).into())).await.unwrap();
    ws.flush().await.unwrap();
    until_acked(&mut ws, 2, true).await;
    server.stop().await;
}

/// A client frame (masked, as RFC 6455 requires of clients).
fn masked_frame(payload: &[u8]) -> Vec<u8> {
    let mask = [0x5au8, 0x0f, 0xc3, 0x81];
    let mut out = vec![0x82];
    match payload.len() {
        n if n < 126 => out.push(0x80 | n as u8),
        n => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
    }
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    out
}

#[tokio::test]
async fn a_hello_and_inputs_sent_with_the_upgrade_request_are_all_applied() {
    let server = TestServer::start().await;
    let addr = server.addr;
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    // The request, the Hello and two Inputs in one write: the HTTP layer reads past the
    // request, and those bytes must reach the Hello reader and then the I/O thread.
    let mut bytes = format!(
        "GET /zones/pipe-2 HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Version: 13\r\n\r\n"
    )
    .into_bytes();
    bytes.extend(masked_frame(&hello_bytes(&ticket("bob", "pipe-2"), &[])));
    bytes.extend(masked_frame(&input(1)));
    bytes.extend(masked_frame(&input(2)));
    tcp.write_all(&bytes).await.unwrap();
    // The response head, byte by byte so that nothing after it is consumed.
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        tcp.read_exact(&mut b).await.unwrap();
        head.push(b[0]);
        assert!(head.len() < 4096, "response head too long");
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="),
        "the RFC 6455 accept key: {head}"
    );
    let mut ws = tokio_tungstenite::WebSocketStream::from_raw_socket(tcp, Role::Client, None).await;
    until_acked(&mut ws, 2, true).await;
    server.stop().await;
}

#[tokio::test]
async fn a_request_that_is_not_a_websocket_upgrade_is_refused_with_a_status() {
    let server = TestServer::start().await;
    for (headers, status) in [
        ("", "426"),
        ("Upgrade: websocket\r\nConnection: Upgrade\r\n", "400"),
        (
            "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 8\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
            "400",
        ),
    ] {
        let mut tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        let req =
            format!("GET /zones/pipe-3 HTTP/1.1\r\nHost: x\r\n{headers}Connection: close\r\n\r\n");
        tcp.write_all(req.as_bytes()).await.unwrap();
        let mut answer = String::new();
        let _ = tokio::time::timeout(HANG_GUARD, tcp.read_to_string(&mut answer)).await;
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{headers:?}: {answer}"
        );
    }
    server.stop().await;
}

#[tokio::test]
async fn players_spread_over_several_io_threads_each_get_their_own_acks_and_outlive_a_dropped_one()
{
    let server = TestServer::start_with(zonekeep_server::ServerConfig {
        ws_io_threads: 3,
        ..base_config()
    })
    .await;
    let mut players = Vec::new();
    for i in 0..6 {
        let (ws, _) = join(&server, "spread-1", &ticket(&format!("p{i}"), "spread-1")).await;
        players.push(ws);
    }
    // Each player's inputs are acknowledged to that player, whichever thread holds its socket.
    for (i, ws) in players.iter_mut().enumerate() {
        for seq in 1..=(i as u32 + 1) {
            send_input(ws, seq, &[1, 0]).await;
        }
    }
    for (i, ws) in players.iter_mut().enumerate() {
        until_acked(ws, i as u32 + 1, false).await;
    }
    // One vanishes without a Close; the others keep playing.
    drop(players.remove(0));
    for (i, ws) in players.iter_mut().enumerate() {
        let seq = i as u32 + 3;
        send_input(ws, seq, &[0, 1]).await;
        until_acked(ws, seq, false).await;
    }
    server.stop().await;
}
