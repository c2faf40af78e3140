//! Saving a zone: its snapshot envelope, the zone's own requests for a save, and the build of
//! its code every save is stamped with.

use super::ZoneHost;
use crate::snapshot::Snapshot;

impl ZoneHost {
    /// Whether the zone asked for a save since the last call (see [`Ctx::save_now`]); the
    /// request is taken.
    ///
    /// [`Ctx::save_now`]: crate::Ctx::save_now
    pub fn take_save_request(&mut self) -> bool {
        std::mem::take(&mut self.core.out.save_requested)
    }

    /// Names the build of the zone's code (the host's version for a native kind, the module's
    /// content hash for a module): every save records it beside the state version, so an
    /// operator facing a save this code cannot read knows which build wrote it.
    pub fn set_build_id(&mut self, build: impl Into<String>) {
        self.build = build.into();
    }

    /// The build of the zone's code, as [`set_build_id`](ZoneHost::set_build_id) named it (empty
    /// until then).
    pub fn build_id(&self) -> &str {
        &self.build
    }

    /// The zone's state and in-flight facts as a checksummed envelope (see
    /// [`crate::snapshot`]), or `None` when the zone kind is not persisted. The envelope keeps
    /// the participants (except those moving to another zone), the parent, the groups, the
    /// message deduplication table and the messages received and not yet delivered.
    /// Call between two `advance` calls (a tick boundary).
    pub fn snapshot(&self) -> Option<Vec<u8>> {
        let zone = self.zone.save()?;
        Some(
            Snapshot {
                tick: self.core.tick,
                boot_epoch: self.core.facts.boot_epoch(),
                fact_counter: self.core.facts.counter(),
                facts: self.core.facts.in_flight().cloned().collect(),
                zone,
                next_player: self.next_player,
                // A moving player belongs to the server's transfer record, not to a save.
                roster: self
                    .core
                    .roster
                    .values()
                    .filter(|p| !self.core.transfers.moving.contains_key(&p.id))
                    .map(|p| crate::snapshot::SavedParticipant {
                        id: p.id,
                        principal: p.principal.clone(),
                        role: p.role,
                        claims: p.claims.clone(),
                        last_seq: self.zone.last_processed(p.id),
                    })
                    .collect(),
                state_version: self.config.state_version,
                build: self.build.clone(),
                characters: Vec::new(),
                calls: self.core.calls.in_flight().cloned().collect(),
            }
            .encode_with(&self.core.mail.saved_links()),
        )
    }
}
