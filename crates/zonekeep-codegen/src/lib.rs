//! Typed client code from a zone kind's schema and contract: `zonekeep codegen`.
//!
//! This crate owns turning a [`KindApi`] (the entity schema a zone of the kind declares, and the
//! [`Contract`] of its inputs, events and constants) into source text for one SDK: TypeScript,
//! C# or Rust. The generated code gives each entity kind a typed record read from the SDK's
//! wire-form field values (quantized fields decoded), binds kind ids from a Welcome's schema and
//! refuses a schema that differs from the one it was generated from, builds input payloads and
//! decodes event payloads.
//!
//! It depends only on `zonekeep-protocol`, for the schema and contract types. It must never
//! depend on a runtime, a host or a store: the binary finds the kind's API (by creating a zone
//! of it) and hands it here; this crate only writes text, the same text for the same API.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod cs;
mod model;
mod names;
mod rust;
mod ts;

use thiserror::Error;
use zonekeep_protocol::contract::{Contract, ContractError};
use zonekeep_protocol::schema::Schema;

/// What clients of one zone kind see: its entity schema and its contract.
#[derive(Debug, Clone, PartialEq)]
pub struct KindApi {
    /// The zone kind's name (the registry key).
    pub kind: String,
    /// The entity schema a zone of the kind declares.
    pub schema: Schema,
    /// Its inputs, events and constants.
    pub contract: Contract,
}

/// The language to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// TypeScript for `@zonekeep/client`.
    Ts,
    /// C# 7.3 for the `Zonekeep` package (Unity, Godot).
    Cs,
    /// Rust for `zonekeep-client`.
    Rust,
}

impl Lang {
    /// The file extension of its sources.
    pub fn extension(self) -> &'static str {
        match self {
            Lang::Ts => "ts",
            Lang::Cs => "cs",
            Lang::Rust => "rs",
        }
    }
}

/// Choices that depend on where the generated code lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The command that wrote the file, repeated in its header so a reader can regenerate it.
    pub command: String,
    /// TypeScript: the module the SDK is imported from (default `@zonekeep/client`).
    pub ts_import: String,
    /// C#: the namespace of the generated classes (default `Zonekeep.Generated`).
    pub cs_namespace: String,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            command: "zonekeep codegen".to_owned(),
            ts_import: "@zonekeep/client".to_owned(),
            cs_namespace: "Zonekeep.Generated".to_owned(),
        }
    }
}

/// Why code could not be written.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CodegenError {
    /// The contract is not valid.
    #[error("the kind's contract is not valid: {0}")]
    Contract(#[from] ContractError),
    /// The schema is not valid.
    #[error("the kind's schema is not valid: {0}")]
    Schema(String),
    /// Two names become the same identifier.
    #[error("{what} `{a}` and `{b}` become the same identifier; rename one")]
    Collision {
        /// Which list the names are in.
        what: String,
        /// One name.
        a: String,
        /// The other.
        b: String,
    },
}

/// Writes the source of `lang` for `api`.
pub fn generate(api: &KindApi, lang: Lang, options: &Options) -> Result<String, CodegenError> {
    let model = model::Model::new(api)?;
    Ok(match lang {
        Lang::Ts => ts::emit(&model, options),
        Lang::Cs => cs::emit(&model, options),
        Lang::Rust => rust::emit(&model, options),
    })
}
