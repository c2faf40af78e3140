//! State versions of module zones: a save records the state version and the module that wrote
//! it; a module of a higher version restores an older save through its MIGRATE answer, and is
//! refused when it has no migration, when the migration fails, traps, overruns its budget or
//! answers something malformed. The modules are written in the text format
//! (`support/versioned.rs`): their state is their create params.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/versioned.rs"]
mod versioned;

use std::sync::Arc;

use versioned::{versioned, Migration};
use zonekeep_core::{
    ManualClock, RestoreError, Snapshot, ZoneConfig, ZoneError, ZoneHost, ZoneInit, ZoneKinds,
};
use zonekeep_wasm::{register, ModuleEngine, ModuleKind, ModuleZone, Sandbox, ZoneModule};

const PARAMS: &[u8] = br#"{"gold":41}"#;

fn engine(sandbox: Sandbox) -> Arc<ModuleEngine> {
    ModuleEngine::new(sandbox).unwrap()
}

fn init() -> ZoneInit {
    ZoneInit {
        zone_id: "k-1".into(),
        kind: "keep".into(),
        params: zonekeep_core::serde_json::json!({"gold": 41}),
    }
}

fn build(module: &ZoneModule) -> String {
    format!("module sha256:{}", module.digest_hex())
}

/// Kind `keep` on a registry, running `module`.
fn kind_running(module: Arc<ZoneModule>) -> (ZoneKinds, Arc<ModuleKind>) {
    let mut kinds = ZoneKinds::new();
    let kind = ModuleKind::new("keep", module);
    register(&mut kinds, &kind);
    (kinds, kind)
}

/// A zone of `module` created with [`PARAMS`], and its save.
fn save_of(module: &Arc<ZoneModule>) -> Vec<u8> {
    let (kinds, _) = kind_running(module.clone());
    let host = kinds
        .create(init(), ZoneConfig::default(), Arc::new(ManualClock::new()))
        .unwrap();
    host.snapshot().unwrap()
}

/// `envelope` restored through kind `keep` running `module`.
fn restore_in(module: &Arc<ZoneModule>, envelope: &[u8]) -> Result<ZoneHost, RestoreError> {
    let (kinds, _) = kind_running(module.clone());
    kinds.restore(
        init(),
        ZoneConfig::default(),
        Arc::new(ManualClock::new()),
        0,
        envelope,
    )
}

#[test]
fn a_v1_save_is_restored_by_a_v2_module_through_its_migration() {
    let e = engine(Sandbox::default());
    // Version 1 declares no state version (a module written before them).
    let v1 = ZoneModule::load(&e, &versioned(None, Migration::Silent)).unwrap();
    let v2 = ZoneModule::load(
        &e,
        &versioned(
            Some(2),
            Migration::Prefix {
                from: 1,
                prefix: "v2:",
            },
        ),
    )
    .unwrap();
    assert_eq!(v1.settings().state_version, None);
    assert_eq!(v2.settings().state_version, Some(2));

    let saved = save_of(&v1);
    let snap = Snapshot::decode(&saved).unwrap();
    assert_eq!(snap.state_version, 1, "no tenth setting: version 1");
    assert_eq!(
        snap.build,
        build(&v1),
        "the save names the module that wrote it"
    );
    assert_eq!(snap.zone, PARAMS);

    // A deploy of v2 (the same kind, its module replaced) restores the save through v2's
    // migration.
    let (kinds, kind) = kind_running(v1.clone());
    let running = kinds
        .create(init(), ZoneConfig::default(), Arc::new(ManualClock::new()))
        .unwrap();
    kind.replace(v2.clone());
    let upgraded = kinds
        .restore(
            init(),
            // The running zone's config, made for v1, as a deploy passes it.
            running.config().clone(),
            Arc::new(ManualClock::new()),
            0,
            &running.snapshot().unwrap(),
        )
        .unwrap();
    assert_eq!(upgraded.config().state_version, 2);
    assert_eq!(upgraded.build_id(), build(&v2));
    let snap = Snapshot::decode(&upgraded.snapshot().unwrap()).unwrap();
    assert_eq!(snap.state_version, 2);
    assert_eq!(snap.build, build(&v2));
    assert_eq!(snap.zone, [b"v2:".as_slice(), PARAMS].concat());

    // A save of v2's own version is read as it is: MIGRATE is not asked (this v2 traps in it).
    let v2_trapping = ZoneModule::load(&e, &versioned(Some(2), Migration::Trap)).unwrap();
    let again = restore_in(&v2_trapping, &upgraded.snapshot().unwrap()).unwrap();
    let snap = Snapshot::decode(&again.snapshot().unwrap()).unwrap();
    assert_eq!(snap.zone, [b"v2:".as_slice(), PARAMS].concat());
    assert_eq!(snap.build, build(&v2_trapping));
}

#[test]
fn the_module_is_handed_the_version_the_save_was_written_under() {
    let e = engine(Sandbox::default());
    let v1 = ZoneModule::load(&e, &versioned(Some(1), Migration::Silent)).unwrap();
    // Version 3 migrates only from 2: a version-1 save is one it cannot read.
    let v3 = ZoneModule::load(
        &e,
        &versioned(
            Some(3),
            Migration::Prefix {
                from: 2,
                prefix: "v3:",
            },
        ),
    )
    .unwrap();
    match restore_in(&v3, &save_of(&v1)) {
        Err(RestoreError::StateChanged {
            saved: 1,
            current: 3,
            build,
        }) => assert_eq!(build, self::build(&v1)),
        other => panic!("expected StateChanged, got {other:?}"),
    }
    assert_eq!(
        ModuleZone::migrate(&v3, 2, b"old").unwrap(),
        b"v3:old".to_vec()
    );
    assert_eq!(
        ModuleZone::migrate(&v3, 1, b"old"),
        Err(ZoneError::NoMigration(1))
    );
}

