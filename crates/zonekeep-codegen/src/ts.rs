//! TypeScript for `@zonekeep/client`: an interface and a same-named value per entity kind, input
//! and event (`ShipEntity.read(fields)`, `SteerInput.encode(input)`, `HitEvent.decode(payload)`),
//! `{Kind}Kinds.bind(schema)` and `{Kind}Event.decode(topic, payload)`.

use std::fmt::Write as _;

use zonekeep_protocol::contract::{ValueDef, ValueType};
use zonekeep_protocol::schema::FieldType;

use crate::model::{Entity, Item, Model};
use crate::names::{doc_line, string_literal, Name};
use crate::Options;

/// The largest integer a TypeScript number holds exactly; constants past it are bigints.
const MAX_SAFE: i64 = (1 << 53) - 1;

/// An exact decimal of an f32 (the shortest that reads back as the same double).
fn float(v: f32) -> String {
    format!("{:?}", f64::from(v))
}

fn doc(out: &mut String, indent: &str, text: &str) {
    let text = doc_line(text);
    if !text.is_empty() {
        let _ = writeln!(out, "{indent}/** {text} */");
    }
}

fn field_ts_type(ty: &FieldType) -> &'static str {
    match ty {
        FieldType::Bool => "boolean",
        FieldType::Str { .. } => "string",
        _ => "number",
    }
}

fn field_about(ty: &FieldType) -> String {
    match *ty {
        FieldType::Quant { min, max, bits } => {
            format!("quant in [{}, {}], {bits} bits", float(min), float(max))
        }
        FieldType::Centered { range, bits } => {
            format!("centered in ±{}, {bits} bits", float(range))
        }
        FieldType::Angle { bits } => format!("angle in radians, {bits} bits"),
        FieldType::UInt => "uint".into(),
        FieldType::SInt => "sint".into(),
        FieldType::Bool => "bool".into(),
        FieldType::Str { max_len } => format!("str of at most {max_len} bytes"),
        FieldType::F32 => "f32".into(),
    }
}

/// The SDK's `FieldType` literal for `ty`.
fn field_type_literal(ty: &FieldType) -> String {
    match *ty {
        FieldType::Quant { min, max, bits } => format!(
            "{{ type: \"quant\", min: {}, max: {}, bits: {bits} }}",
            float(min),
            float(max)
        ),
        FieldType::Centered { range, bits } => {
            format!(
                "{{ type: \"centered\", range: {}, bits: {bits} }}",
                float(range)
            )
        }
        FieldType::Angle { bits } => format!("{{ type: \"angle\", bits: {bits} }}"),
        FieldType::UInt => "{ type: \"uint\" }".into(),
        FieldType::SInt => "{ type: \"sint\" }".into(),
        FieldType::Bool => "{ type: \"bool\" }".into(),
        FieldType::Str { max_len } => format!("{{ type: \"str\", maxLen: {max_len} }}"),
        FieldType::F32 => "{ type: \"f32\" }".into(),
    }
}

/// The expression reading field `i` of `f` as its decoded value.
fn field_read(i: usize, ty: &FieldType) -> String {
    match *ty {
        FieldType::Quant { min, max, bits } => format!(
            "quantDecode(fieldNumber(f[{i}]), {}, {}, {bits})",
            float(min),
            float(max)
        ),
        FieldType::Centered { range, bits } => {
            format!(
                "centeredDecode(fieldNumber(f[{i}]), {}, {bits})",
                float(range)
            )
        }
        FieldType::Angle { bits } => format!("angleDecode(fieldNumber(f[{i}]), {bits})"),
        FieldType::UInt | FieldType::SInt | FieldType::F32 => format!("fieldNumber(f[{i}])"),
        FieldType::Bool => format!("f[{i}] === true"),
        FieldType::Str { .. } => format!("fieldString(f[{i}])"),
    }
}

fn value_ts_type(ty: ValueType) -> &'static str {
    match ty {
        ValueType::U64 | ValueType::I64 => "bigint",
        ValueType::Bool => "boolean",
        ValueType::Bytes | ValueType::RestBytes => "Uint8Array",
        ValueType::Str | ValueType::RestStr => "string",
        _ => "number",
    }
}

/// The `PayloadWriter`/`PayloadReader` method of `ty`: the type's name in camelCase.
fn method(ty: ValueType) -> String {
    Name::new(ty.name()).camel()
}

fn write_method(ty: ValueType) -> String {
    match ty {
        ValueType::RestBytes => "raw".to_owned(),
        ValueType::RestStr => "rawStr".to_owned(),
        other => method(other),
    }
}

