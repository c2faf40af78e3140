//! Host tests: facts (keys, bound, settlement), snapshots and restore.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::{
    Claims, Clock, Ctx, FactError, FactKey, FactOutcome, InputRefusal, ManualClock, PlayerId,
    Principal, RestoreError, Role, Settlement, SnapshotError, Zone, ZoneConfig, ZoneError,
    ZoneHost, ZoneInit, ZoneKinds,
};

/// Adds each input to a running total and emits one fact per input (the
/// input's seq in the payload). Saves its total as 8 bytes.
#[derive(Debug, Default)]
struct Ledgerish {
    total: i64,
    emitted: Vec<Result<FactKey, FactError>>,
    settled: Vec<(u64, Settlement)>,
}

impl Zone for Ledgerish {
    type Input = i64;

    fn create(_init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(Self::default())
    }

    fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<i64, InputRefusal> {
        let b: [u8; 8] = payload
            .try_into()
            .map_err(|_| InputRefusal::new(1, "expected 8 bytes"))?;
        Ok(i64::from_le_bytes(b))
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, p: PlayerId, v: i64) {
        self.total += v;
        let seq = ctx.input_meta().map(|m| m.seq);
        let principal = ctx.player(p).map(|i| i.principal.as_str().to_owned());
        let r = ctx.emit_fact(
            "add",
            json!({"seq": seq, "add": {"score": v}}),
            principal.as_deref(),
            None,
        );
        self.emitted.push(r);
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}

    fn on_fact_settled(&mut self, ctx: &mut Ctx<'_>, s: &Settlement) {
        self.settled.push((ctx.tick(), s.clone()));
    }

    fn save(&self) -> Option<Vec<u8>> {
        Some(self.total.to_le_bytes().to_vec())
    }

    fn restore(_init: &ZoneInit, _ctx: &mut Ctx<'_>, bytes: &[u8]) -> Result<Self, ZoneError> {
        let b: [u8; 8] = bytes
            .try_into()
            .map_err(|_| ZoneError::Restore(format!("expected 8 bytes, got {}", bytes.len())))?;
        Ok(Self {
            total: i64::from_le_bytes(b),
            ..Self::default()
        })
    }
}

/// A kind that keeps the default `save`/`restore`.
struct Unsaved;

impl Zone for Unsaved {
    type Input = ();
    fn create(_init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(Unsaved)
    }
    fn sanitize(&mut self, _p: PlayerId, _payload: &[u8]) -> Result<(), InputRefusal> {
        Ok(())
    }
    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
}

fn init(kind: &str) -> ZoneInit {
    ZoneInit {
        zone_id: "z1".into(),
        kind: kind.into(),
        params: serde_json::Value::Null,
    }
}

fn cfg(max_facts: usize) -> ZoneConfig {
    ZoneConfig {
        max_catch_up: 1000,
        max_facts_in_flight: max_facts,
        ..ZoneConfig::default()
    }
}

fn setup(max_facts: usize, epoch: u64) -> (ZoneHost, ManualClock, PlayerId) {
    let clock = ManualClock::new();
    let mut h = ZoneHost::with_boot_epoch::<Ledgerish>(
        init("ledgerish"),
        cfg(max_facts),
        Arc::new(clock.clone()),
        epoch,
    )
    .unwrap();
    let p = h
        .handle_join(Principal::new("alice"), Claims::new(), Role::Player)
        .unwrap();
    (h, clock, p)
}

/// Pushes `v` with `seq` and runs exactly one tick.
fn input_tick(h: &mut ZoneHost, clock: &ManualClock, p: PlayerId, seq: u32, v: i64) {
    assert!(h.handle_input(p, seq, 0, &v.to_le_bytes()).is_accepted());
    one_tick(h, clock);
}

fn one_tick(h: &mut ZoneHost, clock: &ManualClock) -> crate::AdvanceReport {
    clock.advance(h.config().dt());
    let r = h.advance(clock.now());
    assert_eq!(r.ticks_run, 1);
    r
}

