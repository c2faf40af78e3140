//! Moving players between zones (PROTOCOL.md §5.3.2) on a real host, with a client that speaks
//! the protocol by hand: a move that is accepted (Transfer frame, credential, the player's state
//! in the target), refused (the player stays, still connected, and is told why), one to a zone
//! that cannot start, one a client too old to follow, and the Transfer sent again to a
//! connection that comes back.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;
use zonekeep_protocol::messages::{
    ClientMessage, DeltaContext, Hello, Input, ServerMessage, Transfer, Welcome,
};
use zonekeep_protocol::schema::Schema;

use support::{sign, unique_run, Server, StoreSpec};

/// The doors zone's purse topic, and the host's notice of a returned move.
const TOPIC_COINS: u16 = 1;
const TOPIC_RETURNED: u16 = 0xFFFF;
/// Longest wait for any one thing a test expects.
const WAIT: Duration = Duration::from_secs(20);

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A ticket for `sub` to the doors zone `zone`, created with `params` if it is new.
fn doors_ticket(sub: &str, zone: &str, params: Value) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 120;
    sign(&json!({
        "sub": sub, "zone": zone, "kind": "doors", "params": params, "exp": exp,
        "jti": format!("doors-{}-{n}", unique_run()),
    }))
}

/// What a hand-written client has seen on one connection.
#[derive(Debug)]
enum Seen {
    Welcome(Box<Welcome>),
    Coins(u32, String),
    Returned(String),
    Transfer(Transfer),
    Kick(u16, String),
    Closed,
}

/// One connection of a hand-written client.
struct Conn {
    ws: Ws,
    seq: u32,
    /// Seen but not yet looked at (a Delta may carry several events).
    pending: std::collections::VecDeque<Seen>,
    /// The purse last told.
    purse_now: Option<(u32, String)>,
}

impl Conn {
    /// Connects to `url` and says Hello with `ticket` (and `token` when resuming).
    async fn hello(url: &str, ticket: String, token: Vec<u8>, versions: Vec<u32>) -> Conn {
        let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        let hello = ClientMessage::Hello(Hello {
            versions,
            ticket,
            reconnect_token: token,
            content_version: String::new(),
            resume_from: None,
        });
        ws.send(Message::Binary(hello.to_bytes().unwrap().into()))
            .await
            .unwrap();
        Conn {
            ws,
            seq: 0,
            pending: std::collections::VecDeque::new(),
            purse_now: None,
        }
    }

    /// Sends one input.
    async fn input(&mut self, payload: Vec<u8>) {
        self.seq += 1;
        let msg = ClientMessage::Input(Input {
            seq: self.seq,
            view_tick: 0,
            payload,
        });
        self.ws
            .send(Message::Binary(msg.to_bytes().unwrap().into()))
            .await
            .unwrap();
    }

    /// Walks through a door to `to`, handing it `claims`.
    async fn walk(&mut self, to: &str, claims: Value) {
        let mut payload = vec![2];
        payload.extend_from_slice(json!({ "to": to, "claims": claims }).to_string().as_bytes());
        self.input(payload).await;
    }

    /// The next things this connection sees (a Delta may carry several).
    async fn next(&mut self) -> Vec<Seen> {
        loop {
            let m = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("the host said nothing in time");
            let b = match m {
                Some(Ok(Message::Binary(b))) => b,
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return vec![Seen::Closed],
                Some(Ok(_)) => continue,
            };
            let schema = Schema {
                pos_step: 0.01,
                kinds: vec![],
            };
            let ctx = DeltaContext {
                schema: &schema,
                known: &[],
            };
            return match ServerMessage::decode(&b, Some(ctx)).unwrap() {
                ServerMessage::Welcome(w) => vec![Seen::Welcome(Box::new(w))],
                ServerMessage::Transfer(t) => vec![Seen::Transfer(t)],
                ServerMessage::Kick(k) => vec![Seen::Kick(k.code.0, k.reason)],
                ServerMessage::Delta(d) => d
                    .events
                    .iter()
                    .flatten()
                    .filter_map(|e| match e.topic {
                        TOPIC_COINS => {
                            let (c, zone) = e.payload.split_at(4);
                            Some(Seen::Coins(
                                u32::from_le_bytes(c.try_into().unwrap()),
                                String::from_utf8(zone.to_vec()).unwrap(),
                            ))
                        }
                        TOPIC_RETURNED => Some(Seen::Returned(
                            String::from_utf8(e.payload.clone()).unwrap(),
                        )),
                        _ => None,
                    })
                    .collect(),
                _ => continue,
            };
        }
    }

