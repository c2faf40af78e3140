//! Binding generated code to a zone's schema: [`bind_kind`] finds a kind by name and checks its
//! fields against the ones the code was generated from, and [`SchemaMismatch`] says where they
//! differ and what to do about it.

use std::fmt;

use zonekeep_protocol::schema::{FieldType, Schema};

/// Why [`bind_kind`] refused a schema: it differs from the one the code was generated from.
/// Every variant carries the hint given to `bind_kind` (what to do about it, such as the command
/// that regenerates the code), shown after the problem. Names from the code are the `'static`
/// strings it was built with; names from the schema are owned.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaMismatch {
    /// The schema has no kind of that name.
    #[error("the schema has no kind `{kind}`{}", Hint(hint))]
    NoKind {
        /// The kind's name.
        kind: &'static str,
        /// What to do about it.
        hint: &'static str,
    },
    /// A field differs in name, type or a type parameter (floats compared bit for bit).
    #[error(
        "the kind `{kind}` has `{schema_name}` {schema_type:?} where this code has `{name}` {ty:?}{}",
        Hint(hint)
    )]
    OtherField {
        /// The kind's name.
        kind: &'static str,
        /// The field's index.
        index: usize,
        /// The field's name in the schema.
        schema_name: String,
        /// Its type in the schema.
        schema_type: FieldType,
        /// The name the code expects.
        name: &'static str,
        /// The type the code expects.
        ty: FieldType,
        /// What to do about it.
        hint: &'static str,
    },
    /// The schema's kind lacks a field the code expects.
    #[error(
        "the kind `{kind}` lacks the field `{name}` in the schema{}",
        Hint(hint)
    )]
    MissingField {
        /// The kind's name.
        kind: &'static str,
        /// The field's index.
        index: usize,
        /// The field's name.
        name: &'static str,
        /// What to do about it.
        hint: &'static str,
    },
    /// The schema's kind has a field the code does not know.
    #[error(
        "the kind `{kind}` has a field `{name}` this code does not know{}",
        Hint(hint)
    )]
    ExtraField {
        /// The kind's name.
        kind: &'static str,
        /// The field's index.
        index: usize,
        /// The field's name.
        name: String,
        /// What to do about it.
        hint: &'static str,
    },
    /// The kind's index in the schema does not fit a `u32` kind id.
    #[error("the kind `{kind}` is at index {index}, past every kind id")]
    NoKindId {
        /// The kind's name.
        kind: &'static str,
        /// Its index in the schema.
        index: usize,
    },
}

/// A hint after a colon, or nothing when it is empty.
struct Hint<'a>(&'a str);

impl fmt::Display for Hint<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            Ok(())
        } else {
            write!(f, ": {}", self.0)
        }
    }
}

/// Whether two field types are the same with float parameters compared bit for bit (so `-0.0`
/// and `0.0` differ, and a NaN equals itself).
fn same_type(a: FieldType, b: FieldType) -> bool {
    /// The type with its floats as bit patterns.
    fn key(ty: FieldType) -> (u8, u32, u32, u8) {
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
    key(a) == key(b)
}

/// The kind id of the kind called `kind` in `schema` (its index), once its fields are checked
/// to be exactly `fields` in order: names equal, types and their parameters equal bit for bit.
/// Other kinds of the schema are not looked at. The first difference is refused, naming the kind
/// and field, with `regenerate_hint` after it (for example "regenerate with `zonekeep codegen`").
///
/// ```
/// use zonekeep_client::payload::{bind_kind, SchemaMismatch};
/// use zonekeep_client::protocol::schema::{FieldDef, FieldType, KindDef, Schema};
///
/// let field = |name: &str, ty| FieldDef { name: name.into(), ty };
/// let schema = Schema {
///     pos_step: 0.01,
///     kinds: vec![
///         KindDef { name: "rock".into(), fields: vec![] },
///         KindDef { name: "ship".into(), fields: vec![field("hp", FieldType::UInt)] },
///     ],
/// };
/// assert_eq!(bind_kind(&schema, "ship", &[("hp", FieldType::UInt)], "regenerate"), Ok(1));
/// let refused = bind_kind(&schema, "ship", &[("hp", FieldType::SInt)], "regenerate");
/// assert!(matches!(refused, Err(SchemaMismatch::OtherField { index: 0, .. })));
/// ```
pub fn bind_kind(
    schema: &Schema,
    kind: &'static str,
    fields: &[(&'static str, FieldType)],
    regenerate_hint: &'static str,
) -> Result<u32, SchemaMismatch> {
    let hint = regenerate_hint;
    let mut kinds = schema.kinds.iter().enumerate();
    let Some((id, def)) = kinds.find(|(_, k)| k.name == kind) else {
        return Err(SchemaMismatch::NoKind { kind, hint });
    };
    for index in 0..def.fields.len().max(fields.len()) {
        match (def.fields.get(index), fields.get(index)) {
            (Some(theirs), Some(&(name, ty))) => {
                if theirs.name != name || !same_type(theirs.ty, ty) {
                    return Err(SchemaMismatch::OtherField {
                        kind,
                        index,
                        schema_name: theirs.name.clone(),
                        schema_type: theirs.ty,
                        name,
                        ty,
                        hint,
                    });
                }
            }
            (None, Some(&(name, _))) => {
                return Err(SchemaMismatch::MissingField {
                    kind,
                    index,
                    name,
                    hint,
                });
            }
            (Some(theirs), None) => {
                return Err(SchemaMismatch::ExtraField {
                    kind,
                    index,
                    name: theirs.name.clone(),
                    hint,
                });
            }
            (None, None) => {}
        }
    }
    u32::try_from(id).map_err(|_| SchemaMismatch::NoKindId { kind, index: id })
}
