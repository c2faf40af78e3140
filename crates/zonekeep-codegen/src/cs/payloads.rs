//! The payloads: a struct per input with its `Encode`, a struct per event with its `Decode`, the
//! events' interface and the `{Kind}Events` dispatcher by topic.

use std::fmt::Write as _;

use zonekeep_protocol::contract::{EventDef, InputDef, ValueDef, ValueType};

use super::text::{code, string_lit, xml, Names, Out};
use super::{Types, ZK};
use crate::model::{Item, Model};
use crate::names::Name;

/// The C# type of a payload value.
fn value_type(ty: ValueType) -> &'static str {
    match ty {
        ValueType::U8 => "byte",
        ValueType::U16 => "ushort",
        ValueType::U32 => "uint",
        ValueType::U64 => "ulong",
        ValueType::I8 => "sbyte",
        ValueType::I16 => "short",
        ValueType::I32 => "int",
        ValueType::I64 => "long",
        ValueType::F32 => "float",
        ValueType::Bool => "bool",
        ValueType::Bytes | ValueType::RestBytes => "byte[]",
        ValueType::Str | ValueType::RestStr => "string",
    }
}

/// A value's doc: its name and type, then its own doc, then what being optional means for an
/// input (`written`) or an event (`read`).
fn value_doc(value: &ValueDef, input: bool) -> String {
    let mut doc = format!("{} ({}", code(&value.name), value.ty.name());
    doc.push_str(if value.optional { ", optional)" } else { ")" });
    if value.doc.trim().is_empty() {
        doc.push('.');
    } else {
        doc.push_str(": ");
        doc.push_str(&xml(&value.doc));
    }
    if value.optional {
        doc.push_str(if input {
            " Written only when it or a later value is nonzero."
        } else {
            " 0 when the payload leaves it out."
        });
    }
    doc
}

/// Members for an item's values, after the type's own members.
fn value_members(values: &[(Name, &ValueDef)], reserved: &[&str]) -> Vec<String> {
    let mut names = Names::new(reserved);
    values.iter().map(|(n, _)| names.add(n.pascal())).collect()
}

/// The condition that an optional value is not zero (f32: not +0.0 by bit pattern).
fn nonzero(ty: ValueType, member: &str) -> String {
    match ty {
        ValueType::F32 => format!("{ZK}.Bits.SingleToInt32Bits({member}) != 0"),
        ValueType::Bool => member.to_owned(),
        _ => format!("{member} != 0"),
    }
}

