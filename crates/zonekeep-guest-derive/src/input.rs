//! `#[derive(Input)]`: a struct with named fields read from an input payload.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Data, DeriveInput, Fields};

/// The `Input` impl for `input`, or why it cannot be derived.
pub(crate) fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
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
