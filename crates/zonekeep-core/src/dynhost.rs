//! Object-safe host interface and the zone-kind registry, so a server can
//! hold many kinds of zone as `Box<dyn AnyZoneHost>`.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::Clock;
use crate::config::ZoneConfig;
use crate::ctx::Event;
use crate::error::{JoinError, RejoinError, UnknownPlayer, ZoneError};
use crate::fact::{Fact, Settlement};
use crate::host::ZoneHost;
use crate::input::InputOutcome;
use crate::player::{Claims, PlayerId, PlayerInfo, Principal, Role};
use crate::replicate::{BuildStats, ReplicateError};
use crate::report::AdvanceReport;
use crate::snapshot::RestoreError;
use crate::tier::Tier;
use crate::world::World;
use crate::zone::{LeaveReason, Zone, ZoneInit};
use zonekeep_protocol::schema::Schema;

/// [`ZoneHost`]'s operations without its type parameter. Each method behaves
/// exactly as the `ZoneHost` method of the same name.
pub trait AnyZoneHost: Send {
    /// The zone's id.
    fn zone_id(&self) -> &str;
    /// The zone's kind.
    fn kind(&self) -> &str;
    /// The configuration in force.
    fn config(&self) -> &ZoneConfig;
    /// See [`ZoneHost::join`].
    fn join(
        &mut self,
        principal: Principal,
        claims: Claims,
        role: Role,
    ) -> Result<PlayerId, JoinError>;
    /// See [`ZoneHost::drop_player`].
    fn drop_player(&mut self, id: PlayerId) -> Result<(), UnknownPlayer>;
    /// See [`ZoneHost::rejoin`].
    fn rejoin(&mut self, id: PlayerId) -> Result<(), RejoinError>;
    /// See [`ZoneHost::leave`].
    fn leave(&mut self, id: PlayerId, why: LeaveReason) -> Result<(), UnknownPlayer>;
    /// See [`ZoneHost::push_input`].
    fn push_input(
        &mut self,
        id: PlayerId,
        seq: u32,
        view_tick: u32,
        payload: &[u8],
    ) -> InputOutcome;
    /// See [`ZoneHost::advance`].
    fn advance(&mut self, now: Duration) -> AdvanceReport;
    /// See [`ZoneHost::last_processed_seq`].
    fn last_processed_seq(&self, id: PlayerId) -> Option<u32>;
    /// See [`ZoneHost::tick`].
    fn tick(&self) -> u64;
    /// See [`ZoneHost::tier`].
    fn tier(&self) -> Tier;
    /// See [`ZoneHost::players`].
    fn players(&self) -> Box<dyn Iterator<Item = &PlayerInfo> + '_>;
    /// See [`ZoneHost::player`].
    fn player(&self, id: PlayerId) -> Option<&PlayerInfo>;
    /// See [`ZoneHost::is_patch_tick`].
    fn is_patch_tick(&self, tick: u64) -> bool;
    /// See [`ZoneHost::state_hash`].
    fn state_hash(&self) -> Option<u64>;
    /// See [`ZoneHost::take_events`].
    fn take_events(&mut self) -> Vec<Event>;
    /// See [`ZoneHost::dispose`].
    fn dispose(&mut self);
    /// See [`ZoneHost::next_tick_due`].
    fn next_tick_due(&self) -> Duration;
    /// See [`ZoneHost::is_disposed`].
    fn is_disposed(&self) -> bool;
    /// See [`ZoneHost::boot_epoch`].
    fn boot_epoch(&self) -> u64;
    /// See [`ZoneHost::take_facts`].
    fn take_facts(&mut self) -> Vec<Fact>;
    /// See [`ZoneHost::facts_in_flight`].
    fn facts_in_flight(&self) -> usize;
    /// See [`ZoneHost::settle`].
    fn settle(&mut self, settlement: Settlement);
    /// See [`ZoneHost::snapshot`].
    fn snapshot(&self) -> Option<Vec<u8>>;
    /// See [`ZoneHost::schema`].
    fn schema(&self) -> Schema;
    /// See [`ZoneHost::world`].
    fn world(&self) -> &World;
    /// See [`ZoneHost::build_frames`].
    fn build_frames(
        &mut self,
        sink: &mut dyn FnMut(PlayerId, &[u8]),
    ) -> Result<BuildStats, ReplicateError>;
    /// See [`ZoneHost::resync`].
    fn resync(&mut self, id: PlayerId);
    /// See [`ZoneHost::known_set_check`].
    fn known_set_check(&self, id: PlayerId) -> Option<(u32, u32)>;
    /// See [`ZoneHost::last_build_stats`].
    fn last_build_stats(&self) -> BuildStats;
    /// For downcasting to the concrete `ZoneHost<Z>`.
    fn as_any(&self) -> &dyn Any;
    /// For downcasting to the concrete `ZoneHost<Z>`, mutably.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<Z: Zone> AnyZoneHost for ZoneHost<Z> {
    fn zone_id(&self) -> &str {
        &self.init().zone_id
    }
    fn kind(&self) -> &str {
        &self.init().kind
    }
    fn config(&self) -> &ZoneConfig {
        ZoneHost::config(self)
    }
    fn join(
        &mut self,
        principal: Principal,
        claims: Claims,
        role: Role,
    ) -> Result<PlayerId, JoinError> {
        ZoneHost::join(self, principal, claims, role)
    }
    fn drop_player(&mut self, id: PlayerId) -> Result<(), UnknownPlayer> {
        ZoneHost::drop_player(self, id)
    }
    fn rejoin(&mut self, id: PlayerId) -> Result<(), RejoinError> {
        ZoneHost::rejoin(self, id)
    }
    fn leave(&mut self, id: PlayerId, why: LeaveReason) -> Result<(), UnknownPlayer> {
        ZoneHost::leave(self, id, why)
    }
    fn push_input(
        &mut self,
        id: PlayerId,
        seq: u32,
        view_tick: u32,
        payload: &[u8],
    ) -> InputOutcome {
        ZoneHost::push_input(self, id, seq, view_tick, payload)
    }
    fn advance(&mut self, now: Duration) -> AdvanceReport {
        ZoneHost::advance(self, now)
    }
    fn last_processed_seq(&self, id: PlayerId) -> Option<u32> {
        ZoneHost::last_processed_seq(self, id)
    }
    fn tick(&self) -> u64 {
        ZoneHost::tick(self)
    }
    fn tier(&self) -> Tier {
        ZoneHost::tier(self)
    }
    fn players(&self) -> Box<dyn Iterator<Item = &PlayerInfo> + '_> {
        Box::new(ZoneHost::players(self))
    }
    fn player(&self, id: PlayerId) -> Option<&PlayerInfo> {
        ZoneHost::player(self, id)
    }
    fn is_patch_tick(&self, tick: u64) -> bool {
        ZoneHost::is_patch_tick(self, tick)
    }
    fn state_hash(&self) -> Option<u64> {
        ZoneHost::state_hash(self)
    }
    fn take_events(&mut self) -> Vec<Event> {
        ZoneHost::take_events(self)
    }
    fn dispose(&mut self) {
        ZoneHost::dispose(self)
    }
    fn next_tick_due(&self) -> Duration {
        ZoneHost::next_tick_due(self)
    }
    fn is_disposed(&self) -> bool {
        ZoneHost::is_disposed(self)
    }
    fn boot_epoch(&self) -> u64 {
        ZoneHost::boot_epoch(self)
    }
    fn take_facts(&mut self) -> Vec<Fact> {
        ZoneHost::take_facts(self)
    }
    fn facts_in_flight(&self) -> usize {
        ZoneHost::facts_in_flight(self)
    }
    fn settle(&mut self, settlement: Settlement) {
        ZoneHost::settle(self, settlement)
    }
    fn snapshot(&self) -> Option<Vec<u8>> {
        ZoneHost::snapshot(self)
    }
    fn schema(&self) -> Schema {
        ZoneHost::schema(self)
    }
    fn world(&self) -> &World {
        ZoneHost::world(self)
    }
    fn build_frames(
        &mut self,
        sink: &mut dyn FnMut(PlayerId, &[u8]),
    ) -> Result<BuildStats, ReplicateError> {
        ZoneHost::build_frames(self, sink)
    }
    fn resync(&mut self, id: PlayerId) {
        ZoneHost::resync(self, id)
    }
    fn known_set_check(&self, id: PlayerId) -> Option<(u32, u32)> {
        ZoneHost::known_set_check(self, id)
    }
    fn last_build_stats(&self) -> BuildStats {
        ZoneHost::last_build_stats(self)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Builds a boxed host for one zone kind, under a boot epoch (see
/// [`ZoneHost::with_boot_epoch`]).
pub type ZoneFactory =
    fn(ZoneInit, ZoneConfig, Arc<dyn Clock>, u64) -> Result<Box<dyn AnyZoneHost>, ZoneError>;

/// Rebuilds a boxed host of one zone kind from a snapshot envelope (see
/// [`ZoneHost::restore`]).
pub type RestoreFactory = fn(
    ZoneInit,
    ZoneConfig,
    Arc<dyn Clock>,
    u64,
    &[u8],
) -> Result<Box<dyn AnyZoneHost>, RestoreError>;

fn factory_for<Z: Zone>(
    init: ZoneInit,
    config: ZoneConfig,
    clock: Arc<dyn Clock>,
    boot_epoch: u64,
) -> Result<Box<dyn AnyZoneHost>, ZoneError> {
    Ok(Box::new(ZoneHost::<Z>::with_boot_epoch(
        init, config, clock, boot_epoch,
    )?))
}

fn restore_for<Z: Zone>(
    init: ZoneInit,
    config: ZoneConfig,
    clock: Arc<dyn Clock>,
    boot_epoch: u64,
    envelope: &[u8],
) -> Result<Box<dyn AnyZoneHost>, RestoreError> {
    Ok(Box::new(ZoneHost::<Z>::restore(
        init, config, clock, boot_epoch, envelope,
    )?))
}

#[derive(Debug, Clone, Copy)]
struct KindEntry {
    create: ZoneFactory,
    restore: Option<RestoreFactory>,
}

/// Maps zone kind names to factories.
#[derive(Debug, Clone, Default)]
pub struct ZoneKinds {
    factories: BTreeMap<String, KindEntry>,
}

impl ZoneKinds {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Register `Z` under `kind` (replacing any earlier registration).
    pub fn register<Z: Zone>(&mut self, kind: impl Into<String>) -> &mut Self {
        self.factories.insert(
            kind.into(),
            KindEntry {
                create: factory_for::<Z>,
                restore: Some(restore_for::<Z>),
            },
        );
        self
    }

    /// Register a custom factory under `kind`; zones of that kind cannot be
    /// restored from a snapshot.
    pub fn register_factory(&mut self, kind: impl Into<String>, factory: ZoneFactory) -> &mut Self {
        self.factories.insert(
            kind.into(),
            KindEntry {
                create: factory,
                restore: None,
            },
        );
        self
    }

    /// Whether `kind` is registered.
    pub fn contains(&self, kind: &str) -> bool {
        self.factories.contains_key(kind)
    }

    /// Registered kind names, sorted.
    pub fn kinds(&self) -> impl Iterator<Item = &str> + '_ {
        self.factories.keys().map(String::as_str)
    }

    /// Create a host for `init.kind` (boot epoch 0).
    pub fn create(
        &self,
        init: ZoneInit,
        config: ZoneConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Box<dyn AnyZoneHost>, ZoneError> {
        self.create_at(init, config, clock, 0)
    }

    /// Create a host for `init.kind` under `boot_epoch` (the owner's claim epoch).
    pub fn create_at(
        &self,
        init: ZoneInit,
        config: ZoneConfig,
        clock: Arc<dyn Clock>,
        boot_epoch: u64,
    ) -> Result<Box<dyn AnyZoneHost>, ZoneError> {
        let entry = self
            .factories
            .get(&init.kind)
            .ok_or_else(|| ZoneError::UnknownKind(init.kind.clone()))?;
        (entry.create)(init, config, clock, boot_epoch)
    }

    /// Rebuild a host for `init.kind` from a snapshot envelope; see [`ZoneHost::restore`].
    pub fn restore(
        &self,
        init: ZoneInit,
        config: ZoneConfig,
        clock: Arc<dyn Clock>,
        boot_epoch: u64,
        envelope: &[u8],
    ) -> Result<Box<dyn AnyZoneHost>, RestoreError> {
        let entry = self
            .factories
            .get(&init.kind)
            .ok_or_else(|| ZoneError::UnknownKind(init.kind.clone()))?;
        let restore = entry
            .restore
            .ok_or_else(|| ZoneError::NotRestorable(init.kind.clone()))?;
        restore(init, config, clock, boot_epoch, envelope)
    }
}
