//! Table fixtures: primitives.json, quant.json, invalid.json and canonical_pos.json (shapes in tests/fixtures/protocol/README.md).

use super::fixture_json::*;
use super::{big_known, context_json, schema, welcome, welcome_content, Fixture};
use serde_json::json;
use zonekeep_protocol::delta::{decode_delta, write_update_record, PosUpdate};
use zonekeep_protocol::messages::{ClientMessage, ServerMessage};
use zonekeep_protocol::quant::*;
use zonekeep_protocol::wire::*;
use zonekeep_protocol::DecodeError;

pub fn primitives() -> Fixture {
    let varints: Vec<u64> = vec![
        0,
        1,
        127,
        128,
        255,
        300,
        16383,
        16384,
        2_097_151,
        2_097_152,
        u64::from(u32::MAX),
        1 << 35,
        (1 << 53) - 1,
        u64::MAX,
    ];
    let zz32 = [0, -1, 1, -2, 2, 63, -64, 64, i32::MAX, i32::MIN];
    let zz64 = [0i64, -1, 1, i64::MAX, i64::MIN];
    let f32s: [u32; 9] = [
        0,
        0x8000_0000,
        0x3f80_0000,
        0x3c23_d70a,
        0x7f7f_ffff,
        0x0000_0001,
        0x7f80_0000,
        0xff80_0000,
        0x7fc0_0000,
    ];
    let strings = ["", "a", "héllo", "日本", "🎮", &"x".repeat(200)];
    let enc = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = Vec::new();
        f(&mut b);
        hex(&b)
    };
    let body = json!({
        "name": "primitives",
        "description": "Encodings of the §2 primitives, edge values included. 64-bit values are decimal strings so JavaScript reads them exactly; f32 values are bit patterns.",
        "varint": varints.iter().map(|&v| json!({"value": v.to_string(), "hex": enc(&|b| put_varint(b, v))})).collect::<Vec<_>>(),
        "zigzag32": zz32.iter().map(|&v| json!({"value": v, "hex": enc(&|b| put_zigzag32(b, v))})).collect::<Vec<_>>(),
        "zigzag64": zz64.iter().map(|&v| json!({"value": v.to_string(), "hex": enc(&|b| put_zigzag64(b, v))})).collect::<Vec<_>>(),
        "f32": f32s.iter().map(|&bits| json!({"bits": format!("{bits:08x}"), "hex": enc(&|b| put_f32(b, f32::from_bits(bits)))})).collect::<Vec<_>>(),
        "string": strings.iter().map(|s| json!({"value": s, "hex": enc(&|b| put_str(b, s, 1000).unwrap())})).collect::<Vec<_>>(),
        "frame_length": frame_lengths(),
    });
    // Everything decodes back.
    for v in &varints {
        let mut b = Vec::new();
        put_varint(&mut b, *v);
        assert_eq!(Reader::new(&b).varint_u64().unwrap(), *v);
    }
    Fixture {
        name: "primitives",
        description: "",
        body,
    }
}

/// The length in front of a message on a WebTransport control stream (§1.1): the lengths
/// accepted under a limit, and the prefixes refused.
fn frame_lengths() -> serde_json::Value {
    let max = 1u32 << 20;
    let lens = [0u32, 1, 127, 128, 300, 8192, max];
    let accepted: Vec<_> = lens
        .iter()
        .map(|&len| {
            let mut framed = Vec::new();
            put_frame(&mut framed, &vec![0u8; len as usize]);
            let prefix = &framed[..framed.len() - len as usize];
            let mut f = FrameLength::new(max);
            let read = prefix.iter().map(|&b| f.push(b).unwrap()).last().flatten();
            assert_eq!(read, Some(len));
            json!({"len": len, "hex": hex(prefix)})
        })
        .collect();
    let refused: Vec<_> = [
        (&[0x80u8, 0x00][..], "a redundant final zero group"),
        (
            &[0x80, 0x80, 0x80, 0x80, 0x80][..],
            "a fifth byte that announces a sixth",
        ),
        (&[0xff, 0xff, 0xff, 0xff, 0x10][..], "a value past u32"),
        (&[0x81, 0x80, 0x40][..], "1,048,577 bytes, over the limit"),
    ]
    .iter()
    .map(|&(prefix, description)| {
        let mut f = FrameLength::new(max);
        let err = prefix
            .iter()
            .find_map(|&b| f.push(b).err())
            .expect("refused");
        json!({"hex": hex(prefix), "error": err.kind(), "description": description})
    })
    .collect();
    json!({"max": max, "accepted": accepted, "refused": refused})
}

