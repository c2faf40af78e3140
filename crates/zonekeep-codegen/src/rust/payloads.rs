//! Inputs and events: records whose payloads are written with `zonekeep_client::payload`'s
//! `PayloadWriter` and read with its `PayloadReader`, and `decode_event` over every event.

use zonekeep_protocol::contract::{InputDef, ValueDef, ValueType};

use super::text::{doc_or, ident, Out, MAX_WIDTH};
use super::{record, RECORD_DERIVE};
use crate::model::{Item, Model};
use crate::names::{string_literal, Name};

fn value_rust_type(ty: ValueType) -> &'static str {
    match ty {
        ValueType::U8 => "u8",
        ValueType::U16 => "u16",
        ValueType::U32 => "u32",
        ValueType::U64 => "u64",
        ValueType::I8 => "i8",
        ValueType::I16 => "i16",
        ValueType::I32 => "i32",
        ValueType::I64 => "i64",
        ValueType::F32 => "f32",
        ValueType::Bool => "bool",
        ValueType::Bytes | ValueType::RestBytes => "Vec<u8>",
        ValueType::Str | ValueType::RestStr => "String",
    }
}

/// The method of `PayloadWriter` and `PayloadReader` for `ty`: the type's own name.
fn method(ty: ValueType) -> &'static str {
    ty.name()
}

fn value_doc(v: &ValueDef) -> String {
    let fallback = if v.optional {
        format!("`{}` (optional {}).", v.name, v.ty.name())
    } else {
        format!("`{}` ({}).", v.name, v.ty.name())
    };
    doc_or(&v.doc, fallback)
}

/// The members of a record of values.
fn value_fields(out: &mut Out, values: &[(Name, &ValueDef)]) {
    for (name, v) in values {
        out.doc(1, &value_doc(v));
        out.line(
            1,
            &format!("pub {}: {},", ident(name), value_rust_type(v.ty)),
        );
    }
}

/// Whether an input of `model` has values, so its `encode` uses a `PayloadWriter`.
pub(super) fn writes_values(model: &Model<'_>) -> bool {
    model.inputs.iter().any(|i| !i.values.is_empty())
}

/// An input's record and its `encode`.
pub(super) fn input_record(out: &mut Out, input: &Item<'_, InputDef>) {
    let def = input.def;
    let type_name = format!("{}Input", input.name.pascal());
    out.blank();
    out.doc(0, &doc_or(&def.doc, format!("The input `{}`.", def.name)));
    record(
        out,
        RECORD_DERIVE,
        &type_name,
        input.values.is_empty(),
        |out| value_fields(out, &input.values),
    );
    out.blank();
    out.line(0, &format!("impl {type_name} {{"));
    if let Some(tag) = def.tag {
        out.doc(1, "The tag byte that starts this input's payload.");
        out.line(1, &format!("pub const TAG: u8 = {tag};"));
        out.blank();
    }
    out.docs(
        1,
        &[
            "The input's payload, to send as it is; trailing optional values are left out while",
            "they are zero.",
        ],
    );
    out.line(1, "pub fn encode(&self) -> Vec<u8> {");
    if input.values.is_empty() {
        let bytes = if def.tag.is_some() {
            "vec![Self::TAG]"
        } else {
            "Vec::new()"
        };
        out.line(2, bytes);
        out.line(1, "}");
        out.line(0, "}");
        return;
    }
    out.line(2, "let mut out = PayloadWriter::new();");
    if def.tag.is_some() {
        out.line(2, "out.u8(Self::TAG);");
    }
    let mut optional_started = false;
    for (name, v) in &input.values {
        let field = format!("self.{}", ident(name));
        if v.optional && !optional_started {
            optional_started = true;
            out.line(2, "let mut end = out.len();");
        }
        match v.ty {
            ValueType::Bytes | ValueType::Str | ValueType::RestBytes => {
                let callee = match v.ty {
                    ValueType::Bytes => "out.bytes",
                    ValueType::Str => "out.str",
                    _ => "out.raw",
                };
                out.call(2, callee, &format!("&{field}"));
            }
            ValueType::RestStr => out.call(2, "out.raw", &format!("{field}.as_bytes()")),
            ty => out.call(2, &format!("out.{}", method(ty)), &field),
        }
        if v.optional {
            let nonzero = match v.ty {
                ValueType::Bool => field,
                ValueType::F32 => format!("{field}.to_bits() != 0"),
                _ => format!("{field} != 0"),
            };
            out.line(2, &format!("if {nonzero} {{"));
            out.line(3, "end = out.len();");
            out.line(2, "}");
        }
    }
    if optional_started {
        out.line(2, "out.truncate(end);");
    }
    out.line(2, "out.into_vec()");
    out.line(1, "}");
    out.line(0, "}");
}

/// The chain of `PayloadReader` calls, after the reader `r`, that reads one event value.
fn value_read(v: &ValueDef) -> Vec<String> {
    let lit = string_literal(&v.name);
    let m = method(v.ty);
    match v.ty {
        ValueType::Bytes => vec![format!("{m}({lit})?"), "to_vec()".to_owned()],
        ValueType::Str | ValueType::RestStr => {
            vec![format!("{m}({lit})?"), "to_owned()".to_owned()]
        }
        ValueType::RestBytes => vec![format!("{m}()"), "to_vec()".to_owned()],
        _ if v.optional => vec![format!("optional(|r| r.{m}({lit}))?")],
        _ => vec![format!("{m}({lit})?")],
    }
}