    /// Reads until `f` picks something out of what is seen.
    async fn until<T>(&mut self, what: &str, mut f: impl FnMut(&Seen) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            assert!(tokio::time::Instant::now() < deadline, "never saw {what}");
            if self.pending.is_empty() {
                let seen = self.next().await;
                self.pending.extend(seen);
            }
            while let Some(seen) = self.pending.pop_front() {
                if let Seen::Coins(c, z) = &seen {
                    self.purse_now = Some((*c, z.clone()));
                }
                if let Some(t) = f(&seen) {
                    return t;
                }
                if let Seen::Closed = seen {
                    panic!("the connection closed before {what}");
                }
            }
        }
    }

    async fn welcome(&mut self) -> Welcome {
        self.until("the Welcome", |s| match s {
            Seen::Welcome(w) => Some((**w).clone()),
            Seen::Kick(code, why) => panic!("kicked ({code}): {why}"),
            _ => None,
        })
        .await
    }

    /// Waits for the purse to hold `coins` in `zone` (the zone may tell the same purse twice, as
    /// on an arrival; a purse beyond `coins` fails).
    async fn purse(&mut self, coins: u32, zone: &str) {
        if self.purse_now.as_ref() == Some(&(coins, zone.to_owned())) {
            return;
        }
        self.until(&format!("{coins} coins in {zone}"), |s| match s {
            Seen::Coins(c, z) if *c == coins && z == zone => Some(()),
            Seen::Coins(c, z) if *c > coins || z != zone => {
                panic!("the purse is {c} coins in {z}, not {coins} in {zone}")
            }
            _ => None,
        })
        .await
    }
}

async fn host(dir: &std::path::Path) -> Server {
    let store = StoreSpec::Sqlite(dir.to_path_buf());
    Server::start(&store, &[], &dir.join("host.log")).await
}

