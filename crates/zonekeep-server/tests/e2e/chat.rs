//! Chat end to end: two hosts of a fleet on PostgreSQL (zone, group and direct channels across
//! them, history before live lines after a reconnect, bans on every host, mutes that expire,
//! moderators within their tickets, reports that file the store's copy) and one host on SQLite
//! answering hostile input with clear refusals.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use zonekeep_core::{Ctx, InputRefusal, PlayerId, Zone, ZoneConfig, ZoneError, ZoneInit};
use zonekeep_protocol::messages::{
    Chat, ChatHistory, ChatLines, ChatReply, ChatReplyCode, ChatReport, ClientMessage, KickCode,
    ServerMessage, FEATURE_CHAT,
};
use zonekeep_server::config::Secret;
use zonekeep_server::persist::{PersistConfig, Persistence};
use zonekeep_server::{Host, ServerConfig};

use crate::common::*;
use crate::lasting::Backend;

const BACKEND: &str = "backend-token-0123456789";

/// A zone that joins the group its params name (`{"group": "world-1"}`), and nothing more.
struct Talk;

impl Zone for Talk {
    type Input = ();
    fn create(init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        if let Some(g) = init.params.get("group").and_then(Value::as_str) {
            ctx.join_group(g)
                .map_err(|e| ZoneError::InvalidParams(format!("group: {e:?}")))?;
        }
        Ok(Talk)
    }
    fn sanitize(&mut self, _p: PlayerId, _payload: &[u8]) -> Result<(), InputRefusal> {
        Ok(())
    }
    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
}

/// A chat host named `id` on `backend` (a fleet member when it has an id).
async fn chat_host(
    id: Option<&str>,
    backend: &Backend,
    dir: &Path,
    cfg: ServerConfig,
) -> TestServer {
    let p = Persistence::open(PersistConfig {
        store: backend.store(),
        data_dir: dir.to_path_buf(),
        ..PersistConfig::default()
    })
    .await
    .unwrap();
    let host = Host::builder()
        .config(ServerConfig {
            data_dir: dir.to_path_buf(),
            host_id: id.map(str::to_owned),
            lobby_token: Some(Secret::new(BACKEND.to_owned())),
            ..cfg
        })
        .zone_with::<Talk>("talk", ZoneConfig::default(), Value::Null)
        .persistence(p)
        .build()
        .unwrap();
    TestServer::serve(host).await
}

/// Creates zone `id` (kind `talk`, in `group` if any) on the host named `host`, asking `server`.
async fn talk_zone(server: &TestServer, host: Option<&str>, id: &str, group: Option<&str>) {
    let mut body = json!({"id": id, "kind": "talk", "params": {"group": group}});
    if let Some(h) = host {
        body["host"] = json!(h);
    }
    let (status, body) = http(server, "POST", "/admin/zones", Some(ADMIN), Some(body)).await;
    assert_eq!(status, 201, "{body}");
}

/// What a chat client hears.
#[derive(Debug)]
enum Heard {
    Lines(ChatLines),
    Reply(ChatReply),
    Kick(KickCode, String),
}

/// A session that speaks chat (protocol version 11).
struct Talker {
    ws: Ws,
    next_ref: u32,
}

impl Talker {
    /// Joins `zone` as `sub`, whose zone has `channels` channels (its own and its groups'):
    /// the session and the history of each, in channel-name order.
    async fn join(
        server: &TestServer,
        zone: &str,
        sub: &str,
        channels: usize,
    ) -> (Talker, Vec<ChatLines>) {
        let mut ws = connect(server, zone).await;
        send(&mut ws, hello_bytes(&ticket(sub, zone), &[])).await;
        match recv(&mut ws, &empty_schema()).await {
            Seen::Msg(ServerMessage::Welcome(w)) => {
                assert_eq!(w.version, 11);
                assert_eq!(
                    w.features & FEATURE_CHAT,
                    FEATURE_CHAT,
                    "a host with a store keeps chat"
                );
            }
            other => panic!("no Welcome: {other:?}"),
        }
        let mut t = Talker { ws, next_ref: 0 };
        let mut histories = Vec::new();
        for _ in 0..channels {
            let h = t.lines().await;
            assert!(h.history, "the history comes first: {h:?}");
            histories.push(h);
        }
        histories.sort_by(|a, b| a.channel.cmp(&b.channel));
        (t, histories)
    }

