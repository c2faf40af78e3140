//! State versions and MIGRATE: an older save turned into the zone's version (keeping the SDK's
//! header), no migration or a failure with its reason, and the version CONFIG carries.

use super::Probe;
use crate::testing::{input, TestHost};
use crate::{Ctx, Op, Reader, Writer, Zone, SAVE_FORMAT, SAVE_HEADER_LEN};

/// Version 2 of a counter: version 1 saved a `u32`; version 2 saves a `u64` then a flag byte.
/// It migrates version 1, refuses (fails) a version-1 count of `u32::MAX` as corrupt, and has
/// no migration from anything else.
struct CounterV2 {
    n: u64,
    flag: u8,
}

impl Zone for CounterV2 {
    type Input = Vec<u8>;

    fn settings() -> crate::Settings {
        crate::Settings::new().state_version(2)
    }

    fn create(_ctx: &mut Ctx<'_>, _params: &str) -> Result<Self, String> {
        Ok(Self { n: 0, flag: 0 })
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}

    fn save(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u64(self.n).u8(self.flag);
        w.into_vec()
    }

    fn restore(_ctx: &mut Ctx<'_>, _params: &str, bytes: &[u8]) -> Result<Self, String> {
        let mut r = Reader::new(bytes);
        let n = r.u64().map_err(|e| e.to_string())?;
        let flag = r.u8().map_err(|e| e.to_string())?;
        r.finish().map_err(|e| e.to_string())?;
        Ok(Self { n, flag })
    }

    fn migrate(from: u32, save: &[u8]) -> Result<Vec<u8>, crate::MigrateError> {
        if from != 1 {
            return Err(crate::MigrateError::NoMigration);
        }
        let mut r = Reader::new(save);
        let n = r.u32()?;
        r.finish()?;
        if n == u32::MAX {
            return Err(crate::MigrateError::Failed(
                "a version-1 count of u32::MAX is corrupt".into(),
            ));
        }
        let mut w = Writer::new();
        w.u64(u64::from(n)).u8(1);
        Ok(w.into_vec())
    }
}

/// A version-1 save as the SDK writes it: its header (RNG `rng`, `facts` keys made), then the
/// count as a `u32`.
fn v1_save(rng: [u64; 4], facts: u64, n: u32) -> Vec<u8> {
    let mut w = Writer::new();
    w.u8(SAVE_FORMAT);
    for word in rng {
        w.u64(word);
    }
    w.u64(facts).u32(n);
    w.into_vec()
}

#[test]
fn migrate_turns_an_older_save_into_the_zones_version_and_keeps_the_sdk_header() {
    let save = v1_save([1, 2, 3, 4], 9, 41);
    let mut host = TestHost::<CounterV2>::new(50_000);
    let migrated = host.migrate(1, &save).unwrap().unwrap();
    assert_eq!(
        &migrated[..SAVE_HEADER_LEN],
        &save[..SAVE_HEADER_LEN],
        "the RNG and the count of fact keys are kept"
    );
    assert_eq!(&migrated[SAVE_HEADER_LEN..], &[41, 0, 0, 0, 0, 0, 0, 0, 1]);
    assert!(host.zone().is_none(), "MIGRATE builds no zone");
    host.restore(0, "c-1", "{}", &migrated).unwrap();
    assert_eq!(host.zone().unwrap().n, 41);
    assert_eq!(host.zone().unwrap().flag, 1);
    assert_eq!(host.guest().rng_state(), [1, 2, 3, 4]);
    // Asked of a running zone's instance too, it leaves the zone alone.
    assert!(host.migrate(1, &save).unwrap().is_ok());
    assert_eq!(host.zone().unwrap().n, 41);
}

#[test]
fn migrate_answers_no_migration_or_a_failure_with_its_reason() {
    let mut host = TestHost::<CounterV2>::new(50_000);
    let save = v1_save([0; 4], 0, 1);
    // No migration from version 3: the single byte 0.
    let out = host
        .call_raw(Op::Migrate.number(), &input::migrate(3, &save))
        .unwrap();
    assert_eq!(out, [zonekeep_abi::migration::NONE]);
    assert_eq!(
        host.migrate(3, &save).unwrap(),
        Err(crate::MigrateError::NoMigration)
    );
    // A failure says why.
    let corrupt = v1_save([0; 4], 0, u32::MAX);
    let out = host
        .call_raw(Op::Migrate.number(), &input::migrate(1, &corrupt))
        .unwrap();
    let mut r = Reader::new(&out);
    assert_eq!(r.u8(), Ok(zonekeep_abi::migration::FAILED));
    assert_eq!(r.str(), Ok("a version-1 count of u32::MAX is corrupt"));
    assert_eq!(r.finish(), Ok(()));
    // An old save that does not decode fails through `?`, naming the decoding error.
    let mut short = v1_save([0; 4], 0, 1);
    short.pop();
    match host.migrate(1, &short).unwrap() {
        Err(crate::MigrateError::Failed(why)) => {
            assert!(why.contains("does not decode"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    // A save without the SDK's header is a failed migration, not a trap.
    match host.migrate(1, &[9, 9]).unwrap() {
        Err(crate::MigrateError::Failed(why)) => assert!(why.starts_with("bad save"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_zone_without_a_migration_answers_no_migration() {
    // Probe implements no `migrate`: the default.
    let mut host = TestHost::<Probe>::new(50_000);
    assert_eq!(
        host.migrate(1, &v1_save([0; 4], 0, 3)).unwrap(),
        Err(crate::MigrateError::NoMigration)
    );
    assert_eq!(
        crate::MigrateError::NoMigration.to_string(),
        "no migration from that state version"
    );
}

#[test]
fn config_carries_the_state_version_as_its_tenth_setting() {
    let mut host = TestHost::<CounterV2>::new(1000);
    assert_eq!(host.settings().unwrap().state_version, 2);
    let encoded = |s: crate::Settings| {
        let mut w = Writer::new();
        s.encode(&mut w);
        w.into_vec()
    };
    // Seven, then `max_entities` 0 and `lasting` 0, then the version.
    let bytes = encoded(crate::Settings::new().state_version(2));
    assert_eq!(bytes.len(), 7 * 4 + 4 + 1 + 4);
    assert_eq!(bytes[7 * 4 + 4], 0, "not lasting");
    assert_eq!(&bytes[bytes.len() - 4..], &2u32.to_le_bytes());
    let lasting = encoded(crate::Settings::new().lasting().state_version(3));
    assert_eq!(lasting[7 * 4 + 4], 1);
    assert_eq!(&lasting[lasting.len() - 4..], &3u32.to_le_bytes());
    // No version: nothing after the nine (or the seven) settings, as before.
    assert_eq!(encoded(crate::Settings::new()).len(), 7 * 4);
    assert_eq!(
        encoded(crate::Settings::new().lasting()).len(),
        7 * 4 + 4 + 1
    );
}
