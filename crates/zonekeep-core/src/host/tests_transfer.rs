//! Transfers on the host: out, moving, done or back; arrivals; refusals; snapshots.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use super::courier::{admin, host, join, step, zone, ID};
use crate::transfer::MAX_TRANSFER_STATE;
use crate::{
    Claims, Clock, InputOutcome, JoinError, JoinRefusal, LeaveReason, PlayerId, Principal, Role,
    UnknownPlayer,
};

fn ids(players: &[PlayerId]) -> Vec<u8> {
    players.iter().flat_map(|p| p.0.to_le_bytes()).collect()
}

fn claims(pairs: &[(&str, serde_json::Value)]) -> Claims {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

#[test]
fn an_accepted_transfer_moves_the_player_out_and_done_makes_it_leave_transferred() {
    let (mut h, clock) = host();
    let a = h
        .handle_join(
            Principal::new("ann"),
            claims(&[("team", "red".into())]),
            Role::Player,
        )
        .unwrap();
    let b = join(&mut h, "bob", Role::Player);
    let mut m = BTreeMap::new();
    assert_eq!(step(&mut h, &clock, &mut m), vec![(a, true), (b, true)]);
    // The transfer is asked by the first input; the second waits in the buffer and is dropped
    // unapplied when the player leaves (the zone applies one input per tick).
    assert!(h.handle_input(a, 1, 0, &[0xff]).is_accepted());
    assert!(h.handle_input(a, 2, 0, &[5]).is_accepted());
    assert_eq!(step(&mut h, &clock, &mut m), vec![(b, false)]);

    let requests = h.drain_transfers();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!((r.player, r.role, r.tick), (a, Role::Player, 2));
    assert_eq!(r.principal.as_str(), "ann");
    assert_eq!(r.player_claims, claims(&[("team", "red".into())]));
    assert_eq!(r.target_zone, "zone-b");
    assert_eq!(r.claims, claims(&[("hp", 7.into())]));
    assert_eq!(r.state, 10i32.to_le_bytes().to_vec());
    assert!(
        h.drain_transfers().is_empty(),
        "each request is handed out once"
    );

    assert!(h.is_moving(a));
    assert_eq!(h.inputs_queued(), 0, "buffered inputs are discarded");
    assert_eq!(h.last_processed_seq(a), Some(2), "and acknowledged");
    assert_eq!(h.handle_input(a, 3, 0, &[1]), InputOutcome::Moving);
    assert!(h.player(a).is_some(), "a moving player stays a participant");
    // b saw a's walker go; a is sent nothing while moving.
    assert_eq!(m[&b].len(), 1);
    for _ in 0..3 {
        assert_eq!(step(&mut h, &clock, &mut m), vec![(b, false)]);
    }

    h.handle_transfer_done(a).unwrap();
    assert!(h.player(a).is_none());
    assert!(!h.is_moving(a));
    let report = h.advance(clock.now());
    assert_eq!(report.left, vec![(a, LeaveReason::Transferred)]);
    assert!(zone(&h).log.contains(&format!("leave {a} Transferred")));
    assert_eq!(h.handle_transfer_done(a), Err(UnknownPlayer(a)));
}

#[test]
fn a_failed_transfer_hands_the_state_back_and_frames_resume_as_deltas() {
    let (mut h, clock) = host();
    let a = join(&mut h, "ann", Role::Player);
    let b = join(&mut h, "bob", Role::Player);
    let mut m = BTreeMap::new();
    step(&mut h, &clock, &mut m);
    h.handle_input(a, 1, 0, &[3]);
    step(&mut h, &clock, &mut m);
    h.handle_input(a, 2, 0, &[0xff]);
    step(&mut h, &clock, &mut m);
    assert_eq!(h.drain_transfers()[0].state, 13i32.to_le_bytes().to_vec());
    // While a moves, b walks: a's client does not hear of it yet.
    h.handle_input(b, 1, 0, &[4]);
    step(&mut h, &clock, &mut m);
    let before = m[&a].clone();

    assert_eq!(h.handle_transfer_done(b), Err(UnknownPlayer(b)));
    h.handle_transfer_back(a).unwrap();
    assert!(!h.is_moving(a));
    assert!(zone(&h).log.contains(&format!(
        "in {a} from zone-b returning true new false claims {{\"hp\":7}}"
    )));
    assert_eq!(
        zone(&h).walkers[&a].1,
        13,
        "the state handed back is the one handed out"
    );
    assert_eq!(h.handle_transfer_back(a), Err(UnknownPlayer(a)));

    let got = step(&mut h, &clock, &mut m);
    assert_eq!(
        got,
        vec![(a, false), (b, false)],
        "an ordinary Delta, not a BASELINE"
    );
    // Applied on top of what the client held, it shows the world as it is now.
    let mirror = &m[&a];
    assert_eq!(mirror.len(), 2);
    assert_ne!(mirror.known(), before.known(), "a's walker was respawned");
    assert!(h.handle_input(a, 3, 0, &[1]).is_accepted());
}

#[test]
fn an_arrival_starts_dropped_with_merged_claims_and_its_client_rejoins() {
    let (mut h, clock) = host();
    let mut m = BTreeMap::new();
    let state = 42i32.to_le_bytes();
    let id = h
        .handle_transfer_in(
            Principal::new("ann"),
            claims(&[("team", "red".into()), ("hp", 1.into())]),
            claims(&[("hp", 7.into())]),
            "zone-a",
            &state,
        )
        .unwrap();
    let info = h.player(id).unwrap().clone();
    assert!(!info.connected);
    assert_eq!(info.role, Role::Player);
    assert_eq!(
        info.claims,
        claims(&[("team", "red".into()), ("hp", 7.into())]),
        "the zone's claims win"
    );
    assert!(zone(&h).log.contains(&format!(
        "in {id} from zone-a returning false new false claims {{\"hp\":7}}"
    )));
    assert!(!zone(&h).log.iter().any(|l| l.starts_with("join")));
    assert_eq!(zone(&h).walkers[&id].1, 42);
    assert_eq!(h.handle_input(id, 1, 0, &[1]), InputOutcome::Disconnected);
    assert!(step(&mut h, &clock, &mut m).is_empty());

    h.handle_rejoin(id).unwrap();
    assert_eq!(step(&mut h, &clock, &mut m), vec![(id, true)]);
    assert_eq!(m[&id].len(), 1);
    assert!(h.handle_input(id, 1, 0, &[1]).is_accepted());

    // A refusal admits nobody; a full zone refuses as a join would.
    let refused = h.handle_transfer_in(
        Principal::new("banned"),
        Claims::new(),
        Claims::new(),
        "zone-a",
        &[],
    );
    assert_eq!(
        refused,
        Err(JoinError::Refused(JoinRefusal::new(7, "banned")))
    );
    assert_eq!(h.players().count(), 1);
}

#[test]
fn an_arrival_whose_client_never_comes_ends_with_the_grace() {
    let (mut h, clock) = host();
    let id = h
        .handle_transfer_in(
            Principal::new("ann"),
            Claims::new(),
            Claims::new(),
            "zone-a",
            &[],
        )
        .unwrap();
    clock.advance(h.config().reconnect_grace - Duration::from_millis(1));
    assert!(h.advance(clock.now()).left.is_empty());
    clock.advance(Duration::from_millis(1));
    assert_eq!(
        h.advance(clock.now()).left,
        vec![(id, LeaveReason::Dropped)]
    );
}

#[test]
fn transfers_are_refused_by_rule() {
    let (mut h, clock) = host();
    let mut m = BTreeMap::new();
    let players: Vec<PlayerId> = (0..66)
        .map(|i| join(&mut h, &format!("p{i}"), Role::Player))
        .collect();
    let watcher = join(&mut h, "watcher", Role::Observer);
    let p1 = players[0];
    // Same zone, a bad id, an observer, an unknown player, claims too large.
    h.handle_message(admin(1, 11, ID.as_bytes()));
    h.handle_message(admin(2, 11, b""));
    h.handle_message(admin(3, 11, &[b'z'; 129]));
    h.handle_message(admin(4, 10, &ids(&[watcher, PlayerId(999)])));
    h.handle_message(admin(5, 12, &[0; 16 * 1024]));
    step(&mut h, &clock, &mut m);
    assert_eq!(
        zone(&h).answers,
        vec![
            format!("transfer {p1}: Err(SameZone)"),
            format!("transfer {p1}: Err(BadZoneId)"),
            format!("transfer {p1}: Err(BadZoneId)"),
            format!("transfer {watcher}: Err(Observer)"),
            "transfer 999: Err(UnknownPlayer)".to_owned(),
            format!("transfer {p1}: Err(TooLarge)"),
        ]
    );
    assert!(h.drain_transfers().is_empty());

    // 64 per tick, and a player asked for twice is already moving.
    h.handle_message(admin(6, 10, &ids(&[p1, p1])));
    h.handle_message(admin(7, 10, &ids(&players[1..])));
    step(&mut h, &clock, &mut m);
    let answers = &zone(&h).answers[6..];
    assert_eq!(answers[0], format!("transfer {p1}: Ok(())"));
    assert_eq!(answers[1], format!("transfer {p1}: Err(AlreadyMoving)"));
    assert_eq!(answers.iter().filter(|a| a.ends_with("Ok(())")).count(), 64);
    assert_eq!(
        answers
            .iter()
            .filter(|a| a.ends_with("Err(TooMany)"))
            .count(),
        2
    );
    assert_eq!(h.drain_transfers().len(), 64);
    // The next tick has a fresh allowance.
    let last = *players.last().unwrap();
    h.handle_message(admin(8, 10, &ids(&[last])));
    step(&mut h, &clock, &mut m);
    assert_eq!(
        zone(&h).answers.last().unwrap(),
        &format!("transfer {last}: Ok(())")
    );
}

#[test]
fn a_state_too_large_refuses_the_transfer_and_the_zone_keeps_its_player() {
    let (mut h, clock) = host();
    let mut m = BTreeMap::new();
    let a = join(&mut h, "ann", Role::Player);
    h.zone_mut::<super::courier::Courier>().unwrap().big_state = Some(MAX_TRANSFER_STATE + 1);
    h.handle_input(a, 1, 0, &[0xff]);
    clock.advance(Duration::from_millis(100));
    let report = h.advance(clock.now());
    assert_eq!(report.transfers_refused, 1);
    assert!(h.drain_transfers().is_empty());
    assert!(!h.is_moving(a));
    assert!(zone(&h)
        .log
        .iter()
        .any(|l| l.starts_with(&format!("in {a} from zone-b returning true new false"))));
    assert_eq!(step(&mut h, &clock, &mut m), vec![(a, true)]);
    assert!(h.handle_input(a, 2, 0, &[1]).is_accepted());
}

#[test]
fn a_refused_return_is_counted_and_the_player_kept() {
    let (mut h, clock) = host();
    let mut m = BTreeMap::new();
    let a = join(&mut h, "ann", Role::Player);
    h.zone_mut::<super::courier::Courier>()
        .unwrap()
        .refuse_returns = true;
    h.handle_input(a, 1, 0, &[0xff]);
    step(&mut h, &clock, &mut m);
    h.handle_transfer_back(a).unwrap();
    let report = h.advance(clock.now());
    assert_eq!(report.transfer_returns_refused, 1);
    assert!(h.player(a).is_some());
    assert!(h.handle_input(a, 2, 0, &[1]).is_accepted());
}

#[test]
fn a_moving_player_who_is_kicked_or_whose_grace_ends_just_leaves() {
    let (mut h, clock) = host();
    let mut m = BTreeMap::new();
    let a = join(&mut h, "ann", Role::Player);
    let b = join(&mut h, "bob", Role::Player);
    h.handle_message(admin(1, 10, &ids(&[a, b])));
    step(&mut h, &clock, &mut m);
    assert!(h.is_moving(a) && h.is_moving(b));
    // The server took both requests: it finds out about what follows through the usual paths.
    assert_eq!(h.drain_transfers().len(), 2);

    h.handle_message(admin(2, 13, &ids(&[a])));
    clock.advance(Duration::from_millis(100));
    let report = h.advance(clock.now());
    assert_eq!(report.left, vec![(a, LeaveReason::Kicked)]);
    assert!(!h.is_moving(a));
    assert_eq!(h.handle_transfer_back(a), Err(UnknownPlayer(a)));

    h.handle_drop(b).unwrap();
    // A dropped moving player that rejoins is still sent nothing.
    h.handle_rejoin(b).unwrap();
    assert!(step(&mut h, &clock, &mut m).is_empty());
    h.handle_drop(b).unwrap();
    clock.advance(h.config().reconnect_grace);
    assert_eq!(h.advance(clock.now()).left, vec![(b, LeaveReason::Dropped)]);
    assert_eq!(h.handle_transfer_done(b), Err(UnknownPlayer(b)));
}

#[test]
fn a_kick_before_the_request_is_drained_withdraws_it() {
    let (mut h, clock) = host();
    let mut m = BTreeMap::new();
    let a = join(&mut h, "ann", Role::Player);
    h.handle_input(a, 1, 0, &[0xff]);
    step(&mut h, &clock, &mut m);
    h.handle_leave(a, LeaveReason::Kicked).unwrap();
    assert!(h.drain_transfers().is_empty());
}

#[test]
fn a_snapshot_leaves_moving_players_out() {
    let (mut h, clock) = host();
    let mut m = BTreeMap::new();
    let a = join(&mut h, "ann", Role::Player);
    let b = join(&mut h, "bob", Role::Player);
    h.handle_input(a, 1, 0, &[0xff]);
    step(&mut h, &clock, &mut m);
    let snap = crate::Snapshot::decode(&h.snapshot().unwrap()).unwrap();
    let saved: Vec<PlayerId> = snap.roster.iter().map(|p| p.id).collect();
    assert_eq!(saved, vec![b]);
}

#[test]
fn a_return_into_a_new_run_admits_the_player_connected_with_its_state() {
    let (mut h, clock) = host();
    let mut m = BTreeMap::new();
    let state = 42i32.to_le_bytes();
    let id = h
        .handle_transfer_return(
            Principal::new("ann"),
            claims(&[("team", "red".into())]),
            claims(&[("hp", 7.into())]),
            "zone-b",
            &state,
        )
        .unwrap();
    let info = h.player(id).unwrap().clone();
    assert!(
        info.connected,
        "the returning player joined with its connection"
    );
    assert_eq!(info.role, Role::Player);
    assert_eq!(info.claims, claims(&[("team", "red".into())]));
    assert!(zone(&h).log.contains(&format!(
        "in {id} from zone-b returning true new true claims {{\"hp\":7}}"
    )));
    assert!(
        !zone(&h).log.iter().any(|l| l.starts_with("join")),
        "on_join is not called: the state stands in for it"
    );
    assert_eq!(zone(&h).walkers[&id].1, 42);
    // Frames flow at once and its inputs are taken, as for a join.
    assert_eq!(step(&mut h, &clock, &mut m), vec![(id, true)]);
    assert!(h.handle_input(id, 1, 0, &[1]).is_accepted());

    // The zone cannot turn its own player away: a refusal is counted, the player stays.
    h.zone_mut::<super::courier::Courier>()
        .unwrap()
        .refuse_returns = true;
    let kept = h
        .handle_transfer_return(
            Principal::new("bob"),
            Claims::new(),
            Claims::new(),
            "zone-b",
            &state,
        )
        .unwrap();
    assert_eq!(h.advance(clock.now()).transfer_returns_refused, 1);
    assert!(h.player(kept).is_some());
    assert!(h.handle_input(kept, 1, 0, &[1]).is_accepted());
}
