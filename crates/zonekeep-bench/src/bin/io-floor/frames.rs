//! Byte-level framing for the io_uring variants, which see only the bytes a socket carries: the
//! server's frames built once as wire bytes, and a streaming parser of what the clients send that
//! counts clock pings exactly as the tokio variants' readers do.
//!
//! Raw TCP: fixed [`RECORD`]-byte records; a whole record whose first byte is [`TAG_PING`] is owed
//! a pong. WebSocket (RFC 6455): masked client frames are unmasked and checked as tungstenite
//! checks them (reserved bits, masking, control frame rules, its default 16 MiB frame limit); a
//! whole binary message whose first payload byte is [`TAG_PING`] is owed a pong, as
//! `Message::Binary(b)` with `b.first() == Some(&TAG_PING)` is in [`crate::wire::Reader`]. Text
//! messages are skipped like any other non-binary message there (their UTF-8 is not checked).
//! Payloads are never buffered: only a data message's first byte and a control frame's payload
//! (at most 125 bytes) are kept.

use crate::wire::{RECORD, TAG_PING};

/// WebSocket opcodes (RFC 6455 §5.2).
const OP_CONTINUATION: u8 = 0x0;
const OP_TEXT: u8 = 0x1;
const OP_BINARY: u8 = 0x2;
const OP_CLOSE: u8 = 0x8;
const OP_PING: u8 = 0x9;
const OP_PONG: u8 = 0xA;
/// Longest control frame payload.
const MAX_CONTROL: usize = 125;
/// tungstenite's default `max_frame_size`: a longer frame ends the connection there, so here.
const MAX_FRAME: u64 = 16 << 20;