    async fn send(&mut self, m: ClientMessage) {
        send(&mut self.ws, m.to_bytes().unwrap()).await;
    }

    /// Says `body` on `channel`; answers the line's ref.
    async fn say(&mut self, channel: &str, body: &str) -> u32 {
        self.next_ref += 1;
        let reference = self.next_ref;
        self.send(ClientMessage::Chat(Chat {
            reference,
            channel: channel.into(),
            body: body.into(),
        }))
        .await;
        reference
    }

    /// The next chat message or kick (other messages are passed over).
    async fn hear(&mut self) -> Heard {
        loop {
            match recv_any(&mut self.ws, &empty_schema()).await {
                Seen::Msg(ServerMessage::ChatLines(l)) => return Heard::Lines(l),
                Seen::Msg(ServerMessage::ChatReply(r)) => return Heard::Reply(r),
                Seen::Msg(ServerMessage::Kick(k)) => return Heard::Kick(k.code, k.reason),
                Seen::Msg(_) => {}
                Seen::Closed => panic!("closed without a Kick"),
            }
        }
    }

    /// The next lines heard (live or history), or a panic naming what came instead.
    async fn lines(&mut self) -> ChatLines {
        match self.hear().await {
            Heard::Lines(l) => l,
            other => panic!("expected lines, heard {other:?}"),
        }
    }

    /// The next live line's channel, sender and body.
    async fn line(&mut self) -> (String, String, String, u64) {
        let l = self.lines().await;
        assert!(!l.history, "expected a live line: {l:?}");
        assert_eq!(l.lines.len(), 1);
        let line = &l.lines[0];
        (l.channel, line.sender.clone(), line.body.clone(), line.seq)
    }

    async fn reply(&mut self) -> ChatReply {
        match self.hear().await {
            Heard::Reply(r) => r,
            other => panic!("expected a reply, heard {other:?}"),
        }
    }

    async fn kicked(&mut self) -> (KickCode, String) {
        match self.hear().await {
            Heard::Kick(code, reason) => (code, reason),
            other => panic!("expected a kick, heard {other:?}"),
        }
    }
}

fn moderator_ticket(sub: &str, zones: &str) -> String {
    sign(&json!({
        "sub": sub, "zone": zones, "role": "moderator",
        "exp": now() + 60, "nbf": now() - 1, "jti": jti()
    }))
}

