//! `matchmake` against a fake matchmaker (an axum router on loopback that follows
//! docs/MATCHMAKING.md and answers as each test scripts it): the regions probed at once and
//! measured by their hosts, the queue, the long poll and the heartbeat, and the one connection to
//! the assigned zone; duplicate and older answers; the outcomes that end a search.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};
use support::{guarded, options, HostConn};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Barrier};
use zonekeep_client::protocol::limits::PROTOCOL_VERSION;
use zonekeep_client::{
    matchmake, matchmake_and_connect, MatchCancel, MatchError, MatchOptions, SearchState,
};

const SEARCH: &str = "s-1";
const TOKEN: &str = "tok-1";
const TICKET: &str = "match-ticket";

/// A request the fake matchmaker received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    /// Path and query.
    target: String,
    /// The `Host` header: which listener (region) it reached.
    host: String,
    auth: Option<String>,
    body: String,
}

/// How a region's host answers its probe.
#[derive(Clone, Copy)]
enum ProbeMode {
    /// Echoes three times, then reports this round trip.
    Rtt(u32),
    /// 503 `probe_unavailable`.
    Refuse,
    /// Its URL is a closed port.
    Unreachable,
}

type Reply = (u16, String);

struct Fake {
    /// `(region, url, mode)` per probe the created search lists.
    regions: Vec<(String, String, ProbeMode)>,
    heartbeat_secs: u32,
    create: Option<Reply>,
    /// The first probe call of each region waits here for the others': regions probed one after
    /// another would never get past it.
    first_legs: Barrier,
    /// Long poll answers, in order; a poll waits until the test supplies one.
    reads: tokio::sync::Mutex<mpsc::UnboundedReceiver<Reply>>,
    /// Heartbeat answers, in order; `queued` when none is scripted.
    heartbeats: Mutex<VecDeque<Reply>>,
    log: Mutex<Vec<Seen>>,
    seen: mpsc::UnboundedSender<Seen>,
}

/// The test's side of a fake matchmaker.
struct Matchmaker {
    base: String,
    fake: Arc<Fake>,
    reads: mpsc::UnboundedSender<Reply>,
    seen: mpsc::UnboundedReceiver<Seen>,
}

impl Matchmaker {
    /// A matchmaker (its own host is region `eu`) and a second host for region `us`.
    async fn start(probes: [ProbeMode; 2], heartbeat_secs: u32, create: Option<Reply>) -> Self {
        let main = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let us = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", main.local_addr().unwrap());
        let us_base = format!("http://{}", us.local_addr().unwrap());
        let closed = {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            format!("http://{}", l.local_addr().unwrap())
        };
        let url = |mode: ProbeMode, own: &str| match mode {
            ProbeMode::Unreachable => closed.clone(),
            _ => own.to_owned(),
        };
        let regions = vec![
            ("eu".to_owned(), url(probes[0], &base), probes[0]),
            ("us".to_owned(), url(probes[1], &us_base), probes[1]),
        ];
        let answering = regions
            .iter()
            .filter(|r| matches!(r.2, ProbeMode::Rtt(_)))
            .count();
        let (reads_tx, reads_rx) = mpsc::unbounded_channel();
        let (seen_tx, seen_rx) = mpsc::unbounded_channel();
        let fake = Arc::new(Fake {
            regions,
            heartbeat_secs,
            create,
            first_legs: Barrier::new(answering.max(1)),
            reads: tokio::sync::Mutex::new(reads_rx),
            heartbeats: Mutex::new(VecDeque::new()),
            log: Mutex::new(Vec::new()),
            seen: seen_tx,
        });
        let app = Router::new().fallback(handle).with_state(Arc::clone(&fake));
        for listener in [main, us] {
            let app = app.clone();
            tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        }
        Self {
            base,
            fake,
            reads: reads_tx,
            seen: seen_rx,
        }
    }

    /// Match options for this matchmaker, with retries a few milliseconds apart.
    fn options(&self) -> MatchOptions {
        let mut o = MatchOptions::new(&self.base, TICKET, "duel").with_content_version("1.4.0");
        o.backoff_min = Duration::from_millis(1);
        o.backoff_max = Duration::from_millis(5);
        o
    }

    /// Answers the next long poll.
    fn answer_read(&self, reply: Reply) {
        self.reads.send(reply).unwrap();
    }

    /// Answers the next heartbeat.
    fn answer_heartbeat(&self, reply: Reply) {
        self.fake.heartbeats.lock().unwrap().push_back(reply);
    }