fn zero(ty: ValueType) -> &'static str {
    match ty {
        ValueType::U64 | ValueType::I64 => "0n",
        ValueType::Bool => "false",
        _ => "0",
    }
}

/// Whether `expr` of `ty` is nonzero (an f32 is zero only as +0).
fn nonzero(ty: ValueType, expr: &str) -> String {
    match ty {
        ValueType::F32 => format!("!Object.is({expr}, 0)"),
        ValueType::Bool => expr.to_owned(),
        ValueType::U64 | ValueType::I64 => format!("{expr} !== 0n"),
        _ => format!("{expr} !== 0"),
    }
}

fn value_about(v: &ValueDef) -> String {
    let mut text = doc_line(&v.doc);
    let ty = format!(
        "({}{})",
        v.ty.name(),
        if v.optional { ", optional" } else { "" }
    );
    if text.is_empty() {
        text = ty;
    } else {
        text = format!("{text} {ty}");
    }
    text
}

fn members(out: &mut String, values: &[(Name, &ValueDef)], optional_marks: bool) {
    for (name, v) in values {
        let _ = writeln!(out, "  /** {} */", value_about(v));
        let mark = if optional_marks && v.optional {
            "?"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "  readonly {}{mark}: {};",
            name.camel(),
            value_ts_type(v.ty)
        );
    }
}

fn entity(out: &mut String, e: &Entity<'_>) {
    let ty = format!("{}Entity", e.name.pascal());
    doc(
        out,
        "",
        &format!("Entity kind `{}`: its fields, decoded.", e.def.name),
    );
    if e.fields.is_empty() {
        let _ = writeln!(out, "export interface {ty} {{}}\n");
    } else {
        let _ = writeln!(out, "export interface {ty} {{");
    }
    for (name, f) in &e.fields {
        let _ = writeln!(
            out,
            "  /** `{}`: {}. */",
            doc_line(&f.name),
            field_about(&f.ty)
        );
        let _ = writeln!(
            out,
            "  readonly {}: {};",
            name.camel(),
            field_ts_type(&f.ty)
        );
    }
    if !e.fields.is_empty() {
        let _ = writeln!(out, "}}\n");
    }
    doc(
        out,
        "",
        &format!(
            "Kind `{}`: its name, its fields' indexes and its reader.",
            e.def.name
        ),
    );
    let _ = writeln!(out, "export const {ty} = {{");
    let _ = writeln!(out, "  kindName: {},", string_literal(&e.def.name));
    if e.fields.is_empty() {
        let _ = writeln!(out, "  fields: {{}},");
    } else {
        let _ = writeln!(out, "  fields: {{");
        for (i, (name, _)) in e.fields.iter().enumerate() {
            let _ = writeln!(out, "    {}: {i},", name.camel());
        }
        let _ = writeln!(out, "  }},");
    }
    let _ = writeln!(
        out,
        "  /** Reads wire-form field values (a replica's or mirror's `fields`); absent values read as zero. */"
    );
    let arg = if e.fields.is_empty() { "_f" } else { "f" };
    let _ = writeln!(out, "  read({arg}: readonly FieldValue[]): {ty} {{");
    if e.fields.is_empty() {
        let _ = writeln!(out, "    return {{}};");
    } else {
        let _ = writeln!(out, "    return {{");
        for (i, (name, f)) in e.fields.iter().enumerate() {
            let _ = writeln!(out, "      {}: {},", name.camel(), field_read(i, &f.ty));
        }
        let _ = writeln!(out, "    }};");
    }
    let _ = writeln!(out, "  }},");
    let _ = writeln!(out, "}} as const;\n");
}

