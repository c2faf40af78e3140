//! A connection's first message, read frame by frame without reading past it.
//!
//! The async runtime reads the Hello and admits it; the socket then moves to an I/O thread
//! (see [`super::io`]). A general WebSocket reader fills a buffer with whatever has arrived, so
//! bytes a client sent right after its Hello could be stranded in a buffer the I/O thread never
//! sees. This reader takes exactly each frame's header and payload, so nothing after the Hello is
//! consumed except bytes already buffered by the HTTP upgrade, which are handed on.

use bytes::{Buf, Bytes};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::error::SessionError;

/// The upgraded socket and the bytes the HTTP layer had read past the upgrade request.
pub(crate) struct Prefixed {
    pre: Bytes,
    stream: TcpStream,
}

impl Prefixed {
    /// The socket, after `pre` (the upgrade's leftover bytes).
    pub(crate) fn new(stream: TcpStream, pre: Bytes) -> Self {
        Self { pre, stream }
    }

    /// The socket and the bytes read from it but not consumed.
    pub(crate) fn into_parts(self) -> (TcpStream, Vec<u8>) {
        (self.stream, self.pre.to_vec())
    }

    async fn fill(&mut self, buf: &mut [u8]) -> std::io::Result<()> {
        let n = self.pre.len().min(buf.len());
        buf[..n].copy_from_slice(&self.pre[..n]);
        self.pre.advance(n);
        if n < buf.len() {
            self.stream.read_exact(&mut buf[n..]).await?;
        }
        Ok(())
    }
}

const OP_CONTINUATION: u8 = 0x0;
const OP_TEXT: u8 = 0x1;
const OP_BINARY: u8 = 0x2;
const OP_CLOSE: u8 = 0x8;
const OP_PING: u8 = 0x9;
const OP_PONG: u8 = 0xA;

/// The first binary message; `Ok(None)` when the client closed or the socket broke before it
/// (counted in `metrics` as a disconnect). A message over `max` bytes is `TooLarge`, and one
/// over twice `max` is refused before its payload is read.
pub(crate) async fn read_hello(
    src: &mut Prefixed,
    max: usize,
    metrics: &crate::metrics::Metrics,
) -> Result<Option<Bytes>, SessionError> {
    let hard = max.saturating_mul(2) as u64;
    let mut message: Vec<u8> = Vec::new();
    let mut in_message = false;
    loop {
        let mut head = [0u8; 2];
        if src.fill(&mut head).await.is_err() {
            metrics.disconnect("dropped");
            return Ok(None);
        }
        let fin = head[0] & 0x80 != 0;
        let opcode = head[0] & 0x0f;
        if head[0] & 0x70 != 0 {
            return Err(protocol("reserved bits set"));
        }
        if head[1] & 0x80 == 0 {
            return Err(protocol("unmasked frame from client"));
        }
        let len = match head[1] & 0x7f {
            126 => {
                let mut b = [0u8; 2];
                if src.fill(&mut b).await.is_err() {
                    metrics.disconnect("dropped");
                    return Ok(None);
                }
                u64::from(u16::from_be_bytes(b))
            }
            127 => {
                let mut b = [0u8; 8];
                if src.fill(&mut b).await.is_err() {
                    metrics.disconnect("dropped");
                    return Ok(None);
                }
                u64::from_be_bytes(b)
            }
            n => u64::from(n),
        };
        let control = opcode >= 8;
        if control && (!fin || len > 125) {
            return Err(protocol("fragmented or oversized control frame"));
        }
        if !control && message.len() as u64 + len > hard {
            return Err(SessionError::TooLarge {
                len: usize::try_from(message.len() as u64 + len).unwrap_or(usize::MAX),
                max,
            });
        }
        let mut mask = [0u8; 4];
        // Bounded above: a control frame is at most 125 bytes, a data frame at most `hard`.
        let mut payload = vec![0u8; usize::try_from(len).unwrap_or(0)];
        if src.fill(&mut mask).await.is_err() || src.fill(&mut payload).await.is_err() {
            metrics.disconnect("dropped");
            return Ok(None);
        }
        for (i, b) in payload.iter_mut().enumerate() {
            *b ^= mask[i % 4];
        }
        match opcode {
            OP_CONTINUATION if in_message => message.extend_from_slice(&payload),
            OP_CONTINUATION => return Err(protocol("continuation frame outside a message")),
            OP_TEXT => return Err(protocol("text frame (binary only)")),
            OP_BINARY if in_message => {
                return Err(protocol("a new message inside a fragmented one"))
            }
            OP_BINARY => {
                message = payload;
                in_message = true;
            }
            OP_CLOSE => {
                metrics.disconnect("closed");
                return Ok(None);
            }
            // Before the Hello there is nothing to prove: Pings wait for the I/O thread's reader.
            OP_PING | OP_PONG => continue,
            _ => return Err(protocol("unknown opcode")),
        }
        if fin && in_message {
            if message.len() > max {
                return Err(SessionError::TooLarge {
                    len: message.len(),
                    max,
                });
            }
            return Ok(Some(Bytes::from(message)));
        }
    }
}