pub fn quant_cases() -> Fixture {
    let b = f32_bits;
    let nan = f32::NAN;
    let inf = f32::INFINITY;
    let quant: Vec<(f32, f32, f32, u8)> = vec![
        (0.0, 0.0, 100.0, 7),
        (50.0, 0.0, 100.0, 7),
        (100.0, 0.0, 100.0, 7),
        (33.3, 0.0, 100.0, 7),
        (-5.0, 0.0, 100.0, 7),
        (1e9, 0.0, 100.0, 7),
        (nan, 0.0, 100.0, 7),
        (-inf, 0.0, 100.0, 7),
        (0.5, 0.0, 1.0, 1),
        (0.49999997, 0.0, 1.0, 1),
        (0.1, -1.0, 1.0, 16),
        (0.123_456_78, -1.0, 1.0, 32),
        (-0.7, -1.0, 1.0, 32),
        (3.0, -3.0, 3.0, 24),
    ];
    let centered: Vec<(f32, f32, u8)> = vec![
        (0.0, 20.0, 10),
        (-0.0, 20.0, 10),
        (1.0, 20.0, 10),
        (-1.0, 20.0, 10),
        (19.99, 20.0, 10),
        (20.0, 20.0, 10),
        (-20.0, 20.0, 10),
        (-25.0, 20.0, 10),
        (nan, 20.0, 10),
        (0.019_531_25, 20.0, 10),
        (0.3, 1.0, 2),
        (0.1, 1.0, 32),
    ];
    let angle: Vec<(f32, u8)> = vec![
        (0.0, 8),
        (std::f32::consts::PI, 8),
        (-std::f32::consts::FRAC_PI_2, 8),
        (std::f32::consts::TAU, 8),
        (-1e-9, 8),
        (100.0, 8),
        (-100.0, 12),
        (1.0, 1),
        (3.0, 16),
        (nan, 8),
        (inf, 8),
    ];
    let pos: Vec<(f32, f32)> = vec![
        (0.0, 0.01),
        (1.005, 0.01),
        (-0.005, 0.01),
        (-1.234_567, 0.01),
        (123.456, 0.01),
        (1e30, 0.01),
        (-1e30, 0.01),
        (nan, 0.01),
        (7.25, 0.5),
        (-7.25, 0.5),
        (60.0, 0.05),
    ];
    let body = json!({
        "name": "quant",
        "description": "Quantization cases of §3 (inputs, integer code, decoded value). Every f32 is an 8-hex-digit bit pattern so JavaScript compares bits exactly.",
        "quant": quant.iter().map(|&(v, lo, hi, bits)| { let q = quant_encode(v, lo, hi, bits);
            json!({"v": b(v), "min": b(lo), "max": b(hi), "bits": bits, "q": q, "decoded": b(quant_decode(q, lo, hi, bits))}) }).collect::<Vec<_>>(),
        "centered": centered.iter().map(|&(v, range, bits)| { let q = centered_encode(v, range, bits);
            json!({"v": b(v), "range": b(range), "bits": bits, "q": q, "decoded": b(centered_decode(q, range, bits))}) }).collect::<Vec<_>>(),
        "angle": angle.iter().map(|&(a, bits)| { let q = angle_encode(a, bits);
            json!({"a": b(a), "bits": bits, "q": q, "decoded": b(angle_decode(q, bits))}) }).collect::<Vec<_>>(),
        "pos": pos.iter().map(|&(v, step)| { let q = pos_encode(v, step);
            json!({"v": b(v), "step": b(step), "q": q, "decoded": b(pos_decode(q, step))}) }).collect::<Vec<_>>(),
    });
    Fixture {
        name: "quant",
        description: "",
        body,
    }
}

