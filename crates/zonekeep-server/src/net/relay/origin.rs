//! The origin's end of a relay link (`GET /relay/{zone_id}`, the relay credential as a bearer
//! token): each client the relay forwards is admitted as a direct one would be, its messages
//! go through the same limits, and what its zone sends it goes back over the link.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use zonekeep_protocol::messages::KickCode;

use super::wire::{self, Up};
use super::{LinkOut, RelayedClient};
use crate::host::{json_error, valid_zone_id, ConnInfo, Shared};
use crate::net::conn::ConnHandle;
use crate::session::{admit_hello, disconnected, handle_message, Attached, Handshake, Limits};

/// Answers a relay's link request: refused without relays configured (404), without the
/// relay credential (401) or for a malformed zone id (400); otherwise the link runs until
/// either end closes it.
pub(crate) async fn link_handler(
    State(shared): State<Arc<Shared>>,
    Path(zone_id): Path<String>,
    info: Option<Extension<ConnInfo>>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let Some(expected) = shared.relay_token_hash.as_ref() else {
        return json_error(
            StatusCode::NOT_FOUND,
            "relays_disabled",
            "this host takes no relays: configure a relay token (ZONEKEEP_RELAY_TOKEN)",
        );
    };
    if let Err(why) = crate::admin::check_bearer(&headers, Some(expected)) {
        shared.metrics.relay().refused(why);
        return crate::admin::unauthorized();
    }
    // The link holds its connection slot for its life, as every socket does, but one address's
    // cap is for clients: a relay keeps one link per zone from one address.
    let guard = info.map(|Extension(i)| i.guard);
    if let Some(g) = &guard {
        g.leave_ip_cap();
    }
    if !valid_zone_id(&zone_id) {
        return json_error(StatusCode::BAD_REQUEST, "bad_zone_id", "malformed zone id");
    }
    let hard = shared.config.max_message_bytes.saturating_mul(2);
    ws.max_message_size(hard)
        .max_frame_size(hard)
        .on_upgrade(move |socket| async move {
            let _guard = guard;
            run(shared, zone_id, socket).await;
        })
        .into_response()
}

/// What an admission task reports back to the link.
enum Admitted {
    /// The client is attached to its zone.
    Attached(u32, Box<Attached>),
    /// The client was answered and closed (refused, moved, or sent to another zone).
    Done(u32),
}