#[test]
fn fact_keys_are_stable_unique_and_carry_the_boot_epoch() {
    let (mut h, clock, p) = setup(16, 5);
    for seq in 1..=3 {
        input_tick(&mut h, &clock, p, seq, 10);
    }
    let facts = h.drain_facts();
    let keys: Vec<&str> = facts.iter().map(|f| f.key.as_str()).collect();
    assert_eq!(keys, ["z1:5:0", "z1:5:1", "z1:5:2"]);
    assert_eq!(facts[1].payload, json!({"seq": 2, "add": {"score": 10}}));
    assert_eq!(facts[1].principal.as_deref(), Some("alice"));
    assert_eq!(facts[1].tick, 2);
    assert!(h.drain_facts().is_empty());
    assert_eq!(h.facts_in_flight(), 3);
}

#[test]
fn fact_queue_is_bounded_and_overflow_is_reported() {
    let (mut h, clock, p) = setup(2, 1);
    for seq in 1..=3 {
        assert!(h.handle_input(p, seq, 0, &1i64.to_le_bytes()).is_accepted());
    }
    clock.advance(h.config().dt() * 3);
    let r = h.advance(clock.now());
    assert_eq!(r.ticks_run, 3);
    assert_eq!(r.facts_overflowed, 1);
    let zone = h.zone::<Ledgerish>().unwrap();
    assert!(zone.emitted[0].is_ok() && zone.emitted[1].is_ok());
    assert_eq!(zone.emitted[2], Err(FactError::QueueFull { capacity: 2 }));
    assert_eq!(h.facts_in_flight(), 2);
}

#[test]
fn settlement_is_delivered_on_the_next_tick_only() {
    let (mut h, clock, p) = setup(16, 1);
    input_tick(&mut h, &clock, p, 1, 7);
    let fact = h.drain_facts().pop().unwrap();
    let s = Settlement {
        key: fact.key.clone(),
        outcome: FactOutcome::Ok(json!({"score": 7})),
    };
    h.handle_settlement(s.clone());
    assert!(
        h.zone::<Ledgerish>().unwrap().settled.is_empty(),
        "not delivered outside a tick"
    );
    assert_eq!(h.facts_in_flight(), 1, "in flight until delivered");
    let r = one_tick(&mut h, &clock);
    assert_eq!(r.facts_settled, 1);
    assert_eq!(h.zone::<Ledgerish>().unwrap().settled, vec![(2, s.clone())]);
    assert_eq!(h.facts_in_flight(), 0);

    // Settling again (a re-send's answer) or an unknown key is dropped and counted.
    h.handle_settlement(s);
    h.handle_settlement(Settlement {
        key: FactKey("nope".into()),
        outcome: FactOutcome::Refused("x".into()),
    });
    let r = one_tick(&mut h, &clock);
    assert_eq!(r.settlements_unknown, 2);
    assert_eq!(h.zone::<Ledgerish>().unwrap().settled.len(), 1);
}

#[test]
fn snapshot_restore_keeps_state_and_in_flight_facts() {
    let (mut h, clock, p) = setup(16, 3);
    for seq in 1..=3 {
        input_tick(&mut h, &clock, p, seq, 5);
    }
    let sent = h.drain_facts();
    // The first fact settles; the other two stay in flight.
    h.handle_settlement(Settlement {
        key: sent[0].key.clone(),
        outcome: FactOutcome::Ok(json!(null)),
    });
    one_tick(&mut h, &clock);
    let envelope = h.snapshot().unwrap();

    let clock2 = ManualClock::new();
    let mut r = ZoneHost::restore::<Ledgerish>(
        init("ledgerish"),
        cfg(16),
        Arc::new(clock2.clone()),
        4,
        &envelope,
    )
    .unwrap();
    assert_eq!(r.zone::<Ledgerish>().unwrap().total, 15);
    assert_eq!(r.tick(), 4, "tick numbering continues");
    assert_eq!(r.boot_epoch(), 4);
    let resent = r.drain_facts();
    assert_eq!(resent, sent[1..].to_vec(), "same keys, payloads and order");

    // New facts use the new epoch and continue the counter.
    let p2 = r
        .handle_join(Principal::new("alice"), Claims::new(), Role::Player)
        .unwrap();
    assert!(r.handle_input(p2, 1, 0, &1i64.to_le_bytes()).is_accepted());
    clock2.advance(r.config().dt());
    r.advance(clock2.now());
    let new = r.drain_facts();
    assert_eq!(new.len(), 1);
    assert_eq!(new[0].key.as_str(), "z1:4:3");

    // A settlement of a re-sent fact reaches the restored zone.
    r.handle_settlement(Settlement {
        key: resent[0].key.clone(),
        outcome: FactOutcome::Ok(json!(1)),
    });
    clock2.advance(r.config().dt());
    assert_eq!(r.advance(clock2.now()).facts_settled, 1);
    assert_eq!(r.facts_in_flight(), 2);
}

