//! `#[derive(Input)]` for Zonekeep zone modules; re-exported by `zonekeep-guest`, whose `Input`
//! and `InputField` traits and `Reader` the expansion names (as `::zonekeep_guest::...`).
//!
//! This crate owns only the macro's expansion. It must never depend on `zonekeep-guest` (which
//! depends on it) nor on any host crate; it runs at compile time only and is never linked into
//! a module.

use proc_macro::TokenStream;
use quote::quote;
use syn::{parse_macro_input, Data, DeriveInput, Fields};

/// Implement `zonekeep_guest::Input` for a struct with named fields of `u8`, `u16`, `u32`,
/// `u64`, `i8`, `i16`, `i32`, `f32` or `bool`: the payload is the fields in declaration order,
/// little-endian, a bool one byte 0 or 1, and nothing after the last field.
#[proc_macro_derive(Input)]
pub fn derive_input(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let fields = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(named) => &named.named,
            _ => {
                return Err(syn::Error::new_spanned(
                    &input.ident,
                    "#[derive(Input)] needs a struct with named fields",
                ))
            }
        },
        _ => {
            return Err(syn::Error::new_spanned(
                &input.ident,
                "#[derive(Input)] needs a struct with named fields",
            ))
        }
    };
    let name = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let reads = fields.iter().map(|f| {
        let ident = &f.ident;
        let ty = &f.ty;
        quote! {
            #ident: <#ty as ::zonekeep_guest::InputField>::read(&mut reader)?
        }
    });
    Ok(quote! {
        impl #impl_generics ::zonekeep_guest::Input for #name #ty_generics #where_clause {
            fn decode(
                bytes: &[u8],
            ) -> ::core::result::Result<Self, ::zonekeep_guest::DecodeError> {
                let mut reader = ::zonekeep_guest::Reader::new(bytes);
                let value = Self { #(#reads,)* };
                reader.finish()?;
                ::core::result::Result::Ok(value)
            }
        }
    })
}
