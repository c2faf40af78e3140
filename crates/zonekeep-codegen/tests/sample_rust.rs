//! The Rust `zonekeep codegen` writes for the sample kind (`tests/generated/sample.rs`, pinned by
//! `golden.rs`), compiled against `zonekeep-client` and run against the cross-language vectors of
//! `tests/fixtures/codegen/vectors.json`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
#[path = "generated/sample.rs"]
mod generated;
mod sample;

use serde_json::Value;
use zonekeep_client::payload::PayloadError;
use zonekeep_client::protocol::schema::{FieldType, FieldValue, KindDef, Schema};

use generated::{
    decode_event, BlobEvent, ChatEvent, HitEvent, RockEntity, SampleEvent, SampleKinds, SayInput,
    ShipEntity, SteerInput, TallyEvent, WideInput,
};

fn vectors() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/codegen/vectors.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn list<'a>(v: &'a Value, key: &str) -> &'a Vec<Value> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("`{key}` is not a list"))
}

fn hex(v: &Value) -> Vec<u8> {
    let s = v.as_str().unwrap();
    assert_eq!(s.len() % 2, 0, "odd hex {s}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn int<T: TryFrom<i64>>(v: &Value) -> T {
    T::try_from(
        v.as_i64()
            .unwrap_or_else(|| panic!("{v} is not an integer")),
    )
    .unwrap_or_else(|_| panic!("{v} is out of range"))
}

fn float(v: &Value) -> f32 {
    // The vectors hold exact f32 values, so the f64 narrows without rounding.
    v.as_f64().unwrap_or_else(|| panic!("{v} is not a number")) as f32
}

fn boolean(v: &Value) -> bool {
    v.as_bool().unwrap()
}

fn text(v: &Value) -> String {
    v.as_str().unwrap().to_owned()
}

fn wide<T: std::str::FromStr>(v: &Value) -> T {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{v} is not a decimal string of the type"))
}

#[test]
fn every_input_encodes_to_its_bytes() {
    let vectors = vectors();
    let inputs = list(&vectors, "inputs");
    assert!(!inputs.is_empty());
    for case in inputs {
        let v = &case["values"];
        let bytes = match case["input"].as_str().unwrap() {
            "steer" => SteerInput {
                turn: int(&v["turn"]),
                thrust: int(&v["thrust"]),
                boost: int(&v["boost"]),
                trim: float(&v["trim"]),
            }
            .encode(),
            "say" => SayInput {
                channel: int(&v["channel"]),
                text: text(&v["text"]),
            }
            .encode(),
            "wide" => WideInput {
                a_u64: wide(&v["a_u64"]),
                b_i16: int(&v["b_i16"]),
                c_i32: int(&v["c_i32"]),
                d_i64: wide(&v["d_i64"]),
                e_f32: float(&v["e_f32"]),
                f_bool: boolean(&v["f_bool"]),
                g_bytes: hex(&v["g_bytes"]),
                h_str: text(&v["h_str"]),
                i_rest: hex(&v["i_rest"]),
            }
            .encode(),
            other => panic!("unknown input {other}"),
        };
        assert_eq!(bytes, hex(&case["bytes"]), "{case}");
    }
    assert_eq!(SteerInput::TAG, 1);
    assert_eq!(SayInput::TAG, 2);
    assert_eq!(WideInput::TAG, 3);
}

#[test]
fn optional_values_stop_after_the_last_nonzero_one() {
    let mut steer = SteerInput::default();
    assert_eq!(steer.encode(), [1, 0, 0, 0]);
    // -0.0 is not zero: its bits are not.
    steer.trim = -0.0;
    assert_eq!(steer.encode(), [1, 0, 0, 0, 0, 0, 0, 0, 0x80]);
    steer.trim = 0.0;
    steer.boost = 2;
    assert_eq!(steer.encode(), [1, 0, 0, 0, 2]);
}

fn expected_event(name: &str, v: &Value) -> SampleEvent {
    match name {
        "hit" => SampleEvent::Hit(HitEvent {
            by: int(&v["by"]),
            damage: float(&v["damage"]),
            critical: boolean(&v["critical"]),
        }),
        "chat" => SampleEvent::Chat(ChatEvent {
            from: text(&v["from"]),
            line: text(&v["line"]),
        }),
        "blob" => SampleEvent::Blob(BlobEvent {
            data: hex(&v["data"]),
            tail: hex(&v["tail"]),
        }),
        "tally" => SampleEvent::Tally(TallyEvent {
            count: wide(&v["count"]),
            delta: wide(&v["delta"]),
            small: int(&v["small"]),
        }),
        other => panic!("unknown event {other}"),
    }
}

/// Equality with floats compared by bit pattern.
fn same_event(a: &SampleEvent, b: &SampleEvent) -> bool {
    match (a, b) {
        (SampleEvent::Hit(a), SampleEvent::Hit(b)) => {
            a.by == b.by && a.damage.to_bits() == b.damage.to_bits() && a.critical == b.critical
        }
        (a, b) => a == b,
    }
}

/// Decodes `payload` with the decoder of the event `expected` is.
fn decode_as(expected: &SampleEvent, payload: &[u8]) -> Result<SampleEvent, PayloadError> {
    Ok(match expected {
        SampleEvent::Hit(_) => SampleEvent::Hit(HitEvent::decode(payload)?),
        SampleEvent::Chat(_) => SampleEvent::Chat(ChatEvent::decode(payload)?),
        SampleEvent::Blob(_) => SampleEvent::Blob(BlobEvent::decode(payload)?),
        SampleEvent::Tally(_) => SampleEvent::Tally(TallyEvent::decode(payload)?),
    })
}

#[test]
fn every_event_decodes_to_its_values() {
    let vectors = vectors();
    let events = list(&vectors, "events");
    assert!(!events.is_empty());
    for case in events {
        let expected = expected_event(case["event"].as_str().unwrap(), &case["values"]);
        let payload = hex(&case["bytes"]);
        let topic: u16 = int(&case["topic"]);
        let typed = decode_as(&expected, &payload).unwrap();
        assert!(same_event(&typed, &expected), "{case}: {typed:?}");
        let any = decode_event(topic, &payload).unwrap().unwrap();
        assert!(same_event(&any, &expected), "{case}: {any:?}");
    }
    assert_eq!(
        [
            HitEvent::TOPIC,
            ChatEvent::TOPIC,
            BlobEvent::TOPIC,
            TallyEvent::TOPIC
        ],
        [1, 7, 9, 10]
    );
}

#[test]
fn every_bad_event_is_refused() {
    let vectors = vectors();
    let bad = list(&vectors, "bad_events");
    assert!(!bad.is_empty());
    for case in bad {
        let topic: u16 = int(&case["topic"]);
        let payload = hex(&case["bytes"]);
        let result = decode_event(topic, &payload);
        let error = result.expect_err(&case.to_string());
        assert!(!error.to_string().is_empty());
    }
}

#[test]
fn unknown_topics_are_none() {
    let vectors = vectors();
    for topic in list(&vectors, "unknown_topics") {
        let topic: u16 = int(topic);
        assert_eq!(decode_event(topic, &[]), Ok(None), "{topic}");
        assert_eq!(decode_event(topic, &[1, 2, 3]), Ok(None), "{topic}");
    }
}

/// The sample's schema, from the API the generated code was written from.
fn sample_schema() -> Schema {
    sample::sample_api().schema
}

fn kind<'a>(schema: &'a Schema, name: &str) -> &'a KindDef {
    schema
        .kinds
        .iter()
        .find(|k| k.name == name)
        .unwrap_or_else(|| panic!("no kind {name}"))
}

