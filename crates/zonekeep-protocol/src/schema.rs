//! The entity schema carried by Welcome (PROTOCOL.md §5.4): a position quantum and a list of kinds, each
//! a list of typed fields. Clients decode entities from it without generated code.

use crate::error::{DecodeError, EncodeError};
use crate::limits::{MAX_FIELDS, MAX_KINDS, MAX_NAME, MAX_STR_FIELD};
use crate::quant::{
    angle_decode, angle_encode, centered_decode, centered_encode, quant_decode, quant_encode,
    quant_steps,
};
use crate::wire::{put_f32, put_str_named, put_varint, put_zigzag32, Reader};

/// A field's type and its quantization parameters (wire type byte in parentheses).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FieldType {
    /// (0) A float quantized into `[min, max]` with `bits` bits (§3.1).
    Quant {
        /// Lower bound, finite.
        min: f32,
        /// Upper bound, finite and > `min`.
        max: f32,
        /// 1..=32.
        bits: u8,
    },
    /// (1) A float in `[-range, range)` in which 0 is exact (§3.2).
    Centered {
        /// Half-width, finite and > 0.
        range: f32,
        /// 2..=32.
        bits: u8,
    },
    /// (2) An angle in radians, wrapping (§3.3).
    Angle {
        /// 1..=16.
        bits: u8,
    },
    /// (3) An unsigned 32-bit integer.
    UInt,
    /// (4) A signed 32-bit integer (zig-zag).
    SInt,
    /// (5) A boolean.
    Bool,
    /// (6) A UTF-8 string of at most `max_len` bytes.
    Str {
        /// Longest value in bytes.
        max_len: u8,
    },
    /// (7) An exact `f32`.
    F32,
}

/// A field's value as it travels: quantized floats are their integer code `q`.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    /// The code of a quant, centered or angle field.
    Q(u32),
    /// A `uint` field.
    U(u32),
    /// A `sint` field.
    I(i32),
    /// A `bool` field.
    Bool(bool),
    /// A `str` field.
    Str(String),
    /// An `f32` field.
    F32(f32),
}

impl FieldValue {
    /// Equality that compares `f32` values by bit pattern, so NaN payloads and signed zeros count.
    pub fn same_bits(&self, other: &FieldValue) -> bool {
        match (self, other) {
            (FieldValue::F32(a), FieldValue::F32(b)) => a.to_bits() == b.to_bits(),
            (a, b) => a == b,
        }
    }
}

/// One named, typed field of a kind.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldDef {
    /// Name (≤ 64 bytes), for tools and SDKs; the wire addresses fields by index.
    pub name: String,
    /// Type and parameters.
    pub ty: FieldType,
}

/// One entity kind: a name and its fields in wire order.
#[derive(Debug, Clone, PartialEq)]
pub struct KindDef {
    /// Name (≤ 64 bytes).
    pub name: String,
    /// Fields (≤ 32); a field's index is its bit in an update mask.
    pub fields: Vec<FieldDef>,
}

impl KindDef {
    /// Checks the limits and every field's parameters (§5.4).
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.name.len() > MAX_NAME {
            return Err("kind name longer than 64 bytes");
        }
        if self.fields.len() > MAX_FIELDS {
            return Err("more than 32 fields in a kind");
        }
        for f in &self.fields {
            if f.name.len() > MAX_NAME {
                return Err("field name longer than 64 bytes");
            }
            f.ty.validate()?;
        }
        Ok(())
    }

    /// The index of the field called `name`, if any.
    pub fn field_index(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }

    /// Every field's default value, in order.
    pub fn default_values(&self) -> Vec<FieldValue> {
        self.fields.iter().map(|f| f.ty.default_value()).collect()
    }
}

/// The zone's entity schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    /// Position quantum (§3.4), finite and > 0.
    pub pos_step: f32,
    /// Kinds; an entity's kind is its index here.
    pub kinds: Vec<KindDef>,
}

fn invalid(msg: &'static str) -> EncodeError {
    EncodeError::Invalid(msg)
}

impl FieldType {
    /// The wire type byte.
    pub fn type_byte(&self) -> u8 {
        match self {
            FieldType::Quant { .. } => 0,
            FieldType::Centered { .. } => 1,
            FieldType::Angle { .. } => 2,
            FieldType::UInt => 3,
            FieldType::SInt => 4,
            FieldType::Bool => 5,
            FieldType::Str { .. } => 6,
            FieldType::F32 => 7,
        }
    }