/// The member of an event's struct literal that reads `v` from the reader `r`.
fn value_field(out: &mut Out, name: &str, v: &ValueDef) {
    let links = value_read(v);
    if let (true, [link]) = (v.optional, links.as_slice()) {
        // Where even the chain broken after `r` is too wide, rustfmt gives the closure a block.
        if 4 * 4 + ".".len() + link.len() + ",".len() > MAX_WIDTH {
            let read = format!("r.{}({})", method(v.ty), string_literal(&v.name));
            out.line(3, &format!("{name}: r.optional(|r| {{"));
            out.line(4, &read);
            out.line(3, "})?,");
            return;
        }
    }
    let links: Vec<&str> = links.iter().map(String::as_str).collect();
    out.field_chain(3, name, "r", &links);
}

/// The name of the union of events: `{Kind}Event`, unless an event takes that name.
fn union_name(model: &Model<'_>, kind_type: &str) -> String {
    let mut base = kind_type.to_owned();
    while model.events.iter().any(|e| e.name.pascal() == base) {
        base.push_str("Any");
    }
    format!("{base}Event")
}

/// Each event's record and `decode`, the union of events and `decode_event`.
pub(super) fn events(out: &mut Out, model: &Model<'_>, kind_type: &str) {
    for event in &model.events {
        let def = event.def;
        let type_name = format!("{}Event", event.name.pascal());
        out.blank();
        out.doc(0, &doc_or(&def.doc, format!("The event `{}`.", def.name)));
        record(
            out,
            RECORD_DERIVE,
            &type_name,
            event.values.is_empty(),
            |out| value_fields(out, &event.values),
        );
        out.blank();
        out.line(0, &format!("impl {type_name} {{"));
        out.doc(1, "The topic events of this type carry.");
        out.line(1, &format!("pub const TOPIC: u16 = {};", def.topic));
        out.blank();
        out.docs(
            1,
            &[
                "Decodes a payload strictly: cut short, a bool other than 0 or 1, text that is not",
                "UTF-8 or bytes left over is an error; absent optional values read as zero.",
            ],
        );
        out.line(
            1,
            "pub fn decode(payload: &[u8]) -> Result<Self, PayloadError> {",
        );
        let head = if event.values.is_empty() {
            "let r = "
        } else {
            "let mut r = "
        };
        let name = string_literal(&format!("event `{}`", def.name));
        out.call_args(
            2,
            head,
            "PayloadReader::with_name",
            &["payload", name.as_str()],
        );
        if event.values.is_empty() {
            out.line(2, "let event = Self {};");
        } else {
            out.line(2, "let event = Self {");
            for (name, v) in &event.values {
                value_field(out, &ident(name), v);
            }
            out.line(2, "};");
        }
        out.line(2, "r.finish()?;");
        out.line(2, "Ok(event)");
        out.line(1, "}");
        out.line(0, "}");
    }
    decode_event(out, model, &union_name(model, kind_type));
}

fn decode_event(out: &mut Out, model: &Model<'_>, union: &str) {
    out.blank();
    out.doc(
        0,
        &format!(
            "Any event of `{}`, as [`decode_event`] reads it.",
            model.kind
        ),
    );
    out.line(0, "#[derive(Debug, Clone, PartialEq)]");
    if model.events.is_empty() {
        out.line(0, &format!("pub enum {union} {{}}"));
    } else {
        out.line(0, &format!("pub enum {union} {{"));
        for event in &model.events {
            let p = event.name.pascal();
            out.doc(1, &format!("A `{}` event.", event.def.name));
            out.line(1, &format!("{p}({p}Event),"));
        }
        out.line(0, "}");
    }
    out.blank();
    out.docs(
        0,
        &["Decodes the payload of an event on `topic`: `None` for a topic this code does not know."],
    );
    let params = if model.events.is_empty() {
        "_topic: u16, _payload: &[u8]"
    } else {
        "topic: u16, payload: &[u8]"
    };
    let ret = format!("Result<Option<{union}>, PayloadError>");
    let sig = format!("pub fn decode_event({params}) -> {ret} {{");
    if sig.len() <= MAX_WIDTH {
        out.line(0, &sig);
    } else {
        out.line(0, "pub fn decode_event(");
        for p in params.split(", ") {
            out.line(1, &format!("{p},"));
        }
        out.line(0, &format!(") -> {ret} {{"));
    }
    if model.events.is_empty() {
        out.line(1, "Ok(None)");
    } else {
        out.line(1, "let event = match topic {");
        for event in &model.events {
            let p = event.name.pascal();
            out.arm(
                2,
                &format!("{p}Event::TOPIC"),
                &format!("{union}::{p}"),
                &format!("{p}Event::decode(payload)?"),
            );
        }
        out.line(2, "_ => return Ok(None),");
        out.line(1, "};");
        out.line(1, "Ok(Some(event))");
    }
    out.line(0, "}");
}
