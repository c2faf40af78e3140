//! A [`ZoneConfig`] in a recording's header: every field, so a replay runs under the settings
//! the zone ran with, whatever the replaying host's defaults are.

use std::time::Duration;

use zonekeep_protocol::wire::{put_f32, put_varint, Reader};

use crate::config::ZoneConfig;
use crate::input::InputPolicy;
use crate::tier::IdlePolicy;
use crate::view::ReplicationSettings;

/// Largest value a size field (buffers, queues, budgets) may take when read back: far above any
/// sane setting, low enough that a corrupt header cannot make the replaying host reserve
/// gigabytes.
const MAX_SIZE_FIELD: u64 = 1 << 24;

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Appends every field of `c`.
pub(super) fn put_config(out: &mut Vec<u8>, c: &ZoneConfig) {
    for v in [
        c.tick_hz,
        c.patch_every,
        c.max_catch_up,
        c.max_players,
        c.max_observers,
    ] {
        put_varint(out, u64::from(v));
    }
    put_varint(out, nanos(c.idle_after));
    put_varint(out, nanos(c.dormant_after));
    match c.idle_policy {
        IdlePolicy::Pause => put_varint(out, 0),
        IdlePolicy::Slow(n) => put_varint(out, u64::from(n) + 1),
    }
    put_varint(out, c.input_buffer as u64);
    out.push(match c.input_policy {
        InputPolicy::Next => 0,
        InputPolicy::Latest => 1,
        InputPolicy::Drain => 2,
    });
    put_varint(out, nanos(c.reconnect_grace));
    put_varint(out, c.world_seed);
    put_varint(out, c.max_timers as u64);
    put_varint(out, c.max_pending_events as u64);
    put_varint(out, c.max_facts_in_flight as u64);
    let r = &c.replication;
    put_f32(out, r.pos_step);
    put_f32(out, r.cell_size);
    put_f32(out, r.view_radius);
    put_f32(out, r.margin);
    put_varint(out, r.budget.map_or(0, |b| b as u64 + 1));
    put_f32(out, r.priority_distance);
    // Since version 4: the limits on what the zone's code may grow.
    put_varint(out, c.max_pending_event_bytes as u64);
    put_varint(out, c.max_entities as u64);
    put_varint(out, c.max_fact_bytes as u64);
    put_varint(out, u64::from(c.max_facts_per_second));
    // Since version 7: a lasting world never goes Dormant.
    out.push(u8::from(c.lasting));
    // Since version 8: the state version its saves are read under (a replay restores one).
    put_varint(out, u64::from(c.state_version));
    // Since version 9: whether its players bring characters.
    out.push(u8::from(c.characters));
    // Since version 10: the limits on durable calls.
    put_varint(out, c.max_calls_in_flight as u64);
    put_varint(out, c.max_call_bytes as u64);
    // Since version 12: the observers' patch rate (a replay builds the same frames).
    put_varint(out, u64::from(c.observer_patch_every));
}

fn size(r: &mut Reader<'_>, what: &str) -> Result<usize, String> {
    let v = r.varint_u64().map_err(|e| e.to_string())?;
    if v > MAX_SIZE_FIELD {
        return Err(format!("config {what} {v} is out of range"));
    }
    usize::try_from(v).map_err(|_| format!("config {what} {v} is out of range"))
}

fn u32v(r: &mut Reader<'_>) -> Result<u32, String> {
    r.varint_u32().map_err(|e| e.to_string())
}

fn duration(r: &mut Reader<'_>) -> Result<Duration, String> {
    r.varint_u64()
        .map(Duration::from_nanos)
        .map_err(|e| e.to_string())
}

fn f32v(r: &mut Reader<'_>) -> Result<f32, String> {
    r.f32().map_err(|e| e.to_string())
}

/// The first format version whose config carries the zone's limits (older recordings replay
/// under the default limits).
const LIMITS_VERSION: u16 = 4;

/// The first format version whose config says whether the zone is a lasting world (older
/// recordings are of zones that were not).
const LASTING_VERSION: u16 = 7;

/// The first format version whose config carries the zone's state version (older recordings
/// are of zones at the first one).
const STATE_VERSION_VERSION: u16 = 8;

/// The first format version whose config says whether the kind's players bring characters.
const CHARACTERS_VERSION: u16 = 9;

/// The first format version whose config carries the limits on durable calls.
const CALLS_VERSION: u16 = 10;

/// The first format version whose config carries the observers' patch rate (older recordings
/// are of zones that served observers every patch).
const OBSERVER_RATE_VERSION: u16 = 12;

