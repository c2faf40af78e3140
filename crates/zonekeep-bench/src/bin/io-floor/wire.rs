//! What crosses a connection: the server's frames out, the client's small records in, over either
//! WebSocket binary messages or raw TCP.
//!
//! The WebSocket side is tokio-tungstenite configured as the host configures axum's WebSocket
//! (which wraps the same tokio-tungstenite `WebSocketStream`): unbuffered writes, a 1 KiB read
//! buffer, Nagle off, a 128 KiB socket send buffer. Raw TCP writes the same bytes without framing,
//! so the two differ only by what WebSocket adds.

use bytes::Bytes;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// Size of every client → server record (an input or a clock ping): about a Zonekeep Input.
pub const RECORD: usize = 12;
/// First byte of an input record.
pub const TAG_INPUT: u8 = 1;
/// First byte of a clock-ping record; the server answers each with a pong.
pub const TAG_PING: u8 = 2;
/// Size of the server's pong.
pub const PONG_BYTES: usize = 24;
/// The host's default socket send buffer (`socket_send_buffer`).
const SEND_BUFFER: u32 = 128 << 10;

/// How bytes travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// WebSocket binary messages.
    Ws,
    /// Raw TCP, no framing.
    Raw,
}

impl Transport {
    /// The name used on the command line between the two halves.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Ws => "ws",
            Transport::Raw => "raw",
        }
    }

    /// The transport named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "ws" => Some(Transport::Ws),
            "raw" => Some(Transport::Raw),
            _ => None,
        }
    }
}

/// A record of `tag` carrying `seq`, padded to [`RECORD`] bytes.
pub fn record(tag: u8, seq: u32) -> [u8; RECORD] {
    let mut r = [0u8; RECORD];
    r[0] = tag;
    r[1..5].copy_from_slice(&seq.to_le_bytes());
    r
}

/// A loopback listener whose accepted sockets inherit the host's send buffer size (Linux copies
/// the listener's `SO_SNDBUF` into each accepted socket). Must be called inside a runtime.
pub fn listener() -> std::io::Result<TcpListener> {
    let s = TcpSocket::new_v4()?;
    s.set_reuseaddr(true)?;
    s.set_send_buffer_size(SEND_BUFFER)?;
    s.bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))?;
    s.listen(1024)
}

/// The host's WebSocket settings (`ServerConfig` defaults).
pub fn server_ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(1024)
        .write_buffer_size(0)
        .max_write_buffer_size((1 << 20) + (64 << 10))
}

/// The write half of a server connection.
pub enum Writer {
    /// WebSocket sink.
    Ws(SplitSink<WebSocketStream<TcpStream>, Message>),
    /// Raw TCP write half.
    Raw(OwnedWriteHalf),
}

impl Writer {
    /// Write one frame whole; false once the connection is gone.
    pub async fn send(&mut self, frame: Bytes) -> bool {
        match self {
            // `send` = feed + flush: one write per frame, as the host's writer does.
            Writer::Ws(s) => s.send(Message::Binary(frame)).await.is_ok(),
            Writer::Raw(w) => w.write_all(&frame).await.is_ok(),
        }
    }
}

/// The read half of a server connection.
pub enum Reader {
    /// WebSocket stream.
    Ws(SplitStream<WebSocketStream<TcpStream>>),
    /// Raw TCP read half with the bytes of a record cut by a read boundary.
    Raw {
        /// The socket.
        half: OwnedReadHalf,
        /// Read buffer; `carry` bytes at its start are an incomplete record.
        buf: Box<[u8; 1024]>,
        /// Bytes of an incomplete record at the start of `buf`.
        carry: usize,
    },
}

impl Reader {
    /// Read what the client sent next: how many clock pings it held (each owed a pong); `None`
    /// once the connection is gone.
    pub async fn next(&mut self) -> Option<usize> {
        match self {
            Reader::Ws(s) => loop {
                match s.next().await? {
                    Ok(Message::Binary(b)) => {
                        return Some(usize::from(b.first() == Some(&TAG_PING)))
                    }
                    Ok(Message::Close(_)) | Err(_) => return None,
                    Ok(_) => continue,
                }
            },
            Reader::Raw { half, buf, carry } => {
                let n = half.read(&mut buf[*carry..]).await.ok()?;
                if n == 0 {
                    return None;
                }
                let end = *carry + n;
                let whole = end / RECORD * RECORD;
                let pings = buf[..whole]
                    .chunks_exact(RECORD)
                    .filter(|r| r[0] == TAG_PING)
                    .count();
                buf.copy_within(whole..end, 0);
                *carry = end - whole;
                Some(pings)
            }
        }
    }
}

/// Set up an accepted socket as the host does (Nagle off) and, for WebSocket, complete the
/// server handshake; `None` when the client went away first.
pub async fn accept(stream: TcpStream, transport: Transport) -> Option<(Writer, Reader)> {
    stream.set_nodelay(true).ok()?;
    match transport {
        Transport::Ws => {
            let ws = tokio_tungstenite::accept_async_with_config(stream, Some(server_ws_config()))
                .await
                .ok()?;
            let (sink, stream) = ws.split();
            Some((Writer::Ws(sink), Reader::Ws(stream)))
        }
        Transport::Raw => {
            let (r, w) = stream.into_split();
            Some((
                Writer::Raw(w),
                Reader::Raw {
                    half: r,
                    buf: Box::new([0u8; 1024]),
                    carry: 0,
                },
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn raw_records_cut_by_read_boundaries_are_counted_once() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let l = listener().unwrap();
            let addr = l.local_addr().unwrap();
            let mut client = TcpStream::connect(addr).await.unwrap();
            let (stream, _) = l.accept().await.unwrap();
            let (_w, mut reader) = accept(stream, Transport::Raw).await.unwrap();
            let bytes: Vec<u8> = [TAG_INPUT, TAG_PING, TAG_PING, TAG_INPUT, TAG_PING]
                .iter()
                .enumerate()
                .flat_map(|(i, t)| record(*t, i as u32))
                .collect();
            // 5-byte writes cut almost every record across reads.
            let writer = async move {
                for chunk in bytes.chunks(5) {
                    client.write_all(chunk).await.unwrap();
                    client.flush().await.unwrap();
                    tokio::task::yield_now().await;
                }
            };
            let read = async {
                let mut pings = 0;
                while let Some(n) = reader.next().await {
                    pings += n;
                }
                pings
            };
            let ((), pings) = tokio::join!(writer, read);
            assert_eq!(pings, 3);
        });
    }

    #[test]
    fn records_carry_tag_and_sequence_in_a_fixed_size() {
        let r = record(TAG_PING, 0x0102_0304);
        assert_eq!(r.len(), RECORD);
        assert_eq!(r[0], TAG_PING);
        assert_eq!(&r[1..5], &[4, 3, 2, 1]);
        assert_eq!(
            Transport::parse(Transport::Raw.name()),
            Some(Transport::Raw)
        );
        assert_eq!(Transport::parse(Transport::Ws.name()), Some(Transport::Ws));
        assert_eq!(Transport::parse("udp"), None);
    }
}