fn url(server: &Server, zone: &str) -> String {
    format!("ws://{}/zones/{zone}", server.addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_player_walks_to_another_zone_with_its_purse_and_comes_back_to_be_sent_again() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(dir.path()).await;
    let mut ada = Conn::hello(
        &url(&server, "hall-a"),
        doors_ticket("ada", "hall-a", json!({"coins": 5})),
        vec![],
        vec![8],
    )
    .await;
    let welcome = ada.welcome().await;
    assert_eq!(welcome.version, 8);
    ada.purse(5, "hall-a").await;
    ada.input(vec![1]).await;
    ada.purse(6, "hall-a").await;

    ada.walk("hall-b", json!({})).await;
    let transfer = ada
        .until("the Transfer", |s| match s {
            Seen::Transfer(t) => Some(t.clone()),
            Seen::Returned(why) => panic!("the move was returned: {why}"),
            _ => None,
        })
        .await;
    assert_eq!(transfer.zone_id, "hall-b");
    assert_eq!(transfer.url, url(&server, "hall-b"));

    // The credential admits ada to hall-b, once, with the purse it carried.
    let mut there = Conn::hello(&transfer.url, transfer.ticket.clone(), vec![], vec![8]).await;
    let arrived = there.welcome().await;
    assert_eq!(arrived.zone_id, "hall-b");
    there.purse(6, "hall-b").await;
    there.input(vec![1]).await;
    there.purse(7, "hall-b").await;
    let mut again = Conn::hello(&transfer.url, transfer.ticket.clone(), vec![], vec![8]).await;
    let kick = again
        .until("a Kick", |s| match s {
            Seen::Kick(code, _) => Some(*code),
            _ => None,
        })
        .await;
    assert_eq!(
        kick, 8,
        "a transfer credential is single use (TICKET_REPLAYED)"
    );

    // A connection of ada's that comes back to hall-a is sent to hall-b again.
    drop(ada);
    let mut back = Conn::hello(
        &url(&server, "hall-a"),
        doors_ticket("ada", "hall-a", json!({})),
        welcome.reconnect_token.clone(),
        vec![8],
    )
    .await;
    let resent = back
        .until("the Transfer sent again", |s| match s {
            Seen::Transfer(t) => Some(t.clone()),
            Seen::Welcome(_) => panic!("resumed in the zone the player left"),
            _ => None,
        })
        .await;
    assert_eq!(resent, transfer);

    // The store holds one move, accepted, whose player arrived.
    let store = zonekeep_store::open_store("sqlite", dir.path())
        .await
        .unwrap();
    let moved = store
        .transfers
        .latest_transfer_from("hall-a", "ada", 0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(moved.status, zonekeep_store::TransferStatus::Accepted);
    assert_eq!(moved.transfer.state, 6u32.to_le_bytes());
    let deadline = tokio::time::Instant::now() + WAIT;
    while !store
        .transfers
        .transfer(&moved.transfer.id)
        .await
        .unwrap()
        .unwrap()
        .arrived
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the arrival was never recorded"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_move_returns_the_player_still_connected_and_told_why() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(dir.path()).await;
    // bob opens a vault whose door is locked.
    let mut bob = Conn::hello(
        &url(&server, "vault"),
        doors_ticket("bob", "vault", json!({"locked": true})),
        vec![],
        vec![8],
    )
    .await;
    bob.welcome().await;

    let mut ada = Conn::hello(
        &url(&server, "yard"),
        doors_ticket("ada", "yard", json!({"coins": 2})),
        vec![],
        vec![8],
    )
    .await;
    ada.welcome().await;
    ada.purse(2, "yard").await;
    ada.walk("vault", json!({})).await;
    let why = ada
        .until("the notice of the returned move", |s| match s {
            Seen::Returned(why) => Some(why.clone()),
            Seen::Transfer(_) => panic!("moved into a locked zone"),
            _ => None,
        })
        .await;
    assert!(why.contains("locked"), "{why}");
    // Still here, still playing, with the purse it handed out.
    ada.purse(2, "yard").await;
    ada.input(vec![1]).await;
    ada.purse(3, "yard").await;

    // A move to a zone that cannot start comes back too, saying why.
    ada.walk("nowhere", json!({"kind": "no-such-kind"})).await;
    let why = ada
        .until("the notice of the returned move", |s| match s {
            Seen::Returned(why) => Some(why.clone()),
            Seen::Transfer(_) => panic!("moved into a zone of an unknown kind"),
            _ => None,
        })
        .await;
    assert!(why.contains("no-such-kind"), "{why}");
    ada.purse(3, "yard").await;
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_too_old_to_follow_a_move_is_not_moved() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(dir.path()).await;
    let mut old = Conn::hello(
        &url(&server, "porch"),
        doors_ticket("ada", "porch", json!({"coins": 1})),
        vec![],
        vec![7],
    )
    .await;
    assert_eq!(old.welcome().await.version, 7);
    old.purse(1, "porch").await;
    old.walk("garden", json!({})).await;
    let why = old
        .until("the notice of the returned move", |s| match s {
            Seen::Returned(why) => Some(why.clone()),
            _ => None,
        })
        .await;
    assert!(why.contains("version 8"), "{why}");
    old.purse(1, "porch").await;
    server.terminate().await;
}