/// A JSON number or value as the wire value of a field of type `ty`.
fn wire_value(ty: &FieldType, v: &Value) -> FieldValue {
    match ty {
        FieldType::Quant { .. } | FieldType::Centered { .. } | FieldType::Angle { .. } => {
            FieldValue::Q(int(v))
        }
        FieldType::UInt => FieldValue::U(int(v)),
        FieldType::SInt => FieldValue::I(int(v)),
        FieldType::Bool => FieldValue::Bool(boolean(v)),
        FieldType::Str { .. } => FieldValue::Str(text(v)),
        FieldType::F32 => FieldValue::F32(float(v)),
    }
}

fn same_ship(a: &ShipEntity, b: &ShipEntity) -> bool {
    a.x_vel.to_bits() == b.x_vel.to_bits()
        && a.heading.to_bits() == b.heading.to_bits()
        && a.lean.to_bits() == b.lean.to_bits()
        && a.hp == b.hp
        && a.team_delta == b.team_delta
        && a.alive == b.alive
        && a.callsign == b.callsign
        && a.mass.to_bits() == b.mass.to_bits()
}

#[test]
fn every_entity_reads_to_its_values() {
    let vectors = vectors();
    let schema = sample_schema();
    let entities = list(&vectors, "entities");
    assert!(!entities.is_empty());
    for case in entities {
        let name = case["kind"].as_str().unwrap();
        let def = kind(&schema, name);
        let raw = list(case, "fields");
        assert_eq!(raw.len(), def.fields.len(), "{case}");
        let fields: Vec<FieldValue> = def
            .fields
            .iter()
            .zip(raw)
            .map(|(f, v)| wire_value(&f.ty, v))
            .collect();
        let v = &case["values"];
        match name {
            "ship" => {
                let expected = ShipEntity {
                    x_vel: float(&v["x_vel"]),
                    heading: float(&v["heading"]),
                    lean: float(&v["lean"]),
                    hp: int(&v["hp"]),
                    team_delta: int(&v["team_delta"]),
                    alive: boolean(&v["alive"]),
                    callsign: text(&v["callsign"]),
                    mass: float(&v["mass"]),
                };
                let read = ShipEntity::read(&fields);
                assert!(same_ship(&read, &expected), "{case}: {read:?}");
            }
            "rock" => {
                assert_eq!(v.as_object().map(|o| o.len()), Some(0));
                assert_eq!(RockEntity::read(&fields), RockEntity {});
            }
            other => panic!("unknown kind {other}"),
        }
    }
}

