//! Host tests: a save's state version, and migrations from older ones.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use crate::{
    Clock, Ctx, InputRefusal, ManualClock, PlayerId, RestoreError, Snapshot, Zone, ZoneConfig,
    ZoneError, ZoneHost, ZoneInit,
};

/// Version 1 of a score keeper: its save is the score as 4 bytes.
struct ScoreV1(u32);

impl Zone for ScoreV1 {
    type Input = ();
    fn create(_init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(ScoreV1(7))
    }
    fn sanitize(&mut self, _p: PlayerId, _payload: &[u8]) -> Result<(), InputRefusal> {
        Ok(())
    }
    fn on_input(&mut self, _ctx: &mut Ctx<'_>, _p: PlayerId, _i: ()) {}
    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
    fn save(&self) -> Option<Vec<u8>> {
        Some(self.0.to_le_bytes().to_vec())
    }
    fn restore(_i: &ZoneInit, _c: &mut Ctx<'_>, b: &[u8]) -> Result<Self, ZoneError> {
        let b: [u8; 4] = b
            .try_into()
            .map_err(|_| ZoneError::Restore("4 bytes".into()))?;
        Ok(ScoreV1(u32::from_le_bytes(b)))
    }
}

/// Version 2 keeps the score as 8 bytes and a level byte; it migrates version 1's saves, and
/// refuses (fails to migrate) a version-1 score of `u32::MAX`, which it treats as corrupt.
struct ScoreV2 {
    score: u64,
    level: u8,
}

impl Zone for ScoreV2 {
    type Input = ();
    fn create(_init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(ScoreV2 { score: 0, level: 1 })
    }
    fn sanitize(&mut self, _p: PlayerId, _payload: &[u8]) -> Result<(), InputRefusal> {
        Ok(())
    }
    fn on_input(&mut self, _ctx: &mut Ctx<'_>, _p: PlayerId, _i: ()) {}
    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
    fn save(&self) -> Option<Vec<u8>> {
        let mut out = self.score.to_le_bytes().to_vec();
        out.push(self.level);
        Some(out)
    }
    fn restore(_i: &ZoneInit, _c: &mut Ctx<'_>, b: &[u8]) -> Result<Self, ZoneError> {
        let (score, level) = b
            .split_at_checked(8)
            .ok_or(ZoneError::Restore("9 bytes".into()))?;
        Ok(ScoreV2 {
            score: u64::from_le_bytes(
                score
                    .try_into()
                    .map_err(|_| ZoneError::Restore("score".into()))?,
            ),
            level: *level.first().ok_or(ZoneError::Restore("level".into()))?,
        })
    }
    fn migrate(from: u32, bytes: &[u8]) -> Result<Vec<u8>, ZoneError> {
        if from != 1 {
            return Err(ZoneError::NoMigration(from));
        }
        let b: [u8; 4] = bytes
            .try_into()
            .map_err(|_| ZoneError::Failed("4 bytes".into()))?;
        let score = u32::from_le_bytes(b);
        if score == u32::MAX {
            return Err(ZoneError::Failed(
                "a version-1 score of u32::MAX is corrupt".into(),
            ));
        }
        let mut out = u64::from(score).to_le_bytes().to_vec();
        out.push(1);
        Ok(out)
    }
}

/// Version 2's layout without a migration (a developer changed the save and forgot one).
struct ScoreV2NoMigration(ScoreV2);

impl Zone for ScoreV2NoMigration {
    type Input = ();
    fn create(i: &ZoneInit, c: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        ScoreV2::create(i, c).map(ScoreV2NoMigration)
    }
    fn sanitize(&mut self, _p: PlayerId, _payload: &[u8]) -> Result<(), InputRefusal> {
        Ok(())
    }
    fn on_input(&mut self, _ctx: &mut Ctx<'_>, _p: PlayerId, _i: ()) {}
    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
    fn save(&self) -> Option<Vec<u8>> {
        self.0.save()
    }
    fn restore(i: &ZoneInit, c: &mut Ctx<'_>, b: &[u8]) -> Result<Self, ZoneError> {
        ScoreV2::restore(i, c, b).map(ScoreV2NoMigration)
    }
}

fn init() -> ZoneInit {
    ZoneInit {
        zone_id: "score-1".into(),
        kind: "score".into(),
        params: serde_json::Value::Null,
    }
}

fn at(state_version: u32) -> ZoneConfig {
    ZoneConfig {
        state_version,
        ..ZoneConfig::default()
    }
}

/// A version-1 save of score `score`, stamped with build `build`.
fn v1_save(score: u32, clock: &ManualClock) -> Vec<u8> {
    let mut h = ZoneHost::new::<ScoreV1>(init(), at(1), Arc::new(clock.clone())).unwrap();
    h.set_build_id("zonekeep 0.1.0 (v1)");
    let bytes = h.snapshot().unwrap();
    let snap = Snapshot::decode(&bytes).unwrap();
    assert_eq!(
        (snap.state_version, snap.build.as_str()),
        (1, "zonekeep 0.1.0 (v1)")
    );
    let mut snap = snap;
    snap.zone = score.to_le_bytes().to_vec();
    snap.encode()
}

#[test]
fn a_save_of_the_kinds_own_version_restores_as_it_is() {
    let clock = ManualClock::new();
    let save = v1_save(41, &clock);
    let h = ZoneHost::restore::<ScoreV1>(init(), at(1), Arc::new(clock.clone()), 2, &save).unwrap();
    assert_eq!(
        h.snapshot().map(|b| Snapshot::decode(&b).unwrap().zone),
        Some(41u32.to_le_bytes().to_vec())
    );
}

#[test]
fn an_older_save_is_migrated_and_then_saved_under_the_new_version() {
    let clock = ManualClock::new();
    let save = v1_save(41, &clock);
    let mut h =
        ZoneHost::restore::<ScoreV2>(init(), at(2), Arc::new(clock.clone()), 2, &save).unwrap();
    h.set_build_id("zonekeep 0.2.0 (v2)");
    let snap = Snapshot::decode(&h.snapshot().unwrap()).unwrap();
    let mut want = 41u64.to_le_bytes().to_vec();
    want.push(1);
    assert_eq!(snap.zone, want, "the score carried over, at level 1");
    assert_eq!(
        (snap.state_version, snap.build.as_str()),
        (2, "zonekeep 0.2.0 (v2)")
    );
}

#[test]
fn a_save_no_migration_reads_is_refused_naming_versions_and_build() {
    let clock = ManualClock::new();
    let save = v1_save(41, &clock);
    let refused =
        ZoneHost::restore::<ScoreV2NoMigration>(init(), at(2), Arc::new(clock.clone()), 2, &save)
            .err()
            .unwrap();
    assert_eq!(
        refused,
        RestoreError::StateChanged {
            saved: 1,
            current: 2,
            build: "zonekeep 0.1.0 (v1)".into()
        }
    );
    assert!(
        refused.to_string().contains("deploy a migration"),
        "{refused}"
    );
    // A newer save than the code (a build rolled back) is never read, migration or not.
    let mut h = ZoneHost::new::<ScoreV2>(init(), at(2), Arc::new(clock.clone())).unwrap();
    h.set_build_id("v2");
    let newer = h.snapshot().unwrap();
    let refused = ZoneHost::restore::<ScoreV1>(init(), at(1), Arc::new(clock.clone()), 2, &newer)
        .err()
        .unwrap();
    assert!(
        matches!(
            refused,
            RestoreError::StateChanged {
                saved: 2,
                current: 1,
                ..
            }
        ),
        "{refused:?}"
    );
}

#[test]
fn a_failing_migration_is_its_own_refusal() {
    let clock = ManualClock::new();
    let save = v1_save(u32::MAX, &clock);
    let refused = ZoneHost::restore::<ScoreV2>(init(), at(2), Arc::new(clock.clone()), 2, &save)
        .err()
        .unwrap();
    match refused {
        RestoreError::Migration { from, to, reason } => {
            assert_eq!((from, to), (1, 2));
            assert!(reason.contains("corrupt"), "{reason}");
        }
        other => panic!("expected a failed migration, got {other:?}"),
    }
    let _ = clock.now();
}
