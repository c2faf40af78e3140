//! Chat (docs/CHAT.md, protocol version 11) on a fleet of two real `zonekeep serve` processes on
//! one PostgreSQL store, each with the back end's credential (`--lobby-token`) and a host id of
//! its own. Two `courier` zones, one on each host, are in the world `world-1`:
//!
//! 1. a line on the world's channel crosses to the other process, a direct message is heard on
//!    the other side named after its sender, and a zone's line stays in its zone;
//! 2. a player who reconnects is sent the world's history, every line in seq order, before any
//!    live line;
//! 3. a fleet-wide ban written through one host closes the principal's session on the other and
//!    keeps it out of both;
//! 4. a mute on the world holds until the deadline the host gave, and not after it;
//! 5. a report filed on one host is read through the other with the store's copy of the line;
//! 6. hostile input (a forged-looking body, an oversized line, a flood) is answered with the
//!    documented refusals, and the other host keeps serving.
//!
//! Every wait is on a frame, a kick or an HTTP answer, except the mute's own deadline. The test
//! runs in a PostgreSQL schema of its own (the database is shared).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use support::{host_id_for, Server, StoreSpec, ADMIN_TOKEN, LOBBY_TOKEN};
use tokio_tungstenite::tungstenite::Message;
use zonekeep_protocol::messages::{
    Chat, ChatLines, ChatReply, ChatReplyCode, ChatReport, ClientMessage, KickCode, ServerMessage,
    FEATURE_CHAT,
};

/// The world both zones are in.
const WORLD: &str = "group:world-1";
/// The longest line the hosts take (`--chat-max-line`).
const MAX_LINE: usize = 100;
/// The longest wait for any one frame (they come within a feed read, 100 ms, or a sanctions
/// read, 500 ms: this only bounds a failure).
const FRAME_WITHIN: Duration = Duration::from_secs(10);
/// How soon a ban written through one host closes a session on the other (the docs say within
/// a second: each host reads the sanctions every half second).
const BAN_WITHIN: Duration = Duration::from_secs(2);

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        .try_into()
        .unwrap()
}

