//! A kind API that uses every field type, every value type, tags, optional values and rest
//! values: the golden files and the cross-language vectors (`tests/fixtures/codegen`) are
//! written from it.

use zonekeep_codegen::KindApi;
use zonekeep_protocol::contract::{Contract, EventDef, InputDef, ValueDef, ValueType};
use zonekeep_protocol::schema::{FieldDef, FieldType, KindDef, Schema};

fn field(name: &str, ty: FieldType) -> FieldDef {
    FieldDef {
        name: name.into(),
        ty,
    }
}

/// The sample: a `ship` with one field of each type, a `rock` without fields, three tagged
/// inputs and four events.
pub fn sample_api() -> KindApi {
    let schema = Schema {
        pos_step: 0.01,
        kinds: vec![
            KindDef {
                name: "ship".into(),
                fields: vec![
                    field(
                        "x-vel",
                        FieldType::Quant {
                            min: -8.0,
                            max: 8.0,
                            bits: 4,
                        },
                    ),
                    field("heading", FieldType::Angle { bits: 2 }),
                    field(
                        "lean",
                        FieldType::Centered {
                            range: 2.0,
                            bits: 8,
                        },
                    ),
                    field("hp", FieldType::UInt),
                    field("teamDelta", FieldType::SInt),
                    field("alive", FieldType::Bool),
                    field("callsign", FieldType::Str { max_len: 16 }),
                    field("mass", FieldType::F32),
                ],
            },
            KindDef {
                name: "rock".into(),
                fields: vec![],
            },
        ],
    };
    let contract = Contract::new()
        .constant(
            "MAX_THRUST",
            1000,
            "The largest thrust a steer input may ask for.",
        )
        .constant("NEG", -3, "A negative constant.")
        .constant(
            "BIG",
            9_007_199_254_740_993,
            "Past 2^53: a bigint in TypeScript.",
        )
        .input(
            InputDef::new("steer", "Turn and thrust; boost and trim only when set.")
                .tagged(1)
                .value("turn", ValueType::I8, "-1 left, 1 right.")
                .value("thrust", ValueType::U16, "0..=MAX_THRUST.")
                .optional("boost", ValueType::U8, "Boost level.")
                .optional("trim", ValueType::F32, "Trim angle."),
        )
        .input(
            InputDef::new("say", "A line of chat.")
                .tagged(2)
                .value("channel", ValueType::U32, "Channel number.")
                .value("text", ValueType::RestStr, "The line."),
        )
        .input(
            InputDef::new("wide", "One value of every other type.")
                .tagged(3)
                .value("a_u64", ValueType::U64, "")
                .value("b_i16", ValueType::I16, "")
                .value("c_i32", ValueType::I32, "")
                .value("d_i64", ValueType::I64, "")
                .value("e_f32", ValueType::F32, "")
                .value("f_bool", ValueType::Bool, "")
                .value("g_bytes", ValueType::Bytes, "")
                .value("h_str", ValueType::Str, "")
                .value("i_rest", ValueType::RestBytes, ""),
        )
        .event(
            EventDef::new("hit", 1, "The ship was hit.")
                .value("by", ValueType::U32, "Entity id of the shooter.")
                .value("damage", ValueType::F32, "")
                .value("critical", ValueType::Bool, ""),
        )
        .event(
            EventDef::new("chat", 7, "A chat line.")
                .value("from", ValueType::Str, "")
                .value("line", ValueType::RestStr, ""),
        )
        .event(
            EventDef::new("blob", 9, "Bytes.")
                .value("data", ValueType::Bytes, "")
                .value("tail", ValueType::RestBytes, ""),
        )
        .event({
            let mut e = EventDef::new("tally", 10, "Wide integers; `small` may be absent.")
                .value("count", ValueType::U64, "")
                .value("delta", ValueType::I64, "");
            e.values
                .push(ValueDef::new("small", ValueType::I16, "").optional());
            e
        });
    KindApi {
        kind: "sample".into(),
        schema,
        contract,
    }
}
