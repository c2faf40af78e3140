//! The accept thread: it takes each connection on the loopback listener, completes its
//! WebSocket handshake where the transport has one, and deals it to the I/O threads in turn.

use std::io;
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

use tokio_tungstenite::tungstenite;

use crate::wire::{self, Transport};

/// How long a WebSocket handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The other variants' loopback listener (its send buffer is inherited by accepted sockets), as a
/// blocking std listener.
pub(super) fn std_listener() -> io::Result<TcpListener> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    let _in_runtime = rt.enter();
    let listener = wire::listener()?.into_std()?;
    listener.set_nonblocking(false)?;
    Ok(listener)
}

/// Accept connections, set each up and deal it to the I/O threads in turn.
pub(super) fn accept(
    listener: TcpListener,
    transport: Transport,
    inboxes: Vec<mpsc::Sender<TcpStream>>,
) {
    let mut next = 0usize;
    for stream in listener.incoming() {
        let Some(stream) = stream.ok().and_then(|s| handshake(s, transport)) else {
            continue;
        };
        if let Some(inbox) = inboxes.get(next % inboxes.len().max(1)) {
            let _ = inbox.send(stream);
        }
        next += 1;
    }
}

/// Nagle off as the host does and, for WebSocket, the server handshake by tungstenite with the
/// host's settings; `None` when the client went away or failed it.
fn handshake(stream: TcpStream, transport: Transport) -> Option<TcpStream> {
    stream.set_nodelay(true).ok()?;
    if transport == Transport::Raw {
        return Some(stream);
    }
    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT)).ok()?;
    stream.set_write_timeout(Some(HANDSHAKE_TIMEOUT)).ok()?;
    // A client sends nothing after its request until the response has come, so no byte of its
    // first frame can be left behind in tungstenite's read buffer.
    let stream = tungstenite::accept_with_config(stream, Some(wire::server_ws_config()))
        .ok()?
        .into_inner();
    stream.set_read_timeout(None).ok()?;
    stream.set_write_timeout(None).ok()?;
    Some(stream)
}
