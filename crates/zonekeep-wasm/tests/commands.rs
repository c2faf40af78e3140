//! Command buffers written by hand (the bytes of docs/MODULES.md), applied to a zone's world.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use zonekeep_core::{
    Claims, Clock, ManualClock, PlayerId, Principal, Role, World, Zone, ZoneConfig, ZoneInit,
    ZoneKinds,
};
use zonekeep_wasm::{register, ModuleEngine, ModuleKind, ModuleZone, Sandbox, ZoneModule};

/// A module whose CREATE answers the 52 bytes at address 0 and every other call nothing.
fn answering_create(data: &str) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module
            (memory (export "memory") 1)
            (data (i32.const 0) "{data}")
            (func (export "zk_abi") (result i32) i32.const 5)
            (func (export "zk_alloc") (param i32) (result i32) i32.const 4096)
            (func (export "zk_call") (param $op i32) (param $len i32) (result i64)
                (if (i32.eq (local.get $op) (i32.const 1)) (then (return (i64.const 52))))
                i64.const 0))"#
    ))
    .unwrap()
}

#[test]
fn an_entity_seen_by_some_players_is_hidden_from_the_others() {
    // DECLARE_KIND "dot" (no fields); SPAWN 1 at (10, 10); SPAWN 2 at (11, 10);
    // SET_SEEN_BY 2: player 1 only.
    let data = concat!(
        r"\01\03\00\00\00dot\00",
        r"\02\01\00\00\00\00\00\00\00\20\41\00\00\20\41",
        r"\02\02\00\00\00\00\00\00\00\30\41\00\00\20\41",
        r"\14\02\00\00\00\01\00\00\00\01\00\00\00",
    );
    let engine = ModuleEngine::new(Sandbox::default()).unwrap();
    let module = ZoneModule::load(&engine, &answering_create(data)).unwrap();
    let mut kinds = ZoneKinds::new();
    register(&mut kinds, &ModuleKind::new("seen", module));
    let clock = Arc::new(ManualClock::new());
    let config = ZoneConfig::default();
    let init = ZoneInit {
        zone_id: "seen-1".into(),
        kind: "seen".into(),
        params: zonekeep_core::serde_json::json!({}),
    };
    let mut host = kinds.create(init, config.clone(), clock.clone()).unwrap();
    let ann = host
        .handle_join(Principal::new("ann"), Claims::new(), Role::Player)
        .unwrap();
    let bob = host
        .handle_join(Principal::new("bob"), Claims::new(), Role::Player)
        .unwrap();
    assert_eq!((ann, bob), (PlayerId(1), PlayerId(2)));
    clock.advance(config.dt());
    host.advance(clock.now());
    assert_eq!(host.failure(), None);
    let world: &World = host.world();
    let ids: Vec<_> = world.iter().map(|e| e.id).collect();
    assert_eq!(ids.len(), 2);
    let zone = host.zone::<ModuleZone>().unwrap();
    assert!(zone.uses_can_see());
    assert!(zone.can_see(ann, ids[0], world) && zone.can_see(bob, ids[0], world));
    assert!(zone.can_see(ann, ids[1], world), "ann is on the list");
    assert!(!zone.can_see(bob, ids[1], world), "bob is not");
}

#[test]
fn save_now_asks_the_host_for_a_save_once() {
    // CREATE answers one command: SAVE_NOW (tag 26, no body).
    let module = wat::parse_str(
        r#"(module
            (memory (export "memory") 1)
            (data (i32.const 0) "\1a")
            (func (export "zk_abi") (result i32) i32.const 5)
            (func (export "zk_alloc") (param i32) (result i32) i32.const 4096)
            (func (export "zk_call") (param $op i32) (param $len i32) (result i64)
                (if (i32.eq (local.get $op) (i32.const 1)) (then (return (i64.const 1))))
                i64.const 0))"#,
    )
    .unwrap();
    let engine = ModuleEngine::new(Sandbox::default()).unwrap();
    let module = ZoneModule::load(&engine, &module).unwrap();
    let mut kinds = ZoneKinds::new();
    register(&mut kinds, &ModuleKind::new("saver", module));
    let init = ZoneInit {
        zone_id: "saver-1".into(),
        kind: "saver".into(),
        params: zonekeep_core::serde_json::json!({}),
    };
    let clock = Arc::new(ManualClock::new());
    let mut host = kinds.create(init, ZoneConfig::default(), clock).unwrap();
    assert_eq!(host.failure(), None);
    assert!(host.take_save_request(), "the module asked for a save");
    assert!(!host.take_save_request(), "once");
}

