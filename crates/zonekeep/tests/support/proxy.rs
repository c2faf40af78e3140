//! A TCP proxy between a host and PostgreSQL that a test can freeze (the database stops
//! answering without closing anything), and `postgres://` URLs pointed at it.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A TCP proxy to one upstream address that can be frozen: while frozen it forwards nothing in
/// either direction and closes no socket, and connections it accepts meanwhile stay open without
/// reaching the upstream. Dropping it closes everything.
pub struct FreezableProxy {
    pub addr: SocketAddr,
    frozen: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl FreezableProxy {
    /// Listens on 127.0.0.1:0 and forwards each connection to `upstream` (`host:port`).
    pub async fn start(upstream: String) -> FreezableProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (frozen, _) = watch::channel(false);
        let switch = frozen.clone();
        let task = tokio::spawn(async move {
            // Dropping the set (when the accept task is aborted) aborts every connection's task.
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((down, _)) = listener.accept().await {
                while conns.try_join_next().is_some() {}
                let upstream = upstream.clone();
                let mut rx = switch.subscribe();
                conns.spawn(async move {
                    // A connection accepted while frozen does not even reach the upstream.
                    if !thawed(&mut rx).await {
                        return;
                    }
                    let Ok(up) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let (down_r, down_w) = down.into_split();
                    let (up_r, up_w) = up.into_split();
                    tokio::join!(
                        pump(down_r, up_w, rx.clone()),
                        pump(up_r, down_w, rx.clone())
                    );
                });
            }
        });
        FreezableProxy { addr, frozen, task }
    }

    /// Stops (`true`) or resumes (`false`) all forwarding.
    pub fn set_frozen(&self, frozen: bool) {
        self.frozen.send_replace(frozen);
    }
}

impl Drop for FreezableProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Waits until the proxy is not frozen; false when the proxy is gone.
async fn thawed(rx: &mut watch::Receiver<bool>) -> bool {
    rx.wait_for(|frozen| !*frozen).await.is_ok()
}

/// Copies `from` to `to` while the proxy is not frozen. A freeze interrupts a pending read or
/// write (both are cancel-safe: a read that did not complete took no bytes, a write that did not
/// complete sent none); bytes already read wait for the thaw.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut rx: watch::Receiver<bool>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if !thawed(&mut rx).await {
            return;
        }
        let n = tokio::select! {
            biased;
            _ = rx.wait_for(|frozen| *frozen) => continue,
            r = from.read(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
        };
        let mut off = 0;
        while off < n {
            if !thawed(&mut rx).await {
                return;
            }
            tokio::select! {
                biased;
                _ = rx.wait_for(|frozen| *frozen) => {}
                r = to.write(&buf[off..n]) => match r {
                    Ok(0) | Err(_) => return,
                    Ok(k) => off += k,
                },
            }
        }
    }
    // The peer closed its side: pass the end of stream on.
    let _ = to.shutdown().await;
}

/// A `postgres://` URL split around its host and port, so the same URL (user, database, options)
/// can name another address. Only single-host URLs (what the tests use) are understood.
pub struct PgUrl {
    /// Scheme and user, up to the host: `postgres://user@`.
    head: String,
    /// `host` or `host:port`.
    hostport: String,
    /// Database and query: `/test?options=...`.
    tail: String,
}

impl PgUrl {
    pub fn parse(url: &str) -> PgUrl {
        let (scheme, rest) = url.split_once("://").expect("a postgres:// URL");
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        let (user, hostport) = match authority.rsplit_once('@') {
            Some((user, hostport)) => (format!("{user}@"), hostport),
            None => (String::new(), authority),
        };
        assert!(
            !hostport.is_empty() && !hostport.contains(',') && !hostport.starts_with('['),
            "only a single IPv4 or named host is supported here: {hostport}"
        );
        PgUrl {
            head: format!("{scheme}://{user}"),
            hostport: hostport.to_owned(),
            tail: tail.to_owned(),
        }
    }

    /// The `host:port` the URL names (PostgreSQL's default port when it names none).
    pub fn upstream(&self) -> String {
        if self.hostport.contains(':') {
            self.hostport.clone()
        } else {
            format!("{}:5432", self.hostport)
        }
    }

    /// The same URL naming `addr` instead.
    pub fn at(&self, addr: SocketAddr) -> String {
        format!("{}{addr}{}", self.head, self.tail)
    }
}