/// An unmasked server frame (FIN set) of `opcode` carrying `payload`: header and payload as they
/// go on the wire.
fn ws_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut out = Vec::with_capacity(len + 10);
    out.push(0x80 | opcode);
    if len < 126 {
        out.push(len as u8);
    } else if let Ok(short) = u16::try_from(len) {
        out.push(126);
        out.extend_from_slice(&short.to_be_bytes());
    } else {
        out.push(127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(payload);
    out
}

/// A binary message from the server, as tungstenite writes `Message::Binary(payload)`.
pub fn ws_binary(payload: &[u8]) -> Vec<u8> {
    ws_frame(OP_BINARY, payload)
}

/// The Pong control frame answering a client's Ping control frame (tungstenite echoes its payload).
pub fn ws_pong(payload: &[u8]) -> Vec<u8> {
    ws_frame(OP_PONG, payload)
}

/// Something a client sent that the server acts on or counts.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// A whole record (raw TCP) or binary message (WebSocket) that is a clock ping: owed a pong.
    ClockPing,
    /// A WebSocket Ping control frame and its payload: owed a Pong control frame.
    WsPing(&'a [u8]),
    /// A WebSocket Pong control frame.
    WsPong,
}

/// Why a connection ends on what its client sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The client sent a WebSocket Close frame.
    Close,
    /// The bytes break the WebSocket protocol (what tungstenite would refuse).
    Protocol(&'static str),
}

/// The parser of one connection's incoming bytes.
#[derive(Debug)]
pub enum Parser {
    /// Raw TCP records.
    Raw(RawParser),
    /// Masked WebSocket client frames.
    Ws(Box<WsParser>),
}

impl Parser {
    /// A parser for a connection of `transport`.
    pub fn new(transport: crate::wire::Transport) -> Self {
        match transport {
            crate::wire::Transport::Raw => Parser::Raw(RawParser::default()),
            crate::wire::Transport::Ws => Parser::Ws(Box::default()),
        }
    }

    /// Take the next bytes received, in order, calling `on` for every event they complete.
    pub fn feed(&mut self, data: &[u8], on: impl FnMut(Event<'_>)) -> Result<(), End> {
        match self {
            Parser::Raw(p) => {
                p.feed(data, on);
                Ok(())
            }
            Parser::Ws(p) => p.feed(data, on),
        }
    }
}

/// Raw TCP records cut anywhere by read boundaries.
#[derive(Debug, Default)]
pub struct RawParser {
    /// Bytes of the current record seen so far.
    offset: usize,
    /// The current record's first byte.
    tag: u8,
}

impl RawParser {
    fn feed(&mut self, data: &[u8], mut on: impl FnMut(Event<'_>)) {
        let mut i = 0;
        while i < data.len() {
            if self.offset == 0 {
                self.tag = data[i];
            }
            let take = (RECORD - self.offset).min(data.len() - i);
            self.offset += take;
            i += take;
            if self.offset == RECORD {
                if self.tag == TAG_PING {
                    on(Event::ClockPing);
                }
                self.offset = 0;
            }
        }
    }
}

/// Masked WebSocket client frames cut anywhere by read boundaries.
#[derive(Debug)]
pub struct WsParser {
    /// Header bytes of the next frame gathered so far (at most 2 + 8 + 4).
    head: [u8; 14],
    have: usize,
    /// In a frame's payload (its header is parsed).
    in_payload: bool,
    opcode: u8,
    fin: bool,
    mask: [u8; 4],
    /// Payload bytes of the current frame seen, and still to come.
    pos: u64,
    left: u64,
    /// The data message under way, if any: `Some(binary, first payload byte)`.
    message: Option<(bool, Option<u8>)>,
    /// The current control frame's unmasked payload.
    control: [u8; MAX_CONTROL],
}

impl Default for WsParser {
    fn default() -> Self {
        Self {
            head: [0; 14],
            have: 0,
            in_payload: false,
            opcode: 0,
            fin: false,
            mask: [0; 4],
            pos: 0,
            left: 0,
            message: None,
            control: [0; MAX_CONTROL],
        }
    }
}

impl WsParser {
    /// Bytes the header needs, given those gathered so far.
    fn header_len(&self) -> usize {
        if self.have < 2 {
            return 2;
        }
        let ext = match self.head[1] & 0x7F {
            126 => 2,
            127 => 8,
            _ => 0,
        };
        let mask = if self.head[1] & 0x80 != 0 { 4 } else { 0 };
        2 + ext + mask
    }

    fn feed(&mut self, data: &[u8], mut on: impl FnMut(Event<'_>)) -> Result<(), End> {
        let mut i = 0;
        loop {
            if !self.in_payload {
                loop {
                    let need = self.header_len();
                    if self.have == need {
                        break;
                    }
                    let Some(&b) = data.get(i) else {
                        return Ok(());
                    };
                    self.head[self.have] = b;
                    self.have += 1;
                    i += 1;
                }
                self.start_frame()?;
                if self.left == 0 {
                    self.end_frame(&mut on)?;
                }
                continue;
            }
            let take = self.left.min((data.len() - i) as u64) as usize;
            if take == 0 {
                return Ok(());
            }
            let chunk = &data[i..i + take];
            if self.opcode >= OP_CLOSE {
                for (k, b) in chunk.iter().enumerate() {
                    let at = self.pos as usize + k;
                    self.control[at] = b ^ self.mask[at % 4];
                }
            } else if let Some((_, first @ None)) = &mut self.message {
                *first = Some(chunk[0] ^ self.mask[(self.pos % 4) as usize]);
            }
            self.pos += take as u64;
            self.left -= take as u64;
            i += take;
            if self.left == 0 {
                self.end_frame(&mut on)?;
            }
        }
    }

    /// Check the gathered header and enter the frame's payload.
    fn start_frame(&mut self) -> Result<(), End> {
        let (b0, b1) = (self.head[0], self.head[1]);
        if b0 & 0x70 != 0 {
            return Err(End::Protocol("reserved bits set"));
        }
        if b1 & 0x80 == 0 {
            return Err(End::Protocol("unmasked client frame"));
        }
        let (len, ext) = match b1 & 0x7F {
            126 => (
                u64::from(u16::from_be_bytes([self.head[2], self.head[3]])),
                2,
            ),
            127 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&self.head[2..10]);
                (u64::from_be_bytes(b), 8)
            }
            n => (u64::from(n), 0),
        };
        self.mask.copy_from_slice(&self.head[2 + ext..6 + ext]);
        self.fin = b0 & 0x80 != 0;
        self.opcode = b0 & 0x0F;
        if len > MAX_FRAME {
            return Err(End::Protocol("frame too long"));
        }
        match self.opcode {
            OP_CLOSE | OP_PING | OP_PONG => {
                if !self.fin {
                    return Err(End::Protocol("fragmented control frame"));
                }
                if len > MAX_CONTROL as u64 {
                    return Err(End::Protocol("control frame too long"));
                }
            }
            OP_TEXT | OP_BINARY => {
                if self.message.is_some() {
                    return Err(End::Protocol("new message inside a fragmented one"));
                }
                self.message = Some((self.opcode == OP_BINARY, None));
            }
            OP_CONTINUATION => {
                if self.message.is_none() {
                    return Err(End::Protocol("continuation without a message"));
                }
            }
            _ => return Err(End::Protocol("reserved opcode")),
        }
        self.have = 0;
        self.pos = 0;
        self.left = len;
        self.in_payload = true;
        Ok(())
    }

    /// The current frame's payload is complete.
    fn end_frame(&mut self, on: &mut impl FnMut(Event<'_>)) -> Result<(), End> {
        self.in_payload = false;
        match self.opcode {
            OP_CLOSE => return Err(End::Close),
            OP_PING => on(Event::WsPing(&self.control[..self.pos as usize])),
            OP_PONG => on(Event::WsPong),
            _ if self.fin => {
                if let Some((true, Some(TAG_PING))) = self.message.take() {
                    on(Event::ClockPing);
                }
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::io::{Read, Write};

    use tokio_tungstenite::tungstenite::protocol::{Role, WebSocket};
    use tokio_tungstenite::tungstenite::{Bytes, Message};

    use super::*;
    use crate::wire::{record, Transport, TAG_INPUT};

    /// An in-memory stream: reads from `input`, collects writes in `output`.
    #[derive(Default)]
    struct Pipe {
        input: std::io::Cursor<Vec<u8>>,
        output: Vec<u8>,
    }

    impl Read for Pipe {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.input.read(buf)?;
            if n == 0 {
                return Err(std::io::ErrorKind::WouldBlock.into());
            }
            Ok(n)
        }
    }

    impl Write for Pipe {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.output.write(buf)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What a tungstenite client writes for `messages` (masked, random masks).
    fn client_bytes(messages: Vec<Message>) -> Vec<u8> {
        let mut ws = WebSocket::from_raw_socket(Pipe::default(), Role::Client, None);
        for m in messages {
            ws.send(m).unwrap();
        }
        std::mem::take(&mut ws.get_mut().output)
    }

    /// Feed `bytes` cut into `chunk`-byte pieces; the events as strings, and how it ended.
    fn parse(transport: Transport, bytes: &[u8], chunk: usize) -> (Vec<String>, Result<(), End>) {
        let mut p = Parser::new(transport);
        let mut events = Vec::new();
        for piece in bytes.chunks(chunk) {
            let r = p.feed(piece, |e| events.push(format!("{e:?}")));
            if r.is_err() {
                return (events, r);
            }
        }
        (events, Ok(()))
    }

    #[test]
    fn raw_pings_are_counted_once_whatever_the_cuts() {
        let bytes: Vec<u8> = [TAG_INPUT, TAG_PING, TAG_PING, TAG_INPUT, TAG_PING]
            .iter()
            .enumerate()
            .flat_map(|(i, t)| record(*t, i as u32))
            .collect();
        for chunk in 1..=bytes.len() {
            let (events, end) = parse(Transport::Raw, &bytes, chunk);
            assert_eq!(events.len(), 3, "chunk {chunk}");
            assert_eq!(end, Ok(()));
        }
        // A record not yet whole is not counted.
        let (events, _) = parse(Transport::Raw, &record(TAG_PING, 1)[..RECORD - 1], 64);
        assert!(events.is_empty());
    }

    #[test]
    fn tungstenite_client_frames_are_read_as_its_server_reads_them() {
        let bin = |tag: u8| Message::Binary(Bytes::copy_from_slice(&record(tag, 7)));
        let bytes = client_bytes(vec![
            bin(TAG_INPUT),
            bin(TAG_PING),
            Message::Ping(Bytes::from_static(b"hi")),
            Message::Text("\u{2}not binary".into()),
            Message::Pong(Bytes::new()),
            // Long enough for a 16-bit length; its first byte is a ping tag.
            Message::Binary(Bytes::from(vec![TAG_PING; 300])),
            Message::Binary(Bytes::new()),
            bin(TAG_PING),
        ]);
        let want = [
            "ClockPing",
            "WsPing([104, 105])",
            "WsPong",
            "ClockPing",
            "ClockPing",
        ];
        for chunk in 1..=bytes.len() {
            let (events, end) = parse(Transport::Ws, &bytes, chunk);
            assert_eq!(events, want, "chunk {chunk}");
            assert_eq!(end, Ok(()));
        }
        let close = client_bytes(vec![bin(TAG_PING), Message::Close(None)]);
        let (events, end) = parse(Transport::Ws, &close, 3);
        assert_eq!((events.len(), end), (1, Err(End::Close)));
    }

    #[test]
    fn fragmented_messages_count_by_their_first_byte_once_whole() {
        // Hand-built masked frames: binary [TAG_PING] not final, then a final continuation.
        let frame = |b0: u8, payload: &[u8]| {
            let mask = [0x11, 0x22, 0x33, 0x44];
            let mut f = vec![b0, 0x80 | payload.len() as u8];
            f.extend_from_slice(&mask);
            f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
            f
        };
        let mut bytes = frame(OP_BINARY, &[TAG_PING, 0]);
        let (events, _) = parse(Transport::Ws, &bytes, 1);
        assert!(events.is_empty(), "not final yet");
        bytes.extend(frame(0x80 | OP_PING, b"x"));
        bytes.extend(frame(0x80 | OP_CONTINUATION, &[TAG_INPUT]));
        let (events, end) = parse(Transport::Ws, &bytes, 1);
        assert_eq!(events, ["WsPing([120])", "ClockPing"]);
        assert_eq!(end, Ok(()));
        // Protocol errors end the connection.
        let refused = |bytes: &[u8]| parse(Transport::Ws, bytes, 64).1;
        assert_eq!(
            refused(&[0x82, 0x01, TAG_PING]),
            Err(End::Protocol("unmasked client frame"))
        );
        assert!(refused(&frame(0x80 | OP_CONTINUATION, &[1])).is_err());
        assert!(refused(&frame(OP_PING, &[1])).is_err());
        assert!(refused(&frame(0x80 | 0x3, &[1])).is_err());
        assert!(refused(&frame(0xC0 | OP_BINARY, &[1])).is_err());
    }

    #[test]
    fn server_frames_are_what_a_tungstenite_client_reads() {
        for len in [0usize, 24, 125, 126, 3200, 65535, 65536] {
            let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut bytes = ws_binary(&payload);
            bytes.extend(ws_pong(b"ab"));
            let pipe = Pipe {
                input: std::io::Cursor::new(bytes),
                output: Vec::new(),
            };
            let mut ws = WebSocket::from_raw_socket(pipe, Role::Client, None);
            assert_eq!(ws.read().unwrap(), Message::Binary(Bytes::from(payload)));
            assert_eq!(ws.read().unwrap(), Message::Pong(Bytes::from_static(b"ab")));
        }
    }
}
