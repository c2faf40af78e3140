//! Property tests: every message round-trips through encode → decode (Deltas against random known sets,
//! applied to a Mirror checked against a model), quantization stays within half a step, centered zero is
//! exact, and no decoder panics on arbitrary bytes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use std::collections::BTreeMap;
use zonekeep_protocol::delta::{decode_delta, Delta, Event, PosForm, Spawn, Update};
use zonekeep_protocol::messages::{
    Chat, ChatHistory, ChatLine, ChatLines, ChatReply, ChatReplyCode, ChatReport, ClientMessage,
    DeltaContext, Entries, Hello, Input, InputRefused, Kick, KickCode, KnownSetCheck, Ping, Pong,
    Redirect, ResumeFrom, Resync, Role, ServerMessage, Transfer, Welcome, CONTENT_VERSION_PROTOCOL,
    ENTRIES_PROTOCOL,
};
use zonekeep_protocol::mirror::Mirror;
use zonekeep_protocol::quant::*;
use zonekeep_protocol::schema::{FieldDef, FieldType, FieldValue, KindDef, Schema};
use zonekeep_protocol::wire::Reader;

/// Small deterministic generator so a whole consistent scenario follows from one proptest seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64: every seed (including 0) gives a good stream.
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
    fn i32_in(&mut self, lo: i32, hi: i32) -> i32 {
        (i64::from(lo) + self.below((i64::from(hi) - i64::from(lo) + 1) as u64) as i64) as i32
    }
}

fn gen_type(r: &mut Rng) -> FieldType {
    match r.below(8) {
        0 => {
            let min = r.i32_in(-1000, 1000) as f32 / 8.0;
            FieldType::Quant {
                min,
                max: min + 1.0 + r.below(500) as f32,
                bits: 1 + r.below(32) as u8,
            }
        }
        1 => FieldType::Centered {
            range: 0.5 + r.below(100) as f32,
            bits: 2 + r.below(31) as u8,
        },
        2 => FieldType::Angle {
            bits: 1 + r.below(16) as u8,
        },
        3 => FieldType::UInt,
        4 => FieldType::SInt,
        5 => FieldType::Bool,
        6 => FieldType::Str {
            max_len: r.below(256) as u8,
        },
        _ => FieldType::F32,
    }
}

fn gen_schema(r: &mut Rng) -> Schema {
    let kinds = (0..1 + r.below(4))
        .map(|k| KindDef {
            name: format!("kind{k}"),
            fields: (0..r.below(7))
                .map(|i| FieldDef {
                    name: format!("f{i}"),
                    ty: gen_type(r),
                })
                .collect(),
        })
        .collect();
    Schema {
        pos_step: 0.01,
        kinds,
    }
}

fn gen_value(r: &mut Rng, ty: &FieldType) -> FieldValue {
    match ty {
        FieldType::Quant { .. } | FieldType::Centered { .. } | FieldType::Angle { .. } => {
            let max = u64::from(ty.max_code().unwrap());
            FieldValue::Q(if r.chance(20) {
                max as u32
            } else {
                (r.next() % (max + 1)) as u32
            })
        }
        FieldType::UInt => FieldValue::U(if r.chance(10) {
            u32::MAX
        } else {
            r.below(1000) as u32
        }),
        FieldType::SInt => FieldValue::I(r.next() as i32 >> r.below(32)),
        FieldType::Bool => FieldValue::Bool(r.chance(50)),
        FieldType::Str { max_len } => {
            let n = r.below(u64::from(*max_len) / 2 + 1) as usize;
            FieldValue::Str(
                (0..n)
                    .map(|i| if i % 3 == 0 { 'é' } else { 'a' })
                    .take(usize::from(*max_len) / 2)
                    .collect(),
            )
        }
        FieldType::F32 => {
            // Finite values only: the model compares with ==, under which NaN is never equal.
            let f = f32::from_bits(r.next() as u32);
            FieldValue::F32(if f.is_finite() { f } else { -0.0 })
        }
    }
}

type Model = BTreeMap<u32, (u32, i32, i32, Vec<FieldValue>)>;