/// Which decoder a rejection case is for, and what it must report.
#[derive(Clone, Copy)]
enum Dec {
    Client,
    Server,
    Delta,
}

pub fn invalid_cases() -> Fixture {
    let k = big_known();
    let s = schema();
    let mut welcome_bytes = ServerMessage::Welcome(welcome()).to_bytes(None).unwrap();
    // Offsets inside the Welcome fixture: tag, version, player_id, zone_id (1 + 7), role.
    let role_at = 1 + 1 + 1 + 8;
    let mut bad_role = welcome_bytes.clone();
    bad_role[role_at] = 2;
    let mut bad_hz = welcome_bytes.clone();
    bad_hz[role_at + 1] = 0;
    // Field type byte of the first field: after the schema's pos_step (4), kind count, "player", count, "hp".
    let schema_at = welcome_bytes.len() - {
        let mut b = Vec::new();
        s.encode(&mut b).unwrap();
        b.len()
    };
    let first_type = schema_at + 4 + 1 + 7 + 1 + 3;
    let mut bad_type = welcome_bytes.clone();
    bad_type[first_type] = 8;
    let mut bad_bits = welcome_bytes.clone();
    bad_bits[first_type + 9] = 0; // quant bits after min, max
    let mut zero_step = welcome_bytes.clone();
    zero_step[schema_at..schema_at + 4].copy_from_slice(&[0, 0, 0, 0]);
    welcome_bytes.push(0);
    let trailing_welcome = welcome_bytes;
    // The version 5 Welcome fixture ends with its content version "1.4.0" (1 + 5 bytes).
    let content_welcome = ServerMessage::Welcome(welcome_content())
        .to_bytes(None)
        .unwrap();
    let no_content = content_welcome[..content_welcome.len() - 6].to_vec();
    let mut v4_with_content = content_welcome.clone();
    v4_with_content[1] = 4;
    let mut long_content = no_content.clone();
    long_content.push(65);
    let mut bad_utf8_content = no_content.clone();
    bad_utf8_content.extend_from_slice(&[2, 0xc3, 0x28]);

    // Deltas against big_known(): header tick 1 (01), ack 0 (00).
    let d = |rest: &[u8]| {
        let mut b = vec![0x82, 0x01, 0x00];
        b.extend_from_slice(rest);
        b
    };
    let cases: Vec<(Dec, Vec<u8>, &str, &str)> = vec![
        (Dec::Client, vec![], "truncated", "Empty message."),
        (
            Dec::Client,
            vec![0x09],
            "unknown_tag",
            "Tag 0x09 is not a client message.",
        ),
        (
            Dec::Client,
            vec![0x05, 0x00, 0x09],
            "too_long",
            "An Inputs datagram announcing 9 inputs, one more than a datagram may carry.",
        ),
        (
            Dec::Client,
            vec![0x05, 0x00, 0x02, 0x02, 0x00, 0x00, 0x02, 0x00, 0x00],
            "invalid",
            "An Inputs datagram repeating seq 2: its inputs must ascend.",
        ),
        (
            Dec::Server,
            vec![0x8a, 0x01, 0x00],
            "invalid",
            "An Events message with no events.",
        ),
        (
            Dec::Delta,
            vec![0x89, 0x0a, 0x05, 0x00, 0x01, 0x00, 0x00, 0x00],
            "invalid",
            "A State against base 5 flagged BASELINE: base 0 and BASELINE go together.",
        ),
        (
            Dec::Delta,
            vec![0x89, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00],
            "invalid",
            "A State against base 0 (the empty state) without the BASELINE flag.",
        ),
        (
            Dec::Delta,
            vec![0x89, 0x0a, 0x05, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00],
            "invalid",
            "A State with the EVENTS flag: events travel on the control stream.",
        ),
        (
            Dec::Client,
            vec![0x04],
            "truncated",
            "Resync missing its tick.",
        ),
        (
            Dec::Client,
            vec![0x02, 0x00],
            "invalid",
            "Input with seq 0 and nothing after it: the first failure in wire order wins (invalid, not truncated).",
        ),
        (
            Dec::Client,
            vec![0x81],
            "unknown_tag",
            "A server tag sent to the server.",
        ),
        (
            Dec::Client,
            vec![0x01, 0x00, 0x00, 0x00, 0x00],
            "invalid",
            "Hello offering no version.",
        ),
        (
            Dec::Client,
            vec![0x01, 0x09],
            "too_long",
            "Hello offering 9 versions (limit 8), refused before reading them.",
        ),
        (
            Dec::Client,
            vec![0x01, 0x02, 0x01, 0x01, 0x00, 0x00, 0x00],
            "invalid",
            "Hello offering version 1 twice.",
        ),
        (
            Dec::Client,
            vec![0x01, 0x01, 0x01, 0x81, 0x20],
            "too_long",
            "Hello whose ticket declares 4097 bytes (limit 4096), refused before reading it.",
        ),
        (
            Dec::Client,
            vec![0x01, 0x01, 0x01, 0x02, 0xc3, 0x28, 0x00, 0x00],
            "invalid_utf8",
            "Hello whose ticket is not UTF-8.",
        ),
        (
            Dec::Client,
            vec![0x01, 0x01, 0x04, 0x00, 0x00, 0x00, 0x01, 0xea, 0x07, 0x00, 0xc5, 0x9d, 0x1c, 0x81],
            "invalid",
            "Hello (version 4) with resume_from but no reconnect token: there is nothing to resume.",
        ),
        (
            Dec::Client,
            vec![0x01, 0x01, 0x03, 0x00, 0x01, 0x07, 0x00, 0x01, 0xea, 0x07, 0x00, 0xc5, 0x9d, 0x1c, 0x81],
            "invalid",
            "Hello offering only version 3 with resume_from, which version 4 defines.",
        ),
        (
            Dec::Client,
            vec![0x01, 0x01, 0x04, 0x00, 0x00, 0x00, 0x01],
            "invalid",
            "Hello (version 4) with no reconnect token whose resume_from ends after its marker: refused at the marker (invalid, not truncated), nothing after it is read.",
        ),
        (
            Dec::Client,
            vec![0x01, 0x01, 0x03, 0x00, 0x01, 0x07, 0x00, 0x01, 0xea],
            "invalid",
            "Hello offering only version 3 whose resume_from is cut short after its marker: refused at the marker (invalid, not truncated).",
        ),
        (
            Dec::Client,
            vec![0x01, 0x01, 0x04, 0x00, 0x01, 0x07, 0x00, 0x02, 0xea, 0x07, 0x00, 0xc5, 0x9d, 0x1c, 0x81],
            "invalid",
            "Hello whose byte after the content version (the resume_from marker) is 2, not 1.",
        ),
        (
            Dec::Client,
            vec![0x01, 0x01, 0x04, 0x00, 0x01, 0x07, 0x00, 0x01, 0xea, 0x07, 0x00, 0xc5, 0x9d, 0x1c],
            "truncated",
            "Hello whose resume_from hash is cut short (3 of 4 bytes).",
        ),
        (
            Dec::Client,
            vec![0x02, 0x00, 0x00, 0x00],
            "invalid",
            "Input with seq 0.",
        ),
        (
            Dec::Client,
            vec![0x02, 0x80, 0x80, 0x80, 0x80, 0x10, 0x00, 0x00],
            "overflow",
            "Input seq beyond u32.",
        ),
        (
            Dec::Client,
            vec![0x02, 0x01, 0x00, 0x05, 0x01],
            "truncated",
            "Input payload declares 5 bytes, 1 present.",
        ),
        (
            Dec::Client,
            vec![0x03, 0x80, 0x00],
            "non_canonical_varint",
            "Ping time with a redundant zero group.",
        ),
        (
            Dec::Client,
            vec![0x03, 0x01, 0x00],
            "trailing_bytes",
            "Ping followed by an extra byte.",
        ),
        (
            Dec::Server,
            vec![0x01],
            "unknown_tag",
            "A client tag sent to the client.",
        ),
        (
            Dec::Server,
            vec![0x8e],
            "unknown_tag",
            "Tag 0x8e is not defined in version 11.",
        ),
        (
            Dec::Server,
            vec![0x8b],
            "truncated",
            "Entries (0x8b, version 7) that ends before its count.",
        ),
        (
            Dec::Server,
            vec![0x8b, 0x09],
            "too_long",
            "Entries listing 9 URLs, one over the 8 a list may hold.",
        ),
        (
            Dec::Server,
            vec![0x87, 0x00, 0x01],
            "invalid",
            "InputRefused for seq 0.",
        ),
        (
            Dec::Server,
            vec![0x88, 0x01, 0x01, 0xaa, 0xbb, 0xcc],
            "truncated",
            "KnownSetCheck whose hash has 3 of its 4 bytes.",
        ),
        (
            Dec::Server,
            vec![0x84, 0x80, 0x80, 0x04, 0x01, 0xff, 0x00],
            "overflow",
            "Kick code beyond u16, then a non-UTF-8 reason and a trailing byte: the first failure in wire order wins.",
        ),
        (
            Dec::Server,
            vec![0x84, 0x80, 0x80, 0x04, 0x00],
            "overflow",
            "Kick code beyond u16.",
        ),
        (
            Dec::Server,
            vec![0x84, 0x01, 0x01, 0xff],
            "invalid_utf8",
            "Kick reason is not UTF-8.",
        ),
        (
            Dec::Server,
            vec![0x83, 0x01, 0x02],
            "truncated",
            "Pong missing its tick.",
        ),
        (
            Dec::Server,
            bad_role,
            "invalid",
            "The welcome fixture with role byte 2.",
        ),
        (
            Dec::Server,
            bad_hz,
            "invalid",
            "The welcome fixture with tick_hz 0.",
        ),
        (
            Dec::Server,
            bad_type,
            "invalid",
            "The welcome fixture with field type 8 (undefined).",
        ),
        (
            Dec::Server,
            bad_bits,
            "invalid",
            "The welcome fixture with quant bits 0.",
        ),
        (
            Dec::Server,
            zero_step,
            "invalid",
            "The welcome fixture with pos_step 0.0.",
        ),
        (
            Dec::Server,
            trailing_welcome,
            "trailing_bytes",
            "The welcome fixture plus one byte.",
        ),
        (
            Dec::Server,
            no_content,
            "truncated",
            "The welcome_content_version fixture without its content version: a version 5 Welcome carries one after the schema.",
        ),
        (
            Dec::Server,
            v4_with_content,
            "trailing_bytes",
            "The welcome_content_version fixture saying version 4: a version 4 Welcome ends with its schema, so the content version is trailing bytes.",
        ),
        (
            Dec::Server,
            long_content,
            "too_long",
            "A version 5 Welcome whose content version declares 65 bytes (limit 64), refused before reading them.",
        ),
        (
            Dec::Server,
            bad_utf8_content,
            "invalid_utf8",
            "A version 5 Welcome whose content version is not UTF-8.",
        ),
        (
            Dec::Delta,
            d(&[0x08, 0, 0, 0]),
            "invalid",
            "Delta flags with reserved bit 3 set.",
        ),
        (
            Dec::Delta,
            d(&[0x02, 0x80, 0x80, 0x80, 0x80, 0x11, 0, 0, 0]),
            "overflow",
            "CONTROL value beyond 2^32.",
        ),
        (
            Dec::Delta,
            d(&[0x01, 0x01, 0x01, 0, 0]),
            "invalid",
            "BASELINE Delta with a despawn.",
        ),
        (
            Dec::Delta,
            d(&[0x00, 0x01, 0x03, 0, 0]),
            "invalid",
            "Despawn of id 3, which is not known.",
        ),
        (
            Dec::Delta,
            d(&[0x00, 0x02, 0x04, 0x00, 0, 0]),
            "invalid",
            "Despawns 4 then 4 + 0 + 1 = 5: 5 is not known.",
        ),
        (
            Dec::Delta,
            d(&[0x00, 0x00, 0x01, 0x00, 41, 60, 0]),
            "invalid",
            "Update index 41 beyond the 41 known entities.",
        ),
        (
            Dec::Delta,
            d(&[0x00, 0x00, 0x01, 0x00, 0x00, 0x80, 0]),
            "invalid",
            "Update record header 0x80 (nothing changed).",
        ),
        (
            Dec::Delta,
            d(&[0x00, 0x00, 0x01, 0x00, 0x00, 121, 0]),
            "invalid",
            "Tiny move header 121 (above 120).",
        ),
        (
            Dec::Delta,
            d(&[0x00, 0x00, 0x01, 0x00, 0x00, 0x88, 0]),
            "invalid",
            "Update header with reserved bit 3 set.",
        ),
        (
            Dec::Delta,
            d(&[0x00, 0x00, 0x01, 0x00, 0x00, 0x84, 0x00, 0]),
            "invalid",
            "Fields flag with an empty mask.",
        ),
        (
            Dec::Delta,
            d(&[0x00, 0x00, 0x01, 0x00, 0x00, 0x84, 0x10, 0x00, 0]),
            "invalid",
            "Mask bit 4 on a 4-field kind.",
        ),
        (
            Dec::Delta,
            d(&[0x00, 0x00, 0x01, 0x00, 0x00, 0x84, 0x01, 0x80, 0x01, 0]),
            "invalid",
            "hp code 128 for a 7-bit quant field.",
        ),
        (
            Dec::Delta,
            d(&[0x00, 0x00, 0x01, 0x00, 0x00, 0x84, 0x02, 0x80, 0x08, 0]),
            "invalid",
            "vx code 1024 for a 10-bit centered field (codes are 0..=1023).",
        ),
        (
            Dec::Delta,
            d(&[0x00, 0x00, 0x01, 0x00, 0x00, 0x84, 0x04, 0x80, 0x02, 0]),
            "invalid",
            "heading code 256 for an 8-bit angle field (codes are 0..=255).",
        ),
        (
            Dec::Delta,
            d(&[0x00, 0x00, 0x01, 0x00, 0x02, 0x84, 0x02, 0x02, 0]),
            "invalid",
            "Bool field value 2 (entity 4 is a pickup).",
        ),
        (
            Dec::Delta,
            d(&[0x00, 0x00, 0x02, 0x01, 0x01, 0x01, 60, 60, 0]),
            "invalid",
            "Bitset naming one index where the count says two.",
        ),
        (
            Dec::Delta,
            d(&[0x00, 0x00, 0x01, 0x01, 0x07, 0, 0, 0, 0, 0, 0, 0x01, 60, 0]),
            "too_long",
            "Bitset of 7 bytes for 41 known entities (limit 6).",
        ),
        (
            Dec::Delta,
            d(&[
                0x00, 0x00, 0x00, 0x01, 0x07, 0x00, 0x00, 0x00, 0x80, 0x02, 0x00, 0x00, 0x00, 0x00,
                0x00,
            ]),
            "invalid",
            "Spawn of id 7, which is known.",
        ),
        (
            Dec::Delta,
            d(&[0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00]),
            "invalid",
            "Spawn of kind 2; the schema has two kinds.",
        ),
        (
            Dec::Delta,
            d(&[0x04, 0x00, 0x00, 0x00, 0x81, 0x08]),
            "too_long",
            "1025 events (limit 1024).",
        ),
        (
            Dec::Delta,
            d(&[0x00, 0x00, 0x00, 0x00, 0x00]),
            "trailing_bytes",
            "An empty Delta plus one byte.",
        ),
        (
            Dec::Delta,
            d(&[0x00, 0x00, 0x00]),
            "truncated",
            "An empty Delta missing its spawn count.",
        ),
    ];
    let mut cases = cases;
    cases.extend(chat_invalid_cases());
    let mut out = Vec::new();
    for (dec, bytes, kind, description) in cases {
        let got = match dec {
            Dec::Client => ClientMessage::decode(&bytes).map(|_| ()),
            Dec::Server => ServerMessage::decode(&bytes, None).map(|_| ()),
            Dec::Delta => decode_delta(&bytes, &s, &k).map(|_| ()),
        };
        let err: DecodeError = got.expect_err(description);
        assert_eq!(err.kind(), kind, "{description}: {err}");
        out.push(json!({
            "decoder": match dec { Dec::Client => "client", Dec::Server => "server", Dec::Delta => "delta" },
            "hex": hex(&bytes),
            "error": kind,
            "description": description,
        }));
    }
    let body = json!({
        "name": "invalid",
        "description": "Byte strings every decoder must reject, with the error kind. \"delta\" cases decode against the context below.",
        "context": context_json(&k),
        "cases": out,
    });
    Fixture {
        name: "invalid",
        description: "",
        body,
    }
}

