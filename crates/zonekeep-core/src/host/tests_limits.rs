//! A hostile zone against the host's per-zone limits: entities, events and facts stay bounded,
//! each refusal is typed and counted, and what was accepted is kept.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use zonekeep_protocol::limits::MAX_SERVER_MESSAGE;
use zonekeep_protocol::mirror::Mirror;
use zonekeep_protocol::schema::KindDef;

use crate::{
    Claims, Clock, Ctx, EventTarget, FactError, InputRefusal, KindId, ManualClock, PlayerId,
    Principal, Role, WorldError, Zone, ZoneConfig, ZoneError, ZoneHost, ZoneInit,
};

/// Does per tick what its params say: `spawn` entities, `events` events of `event_bytes` to
/// everyone, `facts` facts with a payload of `fact_bytes`. Keeps every refusal it was given.
struct Flood {
    kind: KindId,
    spawn: usize,
    events: usize,
    event_bytes: usize,
    facts: usize,
    fact_bytes: usize,
    spawn_errors: Vec<WorldError>,
    fact_errors: Vec<FactError>,
    facts_accepted: usize,
}

fn param(init: &ZoneInit, name: &str) -> usize {
    init.params.get(name).and_then(|v| v.as_u64()).unwrap_or(0) as usize
}

impl Zone for Flood {
    type Input = ();

    fn create(init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let kind = ctx
            .world()
            .declare_kind(KindDef {
                name: "mote".into(),
                fields: vec![],
            })
            .map_err(|e| ZoneError::Failed(e.to_string()))?;
        Ok(Flood {
            kind,
            spawn: param(init, "spawn"),
            events: param(init, "events"),
            event_bytes: param(init, "event_bytes"),
            facts: param(init, "facts"),
            fact_bytes: param(init, "fact_bytes"),
            spawn_errors: Vec::new(),
            fact_errors: Vec::new(),
            facts_accepted: 0,
        })
    }

    fn sanitize(&mut self, _p: PlayerId, _payload: &[u8]) -> Result<(), InputRefusal> {
        Ok(())
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        for i in 0..self.spawn {
            if let Err(e) = ctx.world().spawn(self.kind, i as f32, 0.0) {
                self.spawn_errors.push(e);
            }
        }
        for i in 0..self.events {
            let mut payload = vec![0u8; self.event_bytes];
            if let Some(b) = payload.first_mut() {
                *b = i as u8;
            }
            ctx.emit_event(EventTarget::All, 7, payload);
        }
        for _ in 0..self.facts {
            let payload = json!({ "blob": "x".repeat(self.fact_bytes) });
            match ctx.emit_fact("flood", payload, None, None) {
                Ok(_) => self.facts_accepted += 1,
                Err(e) => self.fact_errors.push(e),
            }
        }
    }
}

fn host(config: ZoneConfig, params: serde_json::Value) -> (ZoneHost, ManualClock) {
    let clock = ManualClock::new();
    let init = ZoneInit {
        zone_id: "flood-1".into(),
        kind: "flood".into(),
        params,
    };
    let host = ZoneHost::new::<Flood>(init, config, Arc::new(clock.clone())).unwrap();
    (host, clock)
}

fn tick(h: &mut ZoneHost, clock: &ManualClock) -> crate::AdvanceReport {
    clock.advance(h.config().dt());
    h.advance(clock.now())
}

fn join(h: &mut ZoneHost, name: &str) -> PlayerId {
    h.handle_join(Principal::new(name), Claims::new(), Role::Player)
        .unwrap()
}

#[test]
fn spawning_past_the_entity_cap_is_refused_naming_the_cap() {
    let (mut h, clock) = host(
        ZoneConfig::default(),
        json!({ "spawn": 20_000, "facts": 0 }),
    );
    for _ in 0..5 {
        tick(&mut h, &clock);
    }
    let cap = ZoneConfig::default().max_entities;
    assert!(cap >= 50_000, "a crowd of tens of thousands fits");
    assert_eq!(h.world().len(), cap, "the world stops at the cap");
    let flood = h.zone::<Flood>().unwrap();
    assert_eq!(flood.spawn_errors.len(), 100_000 - cap);
    assert_eq!(flood.spawn_errors[0], WorldError::EntityCap { cap });
    assert!(flood.spawn_errors[0].to_string().contains(&cap.to_string()));
}

#[test]
fn refused_spawns_are_counted_in_the_advance_report() {
    let config = ZoneConfig {
        max_entities: 10,
        ..ZoneConfig::default()
    };
    let (mut h, clock) = host(config, json!({ "spawn": 4 }));
    let counts: Vec<u64> = (0..4)
        .map(|_| tick(&mut h, &clock).spawns_refused)
        .collect();
    assert_eq!(counts, vec![0, 0, 2, 4]);
    assert_eq!(h.world().len(), 10);
}

