//! [`Settings`]: the zone settings a module asks its host for (the CONFIG call).

use zonekeep_protocol::contract::Contract;

use crate::wire::Writer;

/// The settings a zone's rules depend on, which the host applies to every zone of the module's
/// kind: a zone's [`Zone::settings`](crate::Zone::settings). Each left at 0 is the host's own.
///
/// The host reads them once, when it loads the module, and refuses a module whose settings it
/// cannot run (a tick rate of 0 Hz… see PROTOCOL.md's limits). A new version deployed to running
/// zones must keep their tick rate and position step: a zone refuses an upgrade that changes
/// them (it would change what a tick means for every saved and predicted state) and goes on with
/// the version it had.
///
/// ```
/// use zonekeep_guest::Settings;
/// let s = Settings::new().tick_hz(30).pos_step(0.01).view_radius(24.0);
/// assert_eq!(s.tick_hz, 30);
/// assert_eq!(s.max_players, 0); // the host's
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Settings {
    /// Simulation ticks per second.
    pub tick_hz: u32,
    /// Ticks between two state messages to clients.
    pub patch_every: u32,
    /// Most players at once.
    pub max_players: u32,
    /// Most observers at once.
    pub max_observers: u32,
    /// The position quantum on the wire, in world units: what the zone's positions are snapped
    /// to for clients (and for a client's prediction to agree with the zone).
    pub pos_step: f32,
    /// How far a participant sees, in world units.
    pub view_radius: f32,
    /// The interest grid's cell size, in world units.
    pub cell_size: f32,
    /// A lasting world: its zones never go Dormant, and the host refuses to stop one unless
    /// the operator forces it.
    pub lasting: bool,
    /// The version of the zone's saves (0: version 1): raise it when what
    /// [`Zone::save`](crate::Zone::save) writes changes, and migrate the older versions' saves
    /// in [`Zone::migrate`](crate::Zone::migrate).
    pub state_version: u32,
    /// The kind's players bring their characters: the state a player takes from zone to zone
    /// (inventory, level, gold), which the host keeps in its store and lends to one zone at a
    /// time. The host hands each joining or arriving player's character to the zone, and the
    /// SDK keeps a copy of each present player's: [`Ctx::character`](crate::Ctx::character)
    /// reads it, [`Ctx::set_character`](crate::Ctx::set_character) changes it (the host writes
    /// it at the zone's next save and when the player leaves) and
    /// [`Ctx::commit_character`](crate::Ctx::commit_character) asks for the write at once. A
    /// player of such a kind has a character (empty for a new one); an observer has none. The
    /// copy is dropped after the player's [`on_leave`](crate::Zone::on_leave) (which may still
    /// change it) and after its [`transfer_out`](crate::Zone::transfer_out) (which may still
    /// read it), when the character goes back with the player; a player coming back from a
    /// failed transfer brings it again. A zone's save does not carry characters: after a
    /// restore, each player comes back through [`on_join`](crate::Zone::on_join), with its
    /// character.
    pub characters: bool,
    /// An observer gets a frame on one patch in this many (0: the host's, which is every
    /// patch): spectators of a busy zone at a fraction of its players' rate, which cuts what
    /// the host writes for them by as much. Observers take turns, so each patch serves a share
    /// of them; the events addressed to one wait for its next frame, and its Welcome says the
    /// rate it gets. At most 1000.
    pub observer_patch_every: u32,
}

impl Settings {
    /// Every setting the host's own.
    pub fn new() -> Self {
        Self::default()
    }

    /// Ticks per second.
    pub fn tick_hz(mut self, hz: u32) -> Self {
        self.tick_hz = hz;
        self
    }

    /// Ticks between two state messages.
    pub fn patch_every(mut self, ticks: u32) -> Self {
        self.patch_every = ticks;
        self
    }

    /// Most players at once.
    pub fn max_players(mut self, n: u32) -> Self {
        self.max_players = n;
        self
    }

    /// Most observers at once.
    pub fn max_observers(mut self, n: u32) -> Self {
        self.max_observers = n;
        self
    }

    /// The wire's position quantum.
    pub fn pos_step(mut self, step: f32) -> Self {
        self.pos_step = step;
        self
    }

    /// The view radius.
    pub fn view_radius(mut self, radius: f32) -> Self {
        self.view_radius = radius;
        self
    }

    /// The interest grid's cell size.
    pub fn cell_size(mut self, size: f32) -> Self {
        self.cell_size = size;
        self
    }

    /// Marks the kind a lasting world (see [`Settings::lasting`](Settings#structfield.lasting)).
    pub fn lasting(mut self) -> Self {
        self.lasting = true;
        self
    }

    /// The version of the zone's saves, from 1 (the version of a module that names none).
    ///
    /// Every save the host keeps records the version it was written under. A save of an older
    /// version is handed to [`Zone::migrate`](crate::Zone::migrate) before
    /// [`Zone::restore`](crate::Zone::restore) reads it: a deploy of a module of a higher version
    /// migrates the running zones' state, and one whose migration is missing or fails is refused
    /// (the zones stay on the module they had). A save of a newer version than the module's is
    /// never read. Raise it whenever the layout of [`Zone::save`](crate::Zone::save) changes.
    ///
    /// ```
    /// use zonekeep_guest::Settings;
    /// let s = Settings::new().state_version(2);
    /// assert_eq!(s.state_version, 2);
    /// assert_eq!(Settings::new().state_version, 0); // version 1
    /// ```
    pub fn state_version(mut self, version: u32) -> Self {
        self.state_version = version;
        self
    }

