//! Characters through the SDK: the copy the guest keeps of each present player's, the commands
//! that change it, and the host's side as [`TestHost`] keeps it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::ctx::SdkState;
use crate::testing::{input, CharacterWrite, Command, TestHost};
use crate::{
    returning, CharacterError, Ctx, LeaveReason, Op, Player, PlayerId, Refusal, Rng, Role,
    Settings, Writer, Zone, MAX_CHARACTER_BYTES,
};

/// Keeps characters. Records the character each participant brought; inputs: `[1]` appends a
/// `+` to the player's character, `[2]` commits it, `[3]` tries a character one byte over the
/// limit, `[4]` tries to change player 99's, `[5]` transfers the player away. The leave hook
/// appends a `.`; `transfer_out` hands the character out as the state. "banned" is refused, as
/// a join and as an arrival.
#[derive(Default)]
struct Keeper {
    seen: Vec<(u32, Option<Vec<u8>>)>,
    errors: Vec<CharacterError>,
}

impl Zone for Keeper {
    type Input = Vec<u8>;

    fn settings() -> Settings {
        Settings::new().characters()
    }

    fn create(_ctx: &mut Ctx<'_>, _params: &str) -> Result<Self, String> {
        Ok(Self::default())
    }

    fn restore(_ctx: &mut Ctx<'_>, _params: &str, _bytes: &[u8]) -> Result<Self, String> {
        Ok(Self::default())
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, player: Player) -> Result<(), Refusal> {
        self.seen
            .push((player.id.0, ctx.character(player.id).map(<[u8]>::to_vec)));
        if player.principal == "banned" {
            return Err(Refusal::new(1, "banned"));
        }
        Ok(())
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, input: Vec<u8>) {
        let done = match input.first() {
            Some(1) => {
                let mut c = ctx.character(player).unwrap_or_default().to_vec();
                c.push(b'+');
                ctx.set_character(player, c)
            }
            Some(2) => ctx.commit_character(player),
            Some(3) => ctx.set_character(player, vec![0; MAX_CHARACTER_BYTES + 1]),
            Some(4) => ctx.set_character(PlayerId(99), b"mine".to_vec()),
            Some(5) => {
                ctx.transfer(player, "elsewhere", "{}");
                Ok(())
            }
            _ => Ok(()),
        };
        if let Err(e) = done {
            self.errors.push(e);
        }
    }

    fn on_leave(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, _why: LeaveReason) {
        if let Some(c) = ctx.character(player) {
            let mut last = c.to_vec();
            last.push(b'.');
            if let Err(e) = ctx.set_character(player, last) {
                self.errors.push(e);
            }
        }
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}

    fn transfer_out(&mut self, ctx: &mut Ctx<'_>, player: PlayerId) -> Vec<u8> {
        ctx.character(player).unwrap_or_default().to_vec()
    }

    fn transfer_in(
        &mut self,
        ctx: &mut Ctx<'_>,
        player: Player,
        _arrival: crate::Arrival<'_>,
    ) -> Result<(), Refusal> {
        self.seen
            .push((player.id.0, ctx.character(player.id).map(<[u8]>::to_vec)));
        if player.principal == "banned" {
            return Err(Refusal::new(1, "banned"));
        }
        Ok(())
    }
}

fn keeper() -> TestHost<Keeper> {
    let mut host = TestHost::<Keeper>::new(50_000);
    host.create(1, "keep-1", "{}").unwrap();
    host
}

fn seen(host: &TestHost<Keeper>) -> &[(u32, Option<Vec<u8>>)] {
    &host.zone().unwrap().seen
}

fn errors(host: &TestHost<Keeper>) -> &[CharacterError] {
    &host.zone().unwrap().errors
}

#[test]
fn a_player_brings_its_character_and_an_observer_has_none() {
    let mut host = keeper();
    host.join_with_character(1, "ann", b"gold").unwrap();
    host.join(2, "eve", Role::Observer).unwrap();
    host.join(3, "new", Role::Player).unwrap();
    assert_eq!(
        seen(&host),
        [
            (1, Some(b"gold".to_vec())),
            (2, None),
            (3, Some(Vec::new()))
        ],
        "a new player's character is empty; an observer has none"
    );
    assert_eq!(host.guest().character(PlayerId(1)), Some(&b"gold"[..]));
    assert_eq!(host.guest().character(PlayerId(2)), None);
    assert_eq!(host.character(1), Some(&b"gold"[..]));
    assert_eq!(host.character(2), None);
    assert!(host.drain_character_writes().is_empty(), "nothing changed");
}