#[test]
fn a_player_list_longer_than_the_buffer_is_refused() {
    // DECLARE_KIND, SPAWN 1, then SET_SEEN_BY 1 claiming 1,000,000 players in 4 bytes.
    let data = concat!(
        r"\01\03\00\00\00dot\00",
        r"\02\01\00\00\00\00\00\00\00\20\41\00\00\20\41",
        r"\14\01\00\00\00\40\42\0f\00\01\00\00\00",
        r"\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00",
    );
    let engine = ModuleEngine::new(Sandbox::default()).unwrap();
    let module = ZoneModule::load(&engine, &answering_create(data)).unwrap();
    let mut kinds = ZoneKinds::new();
    register(&mut kinds, &ModuleKind::new("seen", module));
    let init = ZoneInit {
        zone_id: "seen-2".into(),
        kind: "seen".into(),
        params: zonekeep_core::serde_json::json!({}),
    };
    let err = kinds
        .create(init, ZoneConfig::default(), Arc::new(ManualClock::new()))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("1000000 players run past the end of the buffer"),
        "{err}"
    );
}

/// A native zone whose every tick applies the next of `buffers` with a fresh applier, as a
/// module's answer would be: whatever the bytes, the answer is applied or refused, never a panic.
struct Applies {
    buffers: Vec<Vec<u8>>,
    outcomes: Vec<bool>,
}

impl Zone for Applies {
    type Input = ();
    fn create(
        _: &ZoneInit,
        _: &mut zonekeep_core::Ctx<'_>,
    ) -> Result<Self, zonekeep_core::ZoneError> {
        Ok(Self {
            buffers: Vec::new(),
            outcomes: Vec::new(),
        })
    }
    fn sanitize(&mut self, _: PlayerId, _: &[u8]) -> Result<(), zonekeep_core::InputRefusal> {
        Ok(())
    }
    fn tick(&mut self, ctx: &mut zonekeep_core::Ctx<'_>) {
        let mut applier = zonekeep_wasm::CommandApplier::default();
        for (i, b) in self.buffers.iter().enumerate() {
            let ok = applier.apply(ctx, b, i % 2 == 0).is_ok();
            self.outcomes.push(ok);
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
    #[test]
    fn arbitrary_command_buffers_are_applied_or_refused_never_a_panic(
        buffers in proptest::collection::vec(
            proptest::collection::vec(proptest::prelude::any::<u8>(), 0..96),
            1..6,
        ),
        // A valid prefix makes the later commands reach deeper than the tag check.
        with_kind in proptest::prelude::any::<bool>(),
    ) {
        let clock = Arc::new(ManualClock::new());
        let config = ZoneConfig::default();
        let init = ZoneInit {
            zone_id: "fuzz".into(),
            kind: "applies".into(),
            params: zonekeep_core::serde_json::json!({}),
        };
        let mut host = zonekeep_core::ZoneHost::new::<Applies>(init, config.clone(), clock.clone()).unwrap();
        let mut buffers = buffers;
        if with_kind {
            let mut prefix = b"\x01\x03\x00\x00\x00dot\x00\x02\x01\x00\x00\x00\x00\x00\x00\x00\x20\x41\x00\x00\x20\x41".to_vec();
            prefix.extend_from_slice(&buffers[0]);
            buffers[0] = prefix;
        }
        host.zone_mut::<Applies>().unwrap().buffers = buffers.clone();
        clock.advance(config.dt());
        host.advance(clock.now());
        let outcomes = &host.zone::<Applies>().unwrap().outcomes;
        proptest::prop_assert_eq!(outcomes.len(), buffers.len());
        if with_kind && buffers[0].len() == 24 {
            proptest::prop_assert!(outcomes[0], "the valid prefix alone applies");
        }
    }
}
