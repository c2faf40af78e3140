//! A zone kind's client contract: the layout of its input payloads, its event types and the
//! named constants its clients need. The wire carries inputs and events as opaque bytes
//! (PROTOCOL.md §4.2, §5.3); the contract says what is inside them, so that `zonekeep codegen`
//! can write typed input builders and event decoders for every SDK from one declaration.
//!
//! Payload values use the little-endian encoding of modules' saves and the guest SDK's
//! `Reader`/`Writer` (docs/MODULES.md, "Encoding"): integers and floats fixed-width
//! little-endian, `bool` one byte 0 or 1, `bytes` a `u32` length then the bytes, `str` `bytes`
//! holding UTF-8. Two more types take the rest of a payload without a length, for payloads that
//! end in free text or bytes, and a trailing run of fields may be *optional*: left out when it is
//! all zero, read as zero when absent.

mod codec;
mod validate;

use thiserror::Error;

/// Most inputs a contract declares.
pub const MAX_INPUTS: usize = 64;
/// Most events a contract declares.
pub const MAX_EVENTS: usize = 256;
/// Most constants a contract declares.
pub const MAX_CONSTS: usize = 256;
/// Most values in one input or event.
pub const MAX_VALUES: usize = 32;
/// Longest name, in bytes.
pub const MAX_NAME_LEN: usize = 64;
/// Longest doc text, in bytes.
pub const MAX_DOC_LEN: usize = 1024;
/// The format byte [`Contract::encode`] writes first.
pub const CONTRACT_FORMAT: u8 = 1;

/// The type of one value in an input or event payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueType {
    /// (0) An unsigned byte.
    U8,
    /// (1) An unsigned 16-bit integer.
    U16,
    /// (2) An unsigned 32-bit integer.
    U32,
    /// (3) An unsigned 64-bit integer.
    U64,
    /// (4) A signed byte.
    I8,
    /// (5) A signed 16-bit integer.
    I16,
    /// (6) A signed 32-bit integer.
    I32,
    /// (7) A signed 64-bit integer.
    I64,
    /// (8) An IEEE-754 `f32`.
    F32,
    /// (9) A `bool`: one byte, 0 or 1.
    Bool,
    /// (10) A `u32` length, then that many bytes.
    Bytes,
    /// (11) A `u32` length, then that many bytes of UTF-8.
    Str,
    /// (12) Every byte left in the payload; only the last value.
    RestBytes,
    /// (13) Every byte left in the payload, as UTF-8; only the last value.
    RestStr,
}

impl ValueType {
    /// Every type, in code order.
    pub const ALL: [ValueType; 14] = [
        ValueType::U8,
        ValueType::U16,
        ValueType::U32,
        ValueType::U64,
        ValueType::I8,
        ValueType::I16,
        ValueType::I32,
        ValueType::I64,
        ValueType::F32,
        ValueType::Bool,
        ValueType::Bytes,
        ValueType::Str,
        ValueType::RestBytes,
        ValueType::RestStr,
    ];

    /// The type's code in [`Contract::encode`].
    pub fn code(self) -> u8 {
        match self {
            ValueType::U8 => 0,
            ValueType::U16 => 1,
            ValueType::U32 => 2,
            ValueType::U64 => 3,
            ValueType::I8 => 4,
            ValueType::I16 => 5,
            ValueType::I32 => 6,
            ValueType::I64 => 7,
            ValueType::F32 => 8,
            ValueType::Bool => 9,
            ValueType::Bytes => 10,
            ValueType::Str => 11,
            ValueType::RestBytes => 12,
            ValueType::RestStr => 13,
        }
    }

    /// The type of `code`, if any.
    pub fn from_code(code: u8) -> Option<ValueType> {
        ValueType::ALL.get(usize::from(code)).copied()
    }

    /// Its width in bytes when it has a fixed one.
    pub fn width(self) -> Option<usize> {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => Some(1),
            ValueType::U16 | ValueType::I16 => Some(2),
            ValueType::U32 | ValueType::I32 | ValueType::F32 => Some(4),
            ValueType::U64 | ValueType::I64 => Some(8),
            ValueType::Bytes | ValueType::Str | ValueType::RestBytes | ValueType::RestStr => None,
        }
    }

    /// Whether it takes the rest of the payload.
    pub fn is_rest(self) -> bool {
        matches!(self, ValueType::RestBytes | ValueType::RestStr)
    }

    /// Its name in docs and error messages (`u8`, `rest_str`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ValueType::U8 => "u8",
            ValueType::U16 => "u16",
            ValueType::U32 => "u32",
            ValueType::U64 => "u64",
            ValueType::I8 => "i8",
            ValueType::I16 => "i16",
            ValueType::I32 => "i32",
            ValueType::I64 => "i64",
            ValueType::F32 => "f32",
            ValueType::Bool => "bool",
            ValueType::Bytes => "bytes",
            ValueType::Str => "str",
            ValueType::RestBytes => "rest_bytes",
            ValueType::RestStr => "rest_str",
        }
    }
}

/// One named value of an input or event payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueDef {
    /// `snake_case` name.
    pub name: String,
    /// Its type.
    pub ty: ValueType,
    /// Left out of the payload when it and every value after it are zero (a writer may do so; a
    /// reader takes zero when absent). Only a trailing run of fixed-width values is optional.
    pub optional: bool,
    /// What it means, for generated doc comments.
    pub doc: String,
}

