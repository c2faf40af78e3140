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

use std::collections::BTreeSet;

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

fn check_name(name: &str, upper: bool) -> Result<(), ContractError> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| {
        if upper {
            c.is_ascii_uppercase()
        } else {
            c.is_ascii_lowercase()
        }
    });
    let rest_ok = chars.all(|c| {
        c == '_'
            || c.is_ascii_digit()
            || if upper {
                c.is_ascii_uppercase()
            } else {
                c.is_ascii_lowercase()
            }
    });
    if !first_ok || !rest_ok || name.len() > MAX_NAME_LEN {
        return Err(ContractError::BadName(name.to_owned()));
    }
    Ok(())
}

fn check_doc(doc: &str) -> Result<(), ContractError> {
    if doc.len() > MAX_DOC_LEN {
        return Err(ContractError::TooMany {
            what: "a doc text",
            limit: MAX_DOC_LEN,
        });
    }
    Ok(())
}

fn too_many(what: &'static str, len: usize, limit: usize) -> Result<(), ContractError> {
    if len > limit {
        return Err(ContractError::TooMany { what, limit });
    }
    Ok(())
}

fn unique<'a>(names: impl Iterator<Item = &'a str>) -> Result<(), ContractError> {
    let mut seen = BTreeSet::new();
    for n in names {
        if !seen.insert(n) {
            return Err(ContractError::Duplicate(n.to_owned()));
        }
    }
    Ok(())
}

