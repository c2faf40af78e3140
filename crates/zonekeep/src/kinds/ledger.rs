//! `ledger-test`: a small, real zone kind for exercising persistence end to
//! end (the crash and shutdown tests drive it through `zonekeep serve`). A dev
//! kind: registered only with `--dev` or `--dev-kinds`.
//!
//! - Input: 8 bytes, a `u64` LE number `n` the client picks (unique per
//!   principal, so a test can tell facts apart across restarts).
//! - Each input emits one fact of kind `ledger-test.input` with payload
//!   `{"add": {"score": 1}, "seq": n}` for the sending principal: the built-in
//!   ledger adds 1 to that principal's `score`.
//! - Events (JSON payloads):
//!   - topic [`TOPIC_STATE`] to a joining participant:
//!     `{"inputs", "settled", "pending", "tick"}`: the zone's counters, so a
//!     client can check a restore resumed from the last save;
//!   - topic [`TOPIC_SETTLED`] to the fact's principal when it settles:
//!     `{"key", "seq", "ok", "result"}`.
//! - Save: JSON `{"v": 1, "inputs", "settled", "pending": [[key, principal, seq]]}`;
//!   any other `v` refuses to restore (the save is then kept and the admin
//!   API says why).

use std::collections::BTreeMap;

use serde_json::{json, Value};
use zonekeep_core::{
    Ctx, EventTarget, FactOutcome, InputRefusal, JoinRefusal, PlayerId, PlayerInfo, Settlement,
    Zone, ZoneError, ZoneInit,
};

/// Event topic: the zone's counters, sent to each joining participant.
pub const TOPIC_STATE: u16 = 1;
/// Event topic: one of the participant's facts settled.
pub const TOPIC_SETTLED: u16 = 2;
/// The save format version this code reads and writes.
pub const SAVE_VERSION: u64 = 1;

/// The zone: counts inputs and settlements, remembers whose fact is whose.
#[derive(Debug, Default)]
pub struct LedgerZone {
    inputs: u64,
    settled: u64,
    /// Facts in flight: key → (principal, n). Saved, so that a settlement of
    /// a fact re-sent after a restore still reaches its principal.
    pending: BTreeMap<String, (String, u64)>,
}

fn send_json(ctx: &mut Ctx<'_>, to: PlayerId, topic: u16, v: &Value) {
    ctx.emit_event(EventTarget::Player(to), topic, v.to_string().into_bytes());
}

impl Zone for LedgerZone {
    type Input = u64;

    fn create(_init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(LedgerZone::default())
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, player: &PlayerInfo) -> Result<(), JoinRefusal> {
        let state = json!({
            "inputs": self.inputs,
            "settled": self.settled,
            "pending": self.pending.len(),
            "tick": ctx.tick(),
        });
        send_json(ctx, player.id, TOPIC_STATE, &state);
        Ok(())
    }

    fn sanitize(&mut self, _player: PlayerId, payload: &[u8]) -> Result<u64, InputRefusal> {
        let b: [u8; 8] = payload
            .try_into()
            .map_err(|_| InputRefusal::new(1, "expected 8 bytes (u64 LE)"))?;
        Ok(u64::from_le_bytes(b))
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, n: u64) {
        let Some(principal) = ctx.player(player).map(|p| p.principal.as_str().to_owned()) else {
            return;
        };
        self.inputs += 1;
        let payload = json!({"add": {"score": 1}, "seq": n});
        match ctx.emit_fact("ledger-test.input", payload, Some(&principal), None) {
            Ok(key) => {
                self.pending.insert(key.0, (principal, n));
            }
            // Counted by the host (facts_overflowed); the input still counts.
            Err(e) => tracing::warn!(error = %e, "ledger-test: fact not emitted"),
        }
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}

    fn on_fact_settled(&mut self, ctx: &mut Ctx<'_>, settlement: &Settlement) {
        let Some((principal, n)) = self.pending.remove(settlement.key.as_str()) else {
            return; // a repeat answer for a fact already settled
        };
        self.settled += 1;
        let (ok, result) = match &settlement.outcome {
            FactOutcome::Ok(v) => (true, v.clone()),
            FactOutcome::Refused(why) => (false, Value::from(why.as_str())),
        };
        let ev = json!({"key": settlement.key.as_str(), "seq": n, "ok": ok, "result": result});
        let to: Vec<PlayerId> = ctx
            .players()
            .filter(|p| p.principal.as_str() == principal)
            .map(|p| p.id)
            .collect();
        for id in to {
            send_json(ctx, id, TOPIC_SETTLED, &ev);
        }
    }

