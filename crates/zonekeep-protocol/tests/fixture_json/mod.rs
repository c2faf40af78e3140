//! The JSON value model of the golden fixtures (described in tests/fixtures/protocol/README.md).
//! Lives on the test side so the library carries no serde dependency.

use serde_json::{json, Map, Value};
use zonekeep_protocol::delta::{Delta, PosForm};
use zonekeep_protocol::messages::{
    ClientMessage, Role, ServerMessage, Welcome, CONTENT_VERSION_PROTOCOL, ENTRIES_PROTOCOL,
};
use zonekeep_protocol::schema::{FieldType, FieldValue, Schema};

/// Lowercase hex of `b`.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// An `f32` as a JSON number (its exact value, widened to f64).
pub fn f32_json(v: f32) -> Value {
    json!(f64::from(v))
}

/// An `f32` as its 8-hex-digit bit pattern.
pub fn f32_bits(v: f32) -> Value {
    json!(format!("{:08x}", v.to_bits()))
}

pub fn field_type_json(name: &str, ty: &FieldType) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(name));
    let t = match *ty {
        FieldType::Quant { min, max, bits } => {
            m.insert("min".into(), f32_json(min));
            m.insert("max".into(), f32_json(max));
            m.insert("bits".into(), json!(bits));
            "quant"
        }
        FieldType::Centered { range, bits } => {
            m.insert("range".into(), f32_json(range));
            m.insert("bits".into(), json!(bits));
            "centered"
        }
        FieldType::Angle { bits } => {
            m.insert("bits".into(), json!(bits));
            "angle"
        }
        FieldType::UInt => "uint",
        FieldType::SInt => "sint",
        FieldType::Bool => "bool",
        FieldType::Str { max_len } => {
            m.insert("max_len".into(), json!(max_len));
            "str"
        }
        FieldType::F32 => "f32",
    };
    m.insert("type".into(), json!(t));
    Value::Object(m)
}

