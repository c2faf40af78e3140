//! C# 7.2 for the `Zonekeep` package (mcs, Unity 2021, Godot): one file in
//! `options.cs_namespace` holding the kind's constants, a struct per entity kind with its
//! `Read`, the `{Kind}Kinds` binding, a struct per input with its `Encode`, a struct per event with
//! its `Decode`, and the `{Kind}Events` dispatcher. It needs only the BCL and the runtime assembly.
//!
//! Every type outside the file is written `global::`-qualified, so no type of the namespace the
//! code is generated into can shadow one it uses. A member whose name would clash with another
//! member of its type (or with the type itself, which C# refuses) gets a trailing `_`.

use std::fmt::Write as _;

use zonekeep_protocol::contract::{EventDef, InputDef, ValueDef, ValueType};
use zonekeep_protocol::schema::FieldType;

use crate::model::{Entity, Item, Model};
use crate::names::{doc_line, Name};
use crate::Options;

const ZK: &str = "global::Zonekeep";

/// Lines of text, indented four spaces a level, never with trailing spaces.
struct Out {
    text: String,
}

impl Out {
    fn line(&mut self, depth: usize, text: &str) {
        let text = text.trim_end();
        if !text.is_empty() {
            for _ in 0..depth {
                self.text.push_str("    ");
            }
            self.text.push_str(text);
        }
        self.text.push('\n');
    }

    fn blank(&mut self) {
        self.text.push('\n');
    }

    /// A one-line `/// <summary>` doc comment; `xml` is already escaped.
    fn summary(&mut self, depth: usize, xml: &str) {
        self.line(depth, &format!("/// <summary>{xml}</summary>"));
    }
}

