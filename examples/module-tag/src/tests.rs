//! The rules, driven natively through the SDK's dispatch, as the host would drive the module.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use zonekeep_guest::testing::{Command, TestHost};
use zonekeep_guest::{FieldType, LeaveReason, PlayerId, Role, Writer, SAVE_FORMAT};

use super::*;

const DT_US: u32 = 50_000;

fn host() -> TestHost<Tag> {
    let mut host = TestHost::new(DT_US);
    let commands = host.create(42, "tag-1", "{}").unwrap();
    assert_eq!(
        commands,
        vec![
            Command::DeclareKind {
                name: "player".into(),
                fields: vec![
                    ("it".into(), FieldType::Bool),
                    ("score".into(), FieldType::Uint),
                    ("name".into(), FieldType::Str { max_len: NAME_MAX }),
                ],
            },
            Command::TimerEvery {
                ticks: POINTS_PERIOD,
                tag: TIMER_POINTS
            },
            Command::PublishListing {
                open: true,
                metadata: r#"{"game":"tag","runners":0}"#.into()
            },
        ]
    );
    host
}

/// A save placing each principal with its score (the SDK header, then the zone's bytes).
fn save_with(runners: &[(&str, u32, f32, f32)]) -> Vec<u8> {
    let mut w = Writer::new();
    w.u8(SAVE_FORMAT);
    for word in [1u64, 2, 3, 4] {
        w.u64(word);
    }
    // Fact keys made: the tag game emits none.
    w.u64(0);
    w.u8(1).u32(runners.len() as u32);
    for (principal, score, x, y) in runners {
        w.str(principal).u32(*score).f32(*x).f32(*y);
    }
    w.into_vec()
}

fn restored(runners: &[(&str, u32, f32, f32)]) -> TestHost<Tag> {
    let mut host = TestHost::new(DT_US);
    let commands = host.restore(7, "tag-1", "{}", &save_with(runners)).unwrap();
    assert_eq!(commands.len(), 2, "kind and timer again: {commands:?}");
    host
}

fn spawn_of(commands: &[Command]) -> (u32, f32, f32) {
    commands
        .iter()
        .find_map(|c| match c {
            Command::Spawn { handle, x, y, .. } => Some((*handle, *x, *y)),
            _ => None,
        })
        .expect("a spawn")
}

fn events(commands: &[Command]) -> Vec<(u32, u32)> {
    commands
        .iter()
        .filter_map(|c| match c {
            Command::Event {
                player: 0,
                topic: TOPIC_TAGGED,
                payload,
            } => {
                let mut r = zonekeep_guest::Reader::new(payload);
                Some((r.u32().unwrap(), r.u32().unwrap()))
            }
            _ => None,
        })
        .collect()
}

fn mv(dx: i8, dy: i8) -> Vec<u8> {
    vec![dx as u8, dy as u8]
}

#[test]
fn the_first_player_spawns_at_a_random_spot_under_control_and_is_it() {
    let mut host = host();
    let commands = host.join(1, "alice", Role::Player).unwrap();
    let (handle, x, y) = spawn_of(&commands);
    assert!((0.0..FIELD).contains(&x) && (0.0..FIELD).contains(&y));
    assert_eq!(
        commands[1..],
        [
            // A score of 0 is the field's default: not sent.
            Command::SetStr {
                handle,
                field: PlayerEntity::FIELD_NAME,
                value: "alice".into()
            },
            Command::SetControl { player: 1, handle },
            Command::SetBool {
                handle,
                field: PlayerEntity::FIELD_IT,
                value: 1
            },
            // A lobby listing the game hears how many run in it.
            Command::PublishListing {
                open: true,
                metadata: r#"{"game":"tag","runners":1}"#.into()
            },
        ]
    );
    // The second is not "it" and lands elsewhere.
    let commands = host.join(2, "bob", Role::Player).unwrap();
    let (handle2, x2, y2) = spawn_of(&commands);
    assert_ne!(handle2, handle);
    assert_ne!((x2, y2), (x, y));
    // Its spawn, its name, its control and the listing's new count.
    assert_eq!(commands.len(), 4);
    assert_eq!(host.zone().unwrap().it(), Some(PlayerId(1)));
}