pub fn schema_json(s: &Schema) -> Value {
    json!({
        "pos_step": f32_json(s.pos_step),
        "kinds": s.kinds.iter().map(|k| json!({
            "name": k.name,
            "fields": k.fields.iter().map(|f| field_type_json(&f.name, &f.ty)).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

pub fn value_json(v: &FieldValue) -> Value {
    match v {
        FieldValue::Q(q) | FieldValue::U(q) => json!(q),
        FieldValue::I(i) => json!(i),
        FieldValue::Bool(b) => json!(b),
        FieldValue::Str(s) => json!(s),
        FieldValue::F32(f) => f32_json(*f),
    }
}

pub fn pos_json(p: &Option<PosForm>) -> Value {
    match p {
        None => Value::Null,
        Some(PosForm::Tiny { dx, dy }) => json!({"form": "tiny", "dx": dx, "dy": dy}),
        Some(PosForm::Nibbles { dx, dy }) => json!({"form": "nibbles", "dx": dx, "dy": dy}),
        Some(PosForm::Delta { dx, dy }) => json!({"form": "delta", "dx": dx, "dy": dy}),
        Some(PosForm::Absolute { qx, qy }) => json!({"form": "absolute", "qx": qx, "qy": qy}),
    }
}

pub fn delta_json(d: &Delta) -> Value {
    let mut v = delta_body_json(d);
    if let (Some(base), Some(o)) = (d.base, v.as_object_mut()) {
        o.insert("type".into(), json!("state"));
        o.insert("base".into(), json!(base));
    }
    v
}

fn delta_body_json(d: &Delta) -> Value {
    json!({
        "type": "delta",
        "tick": d.tick,
        "ack": d.ack,
        "baseline": d.baseline,
        "control": match d.control { None => Value::Null, Some(c) => json!({"entity": c}) },
        "despawns": d.despawns,
        "updates": d.updates.iter().map(|u| json!({
            "index": u.index,
            "id": u.id,
            "pos": pos_json(&u.pos),
            "mask": u.mask,
            "fields": u.fields.iter().map(|(i, v)| json!([i, value_json(v)])).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "spawns": d.spawns.iter().map(|s| json!({
            "id": s.id,
            "kind": s.kind,
            "qx": s.qx,
            "qy": s.qy,
            "fields": s.fields.iter().map(value_json).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "events": d.events.as_ref().map(|ev| ev.iter().map(|e| json!({
            "topic": e.topic,
            "payload": hex(&e.payload),
        })).collect::<Vec<_>>()),
    })
}

pub fn client_json(m: &ClientMessage) -> Value {
    match m {
        ClientMessage::Hello(h) => json!({
            "type": "hello",
            "versions": h.versions,
            "ticket": h.ticket,
            "reconnect_token": hex(&h.reconnect_token),
            "content_version": h.content_version,
            "resume_from": h.resume_from.map(|r| json!({
                "tick": r.tick, "count": r.count, "hash": r.hash,
            })),
        }),
        ClientMessage::Input(i) => json!({
            "type": "input", "seq": i.seq, "view_tick": i.view_tick, "payload": hex(&i.payload),
        }),
        ClientMessage::Ping(p) => json!({"type": "ping", "client_time": p.client_time}),
        ClientMessage::Resync(r) => json!({"type": "resync", "tick": r.tick}),
        ClientMessage::Inputs(b) => json!({
            "type": "inputs",
            "state_ack": b.state_ack,
            "inputs": b.inputs.iter().map(|i| json!({
                "seq": i.seq, "view_tick": i.view_tick, "payload": hex(&i.payload),
            })).collect::<Vec<_>>(),
        }),
        ClientMessage::Chat(c) => json!({
            "type": "chat", "ref": c.reference, "channel": c.channel, "body": c.body,
        }),
        ClientMessage::ChatReport(c) => json!({
            "type": "chat_report", "ref": c.reference, "channel": c.channel, "seqs": c.seqs,
            "reason": c.reason,
        }),
        ClientMessage::ChatHistory(c) => json!({
            "type": "chat_history", "ref": c.reference, "channel": c.channel,
            "before": c.before, "limit": c.limit,
        }),
    }
}

pub fn server_json(m: &ServerMessage) -> Value {
    match m {
        ServerMessage::Welcome(w) => welcome_json(w),
        ServerMessage::Delta(d) => delta_json(d),
        ServerMessage::Pong(p) => json!({
            "type": "pong", "client_time": p.client_time, "server_time_us": p.server_time_us, "tick": p.tick,
        }),
        ServerMessage::Kick(k) => json!({"type": "kick", "code": k.code.0, "reason": k.reason}),
        ServerMessage::Redirect(r) => {
            json!({"type": "redirect", "url": r.url, "zone_id": r.zone_id})
        }
        ServerMessage::Transfer(t) => json!({
            "type": "transfer", "zone_id": t.zone_id, "ticket": t.ticket, "url": t.url,
        }),
        ServerMessage::InputRefused(i) => {
            json!({"type": "input_refused", "seq": i.seq, "code": i.code})
        }
        ServerMessage::KnownSetCheck(k) => {
            json!({"type": "known_set_check", "tick": k.tick, "count": k.count, "hash": k.hash})
        }
        ServerMessage::Entries(e) => json!({"type": "entries", "entries": e.entries}),
        ServerMessage::ChatLines(c) => json!({
            "type": "chat_lines",
            "channel": c.channel,
            "history": c.history,
            "ref": c.reference,
            "lines": c.lines.iter().map(|l| json!({
                "seq": l.seq, "sender": l.sender, "sent_at_ms": l.sent_at_ms, "body": l.body,
            })).collect::<Vec<_>>(),
        }),
        ServerMessage::ChatReply(c) => json!({
            "type": "chat_reply", "ref": c.reference, "code": c.code.0, "until_ms": c.until_ms,
            "text": c.text,
        }),
        ServerMessage::Events(e) => json!({
            "type": "events",
            "tick": e.tick,
            "events": e.events.iter().map(|ev| json!({
                "topic": ev.topic, "payload": hex(&ev.payload),
            })).collect::<Vec<_>>(),
        }),
    }
}

/// A Welcome's value. `content_version` is there only from version 5 and `entries` only from
/// version 7, the first Welcomes that carry them, so the fixtures of older versions keep their
/// exact shape.
pub fn welcome_json(w: &Welcome) -> Value {
    let mut v = json!({
        "type": "welcome",
        "version": w.version,
        "player_id": w.player_id,
        "zone_id": w.zone_id,
        "role": match w.role { Role::Player => "player", Role::Observer => "observer" },
        "tick_hz": w.tick_hz,
        "patch_every": w.patch_every,
        "tick": w.tick,
        "features": w.features,
        "idle_timeout_ms": w.idle_timeout_ms,
        "handshake_timeout_ms": w.handshake_timeout_ms,
        "reconnect_grace_ms": w.reconnect_grace_ms,
        "reconnect_token": hex(&w.reconnect_token),
        "schema": schema_json(&w.schema),
    });
    if w.version >= CONTENT_VERSION_PROTOCOL {
        v["content_version"] = json!(w.content_version);
    }
    if w.version >= ENTRIES_PROTOCOL {
        v["entries"] = json!(w.entries);
    }
    v
}
