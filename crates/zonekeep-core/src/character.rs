//! Characters: the state a player takes from zone to zone (inventory, level, gold), held by one
//! zone at a time.
//!
//! A zone kind that keeps characters ([`ZoneConfig::characters`]) is handed each joining
//! player's character by its host ([`ZoneHost::handle_join_with_character`]), which holds the
//! character's lease in its store while the player is here. The zone reads and changes it
//! through [`Ctx::character`] and [`Ctx::set_character`]; the host writes it back — at the
//! zone's saves, at once when the zone asks ([`Ctx::commit_character`]), and finally when the
//! player leaves, which gives the lease up — from the [`CharacterWrite`]s it drains. The store's
//! copy is the character: a zone's own save does not carry it, so a restored zone of such a kind
//! admits its players again only as they join (with their characters), never from the save.
//!
//! A move to another zone ([`crate::transfer`]) carries the character through the store: the
//! player hands it back as it moves out, right after [`Zone::transfer_out`] (so the hook's last
//! change is in it), and the target's host takes the lease for the target zone and admits the
//! arrival with it ([`ZoneHost::handle_transfer_in_with_character`]). A move that comes back
//! gives the player its character again before the zone takes it back: the release itself when
//! the host had not taken that write yet, else the character its host took the lease of again
//! ([`ZoneHost::handle_transfer_back_with_character`]). While it moves, the player holds none
//! here.
//!
//! [`Zone::transfer_out`]: crate::Zone::transfer_out
//! [`ZoneHost::handle_transfer_in_with_character`]: crate::ZoneHost::handle_transfer_in_with_character
//! [`ZoneHost::handle_transfer_back_with_character`]: crate::ZoneHost::handle_transfer_back_with_character
//!
//! [`ZoneConfig::characters`]: crate::ZoneConfig::characters
//! [`ZoneHost::handle_join_with_character`]: crate::ZoneHost::handle_join_with_character
//! [`Ctx::character`]: crate::Ctx::character
//! [`Ctx::set_character`]: crate::Ctx::set_character
//! [`Ctx::commit_character`]: crate::Ctx::commit_character
//!
//! Image layout (a zone image, see [`crate::image`]): a varint count, then per character the
//! player `id`, `blob principal`, `blob data`, `u8 dirty` and `u8 commit_asked`; then a varint
//! count of writes not yet drained, each `id`, `blob principal`, `blob data` and `u8 release`.

use std::collections::BTreeMap;

use zonekeep_protocol::wire::{put_varint, Reader};

use crate::image::ImageError;
use crate::player::{PlayerId, Principal};

/// The largest character, in bytes (256 KiB: the store keeps no larger one).
pub const MAX_CHARACTER_BYTES: usize = 256 * 1024;

/// A write of a player's character, for the host to make under the character's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CharacterWrite {
    /// The player it is (or was) in this zone; `PlayerId(0)` for a join that was refused before
    /// it got an id (the zone was full).
    pub player: PlayerId,
    /// Whose character it is.
    pub principal: Principal,
    /// The character's bytes as the zone left them.
    pub data: Vec<u8>,
    /// The player left: this is the last write, and it gives the lease up.
    pub release: bool,
}

/// Why a character call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CharacterError {
    /// The player has no character here: an observer, a player of a kind without characters, or
    /// one who already left.
    #[error("player {0} has no character in this zone")]
    NoCharacter(PlayerId),
    /// The character would be larger than [`MAX_CHARACTER_BYTES`].
    #[error("a character of {size} bytes is over the {max}-byte limit")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Slot {
    principal: Principal,
    data: Vec<u8>,
    /// Changed since it was last written.
    dirty: bool,
    /// The zone asked for it to be written at once.
    commit_asked: bool,
}

/// The characters of the players present, and the writes the host has not taken yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CharacterBook {
    slots: BTreeMap<PlayerId, Slot>,
    writes: Vec<CharacterWrite>,
}

impl CharacterBook {
    /// `id` joins with `data`, its character as the store holds it.
    pub(crate) fn admit(&mut self, id: PlayerId, principal: Principal, data: Vec<u8>) {
        self.slots.insert(
            id,
            Slot {
                principal,
                data,
                dirty: false,
                commit_asked: false,
            },
        );
    }

    /// The zone refused `id`'s join: its character goes back unchanged, released.
    pub(crate) fn refused(&mut self, id: PlayerId) {
        self.release(id);
    }

    /// A join with `data` was refused before it got an id: the character goes back unchanged.
    pub(crate) fn hand_back(&mut self, principal: Principal, data: Vec<u8>) {
        self.writes.push(CharacterWrite {
            player: PlayerId(0),
            principal,
            data,
            release: true,
        });
    }

