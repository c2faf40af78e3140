//! The expansion: the `EntityKind` impl (its `KindDef`, the commands writing changed or set
//! fields) and the inherent `FIELD_<NAME>` constants, from fields already checked.

use proc_macro2::{Literal, TokenStream};
use quote::quote;
use syn::DeriveInput;

use super::types::Wire;
use super::Field;

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
pub(super) fn generate(input: &DeriveInput, kind_name: &str, fields: &[Field]) -> TokenStream {
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
