//! Entity kinds: a record per kind read from wire-form field values, and `{Kind}Kinds::bind`,
//! which finds each kind in a zone's schema with `zonekeep_client::payload::bind_kind`.

use zonekeep_protocol::schema::FieldType;

use super::text::{f32_lit, ident, Out, MAX_WIDTH};
use super::{record, RECORD_DERIVE};
use crate::model::{Entity, Model};
use crate::names::{doc_line, string_literal};
use crate::Options;

/// Rustfmt's `fn_call_width`, which tuples follow too.
const TUPLE_WIDTH: usize = 60;

fn field_rust_type(ty: &FieldType) -> &'static str {
    match ty {
        FieldType::Quant { .. } | FieldType::Centered { .. } | FieldType::Angle { .. } => "f32",
        FieldType::UInt => "u32",
        FieldType::SInt => "i32",
        FieldType::Bool => "bool",
        FieldType::Str { .. } => "String",
        FieldType::F32 => "f32",
    }
}

fn field_doc(name: &str, ty: &FieldType) -> String {
    let what = match *ty {
        FieldType::Quant { min, max, bits } => {
            format!("a quant of {bits} bits in [{min:?}, {max:?}], decoded")
        }
        FieldType::Centered { range, bits } => {
            format!("a centered quant of {bits} bits in [-{range:?}, {range:?}), decoded")
        }
        FieldType::Angle { bits } => format!("an angle of {bits} bits in radians, decoded"),
        FieldType::UInt => "a uint".to_owned(),
        FieldType::SInt => "a sint".to_owned(),
        FieldType::Bool => "a bool".to_owned(),
        FieldType::Str { max_len } => format!("a str of at most {max_len} bytes"),
        FieldType::F32 => "an f32".to_owned(),
    };
    format!("The field `{name}`: {what}.")
}

/// The `FieldType` expression of `ty`, one string a line (quant and centered span several, as
/// rustfmt lays out struct literals whose fields take more than 18 characters).
fn field_type_lines(ty: &FieldType) -> Vec<String> {
    match *ty {
        FieldType::Quant { min, max, bits } => vec![
            "FieldType::Quant {".to_owned(),
            format!("    min: {},", f32_lit(min)),
            format!("    max: {},", f32_lit(max)),
            format!("    bits: {bits},"),
            "}".to_owned(),
        ],
        FieldType::Centered { range, bits } => vec![
            "FieldType::Centered {".to_owned(),
            format!("    range: {},", f32_lit(range)),
            format!("    bits: {bits},"),
            "}".to_owned(),
        ],
        FieldType::Angle { bits } => vec![format!("FieldType::Angle {{ bits: {bits} }}")],
        FieldType::UInt => vec!["FieldType::UInt".to_owned()],
        FieldType::SInt => vec!["FieldType::SInt".to_owned()],
        FieldType::Bool => vec!["FieldType::Bool".to_owned()],
        FieldType::Str { max_len } => vec![format!("FieldType::Str {{ max_len: {max_len} }}")],
        FieldType::F32 => vec!["FieldType::F32".to_owned()],
    }
}

/// The `match` arm reading a field's wire value, and the value when it is missing.
fn field_read(ty: &FieldType) -> (String, &'static str) {
    match *ty {
        FieldType::Quant { min, max, bits } => (
            format!(
                "Some(FieldValue::Q(q)) => quant_decode(*q, {}, {}, {bits}),",
                f32_lit(min),
                f32_lit(max)
            ),
            "0.0",
        ),
        FieldType::Centered { range, bits } => (
            format!(
                "Some(FieldValue::Q(q)) => centered_decode(*q, {}, {bits}),",
                f32_lit(range)
            ),
            "0.0",
        ),
        FieldType::Angle { bits } => (
            format!("Some(FieldValue::Q(q)) => angle_decode(*q, {bits}),"),
            "0.0",
        ),
        FieldType::UInt => ("Some(FieldValue::U(v)) => *v,".to_owned(), "0"),
        FieldType::SInt => ("Some(FieldValue::I(v)) => *v,".to_owned(), "0"),
        FieldType::Bool => ("Some(FieldValue::Bool(v)) => *v,".to_owned(), "false"),
        FieldType::Str { .. } => (
            "Some(FieldValue::Str(v)) => v.clone(),".to_owned(),
            "String::new()",
        ),
        FieldType::F32 => ("Some(FieldValue::F32(v)) => *v,".to_owned(), "0.0"),
    }
}

