//! The field types: the Rust types an entity field may have, the wire types
//! (`zonekeep_guest::FieldType`) a field can be declared with, and which `#[field(...)]` fits
//! which Rust type.

use syn::{Error, Result, Type};

use super::attrs::Spec;

/// A field's Rust type, among those the derive accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RustType {
    U32,
    I32,
    Bool,
    F32,
    String,
}

impl RustType {
    /// `ty` as an accepted type: `u32`, `i32`, `bool`, `f32` (also as `core::primitive::...` or
    /// `std::primitive::...`) or `String` (also as `std::string::String` or
    /// `alloc::string::String`).
    pub(super) fn of(ty: &Type) -> Option<Self> {
        let path = match ty {
            Type::Path(p) if p.qself.is_none() => &p.path,
            Type::Group(g) => return Self::of(&g.elem),
            Type::Paren(p) => return Self::of(&p.elem),
            _ => return None,
        };
        if path.segments.iter().any(|s| !s.arguments.is_none()) {
            return None;
        }
        let names: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let primitive = |name: &str| match name {
            "u32" => Some(Self::U32),
            "i32" => Some(Self::I32),
            "bool" => Some(Self::Bool),
            "f32" => Some(Self::F32),
            _ => None,
        };
        match names[..] {
            ["String"] => Some(Self::String),
            [name] => primitive(name),
            ["std" | "core", "primitive", name] => primitive(name),
            ["std" | "alloc", "string", "String"] => Some(Self::String),
            _ => None,
        }
    }

    /// How the type is written.
    fn name(self) -> &'static str {
        match self {
            Self::U32 => "u32",
            Self::I32 => "i32",
            Self::Bool => "bool",
            Self::F32 => "f32",
            Self::String => "String",
        }
    }

    /// Which `#[field(...)]` the type takes.
    fn takes(self) -> &'static str {
        match self {
            Self::U32 | Self::I32 | Self::Bool => {
                "u32, i32 and bool fields take no #[field(...)] attribute"
            }
            Self::F32 => {
                "an f32 field takes `quant(...)`, `centered(...)`, `angle(...)` or no \
                 attribute (an exact f32)"
            }
            Self::String => "a String field takes `str(max_len = N)`",
        }
    }
}

/// A field's wire type: a `zonekeep_guest::FieldType`, checked as the host checks it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Wire {
    Uint,
    Sint,
    Bool,
    Str { max_len: u8 },
    F32,
    Quant { min: f32, max: f32, bits: u8 },
    Centered { range: f32, bits: u8 },
    Angle { bits: u8 },
}

impl Wire {
    /// The type's name in PROTOCOL.md §5.4 (and in a `#[field(...)]` attribute).
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Uint => "uint",
            Self::Sint => "sint",
            Self::Bool => "bool",
            Self::Str { .. } => "str",
            Self::F32 => "f32",
            Self::Quant { .. } => "quant",
            Self::Centered { .. } => "centered",
            Self::Angle { .. } => "angle",
        }
    }
}

/// The field's wire type from its Rust type and its `#[field(...)]`, if they fit.
pub(super) fn wire_type(rust: RustType, spec: Option<Spec>, field: &syn::Field) -> Result<Wire> {
    let Some(spec) = spec else {
        return match rust {
            RustType::U32 => Ok(Wire::Uint),
            RustType::I32 => Ok(Wire::Sint),
            RustType::Bool => Ok(Wire::Bool),
            RustType::F32 => Ok(Wire::F32),
            RustType::String => Err(Error::new_spanned(
                &field.ty,
                "a String field needs `#[field(str(max_len = N))]`, N (1..=255) the most bytes \
                 its value may have",
            )),
        };
    };
    let fits = matches!(
        (rust, spec.wire),
        (RustType::String, Wire::Str { .. })
            | (
                RustType::F32,
                Wire::Quant { .. } | Wire::Centered { .. } | Wire::Angle { .. }
            )
    );
    if fits {
        return Ok(spec.wire);
    }
    Err(Error::new(
        spec.span,
        format!(
            "`{}` does not fit a field of type `{}`: {}",
            spec.wire.name(),
            rust.name(),
            rust.takes()
        ),
    ))
}