#[test]
fn the_player_kind_keeps_its_field_order() {
    // Clients and the host's tests read the fields by index: it, score, name.
    assert_eq!(
        (
            PlayerEntity::FIELD_IT,
            PlayerEntity::FIELD_SCORE,
            PlayerEntity::FIELD_NAME
        ),
        (0, 1, 2)
    );
    assert_eq!(
        PlayerEntity::kind_def().fields()[2].1,
        FieldType::Str { max_len: NAME_MAX }
    );
}

#[test]
fn positions_are_deterministic_for_a_seed_and_zone() {
    let mut a = host();
    let mut b = host();
    assert_eq!(
        a.join(1, "alice", Role::Player).unwrap(),
        b.join(1, "alice", Role::Player).unwrap()
    );
    let mut c = TestHost::<Tag>::new(DT_US);
    c.create(43, "tag-1", "{}").unwrap();
    assert_ne!(
        spawn_of(&a.join(2, "bob", Role::Player).unwrap()),
        spawn_of(&c.join(2, "bob", Role::Player).unwrap())
    );
}

#[test]
fn long_principals_are_cut_to_the_name_field() {
    let mut host = host();
    let long = "é".repeat(20); // 40 bytes
    let commands = host.join(1, &long, Role::Player).unwrap();
    let name = commands
        .iter()
        .find_map(|c| match c {
            Command::SetStr { value, .. } => Some(value.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(name, "é".repeat(12));
}

#[test]
fn observers_watch_the_centre_and_get_no_entity() {
    let mut host = host();
    let commands = host.join(9, "watcher", Role::Observer).unwrap();
    assert!(matches!(
        commands[..],
        [Command::SetView { player: 9, radius, focus: 1, fx, fy }]
            if radius.is_nan() && fx == FIELD / 2.0 && fy == FIELD / 2.0
    ));
    assert_eq!(host.leave(9, LeaveReason::Left).unwrap(), vec![]);
    assert_eq!(host.guest().live_entities(), 0);
}

#[test]
fn a_principal_already_playing_is_refused() {
    let mut host = host();
    host.join(1, "alice", Role::Player).unwrap();
    assert_eq!(
        host.join(2, "alice", Role::Player).unwrap(),
        vec![Command::Refuse {
            code: REFUSE_ALREADY_PLAYING,
            reason: "this principal is already playing here".into()
        }]
    );
}

#[test]
fn sanitize_clamps_and_refuses_bad_payloads() {
    let mut host = host();
    host.join(1, "alice", Role::Player).unwrap();
    assert_eq!(host.sanitize(1, &mv(5, -9)).unwrap(), None);
    assert_eq!(
        host.sanitize(1, &[1]).unwrap().unwrap().0,
        REFUSE_UNDECODABLE
    );
    assert_eq!(
        host.sanitize(1, &[1, 2, 3]).unwrap().unwrap().0,
        REFUSE_UNDECODABLE
    );
}

#[test]
fn inputs_move_players_at_speed_and_the_field_holds_them() {
    let mut host = restored(&[("alice", 0, 10.0, 99.8)]);
    host.join(1, "alice", Role::Player).unwrap();
    host.input(1, &mv(1, 0)).unwrap();
    let commands = host.tick().unwrap();
    assert_eq!(
        commands,
        vec![Command::SetPos {
            handle: 1,
            x: 10.0 + SPEED,
            y: 99.8
        }]
    );
    // Clamped to -1..=1, diagonal at the same speed, held at the edge.
    host.input(1, &mv(-100, 100)).unwrap();
    let commands = host.tick().unwrap();
    let Command::SetPos { x, y, .. } = commands[0] else {
        panic!("{commands:?}")
    };
    let step = SPEED * std::f32::consts::FRAC_1_SQRT_2;
    assert_eq!(x, 10.0 + SPEED - step);
    assert_eq!(y, FIELD);
    // Still with no input: no command.
    host.input(1, &mv(0, 0)).unwrap();
    assert_eq!(host.tick().unwrap(), vec![]);
    // A dropped player stands still.
    host.input(1, &mv(1, 1)).unwrap();
    host.drop_player(1).unwrap();
    assert_eq!(host.tick().unwrap(), vec![]);
}

#[test]
fn it_tags_the_nearest_player_within_reach_and_cannot_tag_back_at_once() {
    let mut host = restored(&[
        ("alice", 0, 10.0, 10.0),
        ("bob", 0, 11.5, 10.0),
        ("carol", 0, 11.0, 10.0),
        ("dave", 0, 50.0, 50.0),
    ]);
    for (id, who) in [(1, "alice"), (2, "bob"), (3, "carol"), (4, "dave")] {
        host.join(id, who, Role::Player).unwrap();
    }
    assert_eq!(host.zone().unwrap().it(), Some(PlayerId(1)));
    // "It" may tag from tick NO_TAG_BACK on (it became "it" at tick 0).
    for _ in 1..NO_TAG_BACK {
        assert_eq!(host.tick().unwrap(), vec![]);
    }
    let commands = host.tick().unwrap();
    assert_eq!(host.tick_number(), NO_TAG_BACK);
    let (alice, carol) = (1, 3); // handles in join order
    assert_eq!(
        commands,
        vec![
            Command::SetUint {
                handle: alice,
                field: PlayerEntity::FIELD_SCORE,
                value: 1
            },
            Command::SetBool {
                handle: alice,
                field: PlayerEntity::FIELD_IT,
                value: 0
            },
            Command::SetBool {
                handle: carol,
                field: PlayerEntity::FIELD_IT,
                value: 1
            },
            Command::Event {
                player: 0,
                topic: TOPIC_TAGGED,
                payload: [1u32.to_le_bytes(), 3u32.to_le_bytes()].concat(),
            },
        ]
    );
    assert_eq!(host.zone().unwrap().it(), Some(PlayerId(3)));
    assert_eq!(host.zone().unwrap().runners()["alice"].score, 1);
    // Carol waits NO_TAG_BACK ticks, then tags the nearest: bob (0.5) before alice (1.0).
    for _ in 1..NO_TAG_BACK {
        assert!(events(&host.tick().unwrap()).is_empty());
    }
    assert_eq!(events(&host.tick().unwrap()), vec![(3, 2)]);
    assert_eq!(host.zone().unwrap().runners()["carol"].score, 1);
}

#[test]
fn nobody_is_tagged_beyond_reach() {
    let mut host = restored(&[("alice", 0, 10.0, 10.0), ("bob", 0, 12.1, 10.0)]);
    host.join(1, "alice", Role::Player).unwrap();
    host.join(2, "bob", Role::Player).unwrap();
    for _ in 0..3 * NO_TAG_BACK {
        assert!(events(&host.tick().unwrap()).is_empty());
    }
    // Bob steps in: tagged on that tick.
    host.input(2, &mv(-1, 0)).unwrap();
    assert_eq!(events(&host.tick().unwrap()), vec![(1, 2)]);
}

#[test]
fn the_points_timer_scores_everyone_but_it() {
    let mut host = host();
    host.join(1, "alice", Role::Player).unwrap();
    host.join(2, "bob", Role::Player).unwrap();
    host.join(3, "carol", Role::Player).unwrap();
    host.join(4, "watcher", Role::Observer).unwrap();
    let commands = host.timer(TIMER_POINTS).unwrap();
    assert_eq!(
        commands,
        vec![
            Command::SetUint {
                handle: 2,
                field: PlayerEntity::FIELD_SCORE,
                value: 1
            },
            Command::SetUint {
                handle: 3,
                field: PlayerEntity::FIELD_SCORE,
                value: 1
            },
        ]
    );
    assert_eq!(host.timer(99).unwrap(), vec![]);
}

#[test]
fn leaving_despawns_and_it_passes_to_the_lowest_id() {
    let mut host = host();
    host.join(5, "alice", Role::Player).unwrap();
    host.join(7, "bob", Role::Player).unwrap();
    host.join(6, "carol", Role::Player).unwrap();
    assert_eq!(
        host.leave(7, LeaveReason::Left).unwrap(),
        vec![Command::Despawn { handle: 2 }]
    );
    assert_eq!(
        host.leave(5, LeaveReason::Dropped).unwrap(),
        vec![
            Command::Despawn { handle: 1 },
            Command::SetBool {
                handle: 3,
                field: PlayerEntity::FIELD_IT,
                value: 1
            },
        ]
    );
    assert_eq!(host.zone().unwrap().it(), Some(PlayerId(6)));
    assert_eq!(host.guest().live_entities(), 1);
    // A newcomer reuses a freed handle.
    let (handle, _, _) = spawn_of(&host.join(8, "dave", Role::Player).unwrap());
    assert!(handle == 1 || handle == 2, "{handle}");
    // The last one out leaves nobody "it".
    host.leave(6, LeaveReason::Kicked).unwrap();
    host.leave(8, LeaveReason::Transferred).unwrap();
    assert_eq!(host.zone().unwrap().it(), None);
}

#[test]
fn save_and_restore_keep_scores_and_positions_by_principal() {
    let mut host = host();
    host.join(1, "alice", Role::Player).unwrap();
    host.join(2, "bob", Role::Player).unwrap();
    host.timer(TIMER_POINTS).unwrap();
    host.timer(TIMER_POINTS).unwrap();
    host.input(1, &mv(1, 1)).unwrap();
    host.tick().unwrap();
    host.leave(2, LeaveReason::Left).unwrap(); // bob's score stays with his principal
    let before = host.zone().unwrap().runners().clone();
    assert_eq!(before["bob"].score, 2);
    let save = host.save().unwrap();

    let mut copy = TestHost::<Tag>::new(DT_US);
    copy.restore(42, "tag-1", "{}", &save).unwrap();
    assert_eq!(copy.zone().unwrap().runners(), &before);
    assert_eq!(copy.guest().rng_state(), host.guest().rng_state());
    // Bob comes back where he was, with his score.
    let commands = copy.join(3, "bob", Role::Player).unwrap();
    let (_, x, y) = spawn_of(&commands);
    assert_eq!((x, y), (before["bob"].x, before["bob"].y));
    assert!(commands.contains(&Command::SetUint {
        handle: 1,
        field: PlayerEntity::FIELD_SCORE,
        value: 2
    }));
    // A newcomer draws the same spot in both: the RNG came back with the save.
    assert_eq!(
        spawn_of(&host.join(4, "erin", Role::Player).unwrap()).1,
        spawn_of(&copy.join(4, "erin", Role::Player).unwrap()).1
    );
}

#[test]
fn restore_refuses_a_bad_save() {
    let mut host = TestHost::<Tag>::new(DT_US);
    let mut save = save_with(&[("alice", 1, 1.0, 1.0)]);
    save.push(0);
    assert!(matches!(
        host.restore(0, "t", "", &save),
        Err(zonekeep_guest::Fatal::Restore(e)) if e.contains("trailing")
    ));
    let mut save = save_with(&[]);
    save[zonekeep_guest::SAVE_HEADER_LEN] = 9;
    assert!(host.restore(0, "t", "", &save).is_err());
}

#[test]
fn state_hash_folds_positions_and_scores() {
    let mut a = host();
    let mut b = host();
    for h in [&mut a, &mut b] {
        h.join(1, "alice", Role::Player).unwrap();
        h.join(2, "bob", Role::Player).unwrap();
    }
    let start = a.state_hash().unwrap().unwrap();
    assert_eq!(b.state_hash().unwrap(), Some(start));
    a.input(1, &mv(1, 0)).unwrap();
    b.input(1, &mv(1, 0)).unwrap();
    a.tick().unwrap();
    b.tick().unwrap();
    let moved = a.state_hash().unwrap().unwrap();
    assert_ne!(moved, start);
    assert_eq!(b.state_hash().unwrap(), Some(moved));
    a.timer(TIMER_POINTS).unwrap();
    assert_ne!(a.state_hash().unwrap(), Some(moved));
}
