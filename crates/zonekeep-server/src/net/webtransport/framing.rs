//! What travels on a WebTransport session (PROTOCOL.md §1.1): messages on its control stream,
//! each a `varint` length then that many bytes of one message; States to the client in
//! datagrams when they fit one; Inputs from the client in datagrams.

use std::future::Future;

use bytes::Bytes;
use wtransport::{RecvStream, SendStream};
use zonekeep_protocol::messages::{ClientMessage, Input};
use zonekeep_protocol::wire::put_varint;

use crate::error::SessionError;
use crate::metrics::Metrics;
use crate::net::conn::DatagramPath;
use crate::session::Limits;

/// Whether a frame goes to the client as a datagram: a State (§5.8) that fits one. Everything
/// else (and a State too large) goes on the control stream, in order.
pub(crate) fn goes_as_datagram(frame: &[u8], path: Option<&DatagramPath>) -> bool {
    path.is_some_and(|p| p.carries(frame))
}

/// Acts on one client datagram, which must be an Inputs (§4.5): its State acknowledgement is
/// noted on `path`, each input it brings for the first time (a sequence above `seen`, which moves
/// up) goes to `each`, and a datagram that brings nothing new spends a datagram token instead
/// (inputs repeat in every datagram until acknowledged, so a repeat is normal, a flood is not:
/// past the abuse bound the client is ended).
pub(crate) fn take_inputs(
    bytes: &[u8],
    path: Option<&DatagramPath>,
    seen: &mut u32,
    limits: &Limits,
    metrics: &Metrics,
    mut each: impl FnMut(Input) -> Result<(), SessionError>,
) -> Result<(), SessionError> {
    let batch = match ClientMessage::decode(bytes) {
        Ok(ClientMessage::Inputs(b)) => b,
        Ok(_) => {
            return Err(SessionError::Protocol(
                "a datagram other than Inputs".into(),
            ))
        }
        Err(e) => return Err(SessionError::Protocol(format!("undecodable datagram: {e}"))),
    };
    if let Some(path) = path {
        path.acknowledge(batch.state_ack);
    }
    let mut new = false;
    for i in batch.inputs {
        if i.seq <= *seen {
            continue;
        }
        *seen = i.seq;
        new = true;
        each(i)?;
    }
    if !new && limits.datagrams.check().is_err() {
        metrics.datagram_rate_limited();
        if limits.abuse.check().is_err() {
            return Err(SessionError::RateLimited);
        }
    }
    Ok(())
}

/// Reads the next message, at most `max` bytes; `Ok(None)` when the client finished the stream
/// or the session ended. A length over `max` is refused before anything is read or allocated.
pub(crate) async fn read_message(
    stream: &mut RecvStream,
    max: usize,
) -> Result<Option<Bytes>, SessionError> {
    let mut len: u64 = 0;
    for i in 0..5u32 {
        let mut b = [0u8; 1];
        match stream.read(&mut b).await {
            Ok(Some(1)) => {}
            Ok(_) if i == 0 => return Ok(None),
            Ok(_) => {
                return Err(SessionError::Protocol(
                    "stream ended inside a length".into(),
                ))
            }
            Err(_) => return Ok(None),
        }
        let byte = b[0];
        if i == 4 && byte > 0x0f {
            return Err(SessionError::Protocol(
                "message length overflows u32".into(),
            ));
        }
        if i > 0 && byte == 0 {
            return Err(SessionError::Protocol(
                "non-canonical message length".into(),
            ));
        }
        len |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            if len > max {
                return Err(SessionError::TooLarge { len, max });
            }
            let mut body = vec![0u8; len];
            return match stream.read_exact(&mut body).await {
                Ok(()) => Ok(Some(Bytes::from(body))),
                Err(_) => Err(SessionError::Protocol(
                    "stream ended inside a message".into(),
                )),
            };
        }
    }
    Err(SessionError::Protocol(
        "message length overflows u32".into(),
    ))
}

/// A message being read from the client's control stream.
type Reading = std::pin::Pin<
    Box<dyn Future<Output = (RecvStream, Result<Option<Bytes>, SessionError>)> + Send>,
>;

/// The client's control stream, read message by message so that taking the next one is
/// cancel-safe: [`read_message`] awaits several reads for one message, and a `select!` that took
/// another branch (a datagram, a timer) while a message was half read would drop what it had
/// read and lose its place in the stream. The read in progress lives here across such branches.
pub(crate) struct StreamReader {
    reading: Reading,
    max: usize,
}

impl StreamReader {
    /// Reads `stream`'s messages, each at most `max` bytes.
    pub(crate) fn new(stream: RecvStream, max: usize) -> Self {
        Self {
            reading: read_owned(stream, max),
            max,
        }
    }

    /// The next message, as [`read_message`] answers; cancel-safe.
    pub(crate) async fn next(&mut self) -> Result<Option<Bytes>, SessionError> {
        let (stream, message) = (&mut self.reading).await;
        self.reading = read_owned(stream, self.max);
        message
    }
}

/// [`read_message`] on a stream it owns, handing the stream back with the message.
fn read_owned(mut stream: RecvStream, max: usize) -> Reading {
    Box::pin(async move {
        let message = read_message(&mut stream, max).await;
        (stream, message)
    })
}

/// Writes one message with its length in front.
pub(crate) async fn write_message(stream: &mut SendStream, message: &[u8]) -> bool {
    let mut framed = Vec::with_capacity(message.len() + 5);
    put_varint(&mut framed, message.len() as u64);
    framed.extend_from_slice(message);
    stream.write_all(&framed).await.is_ok()
}
