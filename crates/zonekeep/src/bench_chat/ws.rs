//! The WebSocket client of `bench chat` (RFC 6455, client side, plain `ws://` only): the HTTP/1.1
//! upgrade, then binary messages out (masked, one frame each) and whole messages in (fragments
//! joined, Pings handed back to be answered). The binary's other WebSocket clients live in
//! `zonekeep-client` and `zonekeep-bench`, which expose no raw socket; this one is small because
//! the host is the only peer: no extensions, no subprotocols, no TLS.
//!
//! The upgrade answer's `Sec-WebSocket-Accept` is not checked (that would need SHA-1, which the
//! binary does not link): a `101` is taken as the upgrade. The host is trusted here; this is a
//! load generator, not a client for the open network.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use zonekeep_protocol::limits::MAX_SERVER_MESSAGE;

/// Longest upgrade answer read before giving up on it.
const MAX_HEAD: usize = 16 << 10;
/// Any valid key: the host only hashes it into its answer, which is not checked (see above).
const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

const OP_CONTINUATION: u8 = 0x0;
const OP_TEXT: u8 = 0x1;
const OP_BINARY: u8 = 0x2;
const OP_CLOSE: u8 = 0x8;
const OP_PING: u8 = 0x9;
const OP_PONG: u8 = 0xA;

/// One message from the host.
#[derive(Debug)]
pub(super) enum Incoming {
    /// A data message (binary; the host sends no text).
    Data(BytesMut),
    /// A WebSocket Ping: answer its payload with [`Writer::pong`].
    Ping(Vec<u8>),
    /// The host closed, with its close code if it gave one.
    Close(Option<u16>),
}

/// The reading half.
pub(super) struct Reader {
    half: OwnedReadHalf,
    buf: BytesMut,
    /// A fragmented message being joined.
    partial: Option<BytesMut>,
    /// Set once the writing half sent its Close.
    closed: Arc<AtomicBool>,
}

/// The writing half.
pub(super) struct Writer {
    half: OwnedWriteHalf,
    /// The masking keys' generator (xorshift): RFC 6455 asks for a fresh key per frame.
    mask: u32,
    frame: Vec<u8>,
    closed: Arc<AtomicBool>,
}

/// Opens `ws://{authority}{path}`; the error is a short reason (`connect: …`, `http 429`, …).
pub(super) async fn connect(
    authority: &str,
    path: &str,
    seed: u32,
) -> Result<(Reader, Writer), String> {
    let tcp = TcpStream::connect(authority)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    tcp.set_nodelay(true).map_err(|e| format!("connect: {e}"))?;
    let (mut rd, mut wr) = tcp.into_split();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    wr.write_all(request.as_bytes())
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let mut buf = BytesMut::with_capacity(4096);
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_HEAD {
            return Err("upgrade: answer head too long".into());
        }
        let n = rd
            .read_buf(&mut buf)
            .await
            .map_err(|e| format!("upgrade: {e}"))?;
        if n == 0 {
            return Err("upgrade: closed before answering".into());
        }
    };
    let head = buf.split_to(end);
    let status_line = head[..].split(|b| *b == b'\r').next().unwrap_or_default();
    let status = String::from_utf8_lossy(status_line)
        .split_whitespace()
        .nth(1)
        .unwrap_or("?")
        .to_owned();
    if status != "101" {
        return Err(format!("http {status}"));
    }
    let closed = Arc::new(AtomicBool::new(false));
    let reader = Reader {
        half: rd,
        buf,
        partial: None,
        closed: Arc::clone(&closed),
    };
    let writer = Writer {
        half: wr,
        mask: seed | 1,
        frame: Vec::with_capacity(512),
        closed,
    };
    Ok((reader, writer))
}

impl Reader {
    /// Whether this end already sent its Close (a Close heard then is the host's answer).
    pub(super) fn closing(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// The next message; `Err` when the socket broke or the host broke the framing. Cancel-safe:
    /// what was read stays in the buffer for the next call.
    pub(super) async fn next(&mut self) -> Result<Incoming, String> {
        loop {
            if let Some(m) = self.parse()? {
                return Ok(m);
            }
            let n = self
                .half
                .read_buf(&mut self.buf)
                .await
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("the host closed the socket without a Close".into());
            }
        }
    }

