//! The arena module driven as its host would (the SDK's `TestHost`): the native arena's world,
//! its movement rule, and pickups whose facts raise a saved score.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use zonekeep_arena_rules::game::{TOPIC_PICKED, TOPIC_SAVED};
use zonekeep_arena_rules::map::spawn_point;
use zonekeep_arena_rules::movement::{step, MoveInput, MoveState, DIR_RIGHT, DT};
use zonekeep_guest::testing::{Command, TestHost};
use zonekeep_guest::{FieldType, Rng, Role, Writer, SAVE_FORMAT};

use super::*;

fn host() -> TestHost<Arena> {
    TestHost::<Arena>::new(33_333)
}

fn kinds(commands: &[Command]) -> Vec<(String, Vec<(String, FieldType)>)> {
    commands
        .iter()
        .filter_map(|c| match c {
            Command::DeclareKind { name, fields } => Some((name.clone(), fields.clone())),
            _ => None,
        })
        .collect()
}

fn spawns_of(commands: &[Command], of: u16) -> Vec<(u32, f32, f32)> {
    commands
        .iter()
        .filter_map(|c| match c {
            Command::Spawn { handle, kind, x, y } if *kind == of => Some((*handle, *x, *y)),
            _ => None,
        })
        .collect()
}

#[test]
fn it_asks_for_the_native_arenas_settings() {
    let mut h = host();
    let s = h.settings().unwrap();
    assert_eq!((s.tick_hz, s.patch_every, s.max_players), (30, 1, 64));
    assert_eq!((s.pos_step, s.view_radius, s.cell_size), (0.01, 24.0, 24.0));
}

