//! Characters in module zones: the guest SDK's example module with characters
//! (`crates/zonekeep-guest/examples/characters.rs`), built for wasm32 and run by the host, sees
//! the character a join brings, changes and commits it, and the core hands the writes back; and
//! modules written by hand whose SET_CHARACTER commands the host refuses, or cannot read.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/guest_build.rs"]
mod guest_build;

use std::sync::Arc;

use zonekeep_core::{
    CharacterWrite, Claims, Clock, LeaveReason, ManualClock, PlayerId, Principal, Role, Snapshot,
    ZoneConfig, ZoneHost, ZoneInit, ZoneKinds, MAX_CHARACTER_BYTES,
};
use zonekeep_protocol::schema::FieldValue;
use zonekeep_wasm::{register, ModuleEngine, ModuleKind, Sandbox, ZoneModule};

fn init(kind: &str) -> ZoneInit {
    ZoneInit {
        zone_id: format!("{kind}-1"),
        kind: kind.into(),
        params: zonekeep_core::serde_json::json!({}),
    }
}

/// Kind `kind` running `bytes`.
fn kinds_of(kind: &str, bytes: &[u8]) -> ZoneKinds {
    let engine = ModuleEngine::new(Sandbox::default()).unwrap();
    let module = ZoneModule::load(&engine, bytes).unwrap();
    let mut kinds = ZoneKinds::new();
    register(&mut kinds, &ModuleKind::new(kind, module));
    kinds
}

/// The SDK's example module with characters, as kind `mine`.
fn mine_kinds() -> ZoneKinds {
    kinds_of(
        "mine",
        &std::fs::read(guest_build::characters_module()).unwrap(),
    )
}

/// A zone of the example module, on a manual clock.
struct Mine {
    host: ZoneHost,
    clock: Arc<ManualClock>,
    seq: u32,
}

impl Mine {
    fn new(kinds: &ZoneKinds) -> Self {
        let clock = Arc::new(ManualClock::new());
        let host = kinds
            .create(init("mine"), ZoneConfig::default(), clock.clone())
            .unwrap();
        Self {
            host,
            clock,
            seq: 0,
        }
    }

    /// `who` joins bringing `gold` in its character.
    fn join(&mut self, who: &str, gold: u64) -> PlayerId {
        self.host
            .handle_join_with_character(
                Principal::new(who),
                Claims::new(),
                Role::Player,
                gold.to_le_bytes().to_vec(),
            )
            .unwrap()
    }

    /// `player` sends `input`, and a tick applies it.
    fn input(&mut self, player: PlayerId, input: u8) {
        self.seq += 1;
        assert!(self
            .host
            .handle_input(player, self.seq, 0, &[input])
            .is_accepted());
        self.clock.advance(self.host.config().dt());
        self.host.advance(self.clock.now());
        assert_eq!(self.host.failure(), None);
    }

    /// Each miner's `gold` and `keeps`, in the order they joined.
    fn miners(&self) -> Vec<(u32, bool)> {
        let mut v: Vec<_> = self
            .host
            .world()
            .iter()
            .map(|e| match e.values {
                [FieldValue::U(gold), FieldValue::Bool(keeps)] => (e.qx, *gold, *keeps),
                other => panic!("a miner's fields: {other:?}"),
            })
            .collect();
        v.sort_by_key(|m| m.0);
        v.into_iter()
            .map(|(_, gold, keeps)| (gold, keeps))
            .collect()
    }
}

fn gold(n: u64) -> Vec<u8> {
    n.to_le_bytes().to_vec()
}

#[test]
fn the_abi_and_the_core_agree_on_the_largest_character() {
    // The guest SDK refuses past the ABI's limit, the core past its own: one number.
    assert_eq!(zonekeep_abi::MAX_CHARACTER_BYTES, MAX_CHARACTER_BYTES);
    assert_eq!(zonekeep_abi::ABI_VERSION, 6);
}

#[test]
fn the_module_asks_for_characters_and_its_zones_keep_them() {
    let engine = ModuleEngine::new(Sandbox::default()).unwrap();
    let bytes = std::fs::read(guest_build::characters_module()).unwrap();
    let module = ZoneModule::load(&engine, &bytes).unwrap();
    assert!(module.settings().characters);
    let mine = Mine::new(&mine_kinds());
    assert!(mine.host.config().characters);
}

