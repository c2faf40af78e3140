//! Golden fixtures: the byte-exact contract the TypeScript SDK is tested against
//! (tests/fixtures/protocol/, format in its README.md). `ZONEKEEP_BLESS=1 cargo test -p zonekeep-protocol
//! --test fixtures` rewrites them; without the variable this test fails when any file is stale.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fixture_json;
mod fixture_tables;

use fixture_json::*;
use serde_json::{json, Value};
use std::path::PathBuf;
use zonekeep_protocol::delta::{decode_delta, Delta, Event, PosForm, Spawn, Update};
use zonekeep_protocol::known_set_hash;
use zonekeep_protocol::messages::{
    Chat, ChatHistory, ChatLine, ChatLines, ChatReply, ChatReplyCode, ChatReport, ClientMessage,
    DeltaContext, Entries, Events, Hello, Input, InputRefused, Inputs, Kick, KickCode,
    KnownSetCheck, Ping, Pong, Redirect, ResumeFrom, Resync, Role, ServerMessage, Transfer,
    Welcome,
};
use zonekeep_protocol::schema::{FieldDef, FieldType, FieldValue, KindDef, Schema};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/protocol")
}

/// The two-kind schema of the Welcome fixture, using every field type; the Delta fixtures decode with it.
fn schema() -> Schema {
    let f = |name: &str, ty| FieldDef {
        name: name.into(),
        ty,
    };
    Schema {
        pos_step: 0.01,
        kinds: vec![
            KindDef {
                name: "player".into(),
                fields: vec![
                    f(
                        "hp",
                        FieldType::Quant {
                            min: 0.0,
                            max: 100.0,
                            bits: 7,
                        },
                    ),
                    f(
                        "vx",
                        FieldType::Centered {
                            range: 20.0,
                            bits: 10,
                        },
                    ),
                    f("heading", FieldType::Angle { bits: 8 }),
                    f("score", FieldType::UInt),
                ],
            },
            KindDef {
                name: "pickup".into(),
                fields: vec![
                    f("dz", FieldType::SInt),
                    f("active", FieldType::Bool),
                    f("label", FieldType::Str { max_len: 16 }),
                    f("mass", FieldType::F32),
                ],
            },
        ],
    }
}

pub(crate) fn player(hp: u32, score: u32) -> Vec<FieldValue> {
    vec![
        FieldValue::Q(hp),
        FieldValue::Q(512),
        FieldValue::Q(64),
        FieldValue::U(score),
    ]
}

fn pickup(label: &str) -> Vec<FieldValue> {
    vec![
        FieldValue::I(-3),
        FieldValue::Bool(true),
        FieldValue::Str(label.into()),
        FieldValue::F32(2.5),
    ]
}

fn context_json(known: &[(u32, u32)]) -> Value {
    json!({"schema": schema_json(&schema()), "known": known.iter().map(|(i, k)| json!([i, k])).collect::<Vec<_>>()})
}

struct Fixture {
    name: &'static str,
    description: &'static str,
    body: Value,
}

fn msg_fixture(
    name: &'static str,
    description: &'static str,
    bytes: Vec<u8>,
    value: Value,
    context: Option<Value>,
) -> Fixture {
    let mut body =
        json!({"name": name, "description": description, "hex": hex(&bytes), "value": value});
    if let Some(c) = context {
        body["context"] = c;
    }
    Fixture {
        name,
        description,
        body,
    }
}

fn client(name: &'static str, description: &'static str, m: ClientMessage) -> Fixture {
    let b = m.to_bytes().unwrap();
    assert_eq!(ClientMessage::decode(&b).unwrap(), m);
    msg_fixture(name, description, b, client_json(&m), None)
}

fn server(name: &'static str, description: &'static str, m: ServerMessage) -> Fixture {
    let b = m.to_bytes(None).unwrap();
    assert_eq!(ServerMessage::decode(&b, None).unwrap(), m);
    msg_fixture(name, description, b, server_json(&m), None)
}

