//! Zonekeep's Rust client: a connection to a zone, the client's view of time, an interpolated
//! replica of the entities it sees, prediction of its own entity, and a client-side network
//! simulation. Used by tests, native games and the `zonekeep bench` load bots.
//!
//! It builds on `zonekeep-protocol` for every byte and must never depend on `zonekeep-core` or
//! `zonekeep-server`: a client knows the wire contract, not the host's internals.
//!
//! Start with [`connect`], which returns a [`Connection`] and the zone's `Welcome`; read
//! [`Event`]s from it, feed each [`Patch`] to a [`Replica`] (and the controlled entity's state to a
//! [`Predictor`]), and call [`Replica::frame`] once per rendered frame.
//!
//! The pure parts ([`clock::ClockSync`], [`replica::Replica`], [`predictor::Predictor`],
//! [`netsim::NetSim`]) take time as arguments so tests drive them exactly.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod clock;
pub mod connection;
pub mod error;
pub mod netsim;
pub mod patch;
pub mod predictor;
pub mod replica;

pub use clock::{ClockSync, PongSample};
pub use connection::{
    connect, CloseReason, ConnectOptions, Connection, CountersSnapshot, Event, InputSender,
    ReconnectPolicy, TicketFuture, TicketSource,
};
pub use error::ClientError;
pub use netsim::{NetSim, NetSimConfig, NetSimStats};
pub use patch::{Patch, SpawnedEntity, UpdatedEntity};
pub use predictor::{Predictor, Reconciled, Smoothing};
pub use replica::{EntityView, Replica, ReplicaConfig, Timing};
