//! The derive's attributes as written: `#[entity(name = "...")]` on the struct and one
//! `#[field(...)]` wire type per field, each parameter parsed and checked against the range the
//! host allows (PROTOCOL.md §5.4), with an error at the token that is wrong.

use proc_macro2::Span;
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::meta::ParseNestedMeta;
use syn::parse::ParseStream;
use syn::spanned::Spanned;
use syn::{Attribute, DeriveInput, Error, Lit, LitInt, LitStr, Result};

use super::snake_case;
use super::types::Wire;

/// The wire types a `#[field(...)]` attribute can name, as they are written.
const FIELD_TYPES: &str = "`str(max_len = N)`, `quant(min = A, max = B, bits = N)`, \
                           `centered(range = R, bits = N)` or `angle(bits = N)`";

/// A `#[field(...)]` attribute: the wire type it names and where.
pub(super) struct Spec {
    pub(super) wire: Wire,
    pub(super) span: Span,
}

/// The kind's name: `#[entity(name = "...")]`, else the struct's name in snake_case. Also
/// refuses a `#[field(...)]` on the struct.
pub(super) fn kind_name(input: &DeriveInput) -> Result<String> {
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
pub(super) fn field_spec(attrs: &[Attribute]) -> Result<Option<Spec>> {
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
