//! Characters: the state a player takes from zone to zone (inventory, level, gold), which the host
//! keeps in its store and lends to one zone at a time (`zonekeep_core::character` in the core's
//! docs).
//!
//! A zone kind keeps characters when its [`Settings`](crate::Settings) say so. Its host then
//! hands each joining player's character to the zone with the JOIN call (an arriving player's,
//! and that of a player coming back from a failed transfer, with TRANSFER_IN), and the SDK keeps
//! a copy of each present player's, which [`Ctx::character`] reads. [`Ctx::set_character`]
//! changes the copy and tells the host (SET_CHARACTER), which writes the character at the zone's
//! next save, at once after [`Ctx::commit_character`] (COMMIT_CHARACTER), and last when the
//! player leaves. The copy is dropped after the player's LEAVE (whose hook may still change it)
//! and after its TRANSFER_OUT (whose hook may still read it): the host hands the character back
//! then.
//!
//! A player of such a kind has a character; an observer, and a player of a kind without
//! characters, has none. An empty character is a character: a new player's is empty until the
//! zone sets it.

use std::collections::BTreeMap;
use std::fmt;

use crate::ctx::{tag, Ctx};
use crate::zone::PlayerId;

/// The largest character, in bytes (256 KiB: the host's store keeps no larger one).
pub use zonekeep_abi::MAX_CHARACTER_BYTES;

/// Why a character call was refused (the character is then unchanged, and the host is told
/// nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CharacterError {
    /// The player has no character here: an observer, a player of a kind without characters,
    /// or one who left or transferred out.
    NoCharacter(PlayerId),
    /// The character would be larger than [`MAX_CHARACTER_BYTES`].
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
}

impl fmt::Display for CharacterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoCharacter(p) => write!(f, "player {p} has no character in this zone"),
            Self::TooLarge { size, max } => {
                write!(
                    f,
                    "a character of {size} bytes is over the {max}-byte limit"
                )
            }
        }
    }
}

impl std::error::Error for CharacterError {}

/// The SDK's copy of the characters of the players present.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Characters {
    slots: BTreeMap<PlayerId, Vec<u8>>,
}

impl Characters {
    /// `player` is here with `data`, its character as the host handed it over (replacing any
    /// copy kept before).
    pub(crate) fn admit(&mut self, player: PlayerId, data: &[u8]) {
        self.slots.insert(player, data.to_vec());
    }

    /// `player`'s character went back to the host: the copy is dropped.
    pub(crate) fn drop_player(&mut self, player: PlayerId) {
        self.slots.remove(&player);
    }

    /// `player`'s character, if it has one here.
    pub(crate) fn get(&self, player: PlayerId) -> Option<&[u8]> {
        self.slots.get(&player).map(Vec::as_slice)
    }

    /// `player`'s character, to be replaced by one of `size` bytes; refused as the host would
    /// refuse the change.
    fn slot_for(&mut self, player: PlayerId, size: usize) -> Result<&mut Vec<u8>, CharacterError> {
        if size > MAX_CHARACTER_BYTES {
            return Err(CharacterError::TooLarge {
                size,
                max: MAX_CHARACTER_BYTES,
            });
        }
        self.slots
            .get_mut(&player)
            .ok_or(CharacterError::NoCharacter(player))
    }
}

impl Ctx<'_> {
    /// `player`'s character: the state it brought into this zone and takes along when it
    /// leaves, as the zone last set it (see
    /// [`Settings::characters`](crate::Settings#structfield.characters)). `None` for an
    /// observer, a player of a kind without characters, or one who left or transferred out. A
    /// new player's character is empty.
    pub fn character(&self, player: PlayerId) -> Option<&[u8]> {
        self.sdk.characters.get(player)
    }

    /// Replaces `player`'s character. The host writes it at the zone's next save, at once after
    /// [`commit_character`](Ctx::commit_character), and last when the player leaves. Refused
    /// for a player without a character here, or past [`MAX_CHARACTER_BYTES`] (the character is
    /// then unchanged).
    pub fn set_character(&mut self, player: PlayerId, data: Vec<u8>) -> Result<(), CharacterError> {
        let slot = self.sdk.characters.slot_for(player, data.len())?;
        self.out.u8(tag::SET_CHARACTER).u32(player.0).bytes(&data);
        *slot = data;
        Ok(())
    }

    /// Asks the host to write `player`'s character now, at the end of this call, rather than
    /// at the zone's next save: for a change that must not be lost (a purchase, a level).
    /// Refused for a player without a character here.
    pub fn commit_character(&mut self, player: PlayerId) -> Result<(), CharacterError> {
        if self.sdk.characters.get(player).is_none() {
            return Err(CharacterError::NoCharacter(player));
        }
        self.out.u8(tag::COMMIT_CHARACTER).u32(player.0);
        Ok(())
    }
}
