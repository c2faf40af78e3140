//! The zone settings a module asks for (its CONFIG answer): every zone of its kind is created
//! with them, and settings a host cannot run refuse the module at load, naming the setting.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use zonekeep_core::{ManualClock, ZoneConfig, ZoneInit, ZoneKinds};
use zonekeep_wasm::{
    register, LoadError, ModuleEngine, ModuleKind, ModuleSettings, Sandbox, ZoneModule,
};

/// The seven settings as CONFIG writes them.
fn settings_bytes(tick_hz: u32, max_players: u32, pos_step: f32, view_radius: f32) -> Vec<u8> {
    let mut out = Vec::new();
    for v in [tick_hz, 0, max_players, 0] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for v in [pos_step, view_radius, 0.0] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// A module that answers CONFIG (op 14) with `settings` and every other call with nothing.
fn module_asking(settings: &[u8]) -> Vec<u8> {
    let data: String = settings.iter().map(|b| format!("\\{b:02x}")).collect();
    wat::parse_str(format!(
        r#"(module
            (memory (export "memory") 1)
            (data (i32.const 1024) "{data}")
            (func (export "zk_abi") (result i32) i32.const 5)
            (func (export "zk_alloc") (param i32) (result i32) i32.const 4096)
            (func (export "zk_call") (param $op i32) (param $len i32) (result i64)
                (if (i32.eq (local.get $op) (i32.const 14))
                    (then (return (i64.const {packed}))))
                i64.const 0))"#,
        packed = (1024i64 << 32) | settings.len() as i64,
    ))
    .unwrap()
}

fn init(id: &str) -> ZoneInit {
    ZoneInit {
        zone_id: id.into(),
        kind: "tuned".into(),
        params: zonekeep_core::serde_json::json!({}),
    }
}

fn engine() -> Arc<ModuleEngine> {
    ModuleEngine::new(Sandbox::default()).unwrap()
}

#[test]
fn every_zone_of_the_kind_runs_with_the_settings_the_module_asks_for() {
    let e = engine();
    let module = ZoneModule::load(&e, &module_asking(&settings_bytes(60, 8, 0.05, 40.0))).unwrap();
    assert_eq!(
        *module.settings(),
        ModuleSettings {
            tick_hz: Some(60),
            max_players: Some(8),
            pos_step: Some(0.05),
            view_radius: Some(40.0),
            ..ModuleSettings::default()
        }
    );
    let mut kinds = ZoneKinds::new();
    register(&mut kinds, &ModuleKind::new("tuned", module));
    let host_config = ZoneConfig {
        max_observers: 3,
        ..ZoneConfig::default()
    };
    let zone = kinds
        .create(init("t-1"), host_config, Arc::new(ManualClock::new()))
        .unwrap();
    let config = zone.config();
    assert_eq!(config.tick_hz, 60);
    assert_eq!(config.max_players, 8);
    assert_eq!(config.replication.pos_step, 0.05);
    assert_eq!(config.replication.view_radius, 40.0);
    // What the module leaves alone stays the host's.
    assert_eq!(config.max_observers, 3);
    assert_eq!(config.patch_every, ZoneConfig::default().patch_every);
}

#[test]
fn a_module_asking_for_nothing_keeps_the_hosts_settings() {
    let module = ZoneModule::load(&engine(), &module_asking(&[])).unwrap();
    assert_eq!(*module.settings(), ModuleSettings::default());
    assert_eq!(
        module.settings().apply(ZoneConfig::default()),
        ZoneConfig::default()
    );
}

#[test]
fn settings_a_host_cannot_run_refuse_the_module_at_load() {
    let e = engine();
    let too_fast = ZoneModule::load(&e, &module_asking(&settings_bytes(5000, 0, 0.0, 0.0)));
    match too_fast {
        Err(LoadError::Settings(why)) => assert!(why.contains("5000"), "{why}"),
        other => panic!("expected a settings refusal, got {other:?}"),
    }
    let short = ZoneModule::load(&e, &module_asking(&[30, 0, 0]));
    assert!(matches!(short, Err(LoadError::Settings(_))), "{short:?}");
    let mut long = settings_bytes(30, 0, 0.0, 0.0);
    long.push(0);
    let long = ZoneModule::load(&e, &module_asking(&long));
    assert!(matches!(long, Err(LoadError::Settings(_))), "{long:?}");
}

