//! The transport under a connection: a WebSocket, or a WebTransport session (PROTOCOL.md §1.1)
//! with its control stream and datagrams. The driver reads and writes protocol messages through
//! it and never sees frames or streams.

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::{Bytes, Message};
use wtransport::{Connection, RecvStream, SendStream};
use zonekeep_protocol::limits::MAX_SERVER_MESSAGE;
use zonekeep_protocol::wire::{put_frame, FrameLength};

use super::socket::Ws;

/// An open transport.
pub(crate) enum Link {
    /// Every message is a WebSocket message (boxed: the socket is hundreds of bytes, and one
    /// connection holds one link).
    WebSocket(Box<Ws>),
    /// Messages on a control stream, States and Inputs in datagrams.
    WebTransport(WtLink),
}

/// A WebTransport session and its control stream.
pub(crate) struct WtLink {
    pub(crate) conn: Connection,
    pub(crate) send: SendStream,
    pub(crate) recv: RecvStream,
}

/// What the transport handed up.
pub(crate) enum Incoming {
    /// One server message.
    Message(Bytes),
    /// A datagram (a State).
    Datagram(Bytes),
    /// The host closed: with the close code when it gave one (4000 + a Kick code after a Kick).
    Closed(Option<u32>),
    /// The transport failed.
    Failed(String),
    /// Something that carries no message (a WebSocket control frame).
    Nothing,
    /// A text frame, which the protocol forbids.
    Text,
}

/// The next message of a control stream (PROTOCOL.md §1.1: a canonical LEB128 length of at
/// most 5 bytes, then the message), `Err` when it ended, its length is malformed or announces
/// more than a server message may hold.
pub async fn read_message(recv: &mut RecvStream) -> Result<Bytes, ()> {
    let max = u32::try_from(MAX_SERVER_MESSAGE).unwrap_or(u32::MAX);
    let mut length = FrameLength::new(max);
    let len = loop {
        let mut b = [0u8; 1];
        match recv.read(&mut b).await {
            Ok(Some(1)) => {}
            _ => return Err(()),
        }
        if let Some(len) = length.push(b[0]).map_err(|_| ())? {
            break len as usize;
        }
    };
    let mut body = vec![0u8; len];
    recv.read_exact(&mut body).await.map_err(|_| ())?;
    Ok(Bytes::from(body))
}

/// Writes one message on a control stream, its length in front.
pub async fn write_message(send: &mut SendStream, bytes: &[u8]) -> Result<(), String> {
    let mut framed = Vec::with_capacity(bytes.len() + 5);
    put_frame(&mut framed, bytes);
    send.write_all(&framed).await.map_err(|e| e.to_string())
}

impl WtLink {
    /// Writes one message on the control stream.
    pub(crate) async fn write_message(&mut self, bytes: &[u8]) -> Result<(), String> {
        write_message(&mut self.send, bytes).await
    }

    /// How the session ended, once it has.
    async fn closed(&self) -> Incoming {
        match self.conn.closed().await {
            wtransport::error::ConnectionError::ApplicationClosed(c) => {
                Incoming::Closed(u32::try_from(c.code().into_inner()).ok())
            }
            other => Incoming::Failed(other.to_string()),
        }
    }
}

impl Link {
    /// The next thing the host sent.
    pub(crate) async fn next(&mut self) -> Incoming {
        match self {
            Link::WebSocket(ws) => match ws.next().await {
                None => Incoming::Closed(None),
                Some(Err(e)) => Incoming::Failed(e.to_string()),
                Some(Ok(Message::Binary(b))) => Incoming::Message(b),
                Some(Ok(Message::Text(_))) => Incoming::Text,
                Some(Ok(Message::Close(frame))) => {
                    Incoming::Closed(frame.map(|f| u32::from(u16::from(f.code))))
                }
                Some(Ok(_)) => Incoming::Nothing,
            },
            Link::WebTransport(wt) => {
                let conn = &wt.conn;
                let read = tokio::select! {
                    m = read_message(&mut wt.recv) => m.ok().map(Incoming::Message),
                    d = conn.receive_datagram() => d
                        .ok()
                        .map(|d| Incoming::Datagram(d.payload())),
                };
                match read {
                    Some(i) => i,
                    // The stream or the session ended: the session's close code says why.
                    None => wt.closed().await,
                }
            }
        }
    }

    /// Sends a message reliably (a WebSocket message, or on the control stream).
    pub(crate) async fn send(&mut self, bytes: Vec<u8>) -> Result<(), String> {
        match self {
            Link::WebSocket(ws) => ws
                .send(Message::binary(bytes))
                .await
                .map_err(|e| e.to_string()),
            Link::WebTransport(wt) => wt.write_message(&bytes).await,
        }
    }

    /// Closes politely, bounded by the caller.
    pub(crate) async fn close(self) {
        match self {
            Link::WebSocket(ws) => {
                let mut ws = *ws;
                if ws.close(None).await.is_ok() {
                    while let Some(Ok(_)) = ws.next().await {}
                }
            }
            Link::WebTransport(mut wt) => {
                let _ = wt.send.finish().await;
                wt.conn.close(0u32.into(), b"");
                let _ = wt.conn.closed().await;
            }
        }
    }
}
