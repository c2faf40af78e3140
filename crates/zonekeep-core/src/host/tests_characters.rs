//! Host tests: characters handed to a zone on join, changed, written and handed back, and
//! carried by moves between zones.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use crate::recording::{replay, RecordLimits, RecordReader};
use crate::{
    Arrival, Claims, Clock, Ctx, InputRefusal, JoinRefusal, LeaveReason, ManualClock, PlayerId,
    PlayerInfo, Principal, Role, StateHasher, Zone, ZoneConfig, ZoneError, ZoneHost, ZoneInit,
    ZoneKinds,
};

/// Each empty input earns the player one gold, kept in its character (a `u64`); the zone asks
/// for the write at once when the gold reaches a multiple of 3, and writes a farewell marker as
/// the player leaves. Any other input moves the player to the zone it names, and the gold is
/// doubled as it moves out. A principal named "banned" is refused, and so is an arrival handed
/// the claim `refuse`.
#[derive(Default)]
struct Mine {
    seen: Vec<(PlayerId, Option<u64>)>,
}

fn gold(c: Option<&[u8]>) -> Option<u64> {
    c.map(|b| b.try_into().map_or(0, u64::from_le_bytes))
}

/// What a [`Mine`] input asks for.
enum Cmd {
    Earn,
    Go(String),
}

impl Zone for Mine {
    type Input = Cmd;
    fn create(_init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(Mine::default())
    }
    fn on_join(&mut self, ctx: &mut Ctx<'_>, p: &PlayerInfo) -> Result<(), JoinRefusal> {
        self.seen.push((p.id, gold(ctx.character(p.id))));
        if p.principal.as_str() == "banned" {
            return Err(JoinRefusal::new(1, "banned"));
        }
        Ok(())
    }
    fn on_observe(&mut self, ctx: &mut Ctx<'_>, o: &PlayerInfo) -> Result<(), JoinRefusal> {
        self.seen.push((o.id, gold(ctx.character(o.id))));
        Ok(())
    }
    fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<Cmd, InputRefusal> {
        match payload {
            [] => Ok(Cmd::Earn),
            to => Ok(Cmd::Go(String::from_utf8_lossy(to).into_owned())),
        }
    }
    fn on_input(&mut self, ctx: &mut Ctx<'_>, p: PlayerId, cmd: Cmd) {
        if let Cmd::Go(to) = cmd {
            let refuse = to.ends_with("-refuses");
            let mut claims = Claims::new();
            claims.insert("refuse".into(), refuse.into());
            ctx.transfer(p, &to, claims).unwrap();
            return;
        }
        let g = gold(ctx.character(p)).unwrap_or(0) + 1;
        ctx.set_character(p, g.to_le_bytes().to_vec()).unwrap();
        if g % 3 == 0 {
            ctx.commit_character(p).unwrap();
        }
    }
    fn on_leave(&mut self, ctx: &mut Ctx<'_>, p: PlayerId, _why: LeaveReason) {
        if let Some(c) = ctx.character(p) {
            let mut last = c.to_vec();
            last.push(0xff);
            ctx.set_character(p, last).unwrap();
        }
    }
    fn transfer_out(&mut self, ctx: &mut Ctx<'_>, p: PlayerId) -> Vec<u8> {
        let doubled = gold(ctx.character(p)).unwrap_or(0) * 2;
        ctx.set_character(p, doubled.to_le_bytes().to_vec())
            .unwrap();
        b"carried".to_vec()
    }
    fn transfer_in(
        &mut self,
        ctx: &mut Ctx<'_>,
        p: &PlayerInfo,
        arrival: &Arrival<'_>,
    ) -> Result<(), JoinRefusal> {
        self.seen.push((p.id, gold(ctx.character(p.id))));
        if !arrival.returning && arrival.claims.get("refuse") == Some(&true.into()) {
            return Err(JoinRefusal::new(2, "not here"));
        }
        Ok(())
    }
    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
    fn state_hash(&self) -> Option<u64> {
        let mut h = StateHasher::new();
        for (p, g) in &self.seen {
            std::hash::Hash::hash(&(p.0, *g), &mut h);
        }
        Some(std::hash::Hasher::finish(&h))
    }
}