fn delta(name: &'static str, description: &'static str, d: Delta, known: &[(u32, u32)]) -> Fixture {
    let s = schema();
    let mut b = Vec::new();
    d.encode(&s, known, &mut b).unwrap();
    assert_eq!(decode_delta(&b, &s, known).unwrap(), d);
    let ctx = DeltaContext { schema: &s, known };
    assert_eq!(
        ServerMessage::decode(&b, Some(ctx)).unwrap(),
        ServerMessage::Delta(d.clone())
    );
    msg_fixture(
        name,
        description,
        b,
        delta_json(&d),
        Some(context_json(known)),
    )
}

fn welcome() -> Welcome {
    Welcome {
        version: 3,
        player_id: 42,
        zone_id: "arena-1".into(),
        role: Role::Player,
        tick_hz: 30,
        patch_every: 2,
        tick: 1000,
        features: 0,
        idle_timeout_ms: 30_000,
        handshake_timeout_ms: 5_000,
        reconnect_grace_ms: 60_000,
        reconnect_token: vec![0xa1, 0xb2, 0xc3, 0xd4],
        schema: schema(),
        content_version: String::new(),
        entries: Vec::new(),
    }
}

/// A version 5 Welcome: the fixture's session values, an empty schema and the host's content
/// version after it.
fn welcome_content() -> Welcome {
    Welcome {
        version: 5,
        schema: Schema {
            pos_step: 0.5,
            kinds: vec![],
        },
        content_version: "1.4.0".into(),
        ..welcome()
    }
}

/// The check a host sends after the `delta_gaps` fixture: its known set minus id 2, plus id 50.
fn known_check_after_gaps() -> KnownSetCheck {
    let ids: Vec<u32> = big_known()
        .iter()
        .map(|e| e.0)
        .filter(|&id| id != 2)
        .chain([50])
        .collect();
    KnownSetCheck {
        tick: 1002,
        count: ids.len() as u32,
        hash: known_set_hash(ids),
    }
}

/// A known set large enough that sparse updates take the gap coding.
fn big_known() -> Vec<(u32, u32)> {
    let mut k = vec![(1, 0), (2, 0), (4, 1), (7, 0)];
    k.extend((10..=46).map(|id| (id, u32::from(id % 3 == 0))));
    k
}

