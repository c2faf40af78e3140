//! Zonekeep's module host: zone kinds whose game code is WebAssembly, run on wasmtime in a
//! sandbox.
//!
//! A module speaks the ABI of `docs/MODULES.md`: the host calls one export per hook with the
//! hook's input bytes, and the module answers with a command buffer that the host applies to the
//! zone's replicated world and context. The module's own state lives in its linear memory; the
//! world clients are sent lives in the host, as for a native zone.
//!
//! The sandbox: the log is the only import (anything else, WASI included, is refused at load
//! with the import's name); every call runs on a fuel budget (deterministic, so a replay
//! reproduces a budget trap) and a wall-time deadline enforced through the engine's epoch, which
//! also lets the host stop a call from outside; memory and stack are capped. A trap, a panic, a
//! budget overrun or a broken command buffer fails **that zone** ([`Zone::failure`]); the
//! server stops it and every other zone keeps its tick.
//!
//! This crate owns loading and checking modules, instances and their budgets, and the ABI's host
//! side. It depends on `zonekeep-core` and the protocol's schema types, and must never depend on
//! the server, the store or any transport: deploying modules is the server's business.
//!
//! [`Zone::failure`]: zonekeep_core::Zone::failure

mod commands;
mod error;
mod guest;
mod handles;
mod kind;
mod load;
mod sandbox;
mod settings;
mod shape;
pub mod wire;
mod zone;

pub use commands::CommandApplier;
pub use error::{Failure, LoadError};
pub use kind::{register, ModuleKind};
pub use load::{ZoneModule, LOG_IMPORT};
pub use sandbox::{ModuleEngine, Sandbox, EPOCH_PERIOD};
pub use settings::ModuleSettings;
pub use zone::{ModuleZone, FAILED_CODE};