/// The record of an entity kind and its `impl`.
pub(super) fn entity(out: &mut Out, e: &Entity<'_>) {
    let type_name = format!("{}Entity", e.name.pascal());
    out.blank();
    out.doc(
        0,
        &format!(
            "An entity of the kind `{}`, its field values decoded.",
            e.def.name
        ),
    );
    record(out, RECORD_DERIVE, &type_name, e.fields.is_empty(), |out| {
        for (name, f) in &e.fields {
            out.doc(1, &field_doc(&f.name, &f.ty));
            out.line(
                1,
                &format!("pub {}: {},", ident(name), field_rust_type(&f.ty)),
            );
        }
    });
    out.blank();
    out.line(0, &format!("impl {type_name} {{"));
    out.doc(1, "The kind's name in the schema.");
    out.line(
        1,
        &format!(
            "pub const KIND_NAME: &'static str = {};",
            string_literal(&e.def.name)
        ),
    );
    for (i, (name, f)) in e.fields.iter().enumerate() {
        out.blank();
        out.doc(
            1,
            &format!("The index of `{}` in the kind's field values.", f.name),
        );
        out.line(
            1,
            &format!("pub const FIELD_{}: usize = {i};", name.screaming()),
        );
    }
    out.blank();
    out.doc(1, "Each field's name and type, in wire order.");
    wire_fields(out, e);
    out.blank();
    read(out, e);
    out.blank();
    out.doc(
        1,
        "This kind's id in `schema`, found by name, once its fields are checked.",
    );
    out.line(
        1,
        "fn kind_id(schema: &Schema, fix: &'static str) -> Result<u32, SchemaMismatch> {",
    );
    out.line(
        2,
        "bind_kind(schema, Self::KIND_NAME, &Self::WIRE_FIELDS, fix)",
    );
    out.line(1, "}");
    out.line(0, "}");
}

/// `const WIRE_FIELDS: [(&'static str, FieldType); N]`, the argument of `bind_kind`.
fn wire_fields(out: &mut Out, e: &Entity<'_>) {
    let head = format!(
        "const WIRE_FIELDS: [(&'static str, FieldType); {}] = [",
        e.fields.len()
    );
    match e.fields.as_slice() {
        [] => out.line(1, &format!("{head}];")),
        [(_, f)] => {
            let tuple = wire_field_line(&f.name, &f.ty);
            let one = tuple.as_ref().map(|t| format!("{head}{t}];"));
            // Too long for the line, the array goes after the `=` when it fits there.
            let after = tuple.as_ref().map(|t| format!("[{t}];"));
            if let Some(one) = one.filter(|l| 4 + l.len() <= MAX_WIDTH) {
                out.line(1, &one);
            } else if let Some(after) = after.filter(|l| 8 + l.len() <= MAX_WIDTH) {
                out.line(1, head.trim_end_matches(" ["));
                out.line(2, &after);
            } else {
                // Rustfmt lets the one tuple overflow into the brackets.
                out.line(1, &format!("{head}("));
                wire_field_members(out, 2, &f.name, &f.ty);
                out.line(1, ")];");
            }
        }
        fields => {
            out.line(1, &head);
            for (_, f) in fields {
                match wire_field_line(&f.name, &f.ty).filter(|l| 8 + l.len() < MAX_WIDTH) {
                    Some(one) => out.line(2, &format!("{one},")),
                    None => {
                        out.line(2, "(");
                        wire_field_members(out, 3, &f.name, &f.ty);
                        out.line(2, "),");
                    }
                }
            }
            out.line(1, "];");
        }
    }
}

