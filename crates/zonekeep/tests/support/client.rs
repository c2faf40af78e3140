//! WebSocket clients of a host: a socket that has sent its Hello, and the `ledger-test` client
//! that sends numbered inputs on a timer and logs what the host answers (state, acks, settled
//! facts, a Kick, Redirects followed).

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::Message;
use zonekeep_protocol::messages::{ClientMessage, DeltaContext, Hello, Input, ServerMessage};
use zonekeep_protocol::schema::Schema;

use super::ticket;

/// ledger-test event topics (see crates/zonekeep/src/kinds/ledger.rs).
pub const TOPIC_STATE: u16 = 1;
pub const TOPIC_SETTLED: u16 = 2;

/// A WebSocket to `zone` at `addr` that has sent its Hello with `ticket` (current protocol version).
pub async fn hello(
    addr: &str,
    zone: &str,
    ticket: String,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    hello_at(&format!("ws://{addr}/zones/{zone}"), ticket).await
}

/// A WebSocket to the zone URL `url` that has sent its Hello with `ticket`.
pub async fn hello_at(
    url: &str,
    ticket: String,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let hello = ClientMessage::Hello(Hello {
        versions: vec![zonekeep_protocol::limits::PROTOCOL_VERSION],
        ticket,
        reconnect_token: vec![],
        content_version: String::new(),
        resume_from: None,
    });
    ws.send(Message::Binary(hello.to_bytes().unwrap().into()))
        .await
        .unwrap();
    ws
}

/// What one ledger-test client has seen so far.
#[derive(Debug, Clone, Default)]
pub struct ClientLog {
    /// The zone's counters sent on join.
    pub state: Option<Value>,
    /// Numbers sent (`n` of each input), this connection.
    pub sent: Vec<u64>,
    /// Highest input seq the server acknowledged.
    pub acked: u32,
    /// Settled facts: key → n.
    pub settled: BTreeMap<String, u64>,
    /// The Kick (code, reason) or None.
    pub kicked: Option<(u16, String)>,
    /// The socket closed.
    pub closed: bool,
    /// Redirects followed before the Welcome.
    pub redirects: u32,
    /// The URL the client was welcomed at.
    pub landed: Option<String>,
}

/// A connected ledger-test client sending inputs on a timer.
pub struct LedgerClient {
    pub log: watch::Receiver<ClientLog>,
    task: tokio::task::JoinHandle<()>,
}

impl LedgerClient {
    /// Joins `zone` as `principal` and sends `count` inputs numbered from
    /// `first` every `every`, while reading everything the server sends.
    pub async fn start(
        addr: &str,
        zone: &str,
        principal: &str,
        first: u64,
        count: u64,
        every: Duration,
    ) -> LedgerClient {
        let url = format!("ws://{addr}/zones/{zone}");
        let (ws, _) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .unwrap();
        let (tx, rx) = watch::channel(ClientLog::default());
        let hello = ClientMessage::Hello(Hello {
            versions: vec![zonekeep_protocol::limits::PROTOCOL_VERSION],
            ticket: ticket(principal, zone),
            reconnect_token: vec![],
            content_version: String::new(),
            resume_from: None,
        });
        let task = tokio::spawn(run(ws, url, hello, tx, first, count, every));
        LedgerClient { log: rx, task }
    }

    /// Waits (bounded) until `f` holds for the log; returns a copy.
    pub async fn until(&mut self, what: &str, f: impl Fn(&ClientLog) -> bool) -> ClientLog {
        let r = tokio::time::timeout(Duration::from_secs(20), self.log.wait_for(|l| f(l)))
            .await
            .map(|r| r.map(|l| l.clone()));
        match r {
            Ok(Ok(l)) => l,
            _ => panic!("timed out waiting for {what}: {:?}", *self.log.borrow()),
        }
    }

    /// The log now.
    pub fn snapshot(&self) -> ClientLog {
        self.log.borrow().clone()
    }

    /// Closes the client.
    pub fn stop(self) -> ClientLog {
        self.task.abort();
        let l = self.log.borrow().clone();
        l
    }
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn run(
    mut ws: Ws,
    mut url: String,
    hello: ClientMessage,
    log: watch::Sender<ClientLog>,
    first: u64,
    count: u64,
    every: Duration,
) {
    if ws
        .send(Message::Binary(hello.to_bytes().unwrap().into()))
        .await
        .is_err()
    {
        log.send_modify(|l| l.closed = true);
        return;
    }
    let mut schema = Schema {
        pos_step: 0.01,
        kinds: vec![],
    };
    let mut welcomed = false;
    let mut next = 0u64;
    let mut timer = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = timer.tick(), if welcomed && next < count => {
                let n = first + next;
                next += 1;
                let seq = u32::try_from(next).unwrap();
                let msg = ClientMessage::Input(Input { seq, view_tick: 0, payload: n.to_le_bytes().to_vec() });
                if ws.send(Message::Binary(msg.to_bytes().unwrap().into())).await.is_err() {
                    break;
                }
                log.send_modify(|l| l.sent.push(n));
            }
            m = ws.next() => {
                let b = match m {
                    Some(Ok(Message::Binary(b))) => b,
                    Some(Ok(_)) => continue,
                    _ => break,
                };
                let ctx = DeltaContext { schema: &schema, known: &[] };
                match ServerMessage::decode(&b, Some(ctx)) {
                    Ok(ServerMessage::Welcome(w)) => {
                        schema = w.schema;
                        welcomed = true;
                        let at = url.clone();
                        log.send_modify(|l| l.landed = Some(at));
                    }
                    Ok(ServerMessage::Redirect(r)) => {
                        // As the SDKs do: the same Hello, at the owner.
                        let Ok((next, _)) = tokio_tungstenite::connect_async(r.url.as_str()).await else {
                            break;
                        };
                        ws = next;
                        url = r.url;
                        log.send_modify(|l| l.redirects += 1);
                        if ws
                            .send(Message::Binary(hello.to_bytes().unwrap().into()))
                            .await
                            .is_err()
                        {
                            break;
                        }
                    }
                    Ok(ServerMessage::Delta(d)) => log.send_modify(|l| {
                        l.acked = l.acked.max(d.ack);
                        for e in d.events.iter().flatten() {
                            let v: Value = serde_json::from_slice(&e.payload).unwrap();
                            match e.topic {
                                TOPIC_STATE => l.state = Some(v),
                                TOPIC_SETTLED => {
                                    assert_eq!(v["ok"], true, "fact refused: {v}");
                                    l.settled.insert(
                                        v["key"].as_str().unwrap().to_owned(),
                                        v["seq"].as_u64().unwrap(),
                                    );
                                }
                                _ => {}
                            }
                        }
                    }),
                    Ok(ServerMessage::Kick(k)) => {
                        log.send_modify(|l| l.kicked = Some((k.code.0, k.reason.clone())));
                    }
                    Ok(_) => {}
                    Err(e) => panic!("undecodable server message: {e}"),
                }
            }
        }
    }
    log.send_modify(|l| l.closed = true);
}
