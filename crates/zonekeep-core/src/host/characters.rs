//! The characters players hold in the zone: the writes due under their leases, a commit of
//! every changed one when the zone saves, and all of them handed back when it stops.

use super::ZoneHost;

impl ZoneHost {
    /// The character writes due (see [`crate::character`]): each player's last write as it
    /// left, which gives its lease up, and a write of each character the zone asked to commit
    /// (or that changed before a save, after [`commit_characters`](ZoneHost::commit_characters)).
    /// The host makes them under the characters' leases, in order.
    pub fn drain_character_writes(&mut self) -> Vec<crate::CharacterWrite> {
        self.core.characters.drain()
    }

    /// The zone is saving: every character changed since its last write is to be written too
    /// (drained by [`drain_character_writes`](ZoneHost::drain_character_writes)).
    pub fn commit_characters(&mut self) {
        self.core.characters.commit_dirty();
    }

    /// The zone stops (unloaded, stopped or shut down): every character still here is handed
    /// back as it stands, as releasing writes (drained next). Called before the zone's final
    /// save; players still present are no longer the zone's to keep.
    pub fn release_characters(&mut self) {
        self.core.characters.release_all();
    }

    /// How many players hold a character in this zone.
    pub fn characters(&self) -> usize {
        self.core.characters.len()
    }
}