fn message_fixtures() -> Vec<Fixture> {
    let mut v = vec![
        client(
            "hello",
            "Hello offering protocol versions 2 and 3 (a current host answers with 3) with a ticket, no reconnect token and content version \"1.4.0\".",
            ClientMessage::Hello(Hello { versions: vec![2, 3], ticket: "eyJ0.e30.sig".into(), reconnect_token: vec![], content_version: "1.4.0".into(), resume_from: None }),
        ),
        client(
            "hello_reconnect",
            "Hello offering version 3 only, presenting an 8-byte reconnect token from an earlier Welcome and no content version.",
            ClientMessage::Hello(Hello { versions: vec![3], ticket: "t".into(), reconnect_token: vec![1, 2, 3, 4, 5, 6, 7, 8], content_version: String::new(), resume_from: None }),
        ),
        client(
            "hello_resume",
            "Hello offering versions 3 and 4, resuming with an 8-byte reconnect token and resume_from (version 4): the last Delta applied was tick 1002 and the known set holds 41 entities with hash 0x0962af8b (the state known_set_check.json describes).",
            ClientMessage::Hello(Hello { versions: vec![3, 4], ticket: "t".into(), reconnect_token: vec![1, 2, 3, 4, 5, 6, 7, 8], content_version: String::new(), resume_from: Some(ResumeFrom { tick: 1002, count: 41, hash: 0x0962_af8b }) }),
        ),
        client(
            "hello_transfer",
            "Hello following a Transfer (protocol version 8), as the TypeScript SDK of version 8 sends it: versions 6, 7 and 8 offered, the transfer credential as the ticket, no reconnect token, content version \"1.4.0\".",
            ClientMessage::Hello(Hello { versions: vec![6, 7, 8], ticket: "eyJ0.e30.sig2".into(), reconnect_token: vec![], content_version: "1.4.0".into(), resume_from: None }),
        ),
        client(
            "input",
            "Input number 300 produced while the client displayed tick 12345, carrying a 3-byte game payload.",
            ClientMessage::Input(Input { seq: 300, view_tick: 12345, payload: vec![0x01, 0xff, 0x10] }),
        ),
        client(
            "inputs",
            "Inputs datagram (version 6) acknowledging the State of tick 1002 and carrying inputs 299 and 300: 300 is new, 299 is repeated because no State has acknowledged it yet.",
            ClientMessage::Inputs(Inputs {
                state_ack: 1002,
                inputs: vec![
                    Input { seq: 299, view_tick: 12344, payload: vec![0x01, 0xfe] },
                    Input { seq: 300, view_tick: 12345, payload: vec![0x01, 0xff, 0x10] },
                ],
            }),
        ),
        client("inputs_ack_only", "Inputs datagram (version 6) of a client with no input to send: an acknowledgement of the State of tick 1004 alone.", ClientMessage::Inputs(Inputs { state_ack: 1004, inputs: vec![] })),
        server(
            "events",
            "Events (version 6) on a WebTransport session's control stream: the two zone events of the patch of tick 1006.",
            ServerMessage::Events(Events { tick: 1006, events: vec![Event { topic: 1, payload: b"gg".to_vec() }, Event { topic: 513, payload: vec![] }] }),
        ),
        server(
            "entries",
            "Entries (0x8b, protocol version 7): the zone's entry URLs anew, after the fleet changed since the Welcome: the owner first, then another live host.",
            ServerMessage::Entries(Entries { entries: vec!["ws://10.0.0.1:7350/zones/arena-1".into(), "ws://10.0.0.3:7350/zones/arena-1".into()] }),
        ),
        client("ping", "Ping with client time 1700000000000 (a millisecond clock).", ClientMessage::Ping(Ping { client_time: 1_700_000_000_000 })),
        client("resync", "Resync after the Delta of tick 1002: the client's known set failed a check and it asks for a BASELINE.", ClientMessage::Resync(Resync { tick: 1002 })),
        server("input_refused", "The zone refused input 300 with its game-defined code 2.", ServerMessage::InputRefused(InputRefused { seq: 300, code: 2 })),
        server(
            "known_set_check",
            "Known-set check after the Delta of tick 1002 of the delta_gaps fixture: 41 entities (ids 1, 4, 7, 10..=46, 50), FNV-1a of their ids.",
            ServerMessage::KnownSetCheck(known_check_after_gaps()),
        ),
        server(
            "welcome",
            "Welcome (version 3) for player 42 in zone \"arena-1\" at 30 Hz, a Delta every 2 ticks, idle timeout 30 s, handshake timeout 5 s, reconnect grace 60 s, with the two-kind schema (player, pickup) that uses every field type.",
            ServerMessage::Welcome(welcome()),
        ),
        server(
            "welcome_observer",
            "Welcome for observer 7 with an empty schema (no kinds) and a 0.5 position step.",
            ServerMessage::Welcome(Welcome { player_id: 7, role: Role::Observer, schema: Schema { pos_step: 0.5, kinds: vec![] }, reconnect_token: vec![], ..welcome() }),
        ),
        server(
            "welcome_content_version",
            "Welcome (version 5) for player 42 with an empty schema (no kinds, a 0.5 position step), then the content version the host runs, \"1.4.0\": only a version 5 Welcome carries it, after the schema.",
            ServerMessage::Welcome(welcome_content()),
        ),
        server(
            "welcome_v6",
            "Welcome (version 6, what a WebTransport session negotiates; over WebSocket the bytes of version 5) for player 42 with an empty schema (no kinds, a 0.5 position step) and the content version the host runs, \"1.4.0\".",
            ServerMessage::Welcome(Welcome { version: 6, ..welcome_content() }),
        ),
        server(
            "welcome_entries",
            "Welcome (version 7) for player 42 with an empty schema (no kinds, a 0.5 position step), the content version \"1.4.0\", then two entry URLs where the client may enter the zone when its entry URL is unreachable: the zone's owner first, then another live host of the fleet. Only a version 7 Welcome lists them, after the content version.",
            ServerMessage::Welcome(Welcome { version: 7, entries: vec!["ws://10.0.0.1:7350/zones/arena-1".into(), "ws://10.0.0.2:7350/zones/arena-1".into()], ..welcome_content() }),
        ),
        server("pong", "Pong echoing client time 1700000000000 at host time 5000000 µs, tick 1001.", ServerMessage::Pong(Pong { client_time: 1_700_000_000_000, server_time_us: 5_000_000, tick: 1001 })),
        server("kick", "Kick with VERSION_MISMATCH (10) and a reason.", ServerMessage::Kick(Kick { code: KickCode::VERSION_MISMATCH, reason: "no common version".into() })),
        server(
            "kick_zone_moved",
            "Kick with ZONE_MOVED (24, protocol version 3): the zone moved to another host; the client resumes at once through its entry URL with its reconnect token.",
            ServerMessage::Kick(Kick { code: KickCode::ZONE_MOVED, reason: "zone moved".into() }),
        ),
        server(
            "kick_host_fenced",
            "Kick with HOST_FENCED (25, protocol version 3): this host lost its lease on the zone; the client resumes at once through its entry URL.",
            ServerMessage::Kick(Kick { code: KickCode::HOST_FENCED, reason: "lease lost".into() }),
        ),
        server(
            "kick_too_many_redirects",
            "Kick with TOO_MANY_REDIRECTS (26, protocol version 3): the Hello arrived after the third hop at a host that does not own the zone either.",
            ServerMessage::Kick(Kick { code: KickCode::TOO_MANY_REDIRECTS, reason: "hops=3".into() }),
        ),
        server(
            "kick_content_outdated",
            "Kick with CONTENT_OUTDATED (27, protocol version 5): the client's content version is older than the host accepts; the client stops and tells its user to reload.",
            ServerMessage::Kick(Kick { code: KickCode::CONTENT_OUTDATED, reason: "content version 1.2 is older than 1.4, the oldest this host accepts".into() }),
        ),
        server(
            "kick_world_halted",
            "Kick with WORLD_HALTED (28, protocol version 9): a lasting world whose saves failed for longer than its bound stopped; the client retries with backoff through its entry URL with its reconnect token, and the world resumes from its last committed save once its store answers. A session of an older version gets INTERNAL_ERROR (23) instead.",
            ServerMessage::Kick(Kick { code: KickCode::WORLD_HALTED, reason: "the world's saves failed for 3 s; it resumes from its last committed save when its store answers".into() }),
        ),
        server(
            "kick_character_moved",
            "Kick with CHARACTER_MOVED (29, protocol version 10): the player's character was taken into another zone (another game or device) and this session is over; the client does not reconnect by itself and tells the game so it can say the character moved. A session of an older version gets KICKED (11) instead.",
            ServerMessage::Kick(Kick { code: KickCode::CHARACTER_MOVED, reason: "your character joined zone dungeon-2".into() }),
        ),
        server(
            "kick_character_elsewhere",
            "Kick with CHARACTER_ELSEWHERE (30, protocol version 10): the join is refused because another zone holds the player's character and could not be asked to give it back yet; the client retries with backoff, like INTERNAL_ERROR. A session of an older version gets INTERNAL_ERROR (23) instead.",
            ServerMessage::Kick(Kick { code: KickCode::CHARACTER_ELSEWHERE, reason: "your character is in zone dungeon-2; retry shortly".into() }),
        ),
        server("kick_unknown_code", "Kick with code 300, undefined here: decoders must accept it as-is.", ServerMessage::Kick(Kick { code: KickCode(300), reason: String::new() })),
        server("redirect", "Redirect (protocol version 3) to zone \"arena-1\" at its owner, after one hop: the client sends the same Hello there.", ServerMessage::Redirect(Redirect { url: "wss://b.example/zones/arena-1?hops=1".into(), zone_id: "arena-1".into() })),
        server("transfer", "Transfer (protocol version 8): the player now belongs to zone \"lobby\"; the client connects to the URL with a Hello carrying the transfer credential, keeping the old world on screen until the new zone's BASELINE.", ServerMessage::Transfer(Transfer { zone_id: "lobby".into(), ticket: "eyJ0.e30.sig2".into(), url: "wss://a.example/zones/lobby".into() })),
    ];
    v.extend(chat_fixtures());

    let base = |tick| Delta {
        base: None,
        tick,
        ack: 0,
        baseline: false,
        control: None,
        despawns: vec![],
        updates: vec![],
        spawns: vec![],
        events: None,
    };
    v.push(delta(
        "delta_baseline",
        "BASELINE Delta after Welcome: control = entity 1, spawns of two players and a pickup with full state (the known set before it is ignored).",
        Delta {
            baseline: true,
            control: Some(Some(1)),
            spawns: vec![
                Spawn { id: 1, kind: 0, qx: 1050, qy: -220, fields: player(127, 0) },
                Spawn { id: 2, kind: 0, qx: 0, qy: 0, fields: player(64, 9) },
                Spawn { id: 4, kind: 1, qx: -5, qy: 70000, fields: pickup("gold") },
            ],
            ..base(1000)
        },
        &[(9, 0)],
    ));
    let k = big_known();
    // After despawning 2: index 0 = id 1, 1 = id 4, 21 = id 28, 39 = id 46.
    v.push(delta(
        "delta_gaps",
        "Delta with a despawn, four updates named in gap coding using every position form (tiny, nibbles + fields, delta + field, absolute) and one spawn.",
        Delta {
            ack: 17,
            despawns: vec![2],
            updates: vec![
                Update { index: 0, id: 1, pos: Some(PosForm::Tiny { dx: 1, dy: -2 }), mask: 0, fields: vec![] },
                Update { index: 1, id: 4, pos: Some(PosForm::Nibbles { dx: -8, dy: 7 }), mask: 0b0110, fields: vec![(1, FieldValue::Bool(false)), (2, FieldValue::Str("silver".into()))] },
                Update { index: 21, id: 28, pos: Some(PosForm::Delta { dx: 300, dy: -2 }), mask: 0b0001, fields: vec![(0, FieldValue::Q(100))] },
                Update { index: 39, id: 46, pos: Some(PosForm::Absolute { qx: -123_456, qy: 7 }), mask: 0, fields: vec![] },
            ],
            spawns: vec![Spawn { id: 50, kind: 0, qx: 10, qy: 20, fields: player(127, 1) }],
            ..base(1002)
        },
        &k,
    ));
    let dense: Vec<(u32, u32)> = (100..116).map(|id| (id, 0)).collect();
    v.push(delta(
        "delta_bitset",
        "Delta where eight of sixteen known players moved by tiny steps: the index set takes the bitset form (2 bytes) because it is shorter than eight gap varints.",
        Delta {
            updates: (0..8u32)
                .map(|i| Update { index: i * 2, id: 100 + i * 2, pos: Some(PosForm::Tiny { dx: i as i32 - 4, dy: 1 }), mask: 0, fields: vec![] })
                .collect(),
            ..base(1004)
        },
        &dense,
    ));
    let four: Vec<(u32, u32)> = (100..104).map(|id| (id, 0)).collect();
    v.push(delta(
        "delta_index_tie",
        "Delta updating indices 0 and 1 of four known players: gaps (00 00) and bitset (01 03) both take two bytes, and a tie takes the gaps.",
        Delta {
            updates: (0..2u32)
                .map(|i| Update { index: i, id: 100 + i, pos: Some(PosForm::Tiny { dx: 1, dy: 0 }), mask: 0, fields: vec![] })
                .collect(),
            ..base(1008)
        },
        &four,
    ));
    v.push(delta(
        "delta_index_bitset_shorter",
        "Delta updating indices 0, 1 and 2 of four known players: the bitset (01 07, two bytes) is one byte shorter than the gaps (00 00 00) and wins.",
        Delta {
            updates: (0..3u32)
                .map(|i| Update { index: i, id: 100 + i, pos: Some(PosForm::Tiny { dx: 0, dy: 1 }), mask: 0, fields: vec![] })
                .collect(),
            ..base(1010)
        },
        &four,
    ));
    v.push(delta(
        "state_baseline",
        "State datagram (version 6) of tick 1000 against base 0, the empty state: a BASELINE with the CONTROL field and one spawn, what a client that acknowledged nothing yet is sent.",
        Delta {
            base: Some(0),
            baseline: true,
            control: Some(Some(1)),
            spawns: vec![Spawn { id: 1, kind: 0, qx: 1050, qy: -220, fields: player(127, 0) }],
            ..base(1000)
        },
        &[],
    ));
    v.push(delta(
        "state",
        "State datagram (version 6) of tick 1002 against base 998, the newest state the client acknowledged (its known set is the context): one despawn, two updates repeating every change since tick 998, and one spawn.",
        Delta {
            base: Some(998),
            ack: 17,
            despawns: vec![2],
            updates: vec![
                Update { index: 0, id: 1, pos: Some(PosForm::Tiny { dx: 1, dy: -2 }), mask: 0, fields: vec![] },
                Update { index: 21, id: 28, pos: Some(PosForm::Delta { dx: 300, dy: -2 }), mask: 0b0001, fields: vec![(0, FieldValue::Q(100))] },
            ],
            spawns: vec![Spawn { id: 50, kind: 0, qx: 10, qy: 20, fields: player(127, 1) }],
            ..base(1002)
        },
        &k,
    ));
    v.push(delta(
        "delta_control_events",
        "Delta with CONTROL (now none), one fields-only update (score of entity 7) and two zone events.",
        Delta {
            ack: 18,
            control: Some(None),
            updates: vec![Update { index: 3, id: 7, pos: None, mask: 0b1000, fields: vec![(3, FieldValue::U(1500))] }],
            events: Some(vec![Event { topic: 1, payload: b"gg".to_vec() }, Event { topic: 513, payload: vec![] }]),
            ..base(1006)
        },
        &k,
    ));
    v
}