pub(super) fn input_struct(out: &mut Out, input: &Item<'_, InputDef>, type_name: &str) {
    let mut reserved = vec![type_name, "Encode"];
    if input.def.tag.is_some() {
        reserved.push("Tag");
    }
    let members = value_members(&input.values, &reserved);
    let doc = if input.def.doc.trim().is_empty() {
        format!("The input {}.", code(&input.def.name))
    } else {
        xml(&input.def.doc)
    };
    out.summary(1, &doc);
    out.line(1, &format!("public struct {type_name}"));
    out.line(1, "{");
    if let Some(tag) = input.def.tag {
        out.summary(
            2,
            "The byte that starts the payload and tells this input from the kind's others.",
        );
        out.line(2, &format!("public const byte Tag = {tag};"));
    }
    for ((_, value), member) in input.values.iter().zip(&members) {
        out.summary(2, &value_doc(value, true));
        out.line(2, &format!("public {} {member};", value_type(value.ty)));
    }
    out.blank();
    let tag = if input.def.tag.is_some() {
        "<see cref=\"Tag\"/>, then each value"
    } else {
        "each value"
    };
    out.summary(
        2,
        &format!("The payload: {tag} little-endian (bytes and str with a u32 length, str as UTF-8, a rest value without one); trailing optional values only up to the last nonzero one. A null array or string is empty."),
    );
    out.line(2, "public byte[] Encode()");
    out.line(2, "{");
    // The payload is sized first, so the writer fills one array of exactly its length.
    let mut fixed = usize::from(input.def.tag.is_some());
    let mut var_parts: Vec<String> = Vec::new();
    for (i, ((_, value), member)) in input.values.iter().zip(&members).enumerate() {
        let what = string_lit(&format!("{}.{}", input.def.name, value.name));
        match value.ty {
            ValueType::Bytes | ValueType::RestBytes => {
                out.line(
                    3,
                    &format!("int n{i} = {member} == null ? 0 : {member}.Length;"),
                );
                var_parts.push(format!("n{i}"));
            }
            ValueType::Str | ValueType::RestStr => {
                out.line(
                    3,
                    &format!("int n{i} = {ZK}.PayloadWriter.Utf8Length({member}, {what});"),
                );
                var_parts.push(format!("n{i}"));
            }
            _ => {}
        }
        if matches!(value.ty, ValueType::Bytes | ValueType::Str) {
            fixed += 4;
        }
        if !value.optional {
            fixed += value.ty.width().unwrap_or(0);
        }
    }
    let optional: Vec<(usize, &ValueDef, &String)> = input
        .values
        .iter()
        .zip(&members)
        .enumerate()
        .filter(|(_, ((_, v), _))| v.optional)
        .map(|(i, ((_, v), m))| (i, *v, m))
        .collect();
    if !optional.is_empty() {
        let mut expr = String::new();
        for (k, (_, value, member)) in optional.iter().enumerate().rev() {
            let _ = write!(expr, "{} ? {} : ", nonzero(value.ty, member), k + 1);
        }
        expr.push('0');
        out.line(3, &format!("int optional = {expr};"));
    }
    let mut size = fixed.to_string();
    for part in &var_parts {
        let _ = write!(size, " + {part}");
    }
    for (k, (_, value, _)) in optional.iter().enumerate() {
        let _ = write!(
            size,
            " + (optional > {k} ? {} : 0)",
            value.ty.width().unwrap_or(0)
        );
    }
    out.line(
        3,
        &format!("{ZK}.PayloadWriter w = new {ZK}.PayloadWriter({size});"),
    );
    if input.def.tag.is_some() {
        out.line(3, "w.U8(Tag);");
    }
    let mut k = 0;
    for ((_, value), member) in input.values.iter().zip(&members) {
        let what = string_lit(&format!("{}.{}", input.def.name, value.name));
        let put = match value.ty {
            ValueType::U8 => format!("w.U8({member});"),
            ValueType::U16 => format!("w.U16({member});"),
            ValueType::U32 => format!("w.U32({member});"),
            ValueType::U64 => format!("w.U64({member});"),
            ValueType::I8 => format!("w.I8({member});"),
            ValueType::I16 => format!("w.I16({member});"),
            ValueType::I32 => format!("w.I32({member});"),
            ValueType::I64 => format!("w.I64({member});"),
            ValueType::F32 => format!("w.F32({member});"),
            ValueType::Bool => format!("w.Bool({member});"),
            ValueType::Bytes => format!("w.Bytes({member});"),
            ValueType::Str => format!("w.Str({member}, {what});"),
            ValueType::RestBytes => format!("w.RawBytes({member});"),
            ValueType::RestStr => format!("w.RawStr({member}, {what});"),
        };
        if value.optional {
            out.line(3, &format!("if (optional > {k}) {put}"));
            k += 1;
        } else {
            out.line(3, &put);
        }
    }
    out.line(3, "return w.ToArray();");
    out.line(2, "}");
    out.line(1, "}");
}

pub(super) fn event_interface(out: &mut Out, model: &Model<'_>, types: &Types) {
    out.summary(
        1,
        &format!(
            "An event of the zone kind {}: one of the event structs, as <see cref=\"{}.Decode\"/> gives it.",
            code(model.kind),
            types.events
        ),
    );
    out.line(1, &format!("public interface {}", types.event_interface));
    out.line(1, "{");
    out.summary(2, "The topic events of this type carry.");
    out.line(2, "ushort Topic { get; }");
    out.line(1, "}");
}

