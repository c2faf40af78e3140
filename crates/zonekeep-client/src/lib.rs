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
//! ```no_run
//! use zonekeep_client::{connect, ConnectOptions, Event, Predictor, Replica, ReplicaConfig, Timing};
//!
//! # async fn run() -> Result<(), zonekeep_client::ClientError> {
//! let opts = ConnectOptions::new("<ticket>")
//!     .with_fresh_ticket(|| async { Ok::<_, String>("<fresh ticket from your backend>".to_owned()) });
//! let (mut conn, welcome) = connect("ws://127.0.0.1:7350/zones/arena-1", opts).await?;
//! let mut replica = Replica::new(ReplicaConfig::for_zone(welcome.tick_hz, welcome.patch_every));
//! // The game's own movement rule, shared with the zone.
//! let mut predictor = Predictor::new(|pos: &(f32, f32), dx: &f32| (pos.0 + dx, pos.1));
//! let seq = conn.send_input(b"\x01")?;
//! predictor.record(seq, 1.0);
//! while let Some(event) = conn.recv().await {
//!     match event {
//!         Event::Delta(patch) => {
//!             replica.apply(&patch);
//!             // How late patches arrive sizes the interpolation delay.
//!             if let Some(now) = conn.server_tick_now() {
//!                 replica.note_arrival(patch.tick, now);
//!             }
//!             if let Some(me) = patch.spawns.iter().find(|s| s.id == 5) {
//!                 predictor.reconcile(patch.ack, (me.x, me.y), conn.now_us());
//!             }
//!         }
//!         Event::Welcome { resumed: false, .. } => predictor.reset(),
//!         Event::Closed(_) => break,
//!         _ => {}
//!     }
//!     if let Some(t) = Timing::from_clock(&conn.clock(), conn.now_us()) {
//!         replica.frame(t);
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! To be placed in a match by the matchmaker (docs/MATCHMAKING.md), call [`matchmake()`] (or
//! [`matchmake_and_connect`], which also joins the match's zone).
//!
//! The pure parts ([`clock::ClockSync`], [`replica::Replica`], [`predictor::Predictor`],
//! [`netsim::NetSim`]) take time as arguments so tests drive them exactly.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod clock;
pub mod connection;
pub mod error;
pub mod lobby;
pub mod matchmake;
pub mod netsim;
pub mod patch;
pub mod payload;
pub mod predictor;
pub mod replica;

/// The wire protocol this client speaks: its schema, field values and quantization are what code
/// written by `zonekeep codegen` reads entities with.
pub use zonekeep_protocol as protocol;

pub use clock::{ClockSync, PongSample};
pub use connection::{
    connect, CloseReason, ConnectOptions, Connection, CountersSnapshot, Event, InputSender,
    ReconnectPolicy, TicketFuture, TicketSource, TransferEvent, Transport,
};
pub use error::ClientError;
pub use lobby::{Seat, SeatError};
pub use matchmake::{
    matchmake, matchmake_and_connect, Assignment, MatchCancel, MatchError, MatchOptions, Matched,
    Matchmaker, Probe, Search, SearchState, SearchTracker,
};
pub use netsim::{NetSim, NetSimConfig, NetSimStats};
pub use patch::{Patch, SpawnedEntity, UpdatedEntity};
pub use payload::{bind_kind, PayloadError, PayloadReader, PayloadWriter, SchemaMismatch};
pub use predictor::{Predictor, Reconciled, Smoothing};
pub use replica::{EntityView, Replica, ReplicaConfig, Timing};
