//! Rust for `zonekeep-client`: a module the user's crate holds as a file (`mod sample;`) or
//! `include!`s, so its header is a `//` comment and it carries no inner attributes. It uses only
//! `zonekeep_client::protocol` and `std`, and is written the way rustfmt lays it out, so the
//! committed golden file passes `cargo fmt --check`.

use zonekeep_protocol::contract::{ValueDef, ValueType};
use zonekeep_protocol::schema::FieldType;

use crate::model::{Entity, Model};
use crate::names::{doc_line, string_literal, Name};
use crate::Options;

/// Rustfmt's `max_width`.
const MAX_WIDTH: usize = 100;

/// Strict and reserved keywords that can be raw identifiers (`r#type`).
const KEYWORDS: &[&str] = &[
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "do", "dyn",
    "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl", "in", "let",
    "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref", "return",
    "static", "struct", "trait", "true", "try", "type", "typeof", "unsafe", "unsized", "use",
    "virtual", "where", "while", "yield",
];

/// The text being written, line by line.
struct Out {
    text: String,
}

impl Out {
    fn line(&mut self, indent: usize, text: &str) {
        if !text.is_empty() {
            for _ in 0..indent {
                self.text.push_str("    ");
            }
            self.text.push_str(text);
        }
        self.text.push('\n');
    }

    fn blank(&mut self) {
        self.text.push('\n');
    }

    fn doc(&mut self, indent: usize, text: &str) {
        let text = doc_line(text);
        if text.is_empty() {
            self.line(indent, "///");
        } else {
            self.line(indent, &format!("/// {text}"));
        }
    }

    /// Fixed doc lines.
    fn docs(&mut self, indent: usize, lines: &[&str]) {
        for l in lines {
            self.line(indent, &format!("/// {l}"));
        }
    }

    /// Lines of verbatim code (already laid out at indent 0).
    fn code(&mut self, code: &str) {
        for l in code.lines() {
            self.line(0, l);
        }
    }

    /// A match arm whose body calls `callee` with `arg`: its argument on a line of its own when
    /// the arm does not fit on one, the body in a block when even that does not fit.
    fn arm(&mut self, indent: usize, pattern: &str, callee: &str, arg: &str) {
        let one = format!("{pattern} => {callee}({arg}),");
        let open = format!("{pattern} => {callee}(");
        if indent * 4 + one.len() <= MAX_WIDTH {
            self.line(indent, &one);
        } else if indent * 4 + open.len() <= MAX_WIDTH {
            self.line(indent, &open);
            self.line(indent + 1, &format!("{arg},"));
            self.line(indent, "),");
        } else {
            self.line(indent, &format!("{pattern} => {{"));
            self.line(indent + 1, &format!("{callee}({arg})"));
            self.line(indent, "}");
        }
    }

    /// A call statement with one argument, the argument on its own line when it does not fit. An
    /// argument `self.field.method()` (maybe borrowed) longer than rustfmt's `chain_width` of 60
    /// is broken as rustfmt breaks it.
    fn call(&mut self, indent: usize, callee: &str, arg: &str) {
        let one = format!("{callee}({arg});");
        let parts: Vec<&str> = arg.split('.').collect();
        let long_chain = arg.trim_start_matches('&').len() > 60;
        match parts.as_slice() {
            ["&self", field, method] if long_chain => {
                self.line(indent, &format!("{callee}("));
                self.line(indent + 1, "&self");
                self.line(indent + 2, &format!(".{field}"));
                self.line(indent + 2, &format!(".{method},"));
                self.line(indent, ");");
            }
            ["self", field, method] if long_chain => {
                self.line(indent, &format!("{callee}("));
                self.line(indent + 1, &format!("self.{field}"));
                self.line(indent + 2, &format!(".{method},"));
                self.line(indent, ");");
            }
            _ if indent * 4 + one.len() <= MAX_WIDTH => self.line(indent, &one),
            _ => {
                self.line(indent, &format!("{callee}("));
                self.line(indent + 1, &format!("{arg},"));
                self.line(indent, ");");
            }
        }
    }
}