    /// The zone stops (unloaded, stopped, shut down): every character still here is handed
    /// back as it stands, released.
    pub(crate) fn release_all(&mut self) {
        let ids: Vec<PlayerId> = self.slots.keys().copied().collect();
        for id in ids {
            self.release(id);
        }
    }

    /// `id`'s character, if it has one here.
    pub(crate) fn get(&self, id: PlayerId) -> Option<&[u8]> {
        self.slots.get(&id).map(|s| s.data.as_slice())
    }

    /// Replaces `id`'s character (written at the zone's next save, or at once if asked).
    pub(crate) fn set(&mut self, id: PlayerId, data: Vec<u8>) -> Result<(), CharacterError> {
        if data.len() > MAX_CHARACTER_BYTES {
            return Err(CharacterError::TooLarge {
                size: data.len(),
                max: MAX_CHARACTER_BYTES,
            });
        }
        let slot = self
            .slots
            .get_mut(&id)
            .ok_or(CharacterError::NoCharacter(id))?;
        slot.data = data;
        slot.dirty = true;
        Ok(())
    }

    /// Asks for `id`'s character to be written at the end of this call.
    pub(crate) fn ask_commit(&mut self, id: PlayerId) -> Result<(), CharacterError> {
        let slot = self
            .slots
            .get_mut(&id)
            .ok_or(CharacterError::NoCharacter(id))?;
        slot.commit_asked = true;
        Ok(())
    }

    /// Every character changed since its last write is to be written (the zone is saving).
    pub(crate) fn commit_dirty(&mut self) {
        for slot in self.slots.values_mut().filter(|s| s.dirty) {
            slot.commit_asked = true;
        }
    }

    /// `id`, moving out and now coming back, takes its character again: the bytes of the
    /// release its move out left here when the host has not taken that write yet (the move
    /// came back at once; the release is withdrawn, never written), else `data`, the character
    /// its host took the lease of again for this zone. False when it is left without one.
    pub(crate) fn take_back(
        &mut self,
        id: PlayerId,
        principal: Principal,
        data: Option<Vec<u8>>,
    ) -> bool {
        let pending = self
            .writes
            .iter()
            .rposition(|w| w.player == id && w.release && w.principal == principal)
            .map(|i| self.writes.remove(i));
        let (data, dirty) = match (pending, data) {
            // Not written yet, so newer than any copy the store has: the changes it carried are
            // written at the next save.
            (Some(w), _) => (w.data, true),
            (None, Some(data)) => (data, false),
            (None, None) => return false,
        };
        self.slots.insert(
            id,
            Slot {
                principal,
                data,
                dirty,
                commit_asked: false,
            },
        );
        true
    }

    /// Whether `id` holds a character here.
    pub(crate) fn holds(&self, id: PlayerId) -> bool {
        self.slots.contains_key(&id)
    }

    /// `id` left: its character's last write, which gives the lease up.
    pub(crate) fn release(&mut self, id: PlayerId) {
        if let Some(slot) = self.slots.remove(&id) {
            self.writes.push(CharacterWrite {
                player: id,
                principal: slot.principal,
                data: slot.data,
                release: true,
            });
        }
    }

    /// The writes due, oldest first: releases as players left, then a write of each character
    /// whose write was asked for (once, however often it was asked).
    pub(crate) fn drain(&mut self) -> Vec<CharacterWrite> {
        let mut out = std::mem::take(&mut self.writes);
        for (id, slot) in &mut self.slots {
            if slot.commit_asked {
                slot.commit_asked = false;
                slot.dirty = false;
                out.push(CharacterWrite {
                    player: *id,
                    principal: slot.principal.clone(),
                    data: slot.data.clone(),
                    release: false,
                });
            }
        }
        out
    }