/// A Delta consistent with `model` (the client's state); `next_id` provides fresh ids.
fn gen_delta(r: &mut Rng, schema: &Schema, model: &Model, next_id: &mut u32, tick: u64) -> Delta {
    let baseline = model.is_empty() || r.chance(10);
    let mut despawns = Vec::new();
    let mut after: Vec<u32> = Vec::new();
    if !baseline {
        for &id in model.keys() {
            if r.chance(15) {
                despawns.push(id);
            } else {
                after.push(id);
            }
        }
    }
    let mut updates = Vec::new();
    for (index, &id) in after.iter().enumerate() {
        if !r.chance(40) {
            continue;
        }
        let (kind, qx, qy, _) = &model[&id];
        let kd = &schema.kinds[*kind as usize];
        let nf = kd.fields.len();
        let mut mask = if nf > 0 && r.chance(50) {
            (r.next() as u32) & ((1u64 << nf) - 1) as u32
        } else {
            0
        };
        let mut pos = match r.below(5) {
            0 => None,
            1 => Some(PosForm::Tiny {
                dx: r.i32_in(-5, 5),
                dy: r.i32_in(-5, 5),
            }),
            2 => Some(PosForm::Nibbles {
                dx: r.i32_in(-8, 7),
                dy: r.i32_in(-8, 7),
            }),
            3 => {
                let (dx, dy) = (r.i32_in(-100_000, 100_000), r.i32_in(-100_000, 100_000));
                Some(match (qx.checked_add(dx), qy.checked_add(dy)) {
                    (Some(_), Some(_)) => PosForm::Delta { dx, dy },
                    _ => PosForm::Absolute { qx: dx, qy: dy },
                })
            }
            _ => Some(PosForm::Absolute {
                qx: r.next() as i32,
                qy: r.next() as i32,
            }),
        };
        if matches!(pos, Some(PosForm::Tiny { .. })) {
            mask = 0;
        }
        if pos.is_none() && mask == 0 {
            if nf == 0 {
                pos = Some(PosForm::Absolute { qx: 1, qy: 2 });
            } else {
                mask = 1;
            }
        }
        let fields = kd
            .fields
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .map(|(i, f)| (i as u8, gen_value(r, &f.ty)))
            .collect();
        updates.push(Update {
            index: index as u32,
            id,
            pos,
            mask,
            fields,
        });
    }
    let mut spawn_ids: Vec<u32> = Vec::new();
    for _ in 0..r.below(6) {
        let span = if r.chance(10) { 1 << 20 } else { 3 };
        *next_id += 1 + r.below(span) as u32;
        spawn_ids.push(*next_id);
    }
    // Respawn some despawned ids (allowed: they left the known set first).
    for &id in &despawns {
        if r.chance(20) {
            spawn_ids.push(id);
        }
    }
    spawn_ids.sort_unstable();
    let spawns = spawn_ids
        .into_iter()
        .map(|id| {
            let kind = r.below(schema.kinds.len() as u64) as u32;
            let fields = schema.kinds[kind as usize]
                .fields
                .iter()
                .map(|f| gen_value(r, &f.ty))
                .collect();
            Spawn {
                id,
                kind,
                qx: r.next() as i32 >> r.below(32),
                qy: r.next() as i32 >> r.below(32),
                fields,
            }
        })
        .collect();
    let control = match r.below(3) {
        0 => None,
        1 => Some(None),
        _ => Some(Some(r.next() as u32)),
    };
    let events = r.chance(30).then(|| {
        (0..r.below(4))
            .map(|i| Event {
                topic: r.next() as u16,
                payload: vec![i as u8; r.below(40) as usize],
            })
            .collect()
    });
    Delta {
        base: None,
        tick,
        ack: r.next() as u32,
        baseline,
        control,
        despawns,
        updates,
        spawns,
        events,
    }
}

fn apply_model(model: &mut Model, d: &Delta) {
    if d.baseline {
        model.clear();
    }
    for id in &d.despawns {
        model.remove(id);
    }
    for u in &d.updates {
        let e = model.get_mut(&u.id).unwrap();
        if let Some(p) = u.pos {
            (e.1, e.2) = p.apply(e.1, e.2).unwrap();
        }
        for (i, v) in &u.fields {
            e.3[*i as usize] = v.clone();
        }
    }
    for s in &d.spawns {
        model.insert(s.id, (s.kind, s.qx, s.qy, s.fields.clone()));
    }
}