    /// Checks the parameters against §5.4.
    pub fn validate(&self) -> Result<(), &'static str> {
        match *self {
            FieldType::Quant { min, max, bits } => {
                if !(1..=32).contains(&bits) {
                    return Err("quant bits must be 1..=32");
                }
                if !min.is_finite() || !max.is_finite() || min >= max {
                    return Err("quant needs finite min < max");
                }
            }
            FieldType::Centered { range, bits } => {
                if !(2..=32).contains(&bits) {
                    return Err("centered bits must be 2..=32");
                }
                if !range.is_finite() || range <= 0.0 {
                    return Err("centered range must be finite and > 0");
                }
            }
            FieldType::Angle { bits } => {
                if !(1..=16).contains(&bits) {
                    return Err("angle bits must be 1..=16");
                }
            }
            FieldType::UInt
            | FieldType::SInt
            | FieldType::Bool
            | FieldType::Str { .. }
            | FieldType::F32 => {}
        }
        Ok(())
    }

    /// The largest valid code of a quantized type (`None` for other types).
    pub fn max_code(&self) -> Option<u32> {
        match *self {
            FieldType::Quant { bits, .. } | FieldType::Centered { bits, .. } => {
                Some(quant_steps(bits) as u32)
            }
            FieldType::Angle { bits } => Some(quant_steps(bits) as u32),
            _ => None,
        }
    }

    /// Quantizes a float for a quant, centered or angle field (`None` for other types).
    pub fn quantize(&self, v: f32) -> Option<u32> {
        match *self {
            FieldType::Quant { min, max, bits } => Some(quant_encode(v, min, max, bits)),
            FieldType::Centered { range, bits } => Some(centered_encode(v, range, bits)),
            FieldType::Angle { bits } => Some(angle_encode(v, bits)),
            _ => None,
        }
    }

    /// The float a client decodes from code `q` (`None` for non-quantized types).
    pub fn dequantize(&self, q: u32) -> Option<f32> {
        match *self {
            FieldType::Quant { min, max, bits } => Some(quant_decode(q, min, max, bits)),
            FieldType::Centered { range, bits } => Some(centered_decode(q, range, bits)),
            FieldType::Angle { bits } => Some(angle_decode(q, bits)),
            _ => None,
        }
    }

    /// The value a freshly spawned entity holds: the code of 0.0 for quantized types (clamped into
    /// range for `quant`), zero, false, the empty string.
    pub fn default_value(&self) -> FieldValue {
        match self {
            FieldType::Quant { .. } | FieldType::Centered { .. } | FieldType::Angle { .. } => {
                FieldValue::Q(self.quantize(0.0).unwrap_or(0))
            }
            FieldType::UInt => FieldValue::U(0),
            FieldType::SInt => FieldValue::I(0),
            FieldType::Bool => FieldValue::Bool(false),
            FieldType::Str { .. } => FieldValue::Str(String::new()),
            FieldType::F32 => FieldValue::F32(0.0),
        }
    }

    /// Checks that `v` is a valid value of this type (right variant, code in range, string short enough).
    pub fn check_value(&self, v: &FieldValue) -> Result<(), EncodeError> {
        match (self, v) {
            (
                FieldType::Quant { .. } | FieldType::Centered { .. } | FieldType::Angle { .. },
                FieldValue::Q(q),
            ) => {
                if Some(*q) > self.max_code() {
                    return Err(invalid("quantized code out of range for its field"));
                }
            }
            (FieldType::UInt, FieldValue::U(_))
            | (FieldType::SInt, FieldValue::I(_))
            | (FieldType::Bool, FieldValue::Bool(_))
            | (FieldType::F32, FieldValue::F32(_)) => {}
            (FieldType::Str { max_len }, FieldValue::Str(s)) => {
                if s.len() > usize::from(*max_len) {
                    return Err(EncodeError::TooLong {
                        what: "str field",
                        len: s.len() as u64,
                        max: u64::from(*max_len),
                    });
                }
            }
            _ => return Err(invalid("field value does not match its type")),
        }
        Ok(())
    }

    /// Appends `v` encoded as this type (§5.4 "value on the wire"), after [`Self::check_value`].
    pub fn encode_value(&self, v: &FieldValue, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.check_value(v)?;
        match v {
            FieldValue::Q(q) | FieldValue::U(q) => put_varint(out, u64::from(*q)),
            FieldValue::I(i) => put_zigzag32(out, *i),
            FieldValue::Bool(b) => out.push(u8::from(*b)),
            FieldValue::Str(s) => put_str_named(out, "str field", s, MAX_STR_FIELD)?,
            FieldValue::F32(f) => put_f32(out, *f),
        }
        Ok(())
    }

    /// Reads one value of this type, rejecting codes out of range and bools other than 0 or 1.
    pub fn decode_value(&self, r: &mut Reader) -> Result<FieldValue, DecodeError> {
        Ok(match *self {
            FieldType::Quant { .. } | FieldType::Centered { .. } | FieldType::Angle { .. } => {
                let q = r.varint_u32()?;
                if Some(q) > self.max_code() {
                    return Err(DecodeError::Invalid("quantized code out of range"));
                }
                FieldValue::Q(q)
            }
            FieldType::UInt => FieldValue::U(r.varint_u32()?),
            FieldType::SInt => FieldValue::I(r.zigzag32()?),
            FieldType::Bool => match r.u8()? {
                0 => FieldValue::Bool(false),
                1 => FieldValue::Bool(true),
                _ => return Err(DecodeError::Invalid("bool other than 0 or 1")),
            },
            FieldType::Str { max_len } => {
                FieldValue::Str(r.str_named("str field", usize::from(max_len))?.to_owned())
            }
            FieldType::F32 => FieldValue::F32(r.f32()?),
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.type_byte());
        match *self {
            FieldType::Quant { min, max, bits } => {
                put_f32(out, min);
                put_f32(out, max);
                out.push(bits);
            }
            FieldType::Centered { range, bits } => {
                put_f32(out, range);
                out.push(bits);
            }
            FieldType::Angle { bits } => out.push(bits),
            FieldType::Str { max_len } => put_varint(out, u64::from(max_len)),
            FieldType::UInt | FieldType::SInt | FieldType::Bool | FieldType::F32 => {}
        }
    }

    fn decode(r: &mut Reader) -> Result<FieldType, DecodeError> {
        let ty = match r.u8()? {
            0 => {
                let min = r.f32()?;
                let max = r.f32()?;
                FieldType::Quant {
                    min,
                    max,
                    bits: r.u8()?,
                }
            }
            1 => {
                let range = r.f32()?;
                FieldType::Centered {
                    range,
                    bits: r.u8()?,
                }
            }
            2 => FieldType::Angle { bits: r.u8()? },
            3 => FieldType::UInt,
            4 => FieldType::SInt,
            5 => FieldType::Bool,
            6 => {
                let n = r.count("str max_len", MAX_STR_FIELD)?;
                FieldType::Str {
                    max_len: u8::try_from(n).map_err(|_| DecodeError::Overflow)?,
                }
            }
            7 => FieldType::F32,
            _ => return Err(DecodeError::Invalid("unknown field type")),
        };
        ty.validate().map_err(DecodeError::Invalid)?;
        Ok(ty)
    }
}

