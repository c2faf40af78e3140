//! Encoders of each call's input bytes, as the host writes them (the `u64 tick` first).

use crate::call::CallResult;
use crate::wire::Writer;
use crate::zone::{LeaveReason, Role};

/// The fact-key prefix a test host gives: the zone id and epoch 0, as a host whose zone
/// has never been owned before.
pub fn fact_prefix(zone_id: &str) -> String {
    format!("{zone_id}:0:m")
}

/// CREATE: `u64 seed`, `str zone_id`, `str params`, `str fact_prefix` (from
/// [`fact_prefix`]).
pub fn create(tick: u64, seed: u64, zone_id: &str, params: &str) -> Vec<u8> {
    let mut w = Writer::new();
    w.u64(tick)
        .u64(seed)
        .str(zone_id)
        .str(params)
        .str(&fact_prefix(zone_id));
    w.into_vec()
}

/// JOIN: `u32 player`, `str principal`, `u8 role`, `str claims` (JSON object text),
/// `bytes character` (empty when the player has none).
pub fn join(
    tick: u64,
    player: u32,
    principal: &str,
    role: Role,
    claims: &str,
    character: &[u8],
) -> Vec<u8> {
    let mut w = Writer::new();
    w.u64(tick)
        .u32(player)
        .str(principal)
        .u8(match role {
            Role::Player => 0,
            Role::Observer => 1,
        })
        .str(claims)
        .bytes(character);
    w.into_vec()
}

/// LEAVE: `u32 player`, `u8 why`.
pub fn leave(tick: u64, player: u32, why: LeaveReason) -> Vec<u8> {
    let mut w = Writer::new();
    w.u64(tick).u32(player).u8(match why {
        LeaveReason::Left => 0,
        LeaveReason::Dropped => 1,
        LeaveReason::Kicked => 2,
        LeaveReason::Transferred => 3,
    });
    w.into_vec()
}

/// DROP or REJOIN: `u32 player`.
pub fn player(tick: u64, player: u32) -> Vec<u8> {
    let mut w = Writer::new();
    w.u64(tick).u32(player);
    w.into_vec()
}

/// SANITIZE: `u32 player`, `bytes payload`.
pub fn payload(tick: u64, player: u32, payload: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    w.u64(tick).u32(player).bytes(payload);
    w.into_vec()
}

fn put_inputs(w: &mut Writer, inputs: &[(u32, &[u8])]) {
    w.u32(u32::try_from(inputs.len()).unwrap_or(u32::MAX));
    for (player, payload) in inputs {
        w.u32(*player).bytes(payload);
    }
}

/// INPUTS: `u32 n`, then `n` × (`u32 player`, `bytes payload`).
pub fn inputs(tick: u64, inputs: &[(u32, &[u8])]) -> Vec<u8> {
    let mut w = Writer::new();
    w.u64(tick);
    put_inputs(&mut w, inputs);
    w.into_vec()
}

/// TICK without inputs: `u64 time_us`, `u32 dt_us`, `u32 0`.
pub fn tick(tick: u64, time_us: u64, dt_us: u32) -> Vec<u8> {
    tick_with(tick, time_us, dt_us, &[])
}

/// TICK: `u64 time_us`, `u32 dt_us`, then the tick's inputs as in [`inputs`].
pub fn tick_with(tick: u64, time_us: u64, dt_us: u32, inputs: &[(u32, &[u8])]) -> Vec<u8> {
    let mut w = Writer::new();
    w.u64(tick).u64(time_us).u32(dt_us);
    put_inputs(&mut w, inputs);
    w.into_vec()
}

/// TIMER: `u64 tag`.
pub fn timer(tick: u64, tag: u64) -> Vec<u8> {
    let mut w = Writer::new();
    w.u64(tick).u64(tag);
    w.into_vec()
}

/// SAVE or STATE_HASH: the tick alone.
pub fn bare(tick: u64) -> Vec<u8> {
    tick.to_le_bytes().to_vec()
}

/// RESTORE: `u64 seed`, `str zone_id`, `str params`, `str fact_prefix` (from
/// [`fact_prefix`]), `bytes save`.
pub fn restore(tick: u64, seed: u64, zone_id: &str, params: &str, save: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    w.u64(tick)
        .u64(seed)
        .str(zone_id)
        .str(params)
        .str(&fact_prefix(zone_id))
        .bytes(save);
    w.into_vec()
}

/// MIGRATE: `u32 from_version`, `bytes save` (the tick is 0: no zone runs the instance).
pub fn migrate(from: u32, save: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    w.u64(0).u32(from).bytes(save);
    w.into_vec()
}

/// SETTLED: `str key`, `u8 ok`, `str detail`.
pub fn settled(tick: u64, key: &str, ok: bool, detail: &str) -> Vec<u8> {
    let mut w = Writer::new();
    w.u64(tick).str(key).bool(ok).str(detail);
    w.into_vec()
}

/// TRANSFER_IN: `u32 player`, `str principal`, `str claims`, `str from_zone`,
/// `u8 returning` (a `zonekeep_abi::returning` code), `bytes state`, `bytes character` (empty
/// when the player has none).
// One argument per field of the call, in the ABI's order.
#[allow(clippy::too_many_arguments)]
pub fn transfer_in(
    tick: u64,
    player: u32,
    principal: &str,
    claims: &str,
    from_zone: &str,
    returning: u8,
    state: &[u8],
    character: &[u8],
) -> Vec<u8> {
    let mut w = Writer::new();
    w.u64(tick)
        .u32(player)
        .str(principal)
        .str(claims)
        .str(from_zone)
        .u8(returning)
        .bytes(state)
        .bytes(character);
    w.into_vec()
}

/// MESSAGE (`from`: `"admin"` or `"zone:<id>"`) or CHILD (`from`: the child's id):
/// `str`, `u16 topic`, `bytes payload`.
pub fn message(tick: u64, from: &str, topic: u16, payload: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    w.u64(tick).str(from).u16(topic).bytes(payload);
    w.into_vec()
}

/// UNDELIVERABLE: `u8 kind` (1: a group), `str to`, `u16 topic`, `str reason`.
pub fn undeliverable(tick: u64, group: bool, to: &str, topic: u16, reason: &str) -> Vec<u8> {
    let mut w = Writer::new();
    w.u64(tick).bool(group).str(to).u16(topic).str(reason);
    w.into_vec()
}

/// CALL_RESULT: `str key`, then `u8 0` and `str value` (JSON text), or `u8 1`, `str code` and
/// `str message`.
pub fn call_result(tick: u64, key: &str, result: &CallResult) -> Vec<u8> {
    let mut w = Writer::new();
    w.u64(tick).str(key);
    match result {
        CallResult::Ok(value) => {
            w.u8(zonekeep_abi::call_result::OK).str(value);
        }
        CallResult::Err { code, message } => {
            w.u8(zonekeep_abi::call_result::ERR).str(code).str(message);
        }
    }
    w.into_vec()
}