    /// Waits for the next request that `want` matches.
    async fn until(&mut self, want: impl Fn(&Seen) -> bool) -> Seen {
        loop {
            let s = self.seen.recv().await.expect("the fake matchmaker stopped");
            if want(&s) {
                return s;
            }
        }
    }

    fn log(&self) -> Vec<Seen> {
        self.fake.log.lock().unwrap().clone()
    }
}

fn is_read(s: &Seen) -> bool {
    s.method == "GET"
}

fn is_heartbeat(s: &Seen) -> bool {
    s.target.ends_with("/heartbeat")
}

/// A `Search` answer in `state`; from `assigned` on with the assignment of match `m` (ticket
/// `zone-ticket-{m}`) at `zone_url`.
fn search(state: &str, m: &str, zone_url: &str) -> Value {
    let assigned = matches!(state, "assigned" | "connected");
    json!({
        "search": SEARCH, "queue": "duel", "state": state, "reason": null,
        "rtt_ms": {"eu": 12, "us": 81}, "region": if assigned { json!("eu") } else { Value::Null },
        "heartbeat_secs": 10, "probes": [],
        "assignment": if assigned {
            json!({
                "match": m, "zone": format!("duel-{m}"), "kind": "arena", "url": zone_url,
                "host": "h1", "ticket": format!("zone-ticket-{m}"), "expires_at": 1_790_000_000u64,
                "players": ["alice", "bob"]
            })
        } else {
            Value::Null
        },
    })
}

fn ok(v: &Value) -> Reply {
    (200, v.to_string())
}

fn reply(status: u16, body: String) -> Response {
    let status = StatusCode::from_u16(status).unwrap();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn refuse(status: u16, code: &str, message: &str) -> Response {
    reply(
        status,
        json!({"error": code, "message": message}).to_string(),
    )
}

async fn handle(State(fake): State<Arc<Fake>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    let header = |name: header::HeaderName| {
        parts
            .headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let seen = Seen {
        method: parts.method.to_string(),
        target: parts.uri.to_string(),
        host: header(header::HOST).unwrap_or_default(),
        auth: header(header::AUTHORIZATION),
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    fake.log.lock().unwrap().push(seen.clone());
    let _ = fake.seen.send(seen.clone());

    let path = parts.uri.path();
    let query: Vec<(String, String)> = parts
        .uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let param = |k: &str| query.iter().find(|(q, _)| q == k).map(|(_, v)| v.clone());
    let token_ok = seen.auth.as_deref() == Some(&format!("Bearer {TOKEN}"));
    match (seen.method.as_str(), path) {
        ("POST", "/match/searches") => {
            if let Some((status, body)) = &fake.create {
                return reply(*status, body.clone());
            }
            let probes: Vec<Value> = fake
                .regions
                .iter()
                .map(|(region, url, _)| {
                    json!({"region": region, "url": url, "challenge": format!("ch-{region}")})
                })
                .collect();
            let mut s = search("probing", "", "");
            s["token"] = json!(TOKEN);
            s["probes"] = json!(probes);
            s["rtt_ms"] = json!({});
            s["heartbeat_secs"] = json!(fake.heartbeat_secs);
            reply(201, s.to_string())
        }
        ("POST", "/match/probe") => {
            let Some(challenge) = param("challenge") else {
                return refuse(400, "bad_request", "no challenge");
            };
            let Some((_, _, mode)) = fake
                .regions
                .iter()
                .find(|(region, _, _)| challenge == format!("ch-{region}"))
            else {
                return refuse(410, "challenge_spent", "unknown challenge");
            };
            let rtt = match mode {
                ProbeMode::Rtt(rtt) => *rtt,
                _ => return refuse(503, "probe_unavailable", "no live host"),
            };
            let leg = match param("echo") {
                None => 0,
                Some(echo) => match echo.strip_prefix(&format!("{challenge}-")) {
                    Some(n) => n.parse::<u32>().unwrap(),
                    None => return refuse(400, "bad_request", "wrong echo"),
                },
            };
            if leg == 0 {
                fake.first_legs.wait().await;
            }
            if leg == 3 {
                reply(200, json!({"rtt_ms": rtt}).to_string())
            } else {
                let echo = format!("{challenge}-{}", leg + 1);
                reply(
                    200,
                    json!({"echo": echo, "rounds_left": 3 - leg}).to_string(),
                )
            }
        }
        _ if !token_ok => refuse(401, "unauthorized", "wrong search token"),
        ("POST", p) if p == format!("/match/searches/{SEARCH}/queue") => {
            let mut s = search("queued", "", "");
            s["heartbeat_secs"] = json!(fake.heartbeat_secs);
            reply(200, s.to_string())
        }
        ("POST", p) if p == format!("/match/searches/{SEARCH}/heartbeat") => {
            let scripted = fake.heartbeats.lock().unwrap().pop_front();
            let (status, body) = scripted.unwrap_or_else(|| ok(&search("queued", "", "")));
            reply(status, body)
        }
        ("GET", p) if p == format!("/match/searches/{SEARCH}") => {
            let next = fake.reads.lock().await.recv().await;
            let (status, body) = next.unwrap_or_else(|| ok(&search("queued", "", "")));
            reply(status, body)
        }
        ("DELETE", p) if p == format!("/match/searches/{SEARCH}") => {
            let (status, body) = ok(&search("cancelled", "", ""));
            reply(status, body)
        }
        _ => refuse(404, "no_search", "no such route"),
    }
}

/// A zone host that counts the connections it is opened.
struct Zone {
    url: String,
    conns: mpsc::UnboundedReceiver<HostConn>,
    opened: Arc<AtomicUsize>,
}

impl Zone {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}/zones/duel-m-1", listener.local_addr().unwrap());
        let opened = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&opened);
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
                let conn = HostConn {
                    ws,
                    target: String::new(),
                    bytes_in: 0,
                    bytes_out: 0,
                    messages_in: 0,
                    messages_out: 0,
                    pings: 0,
                };
                if tx.send(conn).is_err() {
                    return;
                }
            }
        });
        Self {
            url,
            conns: rx,
            opened,
        }
    }

    /// Welcomes the next connection and returns the ticket it presented.
    async fn admit_next(&mut self) -> String {
        let mut hc = self.conns.recv().await.unwrap();
        let hello = hc.hello().await;
        hc.admit(7, b"tok", 100).await;
        hc.drain();
        hello.ticket
    }
}