fn kinds() -> ZoneKinds {
    let mut k = ZoneKinds::new();
    k.register::<Mine>("mine");
    k
}

fn host(clock: &ManualClock) -> ZoneHost {
    let init = ZoneInit {
        zone_id: "mine-1".into(),
        kind: "mine".into(),
        params: serde_json::Value::Null,
    };
    let config = ZoneConfig {
        characters: true,
        ..ZoneConfig::default()
    };
    kinds()
        .create_at(init, config, Arc::new(clock.clone()), 1)
        .unwrap()
}

fn join(h: &mut ZoneHost, who: &str, gold: u64) -> Result<PlayerId, crate::JoinError> {
    h.handle_join_with_character(
        Principal::new(who),
        Claims::new(),
        Role::Player,
        gold.to_le_bytes().to_vec(),
    )
}

fn input(h: &mut ZoneHost, clock: &ManualClock, p: PlayerId, seq: u32) {
    assert!(h.handle_input(p, seq, 0, &[]).is_accepted());
    clock.advance(h.config().dt());
    h.advance(clock.now());
}

#[test]
fn the_zone_sees_the_character_on_join_and_writes_come_when_due() {
    let clock = ManualClock::new();
    let mut h = host(&clock);
    let ann = join(&mut h, "ann", 1).unwrap();
    assert_eq!(h.zone::<Mine>().unwrap().seen, vec![(ann, Some(1))]);
    assert!(h.drain_character_writes().is_empty(), "nothing changed yet");

    input(&mut h, &clock, ann, 1); // 2: kept for the save
    assert!(h.drain_character_writes().is_empty());
    input(&mut h, &clock, ann, 2); // 3: written at once
    let w = h.drain_character_writes();
    assert_eq!(w.len(), 1);
    assert_eq!((w[0].player, w[0].release), (ann, false));
    assert_eq!(w[0].data, 3u64.to_le_bytes());

    input(&mut h, &clock, ann, 3); // 4: written at the zone's save
    h.commit_characters();
    let w = h.drain_character_writes();
    assert_eq!(w[0].data, 4u64.to_le_bytes());

    // Leaving hands it back, as the leave hook last set it, and releases it.
    h.handle_leave(ann, LeaveReason::Left).unwrap();
    let w = h.drain_character_writes();
    assert_eq!(w.len(), 1);
    assert!(w[0].release);
    let mut last = 4u64.to_le_bytes().to_vec();
    last.push(0xff);
    assert_eq!(w[0].data, last);
    assert_eq!(h.characters(), 0);
}

#[test]
fn a_refused_join_hands_the_character_back_unchanged() {
    let clock = ManualClock::new();
    let mut h = host(&clock);
    assert!(join(&mut h, "banned", 7).is_err());
    let w = h.drain_character_writes();
    assert_eq!(w.len(), 1);
    assert!(w[0].release);
    assert_eq!(w[0].data, 7u64.to_le_bytes());
    assert_eq!(w[0].principal.as_str(), "banned");
}

#[test]
fn an_observer_has_no_character() {
    let clock = ManualClock::new();
    let mut h = host(&clock);
    let eve = h
        .handle_join(Principal::new("eve"), Claims::new(), Role::Observer)
        .unwrap();
    assert_eq!(h.zone::<Mine>().unwrap().seen, vec![(eve, None)]);
    h.handle_leave(eve, LeaveReason::Left).unwrap();
    assert!(
        h.drain_character_writes().is_empty(),
        "nothing to hand back"
    );
}