fn check_delta_scenario(seed: u64) {
    let mut r = Rng(seed);
    let schema = gen_schema(&mut r);
    let mut model = Model::new();
    let mut mirror = Mirror::new();
    let mut next_id = r.below(1000) as u32;
    for tick in 0..6 {
        let d = gen_delta(&mut r, &schema, &model, &mut next_id, tick);
        let known = mirror.known().to_vec();
        let mut bytes = Vec::new();
        d.encode(&schema, &known, &mut bytes).unwrap();
        let back = decode_delta(&bytes, &schema, &known).unwrap();
        assert_eq!(back, d);
        let mut again = Vec::new();
        back.encode(&schema, &known, &mut again).unwrap();
        assert_eq!(again, bytes);
        // Through the ServerMessage path too.
        let ctx = DeltaContext {
            schema: &schema,
            known: &known,
        };
        assert_eq!(
            ServerMessage::decode(&bytes, Some(ctx)).unwrap(),
            ServerMessage::Delta(d.clone())
        );
        mirror.decode_apply(&bytes, &schema).unwrap();
        apply_model(&mut model, &d);
        let got: Vec<_> = mirror
            .iter()
            .map(|(id, e)| (id, e.kind, e.qx, e.qy, e.fields.clone()))
            .collect();
        let want: Vec<_> = model
            .iter()
            .map(|(id, e)| (*id, e.0, e.1, e.2, e.3.clone()))
            .collect();
        assert_eq!(got, want);
    }
}

fn arb_string(max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(any::<char>(), 0..8).prop_map(move |cs| {
        let mut s = String::new();
        for c in cs {
            if s.len() + c.len_utf8() <= max {
                s.push(c);
            }
        }
        s
    })
}

/// Like [`arb_string`], never empty (a Chat's channel and body).
fn arb_nonempty(max: usize) -> impl Strategy<Value = String> {
    arb_string(max).prop_map(|s| if s.is_empty() { "x".into() } else { s })
}

fn arb_chat_line() -> impl Strategy<Value = ChatLine> {
    (
        any::<u64>(),
        arb_string(256),
        any::<u64>(),
        arb_string(1024),
    )
        .prop_map(|(seq, sender, sent_at_ms, body)| ChatLine {
            seq,
            sender,
            sent_at_ms,
            body,
        })
}

fn arb_client() -> impl Strategy<Value = ClientMessage> {
    prop_oneof![
        (
            proptest::collection::btree_set(any::<u32>(), 1..=8),
            arb_string(4096),
            proptest::collection::vec(any::<u8>(), 0..=64),
            arb_string(64),
            proptest::option::of((any::<u64>(), any::<u32>(), any::<u32>()))
        )
            .prop_map(|(v, ticket, reconnect_token, content_version, resume)| {
                let mut versions: Vec<u32> = v.into_iter().rev().collect();
                // resume_from needs a reconnect token and version 4 offered.
                let resume_from = resume
                    .filter(|_| !reconnect_token.is_empty())
                    .map(|(tick, count, hash)| ResumeFrom { tick, count, hash });
                if resume_from.is_some() && !versions.contains(&4) {
                    if let Some(first) = versions.first_mut() {
                        *first = 4;
                    }
                }
                ClientMessage::Hello(Hello {
                    versions,
                    ticket,
                    reconnect_token,
                    content_version,
                    resume_from,
                })
            }),
        (
            1..=u32::MAX,
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 0..300)
        )
            .prop_map(|(seq, view_tick, payload)| ClientMessage::Input(Input {
                seq,
                view_tick,
                payload
            })),
        any::<u64>().prop_map(|client_time| ClientMessage::Ping(Ping { client_time })),
        any::<u64>().prop_map(|tick| ClientMessage::Resync(Resync { tick })),
        (any::<u32>(), arb_nonempty(300), arb_nonempty(1024)).prop_map(
            |(reference, channel, body)| ClientMessage::Chat(Chat {
                reference,
                channel,
                body
            })
        ),
        (
            any::<u32>(),
            arb_string(300),
            proptest::collection::vec(any::<u64>(), 1..=20),
            arb_string(500)
        )
            .prop_map(|(reference, channel, seqs, reason)| {
                ClientMessage::ChatReport(ChatReport {
                    reference,
                    channel,
                    seqs,
                    reason,
                })
            }),
        (any::<u32>(), arb_string(300), any::<u64>(), 1..=200u32).prop_map(
            |(reference, channel, before, limit)| ClientMessage::ChatHistory(ChatHistory {
                reference,
                channel,
                before,
                limit
            })
        ),
    ]
}