/// All seven settings, as CONFIG writes them.
fn all_settings(
    tick_hz: u32,
    patch_every: u32,
    pos_step: f32,
    view_radius: f32,
    cell_size: f32,
) -> Vec<u8> {
    let mut out = Vec::new();
    for v in [tick_hz, patch_every, 0, 0] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for v in [pos_step, view_radius, cell_size] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

#[test]
fn absurd_settings_refuse_the_module_at_load_naming_the_setting() {
    let e = engine();
    for (bytes, names) in [
        (all_settings(1000, 1, 0.0, 0.0, 0.0), "tick_hz 1000"),
        (
            all_settings(120, 1, 0.0, 0.0, 0.0),
            "patch_every 1 at 120 Hz",
        ),
        (
            all_settings(0, 0, 0.0, f32::INFINITY, 0.0),
            "view_radius inf",
        ),
        (all_settings(0, 0, 0.0, f32::NAN, 0.0), "view_radius NaN"),
        (
            all_settings(0, 0, 1.0e-30, 0.0, 0.0),
            "pos_step 0.000000000000000000000000000001",
        ),
        (all_settings(0, 0, 0.0, 0.0, 1.0e-30), "cell_size"),
        (all_settings(0, 0, 0.0, 100.0, 0.1), "cell_size 0.1"),
        (all_settings(0, 0, 0.0, -5.0, 0.0), "view_radius -5"),
    ] {
        match ZoneModule::load(&e, &module_asking(&bytes)) {
            Err(LoadError::Settings(why)) => assert!(why.starts_with(names), "{why}"),
            other => panic!("expected a settings refusal naming {names}, got {other:?}"),
        }
    }
    // At the bounds: accepted.
    let fast = all_settings(120, 2, 1.0e-4, 1000.0, 8.0);
    assert!(ZoneModule::load(&e, &module_asking(&fast)).is_ok());
}

#[test]
fn an_eighth_setting_caps_the_zones_entities() {
    let mut bytes = all_settings(0, 0, 0.0, 0.0, 0.0);
    bytes.extend_from_slice(&500u32.to_le_bytes());
    let module = ZoneModule::load(&engine(), &module_asking(&bytes)).unwrap();
    assert_eq!(module.settings().max_entities, Some(500));
    assert_eq!(
        module.settings().apply(ZoneConfig::default()).max_entities,
        500
    );
    // Never past the host's own cap.
    let mut bytes = all_settings(0, 0, 0.0, 0.0, 0.0);
    bytes.extend_from_slice(&u32::MAX.to_le_bytes());
    let greedy = ZoneModule::load(&engine(), &module_asking(&bytes)).unwrap();
    let host = ZoneConfig {
        max_entities: 1000,
        ..ZoneConfig::default()
    };
    assert_eq!(greedy.settings().apply(host).max_entities, 1000);
}

#[test]
fn a_ninth_setting_marks_a_lasting_world_and_anything_but_0_or_1_is_refused() {
    let mut bytes = all_settings(0, 0, 0.0, 0.0, 0.0);
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.push(1);
    let module = ZoneModule::load(&engine(), &module_asking(&bytes)).unwrap();
    assert!(module.settings().lasting);
    let config = module.settings().apply(ZoneConfig::default());
    assert!(config.lasting);
    assert_eq!(
        config.max_entities,
        ZoneConfig::default().max_entities,
        "0: the host's cap"
    );
    // Eight settings: not lasting.
    let mut eight = all_settings(0, 0, 0.0, 0.0, 0.0);
    eight.extend_from_slice(&0u32.to_le_bytes());
    let plain = ZoneModule::load(&engine(), &module_asking(&eight)).unwrap();
    assert!(!plain.settings().apply(ZoneConfig::default()).lasting);
    // A byte that is no flag, or bytes after it that are no contract, refuse the module naming
    // why.
    let mut odd = bytes.clone();
    *odd.last_mut().unwrap() = 2;
    let err = ZoneModule::load(&engine(), &module_asking(&odd)).unwrap_err();
    assert!(err.to_string().contains("lasting 2"), "{err}");
    // A byte after the ninth is a tenth setting cut short.
    let mut long = bytes;
    long.push(0);
    let err = ZoneModule::load(&engine(), &module_asking(&long)).unwrap_err();
    assert!(
        err.to_string().contains("state_version runs past the end"),
        "{err}"
    );
}

#[test]
fn a_tenth_setting_names_the_state_version_and_a_malformed_one_is_refused() {
    let nine = |lasting: u8| {
        let mut bytes = all_settings(0, 0, 0.0, 0.0, 0.0);
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.push(lasting);
        bytes
    };
    let with_version = |lasting: u8, version: u32| {
        let mut bytes = nine(lasting);
        bytes.extend_from_slice(&version.to_le_bytes());
        bytes
    };
    let module = ZoneModule::load(&engine(), &module_asking(&with_version(0, 3))).unwrap();
    assert_eq!(module.settings().state_version, Some(3));
    assert!(!module.settings().lasting);
    let config = module.settings().apply(ZoneConfig::default());
    assert_eq!(config.state_version, 3);
    assert!(!config.lasting);
    // With a lasting world, and at the bound.
    let top = ZoneModule::load(&engine(), &module_asking(&with_version(1, u32::MAX))).unwrap();
    assert_eq!(top.settings().state_version, Some(u32::MAX));
    assert!(top.settings().lasting);
    // 0, or no tenth setting: version 1, whatever the config given says (a deploy passes the
    // running zone's, made for the module being replaced).
    let running_v3 = ZoneConfig {
        state_version: 3,
        ..ZoneConfig::default()
    };
    for bytes in [
        with_version(0, 0),
        nine(0),
        all_settings(0, 0, 0.0, 0.0, 0.0),
        Vec::new(),
    ] {
        let module = ZoneModule::load(&engine(), &module_asking(&bytes)).unwrap();
        assert_eq!(module.settings().state_version, None, "{bytes:?}");
        assert_eq!(
            module.settings().apply(running_v3.clone()).state_version,
            1,
            "{bytes:?}"
        );
    }
    // Cut short, or with bytes after it: refused, naming why.
    for cut in 1..4 {
        let mut short = nine(0);
        short.extend_from_slice(&[1; 3][..cut]);
        let err = ZoneModule::load(&engine(), &module_asking(&short)).unwrap_err();
        assert!(
            matches!(&err, LoadError::Settings(why) if why.contains("state_version runs past the end")),
            "{err}"
        );
    }
    // A byte after the tenth is the eleventh setting (characters), below.
    let mut eleven = with_version(0, 2);
    eleven.push(0);
    let module = ZoneModule::load(&engine(), &module_asking(&eleven)).unwrap();
    assert_eq!(module.settings().state_version, Some(2));
}

#[test]
fn an_eleventh_setting_keeps_characters_and_anything_but_0_or_1_is_refused() {
    let eleven = |characters: u8| {
        let mut bytes = all_settings(0, 0, 0.0, 0.0, 0.0);
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.push(0);
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.push(characters);
        bytes
    };
    let module = ZoneModule::load(&engine(), &module_asking(&eleven(1))).unwrap();
    assert!(module.settings().characters);
    assert_eq!(module.settings().state_version, None, "0: version 1");
    let config = module.settings().apply(ZoneConfig::default());
    assert!(config.characters);
    assert_eq!(config.state_version, 1);
    // And every zone of the kind is made with it.
    let mut kinds = ZoneKinds::new();
    register(&mut kinds, &ModuleKind::new("tuned", module));
    let zone = kinds
        .create(
            init("t-2"),
            ZoneConfig::default(),
            Arc::new(ManualClock::new()),
        )
        .unwrap();
    assert!(zone.config().characters);
    // 0, or fewer settings: no characters, whatever the config given says (the module's code
    // reads characters or it does not).
    let with_characters = ZoneConfig {
        characters: true,
        ..ZoneConfig::default()
    };
    for bytes in [
        eleven(0),
        eleven(0)[..eleven(0).len() - 1].to_vec(),
        Vec::new(),
    ] {
        let module = ZoneModule::load(&engine(), &module_asking(&bytes)).unwrap();
        assert!(!module.settings().characters, "{bytes:?}");
        assert!(
            !module.settings().apply(with_characters.clone()).characters,
            "{bytes:?}"
        );
    }
    // A byte that is no flag, or bytes after it that are no contract, refuse the module naming
    // why.
    let err = ZoneModule::load(&engine(), &module_asking(&eleven(2))).unwrap_err();
    assert!(err.to_string().contains("characters 2: 0 or 1"), "{err}");
    let mut long = eleven(1);
    long.push(0);
    let err = ZoneModule::load(&engine(), &module_asking(&long)).unwrap_err();
    assert!(
        err.to_string().contains("contract runs past the end"),
        "{err}"
    );
}

/// Eleven settings (none asked for), then `bytes contract`.
fn with_contract(contract: &[u8]) -> Vec<u8> {
    let mut bytes = all_settings(0, 0, 0.0, 0.0, 0.0);
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.push(0);
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.push(0);
    bytes.extend_from_slice(&(contract.len() as u32).to_le_bytes());
    bytes.extend_from_slice(contract);
    bytes
}

#[test]
fn a_contract_after_the_settings_is_the_kinds_and_its_zones() {
    use zonekeep_protocol::contract::{Contract, EventDef, InputDef, ValueType};
    let contract = Contract::new()
        .constant("MAX_SPEED", 9, "")
        .input(InputDef::new("move", "").value("dx", ValueType::I8, ""))
        .event(EventDef::new("scored", 4, "").value("points", ValueType::U32, ""));
    let module = ZoneModule::load(
        &engine(),
        &module_asking(&with_contract(&contract.encode())),
    )
    .unwrap();
    assert_eq!(module.contract(), &contract);
    let mut kinds = ZoneKinds::new();
    register(&mut kinds, &ModuleKind::new("tuned", module));
    let zone = kinds
        .create(
            init("t-3"),
            ZoneConfig::default(),
            Arc::new(ManualClock::new()),
        )
        .unwrap();
    assert_eq!(zone.contract(), contract);
    // Fewer settings: no contract.
    let module = ZoneModule::load(
        &engine(),
        &module_asking(&all_settings(0, 0, 0.0, 0.0, 0.0)),
    )
    .unwrap();
    assert!(module.contract().is_empty());
}

#[test]
fn a_hostile_contract_refuses_the_module_at_load_saying_why() {
    use zonekeep_protocol::contract::{Contract, EventDef};
    let shared_topic = Contract::new()
        .event(EventDef::new("a", 1, ""))
        .event(EventDef::new("b", 1, ""))
        .encode();
    let mut huge_count = vec![1u8];
    huge_count.extend_from_slice(&u32::MAX.to_le_bytes());
    let mut trailing = Contract::new().encode();
    trailing.push(7);
    for (bytes, why) in [
        (shared_topic, "topic 1 is declared by two events"),
        (huge_count, "constants exceeds its limit of 256"),
        (trailing, "bytes left after the last event"),
        (vec![2], "unknown format byte"),
        (Vec::new(), "the bytes end early"),
    ] {
        let err = ZoneModule::load(&engine(), &module_asking(&with_contract(&bytes))).unwrap_err();
        assert!(
            matches!(&err, LoadError::Contract(_)) && err.to_string().contains(why),
            "{why}: {err}"
        );
    }
    // A contract length past the answer's end is a malformed answer.
    let mut cut = with_contract(&Contract::new().encode());
    cut.pop();
    let err = ZoneModule::load(&engine(), &module_asking(&cut)).unwrap_err();
    assert!(matches!(err, LoadError::Settings(_)), "{err}");
}
