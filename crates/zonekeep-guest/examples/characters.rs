//! A zone module whose players keep their gold in their characters: the state a player takes
//! from session to session and zone to zone, which the host keeps in its store and lends to the
//! zone the player is in. Built as a module, it is the one the module host's tests run:
//!
//! ```sh
//! cargo build -p zonekeep-guest --example characters --target wasm32-unknown-unknown --profile module
//! ```
//!
//! A character here is the player's gold as a `u64` (little-endian); a new player's is empty,
//! which counts as no gold. Every participant gets an entity of kind `miner`, whose `gold` field
//! shows the gold it holds and whose `keeps` field says whether it has a character (an observer
//! has none).
//!
//! Inputs: `[1]` mines a coin (the character changes; the host writes it at the zone's next
//! save); `[2]` banks the gold (the character is written at once). A player who leaves takes its
//! gold along.

use std::collections::BTreeMap;

use zonekeep_guest::{
    export_zone, log, Ctx, Entity, EntityKind, Kind, LeaveReason, Level, Player, PlayerId, Refusal,
    Settings, Zone,
};

/// A participant's entity.
#[derive(Debug, Clone, Copy, Default, PartialEq, EntityKind)]
struct Miner {
    /// The gold the participant holds.
    gold: u32,
    /// It has a character.
    keeps: bool,
}

/// The gold in a character.
fn gold(character: Option<&[u8]>) -> u64 {
    character
        .and_then(|c| <[u8; 8]>::try_from(c).ok())
        .map_or(0, u64::from_le_bytes)
}

/// The zone: each participant's entity and what it shows.
struct Mine {
    kind: Kind,
    miners: BTreeMap<PlayerId, (Entity, Miner)>,
}

impl Mine {
    /// Shows `player`'s gold as its character now holds it.
    fn show(&mut self, ctx: &mut Ctx<'_>, player: PlayerId) {
        let now = Miner {
            gold: u32::try_from(gold(ctx.character(player))).unwrap_or(u32::MAX),
            keeps: ctx.character(player).is_some(),
        };
        if let Some((entity, shown)) = self.miners.get_mut(&player) {
            ctx.update(*entity, shown, &now);
            *shown = now;
        }
    }
}

impl Zone for Mine {
    type Input = Vec<u8>;

    fn settings() -> Settings {
        Settings::new().characters()
    }

    fn create(ctx: &mut Ctx<'_>, _params: &str) -> Result<Self, String> {
        Ok(Self {
            kind: ctx.declare::<Miner>(),
            miners: BTreeMap::new(),
        })
    }

    fn restore(ctx: &mut Ctx<'_>, params: &str, _bytes: &[u8]) -> Result<Self, String> {
        // Nothing is saved: the players come back through `on_join`, with their characters.
        Self::create(ctx, params)
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, player: Player) -> Result<(), Refusal> {
        let x = self.miners.len() as f32;
        let entity = ctx.spawn_with(self.kind, x, 0.0, &Miner::default());
        self.miners.insert(player.id, (entity, Miner::default()));
        self.show(ctx, player.id);
        Ok(())
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, input: Vec<u8>) {
        let done = match input.as_slice() {
            [1] => {
                let more = gold(ctx.character(player)).saturating_add(1);
                ctx.set_character(player, more.to_le_bytes().to_vec())
            }
            [2] => ctx.commit_character(player),
            _ => Ok(()),
        };
        match done {
            Ok(()) => self.show(ctx, player),
            Err(e) => log(Level::Warn, &format!("player {player}: {e}")),
        }
    }

    fn on_leave(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, _why: LeaveReason) {
        if let Some((entity, _)) = self.miners.remove(&player) {
            ctx.despawn(entity);
        }
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
}

export_zone!(Mine);
