//! The client half, run as a child process so that its CPU is not the server's: `N` clients on
//! one thread (like `zonekeep bench`'s bots) that read everything the server sends and send 10
//! inputs a second each, plus a clock ping once a second, spread evenly over each interval.
//!
//! It prints `ready` once every client is connected, then answers each `mark` line on its stdin
//! with its running totals (see [`Totals`]), and exits when stdin closes.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Bytes, Message};
use tokio_tungstenite::WebSocketStream;

use crate::wire::{record, Transport, TAG_INPUT, TAG_PING};

/// Inputs per second per client.
const INPUT_INTERVAL: Duration = Duration::from_millis(100);
/// A clock ping goes with every this many inputs (once a second).
const INPUTS_PER_PING: u32 = 10;

/// Running totals over all clients, printed as one line on `mark`.
#[derive(Debug, Default)]
pub struct Totals {
    /// Bytes received (WebSocket payloads, or raw TCP bytes).
    pub bytes: AtomicU64,
    /// WebSocket messages of at least the frame size received (0 over raw TCP: no framing).
    pub frames: AtomicU64,
    /// Records sent (inputs and pings).
    pub sent: AtomicU64,
    /// Clients whose connection ended.
    pub closed: AtomicU64,
}

impl Totals {
    /// `bytes frames sent closed`, the line the server half parses.
    pub fn line(&self) -> String {
        format!(
            "{} {} {} {}",
            self.bytes.load(Ordering::Relaxed),
            self.frames.load(Ordering::Relaxed),
            self.sent.load(Ordering::Relaxed),
            self.closed.load(Ordering::Relaxed)
        )
    }
}

/// The totals of a `mark` line: `(bytes, frames, sent, closed)`.
pub fn parse_line(line: &str) -> Option<[u64; 4]> {
    let mut it = line.split_ascii_whitespace().map(|v| v.parse::<u64>().ok());
    let v = [it.next()??, it.next()??, it.next()??, it.next()??];
    it.next().is_none().then_some(v)
}

/// Run the client half to the end of its stdin.
pub fn run(
    addr: SocketAddr,
    clients: usize,
    transport: Transport,
    frame_bytes: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (marks_tx, mut marks) = mpsc::unbounded_channel::<()>();
    // Stdin is read on a plain thread; its end (the server half closing the pipe) ends the run.
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            match line {
                Ok(l) if l.trim() == "mark" => {
                    if marks_tx.send(()).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(_) => return,
            }
        }
    });
    let totals = Arc::new(Totals::default());
    rt.block_on(async {
        for index in 0..clients {
            let conn = Conn::connect(addr, transport).await?;
            tokio::spawn(client(conn, index, clients, frame_bytes, totals.clone()));
        }
        say("ready")?;
        while marks.recv().await.is_some() {
            say(&totals.line())?;
        }
        Ok(())
    })
}

fn say(line: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()
}

/// One client's socket.
enum Conn {
    Ws(Box<WebSocketStream<TcpStream>>),
    Raw(TcpStream, Box<[u8; 65536]>),
}

impl Conn {
    async fn connect(
        addr: SocketAddr,
        transport: Transport,
    ) -> Result<Self, Box<dyn std::error::Error>> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(match transport {
            Transport::Ws => {
                // The bots' settings.
                let cfg = WebSocketConfig::default()
                    .read_buffer_size(4096)
                    .write_buffer_size(0)
                    .max_write_buffer_size(1 << 20);
                let url = format!("ws://{addr}/");
                let (ws, _) =
                    tokio_tungstenite::client_async_with_config(url, stream, Some(cfg)).await?;
                Conn::Ws(Box::new(ws))
            }
            Transport::Raw => Conn::Raw(stream, Box::new([0u8; 65536])),
        })
    }

    /// Send one record; false once the connection is gone.
    async fn send(&mut self, rec: [u8; crate::wire::RECORD]) -> bool {
        match self {
            Conn::Ws(ws) => ws
                .send(Message::Binary(Bytes::copy_from_slice(&rec)))
                .await
                .is_ok(),
            Conn::Raw(s, _) => s.write_all(&rec).await.is_ok(),
        }
    }
}

async fn client(mut conn: Conn, index: usize, clients: usize, frame_bytes: usize, t: Arc<Totals>) {
    let mut next = Instant::now() + INPUT_INTERVAL.mul_f64(index as f64 / clients.max(1) as f64);
    let mut seq: u32 = 0;
    loop {
        let got = match &mut conn {
            Conn::Ws(ws) => tokio::select! {
                m = ws.next() => match m {
                    Some(Ok(Message::Binary(b))) => Some((b.len(), b.len() >= frame_bytes)),
                    Some(Ok(_)) => Some((0, false)),
                    _ => None,
                },
                () = tokio::time::sleep_until(next) => Some((0, false)),
            },
            Conn::Raw(s, buf) => tokio::select! {
                r = s.read(&mut buf[..]) => match r {
                    Ok(n) if n > 0 => Some((n, false)),
                    _ => None,
                },
                () = tokio::time::sleep_until(next) => Some((0, false)),
            },
        };
        let Some((bytes, frame)) = got else {
            t.closed.fetch_add(1, Ordering::Relaxed);
            return;
        };
        t.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        t.frames.fetch_add(u64::from(frame), Ordering::Relaxed);
        if Instant::now() >= next {
            seq = seq.wrapping_add(1);
            let mut ok = conn.send(record(TAG_INPUT, seq)).await;
            let mut n = 1;
            if seq % INPUTS_PER_PING == 0 {
                ok = ok && conn.send(record(TAG_PING, seq)).await;
                n += 1;
            }
            if !ok {
                t.closed.fetch_add(1, Ordering::Relaxed);
                return;
            }
            t.sent.fetch_add(n, Ordering::Relaxed);
            next += INPUT_INTERVAL;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_line_round_trips() {
        let t = Totals::default();
        t.bytes.store(6_400, Ordering::Relaxed);
        t.frames.store(2, Ordering::Relaxed);
        t.sent.store(11, Ordering::Relaxed);
        assert_eq!(parse_line(&t.line()), Some([6_400, 2, 11, 0]));
        assert_eq!(parse_line("1 2 3"), None);
        assert_eq!(parse_line("1 2 3 4 5"), None);
        assert_eq!(parse_line("1 x 3 4"), None);
    }
}
