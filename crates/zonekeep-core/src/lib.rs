//! Zonekeep's simulation runtime.
//!
//! `zonekeep-core` owns everything that happens inside one zone: the [`Zone`]
//! trait game code implements, the [`ZoneHost`] that runs it at a fixed
//! timestep, per-player input buffers, timers, the seeded RNG, activity tiers,
//! facts and snapshots, the replicated world, interest and replication. It is
//! synchronous and deterministic: time comes from an injected [`Clock`],
//! randomness from the zone's [`ZoneRng`]. It must never depend on tokio,
//! sockets, threads, SQL or the wall clock directly; the server drives it and
//! owns all I/O. It may depend on `zonekeep-protocol`, never the reverse.
//!
//! # The contract
//!
//! [`ZoneHost`] is the one seam between the simulation and whatever drives
//! it (the server, a test, a replay tool), in the manner of a sans-I/O
//! protocol state machine: **calls in, typed outputs polled out**, and time
//! only through the `now` it is handed. It is not generic: the zone's type is
//! erased behind one internal trait object, so a driver holds any kind of
//! zone as a plain `ZoneHost` ([`ZoneKinds`] creates them by name), and
//! [`ZoneHost::zone`] gives typed access back for tests and tools.
//!
//! - **Calls in**: [`ZoneHost::handle_join`], [`ZoneHost::handle_input`]
//!   (returns its [`InputOutcome`], so a driver can answer a refusal),
//!   [`ZoneHost::handle_drop`], [`ZoneHost::handle_rejoin`],
//!   [`ZoneHost::handle_leave`], [`ZoneHost::handle_settlement`],
//!   [`ZoneHost::resync`], [`ZoneHost::set_rtt`], and [`ZoneHost::advance`]`(now)`;
//!   between zones: [`ZoneHost::handle_transfer_in`], [`ZoneHost::handle_transfer_back`],
//!   [`ZoneHost::handle_transfer_done`] ([`transfer`]), [`ZoneHost::handle_message`] and
//!   [`ZoneHost::handle_undeliverable`] ([`message`]).
//! - **Outputs**, each handed out exactly once and never copied into two:
//!   [`ZoneHost::advance`] returns an [`AdvanceReport`] (counters, tick
//!   durations, patch ticks, and the departures, kicks and tier changes since
//!   the previous advance); the streams a driver forwards elsewhere are taken
//!   with `drain_*`: [`ZoneHost::drain_frames`] (one [`Frame`]
//!   `{ player, ack, quiet, bytes }` per connected participant, so no layer
//!   parses back a header the replicator wrote), [`ZoneHost::drain_facts`]
//!   (for a fact sink) and [`ZoneHost::drain_events`] (only for a driver that
//!   does not replicate; otherwise the frames carry the events); for the links
//!   between zones, [`ZoneHost::drain_transfers`], [`ZoneHost::drain_messages`]
//!   and [`ZoneHost::group_changes`].
//! - **On demand**: [`ZoneHost::snapshot`] (a save) and
//!   [`ZoneHost::state_hash`] (tests and replay checks; the tick never
//!   computes it for nobody).
//!
//! Every queue behind an output is bounded, and overflow is counted in the
//! report. The life of a tick is written once, in [`host`].
//!
//! # Concepts
//!
//! - A **zone** is one authoritative simulation. [`ZoneHost::new`] creates it
//!   from a [`ZoneInit`] and a [`ZoneConfig`].
//! - **Participants** join as [`Role::Player`] or [`Role::Observer`]; a lost
//!   connection starts a reconnect grace ([`ZoneHost::handle_drop`],
//!   [`ZoneHost::handle_rejoin`]).
//! - **Inputs** carry a client sequence number; [`Zone::sanitize`] decodes and
//!   clamps them before they are buffered; the [`InputPolicy`] says how many a
//!   tick consumes; [`ZoneHost::last_processed_seq`] is the ack.
//! - **Ticks** run in [`ZoneHost::advance`]; patches follow every
//!   `patch_every`-th tick.
//! - **Lag compensation** is opt-in per zone ([`Zone::lag_compensation`]): the host
//!   then keeps what every subscriber was sent and hands inputs carrying a view
//!   tick to [`Zone::apply_input_at`] with a [`Rewind`] of the world as that
//!   player drew it ([`rewind`]); a driver reports round trips with
//!   [`ZoneHost::set_rtt`]. Zones that do not opt in pay nothing.
//! - **Tiers** ([`Tier`]) slow or pause empty zones and flag dormant ones.
//! - **Transfers** ([`transfer`]) move a player to another zone: the zone asks
//!   with [`Ctx::transfer`], hands its state out in [`Zone::transfer_out`], and
//!   the target takes it in [`Zone::transfer_in`]; a failed move comes back.
//! - **Zone messages** ([`message`]) go from zone to zone or group, deduplicated
//!   by id and delivered at the start of the next tick; a zone may name a parent,
//!   which hears its messages and tier changes in [`Zone::on_child`].
//! - **The world feed** ([`feed`]) carries a zone's world to a replica in
//!   another process (a relay), encoded once per patch, so that the replicator
//!   run over the replica writes each subscriber the bytes the zone's own host
//!   would have written it.
//! - **Relays** ([`relay`]) build the frames of participants whose clients are
//!   connected to them: the host lists each one's ack, view and events per
//!   patch beside the feed, and a [`relay::RelayZone`] builds the same frames
//!   the host would have.
//!
//! # Designed for what comes next
//!
//! Everything a zone is lives behind the contract, so the next capabilities
//! need no new seam:
//!
//! - **Freeze and save**: between two `advance` calls (a tick boundary)
//!   [`ZoneHost::snapshot`] is the zone's whole durable state: the game's
//!   save, the tick, the fact counter and every fact still in flight.
//! - **Move to another host**: [`ZoneKinds::restore`] (or
//!   [`ZoneHost::restore`]) thaws that envelope under the new owner's boot
//!   epoch; in-flight facts come out of `drain_facts` again under their
//!   original keys (the sink's idempotency makes the move exactly-once), and
//!   clients rejoin and start from a BASELINE, so entity ids need not survive.
//! - **Replay**: the host is deterministic (time from `now` and the injected
//!   [`Clock`], randomness from the seeded [`ZoneRng`]), so recording the
//!   calls in (with the `now` of each `advance`) and feeding them to a fresh
//!   host of the same kind, config and seed reproduces every output,
//!   byte for byte; compare [`ZoneHost::state_hash`] after each advance to
//!   find the first divergence. `tests/contract.rs` does exactly this.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use zonekeep_core::{
//!     Claims, Clock, Ctx, InputRefusal, ManualClock, PlayerId, Principal, Role, Zone, ZoneConfig,
//!     ZoneError, ZoneHost, ZoneInit,
//! };
//!
//! /// Each player nudges a shared counter by -1, 0 or +1 per input.
//! struct Counter {
//!     value: i64,
//! }
//!
//! impl Zone for Counter {
//!     type Input = i8;
//!
//!     fn create(_init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
//!         Ok(Counter { value: 0 })
//!     }
//!
//!     fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<i8, InputRefusal> {
//!         match payload {
//!             [b] => Ok((*b as i8).clamp(-1, 1)),
//!             _ => Err(InputRefusal::new(1, "expected one byte")),
//!         }
//!     }
//!
//!     fn on_input(&mut self, _ctx: &mut Ctx<'_>, _p: PlayerId, step: i8) {
//!         self.value += i64::from(step);
//!     }
//!
//!     fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
//!
//!     fn state_hash(&self) -> Option<u64> {
//!         Some(self.value as u64)
//!     }
//! }
//!
//! let clock = ManualClock::new();
//! let init = ZoneInit {
//!     zone_id: "counter-1".into(),
//!     kind: "counter".into(),
//!     params: zonekeep_core::serde_json::Value::Null,
//! };
//! let mut host =
//!     ZoneHost::new::<Counter>(init, ZoneConfig::default(), Arc::new(clock.clone())).unwrap();
//! let alice = host.handle_join(Principal::new("alice"), Claims::new(), Role::Player).unwrap();
//! assert!(host.handle_input(alice, 1, 0, &[5]).is_accepted()); // clamped to +1
//!
//! clock.advance(Duration::from_millis(100)); // three ticks at 30 Hz
//! let report = host.advance(clock.now());
//! assert_eq!(report.ticks_run, 3);
//! assert_eq!(host.zone::<Counter>().unwrap().value, 1);
//! assert_eq!(host.last_processed_seq(alice), Some(1));
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod call;
pub mod character;
pub mod clock;
pub mod config;
pub mod ctx;
pub mod error;
pub mod fact;
pub mod feed;
pub mod hash;
pub mod host;
pub mod image;
pub mod input;
pub mod interest;
pub mod kinds;
pub mod listing;
pub mod message;
pub mod player;
pub mod recording;
pub mod relay;
pub mod replicate;
pub mod report;
pub mod rewind;
pub mod rng;
pub mod snapshot;
pub mod stages;
pub mod tier;
pub mod timer;
pub mod transfer;
pub mod view;
pub mod world;
pub mod zone;

