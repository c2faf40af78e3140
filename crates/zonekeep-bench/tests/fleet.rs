//! The bots in a fleet, against an in-process host behind a small "front" host: the front answers
//! every Hello at a zone's entry URL with a Redirect to the zone's owner (one hop), and as the owner
//! it relays to the real host — kicking the first connections with ZONE_MOVED, as a host whose zone
//! moved does. The report counts the redirects, and every move is a resume, not a fresh join.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use zonekeep_bench::{run, Auth, BenchConfig, DecodeMode, Workload};
use zonekeep_protocol::messages::{Kick, KickCode, Redirect, ServerMessage};
use zonekeep_server::examples::Dots;
use zonekeep_server::{Host, Secret, ServerConfig};

const SECRET: &str = "in-process-fleet-test-secret-0123456789";

/// The zone's owner: a host with the `dots` kind; returns its ws URL and a stopper.
async fn start_owner() -> (String, oneshot::Sender<()>) {
    let cfg = ServerConfig {
        ticket_secret: Some(Secret::new(SECRET)),
        max_connections_per_ip: 1000,
        sim_threads: 1,
        ..ServerConfig::default()
    };
    let host = Host::builder()
        .config(cfg)
        .zone::<Dots>("dots")
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        host.serve(listener, async {
            let _ = rx.await;
        })
        .await
        .unwrap();
    });
    (format!("ws://{addr}"), tx)
}

/// The front host on 127.0.0.1:0: `/zones/{z}` redirects to `/zones/{z}?hops=1` on itself, which
/// relays to `owner`. The first `moves` relayed sessions are kicked with ZONE_MOVED once the host
/// sent them a message after Welcome. Returns the front's ws URL.
async fn start_front(owner: String, moves: u32) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("ws://{}", listener.local_addr().unwrap());
    let front = base.clone();
    let moves = Arc::new(AtomicU32::new(moves));
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (owner, front, moves) = (owner.clone(), front.clone(), Arc::clone(&moves));
            tokio::spawn(async move {
                let mut target = String::new();
                // The callback's signature is tungstenite's, error response included.
                #[allow(clippy::result_large_err)]
                let record = |req: &Request, resp: Response| {
                    target = req.uri().to_string();
                    Ok(resp)
                };
                let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(tcp, record).await else {
                    return;
                };
                let Some(Ok(Message::Binary(hello))) = ws.next().await else {
                    return;
                };
                match target.split_once('?') {
                    None => {
                        let zone = target.trim_start_matches("/zones/").to_owned();
                        let r = ServerMessage::Redirect(Redirect {
                            url: format!("{front}{target}?hops=1"),
                            zone_id: zone,
                        });
                        let _ = ws.send(Message::binary(r.to_bytes(None).unwrap())).await;
                        let _ = ws.close(None).await;
                    }
                    Some((path, _hops)) => {
                        let kick = moves
                            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                            .is_ok();
                        relay(ws, format!("{owner}{path}"), hello.to_vec(), kick).await;
                    }
                }
            });
        }
    });
    base
}

/// Pumps one session between the bot and the owner. With `kick`, the bot gets Kick(ZONE_MOVED)
/// after the owner's second message (Welcome, then one more), and the owner sees its connection
/// drop, as it would when the zone moved on.
async fn relay(mut bot: WebSocketStream<TcpStream>, url: String, hello: Vec<u8>, kick: bool) {
    let Ok((mut up, _)) = tokio_tungstenite::connect_async(url.as_str()).await else {
        return;
    };
    if up.send(Message::binary(hello)).await.is_err() {
        return;
    }
    let mut from_owner = 0;
    loop {
        tokio::select! {
            m = bot.next() => match m {
                Some(Ok(m @ Message::Binary(_))) => {
                    if up.send(m).await.is_err() {
                        return;
                    }
                }
                Some(Ok(Message::Close(_)) | Err(_)) | None => return,
                Some(Ok(_)) => {}
            },
            m = up.next() => match m {
                Some(Ok(m @ Message::Binary(_))) => {
                    if bot.send(m).await.is_err() {
                        return;
                    }
                    from_owner += 1;
                    if kick && from_owner == 2 {
                        let k = ServerMessage::Kick(Kick {
                            code: KickCode::ZONE_MOVED,
                            reason: "zone moved".into(),
                        });
                        let _ = bot.send(Message::binary(k.to_bytes(None).unwrap())).await;
                        // Keep reading until the bot goes, so the Kick is not lost to a reset.
                        drop(up);
                        while let Some(Ok(_)) = bot.next().await {}
                        return;
                    }
                }
                Some(Ok(Message::Close(_)) | Err(_)) | None => return,
                Some(Ok(_)) => {}
            },
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bots_follow_redirects_and_resume_where_the_zone_moved() {
    let (owner, stop) = start_owner().await;
    let front = start_front(owner, 2).await;
    let mut cfg = BenchConfig::new(
        &front,
        "moving-1",
        2,
        Auth::Secret {
            secret: SECRET.into(),
            kid: "default".into(),
        },
    );
    cfg.workload = Workload::Idle {
        ping_every: Duration::from_secs(1),
    };
    cfg.zone_kind = Some("dots".into());
    // Bot 0 runs zonekeep-client's Connection, bot 1 the light bot: both redirect and resume paths.
    cfg.decode = DecodeMode::Probe;
    cfg.warmup = Duration::from_millis(500);
    cfg.duration = Duration::from_millis(1000);
    cfg.join_deadline = Duration::from_secs(10);
    let r = run(cfg).await.unwrap();
    let c = &r.counts;
    assert_eq!(c.joined, 2, "{c:?}");
    assert_eq!(c.kicks.get("ZONE_MOVED").copied(), Some(2), "{c:?}");
    assert_eq!(c.resumes, 2, "every move resumed the same player: {c:?}");
    assert_eq!(c.fresh_joins, 0, "{c:?}");
    assert_eq!(c.redirects, 4, "one hop per join and per resume: {c:?}");
    let _ = stop.send(());
}
