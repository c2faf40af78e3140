//! Host tests: participants, capacity, grace, kicks, dispose, dyn host.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use super::probe::{host, init, join, observe, step, val, Probe};
use crate::{
    Claims, Clock, ConfigError, InputOutcome, JoinError, JoinRefusal, LeaveReason, ManualClock,
    PlayerId, Principal, RejoinError, Role, UnknownPlayer, ZoneConfig, ZoneError, ZoneHost,
    ZoneKinds,
};

fn cfg() -> ZoneConfig {
    ZoneConfig {
        max_catch_up: 1000,
        ..ZoneConfig::default()
    }
}

#[test]
fn ids_start_at_one_and_are_never_reused() {
    let (mut h, _clock) = host(cfg());
    let a = join(&mut h, "a");
    assert_eq!(a, PlayerId(1));
    h.handle_leave(a, LeaveReason::Left).unwrap();
    let refused = h.handle_join(Principal::new("banned"), Claims::new(), Role::Player);
    assert_eq!(
        refused,
        Err(JoinError::Refused(JoinRefusal::new(7, "banned")))
    );
    assert_eq!(join(&mut h, "b"), PlayerId(3));
    assert_eq!(h.players().count(), 1);
}

#[test]
fn capacity_is_enforced_per_role() {
    let (mut h, _clock) = host(ZoneConfig {
        max_players: 1,
        max_observers: 1,
        ..cfg()
    });
    let a = join(&mut h, "a");
    let full = h.handle_join(Principal::new("b"), Claims::new(), Role::Player);
    assert_eq!(full, Err(JoinError::Full { role: Role::Player }));
    observe(&mut h, "o");
    let full = h.handle_join(Principal::new("o2"), Claims::new(), Role::Observer);
    assert_eq!(
        full,
        Err(JoinError::Full {
            role: Role::Observer
        })
    );
    // A dropped player keeps its place during the grace.
    h.handle_drop(a).unwrap();
    let full = h.handle_join(Principal::new("b"), Claims::new(), Role::Player);
    assert_eq!(full, Err(JoinError::Full { role: Role::Player }));
    h.handle_leave(a, LeaveReason::Left).unwrap();
    join(&mut h, "b");
}

#[test]
fn join_carries_principal_claims_and_role() {
    let (mut h, _clock) = host(cfg());
    let mut claims = Claims::new();
    claims.insert("team".into(), serde_json::json!("red"));
    let id = h
        .handle_join(Principal::new("alice"), claims.clone(), Role::Player)
        .unwrap();
    let info = h.player(id).unwrap();
    assert_eq!(info.principal.as_str(), "alice");
    assert_eq!(info.claims, claims);
    assert_eq!(info.role, Role::Player);
    assert!(info.connected);
    let o = observe(&mut h, "bob");
    assert_eq!(
        h.zone::<Probe>().unwrap().log,
        vec![format!("join {id}"), format!("observe {o}")]
    );
}

#[test]
fn drop_and_rejoin_within_grace_keeps_place_and_inputs() {
    let (mut h, clock) = host(ZoneConfig {
        reconnect_grace: Duration::from_secs(5),
        ..cfg()
    });
    let p = join(&mut h, "a");
    h.handle_input(p, 1, 0, &val(1));
    h.handle_drop(p).unwrap();
    h.handle_drop(p).unwrap(); // idempotent
    assert!(!h.player(p).unwrap().connected);
    assert_eq!(h.handle_input(p, 2, 0, &val(2)), InputOutcome::Disconnected);
    clock.set(Duration::from_secs(4));
    let r = h.advance(clock.now());
    assert!(r.left.is_empty());
    assert_eq!(
        h.zone::<Probe>().unwrap().inputs.len(),
        1,
        "input sent before the drop still applies"
    );
    h.handle_rejoin(p).unwrap();
    assert!(h.player(p).unwrap().connected);
    assert_eq!(h.handle_rejoin(p), Err(RejoinError::NotDropped(p)));
    assert_eq!(
        h.handle_input(p, 1, 0, &val(1)),
        InputOutcome::Duplicate,
        "seqs continue"
    );
    assert_eq!(h.handle_input(p, 2, 0, &val(2)), InputOutcome::Accepted);
    assert_eq!(
        h.zone::<Probe>().unwrap().log,
        vec![
            format!("join {p}"),
            format!("drop {p}"),
            format!("rejoin {p}")
        ]
    );
}

#[test]
fn grace_expiry_in_advance_leaves_with_dropped() {
    let (mut h, clock) = host(ZoneConfig {
        reconnect_grace: Duration::from_secs(5),
        ..cfg()
    });
    let p = join(&mut h, "a");
    clock.set(Duration::from_secs(1));
    h.handle_drop(p).unwrap();
    clock.set(Duration::from_secs(6) - Duration::from_nanos(1));
    assert!(h.advance(clock.now()).left.is_empty());
    clock.set(Duration::from_secs(6));
    let r = h.advance(clock.now());
    assert_eq!(r.left, vec![(p, LeaveReason::Dropped)]);
    assert!(h.player(p).is_none());
    assert_eq!(h.handle_rejoin(p), Err(RejoinError::UnknownPlayer(p)));
    assert!(h
        .zone::<Probe>()
        .unwrap()
        .log
        .contains(&format!("leave {p} Dropped")));
}

