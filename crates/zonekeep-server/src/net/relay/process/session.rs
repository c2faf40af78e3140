//! One client of the relay: its Hello and later messages go to the origin over its zone's link
//! (but Pings and Resyncs, answered here), and what its zone's thread queues for it goes to it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::sync::{mpsc, watch};
use zonekeep_protocol::messages::{ClientMessage, KickCode};

use super::link::{ClientOut, Ending, ZoneCmd, ZoneLink};
use super::RelayShared;
use crate::error::SessionError;
use crate::net::conn::KickNotice;
use crate::net::relay::wire;
use crate::session::Limits;
use crate::sim::{kick_frame, pong_frame};

/// Holds a client slot while the session lives.
struct Slot<'a>(&'a RelayShared);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.clients.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Refuse a client before it reaches a zone.
pub(super) async fn refuse(shared: &RelayShared, socket: WebSocket, err: SessionError) {
    let (mut sink, mut stream) = socket.split();
    finish(shared, &mut sink, &mut stream, Some(err.kick())).await;
}

/// Serve one client until either end closes.
pub(super) async fn run(shared: Arc<RelayShared>, zone_id: String, socket: WebSocket) {
    let (mut sink, mut stream) = socket.split();
    if shared.clients.fetch_add(1, Ordering::Relaxed) >= shared.cfg.max_clients {
        shared.clients.fetch_sub(1, Ordering::Relaxed);
        let kick = SessionError::TooManyConnections.kick();
        finish(&shared, &mut sink, &mut stream, Some(kick)).await;
        return;
    }
    let _slot = Slot(&shared);
    // The Hello, read as a host reads it: the first message, in time, binary.
    let hello = match tokio::time::timeout(shared.cfg.handshake_timeout, stream.next()).await {
        Err(_) => Err(SessionError::HandshakeTimeout),
        Ok(Some(Ok(Message::Binary(b)))) => Ok(b),
        Ok(Some(Ok(Message::Close(_))) | None | Some(Err(_))) => return,
        Ok(Some(Ok(_))) => Err(SessionError::Protocol(
            "the first message must be a binary Hello".into(),
        )),
    };
    // What the relay needs of it: whether it resumes, and from what. Everything else (the
    // ticket above all) is the origin's to judge.
    let resume = hello.and_then(|bytes| match ClientMessage::decode(&bytes) {
        Ok(ClientMessage::Hello(h)) => {
            let resume = (!h.reconnect_token.is_empty()).then_some(h.resume_from);
            Ok((bytes, resume))
        }
        Ok(_) => Err(SessionError::Protocol(
            "the first message must be Hello".into(),
        )),
        Err(e) => Err(SessionError::Protocol(format!("undecodable Hello: {e}"))),
    });
    let (hello, resume) = match resume {
        Ok(x) => x,
        Err(e) => {
            finish(&shared, &mut sink, &mut stream, Some(e.kick())).await;
            return;
        }
    };
    let link = match shared.link(&zone_id).await {
        Ok(l) => l,
        Err(why) => {
            tracing::warn!(zone = %zone_id, error = %why, "no link to the origin");
            let kick = KickNotice {
                code: KickCode::INTERNAL_ERROR,
                reason: "the relay cannot reach the zone's host; retry".into(),
            };
            finish(&shared, &mut sink, &mut stream, Some(kick)).await;
            return;
        }
    };
    let client = shared.next_client.fetch_add(1, Ordering::Relaxed);
    let (frames_tx, mut frames) = mpsc::channel::<Bytes>(shared.cfg.outbox_frames);
    let (end_tx, mut end) = watch::channel::<Option<Ending>>(None);
    let out = ClientOut {
        frames: frames_tx,
        end: end_tx,
    };
    if !link.tell(ZoneCmd::Open {
        client,
        out,
        resume,
    }) || !link.send_up(wire::hello(client, &hello))
    {
        let kick = KickNotice {
            code: KickCode::ZONE_MOVED,
            reason: "the relay lost its link to the zone's host; resume".into(),
        };
        finish(&shared, &mut sink, &mut stream, Some(kick)).await;
        return;
    }
    let ending = serve(
        &shared,
        &link,
        client,
        &mut sink,
        &mut stream,
        &mut frames,
        &mut end,
    )
    .await;
    link.tell(ZoneCmd::Gone { client });
    let _ = link.send_up(wire::gone(client));
    finish(&shared, &mut sink, &mut stream, ending).await;
}