#[test]
fn events_beyond_what_a_frame_holds_spill_to_later_patches_and_frames_stay_under_the_cap() {
    // 1,000 events of 16 KiB a tick: about 16 MB, sixteen times what one message may carry.
    let (mut h, clock) = host(
        ZoneConfig::default(),
        json!({ "events": 1000, "event_bytes": 16 * 1024 }),
    );
    let players: Vec<PlayerId> = (0..3).map(|i| join(&mut h, &format!("p{i}"))).collect();
    let mut mirrors: BTreeMap<PlayerId, Mirror> = BTreeMap::new();
    let schema = h.schema();
    let mut received = 0usize;
    let mut dropped = 0u64;
    let mut deferred = 0u64;
    for _ in 0..5 {
        let report = tick(&mut h, &clock);
        dropped += report.events_dropped;
        let frames: Vec<(PlayerId, Vec<u8>)> = h
            .drain_frames()
            .expect("a patch of oversized events still builds")
            .map(|f| (f.player, f.bytes.to_vec()))
            .collect();
        deferred += h.last_build_stats().events_deferred;
        assert_eq!(frames.len(), players.len(), "every player gets its frame");
        for (player, bytes) in frames {
            assert!(
                bytes.len() <= MAX_SERVER_MESSAGE,
                "a frame of {} bytes",
                bytes.len()
            );
            let delta = mirrors
                .entry(player)
                .or_default()
                .decode_apply(&bytes, &schema)
                .unwrap();
            if player == players[0] {
                received += delta.events.map_or(0, |e| e.len());
            }
        }
    }
    assert!(received > 0, "events still flow");
    assert!(
        dropped > 0,
        "what the queue cannot hold is dropped and counted"
    );
    assert!(
        deferred > 0,
        "what a frame cannot hold waits for the next patch"
    );
    // Nothing is lost silently: every event emitted was sent, is still queued, or was counted.
    let queued = h.drain_events().count() as u64;
    assert_eq!(received as u64 + queued + dropped, 5 * 1000);
}

#[test]
fn spilled_events_keep_their_order() {
    let (mut h, clock) = host(
        ZoneConfig::default(),
        json!({ "events": 40, "event_bytes": 16 * 1024 }),
    );
    let p = join(&mut h, "p");
    let schema = h.schema();
    let mut mirror = Mirror::default();
    let mut firsts = Vec::new();
    for _ in 0..3 {
        tick(&mut h, &clock);
        for f in h.drain_frames().unwrap() {
            assert_eq!(f.player, p);
            let delta = mirror.decode_apply(f.bytes, &schema).unwrap();
            firsts.extend(delta.events.iter().flatten().map(|e| e.payload[0]));
        }
    }
    let expect: Vec<u8> = (0..3).flat_map(|_| 0..40u8).take(firsts.len()).collect();
    assert_eq!(
        firsts, expect,
        "events arrive in emission order across patches"
    );
}

#[test]
fn an_event_larger_than_the_protocol_allows_is_dropped_at_emission() {
    let config = ZoneConfig {
        patch_every: 1000,
        ..ZoneConfig::default()
    };
    let (mut h, clock) = host(config, json!({ "events": 2, "event_bytes": 16 * 1024 + 1 }));
    let r = tick(&mut h, &clock);
    assert_eq!(r.events_dropped, 2);
    assert_eq!(h.drain_events().count(), 0);
}

#[test]
fn pending_events_are_bounded_in_bytes() {
    let config = ZoneConfig {
        patch_every: 1000,
        max_pending_event_bytes: 64 * 1024,
        ..ZoneConfig::default()
    };
    let (mut h, clock) = host(config, json!({ "events": 10, "event_bytes": 16 * 1024 }));
    let r = tick(&mut h, &clock);
    assert_eq!(r.events_dropped, 6, "four 16 KiB events fill 64 KiB");
    assert_eq!(h.drain_events().count(), 4);
    let r = tick(&mut h, &clock);
    assert_eq!(r.events_dropped, 6, "draining made room again");
}

#[test]
fn a_fact_larger_than_the_limit_is_refused_naming_the_limit() {
    let config = ZoneConfig {
        max_facts_in_flight: 100_000,
        ..ZoneConfig::default()
    };
    let max = config.max_fact_bytes;
    let (mut h, clock) = host(config, json!({ "facts": 1, "fact_bytes": 2 * 1024 * 1024 }));
    let r = tick(&mut h, &clock);
    let flood = h.zone::<Flood>().unwrap();
    assert_eq!(flood.facts_accepted, 0);
    match &flood.fact_errors[..] {
        [FactError::TooLarge { bytes, max: m }] => {
            assert!(*bytes > 2 * 1024 * 1024);
            assert_eq!(*m, max);
        }
        other => panic!("expected one TooLarge, got {other:?}"),
    }
    assert!(flood.fact_errors[0].to_string().contains("max_fact_bytes"));
    assert_eq!(r.facts_refused.too_large, 1);
    assert_eq!(h.drain_facts().len(), 0);
}

#[test]
fn a_zone_emitting_facts_faster_than_its_rate_is_refused_and_accepted_facts_are_kept() {
    let config = ZoneConfig {
        tick_hz: 10,
        max_facts_in_flight: 100_000,
        max_facts_per_second: 25,
        ..ZoneConfig::default()
    };
    let (mut h, clock) = host(config, json!({ "facts": 10, "fact_bytes": 10 }));
    let mut refused = 0;
    let mut taken = 0;
    for _ in 0..10 {
        let r = tick(&mut h, &clock);
        refused += r.facts_refused.rate;
        taken += h.drain_facts().len();
    }
    let flood = h.zone::<Flood>().unwrap();
    assert_eq!(
        flood.facts_accepted, 25,
        "one second of zone time: 25 facts"
    );
    assert_eq!(taken, 25, "every accepted fact is handed to the store");
    assert_eq!(refused, 75);
    assert_eq!(
        flood.fact_errors[0],
        FactError::RateLimited { max_per_second: 25 }
    );
    assert!(flood.fact_errors[0]
        .to_string()
        .contains("max_facts_per_second"));
    // The next second opens a new allowance.
    for _ in 0..10 {
        tick(&mut h, &clock);
    }
    assert_eq!(h.zone::<Flood>().unwrap().facts_accepted, 50);
    let _ = Duration::ZERO;
}
