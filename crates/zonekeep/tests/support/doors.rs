//! A hand-written protocol client for the `doors` dev kind (players carry a purse from zone to
//! zone by transfers, PROTOCOL.md §5.3.2), and connection attempts made as the SDKs make them:
//! Redirects followed (at most 3 hops), the listed entries tried when a host does not answer,
//! retried with a backoff.

use std::collections::VecDeque;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;
use zonekeep_protocol::messages::{
    ClientMessage, DeltaContext, Hello, Input, KickCode, ServerMessage, Transfer, Welcome,
};
use zonekeep_protocol::schema::Schema;

use super::{sign, unique_run};

/// The doors zone's purse topic, and the host's notice of a returned move.
pub const TOPIC_COINS: u16 = 1;
pub const TOPIC_RETURNED: u16 = 0xFFFF;
/// Longest wait for any one thing a test expects.
pub const WAIT: Duration = Duration::from_secs(20);
/// Pause between two connection attempts (the SDKs back off; a fixed pause is enough here).
const BACKOFF: Duration = Duration::from_millis(250);

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A ticket for `sub` to the doors zone `zone`, created with `params` if it is new.
pub fn doors_ticket(sub: &str, zone: &str, params: Value) -> String {
    doors_ticket_of("doors", sub, zone, params)
}

/// A ticket for `sub` to `zone` of `kind` (a kind that plays by the doors rules: the native
/// one or a module), created with `params` if it is new.
pub fn doors_ticket_of(kind: &str, sub: &str, zone: &str, params: Value) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 120;
    sign(&json!({
        "sub": sub, "zone": zone, "kind": kind, "params": params, "exp": exp,
        "jti": format!("doors-{}-{n}", unique_run()),
    }))
}

/// A Hello offering version 8 (transfers).
pub fn hello(ticket: String, token: Vec<u8>) -> Hello {
    Hello {
        versions: vec![8],
        ticket,
        reconnect_token: token,
        content_version: String::new(),
        resume_from: None,
    }
}

/// `url` naming `zone` in its `/zones/{zone}` path, as the SDKs rewrite entry URLs after a move.
pub fn with_zone(url: &str, zone: &str) -> String {
    match url.split_once("/zones/") {
        Some((head, _)) => format!("{head}/zones/{zone}"),
        None => url.to_owned(),
    }
}

/// What a hand-written client has seen on one connection.
#[derive(Debug)]
pub enum Seen {
    Welcome(Box<Welcome>),
    Coins(u32, String),
    Returned(String),
    Transfer(Transfer),
    Redirect(String),
    Entries(Vec<String>),
    Kick(u16, String),
    Closed,
}

/// One connection of a hand-written client.
pub struct Conn {
    ws: Ws,
    seq: u32,
    /// Seen but not yet looked at (a Delta may carry several events).
    pending: VecDeque<Seen>,
    /// The purse last told.
    pub purse_now: Option<(u32, String)>,
    /// Where else the zone may be entered, as the last Welcome or Entries listed (§5.3.1).
    pub entries: Vec<String>,
}

/// How one connection attempt ended, as the SDKs see it.
#[derive(Debug)]
pub enum Landed {
    /// Welcomed: the connection and its Welcome.
    Welcome(Box<Conn>, Box<Welcome>),
    /// The host sent a Transfer instead (a player that comes back to the zone it was moved out of).
    Transfer(Transfer),
    /// The host refused, with this code and reason.
    Kick(u16, String),
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("purse", &self.purse_now)
            .finish()
    }
}

impl Conn {
    /// Connects to `url` and says Hello with `ticket` (and `token` when resuming).
    pub async fn hello(url: &str, ticket: String, token: Vec<u8>, versions: Vec<u32>) -> Conn {
        let mut h = hello(ticket, token);
        h.versions = versions;
        Conn::try_hello(url, &h)
            .await
            .unwrap_or_else(|| panic!("no host answers at {url}"))
    }

    /// Connects to `url` and says `hello`; `None` when no host answers there.
    pub async fn try_hello(url: &str, hello: &Hello) -> Option<Conn> {
        let connect = tokio_tungstenite::connect_async(url);
        let (mut ws, _) = tokio::time::timeout(Duration::from_secs(3), connect)
            .await
            .ok()?
            .ok()?;
        let bytes = ClientMessage::Hello(hello.clone()).to_bytes().unwrap();
        ws.send(Message::Binary(bytes.into())).await.ok()?;
        Some(Conn {
            ws,
            seq: 0,
            pending: VecDeque::new(),
            purse_now: None,
            entries: Vec::new(),
        })
    }