pub use call::{Call, CallAnswer, CallError, CallKey, CallResult, KEY_REUSED};
pub use character::{CharacterError, CharacterWrite, MAX_CHARACTER_BYTES};
pub use clock::{Clock, CycleClock, ManualClock, SystemClock};
pub use config::ZoneConfig;
pub use ctx::{Ctx, Event, EventTarget, Kick};
pub use error::{ConfigError, JoinError, RejoinError, TimerError, UnknownPlayer, ZoneError};
pub use fact::{Fact, FactError, FactKey, FactOutcome, Settlement};
pub use hash::StateHasher;
pub use host::{Frame, Frames, ZoneHost};
pub use image::ImageError;
pub use input::{InputMeta, InputOutcome, InputPolicy, InputRefusal};
pub use kinds::{ImageFactory, RestoreFactory, ZoneFactory, ZoneKinds};
pub use listing::{Listing, ListingError, MAX_LISTING_BYTES};
pub use message::{
    ChildEvent, Delivery, GroupChange, InboundMessage, MessageFrom, MessageId, MessageTarget,
    OutboundMessage, SendError, TIER_TOPIC,
};
pub use player::{Claims, PlayerId, PlayerInfo, Principal, Role};
pub use replicate::ResumeOutcome;
pub use report::{AdvanceReport, FactRefusals, InputCounters};
pub use rewind::{
    Collider, Hit, HitTarget, LagCompensation, Rewind, Shape, DEFAULT_MAX_VIEW_DELAY,
};
pub use rng::{zone_rng, ZoneRng};
pub use snapshot::{RestoreError, SavedLinks, SavedParticipant, Snapshot, SnapshotError};
pub use stages::{Stage, StageClock, StageDurations, StageSummary, StageTimes};
pub use tier::{IdlePolicy, Tier, TierTransition};
pub use timer::{TimerId, Timers};
pub use transfer::{Arrival, TransferError, TransferRequest};
pub use view::ReplicationSettings;
pub use world::{EntityId, KindId, World, WorldError};
pub use zone::{JoinRefusal, LeaveReason, Zone, ZoneInit};

/// Re-exported so zones can use [`ZoneRng`] (`rand_core::RngCore`) without a
/// separate, possibly mismatched, dependency.
pub use rand_core;
/// Re-exported for [`Claims`] and [`ZoneInit::params`].
pub use serde_json;