/// `bytes` after a tag and the channel `zone:a` (6 bytes), for the chat cases.
fn after_channel(tag: u8, before: &[u8], after: &[u8]) -> Vec<u8> {
    let mut b = vec![tag];
    b.extend_from_slice(before);
    b.push(6);
    b.extend_from_slice(b"zone:a");
    b.extend_from_slice(after);
    b
}

/// The chat messages' refusals (protocol version 11).
fn chat_invalid_cases() -> Vec<(Dec, Vec<u8>, &'static str, &'static str)> {
    vec![
        (
            Dec::Client,
            after_channel(0x06, &[0x01], &[0x00]),
            "invalid",
            "Chat (0x06) with an empty body.",
        ),
        (
            Dec::Client,
            vec![0x06, 0x01, 0x00, 0x02, b'g', b'g'],
            "invalid",
            "Chat with an empty channel.",
        ),
        (
            Dec::Client,
            vec![0x06, 0x01, 0xad, 0x02],
            "too_long",
            "Chat whose channel declares 301 bytes (limit 300), refused before reading it.",
        ),
        (
            Dec::Client,
            after_channel(0x06, &[0x01], &[0x81, 0x08]),
            "too_long",
            "Chat whose body declares 1025 bytes (limit 1024), refused before reading it.",
        ),
        (
            Dec::Client,
            after_channel(0x06, &[0x01], &[0x01, 0xff]),
            "invalid_utf8",
            "Chat whose body is not UTF-8.",
        ),
        (
            Dec::Client,
            after_channel(0x07, &[0x01], &[0x00, 0x00]),
            "invalid",
            "ChatReport (0x07) naming no line (count 0).",
        ),
        (
            Dec::Client,
            after_channel(0x07, &[0x01], &[0x15]),
            "too_long",
            "ChatReport naming 21 lines (limit 20), refused before reading them.",
        ),
        (
            Dec::Client,
            after_channel(0x07, &[0x01], &[0x01, 0x05]),
            "truncated",
            "ChatReport naming line 5 and missing its reason.",
        ),
        (
            Dec::Client,
            after_channel(0x08, &[0x01], &[0x00, 0x00]),
            "invalid",
            "ChatHistory (0x08) with limit 0.",
        ),
        (
            Dec::Client,
            after_channel(0x08, &[0x01], &[0x00, 0xc9, 0x01]),
            "too_long",
            "ChatHistory with limit 201 (at most 200).",
        ),
        (
            Dec::Server,
            after_channel(0x8c, &[], &[0x02, 0x00, 0x00]),
            "invalid",
            "ChatLines (0x8c) with flags bit 1 set: only bit 0 (history) is defined.",
        ),
        (
            Dec::Server,
            after_channel(0x8c, &[], &[0x00, 0x00, 0xc9, 0x01]),
            "too_long",
            "ChatLines carrying 201 lines (at most 200), refused before reading them.",
        ),
        (
            Dec::Server,
            after_channel(0x8c, &[], &[0x00, 0x00, 0x01, 0x01, 0x81, 0x02]),
            "too_long",
            "ChatLines whose line's sender declares 257 bytes (limit 256).",
        ),
        (
            Dec::Server,
            vec![0x8d, 0x01, 0x80, 0x80, 0x04, 0x00, 0x00],
            "overflow",
            "ChatReply (0x8d) whose code is beyond u16.",
        ),
        (
            Dec::Server,
            vec![0x06],
            "unknown_tag",
            "A Chat (client tag 0x06) sent to the client.",
        ),
        (
            Dec::Client,
            vec![0x8d],
            "unknown_tag",
            "A ChatReply (server tag 0x8d) sent to the server.",
        ),
    ]
}