impl Schema {
    /// Checks every rule of §5.4 (pos_step, limits, field parameters).
    pub fn validate(&self) -> Result<(), EncodeError> {
        if !self.pos_step.is_finite() || self.pos_step <= 0.0 {
            return Err(invalid("pos_step must be finite and > 0"));
        }
        if self.kinds.len() > MAX_KINDS {
            return Err(EncodeError::TooLong {
                what: "kinds",
                len: self.kinds.len() as u64,
                max: MAX_KINDS as u64,
            });
        }
        for k in &self.kinds {
            k.validate().map_err(invalid)?;
        }
        Ok(())
    }

    /// The kind at `index`, if any.
    pub fn kind(&self, index: u32) -> Option<&KindDef> {
        self.kinds.get(index as usize)
    }

    /// Appends the schema's wire form after validating it.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.validate()?;
        put_f32(out, self.pos_step);
        put_varint(out, self.kinds.len() as u64);
        for k in &self.kinds {
            put_str_named(out, "kind name", &k.name, MAX_NAME)?;
            put_varint(out, k.fields.len() as u64);
            for f in &k.fields {
                put_str_named(out, "field name", &f.name, MAX_NAME)?;
                f.ty.encode(out);
            }
        }
        Ok(())
    }

    /// Reads a schema, enforcing every limit and parameter rule.
    pub fn decode(r: &mut Reader) -> Result<Schema, DecodeError> {
        let pos_step = r.f32()?;
        if !pos_step.is_finite() || pos_step <= 0.0 {
            return Err(DecodeError::Invalid("pos_step must be finite and > 0"));
        }
        let nk = r.count("kinds", MAX_KINDS)?;
        let mut kinds = Vec::with_capacity(nk.min(r.remaining()));
        for _ in 0..nk {
            let name = r.str_named("kind name", MAX_NAME)?.to_owned();
            let nf = r.count("fields", MAX_FIELDS)?;
            let mut fields = Vec::with_capacity(nf.min(r.remaining()));
            for _ in 0..nf {
                let fname = r.str_named("field name", MAX_NAME)?.to_owned();
                let ty = FieldType::decode(r)?;
                fields.push(FieldDef { name: fname, ty });
            }
            kinds.push(KindDef { name, fields });
        }
        Ok(Schema { pos_step, kinds })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    pub(crate) fn sample() -> Schema {
        let f = |name: &str, ty| FieldDef {
            name: name.into(),
            ty,
        };
        Schema {
            pos_step: 0.01,
            kinds: vec![
                KindDef {
                    name: "ship".into(),
                    fields: vec![
                        f(
                            "hp",
                            FieldType::Quant {
                                min: 0.0,
                                max: 100.0,
                                bits: 7,
                            },
                        ),
                        f(
                            "vx",
                            FieldType::Centered {
                                range: 20.0,
                                bits: 10,
                            },
                        ),
                        f("heading", FieldType::Angle { bits: 8 }),
                        f("score", FieldType::UInt),
                    ],
                },
                KindDef {
                    name: "crate".into(),
                    fields: vec![
                        f("dz", FieldType::SInt),
                        f("open", FieldType::Bool),
                        f("label", FieldType::Str { max_len: 12 }),
                        f("mass", FieldType::F32),
                    ],
                },
            ],
        }
    }

    #[test]
    fn schema_round_trip() {
        let s = sample();
        let mut out = Vec::new();
        s.encode(&mut out).unwrap();
        let mut r = Reader::new(&out);
        assert_eq!(Schema::decode(&mut r).unwrap(), s);
        r.finish().unwrap();
    }

    #[test]
    fn schema_rejects_bad_parameters() {
        let mut s = sample();
        s.kinds[0].fields[0].ty = FieldType::Quant {
            min: 1.0,
            max: 1.0,
            bits: 7,
        };
        assert!(s.validate().is_err());
        let mut s = sample();
        s.kinds[0].fields[2].ty = FieldType::Angle { bits: 17 };
        assert!(s.encode(&mut Vec::new()).is_err());
        // Hand-built wire bytes with bits = 0 are refused by the decoder too.
        let mut out = Vec::new();
        put_f32(&mut out, 1.0);
        out.extend_from_slice(&[1, 1, b'k', 1, 1, b'f', 2, 0]);
        assert!(matches!(
            Schema::decode(&mut Reader::new(&out)),
            Err(DecodeError::Invalid(_))
        ));
        // Unknown field type.
        let n = out.len();
        out[n - 2] = 8;
        assert!(matches!(
            Schema::decode(&mut Reader::new(&out)),
            Err(DecodeError::Invalid(_))
        ));
    }

    #[test]
    fn values_check_their_type() {
        let s = sample();
        let hp = s.kinds[0].fields[0].ty;
        let mut out = Vec::new();
        assert!(hp.encode_value(&FieldValue::Q(127), &mut out).is_ok());
        assert!(hp.encode_value(&FieldValue::Q(128), &mut out).is_err());
        assert!(hp.encode_value(&FieldValue::U(1), &mut out).is_err());
        let label = s.kinds[1].fields[2].ty;
        assert!(label
            .encode_value(&FieldValue::Str("x".repeat(13)), &mut out)
            .is_err());
        assert_eq!(
            FieldType::Bool.decode_value(&mut Reader::new(&[2])),
            Err(DecodeError::Invalid("bool other than 0 or 1"))
        );
        assert_eq!(
            FieldType::Centered {
                range: 1.0,
                bits: 4
            }
            .default_value(),
            FieldValue::Q(8)
        );
        assert_eq!(
            FieldType::Quant {
                min: 5.0,
                max: 6.0,
                bits: 4
            }
            .default_value(),
            FieldValue::Q(0)
        );
        for (i, f) in s.kinds[1].fields.iter().enumerate() {
            let v = f.ty.default_value();
            let mut b = Vec::new();
            f.ty.encode_value(&v, &mut b).unwrap();
            let mut r = Reader::new(&b);
            assert!(
                f.ty.decode_value(&mut r).unwrap().same_bits(&v),
                "field {i}"
            );
            r.finish().unwrap();
        }
    }
}