#[test]
fn a_restored_zone_of_characters_readmits_only_players_whose_characters_came_with_it() {
    let clock = ManualClock::new();
    let init = ZoneInit {
        zone_id: "saved-1".into(),
        kind: "saved".into(),
        params: serde_json::Value::Null,
    };
    let empty =
        ZoneHost::new::<Saved>(init.clone(), ZoneConfig::default(), Arc::new(clock.clone()))
            .unwrap();
    let mut snap = crate::Snapshot::decode(&empty.snapshot().unwrap()).unwrap();
    snap.roster = vec![crate::snapshot::SavedParticipant {
        id: PlayerId(1),
        principal: Principal::new("ann"),
        role: Role::Player,
        claims: Claims::new(),
        last_seq: None,
    }];
    snap.next_player = 2;
    let with_characters = ZoneConfig {
        characters: true,
        ..ZoneConfig::default()
    };
    let clock = Arc::new(clock);
    let restored = ZoneHost::restore::<Saved>(
        init.clone(),
        with_characters,
        clock.clone(),
        2,
        &snap.encode(),
    )
    .unwrap();
    assert_eq!(restored.players().count(), 0, "ann comes back by joining");
    // Her host put her character in for the restore: she is readmitted with it.
    snap.characters = vec![(PlayerId(1), b"gold=5".to_vec())];
    let with_characters = ZoneConfig {
        characters: true,
        ..ZoneConfig::default()
    };
    let mut restored = ZoneHost::restore::<Saved>(
        init.clone(),
        with_characters,
        clock.clone(),
        2,
        &snap.encode(),
    )
    .unwrap();
    assert_eq!(
        restored.players().count(),
        1,
        "readmitted with her character"
    );
    assert_eq!(restored.characters(), 1);
    restored.release_characters();
    assert_eq!(restored.drain_character_writes()[0].data, b"gold=5");
    snap.characters.clear();
    let restored =
        ZoneHost::restore::<Saved>(init, ZoneConfig::default(), clock, 2, &snap.encode()).unwrap();
    assert_eq!(
        restored.players().count(),
        1,
        "a kind without characters readmits her"
    );
}

/// A zone with an empty save, for the restore test.
struct Saved;