/// canonical_pos.json: the position form an encoder must choose (§5.5.3), tie-breaks included.
pub fn canonical_pos() -> Fixture {
    let cases: Vec<(i32, i32, i32, i32, bool, &str)> = vec![
        (
            0,
            0,
            0,
            0,
            true,
            "Unchanged position: no position in the record.",
        ),
        (0, 0, 5, -5, false, "Both in -5..=5, no fields: tiny."),
        (
            0,
            0,
            5,
            -5,
            true,
            "Both in -5..=5 but with fields: nibbles (a tiny move carries no fields).",
        ),
        (0, 0, 6, 0, false, "dx 6: beyond tiny, nibbles."),
        (0, 0, -8, 7, false, "The nibble extremes."),
        (
            0,
            0,
            8,
            0,
            false,
            "dx 8: delta and absolute both take 2 bytes; a tie takes delta.",
        ),
        (
            0,
            0,
            100,
            0,
            false,
            "dx 100: delta and absolute both take 3 bytes; a tie takes delta.",
        ),
        (
            1000,
            1000,
            1100,
            1000,
            false,
            "Delta 3 bytes, absolute 4: delta.",
        ),
        (
            100_000,
            0,
            10,
            0,
            false,
            "Delta 4 bytes, absolute 2: absolute.",
        ),
        (
            i32::MIN,
            0,
            i32::MAX,
            0,
            false,
            "dx does not fit i32: absolute.",
        ),
    ];
    let schema = schema();
    let kind = &schema.kinds[0];
    let values = super::player(1, 0);
    let mut out = Vec::new();
    for (last_qx, last_qy, qx, qy, with_fields, description) in cases {
        let p = PosUpdate {
            qx,
            qy,
            last_qx,
            last_qy,
        };
        let mask = u32::from(with_fields);
        let form = p.canonical_form(with_fields);
        let mut record = Vec::new();
        if form.is_some() || mask != 0 {
            write_update_record(&mut record, Some(p), mask, kind, &values).unwrap();
        }
        out.push(json!({
            "last_qx": last_qx, "last_qy": last_qy, "qx": qx, "qy": qy, "fields": with_fields,
            "form": pos_json(&form), "record": hex(&record), "description": description,
        }));
    }
    Fixture {
        name: "canonical_pos",
        description: "",
        body: json!({
            "name": "canonical_pos",
            "description": "The position form the canonical encoder picks for a move from (last_qx, last_qy) to (qx, qy), with or without changed fields; record is the update record of a player (kind 0 of the welcome schema) whose hp alone changed when fields is true.",
            "cases": out,
        }),
    }
}