/// The last lines of each log, for a failure's message.
fn logs(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(30).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            format!("--- {}\n{}", p.display(), tail.join("\n"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a chat session hears.
#[derive(Debug)]
enum Heard {
    Lines(ChatLines),
    Reply(ChatReply),
    Kick(KickCode, String),
    Closed,
}

/// A raw protocol version 11 session that speaks chat: it names no sender anywhere (the host
/// takes its ticket's principal) and passes over everything but chat frames and kicks.
struct Talker {
    who: String,
    ws: Ws,
    next_ref: u32,
    /// The fleet's logs, shown when a wait fails.
    logs: Vec<PathBuf>,
}

impl Talker {
    /// Joins courier `zone` at `host` as `sub` (a fresh join with a fresh ticket): the session and
    /// the history it is sent first, one ChatLines per channel of its zone (`zone:<zone>` and the
    /// world's), sorted by channel; or the Kick that refused it.
    async fn join(
        host: &Server,
        zone: &str,
        sub: &str,
        logs: &[PathBuf],
    ) -> Result<(Talker, Vec<ChatLines>), (KickCode, String)> {
        let ticket = support::ticket_for(sub, zone, "courier");
        let ws = support::hello(&host.addr, zone, ticket).await;
        let mut t = Talker {
            who: format!("{sub}@{zone}"),
            ws,
            next_ref: 0,
            logs: logs.to_vec(),
        };
        match t.next_message().await {
            Some(ServerMessage::Welcome(w)) => {
                assert_eq!(w.version, 11, "{}: {w:?}", t.who);
                assert_eq!(
                    w.features & FEATURE_CHAT,
                    FEATURE_CHAT,
                    "{}: a host with a store keeps chat",
                    t.who
                );
            }
            Some(ServerMessage::Kick(k)) => return Err((k.code, k.reason)),
            other => panic!("{}: no Welcome: {other:?}", t.who),
        }
        let mut histories = Vec::new();
        for _ in 0..2 {
            match t.hear().await {
                Heard::Lines(l) => {
                    assert!(
                        l.history && l.reference == 0,
                        "{}: the histories come first, ref 0: {l:?}",
                        t.who
                    );
                    histories.push(l);
                }
                other => panic!("{}: expected a history, heard {other:?}", t.who),
            }
        }
        histories.sort_by(|a, b| a.channel.cmp(&b.channel));
        let channels: Vec<&str> = histories.iter().map(|h| h.channel.as_str()).collect();
        assert_eq!(
            channels,
            [WORLD.to_owned(), format!("zone:{zone}")],
            "{}: one history per channel of its zone",
            t.who
        );
        Ok((t, histories))
    }

    /// The next server message other than a Delta (a courier's report rides in Deltas), or
    /// `None` once the connection closed.
    async fn next_message(&mut self) -> Option<ServerMessage> {
        let deadline = tokio::time::Instant::now() + FRAME_WITHIN;
        loop {
            let read = tokio::time::timeout_at(deadline, self.ws.next()).await;
            let Ok(m) = read else {
                panic!(
                    "{}: nothing heard within {FRAME_WITHIN:?}\n{}",
                    self.who,
                    logs(&self.logs)
                );
            };
            let bytes = match m {
                Some(Ok(Message::Binary(b))) => b,
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return None,
                Some(Ok(_)) => continue,
            };
            // A Delta decodes only against the zone's schema and known set; chat needs neither.
            if bytes.first() == Some(&0x82) {
                continue;
            }
            match ServerMessage::decode(&bytes, None) {
                Ok(m) => return Some(m),
                Err(e) => panic!("{}: an undecodable server message: {e}", self.who),
            }
        }
    }

    /// The next chat frame or kick.
    async fn hear(&mut self) -> Heard {
        loop {
            match self.next_message().await {
                Some(ServerMessage::ChatLines(l)) => return Heard::Lines(l),
                Some(ServerMessage::ChatReply(r)) => return Heard::Reply(r),
                Some(ServerMessage::Kick(k)) => return Heard::Kick(k.code, k.reason),
                Some(_) => {}
                None => return Heard::Closed,
            }
        }
    }

    /// Says `body` on `channel`; answers the line's ref.
    async fn say(&mut self, channel: &str, body: &str) -> u32 {
        self.next_ref += 1;
        let reference = self.next_ref;
        let m = ClientMessage::Chat(Chat {
            reference,
            channel: channel.into(),
            body: body.into(),
        });
        self.send(&m).await;
        reference
    }

    async fn send(&mut self, m: &ClientMessage) {
        self.ws
            .send(Message::Binary(m.to_bytes().unwrap().into()))
            .await
            .unwrap();
    }

    /// The next frame must be the live line `body` said by `sender` on `channel` (as this session
    /// names it): answers its seq.
    async fn expect_line(&mut self, channel: &str, sender: &str, body: &str) -> u64 {
        match self.hear().await {
            Heard::Lines(l) => {
                assert!(
                    !l.history && l.reference == 0 && l.lines.len() == 1,
                    "{}: expected one live line, heard {l:?}",
                    self.who
                );
                let line = &l.lines[0];
                assert_eq!(
                    (l.channel.as_str(), line.sender.as_str(), line.body.as_str()),
                    (channel, sender, body),
                    "{}: heard {l:?}",
                    self.who
                );
                line.seq
            }
            other => panic!(
                "{}: expected {sender}'s line {body:?} on {channel}, heard {other:?}",
                self.who
            ),
        }
    }

    /// The next frame must be a ChatReply to `reference`.
    async fn reply(&mut self, reference: u32) -> ChatReply {
        match self.hear().await {
            Heard::Reply(r) => {
                assert_eq!(r.reference, reference, "{}: {r:?}", self.who);
                r
            }
            other => panic!(
                "{}: expected the reply to {reference}, heard {other:?}",
                self.who
            ),
        }
    }

    /// Closes the connection (the player leaves).
    async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }
}

fn bodies(h: &ChatLines) -> Vec<&str> {
    h.lines.iter().map(|l| l.body.as_str()).collect()
}

fn seqs(h: &ChatLines) -> Vec<u64> {
    h.lines.iter().map(|l| l.seq).collect()
}

/// Creates courier `zone` in the world on `host` (whose id is `host_id`), through its admin API.
async fn create(host: &Server, host_id: &str, zone: &str) {
    let (status, body) = host
        .admin_request(
            "POST",
            "/admin/zones",
            Some(&json!({
                "id": zone, "kind": "courier", "host": host_id,
                "params": {"groups": ["world-1"]},
            })),
        )
        .await;
    assert_eq!(status, 201, "creating {zone}: {body}");
}

/// A request with the back end's credential: the status and the answer.
async fn backend(host: &Server, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    host.lobby_request(method, path, body.as_ref()).await
}

/// Starts host `name` of the fleet on `store`, logging to `dir/<name>.log`.
async fn host(store: &StoreSpec, dir: &Path, name: &str) -> (Server, String) {
    let log = dir.join(format!("{name}.log"));
    let id = host_id_for(&log);
    let max_line = MAX_LINE.to_string();
    let args = [
        "--admin-token",
        ADMIN_TOKEN,
        "--lobby-token",
        LOBBY_TOKEN,
        "--host-id",
        &id,
        "--chat-max-line",
        &max_line,
    ];
    let server = Server::start(store, &args, &log).await;
    assert_eq!(server.host_id().await, id);
    (server, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_crosses_processes_bans_hold_fleet_wide_and_hostile_lines_are_refused() {
    let test = "chat_crosses_processes_bans_hold_fleet_wide_and_hostile_lines_are_refused";
    let Some(url) = support::service_url("ZONEKEEP_TEST_POSTGRES", test) else {
        return;
    };
    let store = StoreSpec::postgres_isolated(&url, &support::unique_run()).await;
    let dir = tempfile::tempdir().unwrap();
    let (h1, h1_id) = host(&store, dir.path(), "h1").await;
    let (h2, h2_id) = host(&store, dir.path(), "h2").await;
    assert_ne!(h1_id, h2_id);
    let logs = vec![h1.log.clone(), h2.log.clone()];
    create(&h1, &h1_id, "w-a").await;
    create(&h2, &h2_id, "w-b").await;

    // 1. Ann on the first host, Bob on the second; nothing said yet.
    let (mut ann, history) = Talker::join(&h1, "w-a", "ann", &logs).await.unwrap();
    assert!(history.iter().all(|h| h.lines.is_empty()), "{history:?}");
    let (mut bob, history) = Talker::join(&h2, "w-b", "bob", &logs).await.unwrap();
    assert!(history.iter().all(|h| h.lines.is_empty()), "{history:?}");

    // The world's line crosses to the other process.
    ann.say(WORLD, "hello world").await;
    let first = ann.expect_line(WORLD, "ann", "hello world").await;
    assert_eq!(first, 1, "a channel's lines are numbered from 1");
    assert_eq!(bob.expect_line(WORLD, "ann", "hello world").await, first);

    // A direct message: bob names ann, ann hears it named after bob.
    bob.say("dm:ann", "psst").await;
    let dm = bob.expect_line("dm:ann", "bob", "psst").await;
    assert_eq!(ann.expect_line("dm:bob", "bob", "psst").await, dm);

    // A zone's line stays in its zone. The back end then says a world line through the same
    // host, kept after it: the other host's feed reads lines in the order they were kept, so
    // bob's next frame being that line shows he was never sent the zone's.
    ann.say("zone:w-a", "just us").await;
    ann.expect_line("zone:w-a", "ann", "just us").await;
    let (status, said) = backend(
        &h1,
        "POST",
        "/chat/lines",
        Some(json!({"channel": WORLD, "sender": "@system", "body": "welcome to world-1"})),
    )
    .await;
    assert_eq!(status, 201, "{said}");
    assert_eq!(said["seq"], 2, "{said}");
    for t in [&mut ann, &mut bob] {
        assert_eq!(
            t.expect_line(WORLD, "@system", "welcome to world-1").await,
            2
        );
    }

    // 2. Bob leaves; ann says two more world lines (heard by her: kept); bob joins afresh.
    bob.close().await;
    for body in ["two", "three"] {
        ann.say(WORLD, body).await;
        ann.expect_line(WORLD, "ann", body).await;
    }
    let (mut bob, history) = Talker::join(&h2, "w-b", "bob", &logs).await.unwrap();
    assert_eq!(
        bodies(&history[0]),
        ["hello world", "welcome to world-1", "two", "three"],
        "the world's history holds every line: {:?}",
        history[0]
    );
    assert_eq!(seqs(&history[0]), [1, 2, 3, 4], "in seq order");
    let senders: Vec<&str> = history[0].lines.iter().map(|l| l.sender.as_str()).collect();
    assert_eq!(senders, ["ann", "@system", "ann", "ann"]);
    assert!(history[1].lines.is_empty(), "nobody spoke in w-b");
    // Live lines follow the history, none of it twice.
    ann.say(WORLD, "four").await;
    assert_eq!(ann.expect_line(WORLD, "ann", "four").await, 5);
    assert_eq!(bob.expect_line(WORLD, "ann", "four").await, 5);

    // 3. Carl plays on the second host; the back end bans him fleet-wide through the first.
    let (mut carl, _) = Talker::join(&h2, "w-b", "carl", &logs).await.unwrap();
    let (status, ban) = backend(
        &h1,
        "POST",
        "/chat/sanctions",
        Some(json!({
            "principal": "carl", "action": "ban", "scope": "fleet", "seconds": 600,
            "reason": "cheating",
        })),
    )
    .await;
    let banned_at = Instant::now();
    assert_eq!(status, 201, "{ban}");
    assert_eq!(
        (&ban["action"], &ban["scope"], &ban["actor"]),
        (&json!("ban"), &json!("fleet"), &json!("@backend")),
        "{ban}"
    );
    let kick = carl.hear().await;
    let took = banned_at.elapsed();
    match &kick {
        Heard::Kick(code, reason) => {
            assert_eq!(*code, KickCode::BANNED, "{reason}");
            assert!(
                reason.contains("banned from fleet") && reason.contains("cheating"),
                "{reason}"
            );
        }
        other => panic!("carl's session on the other host was not kicked: {other:?}"),
    }
    assert!(
        took <= BAN_WITHIN,
        "the ban closed carl's session on the other host after {took:?}"
    );
    assert!(
        matches!(carl.hear().await, Heard::Closed),
        "the kick ends the connection"
    );
    // Kept out of both hosts: the other one's own read, and the one it was written through.
    for (h, zone) in [(&h2, "w-b"), (&h1, "w-a")] {
        match Talker::join(h, zone, "carl", &logs).await {
            Err((code, reason)) => {
                assert_eq!(code, KickCode::BANNED, "{zone}: {reason}");
                assert!(
                    reason.contains("fleet") && reason.contains("cheating"),
                    "{zone}: the refusal names the scope and the reason: {reason}"
                );
            }
            Ok(_) => panic!("carl, banned, was let into {zone}"),
        }
    }

    // 4. The back end mutes bob in the world for a second, through his own host.
    let (status, mute) = backend(
        &h2,
        "POST",
        "/chat/sanctions",
        Some(json!({
            "principal": "bob", "action": "mute", "scope": WORLD, "seconds": 1,
            "reason": "shouting",
        })),
    )
    .await;
    assert_eq!(status, 201, "{mute}");
    let until = mute["until_ms"].as_u64().unwrap();
    let r = bob.say(WORLD, "LOUD").await;
    let muted = bob.reply(r).await;
    assert_eq!(muted.code, ChatReplyCode::MUTED, "{muted:?}");
    assert_eq!(muted.until_ms, until, "the mute's end, as the host gave it");
    assert!(
        muted.text.contains(WORLD) && muted.text.contains("shouting"),
        "{muted:?}"
    );
    // A world's mute silences its zones' channels too, not a direct message.
    let r = bob.say("zone:w-b", "loud here too").await;
    assert_eq!(bob.reply(r).await.code, ChatReplyCode::MUTED);
    bob.say("dm:ann", "still here").await;
    bob.expect_line("dm:ann", "bob", "still here").await;
    ann.expect_line("dm:bob", "bob", "still here").await;
    // The mute's own deadline: from that instant it no longer holds.
    if let Some(left) = until.checked_sub(now_ms()) {
        tokio::time::sleep(Duration::from_millis(left)).await;
    }
    while now_ms() < until {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let back = "  back — with an épée  ";
    bob.say(WORLD, back).await;
    let reported = bob.expect_line(WORLD, "bob", back).await;
    assert_eq!(reported, 6);
    assert_eq!(ann.expect_line(WORLD, "bob", back).await, reported);

    // 5. Ann reports bob's line on her host; the back end reads it through the other one.
    ann.next_ref += 1;
    let r = ann.next_ref;
    ann.send(&ClientMessage::ChatReport(ChatReport {
        reference: r,
        channel: WORLD.into(),
        seqs: vec![reported],
        reason: "rude".into(),
    }))
    .await;
    let filed = ann.reply(r).await;
    assert_eq!(filed.code, ChatReplyCode::OK, "{filed:?}");
    let id: u64 = filed.text.parse().expect("a report's id");
    let (status, reports) = backend(&h2, "GET", "/chat/reports", None).await;
    assert_eq!(status, 200, "{reports}");
    let report = reports["reports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("report {id} is not listed: {reports}"));
    assert_eq!(report["reporter"], "ann", "{report}");
    assert_eq!(report["channel"], WORLD, "{report}");
    assert_eq!(report["reason"], "rude", "{report}");
    let lines = report["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 1, "{report}");
    assert_eq!(lines[0]["seq"], reported, "{report}");
    assert_eq!(lines[0]["sender"], "bob", "{report}");
    assert_eq!(
        lines[0]["body"], back,
        "the store's copy, exactly: {report}"
    );

    // 6. Hostile input. A body dressed up as another sender's is still the ticket's principal's,
    // on both hosts.
    let (mut mal, _) = Talker::join(&h1, "w-a", "mal", &logs).await.unwrap();
    // Its right-to-left override is a format character, not a control one: the host takes it.
    let forged = "[@system] bob: I give all my gold to mal \u{202e}lam\u{202c}";
    mal.say(WORLD, forged).await;
    let seq = mal.expect_line(WORLD, "mal", forged).await;
    assert_eq!(ann.expect_line(WORLD, "mal", forged).await, seq);
    assert_eq!(bob.expect_line(WORLD, "mal", forged).await, seq);
    // Another host's zone is not his channel.
    let r = mal.say("zone:w-b", "sneaking in").await;
    assert_eq!(mal.reply(r).await.code, ChatReplyCode::NOT_ALLOWED);
    // At most --chat-max-line bytes (not characters): 100 bytes pass, 101 are INVALID.
    let full = "é".repeat(MAX_LINE / 2);
    mal.say("zone:w-a", &full).await;
    mal.expect_line("zone:w-a", "mal", &full).await;
    ann.expect_line("zone:w-a", "mal", &full).await;
    let r = mal.say("zone:w-a", &"x".repeat(MAX_LINE + 1)).await;
    let too_long = mal.reply(r).await;
    assert_eq!(too_long.code, ChatReplyCode::INVALID, "{too_long:?}");
    assert!(too_long.text.contains("100"), "{too_long:?}");
    mal.close().await;

    // A flood: the burst (5) passes, the rest is refused with when to speak again.
    let (mut flo, _) = Talker::join(&h1, "w-a", "flo", &logs).await.unwrap();
    let sent_at = now_ms();
    let flood = 8;
    for i in 1..=flood {
        flo.say("zone:w-a", &format!("flood {i}")).await;
    }
    let (mut passed, mut limited) = (Vec::new(), BTreeSet::new());
    while passed.len() + limited.len() < flood {
        match flo.hear().await {
            Heard::Lines(l) => {
                assert!(!l.history && l.lines.len() == 1, "{l:?}");
                assert_eq!(l.lines[0].sender, "flo", "{l:?}");
                passed.push(l.lines[0].body.clone());
            }
            Heard::Reply(r) => {
                assert_eq!(r.code, ChatReplyCode::RATE_LIMITED, "{r:?}");
                assert!(
                    r.until_ms >= sent_at && r.until_ms <= now_ms() + 1000,
                    "when to speak again, within the rate's period: {r:?}"
                );
                limited.insert(r.reference);
            }
            other => panic!("flo: {other:?}"),
        }
    }
    let burst: Vec<String> = (1..=5).map(|i| format!("flood {i}")).collect();
    assert!(
        passed.len() >= 5 && passed[..5] == burst[..],
        "the burst passes, in order: {passed:?}"
    );
    assert!(
        !limited.is_empty() && limited.contains(&8),
        "beyond the burst, refused: {limited:?}"
    );
    println!(
        "a ban closed a session on the other host after {took:?}; a flood of {flood}: {} passed, \
         {} refused",
        passed.len(),
        limited.len()
    );
    for body in &passed {
        ann.expect_line("zone:w-a", "flo", body).await;
    }
    flo.close().await;
    let refused = "zonekeep_chat_refused_total{reason=\"rate_limited\"}";
    assert!(h1.metric(refused).await >= limited.len() as f64);

    // The other host keeps serving: bob's line crosses to ann, and a new player there is sent
    // the world's history as kept, the forged line under its real sender.
    bob.say(WORLD, "still here on host 2").await;
    let seq = bob.expect_line(WORLD, "bob", "still here on host 2").await;
    assert_eq!(
        ann.expect_line(WORLD, "bob", "still here on host 2").await,
        seq
    );
    let (dan, history) = Talker::join(&h2, "w-b", "dan", &logs).await.unwrap();
    let last_two: Vec<(&str, &str)> = history[0].lines[history[0].lines.len() - 2..]
        .iter()
        .map(|l| (l.sender.as_str(), l.body.as_str()))
        .collect();
    assert_eq!(
        last_two,
        [("mal", forged), ("bob", "still here on host 2")],
        "{:?}",
        history[0]
    );
    assert_eq!(
        h2.metric(refused).await,
        0.0,
        "the flood was on the other host"
    );

    for t in [ann, bob, dan] {
        t.close().await;
    }
}
