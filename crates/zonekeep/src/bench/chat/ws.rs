//! The WebSocket client of `bench chat`: tokio-tungstenite's, split into a reading and a writing
//! half so a session's reader and writer run as separate tasks, with the few calls the bench
//! makes (binary messages out, whole messages and Pings in, a Close).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::{frame::coding::CloseCode, CloseFrame, Message};
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// One message from the host.
#[derive(Debug)]
pub(super) enum Incoming {
    /// A data message (binary; the host sends no text).
    Data(Bytes),
    /// A WebSocket Ping: answer its payload with [`Writer::pong`].
    Ping(Vec<u8>),
    /// The host closed, with its close code if it gave one.
    Close(Option<u16>),
}

/// The reading half.
pub(super) struct Reader {
    half: SplitStream<Socket>,
    /// Set once the writing half sent its Close.
    closed: Arc<AtomicBool>,
}

/// The writing half.
pub(super) struct Writer {
    half: SplitSink<Socket, Message>,
    closed: Arc<AtomicBool>,
}

/// Opens `ws://{authority}{path}`; the error is a short reason (`connect: …`, `http 429`, …).
pub(super) async fn connect(authority: &str, path: &str) -> Result<(Reader, Writer), String> {
    let url = format!("ws://{authority}{path}");
    let (socket, _) = match tokio_tungstenite::connect_async(&url).await {
        Ok(s) => s,
        Err(WsError::Http(answer)) => return Err(format!("http {}", answer.status().as_u16())),
        Err(e) => return Err(format!("connect: {e}")),
    };
    if let MaybeTlsStream::Plain(tcp) = socket.get_ref() {
        tcp.set_nodelay(true).map_err(|e| format!("connect: {e}"))?;
    }
    let (half_w, half_r) = socket.split();
    let closed = Arc::new(AtomicBool::new(false));
    Ok((
        Reader {
            half: half_r,
            closed: Arc::clone(&closed),
        },
        Writer {
            half: half_w,
            closed,
        },
    ))
}

impl Reader {
    /// Whether this end already sent its Close (a Close heard then is the host's answer).
    pub(super) fn closing(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// The next message; `Err` when the socket broke or the host broke the framing. Cancel-safe.
    pub(super) async fn next(&mut self) -> Result<Incoming, String> {
        loop {
            match self.half.next().await {
                None => return Ok(Incoming::Close(None)),
                Some(Err(e)) => return Err(format!("read: {e}")),
                Some(Ok(Message::Binary(b))) => return Ok(Incoming::Data(b)),
                Some(Ok(Message::Text(t))) => {
                    return Ok(Incoming::Data(Bytes::from(t.to_string())))
                }
                Some(Ok(Message::Ping(p))) => return Ok(Incoming::Ping(p.to_vec())),
                Some(Ok(Message::Close(c))) => {
                    return Ok(Incoming::Close(c.map(|c| u16::from(c.code))))
                }
                Some(Ok(Message::Pong(_) | Message::Frame(_))) => continue,
            }
        }
    }
}

impl Writer {
    /// Sends one binary message.
    pub(super) async fn binary(&mut self, payload: &[u8]) -> Result<(), String> {
        self.half
            .send(Message::Binary(Bytes::copy_from_slice(payload)))
            .await
            .map_err(|e| format!("write: {e}"))
    }

    /// Answers a Ping.
    pub(super) async fn pong(&mut self, payload: &[u8]) -> Result<(), String> {
        self.half
            .send(Message::Pong(Bytes::copy_from_slice(payload)))
            .await
            .map_err(|e| format!("write: {e}"))
    }

    /// Sends a Close (normal closure).
    pub(super) async fn close(&mut self) {
        self.closed.store(true, Ordering::Relaxed);
        let frame = CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        };
        let _ = self.half.send(Message::Close(Some(frame))).await;
    }
}