#[test]
fn set_and_commit_write_their_exact_bytes() {
    let mut sdk = SdkState::new(Rng::for_zone(1, "z"));
    sdk.characters.admit(PlayerId(7), b"old");
    let mut w = Writer::new();
    let mut ctx = Ctx::new(0, Duration::ZERO, &mut sdk, &mut w);
    ctx.set_character(PlayerId(7), b"new!".to_vec()).unwrap();
    ctx.commit_character(PlayerId(7)).unwrap();
    assert_eq!(ctx.character(PlayerId(7)), Some(&b"new!"[..]));
    let mut expected = vec![27];
    expected.extend_from_slice(&7u32.to_le_bytes());
    expected.extend_from_slice(&4u32.to_le_bytes());
    expected.extend_from_slice(b"new!");
    expected.push(28);
    expected.extend_from_slice(&7u32.to_le_bytes());
    assert_eq!(w.into_vec(), expected);
    assert_eq!(
        (crate::tag::SET_CHARACTER, crate::tag::COMMIT_CHARACTER),
        (27, 28)
    );
}

#[test]
fn a_change_reaches_the_host_and_a_commit_writes_it_at_once() {
    let mut host = keeper();
    host.join_with_character(1, "ann", b"g").unwrap();
    let commands = host.input(1, &[1]).unwrap();
    assert_eq!(
        commands,
        [Command::SetCharacter {
            player: 1,
            data: b"g+".to_vec()
        }]
    );
    assert_eq!(host.guest().character(PlayerId(1)), Some(&b"g+"[..]));
    assert_eq!(host.character(1), Some(&b"g+"[..]));
    assert!(
        host.drain_character_writes().is_empty(),
        "a change waits for the save"
    );
    assert_eq!(
        host.input(1, &[2]).unwrap(),
        [Command::CommitCharacter { player: 1 }]
    );
    let written = CharacterWrite {
        player: 1,
        data: b"g+".to_vec(),
        release: false,
    };
    assert_eq!(
        host.drain_character_writes(),
        std::slice::from_ref(&written)
    );
    // A change is written with the zone's next save.
    host.input(1, &[1]).unwrap();
    host.save().unwrap();
    assert_eq!(
        host.drain_character_writes(),
        [CharacterWrite {
            data: b"g++".to_vec(),
            ..written
        }]
    );
    assert!(errors(&host).is_empty(), "{:?}", errors(&host));
}

#[test]
fn a_change_the_host_would_refuse_is_refused_here_and_sends_nothing() {
    let mut host = keeper();
    host.join_with_character(1, "ann", b"g").unwrap();
    host.join(2, "eve", Role::Observer).unwrap();
    assert!(host.input(1, &[3]).unwrap().is_empty(), "too large");
    assert!(host.input(1, &[4]).unwrap().is_empty(), "no such player");
    assert_eq!(
        errors(&host),
        [
            CharacterError::TooLarge {
                size: MAX_CHARACTER_BYTES + 1,
                max: MAX_CHARACTER_BYTES
            },
            CharacterError::NoCharacter(PlayerId(99)),
        ]
    );
    assert_eq!(host.guest().character(PlayerId(1)), Some(&b"g"[..]));
    // An observer has none to change or commit.
    let mut sdk = SdkState::new(Rng::for_zone(1, "z"));
    let mut w = Writer::new();
    let mut ctx = Ctx::new(0, Duration::ZERO, &mut sdk, &mut w);
    assert_eq!(
        ctx.commit_character(PlayerId(2)),
        Err(CharacterError::NoCharacter(PlayerId(2)))
    );
    assert_eq!(
        ctx.set_character(PlayerId(2), Vec::new()),
        Err(CharacterError::NoCharacter(PlayerId(2)))
    );
    assert!(w.is_empty());
    // The limit itself is allowed.
    sdk.characters.admit(PlayerId(1), b"");
    let mut w = Writer::new();
    let mut ctx = Ctx::new(0, Duration::ZERO, &mut sdk, &mut w);
    ctx.set_character(PlayerId(1), vec![7; MAX_CHARACTER_BYTES])
        .unwrap();
    assert_eq!(w.len(), 1 + 4 + 4 + MAX_CHARACTER_BYTES);
    assert_eq!(
        CharacterError::NoCharacter(PlayerId(2)).to_string(),
        "player 2 has no character in this zone"
    );
}