async fn sanction(server: &TestServer, bearer: &str, body: Value) -> (u16, Value) {
    call(server, "POST", "/chat/sanctions", Some(bearer), Some(body)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_crosses_two_hosts_bans_hold_on_both_and_history_returns_after_a_reconnect() {
    let test = "chat_crosses_two_hosts_bans_hold_on_both_and_history_returns_after_a_reconnect";
    let Some(backend) = Backend::postgres(test).await else {
        return;
    };
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let h1 = chat_host(Some("h1"), &backend, d1.path(), base_config()).await;
    let h2 = chat_host(Some("h2"), &backend, d2.path(), base_config()).await;
    talk_zone(&h1, Some("h1"), "room-a", Some("world-1")).await;
    talk_zone(&h2, Some("h2"), "room-b", Some("world-1")).await;
    let (mut ann, _) = Talker::join(&h1, "room-a", "ann", 2).await;
    let (mut cat, empty) = Talker::join(&h1, "room-a", "cat", 2).await;
    assert!(empty.iter().all(|h| h.lines.is_empty()), "{empty:?}");
    let (mut bob, _) = Talker::join(&h2, "room-b", "bob", 2).await;

    // A zone's line: heard by its zone, the sender included, named by the ticket's principal.
    ann.say("zone:room-a", "hello room").await;
    for t in [&mut ann, &mut cat] {
        assert_eq!(
            t.line().await,
            ("zone:room-a".into(), "ann".into(), "hello room".into(), 1)
        );
    }
    // A world's line crosses to the other host's zone of the group.
    ann.say("group:world-1", "hello world").await;
    for t in [&mut ann, &mut cat, &mut bob] {
        let (channel, sender, body, _) = t.line().await;
        assert_eq!(
            (channel.as_str(), sender.as_str(), body.as_str()),
            ("group:world-1", "ann", "hello world")
        );
    }
    // A direct message, named after the other principal on each side.
    bob.say("dm:ann", "psst").await;
    assert_eq!(bob.line().await.0, "dm:ann");
    let (channel, sender, body, _) = ann.line().await;
    assert_eq!(
        (channel.as_str(), sender.as_str(), body.as_str()),
        ("dm:bob", "bob", "psst")
    );
    // A channel of another zone is not this session's.
    cat.say("zone:room-b", "sneaking in").await;
    assert_eq!(cat.reply().await.code, ChatReplyCode::NOT_ALLOWED);

    // The back end speaks from the other host; every zone of the world hears it.
    let (status, body) = call(
        &h2,
        "POST",
        "/chat/lines",
        Some(BACKEND),
        Some(json!({"channel": "group:world-1", "sender": "@system", "body": "server restarts at noon"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    for t in [&mut ann, &mut cat, &mut bob] {
        assert_eq!(t.line().await.1, "@system");
    }

    // Cat leaves; two more lines; back again, cat is sent the history before anything live.
    drop(cat);
    ann.say("zone:room-a", "two").await;
    ann.say("zone:room-a", "three").await;
    assert_eq!(ann.line().await.2, "two");
    assert_eq!(ann.line().await.2, "three");
    let (mut cat, histories) = Talker::join(&h1, "room-a", "cat", 2).await;
    assert_eq!(histories[0].channel, "group:world-1");
    assert_eq!(histories[0].lines.len(), 2);
    assert_eq!(histories[1].channel, "zone:room-a");
    let bodies: Vec<&str> = histories[1].lines.iter().map(|l| l.body.as_str()).collect();
    assert_eq!(bodies, ["hello room", "two", "three"]);
    let seqs: Vec<u64> = histories[1].lines.iter().map(|l| l.seq).collect();
    assert_eq!(seqs, [1, 2, 3]);
    ann.say("zone:room-a", "welcome back").await;
    assert_eq!(cat.line().await.3, 4, "live lines follow the history");
    assert_eq!(ann.line().await.2, "welcome back");
    // Older lines on request.
    cat.send(ClientMessage::ChatHistory(ChatHistory {
        reference: 77,
        channel: "zone:room-a".into(),
        before: 3,
        limit: 10,
    }))
    .await;
    let older = cat.lines().await;
    assert_eq!((older.history, older.reference), (true, 77));
    assert_eq!(
        older.lines.iter().map(|l| l.seq).collect::<Vec<_>>(),
        [1, 2]
    );

    // A report files the store's copy of the lines; one naming a line never said is refused.
    cat.send(ClientMessage::ChatReport(ChatReport {
        reference: 9,
        channel: "zone:room-a".into(),
        seqs: vec![2, 3],
        reason: "spam".into(),
    }))
    .await;
    let filed = cat.reply().await;
    assert_eq!(
        (filed.reference, filed.code),
        (9, ChatReplyCode::OK),
        "{filed:?}"
    );
    cat.send(ClientMessage::ChatReport(ChatReport {
        reference: 10,
        channel: "zone:room-a".into(),
        seqs: vec![999],
        reason: String::new(),
    }))
    .await;
    assert_eq!(cat.reply().await.code, ChatReplyCode::NOT_FOUND);
    let (status, reports) = call(&h2, "GET", "/chat/reports", Some(BACKEND), None).await;
    assert_eq!(status, 200, "{reports}");
    let report = &reports["reports"][0];
    assert_eq!(report["id"].to_string(), filed.text);
    assert_eq!(report["reporter"], "cat");
    assert_eq!(report["channel"], "zone:room-a");
    assert_eq!(report["lines"][0]["sender"], "ann");
    assert_eq!(report["lines"][0]["body"], "two");
    assert_eq!(report["lines"][1]["body"], "three");

    // A fleet-wide ban written through one host closes ann's session there at once, and the
    // other host refuses her once it has read it (within a second).
    let (status, ban) = sanction(
        &h1,
        BACKEND,
        json!({"principal": "ann", "action": "ban", "scope": "fleet", "seconds": 600, "reason": "cheating"}),
    )
    .await;
    assert_eq!(status, 201, "{ban}");
    let (kick, reason) = ann.kicked().await;
    assert_eq!(kick, KickCode::BANNED);
    assert!(
        reason.contains("banned from fleet") && reason.contains("cheating"),
        "{reason}"
    );
    eventually("the second host to know the ban", || async {
        metric(&h2, "zonekeep_chat_sanctions_in_force").await >= 1.0
    })
    .await;
    let mut refused = connect(&h2, "room-b").await;
    send(&mut refused, hello_bytes(&ticket("ann", "room-b"), &[])).await;
    let kick = expect_kick(&mut refused).await;
    assert_eq!(kick, KickCode::BANNED);

    // Lifted: let in again.
    let id = ban["id"].as_u64().unwrap();
    let (status, lifted) = call(
        &h2,
        "DELETE",
        &format!("/chat/sanctions/{id}"),
        Some(BACKEND),
        None,
    )
    .await;
    assert_eq!(status, 200, "{lifted}");
    eventually("the first host to know the ban lifted", || async {
        metric(&h1, "zonekeep_chat_sanctions_in_force").await == 0.0
    })
    .await;
    let (mut ann, _) = Talker::join(&h1, "room-a", "ann", 2).await;

    // A moderator of `room-*` mutes bob in his zone for a second; beyond his ticket it may not.
    let (status, denied) = sanction(
        &h2,
        &moderator_ticket("mia", "room-*"),
        json!({"principal": "bob", "action": "mute", "scope": "fleet", "seconds": 1}),
    )
    .await;
    assert_eq!((status, code(&denied)), (403, "forbidden"), "{denied}");
    let (status, denied) = sanction(
        &h2,
        &ticket("mia", "room-b"),
        json!({"principal": "bob", "action": "mute", "scope": "zone:room-b", "seconds": 1}),
    )
    .await;
    assert_eq!(
        (status, code(&denied)),
        (403, "forbidden"),
        "a player is no moderator: {denied}"
    );
    let mia = moderator_ticket("mia", "room-*");
    let (status, mute) = sanction(
        &h2,
        &mia,
        json!({"principal": "bob", "action": "mute", "scope": "zone:room-b", "seconds": 1, "reason": "caps"}),
    )
    .await;
    assert_eq!(status, 201, "{mute}");
    assert_eq!(mute["actor"], "mia");
    let (status, again) = sanction(
        &h2,
        &mia,
        json!({"principal": "bob", "action": "mute", "scope": "zone:room-b", "seconds": 1}),
    )
    .await;
    assert_eq!(status, 401, "a moderator ticket is spent on use: {again}");
    bob.say("zone:room-b", "LOUD").await;
    let muted = bob.reply().await;
    assert_eq!(muted.code, ChatReplyCode::MUTED);
    assert_eq!(muted.until_ms, mute["until_ms"].as_u64().unwrap());
    // Muted in his zone only: a direct message still goes.
    bob.say("dm:ann", "still here").await;
    assert_eq!(bob.line().await.2, "still here");
    assert_eq!(ann.line().await.2, "still here");
    // Once the mute's end passes, he speaks again.
    let wait = muted.until_ms.saturating_sub(now_ms()) + 20;
    tokio::time::sleep(Duration::from_millis(wait)).await;
    bob.say("zone:room-b", "quietly now").await;
    assert_eq!(bob.line().await.2, "quietly now");

    // Everything moderators did is in the audit log.
    let (status, audit) = call(&h1, "GET", "/chat/audit", Some(BACKEND), None).await;
    assert_eq!(status, 200, "{audit}");
    let actions: Vec<&str> = audit["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["report", "ban", "lift", "mute"], "{audit}");

    drop((ann, bob, cat));
    h1.stop().await;
    h2.stop().await;
    backend.cleanup().await;
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_chat_gets_clear_refusals_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let server = chat_host(
        None,
        &Backend::Sqlite,
        dir.path(),
        ServerConfig {
            max_message_bytes: 4096,
            ..base_config()
        },
    )
    .await;
    talk_zone(&server, None, "den", None).await;
    let (mut eve, _) = Talker::join(&server, "den", "eve", 1).await;

    for (channel, body, expected) in [
        ("team:x", "hi", ChatReplyCode::INVALID),
        ("dm:eve", "talking to myself", ChatReplyCode::INVALID),
        ("zone:elsewhere", "hi", ChatReplyCode::NOT_ALLOWED),
        ("group:nobodys", "hi", ChatReplyCode::NOT_ALLOWED),
        ("zone:den", "   ", ChatReplyCode::INVALID),
        ("zone:den", "red\u{1b}[31m", ChatReplyCode::INVALID),
    ] {
        let r = eve.say(channel, body).await;
        let reply = eve.reply().await;
        assert_eq!(
            (reply.reference, reply.code),
            (r, expected),
            "{channel} {body:?}: {reply:?}"
        );
        assert!(!reply.text.is_empty());
    }
    // Longer than this host takes (500 bytes), though within the wire's 1,024.
    let r = eve.say("zone:den", &"x".repeat(501)).await;
    let reply = eve.reply().await;
    assert_eq!((reply.reference, reply.code), (r, ChatReplyCode::INVALID));
    assert!(reply.text.contains("500"), "{}", reply.text);

    // A flood: the burst passes, the rest is refused with when to speak again.
    for i in 0..8 {
        eve.say("zone:den", &format!("line {i}")).await;
    }
    let (mut heard, mut limited) = (0, 0);
    while heard + limited < 8 {
        match eve.hear().await {
            Heard::Lines(l) => {
                assert_eq!(
                    l.lines[0].sender, "eve",
                    "the sender is the ticket's principal"
                );
                heard += 1;
            }
            Heard::Reply(r) => {
                assert_eq!(r.code, ChatReplyCode::RATE_LIMITED);
                assert!(r.until_ms > now_ms() - 1000, "{r:?}");
                limited += 1;
            }
            Heard::Kick(code, reason) => panic!("kicked: {code:?} {reason}"),
        }
    }
    assert_eq!(heard, 5, "the burst");
    assert!(
        metric(
            &server,
            "zonekeep_chat_refused_total{reason=\"rate_limited\"}"
        )
        .await
            >= 3.0
    );

    // HTTP: the back end's credential, well-formed bodies, sane limits.
    for (method, path, bearer, body, status, expected) in [
        (
            "POST",
            "/chat/lines",
            None,
            Some(json!({"channel": "zone:den", "sender": "x", "body": "y"})),
            401,
            "unauthorized",
        ),
        (
            "POST",
            "/chat/lines",
            Some(ADMIN),
            Some(json!({"channel": "zone:den", "sender": "x", "body": "y"})),
            401,
            "unauthorized",
        ),
        (
            "POST",
            "/chat/lines",
            Some(BACKEND),
            Some(json!({"channel": "zone:den", "sender": "", "body": "y"})),
            400,
            "bad_request",
        ),
        (
            "POST",
            "/chat/lines",
            Some(BACKEND),
            Some(json!({"channel": "zone:den", "sender": "x", "body": "y".repeat(501)})),
            400,
            "bad_request",
        ),
        (
            "POST",
            "/chat/lines",
            Some(BACKEND),
            Some(json!({"channel": "zone:den", "to": "x", "sender": "y", "body": "z"})),
            400,
            "bad_request",
        ),
        (
            "POST",
            "/chat/lines",
            Some(BACKEND),
            Some(json!({"channel": "zone:den", "sender": "x", "body": "y", "as": "admin"})),
            400,
            "bad_request",
        ),
        (
            "GET",
            "/chat/lines?channel=zone:den&limit=0",
            Some(BACKEND),
            None,
            400,
            "bad_request",
        ),
        (
            "GET",
            "/chat/lines?channel=zone:den&limit=201",
            Some(BACKEND),
            None,
            400,
            "bad_request",
        ),
        (
            "GET",
            "/chat/lines?between=eve&and=bob",
            Some(&moderator_ticket("mod", "*")),
            None,
            401,
            "unauthorized",
        ),
        (
            "POST",
            "/chat/sanctions",
            Some(BACKEND),
            Some(json!({"principal": "eve", "action": "ban", "scope": "fleet", "seconds": 0})),
            400,
            "bad_request",
        ),
        (
            "POST",
            "/chat/sanctions",
            Some(BACKEND),
            Some(json!({"principal": "eve", "action": "exile", "scope": "fleet", "seconds": 5})),
            400,
            "bad_request",
        ),
        (
            "POST",
            "/chat/sanctions",
            Some(BACKEND),
            Some(json!({"principal": "eve", "action": "mute", "scope": "world", "seconds": 5})),
            400,
            "bad_request",
        ),
        (
            "DELETE",
            "/chat/sanctions/424242",
            Some(BACKEND),
            None,
            404,
            "not_found",
        ),
        (
            "GET",
            "/chat/reports?limit=100000",
            Some(BACKEND),
            None,
            400,
            "bad_request",
        ),
        ("GET", "/chat/audit", None, None, 401, "unauthorized"),
    ] {
        let (s, v) = call(&server, method, path, bearer, body).await;
        assert_eq!((s, code(&v)), (status, expected), "{method} {path}: {v}");
    }
    let (s, v) = http(&server, "POST", "/chat/lines", Some(BACKEND), None).await;
    assert_eq!(s, 400, "{v}");

    // Nothing hostile was kept: the channel holds the burst only.
    let (s, v) = call(
        &server,
        "GET",
        "/chat/lines?channel=zone:den",
        Some(BACKEND),
        None,
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["lines"].as_array().unwrap().len(), 5, "{v}");

    // An empty line breaks the wire itself: the session is closed as a protocol error, and the
    // host goes on serving others.
    let mut empty = vec![0x06, 0x01, 0x08];
    empty.extend_from_slice(b"zone:den");
    empty.push(0x00);
    send(&mut eve.ws, empty).await;
    assert_eq!(eve.kicked().await.0, KickCode::PROTOCOL_ERROR);
    let (_zed, history) = Talker::join(&server, "den", "zed", 1).await;
    assert_eq!(history[0].lines.len(), 5);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_of_an_older_protocol_hears_no_chat_and_may_not_speak() {
    let dir = tempfile::tempdir().unwrap();
    let server = chat_host(None, &Backend::Sqlite, dir.path(), base_config()).await;
    talk_zone(&server, None, "den", None).await;
    let mut old = connect(&server, "den").await;
    let hello = ClientMessage::Hello(zonekeep_protocol::messages::Hello {
        versions: vec![10],
        ticket: ticket("old", "den"),
        reconnect_token: Vec::new(),
        content_version: String::new(),
        resume_from: None,
    });
    send(&mut old, hello.to_bytes().unwrap()).await;
    match recv(&mut old, &empty_schema()).await {
        Seen::Msg(ServerMessage::Welcome(w)) => assert_eq!(w.version, 10),
        other => panic!("{other:?}"),
    }
    let said = ClientMessage::Chat(Chat {
        reference: 1,
        channel: "zone:den".into(),
        body: "hi".into(),
    });
    send(&mut old, said.to_bytes().unwrap()).await;
    assert_eq!(expect_kick(&mut old).await, KickCode::PROTOCOL_ERROR);
    server.stop().await;
}
