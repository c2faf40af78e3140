//! Input templates for generic workloads (`--input`): a JSON value whose string leaves may be
//! placeholders, rendered per input as JSON or MessagePack bytes.
//!
//! Placeholders (a whole string leaf, nothing around it): `$rand:A:B` a float uniform in `[A, B)`,
//! `$int:A:B` an integer uniform in `[A, B]`, `$bot` the bot's index, `$tick` the newest server
//! tick the bot has seen. Anything else is sent as written. The `bytes` format sends an array of
//! integers as raw bytes. Randomness comes from a per-bot seeded
//! [`Mulberry32`], so a run's inputs are reproducible.

use crate::arena::math::Mulberry32;
use serde_json::Value;
use thiserror::Error;

/// How rendered inputs are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InputFormat {
    /// UTF-8 JSON text.
    #[default]
    Json,
    /// MessagePack.
    Msgpack,
    /// Raw bytes: the template is an array of integers, each sent as one byte (values are clamped
    /// to `-128..=255`; negatives are two's complement), for games with a binary input encoding.
    Bytes,
}

/// Why a template was refused.
#[derive(Debug, Error, PartialEq)]
pub enum TemplateError {
    /// The template text is not JSON.
    #[error("input template is not valid JSON: {0}")]
    Json(String),
    /// A placeholder is malformed (bad bounds, A > B, non-finite).
    #[error("bad placeholder {0:?}: expected $rand:A:B, $int:A:B (A <= B), $bot or $tick")]
    Placeholder(String),
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Lit(Value),
    Rand(f64, f64),
    Int(i64, i64),
    Bot,
    Tick,
    Array(Vec<Node>),
    Object(Vec<(String, Node)>),
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    root: Node,
}

/// What a placeholder is rendered from.
#[derive(Debug, Clone, Copy)]
pub struct RenderCtx {
    /// The bot's index (including `--bot-offset`).
    pub bot: u32,
    /// The newest server tick the bot has seen.
    pub tick: u64,
}

fn parse_node(v: Value) -> Result<Node, TemplateError> {
    Ok(match v {
        Value::String(s) if s.starts_with('$') => parse_placeholder(&s)?,
        Value::Array(a) => Node::Array(a.into_iter().map(parse_node).collect::<Result<_, _>>()?),
        Value::Object(o) => Node::Object(
            o.into_iter()
                .map(|(k, v)| Ok((k, parse_node(v)?)))
                .collect::<Result<_, TemplateError>>()?,
        ),
        other => Node::Lit(other),
    })
}

fn parse_placeholder(s: &str) -> Result<Node, TemplateError> {
    let bad = || TemplateError::Placeholder(s.to_owned());
    let parts: Vec<&str> = s.split(':').collect();
    match parts.as_slice() {
        ["$bot"] => Ok(Node::Bot),
        ["$tick"] => Ok(Node::Tick),
        ["$rand", a, b] => {
            let (a, b): (f64, f64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
            if !a.is_finite() || !b.is_finite() || a > b {
                return Err(bad());
            }
            Ok(Node::Rand(a, b))
        }
        ["$int", a, b] => {
            let (a, b): (i64, i64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
            if a > b {
                return Err(bad());
            }
            Ok(Node::Int(a, b))
        }
        // A string that merely starts with `$` but is not one of ours is a literal.
        _ if !s.starts_with("$rand") && !s.starts_with("$int") => {
            Ok(Node::Lit(Value::String(s.to_owned())))
        }
        _ => Err(bad()),
    }
}

impl Template {
    /// Parses a JSON template.
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        let v: Value =
            serde_json::from_str(text).map_err(|e| TemplateError::Json(e.to_string()))?;
        Ok(Self {
            root: parse_node(v)?,
        })
    }

    /// Renders one input value.
    pub fn render(&self, ctx: RenderCtx, rng: &mut Mulberry32) -> Value {
        render(&self.root, ctx, rng)
    }

    /// Renders one input and encodes it.
    pub fn render_bytes(
        &self,
        ctx: RenderCtx,
        rng: &mut Mulberry32,
        format: InputFormat,
    ) -> Vec<u8> {
        let v = self.render(ctx, rng);
        match format {
            InputFormat::Json => v.to_string().into_bytes(),
            InputFormat::Msgpack => {
                let mut out = Vec::new();
                msgpack(&v, &mut out);
                out
            }
            InputFormat::Bytes => raw_bytes(&v),
        }
    }
}

fn render(n: &Node, ctx: RenderCtx, rng: &mut Mulberry32) -> Value {
    match n {
        Node::Lit(v) => v.clone(),
        Node::Rand(a, b) => serde_json::Number::from_f64(a + (b - a) * rng.next())
            .map_or(Value::Null, Value::Number),
        Node::Int(a, b) => {
            // i128 so the span of the full i64 range cannot overflow.
            let span = (i128::from(*b) - i128::from(*a) + 1) as f64;
            let off = (rng.next() * span).floor() as i128;
            let v = (i128::from(*a) + off).min(i128::from(*b));
            Value::from(i64::try_from(v).unwrap_or(*b))
        }
        Node::Bot => Value::from(ctx.bot),
        Node::Tick => Value::from(ctx.tick),
        Node::Array(a) => Value::Array(a.iter().map(|n| render(n, ctx, rng)).collect()),
        Node::Object(o) => Value::Object(
            o.iter()
                .map(|(k, n)| (k.clone(), render(n, ctx, rng)))
                .collect(),
        ),
    }
}

/// An array of integers as raw bytes; any other value (or element) contributes nothing.
fn raw_bytes(v: &Value) -> Vec<u8> {
    let Value::Array(items) = v else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|x| x.as_i64().or_else(|| x.as_f64().map(|f| f as i64)))
        .map(|i| i.clamp(-128, 255) as u8)
        .collect()
}