#[test]
fn a_join_brings_the_character_which_the_module_changes_and_commits() {
    let mut mine = Mine::new(&mine_kinds());
    let ann = mine.join("ann", 5);
    assert_eq!(
        mine.miners(),
        [(5, true)],
        "the module saw the gold she brought"
    );
    assert!(mine.host.drain_character_writes().is_empty());

    // Mined: the character changed, and waits for the zone's save.
    mine.input(ann, 1);
    mine.input(ann, 1);
    assert_eq!(mine.miners(), [(7, true)]);
    assert!(mine.host.drain_character_writes().is_empty());
    // Banked: written at once.
    mine.input(ann, 2);
    assert_eq!(
        mine.host.drain_character_writes(),
        [CharacterWrite {
            player: ann,
            principal: Principal::new("ann"),
            data: gold(7),
            release: false,
        }]
    );
    // Mined again, then the zone saves: written with the save.
    mine.input(ann, 1);
    mine.host.commit_characters();
    let w = mine.host.drain_character_writes();
    assert_eq!(
        (w.len(), w[0].data.clone(), w[0].release),
        (1, gold(8), false)
    );
}

#[test]
fn a_leave_hands_the_character_back_released() {
    let mut mine = Mine::new(&mine_kinds());
    let ann = mine.join("ann", 1);
    mine.input(ann, 1);
    mine.host.handle_leave(ann, LeaveReason::Left).unwrap();
    assert_eq!(
        mine.host.drain_character_writes(),
        [CharacterWrite {
            player: ann,
            principal: Principal::new("ann"),
            data: gold(2),
            release: true,
        }]
    );
    assert_eq!(mine.host.characters(), 0);
    assert!(mine.miners().is_empty());
}

#[test]
fn an_observer_gets_no_character() {
    let mut mine = Mine::new(&mine_kinds());
    mine.join("ann", 3);
    let eve = mine
        .host
        .handle_join(Principal::new("eve"), Claims::new(), Role::Observer)
        .unwrap();
    assert_eq!(mine.miners(), [(3, true), (0, false)]);
    mine.host.handle_leave(eve, LeaveReason::Left).unwrap();
    assert!(mine.host.drain_character_writes().is_empty());
    assert_eq!(mine.host.failure(), None);
}

#[test]
fn a_restored_zone_readmits_its_players_with_the_characters_its_host_put_in() {
    let kinds = mine_kinds();
    let mut mine = Mine::new(&kinds);
    let ann = mine.join("ann", 4);
    mine.input(ann, 1);
    let mut snap = Snapshot::decode(&mine.host.snapshot().unwrap()).unwrap();
    snap.characters = vec![(ann, gold(5))];
    let clock = Arc::new(ManualClock::new());
    clock.set(mine.clock.now());
    let restored = kinds
        .restore(
            init("mine"),
            ZoneConfig::default(),
            clock,
            2,
            &snap.encode(),
        )
        .unwrap();
    assert_eq!(restored.failure(), None);
    assert_eq!(restored.players().count(), 1);
    let miners: Vec<_> = restored.world().iter().map(|e| e.values.to_vec()).collect();
    assert_eq!(
        miners,
        [vec![FieldValue::U(5), FieldValue::Bool(true)]],
        "the module saw her character again through JOIN"
    );
}

/// CONFIG's answer asking for characters: the seven settings the host's, `max_entities` 0,
/// not lasting, version 1, then `u8 1`.
fn config_with_characters() -> Vec<u8> {
    let mut out = vec![0; 7 * 4 + 4 + 1 + 4];
    out.push(1);
    out
}

fn data(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("\\{b:02x}")).collect()
}