fn arb_server() -> impl Strategy<Value = ServerMessage> {
    prop_oneof![
        (
            any::<u64>(),
            any::<[u32; 7]>(),
            any::<bool>(),
            1..=1000u32,
            1..=u32::MAX,
            arb_string(128),
            arb_string(64)
        )
            .prop_map(
                |(seed, n, observer, tick_hz, patch_every, zone_id, content)| {
                    let mut r = Rng(seed);
                    ServerMessage::Welcome(Welcome {
                        version: n[0],
                        player_id: n[1],
                        zone_id,
                        role: if observer {
                            Role::Observer
                        } else {
                            Role::Player
                        },
                        tick_hz,
                        patch_every,
                        tick: seed,
                        features: n[2],
                        idle_timeout_ms: n[4],
                        handshake_timeout_ms: n[5],
                        reconnect_grace_ms: n[6],
                        reconnect_token: n[3].to_le_bytes().to_vec(),
                        schema: gen_schema(&mut r),
                        // Only a version 5 (or later) Welcome carries a content version.
                        content_version: if n[0] >= CONTENT_VERSION_PROTOCOL {
                            content
                        } else {
                            String::new()
                        },
                        // Only a version 7 (or later) Welcome lists entry URLs.
                        entries: if n[0] >= ENTRIES_PROTOCOL {
                            (0..(seed % 3))
                                .map(|i| format!("ws://h{i}:7350/zones/z"))
                                .collect()
                        } else {
                            Vec::new()
                        },
                    })
                }
            ),
        any::<[u64; 3]>().prop_map(|t| ServerMessage::Pong(Pong {
            client_time: t[0],
            server_time_us: t[1],
            tick: t[2]
        })),
        (any::<u16>(), arb_string(256)).prop_map(|(c, reason)| ServerMessage::Kick(Kick {
            code: KickCode(c),
            reason
        })),
        (arb_string(512), arb_string(128))
            .prop_map(|(url, zone_id)| ServerMessage::Redirect(Redirect { url, zone_id })),
        (arb_string(128), arb_string(4096), arb_string(512)).prop_map(|(zone_id, ticket, url)| {
            ServerMessage::Transfer(Transfer {
                zone_id,
                ticket,
                url,
            })
        }),
        (1..=u32::MAX, any::<u16>())
            .prop_map(|(seq, code)| ServerMessage::InputRefused(InputRefused { seq, code })),
        (any::<u64>(), any::<u32>(), any::<u32>()).prop_map(|(tick, count, hash)| {
            ServerMessage::KnownSetCheck(KnownSetCheck { tick, count, hash })
        }),
        proptest::collection::vec(arb_string(512), 0..=8)
            .prop_map(|entries| ServerMessage::Entries(Entries { entries })),
        (
            arb_string(300),
            any::<bool>(),
            any::<u32>(),
            proptest::collection::vec(arb_chat_line(), 0..=12)
        )
            .prop_map(|(channel, history, reference, lines)| {
                ServerMessage::ChatLines(ChatLines {
                    channel,
                    history,
                    reference,
                    lines,
                })
            }),
        (any::<u32>(), any::<u16>(), any::<u64>(), arb_string(1024)).prop_map(
            |(reference, code, until_ms, text)| ServerMessage::ChatReply(ChatReply {
                reference,
                code: ChatReplyCode(code),
                until_ms,
                text
            })
        ),
    ]
}