#[test]
fn a_v2_module_without_a_migration_is_refused_with_state_changed() {
    let e = engine(Sandbox::default());
    let v1 = ZoneModule::load(&e, &versioned(None, Migration::Silent)).unwrap();
    let saved = save_of(&v1);
    // It answers "no migration", or nothing at all (as a module answers a call it does not
    // know): either way the save is one it cannot read, and the message says what to do.
    for migration in [Migration::None, Migration::Silent] {
        let v2 = ZoneModule::load(&e, &versioned(Some(2), migration)).unwrap();
        let err = restore_in(&v2, &saved).unwrap_err();
        assert_eq!(
            err,
            RestoreError::StateChanged {
                saved: 1,
                current: 2,
                build: build(&v1),
            },
            "{migration:?}"
        );
        let said = err.to_string();
        assert!(
            said.contains(&build(&v1)) && said.contains("deploy a migration"),
            "{said}"
        );
    }
    // A save newer than the module (a rollback to a module of a lower version) is never read.
    let v2 = ZoneModule::load(
        &e,
        &versioned(
            Some(2),
            Migration::Prefix {
                from: 1,
                prefix: "v2:",
            },
        ),
    )
    .unwrap();
    let newer = restore_in(&v2, &saved).unwrap().snapshot().unwrap();
    assert!(matches!(
        restore_in(&v1, &newer),
        Err(RestoreError::StateChanged {
            saved: 2,
            current: 1,
            ..
        })
    ));
}

#[test]
fn a_failing_migration_is_refused_with_its_reason() {
    let e = engine(Sandbox::default());
    let v1 = ZoneModule::load(&e, &versioned(None, Migration::Silent)).unwrap();
    let v2 = ZoneModule::load(
        &e,
        &versioned(Some(2), Migration::Fail("gold cannot be read")),
    )
    .unwrap();
    match restore_in(&v2, &save_of(&v1)) {
        Err(RestoreError::Migration { from, to, reason }) => {
            assert_eq!((from, to), (1, 2));
            assert!(reason.contains("gold cannot be read"), "{reason}");
        }
        other => panic!("expected a failed migration, got {other:?}"),
    }
    // A reason is shown as a log line would be: no line of its own forged.
    let sneaky = ZoneModule::load(&e, &versioned(Some(2), Migration::Fail("a\nERROR b"))).unwrap();
    assert_eq!(
        ModuleZone::migrate(&sneaky, 1, b""),
        Err(ZoneError::Failed("a?ERROR b".into()))
    );
}

#[test]
fn a_module_trapping_or_overrunning_in_migrate_is_refused_naming_it() {
    let e = engine(Sandbox {
        fuel_per_call: 1_000_000,
        ..Sandbox::default()
    });
    let v1 = ZoneModule::load(&e, &versioned(None, Migration::Silent)).unwrap();
    let saved = save_of(&v1);
    for (migration, names) in [
        (Migration::Trap, "unreachable"),
        (Migration::Spin, "CPU budget exceeded"),
    ] {
        let v2 = ZoneModule::load(&e, &versioned(Some(2), migration)).unwrap();
        match restore_in(&v2, &saved) {
            Err(RestoreError::Migration {
                from: 1,
                to: 2,
                reason,
            }) => {
                assert!(reason.contains("MIGRATE call failed"), "{reason}");
                assert!(reason.contains(names), "{migration:?}: {reason}");
            }
            other => panic!("{migration:?}: expected a failed migration, got {other:?}"),
        }
    }
}

#[test]
fn a_malformed_migrate_answer_is_a_failed_migration() {
    let e = engine(Sandbox::default());
    for (raw, names) in [
        (&[7u8][..], "answer 7"),
        (&[0, 0][..], "after answer 0"),
        (&[2, 9, 0, 0, 0, b'x'][..], "the reason runs past the end"),
        (&[2, 1, 0, 0, 0, b'x', 0][..], "after the reason"),
        (&[2, 1, 0, 0, 0, 0xff][..], "not UTF-8"),
    ] {
        let module = ZoneModule::load(&e, &versioned(Some(2), Migration::Raw(raw))).unwrap();
        match ModuleZone::migrate(&module, 1, b"old") {
            Err(ZoneError::Failed(why)) => {
                assert!(why.contains("MIGRATE answer is malformed"), "{why}");
                assert!(why.contains(names), "{raw:?}: {why}");
            }
            other => panic!("{raw:?}: {other:?}"),
        }
    }
    // `u8 1` alone: an empty save is a save.
    let empty = ZoneModule::load(&e, &versioned(Some(2), Migration::Raw(&[1]))).unwrap();
    assert_eq!(ModuleZone::migrate(&empty, 1, b"old"), Ok(Vec::new()));
}

#[test]
fn a_module_declaring_no_state_version_is_never_asked_to_migrate() {
    let e = engine(Sandbox::default());
    // It would trap if asked.
    let old = ZoneModule::load(&e, &versioned(None, Migration::Trap)).unwrap();
    assert_eq!(
        ModuleZone::migrate(&old, 1, b"save"),
        Err(ZoneError::NoMigration(1))
    );
    // A version of 0 is no version either.
    let zero = ZoneModule::load(&e, &versioned(Some(0), Migration::Trap)).unwrap();
    assert_eq!(zero.settings().state_version, None);
    assert_eq!(
        zero.settings().apply(ZoneConfig::default()).state_version,
        1
    );
}