#[test]
fn a_restored_zone_keeps_its_participants_for_their_resume() {
    let (mut h, clock, p) = setup(16, 3);
    for seq in 1..=3 {
        input_tick(&mut h, &clock, p, seq, 5);
    }
    let watcher = h
        .handle_join(Principal::new("watcher"), Claims::new(), Role::Observer)
        .unwrap();
    let envelope = h.snapshot().unwrap();

    // Another host restores it: the participants are there, dropped, within their grace.
    let clock2 = ManualClock::new();
    let mut r = ZoneHost::restore::<Ledgerish>(
        init("ledgerish"),
        cfg(16),
        Arc::new(clock2.clone()),
        4,
        &envelope,
    )
    .unwrap();
    let info = r.player(p).unwrap();
    assert_eq!(info.principal.as_str(), "alice");
    assert!(!info.connected, "back as dropped until the client resumes");
    assert_eq!(r.player(watcher).unwrap().role, Role::Observer);

    // The player resumes with its id; its acknowledged inputs stay consumed and new ones follow.
    r.handle_rejoin(p).unwrap();
    assert!(
        !r.handle_input(p, 3, 0, &5i64.to_le_bytes()).is_accepted(),
        "an input the old host consumed is a duplicate here"
    );
    assert!(r.handle_input(p, 4, 0, &5i64.to_le_bytes()).is_accepted());
    clock2.advance(r.config().dt());
    r.advance(clock2.now());
    assert_eq!(r.zone::<Ledgerish>().unwrap().total, 20);

    // New participants never reuse a restored id.
    let newcomer = r
        .handle_join(Principal::new("bob"), Claims::new(), Role::Player)
        .unwrap();
    assert!(newcomer.0 > watcher.0 && newcomer.0 > p.0);

    // One that does not come back within the grace is removed as dropped.
    clock2.advance(r.config().reconnect_grace * 2);
    r.advance(clock2.now());
    assert!(r.player(watcher).is_none());
}

#[test]
fn corrupt_or_unreadable_envelopes_are_typed_errors() {
    let (mut h, clock, p) = setup(16, 1);
    input_tick(&mut h, &clock, p, 1, 5);
    let envelope = h.snapshot().unwrap();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new());
    let restore =
        |bytes: &[u8]| ZoneHost::restore::<Ledgerish>(init("l"), cfg(16), clock.clone(), 2, bytes);

    let mut damaged = envelope.clone();
    let mid = damaged.len() / 2;
    damaged[mid] ^= 0xff;
    assert_eq!(
        restore(&damaged).unwrap_err(),
        RestoreError::Snapshot(SnapshotError::Checksum)
    );
    assert_eq!(
        restore(&envelope[..envelope.len() - 3]).unwrap_err(),
        RestoreError::Snapshot(SnapshotError::Truncated)
    );
    assert_eq!(
        restore(b"garbage garbage garbage").unwrap_err(),
        RestoreError::Snapshot(SnapshotError::BadMagic)
    );

    // A well-formed envelope whose zone bytes the code cannot read.
    let mut snap = crate::Snapshot::decode(&envelope).unwrap();
    snap.zone = vec![1, 2, 3];
    assert!(matches!(
        restore(&snap.encode()).unwrap_err(),
        RestoreError::Zone(ZoneError::Restore(_))
    ));
}