/// Chat (protocol version 11): the three client messages, the two server messages, and the Kick
/// code BANNED.
fn chat_fixtures() -> Vec<Fixture> {
    vec![
        client(
            "chat",
            "Chat (0x06, protocol version 11): line ref 300 said on the channel of zone \"arena-1\"; the host echoes the ref only in a ChatReply when it refuses the line.",
            ClientMessage::Chat(Chat { reference: 300, channel: "zone:arena-1".into(), body: "gg, well played".into() }),
        ),
        client(
            "chat_dm",
            "Chat (protocol version 11) sent by ann as a direct message to bob: a session names a DM channel after the other principal, so ann sends on \"dm:bob\" and bob hears it on \"dm:ann\". The body is UTF-8 (\"é\" is two bytes).",
            ClientMessage::Chat(Chat { reference: 301, channel: "dm:bob".into(), body: "trade? 3 ore for the épée".into() }),
        ),
        client(
            "chat_report",
            "ChatReport (0x07, protocol version 11): ref 302 reports lines 41, 42 and 300 of zone \"arena-1\"'s channel to the moderators, with a reason.",
            ClientMessage::ChatReport(ChatReport { reference: 302, channel: "zone:arena-1".into(), seqs: vec![41, 42, 300], reason: "spam".into() }),
        ),
        client(
            "chat_history",
            "ChatHistory (0x08, protocol version 11): ref 303 asks for at most 50 lines of group \"world-eu\"'s channel older than seq 1000 (before 0 would ask for the newest).",
            ClientMessage::ChatHistory(ChatHistory { reference: 303, channel: "group:world-eu".into(), before: 1000, limit: 50 }),
        ),
        server(
            "chat_lines",
            "ChatLines (0x8c, protocol version 11): two live lines of zone \"arena-1\"'s channel (flags 0, ref 0), seq 300 from ann and seq 301 from bob 250 ms later.",
            ServerMessage::ChatLines(ChatLines {
                channel: "zone:arena-1".into(),
                history: false,
                reference: 0,
                lines: vec![
                    ChatLine { seq: 300, sender: "ann".into(), sent_at_ms: 1_700_000_000_000, body: "gg, well played".into() },
                    ChatLine { seq: 301, sender: "bob".into(), sent_at_ms: 1_700_000_000_250, body: "héllo".into() },
                ],
            }),
        ),
        server(
            "chat_lines_history",
            "ChatLines (protocol version 11) flagged history (flags 1) answering ChatHistory ref 303: the two lines of group \"world-eu\"'s channel before seq 1000 the store keeps, oldest first.",
            ServerMessage::ChatLines(ChatLines {
                channel: "group:world-eu".into(),
                history: true,
                reference: 303,
                lines: vec![
                    ChatLine { seq: 998, sender: "cy".into(), sent_at_ms: 1_699_999_990_000, body: "anyone for the raid?".into() },
                    ChatLine { seq: 999, sender: "dee".into(), sent_at_ms: 1_699_999_995_500, body: "me".into() },
                ],
            }),
        ),
        server(
            "chat_reply_muted",
            "ChatReply (0x8d, protocol version 11) refusing Chat ref 300 with MUTED (2): the sender may speak again at until_ms.",
            ServerMessage::ChatReply(ChatReply { reference: 300, code: ChatReplyCode::MUTED, until_ms: 1_700_000_600_000, text: "muted in zone:arena-1 until 1700000600000: spam".into() }),
        ),
        server(
            "chat_reply_report_filed",
            "ChatReply (protocol version 11) answering ChatReport ref 302 with OK (0): the report was filed, and the text is its id; until_ms is 0.",
            ServerMessage::ChatReply(ChatReply { reference: 302, code: ChatReplyCode::OK, until_ms: 0, text: "17".into() }),
        ),
        server(
            "kick_banned",
            "Kick with BANNED (31, protocol version 11): the principal is banned from group \"world-eu\" until the time in the reason; the client does not reconnect by itself. A session of an older version gets JOIN_REFUSED (19) with the same reason instead.",
            ServerMessage::Kick(Kick { code: KickCode::BANNED, reason: "banned from group:world-eu until 1700086400000: harassment".into() }),
        ),
    ]
}

