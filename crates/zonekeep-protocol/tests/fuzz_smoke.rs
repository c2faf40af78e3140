//! Stable-toolchain smoke run of every fuzz target's oracle (`zonekeep_protocol::fuzzing`): a few
//! thousand deterministic pseudo-random inputs each, half of them mutations of valid messages so the
//! decoders get past the first bytes. The real fuzzing is `cargo +nightly fuzz run <target>` (fuzz/).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use zonekeep_protocol::delta::{Delta, Event, PosForm, Spawn, Update};
use zonekeep_protocol::fuzzing;
use zonekeep_protocol::messages::{
    Chat, ChatHistory, ChatLine, ChatLines, ChatReply, ChatReplyCode, ChatReport, ClientMessage,
    DeltaContext, Hello, Input, Ping, Role, ServerMessage, Welcome,
};
use zonekeep_protocol::schema::FieldValue;

struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut XorShift, seed: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..=rng.below(4) {
        match rng.below(5) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = rng.next() as u8;
            }
            1 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            2 => {
                let n = rng.below(v.len() + 1);
                v.truncate(n);
            }
            3 => {
                let i = rng.below(v.len() + 1);
                v.insert(i, rng.next() as u8);
            }
            _ if !v.is_empty() => {
                let i = rng.below(v.len());
                v.remove(i);
            }
            _ => {}
        }
    }
    v
}

fn run(name: &str, seeds: &[Vec<u8>], oracle: fn(&[u8]) -> Result<(), String>) {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15 ^ name.len() as u64);
    for seed in seeds {
        oracle(seed).unwrap_or_else(|e| panic!("{name}: seed fails: {e}"));
    }
    for i in 0..4000 {
        let input = if i % 2 == 0 && !seeds.is_empty() {
            {
                let k = rng.below(seeds.len());
                mutate(&mut rng, &seeds[k])
            }
        } else {
            let len = rng.below(48);
            (0..len).map(|_| rng.next() as u8).collect()
        };
        if let Err(e) = oracle(&input) {
            panic!("{name}: input {input:02x?}: {e}");
        }
    }
}

fn client_seeds() -> Vec<Vec<u8>> {
    [
        ClientMessage::Hello(Hello {
            versions: vec![1, 2],
            ticket: "abc.def.ghi".into(),
            reconnect_token: vec![7; 4],
            content_version: "1.0".into(),
            resume_from: None,
        }),
        ClientMessage::Hello(Hello {
            versions: vec![4],
            ticket: "abc.def.ghi".into(),
            reconnect_token: vec![7; 4],
            content_version: String::new(),
            resume_from: Some(zonekeep_protocol::ResumeFrom {
                tick: 1002,
                count: 41,
                hash: 0x0962_af8b,
            }),
        }),
        ClientMessage::Input(Input {
            seq: 300,
            view_tick: 99_999,
            payload: vec![1, 2, 3],
        }),
        ClientMessage::Ping(Ping {
            client_time: 1 << 40,
        }),
        ClientMessage::Chat(Chat {
            reference: 300,
            channel: "zone:a".into(),
            body: "héllo".into(),
        }),
        ClientMessage::ChatReport(ChatReport {
            reference: 7,
            channel: "dm:bob".into(),
            seqs: vec![1, 300],
            reason: "spam".into(),
        }),
        ClientMessage::ChatHistory(ChatHistory {
            reference: 8,
            channel: "group:g".into(),
            before: 1000,
            limit: 200,
        }),
    ]
    .iter()
    .map(|m| m.to_bytes().unwrap())
    .collect()
}