/// A field or value identifier: snake case, keywords escaped.
fn ident(name: &Name) -> String {
    let s = name.snake();
    match s.as_str() {
        "self" | "super" | "crate" | "Self" => format!("{s}_"),
        k if KEYWORDS.contains(&k) => format!("r#{s}"),
        _ => s,
    }
}

/// An `f32` literal that reproduces `v` exactly.
fn f32_lit(v: f32) -> String {
    format!("{v:?}_f32")
}

/// A doc text, or `fallback` when it is empty.
fn doc_or(doc: &str, fallback: String) -> String {
    if doc.trim().is_empty() {
        fallback
    } else {
        doc.to_owned()
    }
}

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

/// A struct declaration with its fields written by `fields` (`{}` when there are none).
fn record(out: &mut Out, derive: &str, name: &str, empty: bool, fields: impl FnOnce(&mut Out)) {
    out.line(0, derive);
    if empty {
        out.line(0, &format!("pub struct {name} {{}}"));
    } else {
        out.line(0, &format!("pub struct {name} {{"));
        fields(out);
        out.line(0, "}");
    }
}

const RECORD_DERIVE: &str = "#[derive(Debug, Clone, Default, PartialEq)]";

/// Writes the Rust module of `model`.
pub(crate) fn emit(model: &Model<'_>, options: &Options) -> String {
    let mut out = Out {
        text: String::new(),
    };
    let kind_type = model.kind_name.pascal();
    header(&mut out, model, options);
    consts(&mut out, model);
    schema_mismatch(&mut out);
    for e in &model.entities {
        entity(&mut out, e);
    }
    kinds(&mut out, model, &kind_type);
    bind_helpers(&mut out, model, options);
    for input in &model.inputs {
        input_record(&mut out, input);
    }
    put_len_helper(&mut out, model);
    events(&mut out, model, &kind_type);
    let mut text = out.text.trim_end().to_owned();
    text.push('\n');
    text
}

fn header(out: &mut Out, model: &Model<'_>, options: &Options) {
    let command = doc_line(&options.command);
    out.line(
        0,
        &format!(
            "// Generated by `{command}` from the zone kind `{}`.",
            model.kind
        ),
    );
    out.line(0, "// Do not edit: regenerate it.");
    out.blank();
    let mut quant: Vec<&str> = Vec::new();
    let all_types = || model.entities.iter().flat_map(|e| e.fields.iter());
    if all_types().any(|(_, f)| matches!(f.ty, FieldType::Angle { .. })) {
        quant.push("angle_decode");
    }
    if all_types().any(|(_, f)| matches!(f.ty, FieldType::Centered { .. })) {
        quant.push("centered_decode");
    }
    if all_types().any(|(_, f)| matches!(f.ty, FieldType::Quant { .. })) {
        quant.push("quant_decode");
    }
    match quant.as_slice() {
        [] => {}
        [one] => out.line(0, &format!("use zonekeep_client::protocol::quant::{one};")),
        many => out.line(
            0,
            &format!(
                "use zonekeep_client::protocol::quant::{{{}}};",
                many.join(", ")
            ),
        ),
    }
    if model.entities.is_empty() {
        out.line(0, "use zonekeep_client::protocol::schema::Schema;");
    } else {
        out.line(
            0,
            "use zonekeep_client::protocol::schema::{FieldType, FieldValue, Schema};",
        );
    }
}

fn consts(out: &mut Out, model: &Model<'_>) {
    for (name, c) in &model.consts {
        out.blank();
        out.doc(0, &doc_or(&c.doc, format!("The constant `{}`.", c.name)));
        out.line(
            0,
            &format!("pub const {}: i64 = {};", name.screaming(), c.value),
        );
    }
}