/// `("name", FieldType::…)` on one line, when rustfmt keeps it on one.
fn wire_field_line(name: &str, ty: &FieldType) -> Option<String> {
    match field_type_lines(ty).as_slice() {
        [ty] => {
            let items = format!("{}, {ty}", string_literal(name));
            (items.len() <= TUPLE_WIDTH).then(|| format!("({items})"))
        }
        _ => None,
    }
}

/// The name and type of a tuple laid out one a line.
fn wire_field_members(out: &mut Out, indent: usize, name: &str, ty: &FieldType) {
    out.line(indent, &format!("{},", string_literal(name)));
    let lines = field_type_lines(ty);
    let last = lines.len().saturating_sub(1);
    for (i, l) in lines.iter().enumerate() {
        let suffix = if i == last { "," } else { "" };
        out.line(indent, &format!("{l}{suffix}"));
    }
}

/// `read(fields)`: each field from its wire value, a default when missing or mismatched.
fn read(out: &mut Out, e: &Entity<'_>) {
    out.docs(
        1,
        &[
            "Reads an entity from its wire-form field values; a missing or mismatched value reads",
            "as its type's default.",
        ],
    );
    if e.fields.is_empty() {
        out.line(1, "pub fn read(_fields: &[FieldValue]) -> Self {");
        out.line(2, "Self {}");
    } else {
        out.line(1, "pub fn read(fields: &[FieldValue]) -> Self {");
        out.line(2, "Self {");
        for (i, (name, f)) in e.fields.iter().enumerate() {
            let (arm, default) = field_read(&f.ty);
            // Clippy wants `first()` for `get(0)`.
            let get = if i == 0 {
                "first()".to_owned()
            } else {
                format!("get({i})")
            };
            out.line(3, &format!("{}: match fields.{get} {{", ident(name)));
            out.line(4, &arm);
            out.line(4, &format!("_ => {default},"));
            out.line(3, "},");
        }
        out.line(2, "}");
    }
    out.line(1, "}");
}

/// `{Kind}Kinds`: the id of each entity kind, and `bind`.
pub(super) fn kinds(out: &mut Out, model: &Model<'_>, options: &Options, kind_type: &str) {
    let type_name = format!("{kind_type}Kinds");
    out.blank();
    out.doc(
        0,
        &format!(
            "The kind id of each entity kind of `{}` in a zone's schema: see [`{type_name}::bind`].",
            model.kind
        ),
    );
    record(
        out,
        "#[derive(Debug, Clone, Copy, PartialEq, Eq)]",
        &type_name,
        model.entities.is_empty(),
        |out| {
            for e in &model.entities {
                out.doc(1, &format!("The id of the kind `{}`.", e.def.name));
                out.line(1, &format!("pub {}: u32,", ident(&e.name)));
            }
        },
    );
    out.blank();
    out.line(0, &format!("impl {type_name} {{"));
    out.docs(
        1,
        &[
            "Finds each kind this code knows in `schema` by name and checks that its fields are",
            "exactly the ones this code was generated from; kinds it does not know are ignored.",
        ],
    );
    if model.entities.is_empty() {
        out.line(
            1,
            "pub fn bind(_schema: &Schema) -> Result<Self, SchemaMismatch> {",
        );
        out.line(2, "Ok(Self {})");
    } else {
        out.line(
            1,
            "pub fn bind(schema: &Schema) -> Result<Self, SchemaMismatch> {",
        );
        let fix = string_literal(&format!("regenerate with `{}`", doc_line(&options.command)));
        out.line(2, &format!("let fix = {fix};"));
        out.line(2, "Ok(Self {");
        for e in &model.entities {
            out.line(
                3,
                &format!(
                    "{}: {}Entity::kind_id(schema, fix)?,",
                    ident(&e.name),
                    e.name.pascal()
                ),
            );
        }
        out.line(2, "})");
    }
    out.line(1, "}");
    out.line(0, "}");
}