fn delta_seed() -> (Vec<u8>, Vec<(u32, u32)>, Vec<u8>) {
    // Known set prefix: 4 entries.
    let prefix = vec![4u8, 2 << 1, (1 << 1) | 1, 0, 5 << 1];
    let (known, _) = fuzzing::split_known(&prefix);
    let d = Delta {
        base: None,
        tick: 70,
        ack: 3,
        baseline: false,
        control: Some(None),
        despawns: vec![known[1].0],
        updates: vec![
            Update {
                index: 0,
                id: known[0].0,
                pos: Some(PosForm::Tiny { dx: 2, dy: 0 }),
                mask: 0,
                fields: vec![],
            },
            Update {
                index: 2,
                id: known[3].0,
                pos: Some(PosForm::Nibbles { dx: -8, dy: 7 }),
                mask: 0b1001,
                fields: vec![(0, FieldValue::Q(31)), (3, FieldValue::U(9))],
            },
        ],
        spawns: vec![Spawn {
            id: 100,
            kind: 1,
            qx: -5,
            qy: 5,
            fields: vec![
                FieldValue::I(-2),
                FieldValue::Bool(true),
                FieldValue::Str("ab".into()),
                FieldValue::F32(0.5),
            ],
        }],
        events: Some(vec![Event {
            topic: 1,
            payload: vec![0xff],
        }]),
    };
    let mut msg = Vec::new();
    d.encode(&fuzzing::fuzz_schema(), &known, &mut msg).unwrap();
    (prefix, known, msg)
}

#[test]
fn client_message_target() {
    run("client_message", &client_seeds(), fuzzing::client_message);
}

#[test]
fn server_message_target() {
    let schema = fuzzing::fuzz_schema();
    let w = Welcome {
        version: 2,
        player_id: 3,
        zone_id: "z".into(),
        role: Role::Player,
        tick_hz: 30,
        patch_every: 1,
        tick: 5,
        features: 0,
        idle_timeout_ms: 30_000,
        handshake_timeout_ms: 5_000,
        reconnect_grace_ms: 60_000,
        reconnect_token: vec![1; 8],
        schema: schema.clone(),
        content_version: String::new(),
        entries: Vec::new(),
    };
    let baseline = [0x82, 1, 0, 1, 0, 0, 1, 4, 1, 0, 0, 2, 0, 0, 0, 0, 0, 0];
    let ctx = DeltaContext {
        schema: &schema,
        known: &[],
    };
    assert!(ServerMessage::decode(&baseline, Some(ctx)).is_ok());
    // Version 5 adds the content version after the schema.
    let welcome_v5 = ServerMessage::Welcome(Welcome {
        version: 5,
        content_version: "1.4.0".into(),
        ..w.clone()
    });
    // Version 7 adds the entry URLs after the content version.
    let welcome_v7 = ServerMessage::Welcome(Welcome {
        version: 7,
        content_version: "1.4.0".into(),
        entries: vec!["ws://10.0.0.2:7350/zones/a".into()],
        ..w.clone()
    });
    let seeds = vec![
        ServerMessage::Welcome(w).to_bytes(None).unwrap(),
        welcome_v5.to_bytes(None).unwrap(),
        welcome_v7.to_bytes(None).unwrap(),
        baseline.to_vec(),
        vec![0x84, 14, 1, b'x'],
        // Version 11: chat.
        ServerMessage::ChatLines(ChatLines {
            channel: "zone:a".into(),
            history: true,
            reference: 8,
            lines: vec![ChatLine {
                seq: 300,
                sender: "ann".into(),
                sent_at_ms: 1 << 40,
                body: "gg".into(),
            }],
        })
        .to_bytes(None)
        .unwrap(),
        ServerMessage::ChatReply(ChatReply {
            reference: 300,
            code: ChatReplyCode::MUTED,
            until_ms: 1 << 40,
            text: "muted".into(),
        })
        .to_bytes(None)
        .unwrap(),
    ];
    run("server_message", &seeds, fuzzing::server_message);
}

#[test]
fn delta_target() {
    let (prefix, _, msg) = delta_seed();
    let mut seed = prefix;
    seed.extend_from_slice(&msg);
    run("delta", &[seed], fuzzing::delta);
}

#[test]
fn schema_target() {
    let mut b = Vec::new();
    fuzzing::fuzz_schema().encode(&mut b).unwrap();
    run("schema", &[b], fuzzing::schema);
}