type Sink = futures_util::stream::SplitSink<WebSocket, Message>;
type Stream = futures_util::stream::SplitStream<WebSocket>;

/// The session's loop; returns the Kick to close with, if any.
async fn serve(
    shared: &RelayShared,
    link: &ZoneLink,
    client: u32,
    sink: &mut Sink,
    stream: &mut Stream,
    frames: &mut mpsc::Receiver<Bytes>,
    end: &mut watch::Receiver<Option<Ending>>,
) -> Option<KickNotice> {
    // A Ping costs a Pong: the host's own per-connection rates bound them here too.
    let limits = Limits::new(&crate::config::ServerConfig::default());
    let write = shared.cfg.write_timeout;
    let idle = tokio::time::sleep(shared.cfg.idle_timeout);
    tokio::pin!(idle);
    loop {
        tokio::select! {
            biased;
            () = &mut idle => return Some(SessionError::IdleTimeout.kick()),
            _ = end.changed() => {
                let ending = end.borrow().clone();
                return match ending {
                    Some(Ending::Kick(k)) => Some(k),
                    Some(Ending::Close) | None => {
                        // Its last messages (a Transfer) go before the close.
                        while let Ok(f) = frames.try_recv() {
                            if tokio::time::timeout(write, sink.send(Message::Binary(f))).await.is_err() {
                                break;
                            }
                        }
                        None
                    }
                };
            }
            _ = link.closed() => {
                return Some(KickNotice {
                    code: KickCode::ZONE_MOVED,
                    reason: "the relay lost its link to the zone's host; resume".into(),
                });
            }
            f = frames.recv() => {
                let f = f?;
                match tokio::time::timeout(write, sink.send(Message::Binary(f))).await {
                    Ok(Ok(())) => {}
                    _ => return None,
                }
            }
            m = stream.next() => {
                idle.as_mut().reset(tokio::time::Instant::now() + shared.cfg.idle_timeout);
                let bytes = match m {
                    Some(Ok(Message::Binary(b))) => b,
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                    Some(Ok(Message::Text(_))) => {
                        return Some(SessionError::Protocol("text frames are not part of the protocol".into()).kick());
                    }
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return None,
                };
                match ClientMessage::decode(&bytes) {
                    Ok(ClientMessage::Ping(p)) => {
                        match limits.ping(|| {}) {
                            Ok(true) => {}
                            Ok(false) => continue,
                            Err(e) => return Some(e.kick()),
                        }
                        let us = u64::try_from(shared.started.elapsed().as_micros()).unwrap_or(u64::MAX);
                        let pong = pong_frame(p.client_time, us, link.tick());
                        if tokio::time::timeout(write, sink.send(Message::Binary(pong))).await.is_err() {
                            return None;
                        }
                    }
                    // Its frames are built here: so is the BASELINE it asks for.
                    Ok(ClientMessage::Resync(_)) => {
                        link.tell(ZoneCmd::Resync { client });
                    }
                    Ok(ClientMessage::Hello(_)) => {
                        return Some(SessionError::Protocol("Hello out of place".into()).kick());
                    }
                    // Inputs, chat: the origin's, under its limits for this client.
                    Ok(_) => {
                        if !link.send_up(wire::from_client(client, &bytes)) {
                            continue;
                        }
                    }
                    Err(e) => {
                        return Some(SessionError::Protocol(format!("undecodable message: {e}")).kick());
                    }
                }
            }
        }
    }
}

/// Send the final Kick (bounded in time) and close, as a host does.
async fn finish(
    shared: &RelayShared,
    sink: &mut Sink,
    stream: &mut Stream,
    kick: Option<KickNotice>,
) {
    let bound = shared.cfg.write_timeout;
    let close = kick.as_ref().map(|k| CloseFrame {
        code: crate::net::ws::close_code(k.code),
        reason: "".into(),
    });
    if let Some(k) = kick {
        let frame = kick_frame(k.code, &k.reason);
        let _ = tokio::time::timeout(bound, sink.send(Message::Binary(frame))).await;
    }
    let _ = tokio::time::timeout(bound, sink.send(Message::Close(close))).await;
    let _ = tokio::time::timeout(bound, async {
        while let Some(Ok(m)) = stream.next().await {
            if matches!(m, Message::Close(_)) {
                break;
            }
        }
    })
    .await;
}