/// The states `on_state` reported, shared with the callback.
fn recorder(opts: MatchOptions) -> (MatchOptions, Arc<Mutex<Vec<SearchState>>>) {
    let states = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&states);
    let opts = opts.with_on_state(move |s| log.lock().unwrap().push(s.state));
    (opts, states)
}

fn assert_forward_only(states: &[SearchState]) {
    assert!(
        states.windows(2).all(|w| w[0].rank() < w[1].rank()),
        "states went back: {states:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regions_are_measured_then_the_match_is_joined_once() {
    guarded(async {
        let mut mm = Matchmaker::start([ProbeMode::Rtt(12), ProbeMode::Rtt(81)], 10, None).await;
        let mut zone = Zone::start().await;
        let (opts, states) = recorder(mm.options());
        let client = tokio::spawn(matchmake_and_connect(opts, options("ignored")));

        let first = mm.until(is_read).await;
        assert!(
            first.target.contains("wait_ms=25000") && first.target.contains("state=queued"),
            "{first:?}"
        );
        mm.answer_read(ok(&search("proposed", "", "")));
        let second = mm.until(is_read).await;
        assert!(second.target.contains("state=proposed"), "{second:?}");
        mm.answer_read(ok(&search("assigned", "m-1", &zone.url)));

        assert_eq!(zone.admit_next().await, "zone-ticket-m-1");
        let (matched, conn, welcome) = client.await.unwrap().unwrap();
        assert_eq!(welcome.player_id, 7);
        assert_eq!(matched.assignment.zone, "duel-m-1");
        assert_eq!(matched.assignment.url, zone.url);
        assert_eq!(matched.search.rtt_ms.get("us"), Some(&81));
        assert_eq!(zone.opened.load(Ordering::SeqCst), 1);
        use SearchState::*;
        assert_eq!(*states.lock().unwrap(), [Probing, Queued, Proposed, Assigned]);

        let log = mm.log();
        let create = &log[0];
        assert_eq!(
            (create.method.as_str(), create.target.as_str()),
            ("POST", "/match/searches")
        );
        assert_eq!(create.auth.as_deref(), Some("Bearer match-ticket"));
        let body: Value = serde_json::from_str(&create.body).unwrap();
        assert_eq!(
            body,
            json!({"queue": "duel", "protocol_version": PROTOCOL_VERSION, "content_version": "1.4.0"})
        );
        // Each region's host was asked at its own URL: a first call, then one per echo.
        for (region, host) in [("eu", &mm.base), ("us", &mm.fake.regions[1].1)] {
            let legs: Vec<&Seen> = log
                .iter()
                .filter(|s| s.target.contains(&format!("challenge=ch-{region}")))
                .collect();
            let targets: Vec<&str> = legs.iter().map(|s| s.target.as_str()).collect();
            let c = format!("/match/probe?challenge=ch-{region}");
            assert_eq!(
                targets,
                [
                    c.clone(),
                    format!("{c}&echo=ch-{region}-1"),
                    format!("{c}&echo=ch-{region}-2"),
                    format!("{c}&echo=ch-{region}-3"),
                ],
                "{region}"
            );
            for leg in legs {
                assert_eq!(
                    (leg.method.as_str(), leg.auth.as_deref(), leg.body.as_str()),
                    ("POST", None, "")
                );
                assert_eq!(format!("http://{}", leg.host), *host);
            }
        }
        let queue = log.iter().position(|s| s.target.ends_with("/queue")).unwrap();
        let last_probe = log.iter().rposition(|s| s.target.contains("/probe")).unwrap();
        assert!(queue > last_probe, "queued before the probes were done");
        assert_eq!(log[queue].auth.as_deref(), Some("Bearer tok-1"));
        assert!(!log.iter().any(|s| s.method == "DELETE"));
        conn.close().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assignment_answered_twice_is_joined_once() {
    guarded(async {
        // Heartbeats every second: the heartbeat and the long poll both answer the assignment.
        let mut mm = Matchmaker::start([ProbeMode::Rtt(12), ProbeMode::Rtt(81)], 1, None).await;
        let mut zone = Zone::start().await;
        let (opts, states) = recorder(mm.options());
        let client = tokio::spawn(matchmake_and_connect(opts, options("ignored")));
        let assigned = ok(&search("assigned", "m-1", &zone.url));
        mm.answer_heartbeat(assigned.clone());
        mm.until(is_read).await;
        mm.until(is_heartbeat).await;
        mm.answer_read(assigned);

        assert_eq!(zone.admit_next().await, "zone-ticket-m-1");
        let (matched, conn, _) = client.await.unwrap().unwrap();
        assert_eq!(matched.assignment.match_id, "m-1");
        assert_eq!(zone.opened.load(Ordering::SeqCst), 1);
        let states = states.lock().unwrap().clone();
        assert_eq!(states.last(), Some(&SearchState::Assigned));
        assert_forward_only(&states);
        conn.close().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_answer_after_the_assignment_changes_nothing() {
    guarded(async {
        let mut mm = Matchmaker::start([ProbeMode::Rtt(12), ProbeMode::Rtt(81)], 1, None).await;
        let mut zone = Zone::start().await;
        let (opts, states) = recorder(mm.options());
        let client = tokio::spawn(matchmake_and_connect(opts, options("ignored")));
        // The heartbeat carries the assignment; the long poll held until then answers older news.
        mm.answer_heartbeat(ok(&search("assigned", "m-1", &zone.url)));
        mm.until(is_read).await;
        mm.until(is_heartbeat).await;
        mm.answer_read(ok(&search("proposed", "", "")));

        assert_eq!(zone.admit_next().await, "zone-ticket-m-1");
        let (matched, conn, _) = client.await.unwrap().unwrap();
        assert_eq!(matched.assignment.match_id, "m-1");
        assert_eq!(zone.opened.load(Ordering::SeqCst), 1);
        let states = states.lock().unwrap().clone();
        assert_eq!(states.last(), Some(&SearchState::Assigned));
        assert_forward_only(&states);
        conn.close().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn older_answers_while_waiting_never_move_the_search_back() {
    guarded(async {
        let mm = Matchmaker::start([ProbeMode::Rtt(12), ProbeMode::Rtt(81)], 10, None).await;
        let (opts, states) = recorder(mm.options());
        let client = tokio::spawn(matchmake(opts));
        mm.answer_read(ok(&search("allocated", "", "")));
        // Older news: the next poll waits on what the matchmaker said last, the tracker keeps
        // `allocated`.
        mm.answer_read(ok(&search("queued", "", "")));
        mm.answer_read(ok(&search("assigned", "m-1", "ws://127.0.0.1:9/zones/z")));
        let matched = client.await.unwrap().unwrap();
        assert_eq!(matched.assignment.ticket, "zone-ticket-m-1");
        use SearchState::*;
        assert_eq!(
            *states.lock().unwrap(),
            [Probing, Queued, Allocated, Assigned]
        );
        let polled: Vec<String> = mm
            .log()
            .into_iter()
            .filter(is_read)
            .map(|s| s.target)
            .collect();
        assert_eq!(polled.len(), 3, "{polled:?}");
        for (target, state) in polled.iter().zip(["queued", "allocated", "queued"]) {
            assert!(target.ends_with(&format!("state={state}")), "{target}");
        }
    })
    .await;
}

#[tokio::test]
async fn an_outdated_client_is_told_so_once() {
    guarded(async {
        let refusal = json!({"error": "client_outdated", "message": "update to 1.5"}).to_string();
        let mm = Matchmaker::start(
            [ProbeMode::Rtt(12), ProbeMode::Rtt(81)],
            10,
            Some((426, refusal)),
        )
        .await;
        let err = matchmake(mm.options()).await.unwrap_err();
        assert!(matches!(&err, MatchError::Outdated { message } if message == "update to 1.5"));
        assert!(err.is_outdated());
        assert!(!err.retryable());
        // Not retried, nothing else asked.
        assert_eq!(mm.log().len(), 1, "{:?}", mm.log());
    })
    .await;
}

#[tokio::test]
async fn no_region_answering_cancels_the_search() {
    guarded(async {
        let mm = Matchmaker::start([ProbeMode::Refuse, ProbeMode::Unreachable], 10, None).await;
        let err = matchmake(mm.options()).await.unwrap_err();
        assert!(matches!(err, MatchError::NoProbeResult), "{err:?}");
        assert!(err.retryable());
        let log = mm.log();
        assert!(!log.iter().any(|s| s.target.ends_with("/queue")));
        let delete = log.last().unwrap();
        assert_eq!(
            (delete.method.as_str(), delete.target.as_str()),
            ("DELETE", "/match/searches/s-1")
        );
        assert_eq!(delete.auth.as_deref(), Some("Bearer tok-1"));
    })
    .await;
}

#[tokio::test]
async fn a_search_the_matchmaker_expires_can_be_tried_again() {
    guarded(async {
        let mm = Matchmaker::start([ProbeMode::Rtt(12), ProbeMode::Refuse], 10, None).await;
        let mut expired = search("expired", "", "");
        expired["reason"] = json!("no_heartbeat");
        mm.answer_read(ok(&expired));
        let err = matchmake(mm.options()).await.unwrap_err();
        assert!(
            matches!(&err, MatchError::Ended { state: SearchState::Expired, reason: Some(r) } if r == "no_heartbeat"),
            "{err:?}"
        );
        assert!(err.retryable() && !err.is_outdated());
        // One region answering is enough to queue; an ended search is not deleted.
        assert!(mm.log().iter().any(|s| s.target.ends_with("/queue")));
        assert!(!mm.log().iter().any(|s| s.method == "DELETE"));
    })
    .await;
}

#[tokio::test]
async fn a_malformed_answer_ends_the_search() {
    guarded(async {
        let mm = Matchmaker::start([ProbeMode::Rtt(12), ProbeMode::Rtt(81)], 10, None).await;
        mm.answer_read((200, r#"{"search": "s-1", "state": "#.to_owned()));
        let err = matchmake(mm.options()).await.unwrap_err();
        assert!(matches!(err, MatchError::Malformed(_)), "{err:?}");
        assert!(!err.retryable());
        assert_eq!(
            mm.log().last().map(|s| s.method.clone()).as_deref(),
            Some("DELETE")
        );
    })
    .await;
}

#[tokio::test]
async fn a_busy_matchmaker_is_polled_again() {
    guarded(async {
        let mm = Matchmaker::start([ProbeMode::Rtt(12), ProbeMode::Rtt(81)], 10, None).await;
        let busy = json!({"error": "unavailable", "message": "store down"}).to_string();
        mm.answer_read((503, busy));
        mm.answer_read(ok(&search("assigned", "m-1", "ws://127.0.0.1:9/zones/z")));
        let matched = matchmake(mm.options()).await.unwrap();
        assert_eq!(matched.assignment.match_id, "m-1");
        assert_eq!(mm.log().iter().filter(|s| is_read(s)).count(), 2);
    })
    .await;
}

#[tokio::test]
async fn a_cancelled_search_is_deleted() {
    guarded(async {
        let mut mm = Matchmaker::start([ProbeMode::Rtt(12), ProbeMode::Rtt(81)], 10, None).await;
        let cancel = MatchCancel::new();
        let client = tokio::spawn(matchmake(mm.options().with_cancel(cancel.clone())));
        mm.until(is_read).await;
        cancel.cancel();
        let err = client.await.unwrap().unwrap_err();
        assert!(matches!(err, MatchError::Cancelled), "{err:?}");
        assert!(!err.retryable());
        let delete = mm.until(|s| s.method == "DELETE").await;
        assert_eq!(delete.target, "/match/searches/s-1");
    })
    .await;
}