/// Reads what [`put_config`] wrote (in format `version`) and validates it.
pub(super) fn get_config(r: &mut Reader<'_>, version: u16) -> Result<ZoneConfig, String> {
    let tick_hz = u32v(r)?;
    let patch_every = u32v(r)?;
    let max_catch_up = u32v(r)?;
    let max_players = u32v(r)?;
    let max_observers = u32v(r)?;
    let idle_after = duration(r)?;
    let dormant_after = duration(r)?;
    let idle_policy = match u32v(r)? {
        0 => IdlePolicy::Pause,
        n => IdlePolicy::Slow(n - 1),
    };
    let input_buffer = size(r, "input_buffer")?;
    let input_policy = match r.u8().map_err(|e| e.to_string())? {
        0 => InputPolicy::Next,
        1 => InputPolicy::Latest,
        2 => InputPolicy::Drain,
        n => return Err(format!("unknown input policy {n}")),
    };
    let reconnect_grace = duration(r)?;
    let world_seed = r.varint_u64().map_err(|e| e.to_string())?;
    let max_timers = size(r, "max_timers")?;
    let max_pending_events = size(r, "max_pending_events")?;
    let max_facts_in_flight = size(r, "max_facts_in_flight")?;
    let replication = ReplicationSettings {
        pos_step: f32v(r)?,
        cell_size: f32v(r)?,
        view_radius: f32v(r)?,
        margin: f32v(r)?,
        budget: match size(r, "budget")? {
            0 => None,
            n => Some(n - 1),
        },
        priority_distance: f32v(r)?,
    };
    let d = ZoneConfig::default();
    let (max_pending_event_bytes, max_entities, max_fact_bytes, max_facts_per_second) =
        if version >= LIMITS_VERSION {
            (
                usize::try_from(r.varint_u64().map_err(|e| e.to_string())?)
                    .map_err(|_| "config max_pending_event_bytes is out of range".to_owned())?,
                usize::try_from(r.varint_u64().map_err(|e| e.to_string())?)
                    .map_err(|_| "config max_entities is out of range".to_owned())?,
                usize::try_from(r.varint_u64().map_err(|e| e.to_string())?)
                    .map_err(|_| "config max_fact_bytes is out of range".to_owned())?,
                u32v(r)?,
            )
        } else {
            (
                d.max_pending_event_bytes,
                d.max_entities,
                d.max_fact_bytes,
                d.max_facts_per_second,
            )
        };
    let lasting = if version >= LASTING_VERSION {
        match r.u8().map_err(|e| e.to_string())? {
            0 => false,
            1 => true,
            n => return Err(format!("config lasting must be 0 or 1, not {n}")),
        }
    } else {
        false
    };
    let state_version = if version >= STATE_VERSION_VERSION {
        u32v(r)?
    } else {
        1
    };
    let characters = if version >= CHARACTERS_VERSION {
        match r.u8().map_err(|e| e.to_string())? {
            0 => false,
            1 => true,
            n => return Err(format!("config characters must be 0 or 1, not {n}")),
        }
    } else {
        false
    };
    let (max_calls_in_flight, max_call_bytes) = if version >= CALLS_VERSION {
        (size(r, "max_calls_in_flight")?, size(r, "max_call_bytes")?)
    } else {
        (d.max_calls_in_flight, d.max_call_bytes)
    };
    let observer_patch_every = if version >= OBSERVER_RATE_VERSION {
        u32v(r)?
    } else {
        1
    };
    let config = ZoneConfig {
        characters,
        observer_patch_every,
        max_calls_in_flight,
        max_call_bytes,
        tick_hz,
        lasting,
        state_version,
        patch_every,
        max_catch_up,
        max_players,
        max_observers,
        idle_after,
        dormant_after,
        idle_policy,
        input_buffer,
        input_policy,
        reconnect_grace,
        world_seed,
        max_timers,
        max_pending_events,
        max_facts_in_flight,
        max_pending_event_bytes,
        max_entities,
        max_fact_bytes,
        max_facts_per_second,
        replication,
    };
    config
        .validate()
        .map_err(|e| format!("recorded config is invalid: {e}"))?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn read(bytes: &[u8], version: u16) -> Result<ZoneConfig, String> {
        let mut r = Reader::new(bytes);
        let config = get_config(&mut r, version)?;
        r.finish().map_err(|e| e.to_string())?;
        Ok(config)
    }

    #[test]
    fn the_observer_rate_is_recorded_and_older_recordings_read_with_every_patch() {
        let config = ZoneConfig {
            patch_every: 2,
            observer_patch_every: 7,
            ..ZoneConfig::default()
        };
        let mut bytes = Vec::new();
        put_config(&mut bytes, &config);
        assert_eq!(read(&bytes, OBSERVER_RATE_VERSION), Ok(config.clone()));
        // A version 11 config ends before the rate: observers were served every patch.
        let (last, older) = bytes.split_last().unwrap();
        assert_eq!(*last, 7);
        let old = read(older, OBSERVER_RATE_VERSION - 1).unwrap();
        assert_eq!(old.observer_patch_every, 1);
        assert_eq!(
            old,
            ZoneConfig {
                observer_patch_every: 1,
                ..config
            }
        );
        // A rate no zone runs is refused like any invalid config.
        let mut bad = older.to_vec();
        put_varint(&mut bad, 0);
        assert!(read(&bad, OBSERVER_RATE_VERSION).is_err());
    }
}
