//! Making a host: a zone created afresh ([`ZoneHost::new`]), or restored from a snapshot
//! ([`ZoneHost::restore`]) with its participants readmitted as dropped. (A host built from a
//! zone image is in `image.rs`.)

use std::collections::BTreeMap;
use std::sync::Arc;

use super::frames::FrameQueue;
use super::slot::{Slot, ZoneSlot};
use super::{Core, Pending, ZoneHost};
use crate::call::CallBook;
use crate::character::CharacterBook;
use crate::clock::Clock;
use crate::config::ZoneConfig;
use crate::ctx::{Ctx, Outputs};
use crate::error::ZoneError;
use crate::fact::FactBook;
use crate::message::Mailbox;
use crate::player::{PlayerId, PlayerInfo, Role, Roster};
use crate::replicate::{BuildStats, ReplicationConfig, Replicator};
use crate::rewind::RewindHistory;
use crate::rng::zone_rng;
use crate::snapshot::{RestoreError, Snapshot};
use crate::tier::TierState;
use crate::timer::Timers;
use crate::transfer::Transfers;
use crate::view::ViewRequests;
use crate::world::World;
use crate::zone::{Zone, ZoneInit};

impl ZoneHost {
    /// Validate `config`, seed the RNG from `(config.world_seed, init.zone_id)`
    /// and create a zone of type `Z`. The tick schedule starts at `clock.now()`.
    /// The boot epoch is 0; a host that persists facts uses
    /// [`with_boot_epoch`](ZoneHost::with_boot_epoch).
    pub fn new<Z: Zone>(
        init: ZoneInit,
        config: ZoneConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, ZoneError> {
        Self::with_boot_epoch::<Z>(init, config, clock, 0)
    }

    /// Like [`new`](ZoneHost::new), with the owner epoch this host runs under
    /// (the store's claim epoch). It becomes part of generated fact keys, so
    /// keys never repeat across restarts.
    pub fn with_boot_epoch<Z: Zone>(
        init: ZoneInit,
        config: ZoneConfig,
        clock: Arc<dyn Clock>,
        boot_epoch: u64,
    ) -> Result<Self, ZoneError> {
        Self::create_with(init, config, clock, boot_epoch, Z::create)
    }

    /// Like [`with_boot_epoch`](ZoneHost::with_boot_epoch), with the zone made by `create`
    /// instead of [`Zone::create`]: for game code whose zones are made from data loaded at run
    /// time (a module), which a type's associated function cannot reach.
    pub fn create_with<Z: Zone>(
        init: ZoneInit,
        config: ZoneConfig,
        clock: Arc<dyn Clock>,
        boot_epoch: u64,
        create: impl FnOnce(&ZoneInit, &mut Ctx<'_>) -> Result<Z, ZoneError>,
    ) -> Result<Self, ZoneError> {
        Self::build(init, config, clock, boot_epoch, 0, |init, ctx| {
            Ok(Box::new(Slot::new(create(init, ctx)?)))
        })
    }

    /// Rebuild a zone of type `Z` from an envelope made by [`snapshot`](ZoneHost::snapshot):
    /// the zone comes from [`Zone::restore`], the tick count and fact counter
    /// continue from the snapshot, and every fact that was in flight is queued
    /// again under its original key (so [`drain_facts`](ZoneHost::drain_facts)
    /// returns them for re-sending). `boot_epoch` is the new owner's epoch.
    ///
    /// The saved participants come back as dropped, within their reconnect
    /// grace from now, with their ids and input sequences: each is admitted
    /// through [`Zone::on_join`] (or `on_observe`) and at once
    /// [`Zone::on_drop`], so the zone finds it in its restored state (a zone
    /// keys a returning player's state by principal) and a client resuming
    /// on this host — a deploy moved the zone here — keeps its place with
    /// [`handle_rejoin`](ZoneHost::handle_rejoin). One the zone refuses is
    /// left out. The zone's parent, groups, message deduplication table and undelivered
    /// messages come back with it (delivered at its first tick).
    ///
    /// A save written under another state version than `config.state_version` is read only
    /// through [`Zone::migrate`] from an older one; otherwise the restore fails with
    /// [`RestoreError::StateChanged`] (or [`RestoreError::Migration`] when the migration failed).
    pub fn restore<Z: Zone>(
        init: ZoneInit,
        config: ZoneConfig,
        clock: Arc<dyn Clock>,
        boot_epoch: u64,
        envelope: &[u8],
    ) -> Result<Self, RestoreError> {
        Self::restore_with(
            init,
            config,
            clock,
            boot_epoch,
            envelope,
            Z::restore,
            Z::migrate,
        )
    }

    /// Like [`restore`](ZoneHost::restore), with the zone rebuilt from its saved bytes by
    /// `restore` instead of [`Zone::restore`], and an older state version's bytes migrated by
    /// `migrate` instead of [`Zone::migrate`] (see [`create_with`](ZoneHost::create_with)).
    pub fn restore_with<Z: Zone>(
        init: ZoneInit,
        config: ZoneConfig,
        clock: Arc<dyn Clock>,
        boot_epoch: u64,
        envelope: &[u8],
        restore: impl FnOnce(&ZoneInit, &mut Ctx<'_>, &[u8]) -> Result<Z, ZoneError>,
        migrate: impl FnOnce(u32, &[u8]) -> Result<Vec<u8>, ZoneError>,
    ) -> Result<Self, RestoreError> {
        let (mut snap, links) = Snapshot::decode_with_links(envelope)?;
        snap.zone = migrated(&config, &snap, migrate)?;
        let mut host = Self::build(init, config, clock, boot_epoch, snap.tick, |init, ctx| {
            Ok(Box::new(Slot::new(restore(init, ctx, &snap.zone)?)))
        })?;
        host.core.facts.set_counter(snap.fact_counter);
        for fact in snap.facts {
            host.core.facts.insert(fact);
        }
        for call in snap.calls {
            host.core.calls.insert(call);
        }
        host.core.mail.restore_links(links, snap.boot_epoch);
        host.readmit(snap.next_player, snap.roster, snap.characters);
        Ok(host)
    }

    /// Restored participants, admitted again as dropped (see [`restore`](ZoneHost::restore)).
    /// In a kind whose players bring characters, a player is readmitted only with the character
    /// its host put in the envelope for it ([`Snapshot::characters`]); one without comes back by
    /// joining (see [`crate::character`]).
    fn readmit(
        &mut self,
        next_player: u32,
        roster: Vec<crate::snapshot::SavedParticipant>,
        characters: Vec<(PlayerId, Vec<u8>)>,
    ) {
        let mut characters: BTreeMap<PlayerId, Vec<u8>> = characters.into_iter().collect();
        // The graces run from the restore instant (the schedule's start), so a host restored at
        // one clock reading has one state, which a replay reproduces.
        let now = self.start;
        let mut next = next_player.max(1);
        for p in roster {
            let id = p.id;
            next = next.max(id.0.saturating_add(1));
            let character = characters.remove(&id);
            if self.config.characters && p.role == Role::Player && character.is_none() {
                continue;
            }
            let info = PlayerInfo {
                id,
                principal: p.principal,
                role: p.role,
                claims: p.claims,
                connected: false,
            };
            self.core.roster.insert(id, info.clone());
            self.core.views.insert(id);
            if let Some(data) = character {
                self.core.characters.admit(id, info.principal.clone(), data);
            }
            let verdict = self
                .zone
                .join(&mut self.core.ctx(None), &info, self.config.input_buffer);
            if verdict.is_err() {
                self.core.roster.remove(&id);
                self.core.views.remove(id);
                self.core.out.kicks.retain(|k| k.player != id);
                // Handed back unchanged: the player comes back by joining.
                self.core.characters.refused(id);
                continue;
            }
            if let Some(seq) = p.last_seq {
                self.zone.resume_after(id, seq);
            }
            self.dropped_at.insert(id, now);
            self.zone.on_drop(&mut self.core.ctx(None), id);
        }
        self.next_player = next;
        self.apply_kicks();
    }

    fn build(
        init: ZoneInit,
        config: ZoneConfig,
        clock: Arc<dyn Clock>,
        boot_epoch: u64,
        tick: u64,
        make: impl FnOnce(&ZoneInit, &mut Ctx<'_>) -> Result<Box<dyn ZoneSlot>, ZoneError>,
    ) -> Result<Self, ZoneError> {
        Self::build_with(init, config, clock, boot_epoch, tick, |_| {}, make)
    }

    /// Like `build`, with `prepare` putting state into the host's core before the zone is made
    /// (a zone image brings the world, RNG, timers, facts and roster back).
    pub(super) fn build_with(
        init: ZoneInit,
        config: ZoneConfig,
        clock: Arc<dyn Clock>,
        boot_epoch: u64,
        tick: u64,
        prepare: impl FnOnce(&mut Core),
        make: impl FnOnce(&ZoneInit, &mut Ctx<'_>) -> Result<Box<dyn ZoneSlot>, ZoneError>,
    ) -> Result<Self, ZoneError> {
        config.validate()?;
        let world = World::new(config.replication.pos_step)
            .map_err(|e| ZoneError::Config(crate::error::ConfigError::World(e.to_string())))?;
        let replicator = Replicator::new(ReplicationConfig {
            cell_size: config.replication.cell_size,
            priority_distance: config.replication.priority_distance,
        });
        let start = clock.now();
        let mut core = Core {
            tick,
            dt: config.dt(),
            tier: TierState::new(start),
            rng: zone_rng(config.world_seed, &init.zone_id),
            timers: Timers::new(config.max_timers),
            roster: Roster::new(),
            out: Outputs::new(config.max_pending_events, config.max_pending_event_bytes),
            facts: FactBook::new(&init.zone_id, boot_epoch, config.max_facts_in_flight),
            world,
            views: ViewRequests::default(),
            transfers: Transfers::default(),
            mail: Mailbox::new(&init.zone_id, boot_epoch),
            characters: CharacterBook::default(),
            calls: CallBook::new(config.max_calls_in_flight, config.max_call_bytes),
        };
        prepare(&mut core);
        // The limits come from the config, never from an image: an operator may change them.
        core.world.set_max_entities(config.max_entities);
        core.facts.set_limits(crate::fact::FactLimits {
            max_bytes: config.max_fact_bytes,
            per_second: config.max_facts_per_second,
            window_ticks: u64::from(config.tick_hz),
        });
        let zone = make(&init, &mut core.ctx(None))?;
        let rewind = zone
            .lag_compensation()
            .map(|lc| RewindHistory::new(&lc, core.dt, config.replication.pos_step));
        Ok(Self {
            init,
            config,
            clock,
            zone,
            core,
            dropped_at: super::graces::Graces::default(),
            next_player: 1,
            start,
            next_slot: 1,
            ticked_at_once: false,
            idle_phase: 0,
            pending: Pending::default(),
            disposed: false,
            replicator,
            patch_due: false,
            frames: FrameQueue::default(),
            last_build: BuildStats::default(),
            last_patch: 0,
            held: Default::default(),
            rewind,
            relays: Default::default(),
            recorder: None,
            touched: false,
            build: String::new(),
            stage_clock: None,
            stages: crate::stages::StageTimes::new(),
            stage_pending: crate::stages::StageDurations::default(),
            stage_builds: 0,
        })
    }
}

/// The zone's saved bytes as this kind's state version reads them: the save's own when its
/// version is the kind's, else what `migrate` makes of an older version's. A newer version than
/// the kind's (a build rolled back) or one `migrate` has no migration from is
/// [`RestoreError::StateChanged`]; a migration that fails is [`RestoreError::Migration`].
fn migrated(
    config: &ZoneConfig,
    snap: &Snapshot,
    migrate: impl FnOnce(u32, &[u8]) -> Result<Vec<u8>, ZoneError>,
) -> Result<Vec<u8>, RestoreError> {
    let (saved, current) = (snap.state_version, config.state_version);
    let changed = || RestoreError::StateChanged {
        saved,
        current,
        build: snap.build.clone(),
    };
    if saved == current {
        return Ok(snap.zone.clone());
    }
    if saved > current {
        return Err(changed());
    }
    match migrate(saved, &snap.zone) {
        Ok(bytes) => Ok(bytes),
        Err(ZoneError::NoMigration(_)) => Err(changed()),
        Err(e) => Err(RestoreError::Migration {
            from: saved,
            to: current,
            reason: e.to_string(),
        }),
    }
}