impl Zone for Saved {
    type Input = ();
    fn create(_init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(Saved)
    }
    fn sanitize(&mut self, _p: PlayerId, _payload: &[u8]) -> Result<(), InputRefusal> {
        Ok(())
    }
    fn on_input(&mut self, _ctx: &mut Ctx<'_>, _p: PlayerId, _i: ()) {}
    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
    fn save(&self) -> Option<Vec<u8>> {
        Some(Vec::new())
    }
    fn restore(_i: &ZoneInit, _c: &mut Ctx<'_>, _b: &[u8]) -> Result<Self, ZoneError> {
        Ok(Saved)
    }
}

#[test]
fn a_join_with_a_character_is_recorded_and_replays_to_a_match() {
    let clock = ManualClock::new();
    let mut h = host(&clock);
    h.start_recording(RecordLimits::default()).unwrap();
    let mut file = h.take_recorded();
    let ann = join(&mut h, "ann", 41).unwrap();
    for seq in 1..=4 {
        input(&mut h, &clock, ann, seq);
        file.extend(h.take_recorded());
    }
    let (rest, _) = h.end_recording().unwrap();
    file.extend(rest);
    let (header, _) = RecordReader::open(&file).unwrap();
    assert!(
        header.config.characters,
        "the recording says the kind keeps characters"
    );
    let report = replay(&kinds(), &file).unwrap();
    assert!(report.matched(), "{report}");
}

#[test]
fn a_full_zone_and_a_stopping_one_hand_characters_back() {
    let clock = ManualClock::new();
    let init = ZoneInit {
        zone_id: "mine-1".into(),
        kind: "mine".into(),
        params: serde_json::Value::Null,
    };
    let config = ZoneConfig {
        characters: true,
        max_players: 1,
        ..ZoneConfig::default()
    };
    let mut h = kinds()
        .create_at(init, config, Arc::new(clock.clone()), 1)
        .unwrap();
    join(&mut h, "ann", 1).unwrap();
    assert!(join(&mut h, "bob", 2).is_err(), "full");
    let w = h.drain_character_writes();
    assert_eq!(w.len(), 1);
    assert_eq!((w[0].principal.as_str(), w[0].release), ("bob", true));
    assert_eq!(w[0].data, 2u64.to_le_bytes());
    h.release_characters();
    let w = h.drain_character_writes();
    assert_eq!(w.len(), 1);
    assert_eq!((w[0].principal.as_str(), w[0].release), ("ann", true));
    assert_eq!(h.characters(), 0);
}

/// `p` asks (as input `seq`) to move to `to`; the zone runs the tick that moves it.
fn go(h: &mut ZoneHost, clock: &ManualClock, p: PlayerId, seq: u32, to: &str) {
    assert!(h.handle_input(p, seq, 0, to.as_bytes()).is_accepted());
    clock.advance(h.config().dt());
    h.advance(clock.now());
}

#[test]
fn a_move_out_hands_the_character_back_as_transfer_out_left_it() {
    let clock = ManualClock::new();
    let mut h = host(&clock);
    let ann = join(&mut h, "ann", 1).unwrap();
    input(&mut h, &clock, ann, 1); // 2 gold, not written yet
    go(&mut h, &clock, ann, 2, "mine-2");
    assert!(h.is_moving(ann));
    assert!(!h.holds_character(ann), "a moving player holds none");
    let moves = h.drain_transfers();
    assert_eq!(moves.len(), 1);
    assert_eq!(moves[0].state, b"carried");
    let w = h.drain_character_writes();
    assert_eq!(w.len(), 1, "the release, and nothing else");
    assert_eq!((w[0].player, w[0].release), (ann, true));
    assert_eq!(w[0].data, 4u64.to_le_bytes(), "with the hook's last change");
    // Done: the player leaves, and there is nothing more to hand back.
    h.handle_transfer_done(ann).unwrap();
    assert!(h.drain_character_writes().is_empty());
    assert_eq!(h.characters(), 0);
}

#[test]
fn an_arrival_brings_its_character_and_a_refused_one_hands_it_back() {
    let clock = ManualClock::new();
    let mut h = host(&clock);
    let mut refuse = Claims::new();
    refuse.insert("refuse".into(), true.into());
    let arrive = |h: &mut ZoneHost, who: &str, claims: Claims, gold: u64| {
        h.handle_transfer_in_with_character(
            Principal::new(who),
            Claims::new(),
            claims,
            "mine-0",
            b"carried",
            gold.to_le_bytes().to_vec(),
        )
    };
    let ann = arrive(&mut h, "ann", Claims::new(), 8).unwrap();
    assert!(h.holds_character(ann));
    assert_eq!(h.zone::<Mine>().unwrap().seen, vec![(ann, Some(8))]);
    assert!(h.drain_character_writes().is_empty(), "held, not written");

    assert!(arrive(&mut h, "bob", refuse, 5).is_err());
    let w = h.drain_character_writes();
    assert_eq!(w.len(), 1);
    assert_eq!((w[0].principal.as_str(), w[0].release), ("bob", true));
    assert_eq!(w[0].data, 5u64.to_le_bytes(), "handed back unchanged");

    // A full zone hands it back too.
    let init = ZoneInit {
        zone_id: "mine-9".into(),
        kind: "mine".into(),
        params: serde_json::Value::Null,
    };
    let config = ZoneConfig {
        characters: true,
        max_players: 0,
        ..ZoneConfig::default()
    };
    let mut full = kinds()
        .create_at(init, config, Arc::new(clock.clone()), 1)
        .unwrap();
    assert!(arrive(&mut full, "cy", Claims::new(), 3).is_err());
    let w = full.drain_character_writes();
    assert_eq!((w[0].principal.as_str(), w[0].release), ("cy", true));
    assert_eq!(w[0].data, 3u64.to_le_bytes());
}

#[test]
fn a_move_that_comes_back_at_once_keeps_its_release_from_leaving() {
    let clock = ManualClock::new();
    let mut h = host(&clock);
    let ann = join(&mut h, "ann", 1).unwrap();
    go(&mut h, &clock, ann, 1, "mine-2");
    let _ = h.drain_transfers();
    // Taken back before the host took the release (its client could not follow, say).
    h.handle_transfer_back(ann).unwrap();
    assert!(h.holds_character(ann));
    assert!(
        h.drain_character_writes().is_empty(),
        "the release was withdrawn, never written"
    );
    let seen = &h.zone::<Mine>().unwrap().seen;
    assert_eq!(
        seen.last(),
        Some(&(ann, Some(2))),
        "back with its character"
    );
    // Its changes are still to be written, at the zone's next save.
    h.commit_characters();
    let w = h.drain_character_writes();
    assert_eq!(
        (w[0].data.as_slice(), w[0].release),
        (&2u64.to_le_bytes()[..], false)
    );
}

#[test]
fn a_move_that_comes_back_later_gets_the_character_its_host_took_again() {
    let clock = ManualClock::new();
    let mut h = host(&clock);
    let ann = join(&mut h, "ann", 3).unwrap();
    let bob = join(&mut h, "bob", 4).unwrap();
    go(&mut h, &clock, ann, 1, "mine-2");
    go(&mut h, &clock, bob, 1, "mine-2");
    let _ = h.drain_transfers();
    assert_eq!(h.drain_character_writes().len(), 2, "both released");
    // Ann's host took her lease again: she comes back with what the store holds.
    h.handle_transfer_back_with_character(ann, 6u64.to_le_bytes().to_vec())
        .unwrap();
    assert!(h.holds_character(ann));
    assert!(h.drain_character_writes().is_empty());
    // Bob's host could not: he comes back without one, which his host sees.
    h.handle_transfer_back(bob).unwrap();
    assert!(!h.holds_character(bob));
    // Not moving: refused, and the character not taken.
    assert!(h.handle_transfer_back_with_character(ann, vec![1]).is_err());
    h.handle_leave(ann, LeaveReason::Left).unwrap();
    let w = h.drain_character_writes();
    let mut last = 6u64.to_le_bytes().to_vec();
    last.push(0xff);
    assert_eq!((w[0].data.clone(), w[0].release), (last, true));
}

#[test]
fn moves_that_carry_characters_are_recorded_and_replay_to_a_match() {
    let clock = ManualClock::new();
    let mut h = host(&clock);
    h.start_recording(RecordLimits::default()).unwrap();
    let mut file = h.take_recorded();
    let ann = join(&mut h, "ann", 1).unwrap();
    input(&mut h, &clock, ann, 1);
    go(&mut h, &clock, ann, 2, "mine-2");
    let _ = h.drain_transfers();
    let _ = h.drain_character_writes();
    h.handle_transfer_back_with_character(ann, 4u64.to_le_bytes().to_vec())
        .unwrap();
    let bob = h
        .handle_transfer_in_with_character(
            Principal::new("bob"),
            Claims::new(),
            Claims::new(),
            "mine-0",
            b"carried",
            9u64.to_le_bytes().to_vec(),
        )
        .unwrap();
    let _ = h.handle_transfer_return_with_character(
        Principal::new("cy"),
        Claims::new(),
        Claims::new(),
        "mine-3",
        b"carried",
        7u64.to_le_bytes().to_vec(),
    );
    h.handle_rejoin(bob).unwrap();
    for seq in 3..=5 {
        input(&mut h, &clock, ann, seq);
        file.extend(h.take_recorded());
    }
    let (rest, _) = h.end_recording().unwrap();
    file.extend(rest);
    let (_, mut records) = RecordReader::open(&file).unwrap();
    let mut kinds_seen = Vec::new();
    while let Some(r) = records.next_record().unwrap() {
        match r {
            crate::recording::Record::TransferInCharacter { character, .. } => {
                kinds_seen.push(("in", character))
            }
            crate::recording::Record::TransferReturnCharacter { character, .. } => {
                kinds_seen.push(("return", character))
            }
            crate::recording::Record::TransferBackCharacter { character, .. } => {
                kinds_seen.push(("back", character))
            }
            _ => {}
        }
    }
    assert_eq!(
        kinds_seen,
        vec![
            ("back", 4u64.to_le_bytes().to_vec()),
            ("in", 9u64.to_le_bytes().to_vec()),
            ("return", 7u64.to_le_bytes().to_vec()),
        ]
    );
    let report = replay(&kinds(), &file).unwrap();
    assert!(report.matched(), "{report}");
}
