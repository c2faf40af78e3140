//! `#[derive(EntityKind)]`: a struct with named fields as an entity kind (its `KindDef`, the
//! commands writing its fields, and a `FIELD_<NAME>` index constant per field).
//!
//! Every check the host makes on a field's parameters (PROTOCOL.md §5.4) is made here too, so a
//! kind that compiles is one the host accepts field by field.

use std::collections::BTreeSet;

use proc_macro2::{Literal, Span, TokenStream};
use quote::{quote, ToTokens};
use syn::ext::IdentExt;
use syn::meta::ParseNestedMeta;
use syn::parse::ParseStream;
use syn::spanned::Spanned;
use syn::{Attribute, Data, DeriveInput, Error, Fields, Ident, Lit, LitInt, LitStr, Result, Type};

/// Most fields one kind can have: DECLARE_KIND counts them in a `u8`.
const MAX_FIELDS: usize = 255;

/// The wire types a `#[field(...)]` attribute can name, as they are written.
const FIELD_TYPES: &str = "`str(max_len = N)`, `quant(min = A, max = B, bits = N)`, \
                           `centered(range = R, bits = N)` or `angle(bits = N)`";

/// Why a tuple struct cannot be an entity kind.
const NEEDS_NAMES: &str = "#[derive(EntityKind)] needs a struct with named fields: each field's \
                           name is its name in the entity kind";

/// The `EntityKind` impl and the `FIELD_*` constants for `input`, or every reason it cannot be
/// derived (one error per faulty field, combined).
pub(crate) fn expand(input: &DeriveInput) -> Result<TokenStream> {
    let named = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(named) => named.named.iter().collect::<Vec<_>>(),
            Fields::Unit => Vec::new(),
            Fields::Unnamed(unnamed) => {
                return Err(Error::new_spanned(unnamed, NEEDS_NAMES));
            }
        },
        Data::Enum(e) => {
            return Err(Error::new(
                e.enum_token.span,
                "#[derive(EntityKind)] needs a struct with named fields, not an enum",
            ))
        }
        Data::Union(u) => {
            return Err(Error::new(
                u.union_token.span,
                "#[derive(EntityKind)] needs a struct with named fields, not a union",
            ))
        }
    };

    let mut errors: Option<Error> = None;
    let mut push = |e: Error| match &mut errors {
        Some(all) => all.combine(e),
        None => errors = Some(e),
    };

    let kind_name = match kind_name(input) {
        Ok(name) => name,
        Err(e) => {
            push(e);
            String::new()
        }
    };
    if let Some(extra) = named.get(MAX_FIELDS) {
        push(Error::new_spanned(
            extra,
            format!(
                "an entity kind has at most {MAX_FIELDS} fields (DECLARE_KIND counts them in a \
                 u8); this struct has {}",
                named.len()
            ),
        ));
    }

    let mut fields = Vec::with_capacity(named.len());
    let mut consts = BTreeSet::new();
    for field in &named {
        let Some(member) = field.ident.clone() else {
            continue; // named fields always have one
        };
        let wire = match RustType::of(&field.ty) {
            None => Err(Error::new_spanned(
                &field.ty,
                format!(
                    "#[derive(EntityKind)] does not support a field of type `{}`: an entity \
                     field is a u32, i32, bool, f32 or String",
                    type_text(&field.ty)
                ),
            )),
            Some(rust) => field_spec(&field.attrs).and_then(|spec| wire_type(rust, spec, field)),
        };
        let name = member.unraw().to_string();
        let konst = const_name(&member, &name);
        if let Ok(k) = &konst {
            if !consts.insert(k.to_string()) {
                push(Error::new(
                    member.span(),
                    format!("two fields would both have the index constant `{k}`"),
                ));
            }
        }
        match (wire, konst) {
            (Ok(wire), Ok(konst)) => fields.push(Field {
                member,
                name,
                konst,
                wire,
            }),
            (wire, konst) => {
                if let Err(e) = wire {
                    push(e);
                }
                if let Err(e) = konst {
                    push(e);
                }
            }
        }
    }
    if let Some(e) = errors {
        return Err(e);
    }
    Ok(generate(input, &kind_name, &fields))
}

