//! Typed field setters and getters. Setters quantize on write, so the stored value is exactly what a
//! client decodes, and stamp the field only when the stored value really changes.

use super::{EntityId, World, WorldError};
use zonekeep_protocol::schema::{FieldType, FieldValue};

fn type_name(t: &FieldType) -> &'static str {
    match t {
        FieldType::Quant { .. } => "quant",
        FieldType::Centered { .. } => "centered",
        FieldType::Angle { .. } => "angle",
        FieldType::UInt => "uint",
        FieldType::SInt => "sint",
        FieldType::Bool => "bool",
        FieldType::Str { .. } => "str",
        FieldType::F32 => "f32",
    }
}

impl World {
    /// The index of the field called `name` in `id`'s kind.
    pub fn field_index(&self, id: EntityId, name: &str) -> Result<usize, WorldError> {
        let i = self.index(id)?;
        let kind = self.kind_of[i];
        self.kinds
            .get(kind as usize)
            .and_then(|k| k.field_index(name))
            .ok_or_else(|| WorldError::UnknownFieldName {
                kind,
                name: name.to_owned(),
            })
    }

    fn field_type(&self, i: usize, field: usize) -> Result<FieldType, WorldError> {
        let kind = self.kind_of[i];
        self.kinds
            .get(kind as usize)
            .and_then(|k| k.fields.get(field))
            .map(|f| f.ty)
            .ok_or(WorldError::UnknownField { kind, field })
    }

    /// Stores `v` (already checked against the type) and stamps the field if it changed.
    fn store(&mut self, i: usize, field: usize, v: FieldValue) {
        let Some(slot) = self.values[i].get_mut(field) else {
            return;
        };
        if slot.same_bits(&v) {
            return;
        }
        *slot = v;
        self.version += 1;
        if let Some(c) = self.changed[i].get_mut(field) {
            *c = self.version;
        }
        self.last_change[i] = self.version;
    }

    /// Sets a float field: quant, centered and angle fields store the code clients decode; `f32`
    /// fields store the value exactly.
    pub fn set_f32(&mut self, id: EntityId, field: usize, v: f32) -> Result<(), WorldError> {
        let i = self.index(id)?;
        let ty = self.field_type(i, field)?;
        let value = match ty {
            FieldType::F32 => FieldValue::F32(v),
            _ => match ty.quantize(v) {
                Some(q) => FieldValue::Q(q),
                None => {
                    return Err(WorldError::WrongFieldType {
                        field,
                        expected: type_name(&ty),
                        got: "f32",
                    })
                }
            },
        };
        self.store(i, field, value);
        Ok(())
    }

    fn set_exact(
        &mut self,
        id: EntityId,
        field: usize,
        v: FieldValue,
        got: &'static str,
    ) -> Result<(), WorldError> {
        let i = self.index(id)?;
        let ty = self.field_type(i, field)?;
        let ok = matches!(
            (&ty, &v),
            (FieldType::UInt, FieldValue::U(_))
                | (FieldType::SInt, FieldValue::I(_))
                | (FieldType::Bool, FieldValue::Bool(_))
                | (FieldType::Str { .. }, FieldValue::Str(_))
        );
        if !ok {
            return Err(WorldError::WrongFieldType {
                field,
                expected: type_name(&ty),
                got,
            });
        }
        if let (FieldType::Str { max_len }, FieldValue::Str(s)) = (&ty, &v) {
            if s.len() > usize::from(*max_len) {
                return Err(WorldError::StrTooLong {
                    len: s.len(),
                    max: usize::from(*max_len),
                });
            }
        }
        self.store(i, field, v);
        Ok(())
    }

    /// Sets a `uint` field.
    pub fn set_uint(&mut self, id: EntityId, field: usize, v: u32) -> Result<(), WorldError> {
        self.set_exact(id, field, FieldValue::U(v), "uint")
    }

    /// Sets a `sint` field.
    pub fn set_int(&mut self, id: EntityId, field: usize, v: i32) -> Result<(), WorldError> {
        self.set_exact(id, field, FieldValue::I(v), "sint")
    }

    /// Sets a `bool` field.
    pub fn set_bool(&mut self, id: EntityId, field: usize, v: bool) -> Result<(), WorldError> {
        self.set_exact(id, field, FieldValue::Bool(v), "bool")
    }

    /// Sets a `str` field (at most the field's `max_len` bytes).
    pub fn set_str(&mut self, id: EntityId, field: usize, v: &str) -> Result<(), WorldError> {
        let i = self.index(id)?;
        if let Some(FieldValue::Str(cur)) = self.values[i].get(field) {
            if cur == v {
                // Avoid allocating when nothing changes (the common case for names and labels).
                return self.field_type(i, field).map(|_| ());
            }
        }
        self.set_exact(id, field, FieldValue::Str(v.to_owned()), "str")
    }

    /// The stored value of a field (quantized fields as their code).
    pub fn field(&self, id: EntityId, field: usize) -> Result<&FieldValue, WorldError> {
        let i = self.index(id)?;
        self.field_type(i, field)?;
        self.values[i].get(field).ok_or(WorldError::UnknownField {
            kind: self.kind_of[i],
            field,
        })
    }

    /// A float field as clients decode it (quant, centered, angle or `f32`).
    pub fn get_f32(&self, id: EntityId, field: usize) -> Result<f32, WorldError> {
        let i = self.index(id)?;
        let ty = self.field_type(i, field)?;
        match self.values[i].get(field) {
            Some(FieldValue::F32(v)) => Ok(*v),
            Some(FieldValue::Q(q)) => ty.dequantize(*q).ok_or(WorldError::WrongFieldType {
                field,
                expected: type_name(&ty),
                got: "f32",
            }),
            _ => Err(WorldError::WrongFieldType {
                field,
                expected: type_name(&ty),
                got: "f32",
            }),
        }
    }

    /// A `uint` field.
    pub fn get_uint(&self, id: EntityId, field: usize) -> Result<u32, WorldError> {
        match self.field(id, field)? {
            FieldValue::U(v) => Ok(*v),
            other => Err(self.mismatch(field, other, "uint")),
        }
    }

    /// A `sint` field.
    pub fn get_int(&self, id: EntityId, field: usize) -> Result<i32, WorldError> {
        match self.field(id, field)? {
            FieldValue::I(v) => Ok(*v),
            other => Err(self.mismatch(field, other, "sint")),
        }
    }

    /// A `bool` field.
    pub fn get_bool(&self, id: EntityId, field: usize) -> Result<bool, WorldError> {
        match self.field(id, field)? {
            FieldValue::Bool(v) => Ok(*v),
            other => Err(self.mismatch(field, other, "bool")),
        }
    }

    /// A `str` field.
    pub fn get_str(&self, id: EntityId, field: usize) -> Result<&str, WorldError> {
        match self.field(id, field)? {
            FieldValue::Str(v) => Ok(v),
            other => Err(self.mismatch(field, other, "str")),
        }
    }

    fn mismatch(&self, field: usize, v: &FieldValue, got: &'static str) -> WorldError {
        let expected = match v {
            FieldValue::Q(_) => "quantized",
            FieldValue::U(_) => "uint",
            FieldValue::I(_) => "sint",
            FieldValue::Bool(_) => "bool",
            FieldValue::Str(_) => "str",
            FieldValue::F32(_) => "f32",
        };
        WorldError::WrongFieldType {
            field,
            expected,
            got,
        }
    }
}
