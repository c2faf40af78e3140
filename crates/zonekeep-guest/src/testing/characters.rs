//! The characters a [`TestHost`](super::TestHost) lends its zone, kept as a host keeps them: the
//! character each present player brought, changed by the zone's SET_CHARACTER commands, and the
//! writes the host would make to its store.

use std::collections::BTreeMap;

use super::Command;
use crate::character::MAX_CHARACTER_BYTES;

/// A write of a player's character that a host would make to its store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CharacterWrite {
    /// The player it is (or was) in the zone.
    pub player: u32,
    /// The character's bytes as the zone left them.
    pub data: Vec<u8>,
    /// The player left: this is the last write, and it gives the character up.
    pub release: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Slot {
    data: Vec<u8>,
    /// Changed since it was last written.
    dirty: bool,
    /// The zone asked for it to be written.
    commit: bool,
}

/// The host's side of the characters: what the store would get, and when.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct HostCharacters {
    slots: BTreeMap<u32, Slot>,
    writes: Vec<CharacterWrite>,
}

impl HostCharacters {
    /// `player` is here with `data`.
    pub(super) fn admit(&mut self, player: u32, data: &[u8]) {
        let slot = Slot {
            data: data.to_vec(),
            dirty: false,
            commit: false,
        };
        self.slots.insert(player, slot);
    }

    /// `player`'s character as the host holds it.
    pub(super) fn get(&self, player: u32) -> Option<&[u8]> {
        self.slots.get(&player).map(|s| s.data.as_slice())
    }

    /// The character commands of a call's answer, in order, as a host applies them: a change
    /// for a player without a character, or past [`MAX_CHARACTER_BYTES`], is refused (the
    /// character stays as it was).
    pub(super) fn apply(&mut self, commands: &[Command]) {
        for c in commands {
            match c {
                Command::SetCharacter { player, data } if data.len() <= MAX_CHARACTER_BYTES => {
                    if let Some(slot) = self.slots.get_mut(player) {
                        slot.data.clone_from(data);
                        slot.dirty = true;
                    }
                }
                Command::CommitCharacter { player } => {
                    if let Some(slot) = self.slots.get_mut(player) {
                        slot.commit = true;
                    }
                }
                _ => {}
            }
        }
    }

    /// `player`, coming back from a move, takes again the character its move out gave back,
    /// if that write was not drained yet: the write is withdrawn, never made, and the character
    /// (newer than the store's) is written at the next save. Answers its bytes.
    pub(super) fn take_back(&mut self, player: u32) -> Option<Vec<u8>> {
        let i = self
            .writes
            .iter()
            .rposition(|w| w.player == player && w.release)?;
        let data = self.writes.remove(i).data;
        let slot = Slot {
            data: data.clone(),
            dirty: true,
            commit: false,
        };
        self.slots.insert(player, slot);
        Some(data)
    }

    /// `player` left, moved out, or its join was refused: its character's last write.
    pub(super) fn release(&mut self, player: u32) {
        if let Some(slot) = self.slots.remove(&player) {
            self.writes.push(CharacterWrite {
                player,
                data: slot.data,
                release: true,
            });
        }
    }

    /// The zone saved: every character changed since its last write is written too.
    pub(super) fn commit_dirty(&mut self) {
        for slot in self.slots.values_mut().filter(|s| s.dirty) {
            slot.commit = true;
        }
    }

    /// The writes due, oldest first: releases as players left, then one write of each
    /// character whose write was asked for.
    pub(super) fn drain(&mut self) -> Vec<CharacterWrite> {
        let mut out = std::mem::take(&mut self.writes);
        for (player, slot) in &mut self.slots {
            if std::mem::take(&mut slot.commit) {
                slot.dirty = false;
                out.push(CharacterWrite {
                    player: *player,
                    data: slot.data.clone(),
                    release: false,
                });
            }
        }
        out
    }
}