#[test]
fn missing_or_mismatched_field_values_read_as_defaults() {
    assert!(same_ship(&ShipEntity::read(&[]), &ShipEntity::default()));
    // Each value of a type other than its field's.
    let wrong = [
        FieldValue::U(3),
        FieldValue::F32(1.0),
        FieldValue::I(2),
        FieldValue::Q(4),
        FieldValue::U(5),
        FieldValue::Str("yes".into()),
        FieldValue::Bool(true),
        FieldValue::U(6),
    ];
    assert!(same_ship(&ShipEntity::read(&wrong), &ShipEntity::default()));
    let short = [FieldValue::Q(15), FieldValue::Q(1)];
    let read = ShipEntity::read(&short);
    assert_eq!((read.x_vel, read.hp, read.callsign.as_str()), (8.0, 0, ""));
}

#[test]
fn kind_and_field_constants_match_the_schema() {
    let schema = sample_schema();
    let ship = kind(&schema, ShipEntity::KIND_NAME);
    assert_eq!(RockEntity::KIND_NAME, "rock");
    let indices = [
        ("x-vel", ShipEntity::FIELD_X_VEL),
        ("heading", ShipEntity::FIELD_HEADING),
        ("lean", ShipEntity::FIELD_LEAN),
        ("hp", ShipEntity::FIELD_HP),
        ("teamDelta", ShipEntity::FIELD_TEAM_DELTA),
        ("alive", ShipEntity::FIELD_ALIVE),
        ("callsign", ShipEntity::FIELD_CALLSIGN),
        ("mass", ShipEntity::FIELD_MASS),
    ];
    for (name, index) in indices {
        assert_eq!(ship.field_index(name), Some(index), "{name}");
    }
    assert_eq!(generated::MAX_THRUST, 1000);
    assert_eq!(generated::NEG, -3);
    assert_eq!(generated::BIG, 9_007_199_254_740_993);
}

fn ship_mut(schema: &mut Schema) -> &mut KindDef {
    schema.kinds.iter_mut().find(|k| k.name == "ship").unwrap()
}

#[test]
fn bind_finds_kinds_by_name_and_refuses_other_schemas() {
    let vectors = vectors();
    let bind = &vectors["bind"];
    let sample = sample_schema();
    let base = Schema {
        pos_step: sample.pos_step,
        kinds: list(bind, "schema_kinds")
            .iter()
            .map(|n| kind(&sample, n.as_str().unwrap()).clone())
            .collect(),
    };
    let kinds = SampleKinds::bind(&base).unwrap();
    assert_eq!(kinds.rock, int::<u32>(&bind["ids"]["rock"]));
    assert_eq!(kinds.ship, int::<u32>(&bind["ids"]["ship"]));

    let changes: [fn(&mut Schema); 5] = [
        |s| {
            let ship = ship_mut(s);
            let hp = ship.field_index("hp").unwrap();
            ship.fields[hp].ty = FieldType::SInt;
        },
        |s| {
            let ship = ship_mut(s);
            let x = ship.field_index("x-vel").unwrap();
            ship.fields[x].ty = FieldType::Quant {
                min: -8.0,
                max: 8.0,
                bits: 5,
            };
        },
        |s| {
            ship_mut(s).fields.pop();
        },
        |s| s.kinds.retain(|k| k.name != "rock"),
        |s| {
            s.kinds.push(KindDef {
                name: "comet".into(),
                fields: vec![],
            })
        },
    ];
    // The kind each failing change is about.
    let about = ["ship", "ship", "ship", "rock", ""];
    let mismatches = list(bind, "mismatches");
    assert_eq!(mismatches.len(), changes.len());
    for ((case, change), kind) in mismatches.iter().zip(changes).zip(about) {
        let mut schema = base.clone();
        change(&mut schema);
        assert_ne!(schema, base, "{case}");
        let result = SampleKinds::bind(&schema);
        if boolean(&case["fails"]) {
            let message = result.expect_err(&case.to_string()).to_string();
            assert!(
                message.contains("regenerate with `zonekeep codegen --kind sample`"),
                "{message}"
            );
            assert!(message.contains(&format!("`{kind}`")), "{message}");
        } else {
            assert_eq!(result, Ok(kinds), "{case}");
        }
    }
}

#[test]
fn bind_compares_float_parameters_exactly() {
    let mut schema = sample_schema();
    let ship = ship_mut(&mut schema);
    let lean = ship.field_index("lean").unwrap();
    ship.fields[lean].ty = FieldType::Centered {
        range: 2.0000002,
        bits: 8,
    };
    let message = SampleKinds::bind(&schema).unwrap_err().to_string();
    assert!(message.contains("`lean`"), "{message}");
}
