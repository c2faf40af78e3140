//! The rules, driven natively through the SDK's dispatch, as the host would drive the module.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use zonekeep_guest::returning;
use zonekeep_guest::testing::{Command, TestHost};

use super::*;

const DT_US: u32 = 50_000;

fn host(zone: &str, params: &str) -> TestHost<Doors> {
    let mut host = TestHost::new(DT_US);
    assert_eq!(host.create(1, zone, params).unwrap(), vec![]);
    host
}

/// The purses told in `commands`: (player, coins, zone).
fn told(commands: &[Command]) -> Vec<(u32, u32, String)> {
    commands
        .iter()
        .filter_map(|c| match c {
            Command::Event {
                player,
                topic: TOPIC_COINS,
                payload,
            } => {
                let (coins, zone) = payload.split_at(4);
                Some((
                    *player,
                    u32::from_le_bytes(coins.try_into().unwrap()),
                    String::from_utf8(zone.to_vec()).unwrap(),
                ))
            }
            _ => None,
        })
        .collect()
}

fn walk(to: &str, claims: &str) -> Vec<u8> {
    let mut payload = vec![2];
    payload.extend_from_slice(format!(r#"{{"to":"{to}","claims":{claims}}}"#).as_bytes());
    payload
}

#[test]
fn a_joining_player_gets_the_starting_purse_and_picks_coins() {
    let mut host = host("hall-a", r#"{"coins": 5}"#);
    let joined = host.join(1, "ada", Role::Player).unwrap();
    assert_eq!(told(&joined), [(1, 5, "hall-a".to_owned())]);
    assert_eq!(host.join(2, "eve", Role::Observer).unwrap(), vec![]);
    let picked = host.input(1, &[1]).unwrap();
    assert_eq!(told(&picked), [(1, 6, "hall-a".to_owned())]);
    assert_eq!(host.zone().unwrap().coins(PlayerId(1)), Some(6));
    // A connection that comes back learns its purse again.
    assert_eq!(told(&host.rejoin(1).unwrap()), [(1, 6, "hall-a".into())]);
}

#[test]
fn a_walk_asks_the_host_for_a_transfer_and_hands_out_the_purse() {
    let mut host = host("hall-a", r#"{"coins": 2}"#);
    host.join(1, "ada", Role::Player).unwrap();
    let walked = host
        .input(1, &walk("hall-b", r#"{"kind":"doors"}"#))
        .unwrap();
    assert_eq!(
        walked,
        vec![Command::Transfer {
            player: 1,
            target: "hall-b".into(),
            claims: r#"{"kind":"doors"}"#.into(),
        }]
    );
    let (state, commands) = host.transfer_out(1).unwrap();
    assert_eq!(state, 2u32.to_le_bytes());
    assert_eq!(commands, vec![]);
    assert_eq!(host.zone().unwrap().coins(PlayerId(1)), None);

    // A walk without claims hands over an empty object.
    host.join(2, "bob", Role::Player).unwrap();
    let mut no_claims = vec![2];
    no_claims.extend_from_slice(br#"{"to":"hall-c"}"#);
    assert!(matches!(
        &host.input(2, &no_claims).unwrap()[..],
        [Command::Transfer { player: 2, claims, .. }] if claims == "{}"
    ));
}

#[test]
fn an_arrival_takes_the_purse_it_carries_and_a_locked_zone_turns_it_away() {
    let mut open = host("hall-b", "{}");
    let arrived = open
        .transfer_in(
            1,
            "ada",
            "{}",
            "hall-a",
            returning::ARRIVAL,
            &7u32.to_le_bytes(),
        )
        .unwrap();
    assert_eq!(told(&arrived), [(1, 7, "hall-b".to_owned())]);
    // State that is not a purse arrives as an empty one.
    let odd = open
        .transfer_in(2, "bob", "{}", "hall-a", returning::ARRIVAL, &[1, 2, 3])
        .unwrap();
    assert_eq!(told(&odd), [(2, 0, "hall-b".to_owned())]);

    let mut locked = host("vault", r#"{"locked": true}"#);
    let refused = locked
        .transfer_in(
            1,
            "ada",
            "{}",
            "hall-a",
            returning::ARRIVAL,
            &7u32.to_le_bytes(),
        )
        .unwrap();
    assert!(
        refused.iter().any(|c| matches!(c,
            Command::Refuse { code: REFUSE_LOCKED, reason } if reason == "this door is locked")),
        "{refused:?}"
    );
    assert_eq!(locked.zone().unwrap().coins(PlayerId(1)), None);
    // A player coming back to a locked zone is taken, with the purse it left with, whether it
    // left this run of the zone or an earlier one.
    for (id, code) in [(2, returning::RETURN), (3, returning::RETURN_NEW_TO_RUN)] {
        let back = locked
            .transfer_in(id, "bob", "{}", "hall-a", code, &4u32.to_le_bytes())
            .unwrap();
        assert_eq!(told(&back), [(id, 4, "vault".to_owned())]);
    }
}

#[test]
fn hostile_inputs_and_params_are_refused_with_their_codes() {
    let mut host = host("hall-a", "{}");
    host.join(1, "ada", Role::Player).unwrap();
    for (payload, code) in [
        (&b""[..], REFUSE_UNKNOWN_INPUT),
        (&[1, 0][..], REFUSE_UNKNOWN_INPUT),
        (&[9][..], REFUSE_UNKNOWN_INPUT),
        (&b"\x02not json"[..], REFUSE_BAD_WALK),
        (&b"\x02{\"to\":3}"[..], REFUSE_BAD_WALK),
        (&b"\x02{\"to\":\"x\",\"claims\":[1]}"[..], REFUSE_BAD_WALK),
    ] {
        let refused = host.sanitize(1, payload).unwrap();
        assert_eq!(refused.map(|(c, _)| c), Some(code), "{payload:?}");
    }
    for params in [
        r#"{"coins": -1}"#,
        r#"{"coins": 4294967296}"#,
        r#"{"locked": 1}"#,
        "[1",
    ] {
        let mut bad = TestHost::<Doors>::new(DT_US);
        assert!(bad.create(1, "z", params).is_err(), "{params}");
    }
}

#[test]
fn a_restored_zone_keeps_its_id_and_starts_with_empty_purses() {
    let mut host = host("hall-a", r#"{"coins": 3}"#);
    host.join(1, "ada", Role::Player).unwrap();
    let save = host.save().unwrap();
    let mut again = TestHost::<Doors>::new(DT_US);
    again
        .restore(1, "hall-a", r#"{"coins": 3}"#, &save)
        .unwrap();
    assert_eq!(again.zone().unwrap().coins(PlayerId(1)), None);
    let joined = again.join(1, "ada", Role::Player).unwrap();
    assert_eq!(told(&joined), [(1, 3, "hall-a".to_owned())]);
}