#[test]
fn leaving_hands_the_character_back_as_the_leave_hook_left_it() {
    let mut host = keeper();
    host.join_with_character(1, "ann", b"g").unwrap();
    host.leave(1, LeaveReason::Left).unwrap();
    assert_eq!(
        host.guest().character(PlayerId(1)),
        None,
        "the copy is gone"
    );
    assert_eq!(
        host.drain_character_writes(),
        [CharacterWrite {
            player: 1,
            data: b"g.".to_vec(),
            release: true
        }]
    );
    assert_eq!(host.character(1), None);
}

#[test]
fn a_refused_join_drops_the_copy_and_the_host_takes_the_character_back() {
    let mut host = keeper();
    let commands = host.join_with_character(1, "banned", b"g").unwrap();
    assert!(matches!(commands[..], [Command::Refuse { code: 1, .. }]));
    assert_eq!(seen(&host), [(1, Some(b"g".to_vec()))]);
    assert_eq!(host.guest().character(PlayerId(1)), None);
    let w = host.drain_character_writes();
    assert_eq!(
        (w.len(), w[0].release, w[0].data.as_slice()),
        (1, true, &b"g"[..])
    );
}

#[test]
fn transferring_out_drops_the_copy_and_a_return_brings_the_character_again() {
    let mut host = keeper();
    host.join_with_character(1, "ann", b"g").unwrap();
    let commands = host.input(1, &[5]).unwrap();
    assert!(matches!(
        commands[..],
        [Command::Transfer { player: 1, .. }]
    ));
    let (state, _) = host.transfer_out(1).unwrap();
    assert_eq!(state, b"g", "the hook still read it");
    assert_eq!(host.guest().character(PlayerId(1)), None);
    assert_eq!(host.character(1), None, "it went back with the move");
    // The move failed at once: the player comes back with the character its move gave back,
    // which is never written.
    host.transfer_in(1, "ann", "{}", "elsewhere", returning::RETURN, &state)
        .unwrap();
    assert_eq!(host.guest().character(PlayerId(1)), Some(&b"g"[..]));
    assert_eq!(seen(&host).last(), Some(&(1, Some(b"g".to_vec()))));
    host.input(1, &[1]).unwrap();
    assert_eq!(host.character(1), Some(&b"g+"[..]));
    // Out again, and its write made this time: back later with the one the store kept.
    host.input(1, &[5]).unwrap();
    host.transfer_out(1).unwrap();
    let w = host.drain_character_writes();
    assert_eq!(
        (w.len(), w[0].data.as_slice(), w[0].release),
        (1, &b"g+"[..], true)
    );
    host.transfer_in_with_character(1, "ann", "elsewhere", returning::RETURN, &[], b"g+")
        .unwrap();
    assert_eq!(host.guest().character(PlayerId(1)), Some(&b"g+"[..]));
}

#[test]
fn an_arrival_brings_its_character_a_new_one_is_empty_and_a_refused_one_goes_back() {
    let mut host = keeper();
    host.transfer_in_with_character(4, "bo", "elsewhere", returning::ARRIVAL, &[], b"far")
        .unwrap();
    assert_eq!(seen(&host), [(4, Some(b"far".to_vec()))]);
    assert_eq!(host.guest().character(PlayerId(4)), Some(&b"far"[..]));
    assert_eq!(host.character(4), Some(&b"far"[..]));
    // With no character named, an arrival's is new.
    host.transfer_in(5, "cy", "{}", "elsewhere", returning::ARRIVAL, &[])
        .unwrap();
    assert_eq!(host.guest().character(PlayerId(5)), Some(&b""[..]));
    assert!(host.drain_character_writes().is_empty());
    // A refused arrival leaves with its character.
    host.transfer_in_with_character(6, "banned", "elsewhere", returning::ARRIVAL, &[], b"x")
        .unwrap();
    assert_eq!(host.guest().character(PlayerId(6)), None);
    let w = host.drain_character_writes();
    assert_eq!(
        (w.len(), w[0].data.as_slice(), w[0].release),
        (1, &b"x"[..], true)
    );
}