#[test]
fn rejoin_after_grace_fails_and_leaves() {
    let (mut h, clock) = host(ZoneConfig {
        reconnect_grace: Duration::from_secs(5),
        ..cfg()
    });
    let p = join(&mut h, "a");
    h.handle_drop(p).unwrap();
    clock.set(Duration::from_secs(5)); // no advance in between
    assert_eq!(h.handle_rejoin(p), Err(RejoinError::GraceExpired(p)));
    assert!(h.player(p).is_none());
    assert_eq!(h.advance(clock.now()).left, vec![(p, LeaveReason::Dropped)]);
}

#[test]
fn unknown_players_are_typed_errors() {
    let (mut h, _clock) = host(cfg());
    let ghost = PlayerId(42);
    assert_eq!(
        h.handle_leave(ghost, LeaveReason::Left),
        Err(UnknownPlayer(ghost))
    );
    assert_eq!(h.handle_drop(ghost), Err(UnknownPlayer(ghost)));
    assert_eq!(
        h.handle_rejoin(ghost),
        Err(RejoinError::UnknownPlayer(ghost))
    );
    assert_eq!(
        h.handle_input(ghost, 1, 0, &val(1)),
        InputOutcome::UnknownPlayer
    );
}

#[test]
fn zone_kicks_are_applied_and_reported() {
    let (mut h, clock) = host(cfg());
    let a = join(&mut h, "a");
    let b = join(&mut h, "b");
    h.handle_input(a, 1, 0, &val(99));
    h.handle_input(b, 1, 0, &val(98));
    let r = step(&mut h, &clock, 1);
    assert_eq!(r.left, vec![(a, LeaveReason::Kicked)]);
    assert_eq!(r.kicks.len(), 1);
    assert_eq!(
        (
            r.kicks[0].player,
            r.kicks[0].reason.as_str(),
            r.kicks[0].tick
        ),
        (a, "asked for it", 1)
    );
    let schema = h.schema();
    let got: Vec<(PlayerId, usize)> = h
        .drain_frames()
        .unwrap()
        .map(|f| {
            let d = zonekeep_protocol::delta::decode_delta(f.bytes, &schema, &[]).unwrap();
            (f.player, d.events.unwrap_or_default().len())
        })
        .collect();
    assert_eq!(
        got,
        vec![(b, 1)],
        "the kicked player gets no frame; b gets its event"
    );
    assert!(h.player(a).is_none());
    assert!(h.player(b).is_some());
}

#[test]
fn dispose_calls_hook_once_and_closes_the_host() {
    let (mut h, clock) = host(cfg());
    let p = join(&mut h, "a");
    h.dispose();
    h.dispose();
    assert!(h.is_disposed());
    assert_eq!(
        h.zone::<Probe>()
            .unwrap()
            .log
            .iter()
            .filter(|l| *l == "dispose")
            .count(),
        1
    );
    assert_eq!(
        h.handle_join(Principal::new("b"), Claims::new(), Role::Player),
        Err(JoinError::Disposed)
    );
    assert_eq!(h.handle_input(p, 1, 0, &val(1)), InputOutcome::Disposed);
    assert_eq!(h.handle_rejoin(p), Err(RejoinError::Disposed));
    assert_eq!(step(&mut h, &clock, 10).ticks_run, 0);
}

#[test]
fn invalid_config_and_failing_create_are_refused() {
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new());
    let bad = ZoneConfig {
        tick_hz: 0,
        ..cfg()
    };
    let err =
        ZoneHost::new::<Probe>(init(serde_json::Value::Null), bad, clock.clone()).unwrap_err();
    assert_eq!(err, ZoneError::Config(ConfigError::TickHz(0)));
    let err = ZoneHost::new::<Probe>(init(serde_json::json!({ "fail": true })), cfg(), clock)
        .unwrap_err();
    assert!(matches!(err, ZoneError::InvalidParams(_)));
}

#[test]
fn registry_builds_hosts_by_kind() {
    let mut kinds = ZoneKinds::new();
    kinds.register::<Probe>("probe");
    assert!(kinds.contains("probe"));
    assert_eq!(kinds.kinds().collect::<Vec<_>>(), vec!["probe"]);
    let clock = ManualClock::new();
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());

    let mut other = init(serde_json::Value::Null);
    other.kind = "nope".into();
    let err = kinds.create(other, cfg(), shared.clone()).err().unwrap();
    assert_eq!(err, ZoneError::UnknownKind("nope".into()));

    let mut h: ZoneHost = kinds
        .create(init(serde_json::Value::Null), cfg(), shared)
        .unwrap();
    assert_eq!((h.zone_id(), h.kind()), ("probe-1", "probe"));
    let p = h
        .handle_join(Principal::new("a"), Claims::new(), Role::Player)
        .unwrap();
    assert!(h.handle_input(p, 1, 0, &val(3)).is_accepted());
    clock.advance(h.config().dt() * 2);
    let r = h.advance(clock.now());
    assert_eq!((r.ticks_run, h.tick()), (2, 2));
    assert_eq!(h.last_processed_seq(p), Some(1));
    assert_eq!(h.players().count(), 1);
    assert_eq!(h.state_hash(), Some(2));
    assert_eq!(h.zone::<Probe>().unwrap().inputs, vec![(1, p, 3, 1)]);
    assert!(h.zone::<u32>().is_none(), "typed access checks the type");
}