fn schema_mismatch(out: &mut Out) {
    out.blank();
    out.code(
        r##"/// Why `bind` refused a schema: it differs from the one this code was generated from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaMismatch(pub String);

impl std::fmt::Display for SchemaMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SchemaMismatch {}"##,
    );
}

fn entity(out: &mut Out, e: &Entity<'_>) {
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
    let n = e.fields.len();
    let head = format!("const WIRE_FIELDS: [WireField; {n}] = [");
    match e.fields.as_slice() {
        [] => out.line(1, &format!("{head}];")),
        [(_, f)] => {
            out.line(1, &format!("{head}WireField {{"));
            wire_field_members(out, 2, &f.name, &f.ty);
            out.line(1, "}];");
        }
        fields => {
            out.line(1, &head);
            for (_, f) in fields {
                out.line(2, "WireField {");
                wire_field_members(out, 3, &f.name, &f.ty);
                out.line(2, "},");
            }
            out.line(1, "];");
        }
    }
    out.blank();
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
    out.blank();
    out.doc(
        1,
        "This kind's id in `schema`, found by name, once its fields are checked.",
    );
    out.line(
        1,
        "fn kind_id(schema: &Schema) -> Result<u32, SchemaMismatch> {",
    );
    out.line(2, "bind_kind(schema, Self::KIND_NAME, &Self::WIRE_FIELDS)");
    out.line(1, "}");
    out.line(0, "}");
}

fn wire_field_members(out: &mut Out, indent: usize, name: &str, ty: &FieldType) {
    out.line(indent, &format!("name: {},", string_literal(name)));
    let lines = field_type_lines(ty);
    let last = lines.len().saturating_sub(1);
    for (i, l) in lines.iter().enumerate() {
        let prefix = if i == 0 { "ty: " } else { "" };
        let suffix = if i == last { "," } else { "" };
        out.line(indent, &format!("{prefix}{l}{suffix}"));
    }
}