/// Half a step plus the final f32 rounding of the decoded value (half an ulp at its magnitude).
fn tolerance(half_step: f64, decoded: f32) -> f64 {
    let ulp = f64::from(f32::from_bits(decoded.abs().to_bits() + 1) - decoded.abs());
    half_step * (1.0 + 1e-12) + ulp / 2.0
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn client_messages_round_trip(m in arb_client()) {
        let b = m.to_bytes().unwrap();
        prop_assert_eq!(ClientMessage::decode(&b).unwrap(), m);
    }

    #[test]
    fn server_messages_round_trip(m in arb_server()) {
        let b = m.to_bytes(None).unwrap();
        prop_assert_eq!(ServerMessage::decode(&b, None).unwrap(), m);
    }

    #[test]
    fn deltas_round_trip_and_mirror_follows(seed in any::<u64>()) {
        check_delta_scenario(seed);
    }

    #[test]
    fn quant_error_within_half_step(t in 0.0f32..=1.0, lo in -1.0e4f32..1.0e4, width in 0.001f32..1.0e4, bits in 1u8..=32) {
        let hi = lo + width;
        let v = (lo + t * (hi - lo)).clamp(lo, hi);
        prop_assume!(hi > lo);
        let q = quant_encode(v, lo, hi, bits);
        prop_assert!(u64::from(q) <= quant_steps(bits));
        let d = quant_decode(q, lo, hi, bits);
        let half = (f64::from(hi) - f64::from(lo)) / quant_steps(bits) as f64 / 2.0;
        prop_assert!((f64::from(d) - f64::from(v)).abs() <= tolerance(half, d), "v {} d {} half {}", v, d, half);
    }

    #[test]
    fn centered_error_and_zero(v in -1.0e3f32..1.0e3, range in 0.01f32..1.0e3, bits in 2u8..=32) {
        let q0 = centered_encode(0.0, range, bits);
        prop_assert_eq!(centered_decode(q0, range, bits), 0.0);
        let half = f64::from(range) / (1u64 << (bits - 1)) as f64;
        // Inside the representable range [-range, range - step] the error is at most half a step.
        prop_assume!(f64::from(v) >= -f64::from(range) && f64::from(v) <= f64::from(range) - half);
        let d = centered_decode(centered_encode(v, range, bits), range, bits);
        prop_assert!((f64::from(d) - f64::from(v)).abs() <= tolerance(half / 2.0, d));
    }

    #[test]
    fn angle_error_wraps(a in -100.0f32..100.0, bits in 1u8..=16) {
        let q = angle_encode(a, bits);
        prop_assert!(u64::from(q) < 1u64 << bits);
        let d = f64::from(angle_decode(q, bits));
        let half = TAU / (1u64 << bits) as f64 / 2.0;
        let diff = (d - f64::from(a)).rem_euclid(TAU);
        let err = diff.min(TAU - diff);
        prop_assert!(err <= half + 1e-5, "a {} d {} err {} half {}", a, d, err, half);
    }

    #[test]
    fn position_error_within_half_step(v in -1.0e5f32..1.0e5, step in 0.001f32..1.0) {
        let d = pos_decode(pos_encode(v, step), step);
        prop_assert!((f64::from(d) - f64::from(v)).abs() <= tolerance(f64::from(step) / 2.0, d));
    }

    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), seed in any::<u64>()) {
        let mut r = Rng(seed);
        let schema = gen_schema(&mut r);
        let known: Vec<(u32, u32)> = (0..r.below(20) as u32)
            .map(|i| (i * 3, r.below(schema.kinds.len() as u64) as u32))
            .collect();
        let _ = ClientMessage::decode(&bytes);
        let _ = ServerMessage::decode(&bytes, Some(DeltaContext { schema: &schema, known: &known }));
        let _ = ServerMessage::decode(&bytes, None);
        let mut with_tag = vec![0x82];
        with_tag.extend_from_slice(&bytes);
        let _ = decode_delta(&with_tag, &schema, &known);
        let _ = Schema::decode(&mut Reader::new(&bytes));
        let mut m = Mirror::new();
        let _ = m.decode_apply(&with_tag, &schema);
    }
}