/// One link, until either end closes it: its clients' connections then end (each resumes
/// within its reconnect grace, through another relay or directly).
async fn run(shared: Arc<Shared>, zone_id: String, socket: WebSocket) {
    let _track = shared.sessions.token();
    let cfg = &shared.config;
    let id = shared.next_conn.fetch_add(1, Ordering::Relaxed);
    let (tx, mut rx) = mpsc::channel::<Bytes>(cfg.relay_link_queue.max(1));
    let link = Arc::new(LinkOut::new(id, tx));
    shared.metrics.relay().links(1);
    tracing::info!(zone = %zone_id, link = id, "relay link opened");
    let (mut sink, mut stream) = socket.split();
    let write_bound = Duration::from_millis(cfg.kick_write_timeout_ms.max(1000));
    let writer_link = Arc::clone(&link);
    let writer = tokio::spawn(async move {
        loop {
            let msg = tokio::select! {
                _ = writer_link.closed() => break,
                m = rx.recv() => match m {
                    Some(m) => m,
                    None => break,
                },
            };
            // A relay that stops reading holds its link back, never the zone: the queue fills
            // and closes the link, or this write times out.
            match tokio::time::timeout(write_bound, sink.send(Message::Binary(msg))).await {
                Ok(Ok(())) => {}
                _ => break,
            }
        }
        writer_link.close();
        let _ = sink.close().await;
    });

    let (done_tx, mut done_rx) = mpsc::channel::<Admitted>(cfg.relay_link_clients.clamp(1, 4096));
    let mut clients: HashMap<u32, (Box<Attached>, Limits)> = HashMap::new();
    // Clients whose Hello is being admitted, and those of them whose connection already ended.
    let mut admitting: HashSet<u32> = HashSet::new();
    let mut gone_early: HashSet<u32> = HashSet::new();
    loop {
        let msg = tokio::select! {
            _ = link.closed() => break,
            _ = shared.sessions_end.cancelled() => break,
            Some(done) = done_rx.recv() => {
                match done {
                    Admitted::Attached(client, a) => {
                        admitting.remove(&client);
                        if gone_early.remove(&client) {
                            disconnected(&shared, &a);
                        } else {
                            clients.insert(client, (a, Limits::new(&shared.config)));
                        }
                    }
                    Admitted::Done(client) => {
                        admitting.remove(&client);
                        gone_early.remove(&client);
                    }
                }
                continue;
            }
            m = stream.next() => m,
        };
        let bytes = match msg {
            Some(Ok(Message::Binary(b))) => b,
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(Message::Text(_))) => {
                tracing::warn!(zone = %zone_id, link = id, "relay link sent text: closed");
                break;
            }
            Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
        };
        let up = match Up::read(&bytes) {
            Ok(up) => up,
            Err(e) => {
                tracing::warn!(zone = %zone_id, link = id, error = %e, "malformed relay link message: closed");
                break;
            }
        };
        match up {
            Up::Hello { client, bytes } => {
                if clients.contains_key(&client) || admitting.contains(&client) {
                    tracing::warn!(zone = %zone_id, link = id, client, "relay reused a client number: closed");
                    break;
                }
                if clients.len() + admitting.len() >= cfg.relay_link_clients {
                    let _ = link.send(wire::kick(
                        client,
                        KickCode::TOO_MANY_CONNECTIONS,
                        "the relay link holds its cap of clients",
                    ));
                    continue;
                }
                admitting.insert(client);
                shared.relay_places.arrived(&zone_id, id);
                let hello = Bytes::copy_from_slice(bytes);
                tokio::spawn(admit(
                    Arc::clone(&shared),
                    zone_id.clone(),
                    Arc::clone(&link),
                    client,
                    hello,
                    done_tx.clone(),
                ));
            }
            Up::FromClient { client, bytes } => {
                let Some((a, limits)) = clients.get(&client) else {
                    // Sent before its Welcome, or after it was closed: nothing to act on.
                    continue;
                };
                match handle_message(&shared, a, limits, bytes) {
                    Ok(None) => {}
                    Ok(Some(answer)) => {
                        let _ = link.send(wire::to_client(client, &answer));
                    }
                    Err(e) => {
                        let k = e.kick();
                        let _ = link.send(wire::kick(client, k.code, &k.reason));
                        if let Some((a, _)) = clients.remove(&client) {
                            disconnected(&shared, &a);
                        }
                    }
                }
            }
            Up::Load { clients, max, url } => {
                shared
                    .relay_places
                    .report(&zone_id, &link, url, clients, max);
            }
            Up::Gone { client } => {
                if let Some((a, _)) = clients.remove(&client) {
                    disconnected(&shared, &a);
                } else if admitting.contains(&client) {
                    gone_early.insert(client);
                }
            }
        }
    }
    link.close();
    shared.relay_places.forget(&zone_id, id);
    for (_, (a, _)) in clients.drain() {
        disconnected(&shared, &a);
    }
    // Admissions still under way see the link closed and end their clients themselves.
    drop(done_rx);
    let _ = writer.await;
    shared.metrics.relay().links(-1);
    tracing::info!(zone = %zone_id, link = id, "relay link closed");
}

/// Admits one relayed client as a direct connection is admitted, and reports back.
async fn admit(
    shared: Arc<Shared>,
    zone_id: String,
    link: Arc<LinkOut>,
    client: u32,
    hello: Bytes,
    done: mpsc::Sender<Admitted>,
) {
    let conn_id = shared.next_conn.fetch_add(1, Ordering::Relaxed);
    let relayed = Arc::new(RelayedClient::new(Arc::clone(&link), client));
    let conn = ConnHandle::relayed(conn_id, Arc::clone(&relayed));
    let versions = crate::net::ws::HOST_VERSIONS;
    let outcome = admit_hello(&shared, &zone_id, hello, &versions, &conn).await;
    let report = match outcome {
        Ok(Handshake::Attached(a)) => Admitted::Attached(client, Box::new(a)),
        Ok(Handshake::Gone) => Admitted::Done(client),
        Ok(Handshake::Elsewhere(moved)) => {
            // The zone runs on another host: the client resumes there (its relay links to the
            // zone's host; a relay never proxies across hosts).
            relayed.kick(
                KickCode::ZONE_MOVED.for_version(moved.version),
                &format!("the zone runs on {}", moved.url),
            );
            Admitted::Done(client)
        }
        // Never placed: it came through a relay.
        Ok(Handshake::ToRelay(_)) => Admitted::Done(client),
        Ok(Handshake::Transferred(frame)) => {
            // The player was moved to another zone: it is sent there again, and the relay
            // closes it after this message.
            let _ = relayed.offer(&frame);
            Admitted::Done(client)
        }
        Err(e) => {
            let k = e.kick();
            relayed.kick(k.code, &k.reason);
            Admitted::Done(client)
        }
    };
    if let Err(mpsc::error::SendError(Admitted::Attached(_, a))) = done.send(report).await {
        // The link closed meanwhile: the client's connection ended with it.
        disconnected(&shared, &a);
    }
}