/// A field the derive accepted.
struct Field {
    /// The struct's member (`self.#member`).
    member: Ident,
    /// Its name in the kind (the member without `r#`).
    name: String,
    /// Its index constant, `FIELD_<NAME>`.
    konst: Ident,
    /// Its wire type.
    wire: Wire,
}

/// A field's Rust type, among those the derive accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RustType {
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
    fn of(ty: &Type) -> Option<Self> {
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
enum Wire {
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
    fn name(self) -> &'static str {
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

/// A `#[field(...)]` attribute: the wire type it names and where.
struct Spec {
    wire: Wire,
    span: Span,
}

/// The field's wire type from its Rust type and its `#[field(...)]`, if they fit.
fn wire_type(rust: RustType, spec: Option<Spec>, field: &syn::Field) -> Result<Wire> {
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

/// The kind's name: `#[entity(name = "...")]`, else the struct's name in snake_case. Also
/// refuses a `#[field(...)]` on the struct.
fn kind_name(input: &DeriveInput) -> Result<String> {
    let mut name: Option<LitStr> = None;
    for attr in &input.attrs {
        if attr.path().is_ident("field") {
            return Err(Error::new_spanned(
                attr,
                "#[field(...)] goes on a field; the struct takes #[entity(name = \"...\")]",
            ));
        }
        if !attr.path().is_ident("entity") {
            continue;
        }
        attr.parse_nested_meta(|meta| {
            if !meta.path.is_ident("name") {
                return Err(meta.error("unknown #[entity] key: expected `name = \"...\"`"));
            }
            if name.is_some() {
                return Err(meta.error("the kind's name is given twice"));
            }
            let lit: LitStr = meta.value()?.parse()?;
            if lit.value().is_empty() {
                return Err(Error::new(lit.span(), "the kind's name must not be empty"));
            }
            name = Some(lit);
            Ok(())
        })?;
    }
    Ok(match name {
        Some(lit) => lit.value(),
        None => snake_case(&input.ident.unraw().to_string()),
    })
}

/// The field's `#[field(...)]`, if it has one. Also refuses `#[entity]` on a field.
fn field_spec(attrs: &[Attribute]) -> Result<Option<Spec>> {
    let mut spec: Option<Spec> = None;
    for attr in attrs {
        if attr.path().is_ident("entity") {
            return Err(Error::new_spanned(
                attr,
                "#[entity(...)] goes on the struct; a field takes #[field(...)]",
            ));
        }
        if !attr.path().is_ident("field") {
            continue;
        }
        if spec.is_some() {
            return Err(Error::new_spanned(
                attr,
                "a field takes one #[field(...)] attribute",
            ));
        }
        attr.parse_nested_meta(|meta| {
            if spec.is_some() {
                return Err(meta.error(format!(
                    "a field has one wire type: write one of {FIELD_TYPES}"
                )));
            }
            spec = Some(parse_spec(&meta)?);
            Ok(())
        })?;
    }
    Ok(spec)
}

/// A number and where it was written.
type At<T> = (T, Span);

/// The parameters of a `#[field(...)]` wire type, as written.
#[derive(Default)]
struct Params {
    min: Option<At<f32>>,
    max: Option<At<f32>>,
    range: Option<At<f32>>,
    bits: Option<At<u64>>,
    max_len: Option<At<u64>>,
}

/// One wire type of a `#[field(...)]`: `str(max_len = N)`, `quant(min = A, max = B, bits = N)`,
/// `centered(range = R, bits = N)` or `angle(bits = N)`, its parameters in any order, each once.
fn parse_spec(meta: &ParseNestedMeta<'_>) -> Result<Spec> {
    let kind = meta
        .path
        .get_ident()
        .map(|i| i.unraw().to_string())
        .unwrap_or_default();
    let (usage, allowed): (&str, &[&str]) = match kind.as_str() {
        "str" => ("str(max_len = N)", &["max_len"]),
        "quant" => ("quant(min = A, max = B, bits = N)", &["min", "max", "bits"]),
        "centered" => ("centered(range = R, bits = N)", &["range", "bits"]),
        "angle" => ("angle(bits = N)", &["bits"]),
        _ => {
            return Err(meta.error(format!(
                "unknown field type `{}`: expected {FIELD_TYPES}",
                meta.path.to_token_stream()
            )))
        }
    };
    if !meta.input.peek(syn::token::Paren) {
        return Err(meta.error(format!("`{kind}` needs its parameters: `{usage}`")));
    }
    let mut params = Params::default();
    let empty = meta
        .input
        .cursor()
        .group(proc_macro2::Delimiter::Parenthesis)
        .is_some_and(|(inside, _, _)| inside.eof());
    if empty {
        let _nothing;
        syn::parenthesized!(_nothing in meta.input);
    } else {
        meta.parse_nested_meta(|p| {
            let name = p
                .path
                .get_ident()
                .map(|i| i.unraw().to_string())
                .unwrap_or_default();
            if !allowed.contains(&name.as_str()) {
                return Err(p.error(format!(
                    "unknown parameter `{}` of `{kind}`: expected `{usage}`",
                    p.path.to_token_stream()
                )));
            }
            let twice = || p.error(format!("`{name}` is given twice"));
            match name.as_str() {
                "min" | "max" | "range" => {
                    let slot = match name.as_str() {
                        "min" => &mut params.min,
                        "max" => &mut params.max,
                        _ => &mut params.range,
                    };
                    if slot.is_some() {
                        return Err(twice());
                    }
                    *slot = Some(parse_f32(p.value()?)?);
                }
                _ => {
                    let slot = match name.as_str() {
                        "bits" => &mut params.bits,
                        _ => &mut params.max_len,
                    };
                    if slot.is_some() {
                        return Err(twice());
                    }
                    let lit: LitInt = p.value()?.parse()?;
                    *slot = Some((lit.base10_parse::<u64>()?, lit.span()));
                }
            }
            Ok(())
        })?;
    }
    let missing = |param: &str| meta.error(format!("`{kind}` needs `{param}`: `{usage}`"));
    let wire = match kind.as_str() {
        "str" => Wire::Str {
            max_len: in_range(
                params.max_len.ok_or_else(|| missing("max_len"))?,
                1,
                255,
                "str max_len",
            )?,
        },
        "quant" => {
            let (min, _) = params.min.ok_or_else(|| missing("min"))?;
            let (max, max_span) = params.max.ok_or_else(|| missing("max"))?;
            let bits = params.bits.ok_or_else(|| missing("bits"))?;
            let bits = in_range(bits, 1, 32, "quant bits")?;
            if min >= max {
                return Err(Error::new(
                    max_span,
                    format!(
                        "quant needs min < max (PROTOCOL.md §5.4), got min = {min:?}, \
                         max = {max:?}"
                    ),
                ));
            }
            Wire::Quant { min, max, bits }
        }
        "centered" => {
            let (range, range_span) = params.range.ok_or_else(|| missing("range"))?;
            let bits = params.bits.ok_or_else(|| missing("bits"))?;
            let bits = in_range(bits, 2, 32, "centered bits")?;
            if range <= 0.0 {
                return Err(Error::new(
                    range_span,
                    format!("centered range must be > 0 (PROTOCOL.md §5.4), got {range:?}"),
                ));
            }
            Wire::Centered { range, bits }
        }
        _ => Wire::Angle {
            bits: in_range(
                params.bits.ok_or_else(|| missing("bits"))?,
                1,
                16,
                "angle bits",
            )?,
        },
    };
    Ok(Spec {
        wire,
        span: meta.path.span(),
    })
}

/// `value` as a `u8` in `lo..=hi`, or an error at it naming `what`.
fn in_range((value, span): At<u64>, lo: u8, hi: u8, what: &str) -> Result<u8> {
    u8::try_from(value)
        .ok()
        .filter(|v| (lo..=hi).contains(v))
        .ok_or_else(|| {
            Error::new(
                span,
                format!("{what} must be {lo}..={hi} (PROTOCOL.md §5.4), got {value}"),
            )
        })
}

/// A finite `f32` written as a number literal (integer or float, no suffix but `f32`),
/// optionally negated.
fn parse_f32(input: ParseStream<'_>) -> Result<At<f32>> {
    let minus: Option<syn::Token![-]> = input.parse()?;
    let lit: Lit = input.parse()?;
    let value = match &lit {
        Lit::Float(f) if matches!(f.suffix(), "" | "f32") => f.base10_parse::<f32>()?,
        Lit::Int(i) if i.suffix().is_empty() => i.base10_parse::<f32>()?,
        _ => {
            return Err(Error::new(
                lit.span(),
                "expected a number such as `1.5`, `-10` or `0.25f32`",
            ))
        }
    };
    let value = if minus.is_some() { -value } else { value };
    if !value.is_finite() {
        return Err(Error::new(lit.span(), "the number must be a finite f32"));
    }
    Ok((value, lit.span()))
}

/// `ty` as written, near enough: its tokens without the spaces printing puts around `<`, `>`,
/// `::`, before `;` and after `&`.
fn type_text(ty: &Type) -> String {
    ty.to_token_stream()
        .to_string()
        .replace(" <", "<")
        .replace("< ", "<")
        .replace(" >", ">")
        .replace(" :: ", "::")
        .replace(":: ", "::")
        .replace("& ", "&")
        .replace(" ;", ";")
}

/// `FIELD_<NAME>` for a field named `name`, spanned at `member`.
fn const_name(member: &Ident, name: &str) -> Result<Ident> {
    let text = format!("FIELD_{}", name.to_uppercase());
    match syn::parse_str::<Ident>(&text) {
        Ok(mut ident) => {
            ident.set_span(member.span());
            Ok(ident)
        }
        Err(_) => Err(Error::new(
            member.span(),
            format!("field `{name}` gives no valid constant name (`{text}`)"),
        )),
    }
}

/// `name` (a Rust type name, UpperCamelCase) in snake_case: `Runner` → `runner`,
/// `PlayerEntity` → `player_entity`, `HTTPServer` → `http_server`.
pub(crate) fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev = i.checked_sub(1).and_then(|j| chars.get(j)).copied();
            let next = chars.get(i + 1).copied();
            let boundary = match prev {
                Some(p) if p.is_lowercase() => true,
                Some(p) if p.is_uppercase() => next.is_some_and(char::is_lowercase),
                _ => false,
            };
            if boundary {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// An `f32` literal of `value` (finite: checked when parsed).
fn f32_tokens(value: f32) -> TokenStream {
    let lit = Literal::f32_suffixed(value.abs());
    if value.is_sign_negative() {
        quote!(-#lit)
    } else {
        quote!(#lit)
    }
}

/// The expansion: the trait impl and, when there are fields, the inherent constants.
fn generate(input: &DeriveInput, kind_name: &str, fields: &[Field]) -> TokenStream {
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();

    let mut builders = Vec::with_capacity(fields.len());
    let mut changed = Vec::with_capacity(fields.len());
    let mut set = Vec::with_capacity(fields.len());
    let mut consts = Vec::with_capacity(fields.len());
    for (i, field) in fields.iter().enumerate() {
        let Ok(index) = u8::try_from(i) else {
            break; // refused in `expand`
        };
        let index = Literal::u8_suffixed(index);
        let (m, name, konst) = (&field.member, field.name.as_str(), &field.konst);
        builders.push(match field.wire {
            Wire::Uint => quote!(.uint(#name)),
            Wire::Sint => quote!(.sint(#name)),
            Wire::Bool => quote!(.bool(#name)),
            Wire::F32 => quote!(.f32(#name)),
            Wire::Str { max_len } => {
                let max_len = Literal::u8_suffixed(max_len);
                quote!(.str(#name, #max_len))
            }
            Wire::Quant { min, max, bits } => {
                let (min, max) = (f32_tokens(min), f32_tokens(max));
                let bits = Literal::u8_suffixed(bits);
                quote!(.quant(#name, #min, #max, #bits))
            }
            Wire::Centered { range, bits } => {
                let range = f32_tokens(range);
                let bits = Literal::u8_suffixed(bits);
                quote!(.centered(#name, #range, #bits))
            }
            Wire::Angle { bits } => {
                let bits = Literal::u8_suffixed(bits);
                quote!(.angle(#name, #bits))
            }
        });
        let (differs, is_set, write) = match field.wire {
            Wire::Uint => (
                quote!(self.#m != before.#m),
                quote!(self.#m != 0),
                quote!(ctx.set_uint(entity, #index, self.#m)),
            ),
            Wire::Sint => (
                quote!(self.#m != before.#m),
                quote!(self.#m != 0),
                quote!(ctx.set_sint(entity, #index, self.#m)),
            ),
            Wire::Bool => (
                quote!(self.#m != before.#m),
                quote!(self.#m),
                quote!(ctx.set_bool(entity, #index, self.#m)),
            ),
            Wire::Str { .. } => (
                quote!(self.#m != before.#m),
                quote!(!self.#m.is_empty()),
                quote!(ctx.set_str(entity, #index, &self.#m)),
            ),
            Wire::F32 | Wire::Quant { .. } | Wire::Centered { .. } | Wire::Angle { .. } => (
                quote!(self.#m.to_bits() != before.#m.to_bits()),
                quote!(self.#m.to_bits() != 0),
                quote!(ctx.set_f32(entity, #index, self.#m)),
            ),
        };
        changed.push(quote! {
            if #differs {
                #write;
            }
        });
        set.push(quote! {
            if #is_set {
                #write;
            }
        });
        let doc = format!(
            "Index of field `{name}` ({}) in entity kind `{kind_name}`.",
            field.wire.name()
        );
        consts.push(quote! {
            #[doc = #doc]
            pub const #konst: u8 = #index;
        });
    }
    if fields.is_empty() {
        changed.push(quote!(let _ = (before, ctx, entity);));
        set.push(quote!(let _ = (ctx, entity);));
    }

    let inherent = if consts.is_empty() {
        TokenStream::new()
    } else {
        quote! {
            #[automatically_derived]
            #[allow(dead_code)]
            impl #impl_generics #ident #ty_generics #where_clause {
                #(#consts)*
            }
        }
    };
    quote! {
        #[automatically_derived]
        impl #impl_generics ::zonekeep_guest::EntityKind for #ident #ty_generics #where_clause {
            const NAME: &'static str = #kind_name;

            fn kind_def() -> ::zonekeep_guest::KindDef {
                ::zonekeep_guest::KindDef::new(#kind_name)
                    #(#builders)*
            }

            fn write_changed(
                &self,
                before: &Self,
                ctx: &mut ::zonekeep_guest::Ctx<'_>,
                entity: ::zonekeep_guest::Entity,
            ) {
                #(#changed)*
            }

            fn write_set(
                &self,
                ctx: &mut ::zonekeep_guest::Ctx<'_>,
                entity: ::zonekeep_guest::Entity,
            ) {
                #(#set)*
            }
        }

        #inherent
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::{expand, snake_case};
    use syn::DeriveInput;

    /// Every error message `expand` gives for `input`.
    fn errors(input: &str) -> Vec<String> {
        let input: DeriveInput = syn::parse_str(input).unwrap();
        match expand(&input) {
            Ok(tokens) => panic!("expected an error, got {tokens}"),
            Err(e) => e.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    /// The one error `expand` gives for a struct with these fields.
    fn error(fields: &str) -> String {
        let all = errors(&format!("struct S {{ {fields} }}"));
        assert_eq!(all.len(), 1, "{all:?}");
        all.into_iter().next().unwrap()
    }

    /// The expansion for `input`, as text without spaces.
    fn expansion(input: &str) -> String {
        let input: DeriveInput = syn::parse_str(input).unwrap();
        let tokens = expand(&input).unwrap();
        tokens.to_string().replace(' ', "")
    }

    #[test]
    fn names_go_to_snake_case() {
        assert_eq!(snake_case("Runner"), "runner");
        assert_eq!(snake_case("PlayerEntity"), "player_entity");
        assert_eq!(snake_case("HTTPServer"), "http_server");
        assert_eq!(snake_case("Bullet2D"), "bullet2d");
        assert_eq!(snake_case("already_snake"), "already_snake");
        assert_eq!(snake_case("A"), "a");
    }

    #[test]
    fn the_expansion_declares_every_type_in_order_with_its_index() {
        let text = expansion(
            "#[entity(name = \"player\")]
            struct Runner {
                #[field(str(max_len = 24))] name: String,
                score: u32,
                it: bool,
                team: i32,
                radius: f32,
                #[field(quant(min = -1, max = 1.5, bits = 8))] health: f32,
                #[field(centered(range = 10.0, bits = 12))] vx: f32,
                #[field(angle(bits = 10))] facing: f32,
                r#type: core::primitive::u32,
                #[field(str(max_len = 255))] full: std::string::String,
            }",
        );
        assert!(text.contains("constNAME:&'staticstr=\"player\";"), "{text}");
        assert!(
            text.contains(
                "::zonekeep_guest::KindDef::new(\"player\").str(\"name\",24u8).uint(\"score\")\
                 .bool(\"it\").sint(\"team\").f32(\"radius\").quant(\"health\",-1f32,1.5f32,8u8)\
                 .centered(\"vx\",10f32,12u8).angle(\"facing\",10u8).uint(\"type\")\
                 .str(\"full\",255u8)"
            ),
            "{text}"
        );
        for (konst, index) in [
            ("FIELD_NAME", 0),
            ("FIELD_SCORE", 1),
            ("FIELD_FACING", 7),
            ("FIELD_TYPE", 8),
        ] {
            assert!(
                text.contains(&format!("pubconst{konst}:u8={index}u8;")),
                "{konst}: {text}"
            );
        }
    }

    #[test]
    fn the_kind_name_defaults_to_the_struct_name_and_a_unit_struct_has_no_fields() {
        let text = expansion("struct BigRock;");
        assert!(text.contains("\"big_rock\""), "{text}");
        assert!(text.contains("let_=(before,ctx,entity);"), "{text}");
        assert!(!text.contains("pubconst"), "{text}");
        let text = expansion("struct r#Crate { x: u32 }");
        assert!(text.contains("\"crate\""), "{text}");
    }

    #[test]
    fn only_structs_with_named_fields_derive() {
        assert_eq!(
            errors("struct T(u32, bool);"),
            [
                "#[derive(EntityKind)] needs a struct with named fields: each field's name is its \
              name in the entity kind"
            ]
        );
        assert_eq!(
            errors("enum E { A }"),
            ["#[derive(EntityKind)] needs a struct with named fields, not an enum"]
        );
        assert_eq!(
            errors("union U { a: u32 }"),
            ["#[derive(EntityKind)] needs a struct with named fields, not a union"]
        );
    }

    #[test]
    fn unsupported_types_are_refused() {
        for ty in [
            "u64",
            "f64",
            "u8",
            "Vec<u8>",
            "&'static str",
            "Option<u32>",
            "std::vec::Vec<u32>",
            "::core::option::Option<Vec<u8>>",
            "[u32; 2]",
        ] {
            assert_eq!(
                error(&format!("x: {ty}")),
                format!(
                    "#[derive(EntityKind)] does not support a field of type `{ty}`: an entity \
                     field is a u32, i32, bool, f32 or String"
                ),
            );
        }
    }

    #[test]
    fn a_string_needs_its_max_len_in_range() {
        assert_eq!(
            error("s: String"),
            "a String field needs `#[field(str(max_len = N))]`, N (1..=255) the most bytes its \
             value may have"
        );
        assert_eq!(
            error("#[field(str(max_len = 0))] s: String"),
            "str max_len must be 1..=255 (PROTOCOL.md §5.4), got 0"
        );
        assert_eq!(
            error("#[field(str(max_len = 256))] s: String"),
            "str max_len must be 1..=255 (PROTOCOL.md §5.4), got 256"
        );
        assert_eq!(
            error("#[field(str)] s: String"),
            "`str` needs its parameters: `str(max_len = N)`"
        );
        assert_eq!(
            error("#[field(str())] s: String"),
            "`str` needs `max_len`: `str(max_len = N)`"
        );
        assert_eq!(
            error("#[field(quant(min = 0, max = 1, bits = 8))] s: String"),
            "`quant` does not fit a field of type `String`: a String field takes \
             `str(max_len = N)`"
        );
    }

    #[test]
    fn attributes_must_fit_the_type() {
        assert_eq!(
            error("#[field(quant(min = 0.0, max = 1.0, bits = 8))] n: u32"),
            "`quant` does not fit a field of type `u32`: u32, i32 and bool fields take no \
             #[field(...)] attribute"
        );
        assert_eq!(
            error("#[field(angle(bits = 8))] b: bool"),
            "`angle` does not fit a field of type `bool`: u32, i32 and bool fields take no \
             #[field(...)] attribute"
        );
        assert_eq!(
            error("#[field(str(max_len = 8))] f: f32"),
            "`str` does not fit a field of type `f32`: an f32 field takes `quant(...)`, \
             `centered(...)`, `angle(...)` or no attribute (an exact f32)"
        );
    }

    #[test]
    fn bits_are_checked_as_the_host_checks_them() {
        for (spec, what, range) in [
            ("quant(min = 0, max = 1, bits = {})", "quant bits", (1, 32)),
            ("centered(range = 1, bits = {})", "centered bits", (2, 32)),
            ("angle(bits = {})", "angle bits", (1, 16)),
        ] {
            let (lo, hi) = range;
            for bad in [lo - 1, hi + 1, 1000] {
                let attr = spec.replace("{}", &bad.to_string());
                assert_eq!(
                    error(&format!("#[field({attr})] f: f32")),
                    format!("{what} must be {lo}..={hi} (PROTOCOL.md §5.4), got {bad}")
                );
            }
            for good in [lo, hi] {
                let attr = spec.replace("{}", &good.to_string());
                expansion(&format!("struct S {{ #[field({attr})] f: f32 }}"));
            }
        }
    }

    #[test]
    fn float_parameters_are_checked_as_the_host_checks_them() {
        assert_eq!(
            error("#[field(quant(min = 1, max = 1, bits = 8))] f: f32"),
            "quant needs min < max (PROTOCOL.md §5.4), got min = 1.0, max = 1.0"
        );
        assert_eq!(
            error("#[field(centered(range = -2.5, bits = 8))] f: f32"),
            "centered range must be > 0 (PROTOCOL.md §5.4), got -2.5"
        );
        assert_eq!(
            error("#[field(centered(range = 1e39, bits = 8))] f: f32"),
            "the number must be a finite f32"
        );
        assert_eq!(
            error("#[field(centered(range = 1.0f64, bits = 8))] f: f32"),
            "expected a number such as `1.5`, `-10` or `0.25f32`"
        );
        assert_eq!(
            error("#[field(centered(range = \"1\", bits = 8))] f: f32"),
            "expected a number such as `1.5`, `-10` or `0.25f32`"
        );
    }

    #[test]
    fn bad_attribute_syntax_is_refused() {
        assert_eq!(
            error("#[field(fixed(bits = 8))] f: f32"),
            "unknown field type `fixed`: expected `str(max_len = N)`, `quant(min = A, max = B, \
             bits = N)`, `centered(range = R, bits = N)` or `angle(bits = N)`"
        );
        assert_eq!(
            error("#[field(angle(bits = 8, step = 2))] f: f32"),
            "unknown parameter `step` of `angle`: expected `angle(bits = N)`"
        );
        assert_eq!(
            error("#[field(angle(bits = 8, bits = 9))] f: f32"),
            "`bits` is given twice"
        );
        assert_eq!(
            error("#[field(quant(min = 0, bits = 8))] f: f32"),
            "`quant` needs `max`: `quant(min = A, max = B, bits = N)`"
        );
        assert_eq!(
            error("#[field(angle(bits = 8), angle(bits = 9))] f: f32"),
            "a field has one wire type: write one of `str(max_len = N)`, `quant(min = A, max = \
             B, bits = N)`, `centered(range = R, bits = N)` or `angle(bits = N)`"
        );
        assert_eq!(
            error("#[field(angle(bits = 8))] #[field(angle(bits = 9))] f: f32"),
            "a field takes one #[field(...)] attribute"
        );
        assert_eq!(
            error("#[field(angle(bits = x))] f: f32"),
            "expected integer literal"
        );
        assert_eq!(
            error("#[field] f: f32"),
            "expected attribute arguments in parentheses: #[field(...)]"
        );
        assert_eq!(
            error("#[entity(name = \"x\")] f: f32"),
            "#[entity(...)] goes on the struct; a field takes #[field(...)]"
        );
        assert_eq!(
            errors("#[entity(title = \"x\")] struct S { f: f32 }"),
            ["unknown #[entity] key: expected `name = \"...\"`"]
        );
        assert_eq!(
            errors("#[entity(name = \"\")] struct S { f: f32 }"),
            ["the kind's name must not be empty"]
        );
        assert_eq!(
            errors("#[entity(name = \"a\", name = \"b\")] struct S { f: f32 }"),
            ["the kind's name is given twice"]
        );
        assert_eq!(
            errors("#[field(angle(bits = 8))] struct S { f: f32 }"),
            ["#[field(...)] goes on a field; the struct takes #[entity(name = \"...\")]"]
        );
    }

    #[test]
    fn every_faulty_field_is_reported_at_once() {
        assert_eq!(
            errors("struct S { a: u64, ok: u32, s: String, #[field(angle(bits = 0))] f: f32 }")
                .len(),
            3
        );
    }

    #[test]
    fn fields_whose_constants_collide_are_refused() {
        assert_eq!(
            error("a: u32, A: u32"),
            "two fields would both have the index constant `FIELD_A`"
        );
    }

    #[test]
    fn more_than_255_fields_are_refused() {
        let fields = |n: usize| {
            (0..n)
                .map(|i| format!("f{i}: u32"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let text = expansion(&format!("struct S {{ {} }}", fields(255)));
        assert!(text.contains("pubconstFIELD_F254:u8=254u8;"));
        assert_eq!(
            error(&fields(256)),
            "an entity kind has at most 255 fields (DECLARE_KIND counts them in a u8); this \
             struct has 256"
        );
    }
}