#[test]
fn transfer_in_passes_the_character_as_its_last_field() {
    let mut host = keeper();
    let bytes = input::transfer_in(0, 4, "bo", "{}", "z", returning::ARRIVAL, &[], b"kept");
    host.call(Op::TransferIn, &bytes).unwrap();
    assert_eq!(host.guest().character(PlayerId(4)), Some(&b"kept"[..]));
}

/// Keeps no characters.
struct Plain;

impl Zone for Plain {
    type Input = Vec<u8>;

    fn create(_ctx: &mut Ctx<'_>, _params: &str) -> Result<Self, String> {
        Ok(Plain)
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, player: Player) -> Result<(), Refusal> {
        match ctx.character(player.id) {
            None => Ok(()),
            Some(_) => Err(Refusal::new(9, "a character in a kind without them")),
        }
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, _input: Vec<u8>) {
        assert_eq!(
            ctx.set_character(player, Vec::new()),
            Err(CharacterError::NoCharacter(player))
        );
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
}

#[test]
fn a_kind_without_characters_has_none_whatever_the_host_passes() {
    let mut host = TestHost::<Plain>::new(50_000);
    host.create(1, "plain-1", "{}").unwrap();
    assert!(host
        .join_with_character(1, "ann", b"gold")
        .unwrap()
        .is_empty());
    let bytes = input::join(0, 2, "bob", Role::Player, "{}", b"stray");
    assert!(host.call(Op::Join, &bytes).unwrap().is_empty());
    assert_eq!(host.guest().character(PlayerId(2)), None);
    assert!(host.input(1, &[1]).unwrap().is_empty());
    assert_eq!(host.character(1), None);
    host.leave(1, LeaveReason::Left).unwrap();
    assert!(host.drain_character_writes().is_empty());
}

#[test]
fn a_restored_zone_gets_its_characters_again_through_join() {
    let mut a = keeper();
    a.join_with_character(1, "ann", b"g").unwrap();
    let save = a.save().unwrap();
    let mut b = TestHost::<Keeper>::new(50_000);
    b.restore(1, "keep-1", "{}", &save).unwrap();
    assert_eq!(
        b.guest().character(PlayerId(1)),
        None,
        "a save carries none"
    );
    b.join_with_character(1, "ann", b"g+").unwrap();
    assert_eq!(b.guest().character(PlayerId(1)), Some(&b"g+"[..]));
}

#[test]
fn config_carries_characters_as_its_eleventh_setting() {
    let mut host = TestHost::<Keeper>::new(1000);
    assert!(host.settings().unwrap().characters);
    let encoded = |s: Settings| {
        let mut w = Writer::new();
        s.encode(&mut w);
        w.into_vec()
    };
    // Seven, `max_entities` 0, `lasting` 0, `state_version` 0 (version 1), then the flag.
    let bytes = encoded(Settings::new().characters());
    assert_eq!(bytes.len(), 7 * 4 + 4 + 1 + 4 + 1);
    assert_eq!(&bytes[7 * 4 + 5..7 * 4 + 9], &0u32.to_le_bytes());
    assert_eq!(bytes.last(), Some(&1));
    let all = encoded(Settings::new().lasting().state_version(3).characters());
    assert_eq!(all[7 * 4 + 4], 1);
    assert_eq!(&all[7 * 4 + 5..7 * 4 + 9], &3u32.to_le_bytes());
    assert_eq!(all.last(), Some(&1));
    // Without characters, nothing after the tenth, as before.
    assert_eq!(
        encoded(Settings::new().state_version(2)).len(),
        7 * 4 + 4 + 1 + 4
    );
}
