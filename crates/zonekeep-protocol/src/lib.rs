//! Zonekeep wire protocol (version 11; current hosts accept 2 to 11), as specified normatively in `PROTOCOL.md` at the repository root.
//!
//! This crate owns the bytes: varints and other primitives ([`wire`]), the bit-exact quantization rules
//! ([`quant`]), the matchmaker's search states ([`matchmaking`]), the known-set check ([`known`]), the entity schema ([`schema`]), a kind's client contract ([`contract`]), the limits ([`limits`]), the Delta streaming writer and
//! decoder ([`delta`]), every message, the client-side known-set mirror and the client's ring of
//! recent States ([`states`]).
//!
//! It must never depend on I/O, an async runtime, serde or `zonekeep-core`: hosts, clients, fuzzers and the
//! TypeScript SDK's golden fixtures all build on it, and it stays a pure, total codec (no panics on any
//! input, no allocation beyond the declared limits).

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod contract;
pub mod delta;
pub mod error;
pub mod fuzzing;
pub mod known;
pub mod limits;
pub mod matchmaking;
pub mod messages;
pub mod mirror;
pub mod quant;
pub mod schema;
pub mod states;
pub mod wire;

pub use contract::{ConstDef, Contract, ContractError, EventDef, InputDef, ValueDef, ValueType};
pub use delta::{decode_delta, Delta, DeltaHeader, DeltaWriter, PosForm, PosUpdate};
pub use error::{DecodeError, EncodeError};
pub use known::known_set_hash;
pub use messages::{
    Chat, ChatHistory, ChatLine, ChatLines, ChatReply, ChatReplyCode, ChatReport, ClientMessage,
    DeltaContext, Events, Hello, Input, InputRefused, Inputs, Kick, KickCode, KnownSetCheck, Ping,
    Pong, Redirect, ResumeFrom, Resync, Role, ServerMessage, Transfer, Welcome,
};
pub use mirror::{Mirror, MirrorEntity, MirrorError};
pub use schema::{FieldDef, FieldType, FieldValue, KindDef, Schema};
pub use states::{Applied, StateError, StateRing};