    fn save(&self) -> Option<Vec<u8>> {
        let pending: Vec<Value> = self
            .pending
            .iter()
            .map(|(k, (p, n))| json!([k, p, n]))
            .collect();
        let v = json!({
            "v": SAVE_VERSION,
            "inputs": self.inputs,
            "settled": self.settled,
            "pending": pending,
        });
        Some(v.to_string().into_bytes())
    }

    fn restore(_init: &ZoneInit, _ctx: &mut Ctx<'_>, bytes: &[u8]) -> Result<Self, ZoneError> {
        let bad = |what: &str| ZoneError::Restore(format!("ledger-test save: {what}"));
        let v: Value = serde_json::from_slice(bytes).map_err(|e| bad(&e.to_string()))?;
        match v.get("v").and_then(Value::as_u64) {
            Some(SAVE_VERSION) => {}
            Some(other) => {
                return Err(bad(&format!(
                    "version {other} is not supported (this build reads {SAVE_VERSION})"
                )))
            }
            None => return Err(bad("no version")),
        }
        let num = |k: &str| {
            v.get(k)
                .and_then(Value::as_u64)
                .ok_or_else(|| bad(&format!("{k} missing")))
        };
        let mut pending = BTreeMap::new();
        for item in v
            .get("pending")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("pending missing"))?
        {
            let (Some(k), Some(p), Some(n)) = (
                item.get(0).and_then(Value::as_str),
                item.get(1).and_then(Value::as_str),
                item.get(2).and_then(Value::as_u64),
            ) else {
                return Err(bad("malformed pending entry"));
            };
            pending.insert(k.to_owned(), (p.to_owned(), n));
        }
        Ok(LedgerZone {
            inputs: num("inputs")?,
            settled: num("settled")?,
            pending,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::Arc;

    use zonekeep_core::{Claims, Clock, ManualClock, Principal, Role, ZoneConfig, ZoneHost};

    use super::*;

    fn init() -> ZoneInit {
        ZoneInit {
            zone_id: "lt".into(),
            kind: "ledger-test".into(),
            params: Value::Null,
        }
    }

    #[test]
    fn one_fact_per_input_and_the_save_round_trips() {
        let clock = ManualClock::new();
        let mut h = ZoneHost::with_boot_epoch::<LedgerZone>(
            init(),
            ZoneConfig::default(),
            Arc::new(clock.clone()),
            3,
        )
        .unwrap();
        let p = h
            .handle_join(Principal::new("ann"), Claims::new(), Role::Player)
            .unwrap();
        assert!(h.handle_input(p, 1, 0, &7u64.to_le_bytes()).is_accepted());
        clock.advance(h.config().dt());
        h.advance(clock.now());
        let facts = h.drain_facts();
        assert_eq!(facts.len(), 1);
        assert_eq!(facts[0].key.as_str(), "lt:3:0");
        assert_eq!(facts[0].payload, json!({"add": {"score": 1}, "seq": 7}));
        assert_eq!(facts[0].principal.as_deref(), Some("ann"));

        let snap = h.snapshot().unwrap();
        let mut r = ZoneHost::restore::<LedgerZone>(
            init(),
            ZoneConfig::default(),
            Arc::new(clock.clone()),
            4,
            &snap,
        )
        .unwrap();
        assert_eq!(r.zone::<LedgerZone>().unwrap().inputs, 1);
        assert_eq!(r.zone::<LedgerZone>().unwrap().pending.len(), 1);
        let resent = r.drain_facts();
        assert_eq!(resent.len(), 1, "in-flight facts are re-sent");
        assert_eq!(resent[0].key.as_str(), "lt:3:0", "under the same key");
        r.handle_settlement(Settlement {
            key: resent[0].key.clone(),
            outcome: FactOutcome::Ok(json!({"score": 1})),
        });
        clock.advance(r.config().dt());
        r.advance(clock.now());
        assert_eq!(r.zone::<LedgerZone>().unwrap().settled, 1);
        assert!(r.zone::<LedgerZone>().unwrap().pending.is_empty());
    }

    #[test]
    fn a_save_of_another_version_is_refused_with_the_reason() {
        let clock = ManualClock::new();
        let h = ZoneHost::new::<LedgerZone>(init(), ZoneConfig::default(), Arc::new(clock.clone()))
            .unwrap();
        let mut snap = zonekeep_core::Snapshot::decode(&h.snapshot().unwrap()).unwrap();
        snap.zone = br#"{"v": 2, "inputs": 1, "settled": 0, "pending": []}"#.to_vec();
        let err = ZoneHost::restore::<LedgerZone>(
            init(),
            ZoneConfig::default(),
            Arc::new(clock),
            1,
            &snap.encode(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("version 2"), "{err}");
    }
}