/// Text for an XML doc comment or a `//` comment: one line, `& < >` escaped, and the characters
/// C# takes as line ends (U+2028, U+2029) made spaces so the comment cannot end early.
fn xml(text: &str) -> String {
    let line: String = doc_line(text)
        .chars()
        .map(|c| match c {
            '\u{2028}' | '\u{2029}' => ' ',
            c => c,
        })
        .collect();
    line.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A name inside a doc comment: `<c>name</c>`.
fn code(text: &str) -> String {
    format!("<c>{}</c>", xml(text))
}

/// Text as a C# string literal: quotes and backslashes escaped, and every control character and
/// C#'s other line ends (U+2028, U+2029) written as `\uXXXX`, so the literal stays on its line.
fn string_lit(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A C# `float` literal of exactly `v`: Rust's shortest round-trip form of the f32 and `f`.
fn float_lit(v: f32) -> String {
    format!("{v:?}f")
}

/// Names given out in one scope (a type's members, or the file's types), each made distinct
/// from those before it with trailing `_`s.
struct Names {
    taken: Vec<String>,
}

impl Names {
    fn new(reserved: &[&str]) -> Self {
        Self {
            taken: reserved.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    fn add(&mut self, base: String) -> String {
        let mut name = base;
        while self.taken.contains(&name) {
            name.push('_');
        }
        self.taken.push(name.clone());
        name
    }
}

/// The type names of the file.
struct Types {
    constants: String,
    kinds: String,
    event_interface: String,
    events: String,
    wire: String,
    entities: Vec<String>,
    inputs: Vec<String>,
    event_types: Vec<String>,
}

impl Types {
    fn new(model: &Model<'_>) -> Self {
        let kind = model.kind_name.pascal();
        let mut names = Names::new(&[]);
        let constants = names.add(format!("{kind}Constants"));
        let kinds = names.add(format!("{kind}Kinds"));
        let event_interface = names.add(format!("I{kind}Event"));
        let events = names.add(format!("{kind}Events"));
        let wire = names.add(format!("{kind}Wire"));
        let entities = model
            .entities
            .iter()
            .map(|e| names.add(format!("{}Entity", e.name.pascal())))
            .collect();
        let inputs = model
            .inputs
            .iter()
            .map(|i| names.add(format!("{}Input", i.name.pascal())))
            .collect();
        let event_types = model
            .events
            .iter()
            .map(|e| names.add(format!("{}Event", e.name.pascal())))
            .collect();
        Self {
            constants,
            kinds,
            event_interface,
            events,
            wire,
            entities,
            inputs,
            event_types,
        }
    }
}

pub(crate) fn emit(model: &Model<'_>, options: &Options) -> String {
    let types = Types::new(model);
    let mut out = Out {
        text: String::new(),
    };
    out.line(
        0,
        &format!(
            "// Generated by `{}` from the zone kind `{}`. Do not edit: regenerate it.",
            xml_free(&options.command),
            xml_free(model.kind)
        ),
    );
    out.line(0, "// <auto-generated />");
    out.line(
        0,
        &format!("namespace {}", namespace(&options.cs_namespace)),
    );
    out.line(0, "{");
    constants(&mut out, model, &types);
    for (entity, name) in model.entities.iter().zip(&types.entities) {
        out.blank();
        entity_struct(&mut out, entity, name, &types);
    }
    out.blank();
    kinds(&mut out, model, &types);
    for (input, name) in model.inputs.iter().zip(&types.inputs) {
        out.blank();
        input_struct(&mut out, input, name, &types);
    }
    out.blank();
    event_interface(&mut out, model, &types);
    for (event, name) in model.events.iter().zip(&types.event_types) {
        out.blank();
        event_struct(&mut out, event, name, &types);
    }
    out.blank();
    dispatcher(&mut out, model, &types);
    out.blank();
    wire(&mut out, &types, &options.command);
    out.line(0, "}");
    out.text
}

/// Text for a `//` comment: one line that cannot end early.
fn xml_free(text: &str) -> String {
    doc_line(text)
        .chars()
        .map(|c| match c {
            '\u{2028}' | '\u{2029}' => ' ',
            c => c,
        })
        .collect()
}

/// The namespace as given when it is a dotted list of identifiers, else each part made one.
fn namespace(text: &str) -> String {
    let parts: Vec<String> = text
        .split('.')
        .map(|part| {
            let ok = part.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if ok && KEYWORDS.contains(&part) {
                format!("@{part}")
            } else if ok {
                part.to_owned()
            } else {
                Name::new(part).pascal()
            }
        })
        .collect();
    parts.join(".")
}

/// C#'s reserved words, which an identifier may only be with an `@`.
const KEYWORDS: [&str; 77] = [
    "abstract",
    "as",
    "base",
    "bool",
    "break",
    "byte",
    "case",
    "catch",
    "char",
    "checked",
    "class",
    "const",
    "continue",
    "decimal",
    "default",
    "delegate",
    "do",
    "double",
    "else",
    "enum",
    "event",
    "explicit",
    "extern",
    "false",
    "finally",
    "fixed",
    "float",
    "for",
    "foreach",
    "goto",
    "if",
    "implicit",
    "in",
    "int",
    "interface",
    "internal",
    "is",
    "lock",
    "long",
    "namespace",
    "new",
    "null",
    "object",
    "operator",
    "out",
    "override",
    "params",
    "private",
    "protected",
    "public",
    "readonly",
    "ref",
    "return",
    "sbyte",
    "sealed",
    "short",
    "sizeof",
    "stackalloc",
    "static",
    "string",
    "struct",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "uint",
    "ulong",
    "unchecked",
    "unsafe",
    "ushort",
    "using",
    "virtual",
    "void",
    "volatile",
    "while",
];

fn constants(out: &mut Out, model: &Model<'_>, types: &Types) {
    out.summary(
        1,
        &format!("The constants of the zone kind {}.", code(model.kind)),
    );
    out.line(1, &format!("public static class {}", types.constants));
    out.line(1, "{");
    let mut names = Names::new(&[types.constants.as_str()]);
    for (name, def) in &model.consts {
        let member = names.add(name.screaming());
        let doc = if def.doc.trim().is_empty() {
            format!("{}.", code(&def.name))
        } else {
            xml(&def.doc)
        };
        let value = if def.value == i64::MIN {
            "long.MinValue".to_owned()
        } else {
            def.value.to_string()
        };
        out.summary(2, &doc);
        out.line(2, &format!("public const long {member} = {value};"));
    }
    out.line(1, "}");
}

/// The C# type of a field's decoded value.
fn field_type(ty: &FieldType) -> &'static str {
    match ty {
        FieldType::Quant { .. } | FieldType::Centered { .. } | FieldType::Angle { .. } => "float",
        FieldType::UInt => "uint",
        FieldType::SInt => "int",
        FieldType::Bool => "bool",
        FieldType::Str { .. } => "string",
        FieldType::F32 => "float",
    }
}

/// A field type as the schema writes it, for docs.
fn describe_field(ty: &FieldType) -> String {
    match ty {
        FieldType::Quant { min, max, bits } => format!("quant({min:?}, {max:?}, {bits} bits)"),
        FieldType::Centered { range, bits } => format!("centered({range:?}, {bits} bits)"),
        FieldType::Angle { bits } => format!("angle({bits} bits)"),
        FieldType::UInt => "uint".to_owned(),
        FieldType::SInt => "sint".to_owned(),
        FieldType::Bool => "bool".to_owned(),
        FieldType::Str { max_len } => format!("str(at most {max_len} bytes)"),
        FieldType::F32 => "f32".to_owned(),
    }
}

/// The largest code of a quantized field of `bits` bits, `2^bits - 1`.
fn max_code(bits: u8) -> u64 {
    (1u64 << bits.min(32)) - 1
}

fn entity_struct(out: &mut Out, entity: &Entity<'_>, type_name: &str, types: &Types) {
    let mut names = Names::new(&[type_name, types.wire.as_str(), "KindName", "Read"]);
    let consts: Vec<String> = entity
        .fields
        .iter()
        .map(|(n, _)| names.add(format!("Field{}", n.pascal())))
        .collect();
    let members: Vec<String> = entity
        .fields
        .iter()
        .map(|(n, _)| names.add(n.pascal()))
        .collect();
    let w = &types.wire;
    out.summary(
        1,
        &format!(
            "An entity of kind {}: its fields decoded (<see cref=\"Read\"/>).",
            code(&entity.def.name)
        ),
    );
    out.line(1, &format!("public struct {type_name}"));
    out.line(1, "{");
    out.summary(2, "The kind's name in the zone's schema.");
    out.line(
        2,
        &format!(
            "public const string KindName = {};",
            string_lit(&entity.def.name)
        ),
    );
    for (i, ((_, field), name)) in entity.fields.iter().zip(&consts).enumerate() {
        out.summary(2, &format!("The wire index of {}.", code(&field.name)));
        out.line(2, &format!("public const int {name} = {i};"));
    }
    for ((_, field), name) in entity.fields.iter().zip(&members) {
        let decoded = match field.ty {
            FieldType::Quant { .. } | FieldType::Centered { .. } | FieldType::Angle { .. } => {
                ", decoded"
            }
            _ => "",
        };
        out.summary(
            2,
            &format!(
                "{}: {}{decoded}.",
                code(&field.name),
                xml(&describe_field(&field.ty))
            ),
        );
        out.line(2, &format!("public {} {name};", field_type(&field.ty)));
    }
    out.blank();
    out.summary(
        2,
        "The fields from their wire values (a replica entity's <c>Fields</c>): quantized ones decoded; a missing or wrong-typed value reads as its type's default. Never throws.",
    );
    out.line(
        2,
        &format!("public static {type_name} Read({ZK}.FieldValue[] fields)"),
    );
    out.line(2, "{");
    out.line(3, &format!("{type_name} result = default({type_name});"));
    for (i, ((_, field), name)) in entity.fields.iter().zip(&members).enumerate() {
        match field.ty {
            FieldType::Quant { min, max, bits } => {
                out.line(
                    3,
                    &format!(
                        "long q{i} = {w}.FieldCode(fields, {i}, {}L);",
                        max_code(bits)
                    ),
                );
                out.line(
                    3,
                    &format!(
                        "if (q{i} >= 0) result.{name} = {ZK}.Quant.QuantDecode((uint)q{i}, {}, {}, {bits});",
                        float_lit(min),
                        float_lit(max)
                    ),
                );
            }
            FieldType::Centered { range, bits } => {
                out.line(
                    3,
                    &format!(
                        "long q{i} = {w}.FieldCode(fields, {i}, {}L);",
                        max_code(bits)
                    ),
                );
                out.line(
                    3,
                    &format!(
                        "if (q{i} >= 0) result.{name} = {ZK}.Quant.CenteredDecode((uint)q{i}, {}, {bits});",
                        float_lit(range)
                    ),
                );
            }
            FieldType::Angle { bits } => {
                out.line(
                    3,
                    &format!(
                        "long q{i} = {w}.FieldCode(fields, {i}, {}L);",
                        max_code(bits)
                    ),
                );
                out.line(
                    3,
                    &format!(
                        "if (q{i} >= 0) result.{name} = {ZK}.Quant.AngleDecode((uint)q{i}, {bits});"
                    ),
                );
            }
            FieldType::UInt => out.line(
                3,
                &format!("result.{name} = unchecked((uint){w}.FieldInt(fields, {i}));"),
            ),
            FieldType::SInt => out.line(
                3,
                &format!("result.{name} = unchecked((int){w}.FieldInt(fields, {i}));"),
            ),
            FieldType::Bool => out.line(3, &format!("result.{name} = {w}.FieldBool(fields, {i});")),
            FieldType::Str { .. } => {
                out.line(3, &format!("result.{name} = {w}.FieldStr(fields, {i});"))
            }
            FieldType::F32 => out.line(3, &format!("result.{name} = {w}.FieldF32(fields, {i});")),
        }
    }
    out.line(3, "return result;");
    out.line(2, "}");
    out.line(1, "}");
}

/// The arguments of `CheckField` after the field's name: type kind and parameters.
fn field_check_args(ty: &FieldType) -> String {
    let zero = float_lit(0.0);
    let (kind, min, max, range, bits, max_len) = match *ty {
        FieldType::Quant { min, max, bits } => (
            "Quant",
            float_lit(min),
            float_lit(max),
            zero.clone(),
            bits,
            0,
        ),
        FieldType::Centered { range, bits } => (
            "Centered",
            zero.clone(),
            zero.clone(),
            float_lit(range),
            bits,
            0,
        ),
        FieldType::Angle { bits } => ("Angle", zero.clone(), zero.clone(), zero.clone(), bits, 0),
        FieldType::UInt => ("UInt", zero.clone(), zero.clone(), zero.clone(), 0, 0),
        FieldType::SInt => ("SInt", zero.clone(), zero.clone(), zero.clone(), 0, 0),
        FieldType::Bool => ("Bool", zero.clone(), zero.clone(), zero.clone(), 0, 0),
        FieldType::Str { max_len } => ("Str", zero.clone(), zero.clone(), zero.clone(), 0, max_len),
        FieldType::F32 => ("F32", zero.clone(), zero.clone(), zero.clone(), 0, 0),
    };
    format!("{ZK}.FieldTypeKind.{kind}, {min}, {max}, {range}, {bits}, {max_len}")
}

fn kinds(out: &mut Out, model: &Model<'_>, types: &Types) {
    let name = &types.kinds;
    let w = &types.wire;
    let mut names = Names::new(&[name.as_str(), w.as_str(), "Bind"]);
    let members: Vec<String> = model
        .entities
        .iter()
        .map(|e| names.add(e.name.pascal()))
        .collect();
    out.summary(
        1,
        &format!(
            "The kind id of each entity kind of the zone kind {} in one zone's schema (<see cref=\"Bind\"/>).",
            code(model.kind)
        ),
    );
    out.line(1, &format!("public sealed class {name}"));
    out.line(1, "{");
    for (entity, member) in model.entities.iter().zip(&members) {
        out.summary(2, &format!("The kind id of {}.", code(&entity.def.name)));
        out.line(2, &format!("public readonly int {member};"));
    }
    if !members.is_empty() {
        out.blank();
    }
    let params: Vec<String> = (0..members.len()).map(|i| format!("int k{i}")).collect();
    out.line(2, &format!("private {name}({})", params.join(", ")));
    out.line(2, "{");
    for (i, member) in members.iter().enumerate() {
        out.line(3, &format!("{member} = k{i};"));
    }
    out.line(2, "}");
    out.blank();
    out.summary(
        2,
        "Finds each entity kind in <paramref name=\"schema\"/> by name and checks its fields are exactly the ones this code was generated for (count, names, types and parameters, bit for bit); other kinds of the schema are ignored. Throws <c>System.InvalidOperationException</c> at the first difference.",
    );
    out.line(2, &format!("public static {name} Bind({ZK}.Schema schema)"));
    out.line(2, "{");
    out.line(
        3,
        "if (schema == null) throw new global::System.ArgumentNullException(\"schema\");",
    );
    if !model.entities.is_empty() {
        out.line(3, &format!("{ZK}.KindDef kind;"));
    }
    for (i, entity) in model.entities.iter().enumerate() {
        out.line(
            3,
            &format!(
                "int k{i} = {w}.FindKind(schema, {}, out kind);",
                string_lit(&entity.def.name)
            ),
        );
        out.line(
            3,
            &format!("{w}.CheckFieldCount(kind, {});", entity.fields.len()),
        );
        for (j, (_, field)) in entity.fields.iter().enumerate() {
            out.line(
                3,
                &format!(
                    "{w}.CheckField(kind, {j}, {}, {});",
                    string_lit(&field.name),
                    field_check_args(&field.ty)
                ),
            );
        }
    }
    let args: Vec<String> = (0..members.len()).map(|i| format!("k{i}")).collect();
    out.line(3, &format!("return new {name}({});", args.join(", ")));
    out.line(2, "}");
    out.line(1, "}");
}

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

fn input_struct(out: &mut Out, input: &Item<'_, InputDef>, type_name: &str, types: &Types) {
    let w = &types.wire;
    let mut reserved = vec![type_name, w.as_str(), "Encode"];
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
    // Variable-length values are turned into bytes first, to size the payload.
    let mut fixed = usize::from(input.def.tag.is_some());
    let mut var_parts: Vec<String> = Vec::new();
    for (i, ((_, value), member)) in input.values.iter().zip(&members).enumerate() {
        let what = string_lit(&format!("{}.{}", input.def.name, value.name));
        match value.ty {
            ValueType::Bytes | ValueType::RestBytes => {
                out.line(3, &format!("byte[] v{i} = {member} ?? {w}.NoBytes;"));
                var_parts.push(format!("v{i}.Length"));
            }
            ValueType::Str | ValueType::RestStr => {
                out.line(
                    3,
                    &format!("byte[] v{i} = {w}.Utf8Bytes({member}, {what});"),
                );
                var_parts.push(format!("v{i}.Length"));
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
    out.line(3, &format!("byte[] buf = new byte[{size}];"));
    out.line(3, "int at = 0;");
    if input.def.tag.is_some() {
        out.line(3, &format!("{w}.PutU8(buf, ref at, Tag);"));
    }
    let mut k = 0;
    for (i, ((_, value), member)) in input.values.iter().zip(&members).enumerate() {
        let put = match value.ty {
            ValueType::U8 => format!("{w}.PutU8(buf, ref at, {member});"),
            ValueType::I8 => format!("{w}.PutU8(buf, ref at, unchecked((byte){member}));"),
            ValueType::U16 => format!("{w}.PutU16(buf, ref at, {member});"),
            ValueType::I16 => format!("{w}.PutU16(buf, ref at, unchecked((ushort){member}));"),
            ValueType::U32 => format!("{w}.PutU32(buf, ref at, {member});"),
            ValueType::I32 => format!("{w}.PutU32(buf, ref at, unchecked((uint){member}));"),
            ValueType::U64 => format!("{w}.PutU64(buf, ref at, {member});"),
            ValueType::I64 => format!("{w}.PutU64(buf, ref at, unchecked((ulong){member}));"),
            ValueType::F32 => format!("{w}.PutF32(buf, ref at, {member});"),
            ValueType::Bool => format!("{w}.PutBool(buf, ref at, {member});"),
            ValueType::Bytes | ValueType::Str => format!("{w}.PutBytes(buf, ref at, v{i});"),
            ValueType::RestBytes | ValueType::RestStr => {
                format!("{w}.PutRaw(buf, ref at, v{i});")
            }
        };
        if value.optional {
            out.line(3, &format!("if (optional > {k}) {put}"));
            k += 1;
        } else {
            out.line(3, &put);
        }
    }
    out.line(3, "return buf;");
    out.line(2, "}");
    out.line(1, "}");
}

fn event_interface(out: &mut Out, model: &Model<'_>, types: &Types) {
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

fn event_struct(out: &mut Out, event: &Item<'_, EventDef>, type_name: &str, types: &Types) {
    let w = &types.wire;
    let iface = &types.event_interface;
    let members = value_members(
        &event.values,
        &[type_name, w.as_str(), iface.as_str(), "Topic", "Decode"],
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
        "if (payload == null) throw new global::System.ArgumentNullException(\"payload\");",
    );
    out.line(3, &format!("{type_name} result = default({type_name});"));
    out.line(3, "int at = 0;");
    for ((_, value), member) in event.values.iter().zip(&members) {
        let what = string_lit(&format!("{}.{}", event.def.name, value.name));
        let read = match value.ty {
            ValueType::U8 => format!("{w}.U8(payload, ref at, {what})"),
            ValueType::I8 => format!("unchecked((sbyte){w}.U8(payload, ref at, {what}))"),
            ValueType::U16 => format!("{w}.U16(payload, ref at, {what})"),
            ValueType::I16 => format!("unchecked((short){w}.U16(payload, ref at, {what}))"),
            ValueType::U32 => format!("{w}.U32(payload, ref at, {what})"),
            ValueType::I32 => format!("unchecked((int){w}.U32(payload, ref at, {what}))"),
            ValueType::U64 => format!("{w}.U64(payload, ref at, {what})"),
            ValueType::I64 => format!("unchecked((long){w}.U64(payload, ref at, {what}))"),
            ValueType::F32 => format!("{w}.F32(payload, ref at, {what})"),
            ValueType::Bool => format!("{w}.Bool(payload, ref at, {what})"),
            ValueType::Bytes => format!("{w}.Bytes(payload, ref at, {what})"),
            ValueType::Str => format!("{w}.Str(payload, ref at, {what})"),
            ValueType::RestBytes => format!("{w}.RestBytes(payload, ref at)"),
            ValueType::RestStr => format!("{w}.RestStr(payload, ref at, {what})"),
        };
        if value.optional {
            out.line(
                3,
                &format!("if (at != payload.Length) result.{member} = {read};"),
            );
        } else {
            out.line(3, &format!("result.{member} = {read};"));
        }
    }
    out.line(
        3,
        &format!("{w}.End(payload, at, {});", string_lit(&event.def.name)),
    );
    out.line(3, "return result;");
    out.line(2, "}");
    out.line(1, "}");
}

fn dispatcher(out: &mut Out, model: &Model<'_>, types: &Types) {
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

/// The helpers every generated member calls: little-endian payload writes and strict reads,
/// tolerant field reads, and the schema checks of `Bind`.
const WIRE: &str = r#"/// <summary>Helpers of the code above: payload bytes, field values and schema checks.</summary>
internal static class @WIRE@
{
    private const string Regenerate = @REGENERATE@;
    private static readonly global::System.Text.UTF8Encoding Utf8 = new global::System.Text.UTF8Encoding(false, true);
    internal static readonly byte[] NoBytes = new byte[0];

    internal static byte[] Utf8Bytes(string s, string what)
    {
        if (string.IsNullOrEmpty(s)) return NoBytes;
        try
        {
            return Utf8.GetBytes(s);
        }
        catch (global::System.Text.EncoderFallbackException)
        {
            throw new global::Zonekeep.EncodeException(global::Zonekeep.EncodeErrorKind.Invalid, what + " has a lone surrogate");
        }
    }

    internal static void PutU8(byte[] b, ref int at, byte v)
    {
        b[at++] = v;
    }

    internal static void PutBool(byte[] b, ref int at, bool v)
    {
        b[at++] = v ? (byte)1 : (byte)0;
    }

    internal static void PutU16(byte[] b, ref int at, ushort v)
    {
        unchecked
        {
            b[at++] = (byte)v;
            b[at++] = (byte)(v >> 8);
        }
    }

    internal static void PutU32(byte[] b, ref int at, uint v)
    {
        unchecked
        {
            b[at++] = (byte)v;
            b[at++] = (byte)(v >> 8);
            b[at++] = (byte)(v >> 16);
            b[at++] = (byte)(v >> 24);
        }
    }

    internal static void PutU64(byte[] b, ref int at, ulong v)
    {
        unchecked
        {
            PutU32(b, ref at, (uint)v);
            PutU32(b, ref at, (uint)(v >> 32));
        }
    }

    internal static void PutF32(byte[] b, ref int at, float v)
    {
        PutU32(b, ref at, unchecked((uint)global::Zonekeep.Bits.SingleToInt32Bits(v)));
    }

    internal static void PutBytes(byte[] b, ref int at, byte[] v)
    {
        PutU32(b, ref at, (uint)v.Length);
        PutRaw(b, ref at, v);
    }

    internal static void PutRaw(byte[] b, ref int at, byte[] v)
    {
        global::System.Buffer.BlockCopy(v, 0, b, at, v.Length);
        at += v.Length;
    }

    private static void Need(byte[] p, int at, int n, string what)
    {
        if (p.Length - at < n) throw new global::Zonekeep.ProtocolException(global::Zonekeep.DecodeErrorKind.Truncated, what + " at offset " + at);
    }

    internal static byte U8(byte[] p, ref int at, string what)
    {
        Need(p, at, 1, what);
        return p[at++];
    }

    internal static ushort U16(byte[] p, ref int at, string what)
    {
        Need(p, at, 2, what);
        ushort v = (ushort)(p[at] | p[at + 1] << 8);
        at += 2;
        return v;
    }

    internal static uint U32(byte[] p, ref int at, string what)
    {
        Need(p, at, 4, what);
        uint v = p[at] | (uint)p[at + 1] << 8 | (uint)p[at + 2] << 16 | (uint)p[at + 3] << 24;
        at += 4;
        return v;
    }

    internal static ulong U64(byte[] p, ref int at, string what)
    {
        Need(p, at, 8, what);
        ulong low = U32(p, ref at, what);
        ulong high = U32(p, ref at, what);
        return low | high << 32;
    }

    internal static float F32(byte[] p, ref int at, string what)
    {
        return global::Zonekeep.Bits.Int32BitsToSingle(unchecked((int)U32(p, ref at, what)));
    }

    internal static bool Bool(byte[] p, ref int at, string what)
    {
        byte b = U8(p, ref at, what);
        if (b > 1) throw new global::Zonekeep.ProtocolException(global::Zonekeep.DecodeErrorKind.Invalid, what + ": bool byte " + b);
        return b == 1;
    }

    private static int Length(byte[] p, ref int at, string what)
    {
        uint n = U32(p, ref at, what);
        if (n > (uint)(p.Length - at)) throw new global::Zonekeep.ProtocolException(global::Zonekeep.DecodeErrorKind.Truncated, what + ": length " + n + " at offset " + (at - 4));
        return (int)n;
    }

    private static byte[] Copy(byte[] p, ref int at, int n)
    {
        if (n == 0) return NoBytes;
        byte[] v = new byte[n];
        global::System.Buffer.BlockCopy(p, at, v, 0, n);
        at += n;
        return v;
    }

    private static string Text(byte[] p, ref int at, int n, string what)
    {
        if (n == 0) return string.Empty;
        string s;
        try
        {
            s = Utf8.GetString(p, at, n);
        }
        catch (global::System.Text.DecoderFallbackException)
        {
            throw new global::Zonekeep.ProtocolException(global::Zonekeep.DecodeErrorKind.InvalidUtf8, what + " is not UTF-8");
        }
        at += n;
        return s;
    }

    internal static byte[] Bytes(byte[] p, ref int at, string what)
    {
        int n = Length(p, ref at, what);
        return Copy(p, ref at, n);
    }

    internal static string Str(byte[] p, ref int at, string what)
    {
        int n = Length(p, ref at, what);
        return Text(p, ref at, n, what);
    }

    internal static byte[] RestBytes(byte[] p, ref int at)
    {
        return Copy(p, ref at, p.Length - at);
    }

    internal static string RestStr(byte[] p, ref int at, string what)
    {
        return Text(p, ref at, p.Length - at, what);
    }

    internal static void End(byte[] p, int at, string what)
    {
        if (at != p.Length) throw new global::Zonekeep.ProtocolException(global::Zonekeep.DecodeErrorKind.TrailingBytes, what + ": " + (p.Length - at) + " trailing bytes");
    }

    internal static long FieldCode(global::Zonekeep.FieldValue[] fields, int i, long max)
    {
        if (fields == null || i >= fields.Length || fields[i].Kind != global::Zonekeep.FieldValueKind.Int) return -1;
        long q = fields[i].AsLong;
        return q >= 0 && q <= max ? q : -1;
    }

    internal static long FieldInt(global::Zonekeep.FieldValue[] fields, int i)
    {
        if (fields == null || i >= fields.Length || fields[i].Kind != global::Zonekeep.FieldValueKind.Int) return 0;
        return fields[i].AsLong;
    }

    internal static bool FieldBool(global::Zonekeep.FieldValue[] fields, int i)
    {
        return fields != null && i < fields.Length && fields[i].AsBool;
    }

    internal static string FieldStr(global::Zonekeep.FieldValue[] fields, int i)
    {
        if (fields == null || i >= fields.Length || fields[i].Kind != global::Zonekeep.FieldValueKind.Str) return string.Empty;
        return fields[i].AsString ?? string.Empty;
    }

    internal static float FieldF32(global::Zonekeep.FieldValue[] fields, int i)
    {
        if (fields == null || i >= fields.Length || fields[i].Kind != global::Zonekeep.FieldValueKind.F32) return 0f;
        return fields[i].AsFloat;
    }

    private static global::System.InvalidOperationException Mismatch(string what)
    {
        return new global::System.InvalidOperationException(what + Regenerate);
    }

    internal static int FindKind(global::Zonekeep.Schema schema, string name, out global::Zonekeep.KindDef kind)
    {
        int id = schema.Kinds == null ? -1 : schema.KindIndex(name);
        if (id < 0 || schema.Kinds[id] == null) throw Mismatch("the zone's schema has no kind \"" + name + "\"");
        kind = schema.Kinds[id];
        return id;
    }

    internal static void CheckFieldCount(global::Zonekeep.KindDef kind, int count)
    {
        int n = kind.Fields == null ? 0 : kind.Fields.Count;
        if (n != count) throw Mismatch("the kind \"" + kind.Name + "\" has " + n + " fields in the zone's schema, the code expects " + count);
    }

    internal static void CheckField(global::Zonekeep.KindDef kind, int index, string name, global::Zonekeep.FieldTypeKind type, float min, float max, float range, int bits, int maxLen)
    {
        global::Zonekeep.FieldDef field = kind.Fields[index];
        if (field == null || field.Name != name)
            throw Mismatch("field " + index + " of the kind \"" + kind.Name + "\" is " + (field == null ? "missing" : "\"" + field.Name + "\"") + " in the zone's schema, the code expects \"" + name + "\"");
        global::Zonekeep.FieldType t = field.Type;
        bool same = t != null && t.Kind == type;
        if (same)
        {
            switch (type)
            {
                case global::Zonekeep.FieldTypeKind.Quant: same = SameBits(t.Min, min) && SameBits(t.Max, max) && t.Bits == bits; break;
                case global::Zonekeep.FieldTypeKind.Centered: same = SameBits(t.Range, range) && t.Bits == bits; break;
                case global::Zonekeep.FieldTypeKind.Angle: same = t.Bits == bits; break;
                case global::Zonekeep.FieldTypeKind.Str: same = t.MaxLen == maxLen; break;
            }
        }
        if (!same)
        {
            string has = t == null ? "untyped" : Describe(t.Kind, t.Min, t.Max, t.Range, t.Bits, t.MaxLen);
            throw Mismatch("the field \"" + name + "\" of the kind \"" + kind.Name + "\" is " + has + " in the zone's schema, the code expects " + Describe(type, min, max, range, bits, maxLen));
        }
    }

    private static bool SameBits(float a, float b)
    {
        return global::Zonekeep.Bits.SingleToInt32Bits(a) == global::Zonekeep.Bits.SingleToInt32Bits(b);
    }

    private static string Describe(global::Zonekeep.FieldTypeKind type, float min, float max, float range, int bits, int maxLen)
    {
        switch (type)
        {
            case global::Zonekeep.FieldTypeKind.Quant: return "quant(" + Number(min) + ", " + Number(max) + ", " + bits + " bits)";
            case global::Zonekeep.FieldTypeKind.Centered: return "centered(" + Number(range) + ", " + bits + " bits)";
            case global::Zonekeep.FieldTypeKind.Angle: return "angle(" + bits + " bits)";
            case global::Zonekeep.FieldTypeKind.UInt: return "uint";
            case global::Zonekeep.FieldTypeKind.SInt: return "sint";
            case global::Zonekeep.FieldTypeKind.Bool: return "bool";
            case global::Zonekeep.FieldTypeKind.Str: return "str(" + maxLen + ")";
            case global::Zonekeep.FieldTypeKind.F32: return "f32";
            default: return "type " + (int)type;
        }
    }

    private static string Number(float v)
    {
        if (global::Zonekeep.Bits.SingleToInt32Bits(v) == int.MinValue) return "-0";
        return v.ToString("R", global::System.Globalization.CultureInfo.InvariantCulture);
    }
}"#;

fn wire(out: &mut Out, types: &Types, command: &str) {
    let text = WIRE.replace("@WIRE@", &types.wire).replace(
        "@REGENERATE@",
        &string_lit(&format!("; regenerate with `{command}`")),
    );
    for line in text.lines() {
        out.line(1, line);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn float_literals_give_back_the_exact_f32() {
        for v in [
            -8.0f32,
            0.01,
            0.1,
            1.0e-7,
            3.402_823_5e38,
            f32::MIN_POSITIVE,
            1.0e-45,
            16_777_217.0,
            -0.0,
        ] {
            let lit = float_lit(v);
            let back: f32 = lit.trim_end_matches('f').parse().unwrap();
            assert_eq!(back.to_bits(), v.to_bits(), "{lit}");
        }
        assert_eq!(float_lit(-8.0), "-8.0f");
        assert_eq!(float_lit(0.01), "0.01f");
    }

    #[test]
    fn literals_and_comments_stay_on_their_line() {
        assert_eq!(string_lit("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(string_lit("a\u{2028}b\nc"), "\"a\\u2028b\\u000ac\"");
        assert_eq!(
            xml("a < b && c > d\u{2029}e"),
            "a &lt; b &amp;&amp; c &gt; d e"
        );
    }

    #[test]
    fn members_that_would_clash_get_a_trailing_underscore() {
        let mut names = Names::new(&["Topic", "HitEvent"]);
        assert_eq!(names.add("Topic".into()), "Topic_");
        assert_eq!(names.add("Topic_".into()), "Topic__");
        assert_eq!(names.add("Damage".into()), "Damage");
        assert_eq!(names.add("HitEvent".into()), "HitEvent_");
    }

    #[test]
    fn a_namespace_is_made_of_identifiers() {
        assert_eq!(namespace("Zonekeep.Generated"), "Zonekeep.Generated");
        assert_eq!(namespace("My Game.net-code"), "MyGame.NetCode");
        assert_eq!(namespace("Game.event"), "Game.@event");
    }
}