fn kinds(out: &mut String, model: &Model<'_>, options: &Options) {
    let ty = format!("{}Kinds", model.kind_name.pascal());
    let _ = writeln!(
        out,
        "/** The layout this file was generated from, kind by kind. */"
    );
    let _ = writeln!(out, "const LAYOUT: readonly KindLayout[] = [");
    for e in &model.entities {
        if e.fields.is_empty() {
            let _ = writeln!(
                out,
                "  {{ name: {}, fields: [] }},",
                string_literal(&e.def.name)
            );
            continue;
        }
        let _ = writeln!(out, "  {{");
        let _ = writeln!(out, "    name: {},", string_literal(&e.def.name));
        let _ = writeln!(out, "    fields: [");
        for (_, f) in &e.fields {
            let _ = writeln!(
                out,
                "      {{ name: {}, ty: {} }},",
                string_literal(&f.name),
                field_type_literal(&f.ty)
            );
        }
        let _ = writeln!(out, "    ],");
        let _ = writeln!(out, "  }},");
    }
    let _ = writeln!(out, "];\n");
    doc(
        out,
        "",
        &format!(
            "Kind ids of the zone kind `{}`'s entity kinds in one zone's schema (a Welcome's).",
            model.kind
        ),
    );
    let _ = writeln!(out, "export interface {ty} {{");
    for e in &model.entities {
        let _ = writeln!(out, "  /** Kind id of `{}`. */", doc_line(&e.def.name));
        let _ = writeln!(out, "  readonly {}: number;", e.name.camel());
    }
    let _ = writeln!(out, "}}\n");
    let _ = writeln!(out, "export const {ty} = {{");
    let _ = writeln!(
        out,
        "  /**\n   * Finds each entity kind in `schema` by name and checks its fields are the ones this file was\n   * generated from; throws a `SchemaMismatchError` naming the first difference.\n   */"
    );
    let _ = writeln!(out, "  bind(schema: Schema): {ty} {{");
    let _ = writeln!(
        out,
        "    const ids = LAYOUT.map((k) => bindKindLayout(schema, k, REGENERATE));"
    );
    let _ = writeln!(out, "    return {{");
    for (i, e) in model.entities.iter().enumerate() {
        let _ = writeln!(out, "      {}: ids[{i}] ?? -1,", e.name.camel());
    }
    let _ = writeln!(out, "    }};");
    let _ = writeln!(out, "  }},");
    let _ = writeln!(out, "}} as const;\n");
    let regen = string_literal(&format!("; regenerate with `{}`", options.command));
    let _ = writeln!(out, "const REGENERATE = {regen};");
}

fn input(out: &mut String, item: &Item<'_, zonekeep_protocol::contract::InputDef>) {
    let ty = format!("{}Input", item.name.pascal());
    doc(out, "", &item.def.doc);
    let _ = writeln!(out, "export interface {ty} {{");
    members(out, &item.values, true);
    let _ = writeln!(out, "}}\n");
    doc(
        out,
        "",
        &format!("Input `{}`: its payload builder.", item.def.name),
    );
    let _ = writeln!(out, "export const {ty} = {{");
    if let Some(tag) = item.def.tag {
        let _ = writeln!(out, "  /** The payload's first byte. */");
        let _ = writeln!(out, "  tag: {tag},");
    }
    let _ = writeln!(
        out,
        "  /** The input's payload, for `ZoneConnection.sendInput` or a `Predictor`. */"
    );
    let arg = if item.values.is_empty() {
        "_input"
    } else {
        "input"
    };
    let _ = writeln!(out, "  encode({arg}: {ty}): Uint8Array {{");
    let _ = writeln!(out, "    const w = new PayloadWriter();");
    if let Some(tag) = item.def.tag {
        let _ = writeln!(out, "    w.u8({tag});");
    }
    let optional: Vec<(String, ValueType)> = item
        .values
        .iter()
        .filter(|(_, v)| v.optional)
        .map(|(n, v)| (n.camel(), v.ty))
        .collect();
    for (name, ty) in &optional {
        let _ = writeln!(out, "    const {name} = input.{name} ?? {};", zero(*ty));
    }
    for (name, v) in item.values.iter().filter(|(_, v)| !v.optional) {
        let _ = writeln!(out, "    w.{}(input.{});", write_method(v.ty), name.camel());
    }
    for (i, (name, ty)) in optional.iter().enumerate() {
        let cond: Vec<String> = optional[i..].iter().map(|(n, t)| nonzero(*t, n)).collect();
        let _ = writeln!(
            out,
            "    if ({}) w.{}({name});",
            cond.join(" || "),
            write_method(*ty)
        );
    }
    let _ = writeln!(out, "    return w.finish();");
    let _ = writeln!(out, "  }},");
    let _ = writeln!(out, "}} as const;\n");
}

fn event(out: &mut String, item: &Item<'_, zonekeep_protocol::contract::EventDef>) {
    let ty = format!("{}Event", item.name.pascal());
    doc(out, "", &item.def.doc);
    let _ = writeln!(out, "export interface {ty} {{");
    members(out, &item.values, false);
    let _ = writeln!(out, "}}\n");
    doc(
        out,
        "",
        &format!("Event `{}`: its topic and decoder.", item.def.name),
    );
    let _ = writeln!(out, "export const {ty} = {{");
    let _ = writeln!(out, "  topic: {},", item.def.topic);
    let _ = writeln!(
        out,
        "  /** Reads the payload; a malformed one is a `DecodeError`. */"
    );
    let _ = writeln!(out, "  decode(payload: Uint8Array): {ty} {{");
    let _ = writeln!(out, "    const r = new PayloadReader(payload);");
    for (name, v) in &item.values {
        if v.optional {
            let _ = writeln!(
                out,
                "    const {} = r.atEnd() ? {} : r.{}();",
                name.camel(),
                zero(v.ty),
                method(v.ty)
            );
        } else {
            let _ = writeln!(out, "    const {} = r.{}();", name.camel(), method(v.ty));
        }
    }
    let _ = writeln!(out, "    r.finish();");
    let fields: Vec<String> = item.values.iter().map(|(n, _)| n.camel()).collect();
    if fields.is_empty() {
        let _ = writeln!(out, "    return {{}};");
    } else {
        let _ = writeln!(out, "    return {{ {} }};", fields.join(", "));
    }
    let _ = writeln!(out, "  }},");
    let _ = writeln!(out, "}} as const;\n");
}