fn kinds(out: &mut Out, model: &Model<'_>, kind_type: &str) {
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
        out.line(2, "Ok(Self {");
        for e in &model.entities {
            out.line(
                3,
                &format!(
                    "{}: {}Entity::kind_id(schema)?,",
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

fn bind_helpers(out: &mut Out, model: &Model<'_>, options: &Options) {
    if model.entities.is_empty() {
        return;
    }
    let fix = string_literal(&format!("regenerate with `{}`", doc_line(&options.command)));
    out.blank();
    out.code(
        r##"/// One field as this code was generated for it.
struct WireField {
    name: &'static str,
    ty: FieldType,
}

/// A field type with its floats as bit patterns, to compare parameters exactly.
fn type_key(ty: FieldType) -> (u8, u32, u32, u8) {
    match ty {
        FieldType::Quant { min, max, bits } => (0, min.to_bits(), max.to_bits(), bits),
        FieldType::Centered { range, bits } => (1, range.to_bits(), 0, bits),
        FieldType::Angle { bits } => (2, 0, 0, bits),
        FieldType::UInt => (3, 0, 0, 0),
        FieldType::SInt => (4, 0, 0, 0),
        FieldType::Bool => (5, 0, 0, 0),
        FieldType::Str { max_len } => (6, 0, 0, max_len),
        FieldType::F32 => (7, 0, 0, 0),
    }
}

/// The index of the kind called `kind` in `schema`, once its fields are checked to be `fields`.
fn bind_kind(schema: &Schema, kind: &str, fields: &[WireField]) -> Result<u32, SchemaMismatch> {"##,
    );
    out.line(1, &format!("let fix = {fix};"));
    out.code(
        r##"    let mut kinds = schema.kinds.iter().enumerate();
    let Some((id, def)) = kinds.find(|(_, k)| k.name == kind) else {
        return Err(SchemaMismatch(format!(
            "the schema has no kind `{kind}`: {fix}"
        )));
    };
    for i in 0..def.fields.len().max(fields.len()) {
        match (def.fields.get(i), fields.get(i)) {
            (Some(theirs), Some(ours)) => {
                if theirs.name != ours.name || type_key(theirs.ty) != type_key(ours.ty) {
                    return Err(SchemaMismatch(format!(
                        "the kind `{kind}` has `{}` {:?} where this code has `{}` {:?}: {fix}",
                        theirs.name, theirs.ty, ours.name, ours.ty
                    )));
                }
            }
            (None, Some(ours)) => {
                return Err(SchemaMismatch(format!(
                    "the kind `{kind}` lacks the field `{}` in the schema: {fix}",
                    ours.name
                )));
            }
            (Some(theirs), None) => {
                return Err(SchemaMismatch(format!(
                    "the kind `{kind}` has a field `{}` this code does not know: {fix}",
                    theirs.name
                )));
            }
            (None, None) => {}
        }
    }
    u32::try_from(id).map_err(|_| SchemaMismatch(format!("the kind `{kind}` has no valid id")))
}"##,
    );
}

fn input_record(
    out: &mut Out,
    input: &crate::model::Item<'_, zonekeep_protocol::contract::InputDef>,
) {
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
    let init = if def.tag.is_some() {
        "vec![Self::TAG]"
    } else {
        "Vec::new()"
    };
    if input.values.is_empty() {
        out.line(2, init);
        out.line(1, "}");
        out.line(0, "}");
        return;
    }
    out.line(2, &format!("let mut out = {init};"));
    let mut optional_started = false;
    for (name, v) in &input.values {
        let field = format!("self.{}", ident(name));
        if v.optional && !optional_started {
            optional_started = true;
            out.line(2, "let mut end = out.len();");
        }
        match v.ty {
            ValueType::Bool => out.call(
                2,
                "out.extend_from_slice",
                &format!("&u8::from({field}).to_le_bytes()"),
            ),
            ValueType::Bytes => {
                out.line(2, &format!("put_len(&mut out, {field}.len());"));
                out.call(2, "out.extend_from_slice", &format!("&{field}"));
            }
            ValueType::Str => {
                out.line(2, &format!("put_len(&mut out, {field}.len());"));
                out.call(2, "out.extend_from_slice", &format!("{field}.as_bytes()"));
            }
            ValueType::RestBytes => out.call(2, "out.extend_from_slice", &format!("&{field}")),
            ValueType::RestStr => {
                out.call(2, "out.extend_from_slice", &format!("{field}.as_bytes()"))
            }
            _ => out.call(
                2,
                "out.extend_from_slice",
                &format!("&{field}.to_le_bytes()"),
            ),
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
    out.line(2, "out");
    out.line(1, "}");
    out.line(0, "}");
}

fn put_len_helper(out: &mut Out, model: &Model<'_>) {
    let needed = model
        .inputs
        .iter()
        .flat_map(|i| i.values.iter())
        .any(|(_, v)| matches!(v.ty, ValueType::Bytes | ValueType::Str));
    if !needed {
        return;
    }
    out.blank();
    out.code(
        r##"/// Appends a `u32` length (saturated: no payload comes near 4 GiB).
fn put_len(out: &mut Vec<u8>, len: usize) {
    let len = u32::try_from(len).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
}"##,
    );
}

/// What the event reader must offer.
#[derive(Default)]
struct ReaderNeeds {
    error: bool,
    array: bool,
    optional: bool,
    bool: bool,
    optional_bool: bool,
    bytes: bool,
    str: bool,
    utf8: bool,
    rest: bool,
    rest_str: bool,
}

/// The expression reading one event value from the reader `r`.
fn value_read(v: &ValueDef, needs: &mut ReaderNeeds) -> String {
    let lit = string_literal(&v.name);
    let ty = value_rust_type(v.ty);
    match v.ty {
        ValueType::Bool if v.optional => {
            needs.optional_bool = true;
            needs.bool = true;
            needs.array = true;
            needs.error = true;
            format!("r.optional_bool({lit})?")
        }
        ValueType::Bool => {
            needs.bool = true;
            needs.array = true;
            needs.error = true;
            format!("r.bool({lit})?")
        }
        ValueType::Bytes => {
            needs.bytes = true;
            needs.array = true;
            needs.error = true;
            format!("r.bytes({lit})?.to_vec()")
        }
        ValueType::Str => {
            needs.str = true;
            needs.bytes = true;
            needs.utf8 = true;
            needs.array = true;
            needs.error = true;
            format!("r.str({lit})?")
        }
        ValueType::RestBytes => {
            needs.rest = true;
            "r.rest().to_vec()".to_owned()
        }
        ValueType::RestStr => {
            needs.rest_str = true;
            needs.rest = true;
            needs.utf8 = true;
            needs.error = true;
            format!("r.rest_str({lit})?")
        }
        _ if v.optional => {
            needs.optional = true;
            needs.array = true;
            needs.error = true;
            format!("{ty}::from_le_bytes(r.optional({lit})?)")
        }
        _ => {
            needs.array = true;
            needs.error = true;
            format!("{ty}::from_le_bytes(r.array({lit})?)")
        }
    }
}

/// The name of the union of events: `{Kind}Event`, unless an event takes that name.
fn union_name(model: &Model<'_>, kind_type: &str) -> String {
    let mut base = kind_type.to_owned();
    while model.events.iter().any(|e| e.name.pascal() == base) {
        base.push_str("Any");
    }
    format!("{base}Event")
}

fn events(out: &mut Out, model: &Model<'_>, kind_type: &str) {
    out.blank();
    out.code(
        r##"/// Why an event payload could not be decoded: it does not have the layout of its topic's
/// event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventError(pub String);

impl std::fmt::Display for EventError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EventError {}"##,
    );
    let mut needs = ReaderNeeds::default();
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
            "pub fn decode(payload: &[u8]) -> Result<Self, EventError> {",
        );
        let reader = format!("EventReader::new(payload, {});", string_literal(&def.name));
        if event.values.is_empty() {
            out.line(2, &format!("let r = {reader}"));
            out.line(2, "let event = Self {};");
        } else {
            out.line(2, &format!("let mut r = {reader}"));
            out.line(2, "let event = Self {");
            for (name, v) in &event.values {
                let read = value_read(v, &mut needs);
                out.line(3, &format!("{}: {read},", ident(name)));
            }
            out.line(2, "};");
        }
        out.line(2, "r.finish()?;");
        out.line(2, "Ok(event)");
        out.line(1, "}");
        out.line(0, "}");
    }
    let union = union_name(model, kind_type);
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
    let ret = format!("Result<Option<{union}>, EventError>");
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
    if !model.events.is_empty() {
        event_reader(out, &needs);
    }
}

fn event_reader(out: &mut Out, needs: &ReaderNeeds) {
    out.blank();
    out.code(
        r##"/// Reads an event payload from front to back.
struct EventReader<'a> {
    rest: &'a [u8],
    event: &'static str,
}

impl<'a> EventReader<'a> {
    fn new(payload: &'a [u8], event: &'static str) -> Self {
        Self {
            rest: payload,
            event,
        }
    }"##,
    );
    let parts: [(bool, &str); 10] = [
        (
            needs.error,
            r##"    fn error(&self, value: &str, problem: &str) -> EventError {
        EventError(format!("event `{}`: `{value}` {problem}", self.event))
    }"##,
        ),
        (
            needs.array,
            r##"    fn array<const N: usize>(&mut self, value: &str) -> Result<[u8; N], EventError> {
        let Some((head, rest)) = self.rest.split_first_chunk::<N>() else {
            return Err(self.error(value, "is cut short"));
        };
        self.rest = rest;
        Ok(*head)
    }"##,
        ),
        (
            needs.optional,
            r##"    fn optional<const N: usize>(&mut self, value: &str) -> Result<[u8; N], EventError> {
        if self.rest.is_empty() {
            return Ok([0; N]);
        }
        self.array(value)
    }"##,
        ),
        (
            needs.bool,
            r##"    fn bool(&mut self, value: &str) -> Result<bool, EventError> {
        match self.array(value)? {
            [0] => Ok(false),
            [1] => Ok(true),
            [b] => Err(self.error(value, &format!("is a bool of {b}"))),
        }
    }"##,
        ),
        (
            needs.optional_bool,
            r##"    fn optional_bool(&mut self, value: &str) -> Result<bool, EventError> {
        if self.rest.is_empty() {
            return Ok(false);
        }
        self.bool(value)
    }"##,
        ),
        (
            needs.bytes,
            r##"    fn bytes(&mut self, value: &str) -> Result<&'a [u8], EventError> {
        let len = u32::from_le_bytes(self.array(value)?);
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        let Some((head, rest)) = self.rest.split_at_checked(len) else {
            return Err(self.error(value, "is longer than the rest of the payload"));
        };
        self.rest = rest;
        Ok(head)
    }"##,
        ),
        (
            needs.str,
            r##"    fn str(&mut self, value: &str) -> Result<String, EventError> {
        let bytes = self.bytes(value)?;
        self.utf8(bytes, value)
    }"##,
        ),
        (
            needs.utf8,
            r##"    fn utf8(&self, bytes: &[u8], value: &str) -> Result<String, EventError> {
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| self.error(value, "is not UTF-8"))
    }"##,
        ),
        (
            needs.rest,
            r##"    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.rest)
    }"##,
        ),
        (
            needs.rest_str,
            r##"    fn rest_str(&mut self, value: &str) -> Result<String, EventError> {
        let bytes = self.rest();
        self.utf8(bytes, value)
    }"##,
        ),
    ];
    for (needed, code) in parts {
        if needed {
            out.blank();
            out.code(code);
        }
    }
    out.blank();
    out.code(
        r##"    fn finish(self) -> Result<(), EventError> {
        if self.rest.is_empty() {
            return Ok(());
        }
        Err(EventError(format!(
            "event `{}`: {} bytes left over",
            self.event,
            self.rest.len()
        )))
    }
}"##,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_are_escaped() {
        assert_eq!(ident(&Name::new("type")), "r#type");
        assert_eq!(ident(&Name::new("async")), "r#async");
        assert_eq!(ident(&Name::new("self")), "self_");
        assert_eq!(ident(&Name::new("crate")), "crate_");
        assert_eq!(ident(&Name::new("hit-points")), "hit_points");
    }

    #[test]
    fn float_literals_give_back_the_exact_f32() {
        let values = [
            -8.0_f32,
            0.1,
            -0.0,
            1e-7,
            123_456.79,
            f32::MAX,
            f32::MIN_POSITIVE,
            f32::from_bits(1),
        ];
        for v in values {
            let lit = f32_lit(v);
            let text = lit.trim_end_matches("_f32");
            assert_eq!(
                text.parse::<f32>().map(f32::to_bits),
                Ok(v.to_bits()),
                "{lit}"
            );
        }
    }

    #[test]
    fn long_chains_break_as_rustfmt_breaks_them() {
        let mut out = Out {
            text: String::new(),
        };
        let field = "a".repeat(50);
        out.call(
            2,
            "out.extend_from_slice",
            &format!("&self.{field}.to_le_bytes()"),
        );
        let expected = format!(
            "        out.extend_from_slice(\n            &self\n                .{field}\n                .to_le_bytes(),\n        );\n"
        );
        assert_eq!(out.text, expected);
    }
}