#[test]
fn golden_fixtures_are_fresh() {
    let mut all = message_fixtures();
    all.push(fixture_tables::primitives());
    all.push(fixture_tables::quant_cases());
    all.push(fixture_tables::invalid_cases());
    all.push(fixture_tables::canonical_pos());
    let bless = std::env::var_os("ZONEKEEP_BLESS").is_some_and(|v| v == "1");
    let d = dir();
    if bless {
        std::fs::create_dir_all(&d).unwrap();
    }
    let mut stale = Vec::new();
    for f in &all {
        assert!(
            !f.description.is_empty() || f.body.get("description").is_some(),
            "{}",
            f.name
        );
        let path = d.join(format!("{}.json", f.name));
        let text = serde_json::to_string_pretty(&f.body).unwrap() + "\n";
        if bless {
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        // Compare parsed values (key order does not matter), hex strings included, byte for byte.
        match std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        {
            Some(on_disk) if on_disk == f.body => {}
            _ => stale.push(f.name),
        }
    }
    if !bless {
        let known: Vec<String> = all.iter().map(|f| format!("{}.json", f.name)).collect();
        for e in std::fs::read_dir(&d).unwrap() {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            if n.ends_with(".json") && !known.contains(&n) {
                stale.push("(unexpected file)");
                eprintln!("unexpected fixture file {n}");
            }
        }
    }
    assert!(stale.is_empty(), "stale fixtures {stale:?}: run ZONEKEEP_BLESS=1 cargo test -p zonekeep-protocol --test fixtures");
}

/// The worked examples in PROTOCOL.md §9 show exactly the fixtures' bytes.
#[test]
fn protocol_md_examples_match_fixtures() {
    let md = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../PROTOCOL.md"),
    )
    .unwrap();
    let mut checked = 0;
    let mut lines = md.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(name) = line
            .strip_prefix("### 9.")
            .and_then(|l| l.split("(`").nth(1))
            .and_then(|l| l.split('`').next())
        else {
            continue;
        };
        // The bytes follow the heading: one inline-code line, or a fenced block (after an optional prose line).
        let mut hex_text = String::new();
        for l in lines.by_ref() {
            if l.starts_with('`') && !l.starts_with("```") {
                hex_text = l.trim_matches('`').to_string();
                break;
            }
            if l.starts_with("```") {
                for b in lines.by_ref() {
                    if b.starts_with("```") {
                        break;
                    }
                    hex_text.push_str(b);
                }
                break;
            }
        }
        let want: String = hex_text.split_whitespace().collect();
        let fixture: Value =
            serde_json::from_str(&std::fs::read_to_string(dir().join(name)).unwrap()).unwrap();
        assert_eq!(
            fixture["hex"].as_str().unwrap(),
            want,
            "PROTOCOL.md example for {name}"
        );
        checked += 1;
    }
    assert_eq!(
        checked, 21,
        "Hello, Input, Welcome, Delta, Redirect, Kick, resuming Hello, content version Welcome, Transfer, Kick WORLD_HALTED, Kick CHARACTER_MOVED, Kick CHARACTER_ELSEWHERE, the two Chats, ChatReport, ChatHistory, the two ChatLines, the two ChatReplies and Kick BANNED examples"
    );
}
