//! The game: every player walks a dot around a walled field. This is the file to make your own.
//!
//! - [`Walkers::create`] declares the entity kinds the clients will see (the schema in Welcome).
//! - [`Walkers::on_join`] gives a joining player an entity and says it controls it.
//! - [`Walkers::sanitize`] turns a client's raw input bytes into a typed intent, or refuses them:
//!   input is untrusted.
//! - [`Walkers::on_input`] applies one intent; the host calls it once per input, in sequence order.
//! - [`Walkers::tick`] advances the world by one fixed step (nothing moves on its own here).
//!
//! The host replicates the world to each client (only what it can see) and the page draws it.

use std::collections::BTreeMap;

use zonekeep_core::world::{EntityId, KindId};
use zonekeep_core::{
    Ctx, InputRefusal, JoinRefusal, LeaveReason, PlayerId, PlayerInfo, Zone, ZoneError, ZoneInit,
};
use zonekeep_protocol::schema::{FieldDef, FieldType, KindDef};

/// Width and height of the field, in world units.
pub const SIZE: f32 = 40.0;
/// How far one input moves a dot per axis, in world units.
pub const STEP: f32 = 0.25;
/// Entity kind of a player's dot.
pub const KIND_WALKER: &str = "walker";
/// Field of a walker: the display name (from the ticket's `name` claim).
pub const F_NAME: usize = 0;
/// Longest display name, in bytes.
const MAX_NAME: usize = 16;
/// Input refusal code: the payload is not `[dx, dy]`.
pub const REFUSE_BAD_INPUT: u16 = 1;
/// Join refusal code: the world refused the entity.
const REFUSE_WORLD: u16 = 1;

/// One move: each axis is -1, 0 or 1 step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    /// Steps along x.
    pub dx: i8,
    /// Steps along y.
    pub dy: i8,
}

/// The zone's state: which entity each player walks.
#[derive(Debug)]
pub struct Walkers {
    walker: KindId,
    dots: BTreeMap<PlayerId, EntityId>,
}

fn failed(e: impl std::fmt::Display) -> ZoneError {
    ZoneError::Failed(e.to_string())
}

impl Zone for Walkers {
    type Input = Move;

    fn create(_init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let walker = ctx
            .world()
            .declare_kind(KindDef {
                name: KIND_WALKER.into(),
                fields: vec![FieldDef {
                    name: "name".into(),
                    ty: FieldType::Str {
                        max_len: MAX_NAME as u8,
                    },
                }],
            })
            .map_err(failed)?;
        Ok(Self {
            walker,
            dots: BTreeMap::new(),
        })
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, player: &PlayerInfo) -> Result<(), JoinRefusal> {
        // Claims are as untrusted as inputs: keep a short, printable name.
        let name: String = player
            .claims
            .get("name")
            .and_then(|v| v.as_str())
            .unwrap_or("guest")
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_'))
            .scan(0, |len, c| {
                *len += c.len_utf8();
                (*len <= MAX_NAME).then_some(c)
            })
            .collect();
        let world = ctx.world();
        let entity = world
            .spawn(self.walker, SIZE / 2.0, SIZE / 2.0)
            .map_err(|e| JoinRefusal::new(REFUSE_WORLD, e.to_string()))?;
        if let Err(e) = world.set_str(entity, F_NAME, &name) {
            let _ = world.despawn(entity);
            return Err(JoinRefusal::new(REFUSE_WORLD, e.to_string()));
        }
        ctx.set_control(player.id, Some(entity));
        self.dots.insert(player.id, entity);
        Ok(())
    }

    fn on_leave(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, _why: LeaveReason) {
        if let Some(entity) = self.dots.remove(&player) {
            let _ = ctx.world().despawn(entity);
        }
    }

    fn sanitize(&mut self, _player: PlayerId, payload: &[u8]) -> Result<Move, InputRefusal> {
        match payload {
            [dx, dy] => Ok(Move {
                dx: (*dx as i8).clamp(-1, 1),
                dy: (*dy as i8).clamp(-1, 1),
            }),
            _ => Err(InputRefusal::new(
                REFUSE_BAD_INPUT,
                "expected two bytes [dx, dy]",
            )),
        }
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, m: Move) {
        let Some(&entity) = self.dots.get(&player) else {
            return;
        };
        let world = ctx.world();
        let Ok((x, y)) = world.pos(entity) else {
            return;
        };
        let x = (x + f32::from(m.dx) * STEP).clamp(0.0, SIZE);
        let y = (y + f32::from(m.dy) * STEP).clamp(0.0, SIZE);
        let _ = world.set_pos(entity, x, y);
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
}

#[cfg(test)]
mod tests {
    //! The zone driven without a network, on a manual clock: how to test your own rules.
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::Arc;
    use std::time::Duration;

    use zonekeep_core::serde_json::json;
    use zonekeep_core::{
        Claims, Clock, ManualClock, Principal, Role, ZoneConfig, ZoneHost, ZoneInit,
    };

    use super::*;

    #[test]
    fn a_player_walks_and_stays_inside_the_field() {
        let clock = ManualClock::new();
        let init = ZoneInit {
            zone_id: "walkers-1".into(),
            kind: "walkers".into(),
            params: json!(null),
        };
        let mut host =
            ZoneHost::new::<Walkers>(init, ZoneConfig::default(), Arc::new(clock.clone())).unwrap();
        let mut claims = Claims::new();
        claims.insert("name".into(), json!("ada <b>"));
        let ada = host
            .handle_join(Principal::new("ada"), claims, Role::Player)
            .unwrap();
        // 200 steps right: 50 units, more than the field is wide.
        // One input per tick, as a client sends them.
        for seq in 1..=200u32 {
            host.handle_input(ada, seq, 0, &[1, 0]);
            clock.advance(Duration::from_millis(34));
            host.advance(clock.now());
        }
        host.handle_input(ada, 201, 0, &[1, 2, 3]); // refused: not [dx, dy]
        clock.advance(Duration::from_millis(34));
        host.advance(clock.now());
        let entity = host.zone::<Walkers>().unwrap().dots[&ada];
        assert_eq!(host.world().pos(entity).unwrap(), (SIZE, SIZE / 2.0));
        assert_eq!(host.world().get_str(entity, F_NAME).unwrap(), "adab");
    }
}
