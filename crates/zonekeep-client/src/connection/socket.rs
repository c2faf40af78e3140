//! Opening a WebSocket to a zone and the Hello → Welcome handshake.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use zonekeep_protocol::limits::MAX_SERVER_MESSAGE;
use zonekeep_protocol::messages::{ClientMessage, Hello, ServerMessage, Welcome};

use super::counters::Counters;
use crate::error::ClientError;

/// The client's socket type.
pub(crate) type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Connects to `url`, sends `hello` and waits for Welcome (or Kick) within `timeout`.
pub(crate) async fn open(
    url: &str,
    hello: &Hello,
    timeout: Duration,
    counters: &Counters,
) -> Result<(Ws, Welcome), ClientError> {
    match tokio::time::timeout(timeout, open_inner(url, hello, counters)).await {
        Ok(r) => r,
        Err(_) => Err(ClientError::HandshakeTimeout),
    }
}

async fn open_inner(
    url: &str,
    hello: &Hello,
    counters: &Counters,
) -> Result<(Ws, Welcome), ClientError> {
    // The protocol caps server messages at 1 MiB; refuse anything larger at the frame layer too,
    // before it is buffered.
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_SERVER_MESSAGE))
        .max_frame_size(Some(MAX_SERVER_MESSAGE));
    // Nagle off: inputs and pings are small and latency-sensitive.
    let (mut ws, _response) =
        tokio_tungstenite::connect_async_with_config(url, Some(config), true).await?;
    let bytes = ClientMessage::Hello(hello.clone()).to_bytes()?;
    counters.sent(bytes.len());
    ws.send(Message::binary(bytes)).await?;
    loop {
        let Some(msg) = ws.next().await else {
            return Err(ClientError::ClosedDuringHandshake);
        };
        match msg? {
            Message::Binary(b) => {
                counters.received(b.len());
                return match ServerMessage::decode(&b, None)? {
                    ServerMessage::Welcome(w) => {
                        if !hello.versions.contains(&w.version) {
                            return Err(ClientError::VersionMismatch(w.version));
                        }
                        Ok((ws, w))
                    }
                    ServerMessage::Kick(k) => Err(ClientError::Kicked(k)),
                    _ => Err(ClientError::Protocol("expected Welcome or Kick first")),
                };
            }
            Message::Text(_) => return Err(ClientError::Protocol("text frame")),
            Message::Close(_) => return Err(ClientError::ClosedDuringHandshake),
            // Control frames: tungstenite answers pings itself.
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
        }
    }
}