fn protocol(what: &str) -> SessionError {
    SessionError::Protocol(what.into())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tokio::io::AsyncWriteExt;

    fn masked(first: u8, payload: &[u8]) -> Vec<u8> {
        let mask = [1u8, 2, 3, 4];
        let mut out = vec![first];
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

    async fn pair(sent: Vec<u8>, pre: Vec<u8>) -> (Prefixed, TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (server, _) = l.accept().await.unwrap();
        client.write_all(&sent).await.unwrap();
        (Prefixed::new(server, Bytes::from(pre)), client)
    }

    #[tokio::test]
    async fn the_hello_is_read_whole_and_nothing_after_it() {
        let metrics = crate::metrics::Metrics::new(8);
        // The first fragment arrived with the upgrade request; a Ping sits between fragments.
        let mut sent = masked(OP_PING | 0x80, b"p");
        sent.extend(masked(OP_CONTINUATION | 0x80, b"lo"));
        let after = masked(OP_BINARY | 0x80, b"next");
        sent.extend(&after);
        let (mut src, _client) = pair(sent, masked(OP_BINARY, b"hel")).await;
        let hello = read_hello(&mut src, 100, &metrics).await.unwrap().unwrap();
        assert_eq!(&hello[..], b"hello");
        let (mut stream, left) = src.into_parts();
        assert!(left.is_empty());
        let mut rest = vec![0u8; after.len()];
        stream.read_exact(&mut rest).await.unwrap();
        assert_eq!(
            rest, after,
            "the next message is still in the socket, untouched"
        );
    }

    #[tokio::test]
    async fn bytes_past_the_hello_in_the_upgrade_buffer_are_handed_on() {
        let metrics = crate::metrics::Metrics::new(8);
        let mut pre = masked(OP_BINARY | 0x80, b"hello");
        pre.extend(masked(OP_BINARY | 0x80, b"input"));
        let (mut src, _client) = pair(Vec::new(), pre).await;
        assert_eq!(
            &read_hello(&mut src, 100, &metrics).await.unwrap().unwrap()[..],
            b"hello"
        );
        assert_eq!(src.into_parts().1, masked(OP_BINARY | 0x80, b"input"));
    }

    #[tokio::test]
    async fn hostile_first_frames_are_refused_with_typed_errors() {
        let metrics = crate::metrics::Metrics::new(8);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (masked(OP_TEXT | 0x80, b"hi"), "text"),
            (vec![0x82, 0x02, b'h', b'i'], "unmasked"),
            (masked(0xC2, b"hi"), "reserved"),
            (masked(OP_CONTINUATION | 0x80, b"hi"), "continuation"),
            (masked(0x83, b"hi"), "opcode"),
            (masked(OP_PING, b"hi"), "control"),
        ];
        for (bytes, what) in cases {
            let (mut src, _client) = pair(bytes, Vec::new()).await;
            match read_hello(&mut src, 100, &metrics).await {
                Err(SessionError::Protocol(m)) => assert!(m.contains(what), "{what}: {m}"),
                other => panic!("{what}: {:?}", other.map(|o| o.map(|b| b.len()))),
            }
        }
        let (mut src, _client) = pair(masked(OP_BINARY | 0x80, &[0u8; 150]), Vec::new()).await;
        assert!(matches!(
            read_hello(&mut src, 100, &metrics).await,
            Err(SessionError::TooLarge { len: 150, max: 100 })
        ));
        // Far over the limit: refused from the header, before any payload is read.
        let mut huge = vec![0x82, 0x80 | 127];
        huge.extend_from_slice(&(1u64 << 40).to_be_bytes());
        let (mut src, _client) = pair(huge, Vec::new()).await;
        assert!(matches!(
            read_hello(&mut src, 100, &metrics).await,
            Err(SessionError::TooLarge { max: 100, .. })
        ));
        let (mut src, client) = pair(masked(OP_BINARY, b"half"), Vec::new()).await;
        drop(client);
        assert!(read_hello(&mut src, 100, &metrics).await.unwrap().is_none());
    }
}
