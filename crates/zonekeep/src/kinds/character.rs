//! `character-test`: a small, real zone kind whose players bring characters, for exercising
//! character leases, recalls and crashes end to end (the character crash test drives it through
//! `zonekeep serve`). A dev kind: registered only with `--dev` or `--dev-kinds`.
//!
//! - Input: 8 bytes, a `u64` LE number `n` the client picks (unique per principal, so a test can
//!   tell changes apart across recalls and restarts).
//! - Each input appends `n` to the player's character and commits it at once.
//! - The character: JSON `{"applied": [n, ...]}` (an empty character is no changes yet).
//! - Event topic [`TOPIC_CHARACTER`] to a joining player: its character as it was admitted.

use serde_json::{json, Value};
use zonekeep_core::{
    Ctx, EventTarget, InputRefusal, JoinRefusal, PlayerId, PlayerInfo, Zone, ZoneConfig, ZoneError,
    ZoneInit,
};

/// Event topic: the joining player's character, as JSON.
pub const TOPIC_CHARACTER: u16 = 1;

/// The zone keeps nothing of its own: the characters are the state.
#[derive(Debug, Default)]
pub struct CharacterZone;

/// The kind's config: players bring characters.
pub fn character_config() -> ZoneConfig {
    ZoneConfig {
        characters: true,
        ..ZoneConfig::default()
    }
}

/// The numbers a character's changes applied, in order (none for an empty or foreign character).
pub fn applied(character: &[u8]) -> Vec<u64> {
    serde_json::from_slice::<Value>(character)
        .ok()
        .and_then(|v| {
            v.get("applied")?
                .as_array()?
                .iter()
                .map(Value::as_u64)
                .collect()
        })
        .unwrap_or_default()
}

impl Zone for CharacterZone {
    type Input = u64;

    fn create(_init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(CharacterZone)
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, player: &PlayerInfo) -> Result<(), JoinRefusal> {
        let character = ctx.character(player.id).map(<[u8]>::to_vec);
        let shown = json!({ "applied": applied(character.as_deref().unwrap_or_default()) });
        ctx.emit_event(
            EventTarget::Player(player.id),
            TOPIC_CHARACTER,
            shown.to_string().into_bytes(),
        );
        Ok(())
    }

    fn sanitize(&mut self, _player: PlayerId, payload: &[u8]) -> Result<u64, InputRefusal> {
        let b: [u8; 8] = payload
            .try_into()
            .map_err(|_| InputRefusal::new(1, "expected 8 bytes (u64 LE)"))?;
        Ok(u64::from_le_bytes(b))
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, n: u64) {
        let Some(character) = ctx.character(player) else {
            return;
        };
        let mut list = applied(character);
        list.push(n);
        let data = json!({ "applied": list }).to_string().into_bytes();
        let changed = ctx
            .set_character(player, data)
            .and_then(|()| ctx.commit_character(player));
        if let Err(e) = changed {
            tracing::warn!(error = %e, "character-test: change not kept");
        }
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}

    fn save(&self) -> Option<Vec<u8>> {
        Some(Vec::new())
    }

    fn restore(_init: &ZoneInit, _ctx: &mut Ctx<'_>, _bytes: &[u8]) -> Result<Self, ZoneError> {
        Ok(CharacterZone)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::Arc;

    use zonekeep_core::{Claims, Clock, ManualClock, Principal, Role, ZoneHost};

    use super::*;

    #[test]
    fn each_input_is_appended_to_the_character_and_committed_at_once() {
        let clock = ManualClock::new();
        let init = ZoneInit {
            zone_id: "c".into(),
            kind: "character-test".into(),
            params: Value::Null,
        };
        let mut h =
            ZoneHost::new::<CharacterZone>(init, character_config(), Arc::new(clock.clone()))
                .unwrap();
        let p = h
            .handle_join_with_character(
                Principal::new("ann"),
                Claims::new(),
                Role::Player,
                br#"{"applied":[1]}"#.to_vec(),
            )
            .unwrap();
        assert!(h.handle_input(p, 1, 0, &5u64.to_le_bytes()).is_accepted());
        clock.advance(h.config().dt());
        h.advance(clock.now());
        let writes = h.drain_character_writes();
        assert_eq!(writes.len(), 1, "committed at once, not at the next save");
        assert_eq!(applied(&writes[0].data), [1, 5]);
    }
}
