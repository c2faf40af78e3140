//! Oracles shared by the cargo-fuzz targets (`fuzz/fuzz_targets/`) and the stable fuzz smoke test.
//! Each takes arbitrary bytes and returns `Err` with a description when an invariant breaks; decoders
//! must never panic on the way. The fuzz targets turn an `Err` into a crash report.
//!
//! Invariants checked: a decoded value re-encodes without error; for messages whose encoding is unique
//! the bytes are reproduced exactly; re-encoding is idempotent; a decoded Delta applies to a mirror
//! holding the known set it was decoded against.

use crate::delta::{decode_delta, Delta, Spawn};
use crate::messages::{ClientMessage, DeltaContext, ServerMessage};
use crate::mirror::Mirror;
use crate::schema::{FieldDef, FieldType, KindDef, Schema};
use crate::wire::Reader;

/// The fixed schema the Delta target decodes against: two kinds covering every field type.
pub fn fuzz_schema() -> Schema {
    let f = |name: &str, ty| FieldDef {
        name: name.into(),
        ty,
    };
    Schema {
        pos_step: 0.01,
        kinds: vec![
            KindDef {
                name: "a".into(),
                fields: vec![
                    f(
                        "q",
                        FieldType::Quant {
                            min: -1.0,
                            max: 1.0,
                            bits: 5,
                        },
                    ),
                    f(
                        "c",
                        FieldType::Centered {
                            range: 8.0,
                            bits: 6,
                        },
                    ),
                    f("r", FieldType::Angle { bits: 3 }),
                    f("u", FieldType::UInt),
                ],
            },
            KindDef {
                name: "b".into(),
                fields: vec![
                    f("i", FieldType::SInt),
                    f("t", FieldType::Bool),
                    f("s", FieldType::Str { max_len: 3 }),
                    f("x", FieldType::F32),
                ],
            },
        ],
    }
}

/// Splits fuzz input into a known set and the message: byte 0 is the entry count `k` (mod 64); each of
/// the next `k` bytes `b` adds id `previous + (b >> 1) + 1` (the first is `b >> 1`) of kind `b & 1`.
pub fn split_known(data: &[u8]) -> (Vec<(u32, u32)>, &[u8]) {
    let k = data.first().map_or(0, |b| usize::from(*b % 64));
    let entries = data.get(1..).unwrap_or(&[]);
    let k = k.min(entries.len());
    let mut known = Vec::with_capacity(k);
    let mut prev: Option<u32> = None;
    for &b in entries.iter().take(k) {
        let id = prev.map_or(u32::from(b >> 1), |p| p + u32::from(b >> 1) + 1);
        known.push((id, u32::from(b & 1)));
        prev = Some(id);
    }
    (known, entries.get(k..).unwrap_or(&[]))
}

/// A mirror holding `known`, every entity at the origin with default field values.
pub fn mirror_for(schema: &Schema, known: &[(u32, u32)]) -> Result<Mirror, String> {
    let spawns = known
        .iter()
        .map(|&(id, kind)| {
            let fields = schema
                .kind(kind)
                .map(KindDef::default_values)
                .unwrap_or_default();
            Spawn {
                id,
                kind,
                qx: 0,
                qy: 0,
                fields,
            }
        })
        .collect();
    let d = Delta {
        base: None,
        tick: 0,
        ack: 0,
        baseline: true,
        control: None,
        despawns: vec![],
        updates: vec![],
        spawns,
        events: None,
    };
    let mut m = Mirror::new();
    m.apply(&d)
        .map_err(|e| format!("seeding the mirror failed: {e}"))?;
    Ok(m)
}

/// Client message target: decode; a decoded message re-encodes to exactly the input.
pub fn client_message(data: &[u8]) -> Result<(), String> {
    if let Ok(m) = ClientMessage::decode(data) {
        let b = m
            .to_bytes()
            .map_err(|e| format!("re-encode failed: {e} for {m:?}"))?;
        if b != data {
            return Err(format!("re-encode differs: {b:02x?} vs {data:02x?}"));
        }
    }
    Ok(())
}

/// Server message target: decode (a Delta against the fixed schema and an empty known set); a decoded
/// non-Delta message re-encodes to exactly the input, a Delta idempotently.
pub fn server_message(data: &[u8]) -> Result<(), String> {
    let schema = fuzz_schema();
    let ctx = Some(DeltaContext {
        schema: &schema,
        known: &[],
    });
    if let Ok(m) = ServerMessage::decode(data, ctx) {
        let b = m
            .to_bytes(ctx)
            .map_err(|e| format!("re-encode failed: {e} for {m:?}"))?;
        if !matches!(m, ServerMessage::Delta(_)) && b != data {
            return Err(format!("re-encode differs: {b:02x?} vs {data:02x?}"));
        }
        let m2 = ServerMessage::decode(&b, ctx).map_err(|e| format!("re-decode failed: {e}"))?;
        let b2 = m2
            .to_bytes(ctx)
            .map_err(|e| format!("second re-encode failed: {e}"))?;
        if b2 != b {
            return Err("re-encoding is not idempotent".into());
        }
    }
    Ok(())
}

/// Delta target: known set from [`split_known`]; a decoded Delta re-encodes, decodes back to the same
/// bytes, and applies to a mirror of the known set.
pub fn delta(data: &[u8]) -> Result<(), String> {
    let schema = fuzz_schema();
    let (known, msg) = split_known(data);
    if let Ok(d) = decode_delta(msg, &schema, &known) {
        let mut b = Vec::new();
        d.encode(&schema, &known, &mut b)
            .map_err(|e| format!("re-encode failed: {e} for {d:?}"))?;
        let d2 = decode_delta(&b, &schema, &known).map_err(|e| format!("re-decode failed: {e}"))?;
        let mut b2 = Vec::new();
        d2.encode(&schema, &known, &mut b2)
            .map_err(|e| format!("second re-encode failed: {e}"))?;
        if b2 != b {
            return Err("re-encoding is not idempotent".into());
        }
        let mut m = mirror_for(&schema, &known)?;
        m.apply(&d)
            .map_err(|e| format!("decoded Delta does not apply: {e}"))?;
    }
    Ok(())
}

/// Schema target: decode a bare schema; it validates and re-encodes to exactly the input.
pub fn schema(data: &[u8]) -> Result<(), String> {
    let mut r = Reader::new(data);
    if let Ok(s) = Schema::decode(&mut r) {
        if r.finish().is_err() {
            return Ok(());
        }
        let mut b = Vec::new();
        s.encode(&mut b)
            .map_err(|e| format!("re-encode failed: {e} for {s:?}"))?;
        if b != data {
            return Err(format!("re-encode differs: {b:02x?} vs {data:02x?}"));
        }
    }
    Ok(())
}
