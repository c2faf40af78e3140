//! The entity kinds: a struct per kind with its field indexes and `Read`, and the `{Kind}Kinds`
//! binding that finds each kind in a zone's schema and checks its fields.

use zonekeep_protocol::schema::FieldType;

use super::text::{code, float_lit, string_lit, xml, Names, Out};
use super::{Types, ZK};
use crate::model::{Entity, Model};

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

pub(super) fn entity_struct(out: &mut Out, entity: &Entity<'_>, type_name: &str) {
    let mut names = Names::new(&[type_name, "KindName", "Read"]);
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
    let f = format!("{ZK}.EntityFields");
    for (i, ((_, field), name)) in entity.fields.iter().zip(&members).enumerate() {
        let code = |bits: u8| format!("long q{i} = {f}.Code(fields, {i}, {}L);", max_code(bits));
        match field.ty {
            FieldType::Quant { min, max, bits } => {
                out.line(3, &code(bits));
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
                out.line(3, &code(bits));
                out.line(
                    3,
                    &format!(
                        "if (q{i} >= 0) result.{name} = {ZK}.Quant.CenteredDecode((uint)q{i}, {}, {bits});",
                        float_lit(range)
                    ),
                );
            }
            FieldType::Angle { bits } => {
                out.line(3, &code(bits));
                out.line(
                    3,
                    &format!(
                        "if (q{i} >= 0) result.{name} = {ZK}.Quant.AngleDecode((uint)q{i}, {bits});"
                    ),
                );
            }
            FieldType::UInt => out.line(
                3,
                &format!("result.{name} = unchecked((uint){f}.Int(fields, {i}));"),
            ),
            FieldType::SInt => out.line(
                3,
                &format!("result.{name} = unchecked((int){f}.Int(fields, {i}));"),
            ),
            FieldType::Bool => out.line(3, &format!("result.{name} = {f}.Bool(fields, {i});")),
            FieldType::Str { .. } => out.line(3, &format!("result.{name} = {f}.Str(fields, {i});")),
            FieldType::F32 => out.line(3, &format!("result.{name} = {f}.F32(fields, {i});")),
        }
    }
    out.line(3, "return result;");
    out.line(2, "}");
    out.line(1, "}");
}

/// The SDK's `FieldType` of a field, as `SchemaCheck.Field` compares it (floats bit for bit).
fn field_type_expr(ty: &FieldType) -> String {
    let t = format!("{ZK}.FieldType");
    match *ty {
        FieldType::Quant { min, max, bits } => {
            format!("{t}.Quant({}, {}, {bits})", float_lit(min), float_lit(max))
        }
        FieldType::Centered { range, bits } => {
            format!("{t}.Centered({}, {bits})", float_lit(range))
        }
        FieldType::Angle { bits } => format!("{t}.Angle({bits})"),
        FieldType::UInt => format!("{t}.UInt()"),
        FieldType::SInt => format!("{t}.SInt()"),
        FieldType::Bool => format!("{t}.Bool()"),
        FieldType::Str { max_len } => format!("{t}.Str({max_len})"),
        FieldType::F32 => format!("{t}.F32()"),
    }
}

pub(super) fn kinds(out: &mut Out, model: &Model<'_>, types: &Types, command: &str) {
    let name = &types.kinds;
    let mut names = Names::new(&[name.as_str(), "Bind", "Regenerate"]);
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
    out.line(
        2,
        &format!(
            "private const string Regenerate = {};",
            string_lit(&format!("regenerate with `{command}`"))
        ),
    );
    out.blank();
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
    let check = format!("{ZK}.SchemaCheck");
    for (i, entity) in model.entities.iter().enumerate() {
        out.line(
            3,
            &format!(
                "int k{i} = {check}.FindKind(schema, {}, Regenerate, out kind);",
                string_lit(&entity.def.name)
            ),
        );
        out.line(
            3,
            &format!(
                "{check}.FieldCount(kind, {}, Regenerate);",
                entity.fields.len()
            ),
        );
        for (j, (_, field)) in entity.fields.iter().enumerate() {
            out.line(
                3,
                &format!(
                    "{check}.Field(kind, {j}, {}, {}, Regenerate);",
                    string_lit(&field.name),
                    field_type_expr(&field.ty)
                ),
            );
        }
    }
    let args: Vec<String> = (0..members.len()).map(|i| format!("k{i}")).collect();
    out.line(3, &format!("return new {name}({});", args.join(", ")));
    out.line(2, "}");
    out.line(1, "}");
}
