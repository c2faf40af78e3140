//! Bots in process: the workload's players joined and driven straight on a [`ZoneHost`], with
//! no sockets, as the benchmarks and tests that time or compare zones do.

use serde_json::json;
use zonekeep_core::{Claims, PlayerId, Principal, Role, ZoneHost};

use super::math::{encode_input, BotParams};
use super::ArenaParams;

/// Joins bot `b` (its `bot` claim picks its spawn, WORKLOADS.md arena §2.4).
pub fn join_bot(host: &mut ZoneHost, b: u32) -> PlayerId {
    let mut claims = Claims::new();
    claims.insert("bot".into(), json!(b));
    match host.handle_join(Principal::new(format!("bot-{b}")), claims, Role::Player) {
        Ok(id) => id,
        Err(e) => panic!("bot {b} could not join: {e}"),
    }
}

/// Bots `0..n` of one zone and how many inputs each has sent.
#[derive(Debug)]
pub struct LocalBots {
    /// Each bot's player, its input schedule, and its inputs sent so far.
    pub players: Vec<(PlayerId, BotParams, u32)>,
}

impl LocalBots {
    /// Joins bots `0..n` to `host`.
    pub fn join(host: &mut ZoneHost, n: u32) -> LocalBots {
        let world = ArenaParams::default().consts.world;
        let players = (0..n)
            .map(|b| (join_bot(host, b), BotParams::new(b, world), 0))
            .collect();
        LocalBots { players }
    }

    /// Offers the inputs due before tick `k` as arena §3 schedules them: 10 a second each, bots
    /// 0–49 on even ticks and 50–99 on odd ones. Every input must be accepted.
    pub fn offer(&mut self, host: &mut ZoneHost, k: u64) {
        let c = ArenaParams::default().consts;
        for (b, (id, bot, sent)) in self.players.iter_mut().enumerate() {
            if k % 2 != (b as u64 / 50) % 2 {
                continue;
            }
            let (dx, dy) = bot.input(&c, u64::from(*sent));
            *sent += 1;
            let view = u32::try_from(k.saturating_sub(1)).unwrap_or(u32::MAX);
            let outcome = host.handle_input(*id, *sent, view, &encode_input(dx, dy));
            assert!(
                outcome.is_accepted(),
                "input {sent} of bot {b}: {outcome:?}"
            );
        }
    }
}
