#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Cells driven through real `ZoneHost`s with a manual clock: a walk across a border moves the
//! player to the neighbour exactly where it crossed, with a ghost left behind.

use std::sync::Arc;

use serde_json::json;
use zonekeep_core::{Claims, Clock, ManualClock, PlayerId, Principal, Role, ZoneHost, ZoneInit};

use super::*;
use crate::movement::{DIR_LEFT, DIR_RIGHT, DIR_UP};

fn host(id: &str) -> (ZoneHost, ManualClock) {
    let clock = ManualClock::new();
    let init = ZoneInit {
        zone_id: id.into(),
        kind: KIND_CELLS.into(),
        params: serde_json::Value::Null,
    };
    let host = ZoneHost::new::<Cell>(init, cells_config(), Arc::new(clock.clone())).unwrap();
    (host, clock)
}

fn tick(host: &mut ZoneHost, clock: &ManualClock) {
    clock.advance(host.config().dt());
    host.advance(clock.now());
}

fn join(host: &mut ZoneHost, who: &str) -> PlayerId {
    let mut claims = Claims::new();
    claims.insert("name".into(), json!(who));
    host.handle_join(Principal::new(who), claims, Role::Player)
        .unwrap()
}

fn pos(host: &ZoneHost, p: PlayerId) -> MoveState {
    host.zone::<Cell>().unwrap().position(p).unwrap()
}

#[test]
fn ids_name_cells_of_the_grid_only() {
    assert_eq!(cell_id(1, 2), "cell-1-2");
    assert_eq!(parse_cell_id("cell-1-2"), Some((1, 2)));
    for bad in [
        "cell-3-0",
        "cell-0-3",
        "cell-1",
        "cell--1-0",
        "cell-a-b",
        "cell-01-",
        "arena-1",
        "",
    ] {
        assert_eq!(parse_cell_id(bad), None, "{bad}");
    }
    assert_eq!(cell_at(0.0, 0.0), Some((0, 0)));
    assert_eq!(cell_at(CELL_W, CELL_H - 0.01), Some((1, 0)));
    assert_eq!(cell_at(WORLD_W, 1.0), None);
    assert_eq!(cell_at(f32::NAN, 1.0), None);
    assert!(holds(0, 0, CELL_W + HYSTERESIS - 0.01, 5.0));
    assert!(!holds(0, 0, CELL_W + HYSTERESIS, 5.0));
}

#[test]
fn a_zone_id_that_is_not_a_cell_is_refused() {
    let init = ZoneInit {
        zone_id: "cell-9-9".into(),
        kind: KIND_CELLS.into(),
        params: serde_json::Value::Null,
    };
    let err = ZoneHost::new::<Cell>(init, cells_config(), Arc::new(ManualClock::new()));
    assert!(err.is_err());
}

#[test]
fn the_step_keeps_to_the_world_not_the_cell() {
    let right = MoveInput {
        dir: DIR_RIGHT,
        flags: 0,
    };
    let s = step(
        &MoveState {
            x: CELL_W - 0.1,
            y: 10.0,
        },
        &right,
        DT,
    );
    assert!(s.x > CELL_W, "crossed into the next cell: {s:?}");
    let left = MoveInput {
        dir: DIR_LEFT | DIR_UP,
        flags: 0,
    };
    let s = step(&MoveState { x: 0.7, y: 0.7 }, &left, DT);
    assert_eq!((s.x, s.y), (snap(PLAYER_RADIUS), snap(PLAYER_RADIUS)));
}

#[test]
fn walking_over_the_border_moves_the_walker_to_the_neighbour_where_it_crossed() {
    let (mut a, clock_a) = host("cell-0-0");
    let (mut b, clock_b) = host("cell-1-0");
    let p = join(&mut a, "walker");
    let start = pos(&a, p);
    assert!(holds(0, 0, start.x, start.y));

    // Walk right, one input a tick, until the cell asks for the move.
    let mut seq = 0;
    let mut last = start;
    let request = loop {
        seq += 1;
        assert!(a.handle_input(p, seq, 0, &[DIR_RIGHT]).is_accepted());
        tick(&mut a, &clock_a);
        if let Some(r) = a.drain_transfers().pop() {
            break r;
        }
        let now = pos(&a, p);
        assert!(now.x > last.x, "still walking right");
        last = now;
        assert!(seq < 1000, "never crossed");
    };
    assert_eq!(request.target_zone, "cell-1-0");
    assert_eq!(request.claims.get("kind"), Some(&json!(KIND_CELLS)));
    let carried = Carried::read(&request.state).unwrap();
    // Exactly one more step than the last position seen inside, and past the hysteresis band.
    assert_eq!(
        carried.at,
        step(
            &last,
            &MoveInput {
                dir: DIR_RIGHT,
                flags: 0
            },
            DT
        )
    );
    assert!(carried.at.x >= CELL_W + HYSTERESIS);
    // The walker's entity stays behind as a ghost where it crossed, then goes.
    let cell = a.zone::<Cell>().unwrap();
    assert_eq!(cell.ghosts(), 1);
    assert!(cell.position(p).is_none());
    a.handle_transfer_done(p).unwrap();
    for _ in 0..GHOST_TICKS {
        tick(&mut a, &clock_a);
    }
    assert_eq!(a.zone::<Cell>().unwrap().ghosts(), 0);
    assert_eq!(a.world().len(), 0);

    // The neighbour takes it exactly there and lets it walk on.
    let q = b
        .handle_transfer_in(
            request.principal.clone(),
            request.player_claims.clone(),
            request.claims.clone(),
            "cell-0-0",
            &request.state,
        )
        .unwrap();
    assert_eq!(pos(&b, q), carried.at);
    b.handle_rejoin(q).unwrap();
    assert!(b.handle_input(q, 1, 0, &[DIR_RIGHT]).is_accepted());
    tick(&mut b, &clock_b);
    assert!(pos(&b, q).x > carried.at.x);
    assert!(b.drain_transfers().is_empty());
}

#[test]
fn an_arrival_from_far_away_or_unreadable_is_refused_and_a_returning_walker_stays_inside() {
    let (mut b, clock_b) = host("cell-1-0");
    let far = Carried {
        at: MoveState { x: 10.0, y: 10.0 },
    }
    .to_bytes();
    let claims = Claims::new();
    for state in [
        far.as_slice(),
        &[1, 2, 3],
        &f32::NAN.to_le_bytes().repeat(2),
    ] {
        let r = b.handle_transfer_in(
            Principal::new("x"),
            claims.clone(),
            claims.clone(),
            "cell-0-0",
            state,
        );
        assert!(r.is_err(), "{state:?}");
    }

    // A walker whose move is refused comes back just inside the border it tried to cross.
    let p = join(&mut b, "walker");
    b.zone_mut::<Cell>()
        .unwrap()
        .walkers
        .get_mut(&p)
        .unwrap()
        .state = MoveState {
        x: 2.0 * CELL_W + HYSTERESIS - 0.05,
        y: 10.0,
    };
    assert!(b.handle_input(p, 1, 0, &[DIR_RIGHT]).is_accepted());
    tick(&mut b, &clock_b);
    let request = b.drain_transfers().pop().unwrap();
    assert_eq!(request.target_zone, "cell-2-0");
    b.handle_transfer_back(p).unwrap();
    let back = pos(&b, p);
    assert!(
        back.x < 2.0 * CELL_W && holds(1, 0, back.x, back.y),
        "{back:?}"
    );
    assert_eq!(
        b.zone::<Cell>().unwrap().ghosts(),
        0,
        "the ghost became the walker again"
    );
    assert_eq!(b.world().len(), 1);
}