#[test]
fn unsaved_kinds_have_no_snapshot_and_do_not_restore() {
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new());
    let h =
        ZoneHost::new::<Unsaved>(init("unsaved"), ZoneConfig::default(), clock.clone()).unwrap();
    assert_eq!(h.snapshot(), None);

    let (ledger, _c, _p) = setup(4, 1);
    let envelope = ledger.snapshot().unwrap();
    let err =
        ZoneHost::restore::<Unsaved>(init("unsaved"), ZoneConfig::default(), clock, 2, &envelope)
            .unwrap_err();
    assert_eq!(
        err,
        RestoreError::Zone(ZoneError::NotRestorable("unsaved".into()))
    );
}

#[test]
fn registry_hosts_keep_facts_through_snapshot_and_restore() {
    let mut kinds = ZoneKinds::new();
    kinds.register::<Ledgerish>("ledgerish");
    let clock = ManualClock::new();
    let mut h: ZoneHost = kinds
        .create_at(init("ledgerish"), cfg(8), Arc::new(clock.clone()), 9)
        .unwrap();
    assert_eq!(h.boot_epoch(), 9);
    let p = h
        .handle_join(Principal::new("bob"), Claims::new(), Role::Player)
        .unwrap();
    assert!(h.handle_input(p, 1, 0, &4i64.to_le_bytes()).is_accepted());
    clock.advance(Duration::from_millis(40));
    h.advance(clock.now());
    let facts = h.drain_facts();
    assert_eq!(facts.len(), 1);
    assert_eq!(h.facts_in_flight(), 1);
    let envelope = h.snapshot().unwrap();

    let mut r = kinds
        .restore(
            init("ledgerish"),
            cfg(8),
            Arc::new(clock.clone()),
            10,
            &envelope,
        )
        .unwrap();
    assert_eq!(r.drain_facts(), facts);
    r.handle_settlement(Settlement {
        key: facts[0].key.clone(),
        outcome: FactOutcome::Refused("no".into()),
    });
    clock.advance(Duration::from_millis(40));
    assert_eq!(r.advance(clock.now()).facts_settled, 1);
    assert_eq!(r.facts_in_flight(), 0);

    let err = kinds
        .restore(init("other"), cfg(8), Arc::new(clock.clone()), 1, &envelope)
        .err()
        .unwrap();
    assert_eq!(
        err,
        RestoreError::Zone(ZoneError::UnknownKind("other".into()))
    );
}

#[test]
fn a_zone_started_for_a_waiting_player_ticks_at_once_and_frames_it() {
    let (mut h, clock, p) = setup(16, 3);
    input_tick(&mut h, &clock, p, 1, 5);
    let envelope = h.snapshot().unwrap();
    let restore = |clock: &ManualClock| {
        ZoneHost::restore::<Ledgerish>(
            init("ledgerish"),
            cfg(16),
            Arc::new(clock.clone()),
            4,
            &envelope,
        )
        .unwrap()
    };

    // A restored zone's first tick is one interval away…
    let plain_clock = ManualClock::new();
    let mut plain = restore(&plain_clock);
    assert_eq!(plain.advance(plain_clock.now()).ticks_run, 0);

    // …unless a player resumed with its start: then the first advance runs a tick and that
    // player gets a frame from it, not one interval later.
    let clock2 = ManualClock::new();
    let mut r = restore(&clock2);
    r.handle_rejoin(p).unwrap();
    r.tick_at_once();
    assert_eq!(r.next_tick_due(), clock2.now());
    let report = r.advance(clock2.now());
    assert_eq!(report.ticks_run, 1);
    assert_eq!(report.tick, 2, "the tick count continues from the snapshot");
    assert!(r.drain_frames().unwrap().any(|f| f.player == p));

    // Then the schedule is the ordinary one, and asking again changes nothing.
    r.tick_at_once();
    assert_eq!(r.next_tick_due(), clock2.now() + r.config().dt());
    assert_eq!(r.advance(clock2.now()).ticks_run, 0);
}