fn msgpack_len(out: &mut Vec<u8>, len: usize, fix: u8, fix_max: usize, b16: u8, b32: u8) {
    if len <= fix_max {
        out.push(fix | len as u8);
    } else if len <= usize::from(u16::MAX) {
        out.push(b16);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

/// MessagePack encoding of a JSON value (integers in their smallest form, other numbers as
/// float64, strings as str, objects as maps).
fn msgpack(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.push(0xc0),
        Value::Bool(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                if u < 128 {
                    out.push(u as u8);
                } else {
                    out.push(0xcf);
                    out.extend_from_slice(&u.to_be_bytes());
                }
            } else if let Some(i) = n.as_i64() {
                if i >= -32 {
                    out.push(i as i8 as u8);
                } else {
                    out.push(0xd3);
                    out.extend_from_slice(&i.to_be_bytes());
                }
            } else {
                out.push(0xcb);
                out.extend_from_slice(&n.as_f64().unwrap_or(0.0).to_be_bytes());
            }
        }
        Value::String(s) => {
            msgpack_len(out, s.len(), 0xa0, 31, 0xda, 0xdb);
            out.extend_from_slice(s.as_bytes());
        }
        Value::Array(a) => {
            msgpack_len(out, a.len(), 0x90, 15, 0xdc, 0xdd);
            for x in a {
                msgpack(x, out);
            }
        }
        Value::Object(o) => {
            msgpack_len(out, o.len(), 0x80, 15, 0xde, 0xdf);
            for (k, x) in o {
                msgpack(&Value::String(k.clone()), out);
                msgpack(x, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn ctx() -> RenderCtx {
        RenderCtx { bot: 7, tick: 1234 }
    }

    #[test]
    fn placeholders_are_replaced_and_literals_kept() {
        let t = Template::parse(
            r#"{"b":"$bot","t":"$tick","r":"$rand:-1:1","i":"$int:3:5","s":"$x","n":[1,"a"]}"#,
        )
        .unwrap();
        let mut rng = Mulberry32::new(1);
        for _ in 0..200 {
            let v = t.render(ctx(), &mut rng);
            assert_eq!(v["b"], 7);
            assert_eq!(v["t"], 1234);
            let r = v["r"].as_f64().unwrap();
            assert!((-1.0..1.0).contains(&r));
            let i = v["i"].as_i64().unwrap();
            assert!((3..=5).contains(&i));
            assert_eq!(v["s"], "$x");
            assert_eq!(v["n"], serde_json::json!([1, "a"]));
        }
    }

    #[test]
    fn int_placeholder_reaches_both_bounds() {
        let t = Template::parse(r#""$int:0:2""#).unwrap();
        let mut rng = Mulberry32::new(9);
        let mut seen = [false; 3];
        for _ in 0..100 {
            let v = t.render(ctx(), &mut rng).as_i64().unwrap();
            seen[v as usize] = true;
        }
        assert_eq!(seen, [true; 3]);
    }

    #[test]
    fn malformed_placeholders_are_errors() {
        for bad in [
            r#""$rand:2:1""#,
            r#""$int:a:1""#,
            r#""$rand:1""#,
            r#""$int:5:1""#,
        ] {
            assert!(
                matches!(Template::parse(bad), Err(TemplateError::Placeholder(_))),
                "{bad}"
            );
        }
        assert!(matches!(Template::parse("{"), Err(TemplateError::Json(_))));
    }

    #[test]
    fn bytes_format_sends_integers_as_raw_bytes() {
        let t = Template::parse(r#"[1, -1, 255, 300, -200, "$bot", "x"]"#).unwrap();
        let mut rng = Mulberry32::new(1);
        let b = t.render_bytes(ctx(), &mut rng, InputFormat::Bytes);
        assert_eq!(b, vec![1, 0xff, 255, 255, 0x80, 7]);
        let obj = Template::parse(r#"{"a":1}"#).unwrap();
        assert!(obj
            .render_bytes(ctx(), &mut rng, InputFormat::Bytes)
            .is_empty());
    }

    #[test]
    fn msgpack_encoding_is_standard() {
        let t = Template::parse(r#"{"a":[1,-1,300,-100,true,null,"hi",0.5]}"#).unwrap();
        let mut rng = Mulberry32::new(1);
        let b = t.render_bytes(ctx(), &mut rng, InputFormat::Msgpack);
        let mut want = vec![0x81, 0xa1, b'a', 0x98, 0x01, 0xff, 0xcf];
        want.extend_from_slice(&300u64.to_be_bytes());
        want.push(0xd3);
        want.extend_from_slice(&(-100i64).to_be_bytes());
        want.extend_from_slice(&[0xc3, 0xc0, 0xa2, b'h', b'i', 0xcb]);
        want.extend_from_slice(&0.5f64.to_be_bytes());
        assert_eq!(b, want);
        let j = t.render_bytes(ctx(), &mut rng, InputFormat::Json);
        assert_eq!(
            String::from_utf8(j).unwrap(),
            r#"{"a":[1,-1,300,-100,true,null,"hi",0.5]}"#
        );
    }
}
