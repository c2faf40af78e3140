//! Zonekeep's cross-zone bus: zone messages and transfers between zones, within one host or
//! across a fleet.
//!
//! One API ([`BusHandle`]) with two transports:
//!
//! - **in process** ([`BusHandle::local`]): a host without `--bus`. Envelopes go straight
//!   into the receiving zone's bounded inbox; for a zone not running here the host's
//!   [`ZoneLocator`] decides: unknown ([`BusError::UnknownZone`]), or asleep, when envelopes wait
//!   while the host wakes the zone or refuses them ([`BusHandle::waiting_zones`]).
//! - **NATS JetStream** ([`BusHandle::connect`]): every host of a fleet. See the `nats`
//!   module's notes for the stream, consumers and group bucket.
//!
//! Semantics, whichever the transport: each sender→receiver pair keeps its order; delivery is
//! at least once and receivers deduplicate by [`EnvelopeId`] (the core's dedup table does);
//! every queue is bounded and every refusal is counted in [`BusStats`]. Nothing here ever
//! blocks a simulation thread: sends are `try_send`, inboxes are drained with `try_recv`.
//!
//! This crate knows nothing of zones' code or the host's server: it depends on tokio and
//! async-nats only, and the host (`zonekeep-server`) maps core messages onto it.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod batch;
mod envelope;
mod error;
mod groups;
mod handle;
mod inbox;
pub mod naming;
mod nats;
mod stats;

pub use envelope::{
    valid_name, Body, DecodeError, Envelope, EnvelopeId, Origin, Target, MAX_MESSAGE_PAYLOAD,
    MAX_NAME, MAX_TRANSFER_BYTES,
};
pub use error::BusError;
pub use handle::{BusConfig, BusHandle, Location, OutMessage, TransferDelivery, ZoneLocator};
pub use inbox::{AckToken, Delivered, Undeliverable, ZoneInbox, MAX_PARKED};
pub use stats::BusStats;