    /// How many players hold a character here.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn put_image(&self, out: &mut Vec<u8>) {
        put_varint(out, self.slots.len() as u64);
        for (id, s) in &self.slots {
            put_varint(out, u64::from(id.0));
            put_blob(out, s.principal.as_str().as_bytes());
            put_blob(out, &s.data);
            out.push(u8::from(s.dirty));
            out.push(u8::from(s.commit_asked));
        }
        put_varint(out, self.writes.len() as u64);
        for w in &self.writes {
            put_varint(out, u64::from(w.player.0));
            put_blob(out, w.principal.as_str().as_bytes());
            put_blob(out, &w.data);
            out.push(u8::from(w.release));
        }
    }

    pub(crate) fn get_image(r: &mut Reader<'_>) -> Result<Self, ImageError> {
        let mut book = CharacterBook::default();
        let n = r.varint_u64()?;
        for _ in 0..n {
            let id = player(r)?;
            let principal = principal(r)?;
            let data = data(r)?;
            let dirty = flag(r)?;
            let commit_asked = flag(r)?;
            book.slots.insert(
                id,
                Slot {
                    principal,
                    data,
                    dirty,
                    commit_asked,
                },
            );
        }
        let n = r.varint_u64()?;
        for _ in 0..n {
            let player = player(r)?;
            let principal = principal(r)?;
            let data = data(r)?;
            let release = flag(r)?;
            book.writes.push(CharacterWrite {
                player,
                principal,
                data,
                release,
            });
        }
        Ok(book)
    }
}

fn put_blob(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn blob<'a>(r: &mut Reader<'a>, max: usize, what: &str) -> Result<&'a [u8], ImageError> {
    let len = usize::try_from(r.varint_u64()?).unwrap_or(usize::MAX);
    if len > max {
        return Err(ImageError::Malformed(format!("{what} of {len} bytes")));
    }
    Ok(r.take(len)?)
}

fn player(r: &mut Reader<'_>) -> Result<PlayerId, ImageError> {
    u32::try_from(r.varint_u64()?)
        .map(PlayerId)
        .map_err(|_| ImageError::Malformed("player id past u32".into()))
}

fn principal(r: &mut Reader<'_>) -> Result<Principal, ImageError> {
    let bytes = blob(r, zonekeep_protocol::limits::MAX_TICKET, "principal")?;
    let text = std::str::from_utf8(bytes)
        .map_err(|_| ImageError::Malformed("principal is not UTF-8".into()))?;
    Ok(Principal::new(text))
}

fn data(r: &mut Reader<'_>) -> Result<Vec<u8>, ImageError> {
    blob(r, MAX_CHARACTER_BYTES, "character").map(<[u8]>::to_vec)
}

fn flag(r: &mut Reader<'_>) -> Result<bool, ImageError> {
    match r.u8()? {
        0 => Ok(false),
        1 => Ok(true),
        n => Err(ImageError::Malformed(format!("flag {n}"))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn book() -> CharacterBook {
        let mut b = CharacterBook::default();
        b.admit(PlayerId(1), Principal::new("ann"), b"gold=1".to_vec());
        b.admit(PlayerId(2), Principal::new("bob"), b"gold=9".to_vec());
        b
    }

    #[test]
    fn writes_come_when_asked_at_a_save_and_at_the_end() {
        let mut b = book();
        assert!(b.drain().is_empty(), "nothing changed, nothing to write");
        b.set(PlayerId(1), b"gold=2".to_vec()).unwrap();
        assert!(b.drain().is_empty(), "a change waits for the zone's save");
        b.commit_dirty();
        let w = b.drain();
        assert_eq!(w.len(), 1);
        assert_eq!(
            (w[0].data.as_slice(), w[0].release),
            (&b"gold=2"[..], false)
        );
        b.ask_commit(PlayerId(2)).unwrap();
        b.ask_commit(PlayerId(2)).unwrap();
        assert_eq!(b.drain().len(), 1, "asked twice, written once");
        b.release(PlayerId(1));
        let w = b.drain();
        assert_eq!((w[0].player, w[0].release), (PlayerId(1), true));
        assert_eq!(b.get(PlayerId(1)), None);
        assert_eq!(
            b.set(PlayerId(1), vec![]),
            Err(CharacterError::NoCharacter(PlayerId(1)))
        );
    }

    #[test]
    fn an_oversized_character_is_refused_and_the_old_one_kept() {
        let mut b = book();
        let big = vec![0; MAX_CHARACTER_BYTES + 1];
        assert!(matches!(
            b.set(PlayerId(1), big),
            Err(CharacterError::TooLarge { .. })
        ));
        assert_eq!(b.get(PlayerId(1)), Some(&b"gold=1"[..]));
    }

    #[test]
    fn the_image_round_trips_and_a_cut_one_is_an_error() {
        let mut b = book();
        b.set(PlayerId(2), b"gold=10".to_vec()).unwrap();
        b.release(PlayerId(1));
        let mut bytes = Vec::new();
        b.put_image(&mut bytes);
        let back = CharacterBook::get_image(&mut Reader::new(&bytes)).unwrap();
        assert_eq!(back, b);
        for cut in 0..bytes.len() {
            assert!(CharacterBook::get_image(&mut Reader::new(&bytes[..cut])).is_err());
        }
    }
}