/// A module of a kind with characters whose TICK answers the command buffer `ticked` (laid out
/// at 65536 by `segments`, `(offset, bytes)` each, over memory that is otherwise zero) and every
/// other call nothing (CONFIG: characters).
fn answering_tick(segments: &[(usize, Vec<u8>)], len: usize) -> Vec<u8> {
    let config = config_with_characters();
    let pages = (65536 + len).div_ceil(65536);
    let segments: String = segments
        .iter()
        .map(|(at, b)| format!("(data (i32.const {}) \"{}\")\n", 65536 + at, data(b)))
        .collect();
    wat::parse_str(format!(
        r#"(module
            (memory (export "memory") {pages})
            (data (i32.const 1024) "{config}")
            {segments}
            (func (export "zk_abi") (result i32) i32.const 5)
            (func (export "zk_alloc") (param i32) (result i32) i32.const 4096)
            (func (export "zk_call") (param $op i32) (param $len i32) (result i64)
                (if (i32.eq (local.get $op) (i32.const 14))
                    (then (return (i64.const {config_out}))))
                (if (i32.eq (local.get $op) (i32.const 8))
                    (then (return (i64.const {tick_out}))))
                i64.const 0))"#,
        config = data(&config),
        config_out = (1024i64 << 32) | config.len() as i64,
        tick_out = (65536i64 << 32) | len as i64,
    ))
    .unwrap()
}

fn set_character(player: u32, len: u32, bytes: &[u8]) -> Vec<u8> {
    let mut c = vec![27];
    c.extend_from_slice(&player.to_le_bytes());
    c.extend_from_slice(&len.to_le_bytes());
    c.extend_from_slice(bytes);
    c
}

fn commit_character(player: u32) -> Vec<u8> {
    let mut c = vec![28];
    c.extend_from_slice(&player.to_le_bytes());
    c
}

/// A zone of `bytes` as kind `k`, with ann (player 1) holding "gold".
fn hostile_zone(bytes: &[u8]) -> (ZoneHost, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new());
    let mut host = kinds_of("k", bytes)
        .create(init("k"), ZoneConfig::default(), clock.clone())
        .unwrap();
    assert!(host.config().characters);
    let ann = host
        .handle_join_with_character(
            Principal::new("ann"),
            Claims::new(),
            Role::Player,
            b"gold".to_vec(),
        )
        .unwrap();
    assert_eq!(ann, PlayerId(1));
    (host, clock)
}

#[test]
fn a_hostile_set_character_is_refused_without_harming_the_zone_or_the_host() {
    // A good change of ann's; SET_CHARACTER of player 99 (not here); SET_CHARACTER of ann one
    // byte over the limit (its bytes are the zeros after the header); COMMIT_CHARACTER of
    // player 99; then ann's commit, which writes her character as the buffer left it.
    let mut head = set_character(1, 2, b"ok");
    head.extend(set_character(99, 6, b"stolen"));
    let big_len = MAX_CHARACTER_BYTES + 1;
    head.extend(set_character(1, u32::try_from(big_len).unwrap(), &[]));
    let mut tail = commit_character(99);
    tail.extend(commit_character(1));
    let tail_at = head.len() + big_len;
    let len = tail_at + tail.len();
    let module = answering_tick(&[(0, head), (tail_at, tail)], len);
    let (mut host, clock) = hostile_zone(&module);
    for _ in 0..3 {
        clock.advance(host.config().dt());
        host.advance(clock.now());
        assert_eq!(host.failure(), None, "the zone runs on");
        let w = host.drain_character_writes();
        assert_eq!(w.len(), 1, "ann's commit, once: {w:?}");
        assert_eq!(
            (w[0].player, w[0].data.as_slice()),
            (PlayerId(1), &b"ok"[..]),
            "the oversized change was refused"
        );
    }
    assert_eq!(host.tick(), 3);
    assert_eq!(host.characters(), 1, "player 99 got none");
}

#[test]
fn a_set_character_cut_short_fails_only_its_zone_and_the_character_goes_back() {
    // SET_CHARACTER of ann claiming 100 bytes, with 2 in the buffer.
    let cut = set_character(1, 100, b"ab");
    let len = cut.len();
    let (mut host, clock) = hostile_zone(&answering_tick(&[(0, cut)], len));
    clock.advance(host.config().dt());
    host.advance(clock.now());
    let why = host.failure().unwrap().to_owned();
    assert!(why.contains("character runs past the end"), "{why}");
    // The host stops the zone: the character goes back as it came.
    host.release_characters();
    let w = host.drain_character_writes();
    assert_eq!(
        (w.len(), w[0].data.as_slice(), w[0].release),
        (1, &b"gold"[..], true)
    );
}