    /// Sends one input.
    pub async fn input(&mut self, payload: Vec<u8>) {
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
    pub async fn walk(&mut self, to: &str, claims: Value) {
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
                ServerMessage::Welcome(w) => {
                    self.entries = w.entries.clone();
                    vec![Seen::Welcome(Box::new(w))]
                }
                ServerMessage::Entries(e) => {
                    self.entries = e.entries.clone();
                    vec![Seen::Entries(e.entries)]
                }
                ServerMessage::Transfer(t) => vec![Seen::Transfer(t)],
                ServerMessage::Redirect(r) => vec![Seen::Redirect(r.url)],
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

    /// The next thing seen, in order.
    async fn pop(&mut self) -> Seen {
        loop {
            if let Some(seen) = self.pending.pop_front() {
                if let Seen::Coins(c, z) = &seen {
                    self.purse_now = Some((*c, z.clone()));
                }
                return seen;
            }
            let seen = self.next().await;
            self.pending.extend(seen);
        }
    }

    /// Reads until `f` picks something out of what is seen.
    pub async fn until<T>(&mut self, what: &str, mut f: impl FnMut(&Seen) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            assert!(tokio::time::Instant::now() < deadline, "never saw {what}");
            let seen = self.pop().await;
            if let Some(t) = f(&seen) {
                return t;
            }
            if let Seen::Closed = seen {
                panic!("the connection closed before {what}");
            }
        }
    }

    /// Waits for the Welcome (a Kick fails).
    pub async fn welcome(&mut self) -> Welcome {
        self.until("the Welcome", |s| match s {
            Seen::Welcome(w) => Some((**w).clone()),
            Seen::Kick(code, why) => panic!("kicked ({code}): {why}"),
            _ => None,
        })
        .await
    }

    /// Waits for a Transfer (a returned move fails).
    pub async fn transfer(&mut self) -> Transfer {
        self.until("the Transfer", |s| match s {
            Seen::Transfer(t) => Some(t.clone()),
            Seen::Returned(why) => panic!("the move was returned: {why}"),
            _ => None,
        })
        .await
    }

    /// Waits for the notice of a returned move: its reason (a Transfer fails).
    pub async fn returned(&mut self) -> String {
        self.until("the notice of the returned move", |s| match s {
            Seen::Returned(why) => Some(why.clone()),
            Seen::Transfer(t) => panic!("moved to {}", t.zone_id),
            _ => None,
        })
        .await
    }

    /// Waits for the purse to hold `coins` in `zone` (the zone may tell the same purse twice, as
    /// on an arrival; a purse beyond `coins` fails).
    pub async fn purse(&mut self, coins: u32, zone: &str) {
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

    /// Reads what is left until the connection ends (a killed host's), keeping the entries
    /// it listed.
    pub async fn drain(&mut self) {
        while !matches!(self.pop().await, Seen::Closed) {}
    }

    /// The host's first answer to the Hello: `None` when the connection ended without one.
    async fn answer(&mut self) -> Option<Seen> {
        loop {
            match self.pop().await {
                s @ (Seen::Welcome(_) | Seen::Transfer(_) | Seen::Redirect(_) | Seen::Kick(..)) => {
                    return Some(s)
                }
                Seen::Closed => return None,
                _ => {}
            }
        }
    }
}

/// One connection attempt as the SDKs make it: at each of `urls` in order (the entry, then the
/// listed entries) until a host answers, following Redirects (at most 3 hops). `None` when no
/// host answered.
pub async fn attempt(urls: &[String], hello: &Hello) -> Option<Landed> {
    for url in urls {
        let mut at = url.clone();
        for _hop in 0..=3 {
            let Some(mut conn) = Conn::try_hello(&at, hello).await else {
                break;
            };
            match conn.answer().await {
                Some(Seen::Welcome(w)) => return Some(Landed::Welcome(Box::new(conn), w)),
                Some(Seen::Transfer(t)) => return Some(Landed::Transfer(t)),
                Some(Seen::Redirect(next)) => at = next,
                Some(Seen::Kick(code, why)) => {
                    // A host that is going away: the SDKs go on through the listed entries.
                    if code == KickCode::SHUTTING_DOWN.0 {
                        break;
                    }
                    return Some(Landed::Kick(code, why));
                }
                _ => break,
            }
        }
    }
    None
}

/// Attempts until one lands on something other than a host that is away or a zone that is moving
/// (no answer, ZONE_MOVED, HOST_FENCED, INTERNAL_ERROR, a store that did not answer), backing off
/// between attempts, for at most `within`.
pub async fn enter(urls: &[String], hello: &Hello, within: Duration) -> Landed {
    let deadline = tokio::time::Instant::now() + within;
    let mut last = None;
    loop {
        match attempt(urls, hello).await {
            Some(Landed::Kick(code, why))
                if [
                    KickCode::ZONE_MOVED.0,
                    KickCode::HOST_FENCED.0,
                    KickCode::INTERNAL_ERROR.0,
                    KickCode::ZONE_STOPPED.0,
                ]
                .contains(&code) =>
            {
                last = Some((code, why));
            }
            Some(landed) => return landed,
            None => {}
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no attempt at {urls:?} landed within {within:?} (last Kick {last:?})"
        );
        tokio::time::sleep(BACKOFF).await;
    }
}
