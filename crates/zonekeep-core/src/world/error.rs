//! World errors.

use thiserror::Error;

/// What a world operation refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum WorldError {
    /// The id is not a live entity.
    #[error("unknown entity {0}")]
    UnknownEntity(u32),
    /// The kind was never declared.
    #[error("unknown kind {0}")]
    UnknownKind(u32),
    /// The kind has no field with this index.
    #[error("kind {kind} has no field {field}")]
    UnknownField {
        /// Kind index.
        kind: u32,
        /// Field index asked for.
        field: usize,
    },
    /// The kind has no field with this name.
    #[error("kind {kind} has no field named {name:?}")]
    UnknownFieldName {
        /// Kind index.
        kind: u32,
        /// Name asked for.
        name: String,
    },
    /// The setter or getter does not match the field's type.
    #[error("field {field} is {expected}, not {got}")]
    WrongFieldType {
        /// Field index.
        field: usize,
        /// The field's declared type.
        expected: &'static str,
        /// What the call tried to use.
        got: &'static str,
    },
    /// A string value longer than the field's `max_len`.
    #[error("string of {len} bytes exceeds the field's max of {max}")]
    StrTooLong {
        /// Value length in bytes.
        len: usize,
        /// The field's limit.
        max: usize,
    },
    /// The kind definition breaks a schema rule.
    #[error("invalid kind: {0}")]
    InvalidKind(&'static str),
    /// Kinds must be declared before the first spawn (clients already hold the schema).
    #[error("kinds must be declared before the first spawn")]
    SchemaFrozen,
    /// More kinds than a schema may carry.
    #[error("too many kinds (the schema allows 64)")]
    TooManyKinds,
    /// The zone already holds its most live entities
    /// ([`ZoneConfig::max_entities`](crate::ZoneConfig::max_entities)); the spawn is refused
    /// and counted.
    #[error("entity cap reached: the zone holds its max_entities of {cap} live entities")]
    EntityCap {
        /// The configured cap.
        cap: usize,
    },
    /// All 2^32 ids were issued.
    #[error("entity ids exhausted")]
    IdsExhausted,
    /// The position step is not finite and > 0.
    #[error("invalid pos_step {0}")]
    InvalidPosStep(f32),
}