    /// A whole message from the buffer, if one is there.
    fn parse(&mut self) -> Result<Option<Incoming>, String> {
        loop {
            let b = &self.buf[..];
            if b.len() < 2 {
                return Ok(None);
            }
            let (fin, opcode) = (b[0] & 0x80 != 0, b[0] & 0x0f);
            let masked = b[1] & 0x80 != 0;
            let (len, mut at) = match b[1] & 0x7f {
                126 if b.len() >= 4 => (u64::from(u16::from_be_bytes([b[2], b[3]])), 4),
                127 if b.len() >= 10 => {
                    let mut l = [0u8; 8];
                    l.copy_from_slice(&b[2..10]);
                    (u64::from_be_bytes(l), 10)
                }
                126 | 127 => return Ok(None),
                l => (u64::from(l), 2),
            };
            if len > MAX_SERVER_MESSAGE as u64 {
                return Err(format!("a frame of {len} bytes"));
            }
            let mask = if masked {
                if b.len() < at + 4 {
                    return Ok(None);
                }
                let m = [b[at], b[at + 1], b[at + 2], b[at + 3]];
                at += 4;
                Some(m)
            } else {
                None
            };
            // Below MAX_SERVER_MESSAGE, checked above.
            let len = len as usize;
            if b.len() < at + len {
                self.buf.reserve(at + len - b.len());
                return Ok(None);
            }
            self.buf.advance(at);
            let mut payload = self.buf.split_to(len);
            if let Some(m) = mask {
                for (i, byte) in payload.iter_mut().enumerate() {
                    *byte ^= m[i % 4];
                }
            }
            match opcode {
                OP_PING => return Ok(Some(Incoming::Ping(payload.to_vec()))),
                OP_PONG => continue,
                OP_CLOSE => {
                    let code =
                        (payload.len() >= 2).then(|| u16::from_be_bytes([payload[0], payload[1]]));
                    return Ok(Some(Incoming::Close(code)));
                }
                OP_BINARY | OP_TEXT if self.partial.is_some() => {
                    return Err("a new message inside a fragmented one".into())
                }
                OP_BINARY | OP_TEXT if fin => return Ok(Some(Incoming::Data(payload))),
                OP_BINARY | OP_TEXT => self.partial = Some(payload),
                OP_CONTINUATION => {
                    let Some(mut whole) = self.partial.take() else {
                        return Err("a continuation frame with no message to continue".into());
                    };
                    if whole.len() + payload.len() > MAX_SERVER_MESSAGE {
                        return Err("a message over 1 MiB".into());
                    }
                    whole.extend_from_slice(&payload);
                    if fin {
                        return Ok(Some(Incoming::Data(whole)));
                    }
                    self.partial = Some(whole);
                }
                other => return Err(format!("a frame of opcode {other}")),
            }
        }
    }
}

impl Writer {
    /// Sends one binary message.
    pub(super) async fn binary(&mut self, payload: &[u8]) -> Result<(), String> {
        self.frame(OP_BINARY, payload).await
    }

    /// Answers a Ping.
    pub(super) async fn pong(&mut self, payload: &[u8]) -> Result<(), String> {
        self.frame(OP_PONG, payload).await
    }

    /// Sends a Close (normal closure) and shuts the socket's writing side.
    pub(super) async fn close(&mut self) {
        self.closed.store(true, Ordering::Relaxed);
        let _ = self.frame(OP_CLOSE, &1000u16.to_be_bytes()).await;
        let _ = self.half.shutdown().await;
    }

    async fn frame(&mut self, opcode: u8, payload: &[u8]) -> Result<(), String> {
        self.mask ^= self.mask << 13;
        self.mask ^= self.mask >> 17;
        self.mask ^= self.mask << 5;
        let key = self.mask.to_be_bytes();
        let f = &mut self.frame;
        f.clear();
        f.push(0x80 | opcode);
        match payload.len() {
            n if n < 126 => f.push(0x80 | n as u8),
            n if n <= usize::from(u16::MAX) => {
                f.push(0x80 | 126);
                f.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                f.push(0x80 | 127);
                f.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        f.extend_from_slice(&key);
        f.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
        self.half
            .write_all(f)
            .await
            .map_err(|e| format!("write: {e}"))
    }
}