/// One input payload layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputDef {
    /// `snake_case` name.
    pub name: String,
    /// The first byte of the payload that tells this input from the kind's others; `None` when
    /// the kind has one input layout (then the payload is its values only).
    pub tag: Option<u8>,
    /// Its values, in payload order.
    pub values: Vec<ValueDef>,
    /// What it does, for generated doc comments.
    pub doc: String,
}

/// One event type: a topic and its payload layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventDef {
    /// `snake_case` name.
    pub name: String,
    /// The topic events of this type carry.
    pub topic: u16,
    /// Its values, in payload order.
    pub values: Vec<ValueDef>,
    /// What it tells, for generated doc comments.
    pub doc: String,
}

/// A named integer clients need (a bit of a flags value, a refusal code, a limit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConstDef {
    /// `SCREAMING_SNAKE_CASE` name.
    pub name: String,
    /// Its value.
    pub value: i64,
    /// What it means, for generated doc comments.
    pub doc: String,
}

/// What a zone kind's clients send and hear besides entities: see the module docs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contract {
    /// Input layouts: one untagged, or any number each with its own tag.
    pub inputs: Vec<InputDef>,
    /// Event types, each with its own topic.
    pub events: Vec<EventDef>,
    /// Named constants.
    pub consts: Vec<ConstDef>,
}

/// Why a contract is not valid, or its bytes could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ContractError {
    /// A name is not `snake_case` (or `SCREAMING_SNAKE_CASE` for a constant), is empty or is
    /// longer than 64 bytes.
    #[error("`{0}` is not a valid name: lowercase ASCII letters, digits and `_`, starting with a letter, at most 64 bytes (constants in capitals)")]
    BadName(String),
    /// Two items of one list share a name.
    #[error("`{0}` is declared twice")]
    Duplicate(String),
    /// Two events share a topic.
    #[error("topic {0} is declared by two events")]
    DuplicateTopic(u16),
    /// Inputs mix tagged and untagged layouts, share a tag, or several lack one.
    #[error("inputs must be one untagged layout or all tagged with distinct tags: {0}")]
    Tags(&'static str),
    /// A value is placed where its type or optionality does not allow.
    #[error("value `{value}` of `{item}`: {why}")]
    Placement {
        /// The input or event.
        item: String,
        /// The value.
        value: String,
        /// What is wrong.
        why: &'static str,
    },
    /// A list or text is longer than its limit.
    #[error("{what} exceeds its limit of {limit}")]
    TooMany {
        /// Which list or text.
        what: &'static str,
        /// The limit.
        limit: usize,
    },
    /// The bytes ended early, held an unknown code, or had bytes left over.
    #[error("malformed contract bytes: {0}")]
    Malformed(&'static str),
}

impl Contract {
    /// An empty contract (inputs and events undeclared).
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether nothing is declared.
    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty() && self.events.is_empty() && self.consts.is_empty()
    }

    /// Adds an input layout (builder style).
    pub fn input(mut self, input: InputDef) -> Self {
        self.inputs.push(input);
        self
    }

    /// Adds an event type (builder style).
    pub fn event(mut self, event: EventDef) -> Self {
        self.events.push(event);
        self
    }

    /// Adds a constant (builder style).
    pub fn constant(mut self, name: &str, value: i64, doc: &str) -> Self {
        self.consts.push(ConstDef {
            name: name.to_owned(),
            value,
            doc: doc.to_owned(),
        });
        self
    }
}

impl InputDef {
    /// An untagged input layout with no values yet.
    pub fn new(name: &str, doc: &str) -> Self {
        Self {
            name: name.to_owned(),
            tag: None,
            values: Vec::new(),
            doc: doc.to_owned(),
        }
    }

    /// Gives it a tag byte (builder style).
    pub fn tagged(mut self, tag: u8) -> Self {
        self.tag = Some(tag);
        self
    }

    /// Adds a value (builder style).
    pub fn value(mut self, name: &str, ty: ValueType, doc: &str) -> Self {
        self.values.push(ValueDef::new(name, ty, doc));
        self
    }

    /// Adds an optional trailing value (builder style).
    pub fn optional(mut self, name: &str, ty: ValueType, doc: &str) -> Self {
        self.values.push(ValueDef::new(name, ty, doc).optional());
        self
    }
}

impl EventDef {
    /// An event type on `topic` with no values yet.
    pub fn new(name: &str, topic: u16, doc: &str) -> Self {
        Self {
            name: name.to_owned(),
            topic,
            values: Vec::new(),
            doc: doc.to_owned(),
        }
    }

    /// Adds a value (builder style).
    pub fn value(mut self, name: &str, ty: ValueType, doc: &str) -> Self {
        self.values.push(ValueDef::new(name, ty, doc));
        self
    }
}

impl ValueDef {
    /// A required value.
    pub fn new(name: &str, ty: ValueType, doc: &str) -> Self {
        Self {
            name: name.to_owned(),
            ty,
            optional: false,
            doc: doc.to_owned(),
        }
    }

    /// The same value, optional.
    pub fn optional(mut self) -> Self {
        self.optional = true;
        self
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn every_type_code_round_trips_and_unknown_codes_are_refused() {
        for ty in ValueType::ALL {
            assert_eq!(ValueType::from_code(ty.code()), Some(ty));
        }
        assert_eq!(ValueType::from_code(14), None);
    }
}