    /// Marks the kind's players as bringing their characters (see
    /// [`Settings::characters`](Settings#structfield.characters)).
    ///
    /// ```
    /// use zonekeep_guest::Settings;
    /// assert!(Settings::new().characters().characters);
    /// assert!(!Settings::new().characters);
    /// ```
    pub fn characters(mut self) -> Self {
        self.characters = true;
        self
    }

    /// Serves observers one patch in `patches` (see
    /// [`Settings::observer_patch_every`](Settings#structfield.observer_patch_every)).
    ///
    /// ```
    /// use zonekeep_guest::Settings;
    /// // Players at 20 Hz, spectators at 5 Hz.
    /// let s = Settings::new().tick_hz(20).observer_patch_every(4);
    /// assert_eq!(s.observer_patch_every, 4);
    /// assert_eq!(Settings::new().observer_patch_every, 0); // the host's: every patch
    /// ```
    pub fn observer_patch_every(mut self, patches: u32) -> Self {
        self.observer_patch_every = patches;
        self
    }

    /// CONFIG's output (docs/MODULES.md): the seven settings in order, then, for a lasting
    /// world, a state version, characters or an observer rate, `u32 max_entities` (0: the
    /// host's) and `u8 lasting`, for a state version, characters or an observer rate
    /// `u32 state_version` (0: version 1), for characters or an observer rate `u8 characters`,
    /// and for an observer rate the (empty) contract and `u32 observer_patch_every`.
    pub fn encode(&self, w: &mut Writer) {
        self.encode_with(&Contract::new(), w);
    }

    /// The CONFIG answer with the kind's client contract after the settings: every setting is
    /// then written. The observer rate comes after the contract (an older host's answer ended
    /// there), so a module that asks for one writes every setting and its contract, empty or
    /// not.
    pub fn encode_with(&self, contract: &Contract, w: &mut Writer) {
        w.u32(self.tick_hz)
            .u32(self.patch_every)
            .u32(self.max_players)
            .u32(self.max_observers)
            .f32(self.pos_step)
            .f32(self.view_radius)
            .f32(self.cell_size);
        let with_rate = self.observer_patch_every != 0;
        let with_contract = !contract.is_empty() || with_rate;
        if self.lasting || self.state_version != 0 || self.characters || with_contract {
            w.u32(0).u8(u8::from(self.lasting));
        }
        if self.state_version != 0 || self.characters || with_contract {
            w.u32(self.state_version);
        }
        if self.characters || with_contract {
            w.u8(u8::from(self.characters));
        }
        if with_contract {
            w.bytes(&contract.encode());
        }
        if with_rate {
            w.u32(self.observer_patch_every);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use zonekeep_protocol::contract::{EventDef, ValueType};

    #[test]
    fn a_contract_follows_every_setting_and_no_contract_changes_nothing() {
        let settings = Settings::default();
        let mut plain = Writer::new();
        settings.encode(&mut plain);
        let mut empty = Writer::new();
        settings.encode_with(&Contract::new(), &mut empty);
        assert_eq!(plain.as_bytes(), empty.as_bytes());
        assert_eq!(plain.len(), 28, "the seven settings only");

        let contract =
            Contract::new().event(EventDef::new("hit", 1, "").value("by", ValueType::U32, ""));
        let mut with = Writer::new();
        settings.encode_with(&contract, &mut with);
        let bytes = with.into_vec();
        let encoded = contract.encode();
        // Seven settings, then max_entities, lasting, state_version and characters, then the
        // contract as `bytes`.
        assert_eq!(bytes.len(), 28 + 4 + 1 + 4 + 1 + 4 + encoded.len());
        assert_eq!(&bytes[..28], plain.as_bytes());
        let len = u32::from_le_bytes(bytes[38..42].try_into().unwrap());
        assert_eq!(len as usize, encoded.len());
        assert_eq!(Contract::decode(&bytes[42..]).unwrap(), contract);
    }

    #[test]
    fn an_observer_rate_follows_the_contract_and_none_changes_nothing() {
        let mut plain = Writer::new();
        Settings::new().encode(&mut plain);
        assert_eq!(plain.len(), 28);
        let mut with = Writer::new();
        Settings::new().observer_patch_every(4).encode(&mut with);
        let bytes = with.into_vec();
        let empty = Contract::new().encode();
        // Seven settings, max_entities, lasting, state_version, characters, the empty
        // contract as `bytes`, then the rate.
        assert_eq!(bytes.len(), 28 + 4 + 1 + 4 + 1 + 4 + empty.len() + 4);
        assert_eq!(&bytes[42..42 + empty.len()], empty.as_slice());
        assert_eq!(bytes[bytes.len() - 4..], 4u32.to_le_bytes());
    }
}
