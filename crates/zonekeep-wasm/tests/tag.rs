//! The tag example, built from its Rust source with the guest SDK, run by the host as a zone:
//! joins, inputs, ticks, the replicated world, refusals, saves and restores, determinism.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/guest_build.rs"]
mod guest_build;

use std::sync::Arc;

use zonekeep_core::{
    Claims, Clock, InputOutcome, ManualClock, PlayerId, Principal, Role, ZoneConfig, ZoneHost,
    ZoneInit, ZoneKinds,
};
use zonekeep_wasm::{register, ModuleEngine, ModuleKind, Sandbox, ZoneModule};

fn kinds() -> ZoneKinds {
    let engine = ModuleEngine::new(Sandbox::default()).unwrap();
    let bytes = std::fs::read(guest_build::tag_module()).unwrap();
    let module = ZoneModule::load(&engine, &bytes).unwrap();
    let mut kinds = ZoneKinds::new();
    register(&mut kinds, &ModuleKind::new("tag", module));
    kinds
}

fn init() -> ZoneInit {
    ZoneInit {
        zone_id: "tag-1".into(),
        kind: "tag".into(),
        params: zonekeep_core::serde_json::json!({}),
    }
}

struct Game {
    host: ZoneHost,
    clock: Arc<ManualClock>,
    config: ZoneConfig,
    seq: u32,
}

impl Game {
    fn new(kinds: &ZoneKinds) -> Self {
        let clock = Arc::new(ManualClock::new());
        let config = ZoneConfig::default();
        let host = kinds.create(init(), config.clone(), clock.clone()).unwrap();
        Self {
            host,
            clock,
            config,
            seq: 0,
        }
    }

    fn join(&mut self, who: &str) -> PlayerId {
        self.host
            .handle_join(Principal::new(who), Claims::new(), Role::Player)
            .unwrap()
    }

    fn input(&mut self, p: PlayerId, payload: &[u8]) -> InputOutcome {
        self.seq += 1;
        self.host.handle_input(p, self.seq, 0, payload)
    }

    fn step(&mut self, ticks: u32) {
        for _ in 0..ticks {
            self.clock.advance(self.config.dt());
            self.host.advance(self.clock.now());
            assert_eq!(self.host.failure(), None);
        }
    }

    /// Two players: ann runs right, bob runs up, for 60 ticks.
    fn play(&mut self) -> (PlayerId, PlayerId) {
        let (ann, bob) = (self.join("ann"), self.join("bob"));
        for _ in 0..60 {
            assert_eq!(self.input(ann, &[1, 0]), InputOutcome::Accepted);
            assert_eq!(self.input(bob, &[0, 1]), InputOutcome::Accepted);
            self.step(1);
        }
        (ann, bob)
    }
}

#[test]
fn players_join_move_and_are_replicated() {
    let kinds = kinds();
    let mut g = Game::new(&kinds);
    g.play();
    let world = g.host.world();
    assert_eq!(world.len(), 2, "one entity per player");
    let schema = world.schema();
    assert_eq!(schema.kinds[0].name, "player");
    let names: Vec<&str> = schema.kinds[0]
        .fields
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(names, ["it", "score", "name"]);
    assert_eq!(g.host.tick(), 60);
}

#[test]
fn the_module_publishes_its_lobby_listing() {
    let kinds = kinds();
    let mut g = Game::new(&kinds);
    let listing = g.host.take_listing().expect("published at create");
    assert!(listing.open);
    assert_eq!(
        listing.metadata,
        zonekeep_core::serde_json::json!({"game": "tag", "runners": 0})
    );
    assert_eq!(g.host.take_listing(), None, "taken");
    g.join("ann");
    let listing = g.host.take_listing().expect("published on join");
    assert_eq!(listing.metadata["runners"], 1);
    // The ABI's bound and the core's are one number.
    assert_eq!(
        zonekeep_abi::MAX_LISTING_BYTES,
        zonekeep_core::MAX_LISTING_BYTES
    );
}

#[test]
fn an_undecodable_input_is_refused_by_the_module() {
    let kinds = kinds();
    let mut g = Game::new(&kinds);
    let ann = g.join("ann");
    let outcome = g.input(ann, &[1, 2, 3]);
    let InputOutcome::Refused(r) = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(r.code, zonekeep_guest::REFUSE_UNDECODABLE);
    g.step(3);
}

#[test]
fn the_same_inputs_give_the_same_state() {
    let kinds = kinds();
    let (mut a, mut b) = (Game::new(&kinds), Game::new(&kinds));
    a.play();
    b.play();
    let h = a.host.state_hash();
    assert!(h.is_some());
    assert_eq!(h, b.host.state_hash());
}

/// Each player entity's name, quantized position and score, sorted by name.
fn players(host: &ZoneHost) -> Vec<(String, i32, i32, String)> {
    let mut v: Vec<_> = host
        .world()
        .iter()
        .map(|e| {
            let name = format!("{:?}", e.values[2]);
            (name, e.qx, e.qy, format!("{:?}", e.values[1]))
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_saved_zone_restores_its_players_and_restores_the_same_every_time() {
    let kinds = kinds();
    let mut a = Game::new(&kinds);
    let (ann, bob) = a.play();
    let snapshot = a.host.snapshot().expect("the tag module saves");
    let restore = || {
        let clock = Arc::new(ManualClock::new());
        clock.set(a.clock.now());
        Game {
            host: kinds
                .restore(init(), a.config.clone(), clock.clone(), 1, &snapshot)
                .unwrap(),
            clock,
            config: a.config.clone(),
            seq: a.seq,
        }
    };
    let (mut b, mut c) = (restore(), restore());
    // Scores and positions come back (the players return as dropped, standing still).
    assert_eq!(players(&b.host), players(&a.host));
    assert_eq!(b.host.tick(), a.host.tick());
    for g in [&mut b, &mut c] {
        g.host.handle_rejoin(ann).unwrap();
        g.host.handle_rejoin(bob).unwrap();
        for _ in 0..30 {
            g.input(ann, &[0xff, 0]);
            g.input(bob, &[0, 0xff]);
            g.step(1);
        }
    }
    assert_eq!(b.host.state_hash(), c.host.state_hash());
    assert_ne!(
        players(&b.host),
        players(&a.host),
        "the restored players moved on"
    );
}

#[test]
fn a_save_the_module_cannot_read_is_refused_and_kept() {
    let kinds = kinds();
    let mut a = Game::new(&kinds);
    a.play();
    let mut snap = zonekeep_core::Snapshot::decode(&a.host.snapshot().unwrap()).unwrap();
    snap.zone = vec![9, 9, 9];
    let bad = snap.encode();
    let err = kinds
        .restore(
            init(),
            a.config.clone(),
            Arc::new(ManualClock::new()),
            1,
            &bad,
        )
        .unwrap_err();
    assert!(err.to_string().contains("cannot be restored"), "{err}");
}