#[test]
fn create_declares_the_native_kinds_in_order_and_spawns_the_world() {
    let mut h = host();
    let commands = h
        .create(7, "arena-1", r#"{"drones":3,"pickups":2}"#)
        .unwrap();
    assert_eq!(
        kinds(&commands),
        vec![
            (
                "player".to_owned(),
                vec![
                    ("name".to_owned(), FieldType::Str { max_len: 16 }),
                    ("hue".to_owned(), FieldType::Uint),
                    ("score".to_owned(), FieldType::Uint),
                    ("connected".to_owned(), FieldType::Bool),
                ]
            ),
            ("drone".to_owned(), vec![]),
            ("pickup".to_owned(), vec![]),
            (
                "pillar".to_owned(),
                vec![("radius".to_owned(), FieldType::F32)]
            ),
        ]
    );
    let pillars = spawns_of(&commands, 3);
    assert_eq!(pillars.len(), PILLARS.len());
    for ((_, x, y), p) in pillars.iter().zip(&PILLARS) {
        assert_eq!((*x, *y), (p.x, p.y));
    }
    assert_eq!(spawns_of(&commands, 1).len(), 3);
    assert_eq!(spawns_of(&commands, 2).len(), 2);
    // Drones fly every tick.
    let tick = h.tick().unwrap();
    let moved = tick
        .iter()
        .filter(|c| matches!(c, Command::SetPos { .. }))
        .count();
    assert_eq!(moved, 3);
}

#[test]
fn bad_params_stop_the_zone_with_the_reason() {
    let err = host()
        .create(7, "arena-1", r#"{"drones":513}"#)
        .unwrap_err();
    assert!(err.to_string().contains("drones must be 0..=512"), "{err}");
}

#[test]
fn a_player_joins_under_its_claimed_name_and_moves_by_the_shared_rule() {
    let mut h = host();
    h.create(7, "arena-1", r#"{"drones":0,"pickups":0}"#)
        .unwrap();
    let joined = h
        .join_with_claims(1, "alice", Role::Player, r#"{"name":"  Ada   L"}"#)
        .unwrap();
    let (handle, x, y) = spawns_of(&joined, 0)[0];
    assert!(joined.contains(&Command::SetStr {
        handle,
        field: Avatar::FIELD_NAME,
        value: "Ada L".into()
    }));
    assert!(joined.contains(&Command::SetControl { player: 1, handle }));
    // A second player asking for the same name gets a distinct one.
    let second = h
        .join_with_claims(2, "bob", Role::Player, r#"{"name":"Ada L"}"#)
        .unwrap();
    let named = second.iter().find_map(|c| match c {
        Command::SetStr { value, .. } => Some(value.clone()),
        _ => None,
    });
    assert_ne!(named.as_deref(), Some("Ada L"));

    let right = MoveInput {
        dir: DIR_RIGHT,
        flags: 0,
    };
    assert_eq!(h.sanitize(1, &right.encode()).unwrap(), None);
    let want = step(&MoveState { x, y }, &right, DT, &PILLARS);
    assert_eq!(
        h.input(1, &right.encode()).unwrap(),
        vec![Command::SetPos {
            handle,
            x: want.x,
            y: want.y
        }]
    );
    let refused = h.sanitize(1, &[1, 2, 3]).unwrap();
    assert_eq!(refused.map(|r| r.0), Some(REFUSE_BAD_INPUT));
}

/// A save (the SDK's header with `rng`, then the arena's JSON) holding one present pickup at
/// `(x, y)` and `alice`'s score.
fn save_with_pickup(rng: [u64; 4], x: f32, y: f32, score: u32) -> Vec<u8> {
    let mut w = Writer::new();
    w.u8(SAVE_FORMAT);
    for word in rng {
        w.u64(word);
    }
    w.u64(0);
    let json = format!(
        r#"{{"version":1,"scores":{{"alice":{score}}},"pending":{{}},"pickups":[{{"x":{x},"y":{y},"respawn_at":0}}]}}"#
    );
    w.raw(json.as_bytes());
    w.into_vec()
}

#[test]
fn a_pickup_becomes_a_fact_whose_settlement_raises_the_saved_score() {
    // With no drones, the first draws after the restore place the joining player: put the
    // pickup right there.
    let rng = [11, 22, 33, 44];
    let at = spawn_point(&mut Draw(&mut Rng::from_state(rng)));
    let mut h = host();
    h.restore(
        7,
        "arena-1",
        r#"{"drones":0}"#,
        &save_with_pickup(rng, at.x, at.y, 4),
    )
    .unwrap();
    let joined = h.join(1, "alice", Role::Player).unwrap();
    let (avatar, x, y) = spawns_of(&joined, 0)[0];
    assert_eq!((x, y), (at.x, at.y));
    // Its saved score comes with it.
    assert!(joined.contains(&Command::SetUint {
        handle: avatar,
        field: Avatar::FIELD_SCORE,
        value: 4
    }));

    let picked = h.tick().unwrap();
    let key = picked
        .iter()
        .find_map(|c| match c {
            Command::Fact {
                kind,
                principal,
                key,
                payload,
            } if kind == FACT_PICKUP && principal == "alice" => {
                assert_eq!(payload, r#"{"add":{"score":1}}"#);
                Some(key.clone())
            }
            _ => None,
        })
        .expect("a pickup fact");
    assert_eq!(key, "arena-1:0:m0");
    assert!(picked
        .iter()
        .any(|c| matches!(c, Command::Despawn { handle } if *handle != avatar)));
    assert!(picked
        .iter()
        .any(|c| matches!(c, Command::Event { player: 1, topic, .. } if *topic == TOPIC_PICKED)));

    // The ledger answers with the durable total.
    let settled = h.settled(&key, true, r#"{"score":5}"#).unwrap();
    assert!(settled.contains(&Command::SetUint {
        handle: avatar,
        field: Avatar::FIELD_SCORE,
        value: 5
    }));
    let mut both = 1u32.to_le_bytes().to_vec();
    both.extend_from_slice(&5u32.to_le_bytes());
    assert!(settled.contains(&Command::Event {
        player: 1,
        topic: TOPIC_SAVED,
        payload: both
    }));
    // A settlement seen again changes nothing.
    assert!(h.settled(&key, true, r#"{"score":5}"#).unwrap().is_empty());

    // The save keeps the score and the pickup waiting to come back.
    let save = h.save().unwrap();
    let saved: serde_json::Value =
        serde_json::from_slice(&save[zonekeep_guest::SAVE_HEADER_LEN..]).unwrap();
    assert_eq!(saved["scores"]["alice"], 5);
    assert!(saved["pickups"][0]["respawn_at"].as_u64().unwrap() > 0);
}