pub(super) fn event_struct(
    out: &mut Out,
    event: &Item<'_, EventDef>,
    type_name: &str,
    types: &Types,
) {
    let iface = &types.event_interface;
    let members = value_members(
        &event.values,
        &[type_name, iface.as_str(), "Topic", "Decode"],
    );
    let doc = if event.def.doc.trim().is_empty() {
        format!("The event {}.", code(&event.def.name))
    } else {
        xml(&event.def.doc)
    };
    out.summary(1, &doc);
    out.line(1, &format!("public struct {type_name} : {iface}"));
    out.line(1, "{");
    out.summary(2, "The topic events of this type carry.");
    out.line(
        2,
        &format!("public const ushort Topic = {};", event.def.topic),
    );
    for ((_, value), member) in event.values.iter().zip(&members) {
        out.summary(2, &value_doc(value, false));
        out.line(2, &format!("public {} {member};", value_type(value.ty)));
    }
    out.blank();
    out.line(
        2,
        &format!("ushort {iface}.Topic {{ get {{ return Topic; }} }}"),
    );
    out.blank();
    out.summary(
        2,
        "Reads a payload strictly: a payload that ends early, a bool not 0 or 1, text that is not UTF-8 or bytes left over throw <c>Zonekeep.ProtocolException</c>; an absent optional value reads 0.",
    );
    out.line(
        2,
        &format!("public static {type_name} Decode(byte[] payload)"),
    );
    out.line(2, "{");
    out.line(
        3,
        &format!("{ZK}.PayloadReader r = new {ZK}.PayloadReader(payload);"),
    );
    out.line(3, &format!("{type_name} result = default({type_name});"));
    for ((_, value), member) in event.values.iter().zip(&members) {
        let what = string_lit(&format!("{}.{}", event.def.name, value.name));
        let read = match value.ty {
            ValueType::U8 => format!("r.U8({what})"),
            ValueType::U16 => format!("r.U16({what})"),
            ValueType::U32 => format!("r.U32({what})"),
            ValueType::U64 => format!("r.U64({what})"),
            ValueType::I8 => format!("r.I8({what})"),
            ValueType::I16 => format!("r.I16({what})"),
            ValueType::I32 => format!("r.I32({what})"),
            ValueType::I64 => format!("r.I64({what})"),
            ValueType::F32 => format!("r.F32({what})"),
            ValueType::Bool => format!("r.Bool({what})"),
            ValueType::Bytes => format!("r.Bytes({what})"),
            ValueType::Str => format!("r.Str({what})"),
            ValueType::RestBytes => "r.RestBytes()".to_owned(),
            ValueType::RestStr => format!("r.RestStr({what})"),
        };
        if value.optional {
            out.line(3, &format!("if (!r.AtEnd) result.{member} = {read};"));
        } else {
            out.line(3, &format!("result.{member} = {read};"));
        }
    }
    out.line(3, &format!("r.End({});", string_lit(&event.def.name)));
    out.line(3, "return result;");
    out.line(2, "}");
    out.line(1, "}");
}

pub(super) fn dispatcher(out: &mut Out, model: &Model<'_>, types: &Types) {
    out.summary(
        1,
        &format!(
            "Decodes the events of the zone kind {} by topic.",
            code(model.kind)
        ),
    );
    out.line(1, &format!("public static class {}", types.events));
    out.line(1, "{");
    out.summary(
        2,
        "The event <paramref name=\"payload\"/> holds, by <paramref name=\"topic\"/>; null for a topic the kind does not declare. A malformed payload throws <c>Zonekeep.ProtocolException</c>.",
    );
    out.line(
        2,
        &format!(
            "public static {} Decode(int topic, byte[] payload)",
            types.event_interface
        ),
    );
    out.line(2, "{");
    out.line(3, "switch (topic)");
    out.line(3, "{");
    for name in &types.event_types {
        out.line(
            4,
            &format!("case {name}.Topic: return {name}.Decode(payload);"),
        );
    }
    out.line(4, "default: return null;");
    out.line(3, "}");
    out.line(2, "}");
    out.line(1, "}");
}