fn check_values(item: &str, values: &[ValueDef]) -> Result<(), ContractError> {
    too_many("values of one input or event", values.len(), MAX_VALUES)?;
    unique(values.iter().map(|v| v.name.as_str()))?;
    let placement = |value: &ValueDef, why| ContractError::Placement {
        item: item.to_owned(),
        value: value.name.clone(),
        why,
    };
    let mut optional_seen = false;
    for (i, v) in values.iter().enumerate() {
        check_name(&v.name, false)?;
        check_doc(&v.doc)?;
        if v.ty.is_rest() && i + 1 != values.len() {
            return Err(placement(v, "a rest type must be the last value"));
        }
        if v.optional && v.ty.width().is_none() {
            return Err(placement(v, "only fixed-width values can be optional"));
        }
        if optional_seen && !v.optional {
            return Err(placement(
                v,
                "every value after an optional one must be optional",
            ));
        }
        optional_seen |= v.optional;
    }
    Ok(())
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

    /// Checks names, limits, tags, topics and where each value may stand.
    pub fn validate(&self) -> Result<(), ContractError> {
        too_many("inputs", self.inputs.len(), MAX_INPUTS)?;
        too_many("events", self.events.len(), MAX_EVENTS)?;
        too_many("constants", self.consts.len(), MAX_CONSTS)?;
        unique(self.inputs.iter().map(|i| i.name.as_str()))?;
        unique(self.events.iter().map(|e| e.name.as_str()))?;
        unique(self.consts.iter().map(|c| c.name.as_str()))?;
        let tagged = self.inputs.iter().filter(|i| i.tag.is_some()).count();
        if self.inputs.len() > 1 && tagged != self.inputs.len() {
            return Err(ContractError::Tags("several inputs need a tag each"));
        }
        let mut tags = BTreeSet::new();
        for i in &self.inputs {
            check_name(&i.name, false)?;
            check_doc(&i.doc)?;
            if let Some(t) = i.tag {
                if !tags.insert(t) {
                    return Err(ContractError::Tags("two inputs share a tag"));
                }
            }
            check_values(&i.name, &i.values)?;
        }
        let mut topics = BTreeSet::new();
        for e in &self.events {
            check_name(&e.name, false)?;
            check_doc(&e.doc)?;
            if !topics.insert(e.topic) {
                return Err(ContractError::DuplicateTopic(e.topic));
            }
            check_values(&e.name, &e.values)?;
        }
        for c in &self.consts {
            check_name(&c.name, true)?;
            check_doc(&c.doc)?;
        }
        Ok(())
    }

    /// The contract's bytes (docs/MODULES.md, "The client contract"): the form a module hands
    /// its host.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![CONTRACT_FORMAT];
        put_len(&mut out, self.consts.len());
        for c in &self.consts {
            put_str(&mut out, &c.name);
            out.extend_from_slice(&c.value.to_le_bytes());
            put_str(&mut out, &c.doc);
        }
        put_len(&mut out, self.inputs.len());
        for i in &self.inputs {
            put_str(&mut out, &i.name);
            match i.tag {
                Some(t) => out.extend_from_slice(&[1, t]),
                None => out.push(0),
            }
            put_str(&mut out, &i.doc);
            put_values(&mut out, &i.values);
        }
        put_len(&mut out, self.events.len());
        for e in &self.events {
            put_str(&mut out, &e.name);
            out.extend_from_slice(&e.topic.to_le_bytes());
            put_str(&mut out, &e.doc);
            put_values(&mut out, &e.values);
        }
        out
    }

    /// Reads and validates a contract's bytes; every count is checked against its limit before
    /// anything is allocated for it.
    pub fn decode(bytes: &[u8]) -> Result<Contract, ContractError> {
        let mut r = Bytes { rest: bytes };
        if r.u8()? != CONTRACT_FORMAT {
            return Err(ContractError::Malformed("unknown format byte"));
        }
        let mut contract = Contract::new();
        for _ in 0..r.count(MAX_CONSTS, "constants")? {
            let name = r.str(MAX_NAME_LEN)?;
            let value = i64::from_le_bytes(r.array()?);
            let doc = r.str(MAX_DOC_LEN)?;
            contract.consts.push(ConstDef { name, value, doc });
        }
        for _ in 0..r.count(MAX_INPUTS, "inputs")? {
            let name = r.str(MAX_NAME_LEN)?;
            let tag = match r.u8()? {
                0 => None,
                1 => Some(r.u8()?),
                _ => {
                    return Err(ContractError::Malformed(
                        "an input's tag flag is not 0 or 1",
                    ))
                }
            };
            let doc = r.str(MAX_DOC_LEN)?;
            let values = r.values()?;
            contract.inputs.push(InputDef {
                name,
                tag,
                values,
                doc,
            });
        }
        for _ in 0..r.count(MAX_EVENTS, "events")? {
            let name = r.str(MAX_NAME_LEN)?;
            let topic = u16::from_le_bytes(r.array()?);
            let doc = r.str(MAX_DOC_LEN)?;
            let values = r.values()?;
            contract.events.push(EventDef {
                name,
                topic,
                values,
                doc,
            });
        }
        if !r.rest.is_empty() {
            return Err(ContractError::Malformed("bytes left after the last event"));
        }
        contract.validate()?;
        Ok(contract)
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

fn put_len(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_len(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

fn put_values(out: &mut Vec<u8>, values: &[ValueDef]) {
    put_len(out, values.len());
    for v in values {
        put_str(out, &v.name);
        out.push(v.ty.code());
        out.push(u8::from(v.optional));
        put_str(out, &v.doc);
    }
}

/// A cursor over contract bytes that never reads past them.
struct Bytes<'a> {
    rest: &'a [u8],
}

impl Bytes<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], ContractError> {
        if self.rest.len() < n {
            return Err(ContractError::Malformed("the bytes end early"));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ContractError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, ContractError> {
        Ok(self.array::<1>()?[0])
    }

    fn len(&mut self) -> Result<usize, ContractError> {
        usize::try_from(u32::from_le_bytes(self.array()?))
            .map_err(|_| ContractError::Malformed("a length does not fit"))
    }

    fn count(&mut self, limit: usize, what: &'static str) -> Result<usize, ContractError> {
        let n = self.len()?;
        too_many(what, n, limit)?;
        Ok(n)
    }

    fn str(&mut self, limit: usize) -> Result<String, ContractError> {
        let n = self.len()?;
        too_many("a name or doc text", n, limit)?;
        let bytes = self.take(n)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| ContractError::Malformed("text is not UTF-8"))
    }

    fn values(&mut self) -> Result<Vec<ValueDef>, ContractError> {
        let n = self.count(MAX_VALUES, "values of one input or event")?;
        let mut values = Vec::with_capacity(n);
        for _ in 0..n {
            let name = self.str(MAX_NAME_LEN)?;
            let ty = ValueType::from_code(self.u8()?)
                .ok_or(ContractError::Malformed("unknown value type"))?;
            let optional = match self.u8()? {
                0 => false,
                1 => true,
                _ => return Err(ContractError::Malformed("an optional flag is not 0 or 1")),
            };
            let doc = self.str(MAX_DOC_LEN)?;
            values.push(ValueDef {
                name,
                ty,
                optional,
                doc,
            });
        }
        Ok(values)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn sample() -> Contract {
        Contract::new()
            .constant("DIR_UP", 1, "Up.")
            .constant("MIN", -5, "")
            .input(
                InputDef::new("walk", "Walks.")
                    .value("dir", ValueType::U8, "Direction bits.")
                    .optional("flags", ValueType::U8, "Flag bits."),
            )
            .event(EventDef::new("scored", 1, "Points.").value("amount", ValueType::U32, ""))
            .event(EventDef::new("said", 2, "Text.").value("text", ValueType::RestStr, ""))
    }

    #[test]
    fn a_contract_survives_its_bytes() {
        let c = sample();
        c.validate().unwrap();
        assert_eq!(Contract::decode(&c.encode()).unwrap(), c);
        assert_eq!(
            Contract::decode(&Contract::new().encode()).unwrap(),
            Contract::new()
        );
    }

    #[test]
    fn every_cut_of_the_bytes_is_refused_not_a_panic() {
        let bytes = sample().encode();
        for n in 0..bytes.len() {
            assert!(Contract::decode(&bytes[..n]).is_err(), "cut at {n}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(
            Contract::decode(&long),
            Err(ContractError::Malformed("bytes left after the last event"))
        );
    }

    #[test]
    fn a_huge_count_is_refused_before_allocating() {
        let mut bytes = vec![CONTRACT_FORMAT];
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            Contract::decode(&bytes),
            Err(ContractError::TooMany {
                what: "constants",
                limit: MAX_CONSTS
            })
        );
    }

    #[test]
    fn names_must_be_identifiers() {
        for bad in ["", "Walk", "9lives", "a-b", "a b", "ä"] {
            let c = Contract::new().input(InputDef::new(bad, ""));
            assert_eq!(c.validate(), Err(ContractError::BadName(bad.to_owned())));
        }
        let c = Contract::new().constant("lower", 1, "");
        assert_eq!(c.validate(), Err(ContractError::BadName("lower".into())));
        let long = "a".repeat(65);
        let c = Contract::new().event(EventDef::new(&long, 1, ""));
        assert!(matches!(c.validate(), Err(ContractError::BadName(_))));
    }

    #[test]
    fn duplicates_and_shared_topics_are_refused() {
        let c = Contract::new()
            .event(EventDef::new("a", 1, ""))
            .event(EventDef::new("b", 1, ""));
        assert_eq!(c.validate(), Err(ContractError::DuplicateTopic(1)));
        let c = Contract::new()
            .event(EventDef::new("a", 1, ""))
            .event(EventDef::new("a", 2, ""));
        assert_eq!(c.validate(), Err(ContractError::Duplicate("a".into())));
        let c = Contract::new().input(InputDef::new("a", "").value("x", ValueType::U8, "").value(
            "x",
            ValueType::U8,
            "",
        ));
        assert_eq!(c.validate(), Err(ContractError::Duplicate("x".into())));
    }

    #[test]
    fn several_inputs_need_distinct_tags() {
        let untagged = Contract::new()
            .input(InputDef::new("a", "").tagged(1))
            .input(InputDef::new("b", ""));
        assert!(matches!(untagged.validate(), Err(ContractError::Tags(_))));
        let shared = Contract::new()
            .input(InputDef::new("a", "").tagged(1))
            .input(InputDef::new("b", "").tagged(1));
        assert!(matches!(shared.validate(), Err(ContractError::Tags(_))));
        let fine = Contract::new()
            .input(InputDef::new("a", "").tagged(1))
            .input(InputDef::new("b", "").tagged(2));
        assert_eq!(fine.validate(), Ok(()));
    }

    #[test]
    fn rest_and_optional_values_stand_only_at_the_end() {
        let rest_first = Contract::new().event(
            EventDef::new("e", 1, "")
                .value("text", ValueType::RestStr, "")
                .value("n", ValueType::U8, ""),
        );
        assert!(matches!(
            rest_first.validate(),
            Err(ContractError::Placement { .. })
        ));
        let required_after_optional = Contract::new().input(
            InputDef::new("i", "")
                .optional("a", ValueType::U8, "")
                .value("b", ValueType::U8, ""),
        );
        assert!(matches!(
            required_after_optional.validate(),
            Err(ContractError::Placement { .. })
        ));
        let optional_str =
            Contract::new().input(InputDef::new("i", "").optional("s", ValueType::Str, ""));
        assert!(matches!(
            optional_str.validate(),
            Err(ContractError::Placement { .. })
        ));
    }

    #[test]
    fn every_type_code_round_trips_and_unknown_codes_are_refused() {
        for ty in ValueType::ALL {
            assert_eq!(ValueType::from_code(ty.code()), Some(ty));
        }
        assert_eq!(ValueType::from_code(14), None);
    }
}