fn dispatch(out: &mut String, model: &Model<'_>) {
    let ty = format!("{}Event", model.kind_name.pascal());
    doc(
        out,
        "",
        &format!("Any event of the zone kind `{}`, by type.", model.kind),
    );
    let _ = writeln!(out, "export type {ty} =");
    for (i, e) in model.events.iter().enumerate() {
        let end = if i + 1 == model.events.len() { ";" } else { "" };
        let _ = writeln!(
            out,
            "  | {{ readonly type: {}; readonly event: {}Event }}{end}",
            string_literal(&e.def.name),
            e.name.pascal()
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "export const {ty} = {{");
    let _ = writeln!(
        out,
        "  /** Decodes an event of any known topic (`null` for another topic); a malformed payload is a `DecodeError`. */"
    );
    let _ = writeln!(
        out,
        "  decode(topic: number, payload: Uint8Array): {ty} | null {{"
    );
    let _ = writeln!(out, "    switch (topic) {{");
    for e in &model.events {
        let _ = writeln!(out, "      case {}:", e.def.topic);
        let _ = writeln!(
            out,
            "        return {{ type: {}, event: {}Event.decode(payload) }};",
            string_literal(&e.def.name),
            e.name.pascal()
        );
    }
    let _ = writeln!(out, "      default:");
    let _ = writeln!(out, "        return null;");
    let _ = writeln!(out, "    }}");
    let _ = writeln!(out, "  }},");
    let _ = writeln!(out, "}} as const;\n");
}

/// The TypeScript module for `model`.
pub(crate) fn emit(model: &Model<'_>, options: &Options) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "// Generated by `{}` from the zone kind `{}`. Do not edit: regenerate it.\n",
        options.command, model.kind
    );
    let mut imports: Vec<&str> = vec!["bindKindLayout"];
    let fields = model.entities.iter().flat_map(|e| e.fields.iter());
    let used = |pred: fn(&FieldType) -> bool| fields.clone().any(|(_, f)| pred(&f.ty));
    if used(|t| matches!(t, FieldType::Angle { .. })) {
        imports.push("angleDecode");
    }
    if used(|t| matches!(t, FieldType::Centered { .. })) {
        imports.push("centeredDecode");
    }
    if used(|t| !matches!(t, FieldType::Bool | FieldType::Str { .. })) {
        imports.push("fieldNumber");
    }
    if used(|t| matches!(t, FieldType::Str { .. })) {
        imports.push("fieldString");
    }
    if !model.inputs.is_empty() {
        imports.push("PayloadWriter");
    }
    if !model.events.is_empty() {
        imports.push("PayloadReader");
    }
    if used(|t| matches!(t, FieldType::Quant { .. })) {
        imports.push("quantDecode");
    }
    imports.sort_unstable_by_key(|i| i.to_ascii_lowercase());
    if !model.entities.is_empty() {
        imports.push("type FieldValue");
    }
    imports.extend(["type KindLayout", "type Schema"]);
    let _ = writeln!(
        out,
        "import {{ {} }} from {};\n",
        imports.join(", "),
        string_literal(&options.ts_import)
    );
    for (name, c) in &model.consts {
        doc(&mut out, "", &c.doc);
        let value = if c.value.unsigned_abs() > MAX_SAFE.unsigned_abs() {
            format!("{}n", c.value)
        } else {
            c.value.to_string()
        };
        let _ = writeln!(out, "export const {} = {value};", name.screaming());
    }
    if !model.consts.is_empty() {
        let _ = writeln!(out);
    }
    for e in &model.entities {
        entity(&mut out, e);
    }
    kinds(&mut out, model, options);
    for i in &model.inputs {
        input(&mut out, i);
    }
    for e in &model.events {
        event(&mut out, e);
    }
    if !model.events.is_empty() {
        dispatch(&mut out, model);
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}
