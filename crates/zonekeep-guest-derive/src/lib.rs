//! `#[derive(Input)]` and `#[derive(EntityKind)]` for Zonekeep zone modules; re-exported by
//! `zonekeep-guest`, whose traits and types the expansions name (as `::zonekeep_guest::...`):
//! `Input`, `InputField` and `Reader` for the first; `EntityKind`, `KindDef`, `Ctx` and
//! `Entity` for the second.
//!
//! This crate owns only the macros' expansions and the compile errors they give. It must never
//! depend on `zonekeep-guest` (which depends on it) nor on any host crate; it runs at compile
//! time only and is never linked into a module.

use proc_macro::TokenStream;
use syn::{parse_macro_input, DeriveInput};

mod entity_kind;
mod input;

/// Implement `zonekeep_guest::Input` for a struct with named fields of `u8`, `u16`, `u32`,
/// `u64`, `i8`, `i16`, `i32`, `f32` or `bool`: the payload is the fields in declaration order,
/// little-endian, a bool one byte 0 or 1, and nothing after the last field.
#[proc_macro_derive(Input)]
pub fn derive_input(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match input::expand(&input) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// Implement `zonekeep_guest::EntityKind` for a struct with named fields: the struct is an
/// entity kind whose fields are the struct's, in declaration order, and each field gets an
/// inherent `FIELD_<NAME>: u8` constant holding its index.
///
/// Field types: `u32` (uint), `i32` (sint), `bool`, `f32` (exact f32, or a quantized float with
/// `#[field(quant(min = A, max = B, bits = N))]`, `#[field(centered(range = R, bits = N))]` or
/// `#[field(angle(bits = N))]`) and `String` (with `#[field(str(max_len = N))]`, required).
/// The kind's name is the struct's in snake_case unless `#[entity(name = "...")]` says
/// otherwise. See `zonekeep_guest::EntityKind` for an example and the rules.
#[proc_macro_derive(EntityKind, attributes(entity, field))]
pub fn derive_entity_kind(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match entity_kind::expand(&input) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}
