//! `#[derive(EntityKind)]`: a struct with named fields as an entity kind (its `KindDef`, the
//! commands writing its fields, and a `FIELD_<NAME>` index constant per field).
//!
//! Every check the host makes on a field's parameters (PROTOCOL.md §5.4) is made here too, so a
//! kind that compiles is one the host accepts field by field.
//!
//! The derive reads the struct's `#[entity(...)]` and `#[field(...)]` attributes (`attrs`), maps
//! each field's Rust type and attribute to its wire type (`types`), reports every faulty field at
//! once, and writes the expansion (`generate`). This file drives those steps and names things:
//! the kind after the struct, each index constant after its field.

mod attrs;
mod generate;
#[cfg(test)]
mod tests;
mod types;

use std::collections::BTreeSet;

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::{Data, DeriveInput, Error, Fields, Ident, Result, Type};

use attrs::{field_spec, kind_name};
use generate::generate;
use types::{wire_type, RustType, Wire};

/// Most fields one kind can have: DECLARE_KIND counts them in a `u8`.
const MAX_FIELDS: usize = 255;

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
