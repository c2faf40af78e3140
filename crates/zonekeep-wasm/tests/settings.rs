//! The zone settings a module asks for (its CONFIG answer): every zone of its kind is created
//! with them, settings a host cannot run refuse the module at load, and a zone refuses to take
//! in place a module that would change its tick rate or position step.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use zonekeep_core::{ManualClock, ZoneConfig, ZoneHost, ZoneInit, ZoneKinds};
use zonekeep_wasm::{
    register, LoadError, ModuleEngine, ModuleKind, ModuleSettings, ModuleZone, Sandbox, ZoneModule,
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
            (func (export "zk_abi") (result i32) i32.const 2)
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

#[test]
fn a_zone_refuses_in_place_a_module_that_changes_its_tick_rate_or_position_step() {
    let e = engine();
    let same = ZoneModule::load(&e, &module_asking(&settings_bytes(30, 0, 0.01, 0.0))).unwrap();
    let faster = ZoneModule::load(&e, &module_asking(&settings_bytes(60, 0, 0.0, 0.0))).unwrap();
    let finer = ZoneModule::load(&e, &module_asking(&settings_bytes(0, 0, 0.001, 0.0))).unwrap();
    // A zone running at 30 Hz with the 0.01 step (the defaults).
    let config = ZoneConfig::default();
    assert_eq!(config.tick_hz, 30);
    let clock = Arc::new(ManualClock::new());
    let start = |module: &Arc<ZoneModule>| {
        ZoneHost::create_with(
            init("t-1"),
            config.clone(),
            clock.clone(),
            1,
            |init, ctx| ModuleZone::create(module, init, ctx),
        )
    };
    assert!(start(&same).is_ok());
    let err = start(&faster).unwrap_err().to_string();
    assert!(err.contains("60 Hz") && err.contains("30 Hz"), "{err}");
    let err = start(&finer).unwrap_err().to_string();
    assert!(err.contains("position step"), "{err}");
}
